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


def load_draft(target, folder):
    """The shipped draft: its own layers from the file, everything else shared with the target."""
    path = Path(folder) / DRAFT_FILE
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        meta = json.loads(f.metadata()["meta"])
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
    """AdamW with warm-up and cosine decay over --minutes (or --steps); checkpoints every --ckpt-every steps."""
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


def distill(args):
    from .models import load_pair

    torch.manual_seed(args.seed)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    say = lambda m: print(m, flush=True)  # noqa: E731
    pair = load_pair("bundled", dtype=torch.float32)
    for p in pair.target.parameters():
        p.requires_grad = False
    bundle = build_data(pair, work, args, say)
    n_train = sum(len(e["top_ids"]) for e in bundle["train"])
    say(f"data: {len(bundle['train'])} training examples ({n_train} positions), {len(bundle['eval'])} held-out")
    state = train(pair, bundle, work, args, say)
    say(f"done: best held-out 1 - TV {state['best_acceptance']:.3f}; draft in {args.out}/{DRAFT_FILE}")


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
    p.set_defaults(func=distill)
