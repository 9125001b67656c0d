"""Training a draft against the bundled target: rounds of the target's fresh answers, a KL + TV loss on its full
distributions, held-out agreement, checkpoints (see the package's docstring)."""
import csv
import math
import random
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from cascade_core.formats.loading import default_device, make_pair, smollm2_target
from cascade_core.formats.shipped_draft import DRAFT_FILE, build_draft, draft_meta, own_state, save_draft

from . import data
from .precision import precision


def make_batches(lengths, tokens_per_batch, seed):
    """Groups of example indices of similar length (little padding) holding about tokens_per_batch tokens."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, current, longest = [], [], 0
    for i in order:
        longest = max(longest, lengths[i])
        if current and longest * (len(current) + 1) > tokens_per_batch:
            batches.append(current)
            current, longest = [], lengths[i]
        current.append(i)
    batches.append(current)
    random.Random(seed).shuffle(batches)
    return batches


def collate(examples, device):
    """Right-padded ids, their attention mask, and which positions are learnt (each answer token's predecessor)."""
    width = max(len(e["input_ids"]) for e in examples)
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    mask = torch.zeros(len(examples), width, dtype=torch.long)
    learn = torch.zeros(len(examples), width, dtype=torch.bool)
    for r, e in enumerate(examples):
        n = len(e["input_ids"])
        ids[r, :n] = torch.tensor(e["input_ids"])
        mask[r, :n] = 1
        learn[r, e["first"] : n - 1] = True
    return ids.to(device), mask.to(device), learn.to(device)


def next_token_logp(model, batch, vocab):
    """log p(next token) at the learnt positions only: the head runs on those rows, not on padding or prompts."""
    ids, mask, learn = batch
    hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state[learn]
    return torch.log_softmax(model.lm_head(hidden)[:, :vocab].float(), -1)


def divergences(logp, logq):
    """Per position: KL(p || q) and TV(p, q), where 1 - TV is the lossless acceptance probability."""
    p = logp.exp()
    return (p * (logp - logq)).sum(-1), 0.5 * (p - logq.exp()).abs().sum(-1)


def distillation_loss(pair, student, batch, tv_weight):
    """Mean KL(p || q) + tv_weight * mean TV over the learnt positions, with the target's full distribution
    computed now (no stored top-k): KL gives every token a gradient, TV is the acceptance itself."""
    with torch.no_grad():
        logp = next_token_logp(pair.target, batch, pair.vocab_size)
    kl, tv = divergences(logp, next_token_logp(student, batch, pair.vocab_size))
    return kl.mean() + tv_weight * tv.mean()


@torch.no_grad()
def agreement(pair, student, examples, batch_size=16):
    """Held-out: mean TV(p, q) (so 1 - TV is the expected lossless acceptance), top-1 agreement, KL(p || q)."""
    device = pair.target.device
    tv, top1, kl, n = 0.0, 0.0, 0.0, 0
    for start in range(0, len(examples), batch_size):
        batch = collate(examples[start : start + batch_size], device)
        with precision(device):
            logp = next_token_logp(pair.target, batch, pair.vocab_size)
            logq = next_token_logp(student, batch, pair.vocab_size)
        kl_i, tv_i = divergences(logp, logq)
        tv += tv_i.sum().item()
        kl += kl_i.sum().item()
        top1 += (logp.argmax(-1) == logq.argmax(-1)).sum().item()
        n += len(tv_i)
    return {"tv": tv / n, "acceptance": 1 - tv / n, "top1": top1 / n, "kl": kl / n}


def held_out_set(pair, work, args, say):
    """The target's sampled answers to the held-out prompts, generated once and cached under work/."""
    path = work / "held_out.pt"
    if not path.exists():
        prompts = data.EVAL_PROMPTS * args.eval_samples
        torch.save(data.sampled_answers(pair, prompts, 96, args.gen_batch, args.seed + 1, say), path)
    return torch.load(path)


def round_prompts(prompts, round_index, n):
    """Round r's instructions: the next n of the shuffled list, wrapping around (then with new samples)."""
    return [prompts[(round_index * n + i) % len(prompts)] for i in range(n)]


def learning_rate(args, step, seconds, budget):
    """Linear warm-up over 50 steps, then cosine decay to a tenth over the time budget."""
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, seconds / budget)))  # 1 at the start, 0 at the budget's end
    return args.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * cosine)


TRAINING_OPTIONS = ("layers", "minutes", "round_prompts", "answer_tokens", "gen_batch", "batch_tokens", "lr",
                    "tv_weight")


def training_options(args, names=TRAINING_OPTIONS):
    """The command-line options that shaped a draft, as they would be typed."""
    value = lambda v: ",".join(map(str, v)) if isinstance(v, list) else v  # noqa: E731
    return " ".join(f"--{name.replace('_', '-')} {value(getattr(args, name))}" for name in names)


