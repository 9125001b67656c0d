"""gamma auto's floor, measured: lossless with gamma auto (which may take the target's own token where no block pays)
against lossless at gamma 1 (what gamma auto picks nearly always on this pair, never floored) and the target alone,
rotating per prompt in one process (a drifting machine hits all three alike), on bench/kinds_bench.py's prompts.

    python bench/floor_bench.py [--rounds 2] [--max-new-tokens 64]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kinds_bench import KINDS, TEMPERATURE  # noqa: E402
from bench.markdown import write_section  # noqa: E402
from cascade_core import generate, load_pair  # noqa: E402
from cascade_core.batch import measure_auto_prices  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402

METHODS = [("target", 1), ("lossless", "auto"), ("lossless", 1)]
TITLE = "## gamma auto's floor, side by side"


def measure(pair, rounds, n):
    """{prompt: {(rule, gamma): [(tokens/s, share of the target's own tokens), ...]}}"""
    results = {}
    for r in range(rounds):
        for i, prompt in enumerate(p for ps in KINDS.values() for p in ps):
            turn = (r + i) % len(METHODS)
            for rule, gamma in METHODS[turn:] + METHODS[:turn]:
                start = time.perf_counter()
                trace = generate(pair, prompt, rule=rule, gamma=gamma, temperature=TEMPERATURE, seed=r,
                                 max_new_tokens=n, stop_at_eos=False)
                results.setdefault(prompt, {}).setdefault((rule, gamma), []).append(
                    (n / (time.perf_counter() - start), trace.stats["target_alone_share"]))
    return results


def markdown(results, rounds, n):
    lines = [TITLE, "", f"`python bench/floor_bench.py --rounds {rounds} --max-new-tokens {n}`, "
             f"{time.strftime('%Y-%m-%d')}, {cpu_description()}; bundled pair, head draft, T {TEMPERATURE}, {n} tokens "
             "(EOS ignored), the three methods rotating per prompt in one process; medians over the rounds.", "",
             "| prompt | target tok/s | lossless, gamma auto (floor) | lossless, gamma 1 | target's own tokens |",
             "|---|---:|---:|---:|---:|"]
    ratios = {"auto": [], "one": []}
    for prompt, m in results.items():
        base = statistics.median(s for s, _ in m[("target", 1)])
        auto = statistics.median(s for s, _ in m[("lossless", "auto")]) / base
        one = statistics.median(s for s, _ in m[("lossless", 1)]) / base
        ratios["auto"].append(auto)
        ratios["one"].append(one)
        share = statistics.median(a for _, a in m[("lossless", "auto")])
        lines.append(f"| {prompt} | {base:.1f} | {auto:.2f}x | {one:.2f}x | {share:.0%} |")
    lines += ["", f"- gamma auto: median {statistics.median(ratios['auto']):.2f}x, lowest {min(ratios['auto']):.2f}x; "
              f"gamma 1: median {statistics.median(ratios['one']):.2f}x, lowest {min(ratios['one']):.2f}x.", ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--out", default="docs/benchmarks.md", help="markdown file to update ('' to skip)")
    args = p.parse_args(argv)
    pair = load_pair("bundled", progress=lambda m: None)
    measure_auto_prices(pair)
    generate(pair, "Hello", rule="v3", alpha=0.5, gamma="auto", temperature=TEMPERATURE, max_new_tokens=16)  # warm-up
    text = markdown(measure(pair, args.rounds, args.max_new_tokens), args.rounds, args.max_new_tokens)
    print(text)
    if args.out:
        write_section(args.out, text, TITLE)


if __name__ == "__main__":
    main()
