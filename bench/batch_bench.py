"""The batched engine against the same rows one after another, side by side in one process (alternating, medians):

1. Compare's "paper's six rules" preset (6 rows) x 48 tokens on one prompt: batched vs rows one by one, same tokens;
2. a sweep (4 prompts x 5 rules x auto:3 x 16 tokens): rows per minute with chains side by side (``--lanes``) and
   one by one (lanes 1);
3. tokens per second of the whole batch against batch size (1, 2, 4, 8) for target-only and v3;
4. peak RSS of an 8-row batch against a single row (each in a fresh process).

    HF_HUB_OFFLINE=1 python bench/batch_bench.py [--pair bundled] [--runs 2] [--sweep-runs 1] [--lanes 8]

Writes the "Batches" section of docs/benchmarks.md, naming the CPU and its vector units.
"""
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.markdown import write_section  # noqa: E402
from bench.measure import bench_arguments  # noqa: E402
from cascade_core import generate, generate_batch  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402
from sweeps import load_prompts, sweep  # noqa: E402
from sweeps.chain import load_named_pair  # noqa: E402

SIX_RULES = [("chow", 0.5), ("diff", 0.1), ("opt", 0.2), ("v1", 0.2), ("v2", 0.2), ("v3", 0.5)]
PROMPTS = ["Who is Buzz Aldrin?", "Explain why the sky is blue.", "Write a short poem about autumn leaves.",
           "Give three tips for learning a language.", "What is a prime number?", "Describe a sunset at sea.",
           "Name the planets of the solar system.", "How do bees make honey?"]
SWEEP_RULES = ["chow", "diff", "opt", "v3", "lossy"]
GAMMA, TEMPERATURE = 4, 0.7


def one_by_one(pair, rows):
    return [generate(pair, gamma=GAMMA, **row) for row in rows]


def compare_rows(tokens):
    return [dict(prompt=PROMPTS[0], rule=rule, alpha=alpha, temperature=TEMPERATURE, seed=0, max_new_tokens=tokens,
                 details=True) for rule, alpha in SIX_RULES]


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def compare_section(pair, runs, tokens):
    rows = compare_rows(tokens)
    times = {"one by one": [], "batched": []}
    same = True
    for _ in range(runs):
        seconds, alone = timed(lambda: one_by_one(pair, rows))
        times["one by one"].append(seconds)
        seconds, batched = timed(lambda: generate_batch(pair, rows, gamma=GAMMA))
        times["batched"].append(seconds)
        same &= [t.tokens for t in alone] == [t.tokens for t in batched]
    median = {name: statistics.median(t) for name, t in times.items()}
    return median, same


def sweep_section(pair, runs, tokens, lanes):
    prompts = load_prompts(ROOT / "assets" / "prompts" / "default.jsonl")[:4]
    times, counts = {1: [], lanes: []}, {}
    same = True
    for _ in range(runs):
        outputs = {}
        for width in (1, lanes):
            seconds, rows = timed(lambda: sweep("bundled", prompts, SWEEP_RULES, "auto:3", [0], gamma=GAMMA,
                                                temperature=1.0, max_new_tokens=tokens, pair=pair, lanes=width))
            times[width].append(seconds)
            counts[width] = len(rows)
            outputs[width] = [r["text"] for r in rows]
        same &= outputs[1] == outputs[lanes]
    return {w: 60 * counts[w] / statistics.median(t) for w, t in times.items()}, counts[1], same


def scaling_section(pair, runs, tokens):
    """Tokens per second of a whole batch of n rows (different prompts), per rule."""
    table = {}
    for rule, alpha in (("target", 0.0), ("v3", 0.5)):
        for n in (1, 2, 4, 8):
            rows = [dict(prompt=PROMPTS[i], rule=rule, alpha=alpha, temperature=TEMPERATURE, seed=i,
                         max_new_tokens=tokens, stop_at_eos=False, details=False) for i in range(n)]
            seconds = statistics.median(timed(lambda: generate_batch(pair, rows, gamma=GAMMA))[0] for _ in range(runs))
            table[rule, n] = n * tokens / seconds
    return table


PEAK_SCRIPT = """
import json, resource, sys
sys.path.insert(0, {root!r})
from cascade_core import generate_batch
from sweeps.chain import load_named_pair
pair = load_named_pair({pair!r})
rows = [dict(prompt=p, rule="v3", alpha=0.5, temperature=0.7, seed=i, max_new_tokens={tokens}, stop_at_eos=False,
             details=False) for i, p in enumerate({prompts!r})]
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
generate_batch(pair, rows)
print(json.dumps([loaded, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))
"""


def peak_rss(pair_spec, rows, tokens):
    """[after loading, after the batch] peak RSS in MB of a fresh process running one batch of ``rows`` rows."""
    script = PEAK_SCRIPT.format(root=str(ROOT), pair=pair_spec, tokens=tokens, prompts=PROMPTS[:rows])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return [kb / 1024 for kb in json.loads(out.strip().splitlines()[-1])]


def main():
    parser = bench_arguments(__doc__)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--sweep-runs", type=int, default=1, help="the sweep is the long part: 1 run of each mode")
    args = parser.parse_args()
    pair = load_named_pair(args.pair)
    compare, compare_same = compare_section(pair, args.runs, args.tokens)
    per_minute, sweep_rows, sweep_same = sweep_section(pair, args.sweep_runs, 16, args.lanes)
    scaling = scaling_section(pair, args.runs, 32)
    single, eight = peak_rss(args.pair, 1, 64), peak_rss(args.pair, 8, 64)
    text = f"""## Batches ({args.pair} pair)

`python bench/batch_bench.py --pair {args.pair} --runs {args.runs}`, {time.strftime('%Y-%m-%d')}, on
{cpu_description()}, {torch.get_num_threads()} threads, torch {torch.__version__}. Side by side in one process,
alternating, medians of {args.runs} runs ({args.sweep_runs} of each sweep mode).

| what | one after another | batched | ratio | same tokens |
|---|---|---|---|---|
| Compare's six rules x {args.tokens} tokens (T {TEMPERATURE}, gamma {GAMMA}) | {compare['one by one']:.1f} s | {compare['batched']:.1f} s | {compare['one by one'] / compare['batched']:.2f}x | {compare_same} |
| sweep: 4 prompts x 5 rules x auto:3 x 16 tokens ({sweep_rows} rows) | {per_minute[1]:.1f} rows/min | {per_minute[args.lanes]:.1f} rows/min ({args.lanes} lanes) | {per_minute[args.lanes] / per_minute[1]:.2f}x | {sweep_same} |

Tokens per second of the whole batch (different prompts, 32 tokens each, EOS ignored):

| rows | {' | '.join(str(n) for n in (1, 2, 4, 8))} |
|---|---|---|---|---|
| target-only | {' | '.join(f"{scaling['target', n]:.1f}" for n in (1, 2, 4, 8))} |
| v3 alpha 0.5 | {' | '.join(f"{scaling['v3', n]:.1f}" for n in (1, 2, 4, 8))} |

Peak RSS (ru_maxrss of a fresh process, v3, 64 tokens a row): one row {single[1]:.0f} MB, 8 rows {eight[1]:.0f} MB:
{eight[1] / single[1]:.2f}x. The batch raised the peak left by loading the models by {single[1] - single[0]:.0f} MB
(one row) and {eight[1] - eight[0]:.0f} MB (8 rows).
"""
    print(text)
    write_section(ROOT / "docs" / "benchmarks.md", text, "## Batches")


if __name__ == "__main__":
    main()