def train_on(pair, student, opt, examples, state, args, lr_at):
    """One pass over a round's answers, one optimiser step per batch of about --batch-tokens; the last loss."""
    params = [p for p in student.parameters() if p.requires_grad]
    for batch_ids in make_batches([len(e["input_ids"]) for e in examples], args.batch_tokens,
                                  args.seed + state["round"]):
        for group in opt.param_groups:
            group["lr"] = lr_at(state["step"])
        batch = collate([examples[i] for i in batch_ids], pair.target.device)
        with precision(pair.target.device):
            loss = distillation_loss(pair, student, batch, args.tv_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        state["step"] += 1
        state["tokens"] += int(batch[2].sum())
        if args.steps and state["step"] >= args.steps:
            break
    return loss.item()


def evaluate(pair, student, held_out, state, args, log, say, loss):
    """Held-out agreement into the learning curve; the shipped draft when it improved."""
    student.eval()
    scores = agreement(pair, student, held_out)
    student.train()
    log.writerow([state["round"], state["step"], state["tokens"], round(state["seconds"] / 60, 2), round(loss, 4),
                  round(scores["kl"], 4), round(scores["top1"], 4), round(scores["acceptance"], 4)])
    say(f"round {state['round']}  step {state['step']}  {state['tokens']} positions  {state['seconds'] / 60:.1f} min "
        f"({state['sampling_seconds'] / 60:.1f} sampling)  loss {loss:.3f}  held-out KL {scores['kl']:.3f}  "
        f"top-1 {scores['top1']:.3f}  1 - TV {scores['acceptance']:.3f}")
    if scores["acceptance"] > state["best_acceptance"]:
        state["best_acceptance"] = scores["acceptance"]
        save_draft(student, args.out, dict(init_layers=list(args.layers), step=state["step"], tokens=state["tokens"],
                                           held_out=scores, device=pair.target.device.type,
                                           options=training_options(args), continued_from=state.get("continued_from"),
                                           target="SmolLM2-135M-Instruct"))


def train(pair, work, args, say):
    """Rounds of fresh data: the target answers --round-prompts new instructions, the student trains once on
    those answers against the target's distributions, repeat until --minutes (or --steps). Every
    --eval-every rounds: held-out agreement, the learning curve, a checkpoint, and the shipped draft when
    agreement improved."""
    student = build_draft(pair.target, args.layers)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0,
                            betas=(0.9, 0.95))
    ckpt_path, curve_path = work / "checkpoint.pt", work / "curve.csv"
    state = {"round": 0, "step": 0, "tokens": 0, "seconds": 0.0, "sampling_seconds": 0.0, "best_acceptance": -1.0}
    if ckpt_path.exists():
        ckpt = torch.load(ckpt_path)
        student.load_state_dict(ckpt["student"], strict=False)
        opt.load_state_dict(ckpt["opt"])
        state = ckpt["state"]
        say(f"resumed at round {state['round']}, step {state['step']} ({state['tokens']} positions)")
    elif args.init_from:
        student.load_state_dict(load_file(Path(args.init_from) / DRAFT_FILE), strict=False)
        state["continued_from"] = draft_meta(args.init_from)
        say(f"continuing the draft in {args.init_from}")
    held_out = held_out_set(pair, work, args, say)
    prompts = data.instructions(args.seed)
    sampler = data.sampler_model(pair.target)
    budget = args.minutes * 60
    done = lambda: state["seconds"] >= budget or (args.steps and state["step"] >= args.steps)  # noqa: E731
    new_curve = not curve_path.exists()
    with open(curve_path, "a", newline="") as f:
        log = csv.writer(f)
        if new_curve:
            log.writerow(["round", "step", "tokens", "minutes", "train_loss", "eval_kl", "eval_top1",
                          "eval_acceptance"])
        while not done():
            start = time.perf_counter()
            examples = data.sampled_answers(pair, round_prompts(prompts, state["round"], args.round_prompts),
                                            args.answer_tokens, args.gen_batch, args.seed + 7919 * (state["round"] + 1),
                                            lambda m: None, model=sampler)
            state["sampling_seconds"] += time.perf_counter() - start
            def lr_at(step):
                return learning_rate(args, step, state["seconds"] + time.perf_counter() - start, budget)

            loss = train_on(pair, student, opt, examples, state, args, lr_at)
            state["round"] += 1
            state["seconds"] += time.perf_counter() - start
            if state["round"] % args.eval_every == 0 or done():
                evaluate(pair, student, held_out, state, args, log, say, loss)
                f.flush()
                torch.save({"student": own_state(student), "opt": opt.state_dict(), "state": state}, ckpt_path)
    return state


def teacher():
    """The bundled target alone (float32, frozen), as a Pair whose draft slot is unused."""
    target, tokenizer = smollm2_target(torch.float32, default_device())
    for p in target.parameters():
        p.requires_grad = False
    return make_pair("bundled target", target, target, tokenizer)
