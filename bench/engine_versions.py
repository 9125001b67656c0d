"""Two versions of the engine side by side on this machine: each round runs every prompt in a fresh process of each
version (alternating, so a drifting machine speed hits both alike), at the app's defaults on the bundled pair with
its default draft; medians of ms per token and of the engine's own ms per block.

    python bench/engine_versions.py --before /path/to/an/older/checkout [--rounds 3] [--max-new-tokens 64]
        [--rule v3|lossless] [--prompts profile|kinds]

``--prompts kinds`` runs bench/kinds_bench.py's 14 prompts of seven kinds and adds a row per prompt (where a change
acts on some prompts only, as gamma auto's floor does).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.block_profile import PROMPTS  # noqa: E402  (the same prompts as the profile)
from bench.kinds_bench import KINDS  # noqa: E402
from bench.markdown import write_section  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402
# One process: load the pair, measure gamma auto's prices, warm up, then time each prompt once.
CHILD = """
import json, sys, time, torch
from cascade_core import generate, load_pair
try:
    from cascade_core.batch import measure_auto_prices
except ImportError:
    from cascade_core.engine import measure_auto_prices
pair = load_pair("bundled")
measure_auto_prices(pair)
generate(pair, "Hello", rule="v3", alpha=0.5, gamma="auto", temperature=0.7, max_new_tokens=16)
out = []
for seed, prompt in enumerate(json.loads(sys.argv[1])):
    start = time.perf_counter()
    trace = generate(pair, prompt, rule=sys.argv[3], alpha=0.5, gamma="auto", temperature=0.7, seed=seed,
                     max_new_tokens=int(sys.argv[2]), stop_at_eos=False)
    out.append(dict(ms_per_token=(time.perf_counter() - start) * 1e3 / len(trace.tokens),
                    engine_ms_per_block=(trace.stats["overhead_seconds_per_block"] or 0) * 1e3,
                    tokens_per_target_call=trace.stats.get("tokens_per_target_call")))
print(json.dumps(out))
"""


def run(root, prompts, tokens, rule):
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(prompts), str(tokens), rule], cwd=root, check=True,
                          capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--label", default="", help="what the two versions are (the section's title)")
    parser.add_argument("--write", action="store_true", help="write the table to docs/benchmarks.md")
    parser.add_argument("--rule", default="v3", choices=["v3", "lossless"], help="v3 at alpha 0.5, or lossless")
    parser.add_argument("--prompts", default="profile", choices=["profile", "kinds"])
    args = parser.parse_args()
    prompts = PROMPTS if args.prompts == "profile" else [p for ps in KINDS.values() for p in ps]
    results = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name, root in (("before", args.before), ("after", ROOT)):
            results[name] += run(root, prompts, args.max_new_tokens, args.rule)
    table = "\n".join(summary(results) + (per_prompt(results, prompts) if args.prompts == "kinds" else []))
    print(table)
    if args.write:
        title = f"## Engine before and after{args.label}"
        command = " ".join(["python bench/engine_versions.py"] + sys.argv[1:])
        write_section(ROOT / "docs" / "benchmarks.md", f"{title}\n\n`{command}`, {time.strftime('%Y-%m-%d')}, "
                      f"{cpu_description()}. The bundled pair with its default draft at the app's defaults ("
                      f"{'v3 alpha 0.5' if args.rule == 'v3' else 'lossless'}, gamma auto, T 0.7), "
                      f"{args.max_new_tokens} tokens (EOS ignored), {len(prompts)} "
                      f"prompts x {args.rounds} rounds, each version in its own processes, alternating.\n\n"
                      f"{table}\n", title)


def summary(results):
    lines = ["| engine | ms per token (median) | engine's own ms per block (median) |", "|---|---:|---:|"]
    return lines + [f"| {name} | {statistics.median(r['ms_per_token'] for r in rows):.2f} | "
                    f"{statistics.median(r['engine_ms_per_block'] for r in rows):.2f} |" for name, rows in results.items()]


def per_prompt(results, prompts):
    """Per prompt, the median ms per token of each version over the rounds, and after / before."""
    n = len(prompts)
    lines = ["", "| prompt | before ms/token | after ms/token | after speed / before |", "|---|---:|---:|---:|"]
    for i, prompt in enumerate(prompts):
        before, after = (statistics.median(r["ms_per_token"] for r in results[name][i::n]) for name in ("before", "after"))
        lines.append(f"| {prompt} | {before:.1f} | {after:.1f} | {before / after:.2f}x |")
    return lines


if __name__ == "__main__":
    main()
