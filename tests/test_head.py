"""The EAGLE-3 head draft against the spec, as the independent draft is tested: a naive loop written from the format
(no cache, full recompute), batches, resumes, the emitted token's distribution, lossless greedy, the published
format both ways, and the refusals.

A head's q at a position depends on its step within its block (the first reads the target's features, the others
its own outputs), so its text depends on the block lengths: the reference loop takes gamma, and the runs are
compared at a fixed gamma."""
import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from cascade_core import generate, generate_batch, target_distribution
from cascade_core.decoding.run_settings import TARGET_ALONE
from cascade_core.formats.eagle3_head import load_head, new_head, read_config, save_head
from cascade_core.formats.pair import make_pair
from cascade_core.method.sampling import position_uniforms
from cascade_core.reference import inverse_cdf, softmaxes, verified_token
from test_distribution import chi_square_p_value

from rule_alphas import ALPHA as EVERY_ALPHA
ALPHA = {rule: a for rule, a in EVERY_ALPHA.items() if rule != "draft"}  # a head drafts; draft-only is its own test
N = 24
AUX = (0, 1, 1)  # the tiny target has two layers: the streams entering layers 0, 1 and 1


@pytest.fixture(scope="module")
def head_folder(tiny64, tmp_path_factory):
    """A random head over two thirds of the tiny vocabulary (end-of-text and every third id left out), saved in the
    published format (float16 on disk, as shipped)."""
    eos = max(tiny64.eos_token_ids)
    vocab = [v for v in range(tiny64.vocab_size) if v % 3 and v != eos]
    head = new_head(tiny64.target, vocab, aux_layers=AUX, seed=3)
    with torch.no_grad():  # a random layer big enough to matter beside the residual
        for p in head.midlayer.parameters():
            p.mul_(4.0) if p.dim() > 1 else None
    folder = tmp_path_factory.mktemp("head")
    save_head(head, folder, {"made": "test"})
    return folder


@pytest.fixture(scope="module")
def head_pair(tiny64, head_folder):
    return make_pair("tiny+head", tiny64.target, load_head(head_folder, tiny64.target), tiny64.tokenizer)


@pytest.fixture(scope="module")
def prompt_ids(tiny64):
    return tiny64.tokenizer("The cascade", add_special_tokens=False)["input_ids"]


# --- a reference written from the format ----------------------------------------------------------------------

def rms(x, w, eps):
    return w * (x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps))


def rope(x, positions, theta):
    """Llama's rotary embedding on [heads, n, d] at the given positions (rotate-half form)."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, d, 2) / d)
    angles = np.concatenate([positions[:, None] * inv[None]] * 2, -1)
    rotated = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * np.cos(angles) + rotated * np.sin(angles)


class ReferenceHead:
    """The format's forward over a whole sequence of pairs, from the file's tensors and numpy only."""

    def __init__(self, folder, embedding):
        self.config = json.loads((folder / "config.json").read_text())
        with safe_open(folder / "model.safetensors", "np") as f:
            self.w = {k: f.get_tensor(k).astype(np.float64) for k in f.keys()}
        self.embedding = embedding.detach().double().numpy()

    def hidden(self, g, tokens):
        """h for pairs (g_i, token_i), each attending causally to every earlier pair."""
        c, w = self.config, self.w
        eps, heads, kv = c["rms_norm_eps"], c["num_attention_heads"], c["num_key_value_heads"]
        d = c["head_dim"]
        theta = (c.get("rope_parameters") or {}).get("rope_theta", c.get("rope_theta", 10000.0))
        x = np.concatenate([rms(self.embedding[tokens], w["midlayer.input_layernorm.weight"], eps),
                            rms(g, w["midlayer.hidden_norm.weight"], eps)], -1)
        n, pos = len(tokens), np.arange(len(tokens), dtype=np.float64)
        q = (x @ w["midlayer.self_attn.q_proj.weight"].T).reshape(n, heads, d).transpose(1, 0, 2)
        k = (x @ w["midlayer.self_attn.k_proj.weight"].T).reshape(n, kv, d).transpose(1, 0, 2)
        v = (x @ w["midlayer.self_attn.v_proj.weight"].T).reshape(n, kv, d).transpose(1, 0, 2)
        q, k = rope(q, pos, theta), rope(k, pos, theta)
        k, v = np.repeat(k, heads // kv, 0), np.repeat(v, heads // kv, 0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d) + np.triu(np.full((n, n), -np.inf), 1)
        attn = np.exp(scores - scores.max(-1, keepdims=True))
        attn /= attn.sum(-1, keepdims=True)
        out = (attn @ v).transpose(1, 0, 2).reshape(n, heads * d) @ w["midlayer.self_attn.o_proj.weight"].T
        h = g + out
        m = rms(h, w["midlayer.post_attention_layernorm.weight"], eps)
        gate, up = m @ w["midlayer.mlp.gate_proj.weight"].T, m @ w["midlayer.mlp.up_proj.weight"].T
        return h + ((gate / (1 + np.exp(-gate))) * up) @ w["midlayer.mlp.down_proj.weight"].T

    def logits(self, h, vocab_size):
        """Over the whole vocabulary: the draft vocabulary's at target ids (id + d2t), -inf elsewhere."""
        w = self.w
        draft = rms(h, w["norm.weight"], self.config["rms_norm_eps"]) @ w["lm_head.weight"].T
        full = np.full(vocab_size, -np.inf)
        full[np.arange(len(w["d2t"])) + w["d2t"].astype(np.int64)] = draft
        return full


