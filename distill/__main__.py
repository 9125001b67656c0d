"""``python -m distill --out assets/draft-smollm2 [--minutes 60] ...``: train (resumable) and report.
``python -m distill --head-vocabulary 8192``: rank the draft head's vocabulary from the target's answers instead.
``python -m distill --head --out assets/head-smollm2 --work artifacts/distill-head``: train an EAGLE-3 head
(``--report-only``: the bundled head's section of docs/benchmarks.md)."""
import argparse
from pathlib import Path

import torch

from cascade_core.formats.shipped_draft import DRAFT_FILE

from .head import train_head
from .report import head_report, report
from .train import teacher, train
from .vocab import rank_head_vocabulary


def distill(args):
    say = lambda m: print(m, flush=True)  # noqa: E731
    if args.head and args.report_only:
        say(head_report(args.work, say=say))
        return
    if args.head:
        state = train_head(teacher(), args, say)
        say(f"done: {state['step']} steps; best held-out drafted tokens kept per block of {args.unroll} at T 0.7: "
            f"{state['best']:.3f}; head in {args.out}")
        return
    if args.head_vocabulary:
        rank_head_vocabulary(teacher(), args.out, args.work, args.head_vocabulary, args.round_prompts,
                             args.answer_tokens, args.gen_batch, args.seed, say)
        return
    if not args.report_only:
        torch.manual_seed(args.seed)
        work = Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
        state = train(teacher(), work, args, say)
        say(f"done: best held-out 1 - TV {state['best_acceptance']:.3f}; draft in {args.out}/{DRAFT_FILE}")
    if not args.no_report:
        say(report(args.work, args.out, say=say))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distill", description=__doc__)
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
    p.add_argument("--head-vocabulary", type=int, default=0, metavar="N",
                   help="only rank the draft head's vocabulary: the N tokens the target writes most, counted in its "
                        "answers to --round-prompts instructions (stored in the draft file)")
    p.add_argument("--head", action="store_true", help="train an EAGLE-3 head (the draft that reads the target)")
    p.add_argument("--draft-vocabulary", type=int, default=8192, help="head mode: the head's vocabulary size")
    p.add_argument("--rounds", type=int, default=24, help="head mode: rounds of --round-prompts answers to train on")
    p.add_argument("--unroll", type=int, default=3, help="head mode: k, the training-time test's unrolled steps")
    p.add_argument("--first-step-minutes", type=float, default=0.0,
                   help="head mode: train the first drafting step alone (k = 1) for this many minutes of the budget")
    p.add_argument("--eager-loss", dest="compile", action="store_false",
                   help="head mode: the loss without torch.compile (compiled: 2.4x faster here, after a ~16 s compile)")
    p.add_argument("--report-only", action="store_true", help="only evaluate the shipped draft into docs/benchmarks.md")
    p.add_argument("--no-report", action="store_true", help="train only; skip the CPU-timed report")
    return p.parse_args(argv)


if __name__ == "__main__":
    distill(parse_args())
