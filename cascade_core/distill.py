"""Distil a small draft for the bundled target: a few of the target's own layers, trained to match it.

    python -m cascade_core distill --out assets/draft-smollm2 [--layers 0,1,2,3] [--minutes 60]

The student shares the target's embeddings, final norm and tied head (frozen, never stored again); only
its own layers are trained (cross-entropy to the target's renormalised top-k, i.e. KL on the top-k) and
shipped, in float16. Data, checkpoints and the learning curve live under --work (resumable: rerun the
same command to continue). Runs on CUDA when present, else the CPU.
"""
import csv
import json
import math
import random
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from . import distill_data as data

DRAFT_FILE = "draft.safetensors"


def build_student(target, layers):
    """A Llama-family model of len(layers) layers copied from the target's; shared parts are the target's."""
    config = type(target.config)(**{**target.config.to_dict(), "num_hidden_layers": len(layers)})
    student = type(target)(config).to(dtype=torch.float32, device=target.device)
    student.model.embed_tokens = target.model.embed_tokens
    student.model.norm = target.model.norm
    student.lm_head = target.lm_head
    for new, old in enumerate(layers):
        student.model.layers[new].load_state_dict(target.model.layers[old].state_dict())
    for name, param in student.named_parameters():
        param.requires_grad = name.startswith("model.layers.")
    return student


def own_state(student):
    return {k: v for k, v in student.state_dict().items() if k.startswith("model.layers.")}


def save_draft(student, folder, meta):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().to(torch.float16).contiguous().cpu() for k, v in own_state(student).items()},
              folder / DRAFT_FILE, metadata={"meta": json.dumps(meta)})


def draft_meta(folder):
    """What the shipped file says about itself: init layers, step, training positions, held-out scores."""
    from safetensors import safe_open

    with safe_open(Path(folder) / DRAFT_FILE, "pt") as f:
        return json.loads(f.metadata()["meta"])


def load_draft(target, folder):
    """The shipped draft: its own layers from the file, everything else shared with the target."""
    path = Path(folder) / DRAFT_FILE
    meta = draft_meta(folder)
    student = build_student(target, meta["init_layers"])
    state = {k: v.to(target.dtype) for k, v in load_file(path).items()}
    student.load_state_dict(state, strict=False)
    for param in student.parameters():
        param.requires_grad = False
    return student.to(target.dtype).eval(), meta