def streams(target, sequence, layers):
    with torch.no_grad():
        out = target(torch.tensor([sequence]), output_hidden_states=True)
    return torch.cat([out.hidden_states[i] for i in layers], -1)[0].double().numpy(), out.logits[0].double()


def block_qs(ref, target, sequence, drafted, vocab):
    """q logits for a block starting after ``sequence``: the first from the target's true features, the next ones
    each from the head's own previous output (a chain of pairs appended to the true ones)."""
    feats, _ = streams(target, sequence[:-1], AUX) if len(sequence) > 1 else (np.zeros((0, 3 * 64)), None)
    g = feats @ ref.w["fc.weight"].T if len(feats) else np.zeros((0, ref.w["fc.weight"].shape[0]))
    tokens = list(sequence[1:])
    if not len(g):  # nothing read yet: g = 0
        g = np.zeros((1, ref.w["fc.weight"].shape[0]))
        tokens = [sequence[-1]]
    hs = ref.hidden(g, tokens)
    out = [ref.logits(hs[-1], vocab)]
    for x in drafted:
        g = np.concatenate([g, hs[-1:]])
        tokens = tokens + [x]
        hs = ref.hidden(g, tokens)
        out.append(ref.logits(hs[-1], vocab))
    return out


def reference_head_generate(pair, ref, prompt_ids, rule, alpha, temperature, seed, max_new_tokens, gamma):
    """Blocks of gamma + 1 positions; each position verified as the spec says, with q from the block's chain.
    ``gamma``: a number, or one per block (a list), TARGET_ALONE for a block that is the target's own token."""
    seq, out, V, greedy = list(prompt_ids), [], pair.vocab_size, temperature == 0
    schedule = iter(gamma) if isinstance(gamma, list) else None
    while len(out) < max_new_tokens:
        g = next(schedule) if schedule is not None else gamma
        alone = rule == "target" or g == TARGET_ALONE
        n = 1 if alone else min(g + 1, max_new_tokens - len(out))
        drafted, qs = [], []
        for j in range(n):  # the draft proposes the block
            q_logits = torch.tensor(block_qs(ref, pair.target, seq, drafted, V)[-1])
            qs.append(softmaxes(q_logits, temperature))
            u = position_uniforms(seed, [len(out) + j])[0].numpy()
            drafted.append(inverse_cdf(qs[-1][1], u[0]))
        for j in range(n):  # the target verifies it in order
            _, p_logits = streams(pair.target, seq, AUX)
            ps, p = softmaxes(p_logits[-1, :V], temperature)
            (qs_j, q), x = qs[j], drafted[j]
            u = position_uniforms(seed, [len(out)])[0].numpy()
            token = (inverse_cdf(p, u[0]) if alone else
                     verified_token(rule, x, (qs_j, q), (ps, p), alpha, greedy, u))
            out.append(token)
            seq.append(token)
            if token in pair.eos_token_ids:
                return out
            if alone or token != x:
                break  # a baseline takes one position a block; a replaced token ends the block
    return out


