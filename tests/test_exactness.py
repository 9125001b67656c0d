"""The engine against the naive reference loop: the same tokens for every rule, gamma and temperature."""
import pytest
import torch

from cascade_core import RULES, generate
from cascade_core.formats.shipped_draft import SubVocabularyHead
from cascade_core.reference import reference_generate

# Near the median a* of each rule on this pair, so that decisions (and v1-v3's r(v)) are mixed.
from rule_alphas import ALPHA
N = 40


@pytest.fixture(scope="module")
def prompt_ids(tiny64):
    return tiny64.tokenizer("The cascade", add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def references(tiny64, prompt_ids):
    return {(rule, t): reference_generate(tiny64, prompt_ids, rule, ALPHA[rule], t, seed=7, max_new_tokens=N)
            for rule in RULES for t in (0.0, 1.0)}


# every gamma in the full suite; the fast tier (make test-fast) runs 1 and 4, a one-token block and a chain
GAMMAS = [1, 4, pytest.param(2, marks=pytest.mark.slow), pytest.param(8, marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def sub_references():
    return {}  # filled on first use: (rule, T) -> the naive loop's tokens with the sub-vocabulary draft


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("rule", RULES)
def test_engine_equals_reference_at_every_gamma(tiny64, prompt_ids, references, rule, temperature, gamma):
    trace = generate(tiny64, prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=gamma,
                     temperature=temperature, seed=7, max_new_tokens=N)
    assert trace.tokens == references[rule, temperature], f"{rule} T={temperature} gamma={gamma}"


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("rule", RULES)
def test_sub_vocabulary_draft_equals_reference(tiny64_sub, prompt_ids, sub_references, rule, temperature, gamma):
    """A draft whose head covers part of the vocabulary (q zero elsewhere) against the naive loop: the same tokens
    at every gamma; the draft proposes only its head's tokens, and the residual still emits the others."""
    if (rule, temperature) not in sub_references:
        sub_references[rule, temperature] = reference_generate(tiny64_sub, prompt_ids, rule, ALPHA[rule],
                                                               temperature, seed=7, max_new_tokens=N)
    expected = sub_references[rule, temperature]
    head = set(tiny64_sub.draft.lm_head.token_ids.tolist())
    trace = generate(tiny64_sub, prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], gamma=gamma,
                     temperature=temperature, seed=7, max_new_tokens=N)
    assert trace.tokens == expected, f"{rule} T={temperature} gamma={gamma}"
    if rule != "target":
        assert {pos["proposal"] for pos in trace.positions} <= head
    if rule in ("lossless", "target") and temperature:
        assert set(trace.tokens) - head, "the target's tokens outside the draft's head never came out"


def test_sub_vocabulary_head_is_the_full_heads_rows(tiny64):
    """Its logits are the full head's for its tokens and -inf elsewhere, so q is the softmax renormalised over them."""
    ids = torch.tensor([3, 10, 11, 40])
    head = SubVocabularyHead(tiny64.draft.lm_head.weight, ids, tiny64.draft.config.vocab_size)
    hidden = torch.randn(2, 5, tiny64.draft.config.hidden_size, dtype=torch.float64)
    full, sub = tiny64.draft.lm_head(hidden), head(hidden)
    assert torch.allclose(sub[..., ids], full[..., ids], atol=1e-12, rtol=0)
    assert torch.isneginf(sub).sum() == 2 * 5 * (full.shape[-1] - len(ids))
    assert torch.allclose(torch.softmax(sub, -1)[..., ids], torch.softmax(full[..., ids], -1))


def test_reference_outputs_differ_between_rules(references):
    """Guard against a vacuous comparison: the rules really produce different texts here."""
    texts = {tuple(references[rule, 1.0]) for rule in RULES}
    assert len(texts) >= 6


def test_all_provenances_occur(tiny64, prompt_ids):
    trace = generate(tiny64, prompt_ids=prompt_ids, rule="chow", alpha=0.5, gamma=4, seed=7, max_new_tokens=64)
    assert set(trace.sources) == {"accepted", "deferred", "replaced"}


@pytest.mark.parametrize("rule, alpha, new_rule, new_alpha", [
    ("chow", 0.5, "chow", 0.6), ("diff", -0.1, "diff", -0.05), ("v3", 0.9, "v3", 0.95), ("opt", -0.1, "chow", 0.5),
    ("lossy", 0.9, "lossy", 0.95), ("v1", 0.25, "lossless", 0.0), ("chow", 0.5, "draft", 0.0),
])
def test_resume_equals_fresh_run(tiny64, prompt_ids, rule, alpha, new_rule, new_alpha):
    """Recolour to a new setting, resume from the first changed position: identical to a fresh run."""
    kwargs = dict(prompt_ids=prompt_ids, gamma=3, temperature=1.0, seed=3, max_new_tokens=40)
    old = generate(tiny64, rule=rule, alpha=alpha, **kwargs)
    fresh = generate(tiny64, rule=new_rule, alpha=new_alpha, **kwargs)
    sources, k = old.recolour(new_rule, new_alpha)
    k = len(old.tokens) if k is None else k
    assert fresh.tokens[:k] == old.tokens[:k]
    assert sources[:k] == fresh.sources[:k]
    resumed = generate(tiny64, rule=new_rule, alpha=new_alpha, resume=(old, k), **{**kwargs, "prompt_ids": None})
    assert resumed.tokens == fresh.tokens
    assert resumed.sources == fresh.sources


def test_trace_json_round_trip(tiny64, prompt_ids):
    from cascade_core import Trace

    trace = generate(tiny64, prompt_ids=prompt_ids, rule="lossless", alpha=0.0, gamma=2, max_new_tokens=8)
    back = Trace.from_json(trace.to_json())
    assert back.tokens == trace.tokens and back.sources == trace.sources
    assert back.positions[0]["a_star"]["lossless"] == float("inf")
    assert back.recolour("lossless", 0.0) == (trace.sources, None)


@pytest.mark.parametrize("rule", [r for r in RULES if RULES[r].kind != "baseline"])
def test_sequential_cascade_emits_the_speculative_cascades_tokens(tiny64, prompt_ids, references, rule):
    """One position at a time, the target only where needed: the same tokens as the reference, another cost."""
    kwargs = dict(prompt_ids=prompt_ids, rule=rule, alpha=ALPHA[rule], temperature=1.0, seed=7, max_new_tokens=N)
    sequential = generate(tiny64, sequential=True, **kwargs)
    assert sequential.tokens == references[rule, 1.0]
    assert sequential.sources == generate(tiny64, gamma=4, **kwargs).sources
    calls = sequential.stats
    assert calls["draft_calls"] == len(sequential.tokens)
    if RULES[rule].decides_on_q:  # chow asks the target only where it defers
        assert calls["target_calls"] == sum(s != "accepted" for s in sequential.sources) < len(sequential.tokens)
    else:
        assert calls["target_calls"] == len(sequential.tokens)


def test_every_call_is_on_the_timeline(tiny64, prompt_ids):
    trace = generate(tiny64, prompt_ids=prompt_ids, rule="v3", alpha=0.6, gamma=3, seed=1, max_new_tokens=20)
    timeline = trace.counters["timeline"]
    roles = [kind for kind, _, _ in timeline]
    assert roles.count("target") == trace.stats["target_calls"] and roles.count("draft") == trace.stats["draft_calls"]
    assert {"target prefill", "draft prefill"} <= set(roles)
    assert all(0 <= start <= end for _, start, end in timeline)
    assert [start for _, start, _ in timeline] == sorted(start for _, start, _ in timeline)
