"""Training an EAGLE-3 head for the bundled target (``python -m distill --head``), resumable under ``--work``:

1. answers: the target's own sampled answers to the composed instructions, in rounds of --round-prompts (kept in
   ``answers/``), with the target's expected token counts over them (its softmax summed at every step);
2. vocabulary: the --draft-vocabulary tokens of the highest expected count (FR-Spec's ranking), stored as d2t/t2d;
3. features: for every answer, the three residual streams the head reads and the target's final hidden state
   (its distribution over the draft vocabulary is one product away), computed once (``features/``);
4. training: soft cross-entropy against the target's distribution restricted to the draft vocabulary, with the
   training-time test of EAGLE-3: k unrolled steps, step j feeding back the head's own output of step j - 1 (as it
   drafts), weighted 0.8 ** (j - 1); the attention of step j sees the true-feature entries up to its base position
   and its own chain's entries, exactly what the engine's cache holds when it drafts;
5. held-out report on prompts never trained on: 1 - TV(p, q) per drafting step (q against the full p).
"""
import json
import math
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from cascade_core.head import new_head, save_head

from . import data
from .train import held_out_set, make_batches
from .vocab import ExpectedCounts

DECAY = 0.8  # SpecForge's weight of step j's loss: DECAY ** (j - 1)


def answer_rounds(pair, work, args, say):
    """Sample (or reuse) --rounds rounds of answers; returns them and the expected counts over all of them."""
    folder = work / "answers"
    folder.mkdir(parents=True, exist_ok=True)
    prompts = data.instructions(args.seed)
    examples, mass = [], torch.zeros(pair.vocab_size, dtype=torch.float64)
    for r in range(args.rounds):
        path = folder / f"{r:04d}.pt"
        if not path.exists():
            counts, start = ExpectedCounts(pair.vocab_size), time.perf_counter()
            batch = prompts[r * args.round_prompts: (r + 1) * args.round_prompts]
            got = data.sampled_answers(pair, batch, args.answer_tokens, args.gen_batch, args.seed + 7919 * (r + 1),
                                       lambda m: None, watch=counts)
            torch.save({"examples": got, "mass": counts.mass}, path)
            say(f"answers: round {r + 1}/{args.rounds} ({sum(len(e['input_ids']) - e['first'] for e in got)} "
                f"answer tokens, {time.perf_counter() - start:.0f} s)")
        saved = torch.load(path)
        examples += saved["examples"]
        mass += saved["mass"]
    return examples, mass


@torch.no_grad()
def features_of(pair, example, layers):
    """The target's three streams [T, 3H] and final hidden state [T, H] over one example, float16."""
    ids = torch.tensor([example["input_ids"]], device=pair.target.device)
    out = pair.target.model(input_ids=ids, output_hidden_states=True)
    streams = torch.cat([out.hidden_states[i] for i in layers], -1)[0]
    return dict(ids=ids[0].cpu(), first=example["first"], streams=streams.half().cpu(),
                final=out.last_hidden_state[0].half().cpu())


def feature_set(pair, examples, path, layers, say):
    """Features of every example, computed once and kept at path."""
    if path.exists():
        return torch.load(path)
    start, out = time.perf_counter(), []
    for i, example in enumerate(examples):
        out.append(features_of(pair, example, layers))
        if (i + 1) % 200 == 0:
            say(f"features: {i + 1}/{len(examples)} ({time.perf_counter() - start:.0f} s)")
    torch.save(out, path)
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


def targets(final, lm_rows):
    """log p over the draft vocabulary, renormalised there: the best q a head over it can be."""
    return torch.log_softmax(final @ lm_rows.T, -1)


def step_losses(head, batch, lm_rows, full_head, k, with_tv=False):
    """Per step j: the mean soft cross-entropy at the positions it learns (and, with_tv, the mean 1 - TV(p, q)
    with q placed in the full vocabulary)."""
    ids, streams, final, lengths, firsts = batch
    rows, width = ids.shape
    outs = unrolled(head, ids, streams, k)
    losses, accepts = [], []
    base = torch.arange(width)[None]
    for j, h in enumerate(outs, start=1):
        # base t predicts token t + j + 1, whose distribution p is the target's at position t + j
        learn = (base + j + 1 < lengths[:, None]) & (base + j >= firsts[:, None])
        if not learn.any():
            break
        at = (base + j).clamp(max=width - 1).expand(rows, -1)
        target_final = final.gather(1, at[..., None].expand(-1, -1, final.shape[-1]))[learn]
        logq = torch.log_softmax(head.draft_logits(h[learn]).float(), -1)
        logp = targets(target_final, lm_rows)
        losses.append(-(logp.exp() * logq).sum(-1).mean())
        if with_tv:
            p_full = torch.softmax(target_final @ full_head.T, -1)
            q_full = torch.zeros_like(p_full).index_copy_(-1, head.token_ids, logq.exp())
            accepts.append(float(1 - 0.5 * (p_full - q_full).abs().sum(-1).mean()))
    return losses, accepts


