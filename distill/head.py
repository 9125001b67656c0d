"""Training an EAGLE-3 head for the bundled target (``python -m distill --head``), resumable under ``--work``:

1. answers: the target's own sampled answers to the composed instructions, in rounds of --round-prompts (kept in
   ``answers/``), with the target's expected token counts over them (its softmax summed at every step);
2. vocabulary: the --draft-vocabulary tokens of the highest expected count (FR-Spec's ranking), stored as d2t/t2d;
3. features: for every answer, the three residual streams the head reads and the target's final hidden state
   (its distribution over the draft vocabulary is one product away), computed once (``features/``);
4. training: soft cross-entropy against the target's distribution restricted to the draft vocabulary, first on
   the first drafting step alone (--first-step-minutes), then with the training-time test of EAGLE-3: k unrolled
   steps, step j feeding back the head's own output of step j - 1 (as it drafts), weighted 0.8 ** (j - 1); the
   attention of step j sees the true-feature entries up to its base position and its own chain's entries, exactly
   what the engine's cache holds when it drafts;
5. held-out report on prompts never trained on: 1 - TV(p, q) per drafting step (q against the full p).
"""
import json
import math
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from cascade_core.formats.eagle3_head import default_aux_layers, load_head, new_head, save_head

from . import data, kinds
from .precision import precision
from .train import held_out_set, make_batches, training_options
from .vocab import ExpectedCounts

DECAY = 0.8  # SpecForge's weight of step j's loss: DECAY ** (j - 1)
HEAD_OPTIONS = ("rounds", "round_prompts", "answer_tokens", "gen_batch", "eval_samples", "draft_vocabulary", "minutes",
                "first_step_minutes", "unroll", "lr", "batch_tokens")


