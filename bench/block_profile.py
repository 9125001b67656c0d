"""Where a block's time goes beside the model calls: the engine's own work per block, phase by phase, on one solo run.

    python bench/block_profile.py [--pair bundled] [--draft head] [--runs 3] [--max-new-tokens 64]

Each phase is the wall time of the engine's functions that make it up (wrapped for the run, summed, per block),
at the app's defaults (v3 alpha 0.5, gamma auto, T 0.7, details on); "model calls" are the forwards themselves
(CachedModel's clock). "engine, unattributed" is the block's time beyond the model calls and the named phases.
It prints a markdown table and writes it to docs/benchmarks.md's "Engine time per block" section with the CPU flags.
"""
import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.markdown import write_section  # noqa: E402
from cascade_core import batch as batch_module  # noqa: E402
from cascade_core import load_pair, trace  # noqa: E402
from cascade_core.batch import Batch, measure_auto_prices  # noqa: E402
from cascade_core.cached import CachedModel  # noqa: E402
from cascade_core.head_draft import HeadDraft  # noqa: E402
from cascade_core.model_draft import ModelDraft  # noqa: E402
from cascade_core.engine import generate  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402
from cascade_core.models import with_draft  # noqa: E402

PROMPTS = ["Write a haiku about rain on a tin roof.", "List three uses of a paperclip.", "What is 17 times 3?"]
# phase -> (object holding the function, its name)
PHASES = {
    "uniforms (position-keyed)": (batch_module, "position_uniforms"),
    "which rows the target reads": (batch_module, "needs_target"),
    "rule + verification": (batch_module, "decide"),
    "trace records (details)": (trace.Trace, "add_block"),
    "gamma auto's choice": (Batch, "block_gamma"),
    "checkpoint (undo on a fault)": (Batch, "checkpoint"),
}


def wrap(owner, name, totals, key):
    """owner.name timed into totals[key]; returns the function to put back."""
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - start

    setattr(owner, name, timed)
    return original


def wrap_beside_calls(owner, name, totals, key):
    """owner.name timed into totals[key] less the model calls it makes (its object's ``seconds`` clock)."""
    original = getattr(owner, name)

    def timed(self, *args, **kwargs):
        start, calls = time.perf_counter(), self.seconds
        try:
            return original(self, *args, **kwargs)
        finally:
            totals[key] += time.perf_counter() - start - (self.seconds - calls)

    setattr(owner, name, timed)
    return original


# (phase, object holding the function, its name): both drafts' functions time into one phase
BESIDE_CALLS = [("drafting, beside the draft's forwards", HeadDraft, "propose"),
                ("drafting, beside the draft's forwards", ModelDraft, "propose"),
                ("draft catch-up, beside its forwards", HeadDraft, "catch_up"),
                ("draft catch-up, beside its forwards", ModelDraft, "catch_up"),
                ("CachedModel calls beside their forwards (both models: inside the rows above)", CachedModel,
                 "__call__")]


def profile(pair, prompt, tokens, seed):
    """(per-phase seconds per block, model-call seconds per block, block seconds, blocks) for one solo run."""
    totals, blocks = defaultdict(float), []
    step = Batch.step

    def timed_step(self):
        calls = self.target.seconds + self.draft.seconds
        start = time.perf_counter()
        try:
            return step(self)
        finally:
            blocks.append((time.perf_counter() - start, self.target.seconds + self.draft.seconds - calls))

    originals = [(owner, name, wrap(owner, name, totals, key)) for key, (owner, name) in PHASES.items()]
    originals += [(owner, name, wrap_beside_calls(owner, name, totals, key)) for key, owner, name in BESIDE_CALLS]
    Batch.step = timed_step
    try:
        generate(pair, prompt, rule="v3", alpha=0.5, gamma="auto", temperature=0.7, seed=seed, max_new_tokens=tokens,
                 stop_at_eos=False)
    finally:
        Batch.step = step
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)
    n = len(blocks)
    return ({k: v / n for k, v in totals.items()}, sum(c for _, c in blocks) / n, sum(b for b, _ in blocks) / n, n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="bundled")
    parser.add_argument("--draft", default="head")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--write", action="store_true", help="write the table to docs/benchmarks.md")
    parser.add_argument("--label", default="", help="a title suffix (before / after)")
    args = parser.parse_args()
    pair = load_pair(with_draft(args.pair, args.draft))
    measure_auto_prices(pair)
    runs = [profile(pair, PROMPTS[i % len(PROMPTS)], args.max_new_tokens, i) for i in range(args.runs)]
    table = report(runs)
    print(table)
    if args.write:
        title = f"## Engine time per block{args.label}"
        command = " ".join(["python bench/block_profile.py"] + sys.argv[1:])
        write_section(Path("docs/benchmarks.md"), f"{title}\n\n`{command}`, {time.strftime('%Y-%m-%d')}, "
                      f"{cpu_description()}, torch {torch.__version__}, {torch.get_num_threads()} threads. "
                      f"{WHAT}\n\n{table}\n", title)


WHAT = ("The bundled pair with its EAGLE-3 head at the app's defaults (v3 alpha 0.5, gamma auto, T 0.7, details on), "
        "64 tokens (EOS ignored), one solo run per prompt; each phase is the wall time of the engine's functions "
        "that make it up, per block, outside the model forwards.")


def report(runs):
    """A markdown table of the medians over runs, ms per block."""
    ms = lambda values: f"{statistics.median(values) * 1e3:.2f}"  # noqa: E731
    phases = list(dict.fromkeys(k for r in runs for k in r[0]))
    engine = [block - calls for _, calls, block, _ in runs]
    named = [sum(v for k, v in r[0].items() if not k.startswith("CachedModel")) for r in runs]
    lines = ["| ms per block (median of runs) | ms |", "|---|---:|",
             f"| block | {ms([r[2] for r in runs])} |", f"| model calls (forwards) | {ms([r[1] for r in runs])} |",
             f"| **engine's own time** (block - model calls) | **{ms(engine)}** |"]
    lines += [f"| {k} | {ms([r[0].get(k, 0.0) for r in runs])} |" for k in phases]
    lines.append(f"| engine, unattributed | {ms([e - n for e, n in zip(engine, named)])} |")
    lines.append(f"\n{statistics.median(r[3] for r in runs)} blocks per run.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
