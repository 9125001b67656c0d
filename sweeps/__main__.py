"""``python -m sweeps``: the quality/cost frontier of rules over a prompt set (docs/sweeps.md, "Running a sweep").

    python -m sweeps --pair bundled --prompts assets/prompts/default.jsonl --rules lossless,opt,v3 \\
        --alphas auto:6 --seeds 0,1 --gamma 4 --temperature 1 --max-new-tokens 64 --out runs/bundled-default [--ray]

Writes rows.jsonl (appended as chains finish; rerun the same command to resume), summary.csv and report.html.
Bad input is one ``error:`` line and exit status 2; nothing already written is lost.
"""
import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from cascade_core.formats.loading import with_draft
from cascade_core.tools.cli import OneLineErrors, attach_values

from .prompts import load_prompts, per_category
from .report import write_report, write_summary
from .sweep import LANES, sweep


def parse_args(argv):
    p = OneLineErrors(prog="python -m sweeps", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pair", default="bundled", help="tiny | bundled | 'draft_id -> target_id'")
    p.add_argument("--draft", help="model | head (the pair's independent draft or its EAGLE-3 head), or a draft "
                                   "model's or an EAGLE-3 head's hub id or folder for the pair's target")
    p.add_argument("--prompts", default="assets/prompts/default.jsonl", help="JSONL prompt set")
    p.add_argument("--per-category", type=int, help="only the first N prompts of each category")
    p.add_argument("--rules", default="lossless,lossy,chow,diff,opt,v1,v2,v3", help="comma-separated rules")
    p.add_argument("--alphas", default="auto:6", help="auto:N, or comma-separated numbers")
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--gamma", type=int, default=4)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--out", required=True, help="folder for rows.jsonl, summary.csv and report.html")
    p.add_argument("--lanes", type=int, default=LANES, help="chains decoded side by side in one batch (1: one by one)")
    p.add_argument("--no-share", action="store_true", help="run every alpha from scratch (no prefix sharing)")
    p.add_argument("--ray", action="store_true", help="run the chains on a local Ray instance, one worker per core")
    p.add_argument("--ray-address", help="run them on an existing Ray cluster instead, e.g. ray://host:10001")
    return p.parse_args(attach_values(argv, {"--alphas", "--seeds", "--temperature"}))


def seeds(text):
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: give whole numbers separated by commas") from None


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    bar = None
    try:
        args.pair = with_draft(args.pair, args.draft)
        prompts = load_prompts(args.prompts)
        if args.per_category is not None:
            if args.per_category < 1:
                raise ValueError(f"--per-category {args.per_category}: give 1 or more prompts per category")
            prompts = per_category(prompts, args.per_category)
        bar = tqdm(desc="chains", unit="chain", file=sys.stderr)

        def progress(done, total, rows):
            bar.total = total
            bar.n = done
            bar.refresh()

        rows = sweep(args.pair, prompts, [r for r in args.rules.split(",") if r], args.alphas, seeds(args.seeds),
                     gamma=args.gamma, temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                     share_prefix=not args.no_share, lanes=args.lanes, ray=args.ray, ray_address=args.ray_address,
                     out=args.out, progress=progress)
    except ValueError as error:
        if bar is not None:
            bar.close()
        print(f"error: {error}", file=sys.stderr)
        return 2
    bar.close()
    out = Path(args.out)
    write_summary(rows, out / "summary.csv")
    write_report(rows, out / "report.html", f"Sweep of {args.pair} over {args.prompts}")
    generated = sum(r["generated_tokens"] for r in rows)
    print(f"{len(rows)} rows ({sum(r['tokens'] for r in rows)} tokens in them, {generated} generated) in {out}: "
          "rows.jsonl, summary.csv, report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