def training_rounds(pair, work, args, layers, say):
    """--rounds rounds of the target's answers to --round-prompts fresh instructions (``answers/``) and their
    features (``features/``), each made once and kept; returns every round's features and the target's expected
    token counts over all the answers (the draft vocabulary's ranking)."""
    for folder in ("answers", "features"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    prompts = kinds.interleaved(data.instructions(args.seed), args.seed, never=data.EVAL_PROMPTS)
    items, mass, sampler = [], torch.zeros(pair.vocab_size, dtype=torch.float64), None
    for r in range(args.rounds):
        answers = work / "answers" / f"{r:04d}.pt"
        if not answers.exists():
            counts, start = ExpectedCounts(pair.vocab_size), time.perf_counter()
            batch = prompts[r * args.round_prompts: (r + 1) * args.round_prompts]
            sampler = sampler or data.sampler_model(pair.target)
            got = data.sampled_answers(pair, batch, args.answer_tokens, args.gen_batch, args.seed + 7919 * (r + 1),
                                       lambda m: None, watch=counts, model=sampler)
            torch.save({"examples": got, "mass": counts.mass}, answers)
            say(f"answers: round {r + 1}/{args.rounds} ({sum(len(e['input_ids']) - e['first'] for e in got)} "
                f"answer tokens, {time.perf_counter() - start:.0f} s)")
        saved = torch.load(answers)
        mass += saved["mass"]
        items += feature_set(pair, saved["examples"], work / "features" / f"{r:04d}.pt", layers, say)
    return items, mass


@torch.no_grad()
def features_of(pair, examples, layers):
    """Per example: the target's three streams [T, 3H] and final hidden state [T, H], float16, computed in float32
    (what the engine hands the head). Rows are right-padded: causal attention keeps padding out of every real
    position."""
    width = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    for r, e in enumerate(examples):
        ids[r, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
    out = pair.target.model(input_ids=ids.to(pair.target.device), output_hidden_states=True)
    streams = torch.cat([out.hidden_states[i] for i in layers], -1).half().cpu()
    final = out.last_hidden_state.half().cpu()
    return [dict(ids=ids[r, : len(e["input_ids"])], first=e["first"], streams=streams[r, : len(e["input_ids"])].clone(),
                 final=final[r, : len(e["input_ids"])].clone()) for r, e in enumerate(examples)]


def feature_set(pair, examples, path, layers, say, tokens_per_batch=8192):
    """Features of every example (in batches of similar length), computed once and kept at path."""
    if path.exists():
        return torch.load(path)
    start, out = time.perf_counter(), [None] * len(examples)
    for group in make_batches([len(e["input_ids"]) for e in examples], tokens_per_batch, 0):
        for i, item in zip(group, features_of(pair, [examples[i] for i in group], layers)):
            out[i] = item
    torch.save(out, path)
    say(f"features: {path.name} ({sum(len(x['ids']) for x in out)} tokens, {time.perf_counter() - start:.0f} s)")
    return out


def collate(items):
    """Right-padded ids, streams, final states and each row's length and first learnt position."""
    width = max(len(x["ids"]) for x in items)
    rows = len(items)
    ids = torch.zeros(rows, width, dtype=torch.long)
    streams = torch.zeros(rows, width, items[0]["streams"].shape[-1])
    final = torch.zeros(rows, width, items[0]["final"].shape[-1])
    lengths, firsts = torch.tensor([len(x["ids"]) for x in items]), torch.tensor([x["first"] for x in items])
    for r, x in enumerate(items):
        n = len(x["ids"])
        ids[r, :n], streams[r, :n], final[r, :n] = x["ids"], x["streams"].float(), x["final"].float()
    return ids, streams, final, lengths, firsts


def step_mask(width, step, dtype):
    """The additive mask [1, 1, T, step * T] of training step ``step`` (1-based): step 1's entries up to the query's
    base position, and the entries of steps 2 .. step at that base position only (its own chain)."""
    base = torch.arange(width)
    seen = [base[None, :] <= base[:, None]] + [base[None, :] == base[:, None]] * (step - 1)
    seen = torch.cat(seen, 1)
    return torch.zeros(seen.shape, dtype=dtype).masked_fill_(~seen, torch.finfo(dtype).min)[None, None]


def unrolled(head, ids, streams, k):
    """The training-time test: h of steps 1 .. k for every base position t. Step 1 reads (features_t, token t+1);
    step j reads (its own h of step j - 1, token t + j) at position t + j - 1."""
    rows, width = ids.shape
    cache, outputs, g = DynamicCache(config=head.config), [], None
    for j in range(1, k + 1):
        tokens = torch.zeros_like(ids)
        tokens[:, : width - j] = ids[:, j:]
        positions = (torch.arange(width) + j - 1)[None].expand(rows, -1)
        mask = step_mask(width, j, head.dtype)
        h = head.step(tokens, cache, features=streams if j == 1 else None, hidden=g, attention_mask=mask,
                      position_ids=positions)
        outputs.append(h)
        g = h
    return outputs


def soft_cross_entropy(logits, p):
    """Mean over rows of -sum_v p_v log softmax(logits)_v, written as logsumexp(z) - p . z (p sums to one): the
    same loss with two passes over the [positions, vocabulary] logits instead of five (compiled, one loop)."""
    z = logits.float()
    return (torch.logsumexp(z, -1) - (p * z).sum(-1)).mean()


def learnt(lengths, firsts, width, j):
    """(rows, bases) of the positions step j learns: base t predicts token t + j + 1, an answer token, whose
    distribution p is the target's at position t + j."""
    base = torch.arange(width)[None]
    return ((base + j + 1 < lengths[:, None]) & (base + j >= firsts[:, None])).nonzero(as_tuple=True)


def step_losses(head, batch, lm_rows, k, loss=soft_cross_entropy):
    """Per step j of the training-time test: the mean soft cross-entropy at the positions it learns, against the
    target's distribution over the draft vocabulary (renormalised there: the best q a head over it can be),
    computed once per batch and read by every step."""
    ids, streams, final, lengths, firsts = batch
    with torch.no_grad():
        p = torch.softmax((final @ lm_rows.T).float(), -1)
    losses = []
    for j, h in enumerate(unrolled(head, ids, streams, k), start=1):
        rows, bases = learnt(lengths, firsts, ids.shape[1], j)
        if len(rows):
            losses.append(loss(head.draft_logits(h[rows, bases]), p[rows, bases + j]))
    return losses


def batches(items, tokens_per_batch, seed):
    return make_batches([len(x["ids"]) for x in items], tokens_per_batch, seed)


@torch.no_grad()
def evaluate(head, held, full_head, k, temperatures=(1.0, 0.7)):
    """Held-out 1 - TV(p, q) per drafting step at each temperature (float32, as the engine drafts): the expected
    lossless acceptance of the step's proposal, q placed in the full vocabulary (zero outside the head's)."""
    sums = {t: [0.0] * k for t in temperatures}
    counts = [0] * k
    for group in batches(held, 2048, 0):
        ids, streams, final, lengths, firsts = collate([held[i] for i in group])
        for j, h in enumerate(unrolled(head, ids, streams, k), start=1):
            rows, bases = learnt(lengths, firsts, ids.shape[1], j)
            logits_q = head.draft_logits(h[rows, bases]).float()
            logits_p = final[rows, bases + j] @ full_head.T
            for t in temperatures:
                q = torch.softmax(logits_q / t, -1)
                p = torch.softmax(logits_p / t, -1)[:, head.token_ids]
                sums[t][j - 1] += float(torch.minimum(p, q).sum())
            counts[j - 1] += len(rows)
    return {str(t): [round(v / max(n, 1), 4) for v, n in zip(sums[t], counts)] for t in temperatures}


@torch.no_grad()
def acceptance_ceiling(held, ranked, full_head, sizes, temperature):
    """Per draft vocabulary size n (the n tokens of most expected count): the held-out mean of the target's mass
    inside it at ``temperature``, the highest 1 - TV any head over it can reach (q is zero outside it)."""
    inside = {n: 0.0 for n in sizes}
    count = 0
    for x in held:
        p = torch.softmax(x["final"][x["first"] + 1:].float() @ full_head.T / temperature, -1)
        ordered = p[:, torch.tensor(ranked)].cumsum(-1)
        for n in sizes:
            inside[n] += float(ordered[:, n - 1].sum())
        count += len(p)
    return {n: round(inside[n] / count, 4) for n in sizes}


def expected_accepted(acceptance):
    """Expected drafted tokens kept per block of len(acceptance) proposals: sum_j prod_{i <= j} a_i (the choice of
    checkpoint: the first step's acceptance alone would favour a head that only drafts one token well)."""
    kept, run = 0.0, 1.0
    for a in acceptance:
        run *= a
        kept += run
    return kept


def train_head(pair, args, say):
    """Train the head for ``args.minutes`` (or ``args.steps``), resumable: its checkpoint, curve and best head are
    kept under ``args.work`` and ``args.out`` after every evaluation. Returns the training state."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    head, items, held, full_head, meta, shipped = prepared_head(pair, work, args, say)
    params = [p for n, p in head.named_parameters() if p.requires_grad and not n.startswith("embed_tokens.")]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    state = resumed_state(head, opt, work / "checkpoint.pt", say)
    lm_rows = full_head[head.token_ids]
    if state["step"] == 0 and shipped is not None:  # the shipped head is the one to beat: saved only once bettered
        scores = evaluate(shipped.eval(), held, full_head, args.unroll)
        state["best"] = expected_accepted(scores["0.7"])
        say(f"{args.init_from} on the held-out set: 1 - TV by step at T 1 {scores['1.0']}, at T 0.7 {scores['0.7']}")
    loss_fn = torch.compile(soft_cross_entropy, dynamic=True) if args.compile else soft_cross_entropy
    budget = args.minutes * 60
    done = lambda: state["seconds"] >= budget or (args.steps and state["step"] >= args.steps)  # noqa: E731
    while not done():
        for group in batches(items, args.batch_tokens, args.seed + state["epoch"]):
            start = time.perf_counter()
            loss = train_step(head, opt, params, pair, args, state, collate([items[i] for i in group]), lm_rows,
                              loss_fn, budget)
            state["step"] += 1
            state["seconds"] += time.perf_counter() - start
            if state["step"] % args.eval_every == 0 or done():
                evaluated(head, opt, held, full_head, args, state, loss, work, lambda scores: meta(state, scores), say)
            if done():
                break
        state["epoch"] += 1
    return state


def prepared_head(pair, work, args, say):
    """(a new head over the draft vocabulary ranked from the target's answers, the training items, the held-out
    features, the target's full output head, meta(state, scores): what a saved head records, and the shipped head
    trained on from (``--init-from``) or None)."""
    layers = default_aux_layers(pair.target.config.num_hidden_layers)
    items, mass = training_rounds(pair, work, args, layers, say)
    ranked = sorted(range(pair.vocab_size), key=lambda v: (-float(mass[v]), v))
    coverage = {n: round(float(mass[ranked[:n]].sum() / mass.sum()), 4) for n in (4096, 8192, 16384, 32768)}
    say(f"draft vocabulary {args.draft_vocabulary}: share of the target's expected counts by size {coverage}")
    head, shipped = started_head(pair, ranked[: args.draft_vocabulary], layers, args.init_from, say)
    held = feature_set(pair, held_out_set(pair, work, args, say), work / "held_out_features.pt", layers, say)
    full_head = pair.target.get_output_embeddings().weight.detach().float()
    sizes = [n for n in (2048, 4096, 8192, 16384, 32768) if n < pair.vocab_size]
    ceiling = {t: acceptance_ceiling(held, ranked, full_head, sizes, t) for t in (1.0, 0.7)}
    say(f"held-out ceiling of 1 - TV by draft vocabulary size (the target's mass inside it): at T 1 {ceiling[1.0]}, "
        f"at T 0.7 {ceiling[0.7]}")

    def meta(state, scores):
        return dict(target="SmolLM2-135M-Instruct", options=training_options(args, HEAD_OPTIONS), step=state["step"],
                    minutes=round(state["seconds"] / 60, 1), coverage=coverage, ceiling=ceiling, answers=len(items),
                    answer_tokens=sum(len(x["ids"]) - x["first"] for x in items), held_out_acceptance_by_step=scores,
                    **({"continued_from": {"source": args.init_from, **shipped.meta}} if shipped else {}))

    return head, items, held, full_head, meta, shipped


def started_head(pair, ranked, layers, init_from, say):
    """A new head over the vocabulary ranked from this run's answers; with ``init_from``, a shipped head's weights
    carried over onto it (its layer, fc and norm, and the LM head's rows of the tokens both vocabularies hold; the
    others start, as a new head's do, as the target's rows). Float32, trainable but for the shared embedding."""
    head, shipped = new_head(pair.target, sorted(ranked), layers).float(), None
    if init_from:
        shipped = load_head(init_from, pair.target).float()
        rows = {int(t): k for k, t in enumerate(shipped.token_ids)}
        shared = [(k, rows[int(t)]) for k, t in enumerate(head.token_ids) if int(t) in rows]
        own = {n: v for n, v in shipped.state_dict().items() if n.split(".")[0] not in ("lm_head", "d2t", "t2d")}
        head.load_state_dict(own, strict=False)
        with torch.no_grad():
            new, old = map(torch.tensor, zip(*shared))
            head.lm_head.weight[new] = shipped.lm_head.weight[old]
        say(f"training on from {init_from}: {len(shared)} of its {len(rows)} draft tokens are among this run's top "
            f"{len(ranked)}, their LM-head rows kept")
    for p in head.embed_tokens.parameters():
        p.requires_grad = False
    return head.train(), shipped


def resumed_state(head, opt, checkpoint, say):
    """The training state, from the checkpoint where there is one (the head's vocabulary, d2t and t2d, with it)."""
    if not checkpoint.exists():
        return {"step": 0, "epoch": 0, "seconds": 0.0, "best": -1.0, "curve": []}
    saved = torch.load(checkpoint)
    head.load_state_dict(saved["head"], strict=False)
    opt.load_state_dict(saved["opt"])
    say(f"resumed at step {saved['state']['step']} ({saved['state']['seconds'] / 60:.1f} min)")
    return saved["state"]


def train_step(head, opt, params, pair, args, state, batch, lm_rows, loss_fn, budget):
    """One optimiser step (warm-up, then cosine decay over the time budget); returns the loss."""
    frac = min(1.0, state["seconds"] / budget)
    lr = args.lr * min(1.0, (state["step"] + 1) / 30) * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
    for group in opt.param_groups:
        group["lr"] = lr
    with precision(pair.target.device):
        # the first --first-step-minutes train the first drafting step alone (three times the steps a minute; the
        # pilot in docs/lab/2026-12-03-head-training.md), then the training-time test unrolls all k steps
        unroll = 1 if state["seconds"] < args.first_step_minutes * 60 else args.unroll
        losses = step_losses(head, batch, lm_rows, unroll, loss_fn)
        loss = sum(DECAY ** j * step_loss for j, step_loss in enumerate(losses))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return loss


def evaluated(head, opt, held, full_head, args, state, loss, work, meta, say):
    """Held-out acceptance by step, the curve, the best head so far saved, and the checkpoint to resume from."""
    head.eval()
    scores = evaluate(head, held, full_head, args.unroll)
    head.train()
    state["curve"].append([state["step"], round(state["seconds"] / 60, 2), round(loss.item(), 4), scores])
    say(f"step {state['step']}  {state['seconds'] / 60:.1f} min  loss {loss.item():.3f}  held-out 1 - TV by step at "
        f"T 1 {scores['1.0']}, at T 0.7 {scores['0.7']}")
    score = expected_accepted(scores["0.7"])
    if score > state["best"]:
        state["best"] = score
        save_head(head, args.out, meta(scores))
    torch.save({"head": {n: v for n, v in head.state_dict().items() if not n.startswith("embed_tokens.")},
                "opt": opt.state_dict(), "state": state}, work / "checkpoint.pt")
    (work / "curve.json").write_text(json.dumps(state["curve"]))
