"""Distil a small draft for the bundled target: a few of the target's own layers, trained to match it.

    python -m cascade_core distill --out assets/draft-smollm2 [--layers 0,1,2,3] [--minutes 60]

The student shares the target's embeddings, final norm and tied head (frozen, never stored again); only
its own layers are trained and shipped, in float16. Training runs in rounds of fresh data: the target
answers new instructions (sampled at T = 1), then the student learns those answers' positions against the
target's full distributions, computed on the spot (loss KL(p || q) + w TV(p, q)). The held-out set,
checkpoints and the learning curve live under --work (resumable: rerun the same command to continue).
Runs on CUDA when present (bfloat16 autocast), else the CPU; the same command serves both, with larger
rounds and batches on a GPU.
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


def precision(device):
    """bfloat16 autocast on CUDA (where the matrix units are), plain float32 on the CPU."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


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
        torch.save(data.sampled_answers(pair, prompts, 96, args.gen_batch, args.seed + 1, say,
                                        precision(pair.target.device)), path)
    return torch.load(path)


def round_prompts(prompts, round_index, n):
    """Round r's instructions: the next n of the shuffled list, wrapping around (then with new samples)."""
    return [prompts[(round_index * n + i) % len(prompts)] for i in range(n)]


def learning_rate(args, step, seconds, budget):
    """Linear warm-up over 50 steps, then cosine decay to a tenth over the time budget."""
    return args.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, seconds / budget))))


TRAINING_OPTIONS = ("layers", "minutes", "round_prompts", "answer_tokens", "gen_batch", "batch_tokens", "lr", "tv_weight")


def training_options(args):
    """The command-line options that shaped a draft, as they would be typed."""
    value = lambda v: ",".join(map(str, v)) if isinstance(v, list) else v  # noqa: E731
    return " ".join(f"--{name.replace('_', '-')} {value(getattr(args, name))}" for name in TRAINING_OPTIONS)


def train_on(pair, student, opt, examples, state, args, lr_at):
    """One pass over a round's answers, one optimiser step per batch of about --batch-tokens; the last loss."""
    params = [p for p in student.parameters() if p.requires_grad]
    for batch_ids in make_batches(examples, args.batch_tokens, args.seed + state["round"]):
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
    device = pair.target.device
    student = build_student(pair.target, args.layers)
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
    budget = args.minutes * 60
    done = lambda: state["seconds"] >= budget or (args.steps and state["step"] >= args.steps)  # noqa: E731
    new_curve = not curve_path.exists()
    with open(curve_path, "a", newline="") as f:
        log = csv.writer(f)
        if new_curve:
            log.writerow(["round", "step", "tokens", "minutes", "train_loss", "eval_kl", "eval_top1", "eval_acceptance"])
        while not done():
            start = time.perf_counter()
            examples = data.sampled_answers(pair, round_prompts(prompts, state["round"], args.round_prompts),
                                            args.answer_tokens, args.gen_batch, args.seed + 7919 * (state["round"] + 1),
                                            lambda m: None, precision(device))
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
    from .models import default_device, make_pair, smollm2_target

    target, tokenizer = smollm2_target(torch.float32, default_device())
    for p in target.parameters():
        p.requires_grad = False
    return make_pair("bundled target", target, target, tokenizer)


def continued_text(earlier):
    """How the draft a run started from was made (chains of --init-from runs, newest first)."""
    if not earlier:
        return ""
    return (f" It continued a draft trained on {earlier.get('device', 'cpu')} with `{earlier.get('options', '')}` "
            f"({earlier['tokens']} positions, {earlier['step']} steps, held-out 1 - TV "
            f"{earlier['held_out']['acceptance']:.3f}).") + continued_text(earlier.get("continued_from"))


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
    answers = {p: generate(pair, p, rule="draft", temperature=0, max_new_tokens=40).text
               for p in data.EVAL_PROMPTS}
    ho = meta["held_out"]
    lines = [
        f"## Bundled draft: {pair.description}", "",
        f"`python -m cascade_core distill --out {out} {meta.get('options', '')}` on {meta.get('device', 'cpu')} "
        f"(report: `--report-only`), {time.strftime('%Y-%m-%d')}. "
        f"Student initialised from target layers {meta['init_layers']}; embeddings, final norm and tied head shared "
        f"with the target and frozen; shipped file: its own layers in float16 "
        f"({(Path(out) / DRAFT_FILE).stat().st_size / 2**20:.1f} MiB). Best checkpoint: step {meta['step']}, "
        f"{meta['tokens']} training positions." + continued_text(meta.get("continued_from")), "",
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
    lines += ["", "Learning curve (held-out every few rounds):", "",
              "| round | step | training positions | minutes | train loss | held-out KL | top-1 | 1 - TV |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['step']} | {r['tokens']} | {r['minutes']} | {r['train_loss']} | {r['eval_kl']} | "
              f"{r['eval_top1']} | {r['eval_acceptance']} |"
              for r in curve[::stride] + ([curve[-1]] if (len(curve) - 1) % stride else [])]
    lines += ["", "The draft's own greedy answers to every held-out prompt (draft only, temperature 0, 40 tokens):", ""]
    lines += [f"- *{p}* {a!r}" for p, a in answers.items()]
    text = "\n".join(lines) + "\n"
    write_section("docs/benchmarks.md", text, "## Bundled draft:")
    return text


def distill(args):
    say = lambda m: print(m, flush=True)  # noqa: E731
    if not args.report_only:
        torch.manual_seed(args.seed)
        work = Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
        state = train(teacher(), work, args, say)
        say(f"done: best held-out 1 - TV {state['best_acceptance']:.3f}; draft in {args.out}/{DRAFT_FILE}")
    if not args.no_report:
        say(report(args.work, args.out, say=say))


def add_distill_parser(sub):
    p = sub.add_parser("distill", help="distil a draft for the bundled target (resumable)")
    p.add_argument("--out", default="assets/draft-smollm2")
    p.add_argument("--work", default="artifacts/distill", help="held-out set, checkpoint, learning curve")
    p.add_argument("--layers", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2, 3],
                   help="target layers the student starts from")
    p.add_argument("--minutes", type=float, default=60.0, help="time budget for generating and training")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: use --minutes)")
    p.add_argument("--round-prompts", type=int, default=64, help="fresh instructions answered per round")
    p.add_argument("--answer-tokens", type=int, default=96)
    p.add_argument("--gen-batch", type=int, default=16, help="answers sampled at once")
    p.add_argument("--batch-tokens", type=int, default=4096, help="tokens per training step")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--tv-weight", type=float, default=1.0, help="weight of TV(p, q) beside KL(p || q) in the loss")
    p.add_argument("--eval-every", type=int, default=5, help="rounds between held-out evaluations")
    p.add_argument("--eval-samples", type=int, default=2, help="held-out answers sampled per held-out prompt")
    p.add_argument("--init-from", help="start from a shipped draft's layers (e.g. one trained on a GPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report-only", action="store_true", help="only evaluate the shipped draft into docs/benchmarks.md")
    p.add_argument("--no-report", action="store_true", help="train only; skip the CPU-timed report")
    p.set_defaults(func=distill)
