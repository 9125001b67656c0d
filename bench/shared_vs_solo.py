"""How often a row decoded beside other calls' rows parts from its solo run, and whether every parting starts at a
decision its trace marks as a near-tie (sampling.NEAR_TIE). Each round steps nine calls of mixed rules, gammas and
temperatures (issue 47's mix, seeds shifted by the round) in one RunningBatches, as the server's engine thread steps
its callers, the ninth starting 20 blocks after the others; then every row is run alone and compared.

    HF_HUB_OFFLINE=1 python bench/shared_vs_solo.py [--pair tiny] [--rounds 10]
    HF_HUB_OFFLINE=1 python bench/shared_vs_solo.py --cost [--rounds 3]   # the nine calls shared, then reproducible

``--cost`` times what ``reproducible`` costs: the same nine calls' wall time, shared and each decoding alone,
alternating round by round (medians).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the tests' own modules import each other by name

from cascade_core import generate, load_pair, stream  # noqa: E402
from cascade_core.running import RunningBatches  # noqa: E402
from test_reproducible import E5, OTHERS, first_difference  # noqa: E402
from test_running import interleaved  # noqa: E402


def shared_round(pair, calls):
    """Every call's trace, the calls stepped in turn in one RunningBatches, the last starting 20 rounds late."""
    batches = RunningBatches()
    generations = [stream(pair, prompt, batches=batches, **kw) for prompt, kw in calls]
    return interleaved(generations, start_at=[0] * (len(calls) - 1) + [20])


def round_calls(r, **settings):
    calls = [(f"Tell me about {i}", dict(kw, seed=kw["seed"] + 100 * r, **settings)) for i, kw in enumerate(OTHERS)]
    return calls + [("e5", dict(E5, seed=E5["seed"] + 100 * r, **settings))]


def cost(pair, rounds):
    seconds = {"shared": [], "reproducible": []}
    for r in range(rounds):
        for name in seconds:
            start = time.perf_counter()
            shared_round(pair, round_calls(r, reproducible=name == "reproducible"))
            seconds[name].append(time.perf_counter() - start)
    for name, values in seconds.items():
        print(f"| nine calls, {name} | {statistics.median(values):.2f} s |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", default="tiny")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cost", action="store_true")
    args = parser.parse_args()
    pair = load_pair(args.pair, draft="model", progress=lambda m: None)
    if args.cost:
        return cost(pair, args.rounds)
    rows = tokens = parted = marked_partings = marked = 0
    for r in range(args.rounds):
        calls = round_calls(r)
        for (prompt, kw), shared in zip(calls, shared_round(pair, calls)):
            solo = generate(pair, prompt, **kw)
            rows, tokens = rows + 1, tokens + len(solo.tokens)
            marked += sum(bool(pos["near_tie"]) for pos in solo.positions)
            k = first_difference(solo, shared)
            if k is not None:
                parted += 1
                marked_partings += bool(solo.positions[k]["near_tie"] or shared.positions[k]["near_tie"])
        print(f"round {r + 1}: {rows} rows, {parted} parted from their solo runs", flush=True)
    print(f"| rows decoded beside other calls | {rows} ({tokens} tokens) |")
    print(f"| rows whose text parted from their solo run | {parted} |")
    print(f"| partings that began at a marked near-tie | {marked_partings} of {parted} |")
    print(f"| positions marked as near-ties (solo runs) | {marked} ({1000 * marked / tokens:.2f} per 1000 tokens) |")


if __name__ == "__main__":
    main()
