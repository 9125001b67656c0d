"""Two EAGLE-3 heads of the bundled target side by side, where timing cannot blur the comparison: what each
earns on the benchmark's prompts of every kind (assets/prompts/kinds.json, never trained on).

    python bench/heads_bench.py [--heads assets/head-smollm2 artifacts/head-kinds] [--gamma 3] [--rounds 2]

Lossless at a fixed gamma (gamma auto would choose block lengths from this hour's timings), T 0.7, EOS ignored, the
same seeds for both heads, on one loaded target. Per kind: the mean acceptance probability of a proposal (1 - TV
where the block reached it, the expected acceptance; issue 46's goal is >= 0.55), the share of proposals accepted
and the tokens per target call. Writes its section to docs/benchmarks.md.
"""
import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from bench.kinds_bench import KINDS, TEMPERATURE, acceptance_by_offset, tokens_for  # noqa: E402
from bench.markdown import write_section  # noqa: E402
from cascade_core import generate, load_pair  # noqa: E402
from cascade_core.head import load_head  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402


def traces_by_kind(pair, gamma, rounds, n):
    """{kind: [trace, ...]}: lossless at this gamma over the kind's prompts and the rounds' seeds."""
    out = {}
    for kind, prompts in KINDS.items():
        for prompt in prompts:
            for seed in range(rounds):
                out.setdefault(kind, []).append(generate(
                    pair, prompt, rule="lossless", gamma=gamma, temperature=TEMPERATURE, seed=seed,
                    max_new_tokens=tokens_for(kind, n), stop_at_eos=False))
    return out


def summary(traces):
    """Expected acceptance (mean accept_prob over every proposal the verification read), accepted share, tokens per
    target call and the expected acceptance by offset in the block."""
    probs = [pos["accept_prob"] for t in traces for pos in t.positions if pos["accept_prob"] is not None]
    return dict(expected=statistics.mean(probs), accepted=statistics.mean(t.stats["acceptance_rate"] for t in traces),
                per_call=statistics.mean(t.stats["tokens_per_target_call"] for t in traces),
                by_offset=acceptance_by_offset(traces))


def markdown(heads, results, args):
    a, b = heads
    lines = [f"## Two heads side by side: lossless acceptance by prompt kind, {cpu_description()}", "",
             f"`python bench/heads_bench.py --heads {a} {b} --gamma {args.gamma} --rounds {args.rounds} "
             f"--max-new-tokens {args.max_new_tokens}`, {time.strftime('%Y-%m-%d')}, torch {torch.__version__}; "
             f"the bundled target, lossless at gamma {args.gamma}, T {TEMPERATURE}, {args.max_new_tokens} tokens "
             f"({2 * args.max_new_tokens} for long answers; EOS ignored), seeds 0..{args.rounds - 1}, the "
             "benchmark's prompts (never trained on). Expected acceptance: the mean acceptance probability (1 - TV) "
             "of every proposal the verification read.", "",
             "| kind | expected acceptance | accepted | tokens per target call | by offset in the block |",
             "|---|---:|---:|---:|---|"]
    for kind in [*KINDS, "all"]:
        x, y = results[a][kind], results[b][kind]
        offsets = " / ".join(f"{u:.2f}->{v:.2f}" for u, v in zip(x["by_offset"], y["by_offset"]))
        lines.append(f"| {kind} | {x['expected']:.3f} -> **{y['expected']:.3f}** | {x['accepted']:.3f} -> "
                     f"{y['accepted']:.3f} | {x['per_call']:.2f} -> {y['per_call']:.2f} | {offsets} |")
    return "\n".join(lines + [""])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", nargs=2, default=["assets/head-smollm2", "artifacts/head-kinds"])
    p.add_argument("--gamma", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--out", default="docs/benchmarks.md", help="markdown file to update ('' to skip)")
    args = p.parse_args(argv)
    pair = load_pair("bundled", draft="head")
    results = {}
    for folder in args.heads:
        with_head = dataclasses.replace(pair, draft=load_head(folder, pair.target), prices={})
        by_kind = traces_by_kind(with_head, args.gamma, args.rounds, args.max_new_tokens)
        results[folder] = {kind: summary(ts) for kind, ts in by_kind.items()}
        results[folder]["all"] = summary([t for ts in by_kind.values() for t in ts])
        print(folder, {k: round(v["expected"], 3) for k, v in results[folder].items()}, flush=True)
    text = markdown(args.heads, results, args)
    print(text)
    if args.out:
        write_section(args.out, text, text.splitlines()[0].split(",")[0])
    return results


if __name__ == "__main__":
    main()