@pytest.fixture(scope="module")
def reference_head(head_folder, tiny64):
    return ReferenceHead(head_folder, tiny64.target.get_input_embeddings().weight)


def test_loader_matches_the_format(head_pair, reference_head, prompt_ids):
    """The loaded head's first q of a block (and a chained one) against the numpy forward written from the
    format; the float16 file's weights are what both read."""
    from cascade_core.decoding.batch_block import Batch
    from cascade_core.decoding.row import start_row
    from cascade_core.decoding.run_settings import RunSettings

    row = start_row(head_pair, RunSettings(rule="v3", alpha=0.3, gamma=2, seed=1, max_new_tokens=4),
                    prompt_ids=prompt_ids)
    batch = Batch(head_pair, [row])
    with torch.inference_mode():
        batch.prefill()
        first = batch.draft.step([[row.last]])[0][0]
        second = batch.draft.step([[5]])[0][0]
    expected = block_qs(reference_head, head_pair.target, prompt_ids, [5], head_pair.vocab_size)
    columns = head_pair.draft.token_ids  # the head's logits cover its own vocabulary, column k at target id columns[k]
    for got, want in zip((first, second), expected):
        want = torch.tensor(want)
        assert got.shape[-1] == len(columns) and torch.equal(torch.isfinite(want).nonzero().squeeze(-1), columns)
        assert torch.allclose(got, want[columns], atol=1e-5, rtol=0)  # RoPE angles: float32 in transformers


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("rule", list(ALPHA))
def test_head_engine_equals_reference(head_pair, reference_head, prompt_ids, rule, temperature):
    for gamma in (1, 4):
        expected = reference_head_generate(head_pair, reference_head, prompt_ids, rule, ALPHA[rule], temperature,
                                           7, N, gamma)
        trace = generate(head_pair, prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=gamma,
                         temperature=temperature, seed=7, max_new_tokens=N)
        assert trace.tokens == expected, f"{rule} T={temperature} gamma={gamma}"
        if rule != "target":
            assert {pos["proposal"] for pos in trace.positions} <= set(head_pair.draft.token_ids.tolist())


def test_head_runs_are_not_vacuous(head_pair, prompt_ids):
    """The head is neither always right nor always wrong here, and its blocks do matter (gamma changes a text)."""
    runs = {g: generate(head_pair, prompt_ids=prompt_ids, rule="chow", alpha=0.5, gamma=g, temperature=1.0, seed=7,
                        max_new_tokens=N) for g in (1, 4)}
    assert {"accepted", "replaced"} <= set(runs[4].sources)
    assert 0.05 < runs[4].stats["acceptance_rate"] < 0.95
    assert runs[1].tokens != runs[4].tokens


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_lossless_greedy_with_a_head_is_target_greedy(head_pair, tiny64, prompt_ids, gamma):
    target = generate(head_pair, prompt_ids=prompt_ids, rule="target", temperature=0.0, max_new_tokens=N)
    lossless = generate(head_pair, prompt_ids=prompt_ids, rule="lossless", alpha=0.0, gamma=gamma, temperature=0.0,
                        max_new_tokens=N)
    assert lossless.tokens == target.tokens


def test_batched_head_rows_equal_solo_runs(head_pair, prompt_ids, tiny64):
    rows = [dict(prompt_ids=prompt_ids, rule="v3", alpha=0.6, seed=1, max_new_tokens=N),
            dict(prompt_ids=prompt_ids[:2], rule="lossless", alpha=0.0, seed=2, max_new_tokens=N - 7),
            dict(prompt_ids=prompt_ids, rule="target", seed=3, max_new_tokens=12),
            dict(prompt_ids=tiny64.tokenizer("Hi", add_special_tokens=False)["input_ids"], rule="chow", alpha=0.5,
                 seed=4, max_new_tokens=N, temperature=0.7)]
    batched = generate_batch(head_pair, rows, gamma=3)
    for row, trace in zip(rows, batched):
        solo = generate(head_pair, gamma=3, **row)
        assert (trace.tokens, trace.sources) == (solo.tokens, solo.sources)
        assert trace.counters["target_calls"] == solo.counters["target_calls"]
        assert trace.counters["draft_calls"] == solo.counters["draft_calls"]