def make_batches(examples, tokens_per_batch, seed):
    """Groups of examples of similar length (little padding) holding about tokens_per_batch tokens."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]["input_ids"]))
    batches, current, longest = [], [], 0
    for i in order:
        longest = max(longest, len(examples[i]["input_ids"]))
        if current and longest * (len(current) + 1) > tokens_per_batch:
            batches.append(current)
            current, longest = [], len(examples[i]["input_ids"])
        current.append(i)
    batches.append(current)
    random.Random(seed).shuffle(batches)
    return batches


def collate(examples, device):
    """Right-padded ids, and per learnt position: (row, column, top ids, top log-probs)."""
    width = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    mask = torch.zeros(len(examples), width, dtype=torch.long)
    rows, cols, top_ids, top_logp = [], [], [], []
    for r, e in enumerate(examples):
        n = len(e["input_ids"])
        ids[r, :n] = torch.tensor(e["input_ids"])
        mask[r, :n] = 1
        m = len(e["top_ids"])
        rows.append(torch.full((m,), r))
        cols.append(torch.arange(e["first"], e["first"] + m))
        top_ids.append(e["top_ids"].long())
        top_logp.append(e["top_logp"].float())
    to = lambda t: t.to(device)  # noqa: E731
    return to(ids), to(mask), to(torch.cat(rows)), to(torch.cat(cols)), to(torch.cat(top_ids)), to(torch.cat(top_logp))


def distillation_loss(student, batch):
    """Cross-entropy from the target's renormalised top-k to the student's full-vocabulary softmax."""
    ids, mask, rows, cols, top_ids, top_logp = batch
    hidden = student.model(input_ids=ids, attention_mask=mask).last_hidden_state[rows, cols]
    logq = torch.log_softmax(student.lm_head(hidden).float(), -1)
    teacher = torch.softmax(top_logp, -1)
    return -(teacher * logq.gather(-1, top_ids)).sum(-1).mean()


@torch.no_grad()
def agreement(pair, student, examples, device):
    """Held-out: mean TV(p, q) (so 1 - TV is the expected lossless acceptance), top-1 agreement, KL(p || q)."""
    tv, top1, kl, n = 0.0, 0.0, 0.0, 0
    for e in examples:
        ids = torch.tensor([e["input_ids"]], device=device)
        span = slice(e["first"], e["first"] + len(e["top_ids"]))
        logp = torch.log_softmax(pair.target(ids).logits[0, span, : pair.vocab_size].float(), -1)
        logq = torch.log_softmax(student(ids).logits[0, span, : pair.vocab_size].float(), -1)
        p, q = logp.exp(), logq.exp()
        tv += (p - q).clamp_min(0).sum(-1).sum().item()
        top1 += (p.argmax(-1) == q.argmax(-1)).sum().item()
        kl += (p * (logp - logq)).sum(-1).sum().item()
        n += p.shape[0]
    return {"tv": tv / n, "acceptance": 1 - tv / n, "top1": top1 / n, "kl": kl / n}


def build_data(pair, work, args, say):
    """Held-out answers, training answers and doc text: generated once, cached under work/."""
    path = work / "data.pt"
    if path.exists():
        return torch.load(path)
    prompts = data.instructions(args.seed)[: args.prompts]
    eval_set = data.sampled_answers(pair, data.EVAL_PROMPTS, 96, args.gen_batch, args.seed + 1, say)
    train = data.sampled_answers(pair, prompts, args.answer_tokens, args.gen_batch, args.seed, say)
    texts = data.python_doc_texts()
    random.Random(args.seed).shuffle(texts)
    train += data.read_texts(pair, texts[: args.doc_texts], 256, args.gen_batch, say)
    bundle = {"train": train, "eval": eval_set}
    torch.save(bundle, path)
    return bundle


def train(pair, bundle, work, args, say):
    """AdamW with warm-up and cosine decay over --minutes (or --steps); a checkpoint (and, when held-out
    agreement improves, the shipped draft) at every evaluation, each --eval-every steps."""
    device = pair.target.device
    student = build_student(pair.target, args.layers)
    params = [p for p in student.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    ckpt_path, curve_path = work / "checkpoint.pt", work / "curve.csv"
    state = {"step": 0, "tokens": 0, "seconds": 0.0, "best_acceptance": -1.0}
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path)
        student.load_state_dict(ckpt["student"], strict=False)
        opt.load_state_dict(ckpt["opt"])
        state = ckpt["state"]
        say(f"resumed at step {state['step']} ({state['tokens']} tokens)")
    batches = make_batches(bundle["train"], args.batch_tokens, args.seed)
    budget = args.minutes * 60
    new_curve = not curve_path.exists()
    with open(curve_path, "a", newline="") as f:
        log = csv.writer(f)
        if new_curve:
            log.writerow(["step", "tokens", "minutes", "train_loss", "eval_kl", "eval_top1", "eval_acceptance"])
        while state["seconds"] < budget and (not args.steps or state["step"] < args.steps):
            batch_ids = batches[state["step"] % len(batches)]
            start = time.perf_counter()
            lr = args.lr * min(1.0, (state["step"] + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(
                1.0, state["seconds"] / budget))))
            for group in opt.param_groups:
                group["lr"] = lr
            batch = collate([bundle["train"][i] for i in batch_ids], device)
            loss = distillation_loss(student, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            state["step"] += 1
            state["tokens"] += len(batch[2])
            state["seconds"] += time.perf_counter() - start
            if state["step"] % args.eval_every == 0 or state["seconds"] >= budget:
                student.eval()
                held_out = agreement(pair, student, bundle["eval"], device)
                student.train()
                log.writerow([state["step"], state["tokens"], round(state["seconds"] / 60, 2), round(loss.item(), 4),
                              round(held_out["kl"], 4), round(held_out["top1"], 4), round(held_out["acceptance"], 4)])
                f.flush()
                say(f"step {state['step']}  {state['tokens']} tokens  {state['seconds'] / 60:.1f} min  "
                    f"loss {loss.item():.3f}  held-out KL {held_out['kl']:.3f}  top-1 {held_out['top1']:.3f}  "
                    f"1 - TV {held_out['acceptance']:.3f}")
                if held_out["acceptance"] > state["best_acceptance"]:
                    state["best_acceptance"] = held_out["acceptance"]
                    save_draft(student, args.out, dict(init_layers=list(args.layers), step=state["step"],
                                                       tokens=state["tokens"], held_out=held_out,
                                                       target="SmolLM2-135M-Instruct"))
                torch.save({"student": own_state(student), "opt": opt.state_dict(), "state": state}, ckpt_path)
    return state


def teacher():
    """The bundled target alone (float32, frozen), as a Pair whose draft slot is unused."""
    from .models import default_device, make_pair, smollm2_target

    target, tokenizer = smollm2_target(torch.float32, default_device())
    for p in target.parameters():
        p.requires_grad = False
    return make_pair("bundled target", target, target, tokenizer)


def report(work, out, gamma_max=4, n_tokens=48, say=print):
    """Markdown for docs/benchmarks.md: learning curve, held-out agreement, the engine's measured acceptance,
    the draft's own greedy answers, its cost ratio c and measured vs cost-model speed-ups."""
    from .bench import forward_ms, write_section
    from .costs import expected_speedup
    from .engine import generate
    from .models import load_pair

    pair = load_pair("bundled")
    meta = draft_meta(out)
    curve = list(csv.DictReader(open(Path(work) / "curve.csv")))
    stride = max(1, len(curve) // 12)
    runs = {p: generate(pair, p, rule="lossless", alpha=0.0, gamma=gamma_max, temperature=1.0, seed=1,
                        max_new_tokens=n_tokens) for p in data.EVAL_PROMPTS}
    acceptance = sum(t.stats["acceptance_rate"] for t in runs.values()) / len(runs)
    c = forward_ms(pair.draft, pair.vocab_size) / forward_ms(pair.target, pair.vocab_size)
    speed = {}
    for gamma in [None] + list(range(1, gamma_max + 1)):
        rule = "target" if gamma is None else "lossless"
        traces = [generate(pair, p, rule=rule, alpha=0.0, gamma=gamma or 1, temperature=1.0, seed=2,
                           max_new_tokens=n_tokens, stop_at_eos=False) for p in data.EVAL_PROMPTS[:3]]
        speed[gamma] = (sum(len(t.tokens) for t in traces) / sum(t.stats["wall_seconds"] for t in traces),
                        sum(t.stats["acceptance_rate"] or 0 for t in traces) / len(traces))
        say(f"speed at gamma {gamma}: {speed[gamma][0]:.1f} tokens/s")
    answers = {p: generate(pair, p, rule="draft", temperature=0, max_new_tokens=40).text for p in data.EVAL_PROMPTS[:4]}
    ho = meta["held_out"]
    lines = [
        f"## Bundled draft: {pair.description}", "",
        f"`python -m cascade_core distill --out {out}` (report: `--report-only`), {time.strftime('%Y-%m-%d')}. "
        f"Student initialised from target layers {meta['init_layers']}; embeddings, final norm and tied head shared "
        f"with the target and frozen; shipped file: its own layers in float16 "
        f"({(Path(out) / DRAFT_FILE).stat().st_size / 2**20:.1f} MiB). Best checkpoint: step {meta['step']}, "
        f"{meta['tokens']} training positions.", "",
        "Held-out prompts (never used in training): " + "; ".join(data.EVAL_PROMPTS) + ".", "",
        f"- Held-out agreement on the target's own sampled answers: 1 - TV = **{ho['acceptance']:.3f}** "
        f"(expected lossless acceptance), top-1 agreement {ho['top1']:.3f}, KL(p || q) {ho['kl']:.3f}.",
        f"- Measured lossless acceptance with the engine (T = 1, gamma = {gamma_max}, {n_tokens} tokens per prompt): "
        f"**{acceptance:.3f}**.",
        f"- Cost ratio c = draft / target cached forward = **{c:.2f}**.", "",
        "| gamma | tokens/s | measured speed-up vs target-only | cost-model estimate (g + 1 draft calls) | acceptance |",
        "|---|---|---|---|---|",
        f"| target only | {speed[None][0]:.1f} | 1.00x | - | - |",
    ]
    for gamma in range(1, gamma_max + 1):
        tok_s, acc = speed[gamma]
        lines.append(f"| {gamma} | {tok_s:.1f} | {tok_s / speed[None][0]:.2f}x | "
                     f"{expected_speedup(acc, gamma, c, gamma + 1):.2f}x | {acc:.3f} |")
    lines += ["", "Learning curve (held-out every few steps):", "",
              "| step | training positions | minutes | train loss | held-out KL | top-1 | 1 - TV |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['step']} | {r['tokens']} | {r['minutes']} | {r['train_loss']} | {r['eval_kl']} | {r['eval_top1']} | "
              f"{r['eval_acceptance']} |" for r in curve[::stride] + ([curve[-1]] if (len(curve) - 1) % stride else [])]
    lines += ["", "The draft's own greedy answers (draft only, temperature 0):", ""]
    lines += [f"- *{p}* {a!r}" for p, a in answers.items()]
    text = "\n".join(lines) + "\n"
    write_section("docs/benchmarks.md", text)
    return text


def distill(args):
    say = lambda m: print(m, flush=True)  # noqa: E731
    if not args.report_only:
        torch.manual_seed(args.seed)
        work = Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
        pair = teacher()
        bundle = build_data(pair, work, args, say)
        n_train = sum(len(e["top_ids"]) for e in bundle["train"])
        say(f"data: {len(bundle['train'])} training examples ({n_train} positions), {len(bundle['eval'])} held-out")
        state = train(pair, bundle, work, args, say)
        say(f"done: best held-out 1 - TV {state['best_acceptance']:.3f}; draft in {args.out}/{DRAFT_FILE}")
    say(report(args.work, args.out, say=say))


def add_distill_parser(sub):
    p = sub.add_parser("distill", help="distil a draft for the bundled target (resumable)")
    p.add_argument("--out", default="assets/draft-smollm2")
    p.add_argument("--work", default="artifacts/distill", help="data, checkpoints, learning curve")
    p.add_argument("--layers", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2, 3],
                   help="target layers the student starts from")
    p.add_argument("--minutes", type=float, default=60.0, help="training time budget")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: use --minutes)")
    p.add_argument("--prompts", type=int, default=2400)
    p.add_argument("--answer-tokens", type=int, default=96)
    p.add_argument("--doc-texts", type=int, default=150)
    p.add_argument("--gen-batch", type=int, default=16)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report-only", action="store_true", help="only evaluate the shipped draft into docs/benchmarks.md")
    p.set_defaults(func=distill)
