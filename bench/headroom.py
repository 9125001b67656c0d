"""Which term of the cost model holds the default's speed-up back: the same projection with one term changed at a time.

    python bench/headroom.py [--pair bundled] [--max-new-tokens 64]

Runs the app's default (v3 alpha 0.5, T 0.7, gamma auto, details on) once on each of kinds_bench's prompts to read
its acceptance and the engine's own time per block, measures the pair's calls on this machine, then prices a block
(costs.priced_speedup, at the gamma of AUTO_GAMMAS it prices best, as gamma auto chooses) with the acceptance, the
engine's time and the draft's call each set to what a target or an idea would make them, the others as measured.
The projection leaves out gamma auto's floor (tokens the target samples alone), so it reads the drafted blocks only.
Writes its section to docs/benchmarks.md with the CPU flags.
"""
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.kinds_bench import KINDS, TEMPERATURE, run  # noqa: E402
from bench.markdown import write_section  # noqa: E402
from bench.measure import known_median, named_pair, speed_arguments  # noqa: E402
from cascade_core.batch import measure_auto_prices  # noqa: E402
from cascade_core.costs import best_gamma, priced_speedup  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402
from cascade_core.prices import block_prices  # noqa: E402
from cascade_core.settings import AUTO_GAMMAS  # noqa: E402


def measured_terms(pair, n):
    """(median acceptance, median engine seconds per block) of the default's runs, one per benchmark prompt."""
    stats = [run(pair, prompt, "v3", 0.5, 0, n)[1].stats for prompts in KINDS.values() for prompt in prompts]
    engine = known_median(s["overhead_seconds_per_block"] for s in stats)
    return statistics.median(s["acceptance_rate"] or 0.0 for s in stats), 0.0 if engine is None else engine


def projection(pair, acceptance, engine_seconds, draft_scale=1.0):
    """(speed-up, gamma) of the best-priced block at this acceptance, engine time and draft call (times draft_scale)."""
    prices = block_prices(pair, engine_seconds)

    def price(gamma):
        target, draft, verify, overhead = prices(gamma)
        return target, draft * draft_scale, verify, overhead
    gamma = best_gamma(acceptance, price, AUTO_GAMMAS)
    return priced_speedup(acceptance, gamma, *price(gamma)), gamma


def grid(pair, acceptance, engine_seconds):
    """Rows (label, acceptance) x columns (label, engine seconds, draft scale): the projections."""
    rows = [(f"as measured ({acceptance:.2f})", acceptance)] + [(f"{a:.2f}", a) for a in (0.55, 0.60, 0.65, 0.70)
                                                                  if a > acceptance + 0.02]
    columns = [(f"engine {1e3 * engine_seconds:.2f} ms (measured)", engine_seconds, 1.0),
               ("engine 1.5 ms", 1.5e-3, 1.0), ("engine 0 ms", 0.0, 1.0),
               ("draft call halved", engine_seconds, 0.5)]
    return rows, columns, {(r, c): projection(pair, a, e, s) for r, a in rows for c, e, s in columns}


def markdown(pair, n, acceptance, engine_seconds):
    rows, columns, cells = grid(pair, acceptance, engine_seconds)
    price = block_prices(pair)(3)
    lines = [f"## What holds the default's speed-up back: {pair.name} pair, {pair.draft_kind} draft, "
             f"{cpu_description()}", "",
             f"`python bench/headroom.py --pair {pair.name} --max-new-tokens {n}`, {time.strftime('%Y-%m-%d')}, "
             f"{torch.get_num_threads()} threads, torch {torch.__version__}; {pair.description}. v3 alpha 0.5, "
             f"T {TEMPERATURE}, gamma auto, details on, {n} tokens, seed 0, one run per benchmark prompt: acceptance "
             f"{acceptance:.3f}, the engine's own time {1e3 * engine_seconds:.2f} ms per block (medians). The pair's "
             f"calls on this machine: a target token {1e3 * price[0]:.1f} ms, a draft call {1e3 * price[1]:.2f} ms, "
             f"a 4-token verification {1e3 * price[2]:.1f} ms. Each cell: the cost model's speed-up over target-only "
             "(costs.priced_speedup at the best-priced gamma, which follows it) with one term changed.", "",
             "| acceptance | " + " | ".join(c for c, _, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for r, _ in rows:
        lines.append(f"| {r} | " + " | ".join(f"{cells[r, c][0]:.2f}x (gamma {cells[r, c][1]})"
                                             for c, _, _ in columns) + " |")
    base = cells[rows[0][0], columns[0][0]][0]
    per_ms = (cells[rows[0][0], columns[2][0]][0] - base) / (1e3 * engine_seconds) if engine_seconds else 0.0
    lines += ["", f"- Each ms of the engine's own time is worth {per_ms:.3f}x here ({100 * per_ms / base:.1f}% of the "
              f"speed-up); the draft's calls halved, {cells[rows[0][0], columns[3][0]][0] - base:+.2f}x; the "
              f"acceptance at 0.55, {projection(pair, 0.55, engine_seconds)[0] - base:+.2f}x.", ""]
    return "\n".join(lines)


def main(argv=None):
    args = speed_arguments(__doc__, 64, rounds=False).parse_args(argv)
    pair = named_pair(args)
    measure_auto_prices(pair)  # before any run, on a quiet machine
    acceptance, engine_seconds = measured_terms(pair, args.max_new_tokens)
    text = markdown(pair, args.max_new_tokens, acceptance, engine_seconds)
    print(text)
    if args.out:
        write_section(args.out, text, text.splitlines()[0].split(":")[0])
    return text


if __name__ == "__main__":
    main()