def batches(items, tokens_per_batch, seed):
    return make_batches([len(x["ids"]) for x in items], tokens_per_batch, seed)


@torch.no_grad()
def evaluate(head, held, lm_rows, full_head, k):
    accepts = [[] for _ in range(k)]
    for group in batches(held, 2048, 0):
        _, a = step_losses(head, collate([held[i] for i in group]), lm_rows, full_head, k, with_tv=True)
        for j, value in enumerate(a):
            accepts[j].append(value)
    return [round(sum(a) / len(a), 4) for a in accepts if a]


def train_head(pair, args, say):
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    examples, mass = answer_rounds(pair, work, args, say)
    ranked = sorted(range(pair.vocab_size), key=lambda v: (-float(mass[v]), v))
    token_ids = sorted(ranked[: args.draft_vocabulary])
    coverage = {n: round(float(mass[ranked[:n]].sum() / mass.sum()), 4) for n in (4096, 8192, 16384, 32768)}
    say(f"draft vocabulary {args.draft_vocabulary}: share of the target's expected counts by size {coverage}")
    head = new_head(pair.target, token_ids).float()
    for p in head.embed_tokens.parameters():
        p.requires_grad = False
    layers = head.aux_layers
    items = feature_set(pair, examples, work / "features.pt", layers, say)
    held = feature_set(pair, held_out_set(pair, work, args, say), work / "held_out_features.pt", layers, say)
    full_head = pair.target.get_output_embeddings().weight.detach().float()
    lm_rows = full_head[head.token_ids]
    params = [p for n, p in head.named_parameters() if p.requires_grad and not n.startswith("embed_tokens.")]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    state = {"step": 0, "epoch": 0, "seconds": 0.0, "best": -1.0, "curve": []}
    ckpt = work / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt)
        head.load_state_dict(saved["head"], strict=False)
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
        say(f"resumed at step {state['step']} ({state['seconds'] / 60:.1f} min)")
    budget, k = args.minutes * 60, args.unroll
    meta = lambda scores: dict(target="SmolLM2-135M-Instruct", step=state["step"], minutes=round(state["seconds"] / 60, 1),  # noqa: E731
                               unroll=k, draft_vocabulary=args.draft_vocabulary, coverage=coverage,
                               answers=len(examples), answer_tokens=sum(len(x["ids"]) - x["first"] for x in items),
                               held_out_acceptance_by_step=scores, lr=args.lr, batch_tokens=args.batch_tokens)
    while state["seconds"] < budget:
        for group in batches(items, args.batch_tokens, args.seed + state["epoch"]):
            start = time.perf_counter()
            frac = min(1.0, state["seconds"] / budget)
            lr = args.lr * min(1.0, (state["step"] + 1) / 30) * (0.1 + 0.45 * (1 + math.cos(math.pi * frac)))
            for group_ in opt.param_groups:
                group_["lr"] = lr
            losses, _ = step_losses(head, collate([items[i] for i in group]), lm_rows, full_head, k)
            loss = sum(DECAY ** j * step_loss for j, step_loss in enumerate(losses))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            state["step"] += 1
            state["seconds"] += time.perf_counter() - start
            if state["step"] % args.eval_every == 0 or state["seconds"] >= budget:
                head.eval()
                scores = evaluate(head, held, lm_rows, full_head, k)
                head.train()
                state["curve"].append([state["step"], round(state["seconds"] / 60, 2), round(loss.item(), 4), scores])
                say(f"step {state['step']}  {state['seconds'] / 60:.1f} min  loss {loss.item():.3f}  held-out 1 - TV "
                    f"by step {scores}")
                if scores[0] > state["best"]:
                    state["best"] = scores[0]
                    save_head(head, args.out, meta(scores))
                torch.save({"head": {n: v for n, v in head.state_dict().items() if not n.startswith("embed_tokens.")},
                            "opt": opt.state_dict(), "state": state}, ckpt)
                (work / "curve.json").write_text(json.dumps(state["curve"]))
            if state["seconds"] >= budget:
                break
        state["epoch"] += 1
    return state