def test_a_one_token_prompt_starts_from_zero_features(head_pair):
    """Nothing read yet: the first proposal reads g = 0; the run is still exact (lossless greedy is target greedy)."""
    target = generate(head_pair, prompt_ids=[5], rule="target", temperature=0.0, max_new_tokens=12)
    assert generate(head_pair, prompt_ids=[5], rule="lossless", temperature=0.0, gamma=3,
                    max_new_tokens=12).tokens == target.tokens


@pytest.mark.parametrize("rule, alpha, new_alpha", [("chow", 0.5, 0.6), ("lossy", 0.8, 0.9)])
def test_resumed_head_run_equals_fresh_run(head_pair, prompt_ids, rule, alpha, new_alpha):
    """A head run resumes at the start of the block holding the first changed position: a fresh run's tokens."""
    n = 40
    old = generate(head_pair, prompt_ids=prompt_ids, rule=rule, alpha=alpha, gamma=3, seed=5, max_new_tokens=n)
    fresh = generate(head_pair, prompt_ids=prompt_ids, rule=rule, alpha=new_alpha, gamma=3, seed=5, max_new_tokens=n)
    k = next((i for i, (a, b) in enumerate(zip(old.tokens, fresh.tokens)) if a != b), len(fresh.tokens))
    assert 3 < k < len(fresh.tokens), "the test needs a change inside the text, after a block"
    resumed = generate(head_pair, rule=rule, alpha=new_alpha, gamma=3, seed=5, max_new_tokens=n, resume=(old, k))
    assert resumed.tokens == fresh.tokens


def test_emitted_token_follows_pi_with_a_head(head_pair, reference_head, tiny64):
    """Many seeds of the first position: the emitted token follows pi = rule(q, p), with the head's q zero outside
    its vocabulary (the residual emits those tokens; this prompt's pi has 0.18 of its mass there)."""
    n, rule, alpha = 3000, "v3", 0.6
    prompt_ids = tiny64.tokenizer("abc", add_special_tokens=False)["input_ids"]
    q = torch.softmax(torch.tensor(block_qs(reference_head, head_pair.target, prompt_ids, [], head_pair.vocab_size)[0]),
                      -1)
    _, p_logits = streams(head_pair.target, prompt_ids, AUX)
    p = torch.softmax(p_logits[-1, : head_pair.vocab_size], -1)
    pi = target_distribution(rule, q, p, alpha)
    assert float(pi[q == 0].sum()) > 0.05, "no mass outside the head's vocabulary: the test would not see it"
    counts = torch.zeros(len(q), dtype=torch.float64)
    for start in range(0, n, 32):
        rows = [dict(prompt_ids=prompt_ids, rule=rule, alpha=alpha, seed=s, max_new_tokens=1, details=False)
                for s in range(start, min(n, start + 32))]
        for trace in generate_batch(head_pair, rows, gamma=1):
            counts[trace.tokens[0]] += 1
    assert chi_square_p_value(counts, pi, n) > 1e-3
    assert chi_square_p_value(counts, q, n) < 1e-6  # power: far from q


