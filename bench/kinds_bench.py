"""The app's default against the target alone, prompt by prompt and kind by kind: where the cascade pays and where not.

    python -m bench.kinds_bench [--pair bundled] [--rounds 2] [--max-new-tokens 64]

The bundled pair at the app's defaults (its default draft, T 0.7, gamma auto, details on): v3 alpha 0.5 and lossless
against target-only, alternating per prompt in one process, EOS ignored (long answers run twice the tokens). Prompts:
assets/prompts/kinds.json, of every kind the page offers and users type, none composed by distill's templates nor
among its held-out prompts. Per prompt: the speed-up (median over rounds), the acceptance by position in the block
(does the head's acceptance fall with the distance from the target's features?), the gammas gamma auto chose, and the
cost model's projection from the pair's measured calls and the run's own engine time, to see which term holds a slow
prompt back. Writes its section to docs/benchmarks.md with the CPU flags.
"""
import statistics
from collections import Counter

from bench.harness import (acceptance_by_step, alternate, decode, known_median, named_pair, projected, prompt_kinds,
                           shown_number, speed_arguments, stamp, write_section)
from cascade_core.decoding.batch_block import measure_auto_prices
from cascade_core.speed.kernels import cpu_description

LONG = ("long answer",)  # kinds that run twice the tokens
TEMPERATURE = 0.7  # the app's default
METHODS = [("target", 0.0), ("v3", 0.5), ("lossless", 0.0)]  # the app's default rule and the lossless one, gamma auto


def tokens_for(kind, n):
    """The tokens a prompt of this kind runs: long answers twice the others'."""
    return 2 * n if kind in LONG else n


def run(pair, kind, prompt, rule, alpha, seed, n):
    """(tokens/s, trace) of one run at the app's defaults, gamma auto (target-only: one token a call)."""
    return decode(pair, prompt, rule=rule, alpha=alpha, gamma="auto" if rule != "target" else 1,
                  temperature=TEMPERATURE, seed=seed, max_new_tokens=tokens_for(kind, n), stop_at_eos=False)


def asked(limit=None):
    """[(kind, prompt)] of the benchmark's prompts, at most ``limit`` per kind."""
    return [(kind, p) for kind, ps in prompt_kinds().items() for p in ps[:limit]]


def measure(pair, rounds, n, say):
    """{(kind, prompt): {rule: [(tokens/s, trace), ...]}}, the methods alternating."""
    results = alternate(METHODS, asked(), rounds,
                        lambda case, method, r: run(pair, *case, *method, r, n), say)
    out = {}
    for (case, (rule, _)), runs in results.items():
        out.setdefault(case, {})[rule] = runs
    return out


def prompt_row(pair, runs):
    base = statistics.median(s for s, _ in runs["target"])
    row = {}
    for rule in ("v3", "lossless"):
        traces = [t for _, t in runs[rule]]
        row[rule] = dict(speedup=statistics.median(s for s, _ in runs[rule]) / base,
                         projected=statistics.median(projected(pair, t) for t in traces),
                         acceptance=statistics.median(t.stats["acceptance_rate"] or 0.0 for t in traces),
                         alone=statistics.median(t.stats["target_alone_share"] for t in traces),
                         per_call=statistics.median(t.stats["tokens_per_target_call"] for t in traces),
                         engine_ms=known_median(1e3 * t.stats["overhead_seconds_per_block"] for t in traces
                                                if t.stats["overhead_seconds_per_block"] is not None),
                         gammas=Counter(g for t in traces for g in t.counters.get("gammas", [])),
                         by_offset=acceptance_by_step(traces))
    row["target_tok_s"] = base
    return row


def markdown(pair, rows, rounds, n):
    lines = [f"## The default, prompt by prompt and kind by kind: {pair.name} pair, {pair.draft_kind} draft, "
             f"{cpu_description()}", "",
             f"`python -m bench.kinds_bench --pair {pair.name} --rounds {rounds} --max-new-tokens {n}`, {stamp()}; "
             f"{pair.description}. T {TEMPERATURE}, gamma auto, details on, {n} tokens ({2 * n} for long answers; "
             f"EOS ignored), {rounds} rounds (seed = round), the three methods alternating per prompt; medians. "
             "Projected: the cost model at the run's acceptance and gammas, with the pair's measured calls and the "
             "run's own engine time per block. Target's own: the share of lossless's tokens that gamma auto's floor "
             "had the target sample alone (acceptance is over the drafted positions).", "",
             "| kind | prompt | target tok/s | v3 0.5 | projected | acceptance by position | gammas chosen | "
             "lossless | projected | lossless acceptance | target's own | engine ms/block |",
             "|---|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|"]
    for (kind, prompt), row in rows.items():
        v3, ll = row["v3"], row["lossless"]
        offsets = " / ".join(shown_number(a) for a in v3["by_offset"])
        gammas = ", ".join(f"{g}: {c}" for g, c in sorted(v3["gammas"].items()))
        lines.append(f"| {kind} | {prompt} | {row['target_tok_s']:.1f} | {v3['speedup']:.2f}x | "
                     f"{v3['projected']:.2f}x | "
                     f"{offsets} | {gammas} | {ll['speedup']:.2f}x | {ll['projected']:.2f}x | {ll['acceptance']:.2f} | "
                     f"{ll['alone']:.0%} | "
                     f"{shown_number(v3['engine_ms'])} |")
    med = lambda rule, key, rs=None: statistics.median(r[rule][key] for r in (rs or rows.values()))  # noqa: E731
    lines += ["", "| kind | v3 0.5 (median) | lossless (median) | v3 acceptance | lossless acceptance |",
              "|---|---:|---:|---:|---:|"]
    for kind in prompt_kinds():
        rs = [row for (k, _), row in rows.items() if k == kind]
        lines.append(f"| {kind} | {med('v3', 'speedup', rs):.2f}x | {med('lossless', 'speedup', rs):.2f}x | "
                     f"{med('v3', 'acceptance', rs):.2f} | {med('lossless', 'acceptance', rs):.2f} |")
    error = statistics.median(abs(r[rule]["projected"] / r[rule]["speedup"] - 1) for r in rows.values()
                              for rule in ("v3", "lossless"))
    lines += ["", f"- All {len(rows)} prompts: **v3 0.5 median {med('v3', 'speedup'):.2f}x** (lowest "
              f"{min(r['v3']['speedup'] for r in rows.values()):.2f}x), "
              f"**lossless median {med('lossless', 'speedup'):.2f}x** "
              f"(lowest {min(r['lossless']['speedup'] for r in rows.values()):.2f}x); lossless acceptance "
              f"{med('lossless', 'acceptance'):.2f}; the engine's own time "
              f"{shown_number(known_median(r['v3']['engine_ms'] for r in rows.values()))} ms per block; "
              f"the projection's median distance from the measured speed-up {100 * error:.0f}%.", ""]
    return "\n".join(lines)


def main(argv=None):
    args = speed_arguments(__doc__, 64).parse_args(argv)
    pair = named_pair(args)
    measure_auto_prices(pair)  # before any run, on a quiet machine
    rows = {key: prompt_row(pair, runs) for key, runs in measure(pair, args.rounds, args.max_new_tokens, print).items()}
    text = markdown(pair, rows, args.rounds, args.max_new_tokens)
    print(text)
    if args.out:
        write_section(args.out, text, text.splitlines()[0].split(":")[0])
    return rows


if __name__ == "__main__":
    main()