def test_save_load_round_trip(head_pair, tmp_path, tiny64):
    head = head_pair.draft
    save_head(head, tmp_path)
    again = load_head(tmp_path, tiny64.target)
    assert read_config(tmp_path)["architectures"] == ["LlamaForCausalLMEagle3"]
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        names = set(f.keys())
    assert names == {"fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"} | {
        f"midlayer.{n}" for n in ("input_layernorm.weight", "hidden_norm.weight", "post_attention_layernorm.weight",
                                  "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                  "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                  "mlp.down_proj.weight")}
    for (name, a), (_, b) in zip(head.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    assert again.aux_layers == AUX and again.embed_tokens is tiny64.target.get_input_embeddings()


def test_published_prefixes_and_defaults_load(head_pair, head_folder, tmp_path, tiny64):
    """Names under model.layers.0. / model. (SpecForge's), no d2t (a whole-vocabulary head), pytorch_model.bin."""
    with safe_open(head_folder / "model.safetensors", "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    renamed = {("model.layers.0." + k[len("midlayer."):]) if k.startswith("midlayer.") else
               ("model." + k if k in ("fc.weight", "norm.weight") else k): v for k, v in tensors.items()}
    config = json.loads((head_folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config))
    torch.save(renamed, tmp_path / "pytorch_model.bin")
    loaded = load_head(tmp_path, tiny64.target)
    for name, value in head_pair.draft.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    whole = dict(tensors)
    whole.pop("d2t"), whole.pop("t2d")
    whole["lm_head.weight"] = torch.zeros(tiny64.vocab_size, tensors["lm_head.weight"].shape[1], dtype=torch.float16)
    (tmp_path / "pytorch_model.bin").unlink()
    save_file(whole, tmp_path / "model.safetensors")
    assert torch.equal(load_head(tmp_path, tiny64.target).token_ids, torch.arange(tiny64.vocab_size))


def test_a_head_refuses_what_needs_the_draft_alone(head_pair, prompt_ids):
    with pytest.raises(ValueError, match="rule 'draft'.*reads the target's hidden states"):
        generate(head_pair, prompt_ids=prompt_ids, rule="draft")
    with pytest.raises(ValueError, match="sequential=True.*hidden states"):
        generate(head_pair, prompt_ids=prompt_ids, rule="chow", alpha=0.5, sequential=True)


def test_incomplete_head_is_refused_in_one_line(head_folder, tmp_path, tiny64):
    with safe_open(head_folder / "model.safetensors", "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys() if k != "fc.weight"}
    (tmp_path / "config.json").write_text((head_folder / "config.json").read_text())
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="not a complete EAGLE-3 head: missing fc.weight"):
        load_head(tmp_path, tiny64.target)


def test_bundled_pair_refuses_an_unknown_draft_kind():
    from cascade_core import load_pair

    with pytest.raises(ValueError, match="draft 'heads' is not one of the bundled pair's drafts"):
        load_pair("bundled", draft="heads")


def test_training_time_test_is_what_the_engine_drafts(head_pair, prompt_ids):
    """distill's unrolled steps at base t are the engine's block drafted after t with the true tokens: step 1 reads
    the target's features (the block's first proposal), step j the head's own output, under the training mask."""
    from cascade_core.decoding.batch_block import Batch
    from cascade_core.decoding.row import start_row
    from cascade_core.decoding.run_settings import RunSettings
    from distill.head import unrolled

    head, target = head_pair.draft, head_pair.target
    sequence = prompt_ids + [20, 31, 42, 53]
    with torch.no_grad():
        out = target(torch.tensor([sequence]), output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i] for i in head.aux_layers], -1)
    with torch.no_grad():
        trained = [head.draft_logits(h)[0] for h in unrolled(head, torch.tensor([sequence]), feats, 3)]
    t = len(prompt_ids) - 2  # the engine's history is sequence[: t + 1], its last token sequence[t + 1]
    row = start_row(head_pair, RunSettings(rule="v3", alpha=0.3, gamma=3, seed=1, max_new_tokens=4),
                    prompt_ids=sequence[: t + 2])
    batch = Batch(head_pair, [row])
    with torch.inference_mode():
        batch.prefill()
        drafted = [batch.draft.step([[sequence[t + 1 + j]]])[0][0] for j in range(3)]
    for j, logits in enumerate(drafted):
        assert torch.allclose(logits, trained[j][t], atol=1e-9, rtol=0), f"step {j + 1}"  # both over its vocabulary


def test_the_bundled_head_reads_the_bundled_target_exactly(bundled):
    """The shipped head in its published format over the bundled target: its layers (2, 15, 27 by default), its
    8,192-token vocabulary, and lossless greedy with it is the target's greedy text."""
    from cascade_core.formats.loading import BUNDLED_HEAD

    head = load_head(BUNDLED_HEAD, bundled.target)
    assert head.aux_layers == (2, 15, 27) and len(head.d2t) == 8192 and "eagle_config" not in read_config(BUNDLED_HEAD)
    pair = make_pair("bundled+head", bundled.target, head, bundled.tokenizer)
    target = generate(pair, "Why is the sky blue?", rule="target", temperature=0.0, max_new_tokens=16)
    lossless = generate(pair, "Why is the sky blue?", rule="lossless", temperature=0.0, gamma=3, max_new_tokens=16)
    assert lossless.tokens == target.tokens
    assert lossless.stats["acceptance_rate"] > 0.05  # it reads the target: a random head would not
