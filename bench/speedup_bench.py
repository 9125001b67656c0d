"""The speed-up a visitor sees: every rule at the app's settings against target-only decoding, side by side in one
process (alternating, medians), with the cost model's projection from the calls measured on the same pair.

    python -m bench.speedup_bench [--pair bundled] [--rounds 2] [--max-new-tokens 48]

Prompts: assets/prompts/bench.json's "speedup", outside the draft's training and held-out sets. Every run generates
exactly max_new_tokens tokens (EOS ignored). Target NLL is the mean -log p(token) of the emitted text under the
target (temperature 1), the Trade-off tab's quality axis. Writes its section to docs/benchmarks.md.
"""
import statistics

from bench.harness import (alternate, by_method, decode, known_median, named_pair, projected, prompts, shown_number,
                           speed_arguments, stamp, write_section)
from cascade_core.decoding.run_settings import AUTO_GAMMAS
from cascade_core.speed.kernels import cpu_description
from cascade_core.speed.prices import measure_prices, measured_prices
from sweeps.quality import target_nll

TEMPERATURE = 0.7  # the app's default
# (rule, alpha, gamma): the app's default and its neighbours, then a Trade-off-like spread of alphas
METHODS = ([("target", 0.0, 1)] + [("lossless", 0.0, g) for g in (2, 3, 4, "auto")]
           + [("v3", 0.5, g) for g in (2, 3, 4, "auto")]
           + [("v3", a, "auto") for a in (0.7, 0.9)] + [("chow", a, "auto") for a in (0.5, 0.7)]
           + [("opt", a, "auto") for a in (0.0, 0.2, 0.4)] + [("diff", a, "auto") for a in (0.1, 0.3)]
           # the later literature's divergence rules, alphas read off a pilot (docs/lab/2026-12-04-fuzzy-and-judge.md)
           + [("fuzzy", a, "auto") for a in (0.2, 0.35)] + [("judge", a, "auto") for a in (1.5, 3.0)])


def label(rule, alpha, gamma):
    return "target-only" if rule == "target" else f"{rule} {alpha:g}, gamma {gamma}"


def run_all(pair, rounds, n, say):
    """{method: [(tokens/s, trace), ...]} over rounds x prompts, the methods alternating."""
    def run(prompt, method, r):
        rule, alpha, gamma = method
        return decode(pair, prompt, rule=rule, alpha=alpha, gamma=gamma, temperature=TEMPERATURE, seed=r,
                      max_new_tokens=n, stop_at_eos=False)
    return by_method(alternate(METHODS, prompts("speedup"), rounds, run, say), METHODS)


def method_row(pair, method, runs, base):
    """A table row: the method's median speed and its spread, acceptance, gamma, tokens per call, NLL, projection."""
    rule, alpha, gamma = method
    speeds, traces = [s for s, _ in runs], [t for _, t in runs]
    stats = [t.stats for t in traces]
    cascade = rule != "target"
    return dict(name=label(rule, alpha, gamma), rule=rule, tok_s=statistics.median(speeds),
                speedup=statistics.median(speeds) / base, spread=(min(speeds), max(speeds)),
                acceptance=known_median(s["acceptance_rate"] for s in stats) if cascade else None,
                gamma=statistics.median(t.gamma for t in traces) if cascade else None,
                tokens_per_call=statistics.median(s["tokens_per_target_call"] for s in stats),
                nll=statistics.median(target_nll([p["p_token"] for p in t.positions]) for t in traces),
                projected=statistics.median(projected(pair, t) for t in traces) if cascade else None)


def summarise(pair, results):
    base = statistics.median(s for s, _ in results["target", 0.0, 1])
    rows = [method_row(pair, method, runs, base) for method, runs in results.items()]
    lossless_nll = min(r["nll"] for r in rows if r["rule"] == "lossless")
    frontier = [r for r in rows if r["rule"] not in ("target", "lossless") and r["nll"] <= 1.1 * lossless_nll]
    return dict(rows=rows, base=base, lossless_nll=lossless_nll,
                fastest=max(frontier, key=lambda r: r["speedup"]) if frontier else None)


def section_key(pair):
    # the draft kind too: the bundled pair's two drafts keep a section each
    return f"## Speed-up over target-only at the app's settings: {pair.name} pair, {pair.draft_kind} draft"


def markdown(pair, s, rounds, n):
    lines = [f"{section_key(pair)}, {cpu_description()}", "",
             f"`python -m bench.speedup_bench --pair {pair.name} --rounds {rounds} --max-new-tokens {n}`, {stamp()}, "
             f"dtype {pair.target.dtype}; {pair.description}. Temperature {TEMPERATURE}, {n} tokens (EOS ignored), "
             f"{len(prompts('speedup'))} prompts outside the draft's training and held-out sets x {rounds} rounds "
             "(seed = round), all methods alternating in one process; medians. The projection prices each block with "
             "the calls measured on this pair (below) and the engine's own time per block in that run (o: sampling, "
             "verification, records): (1 - a^(g+1)) / (1 - a) * t_target / ((g+1) t_draft + t_verify(g+1) + o), "
             "the tokens gamma auto's floor had the target sample alone at the target's price.",
             "", "| rule, alpha, gamma | tokens/s (min-max) | vs target-only | projected | acceptance | gamma used | "
             "tokens per target call | target NLL |", "|---|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        lines.append(f"| {r['name']} | {r['tok_s']:.1f} ({r['spread'][0]:.1f}-{r['spread'][1]:.1f}) | "
                     f"{r['speedup']:.2f}x | {shown_number(r['projected'], '{:.2f}x')} | "
                     f"{shown_number(r['acceptance'])} | {shown_number(r['gamma'], '{:g}')} | "
                     f"{shown_number(r['tokens_per_call'])} | {shown_number(r['nll'])} |")
    p = {g: measured_prices(pair, g) for g in AUTO_GAMMAS}
    verify = ", ".join(f"{g + 1}: {1000 * p[g].verify:.0f} ms ({p[g].verify_ratio:.2f})" for g in AUTO_GAMMAS)
    fastest = s["fastest"]
    lines += ["", f"- Calls measured on this pair (prices.py: cached forwards after a 64-token context, median of 7): "
              f"a target token {1000 * p[4].target:.1f} ms, a draft call {1000 * p[4].draft:.1f} ms "
              f"(c = {p[4].c:.2f}); "
              f"verifying n tokens (in target tokens): {verify}.",
              f"- Fastest rule within +10% of lossless's target NLL ({s['lossless_nll']:.2f}): "
              + (f"**{fastest['name']}, {fastest['speedup']:.2f}x** (NLL {fastest['nll']:.2f})." if fastest
                 else "none."),
              ""]
    return "\n".join(lines)


def main(argv=None):
    args = speed_arguments(__doc__, 48).parse_args(argv)
    pair = named_pair(args)
    measure_prices(pair, AUTO_GAMMAS)  # before any run, on a quiet machine
    summary = summarise(pair, run_all(pair, args.rounds, args.max_new_tokens, print))
    text = markdown(pair, summary, args.rounds, args.max_new_tokens)
    print(text)
    if args.out:
        write_section(args.out, text, section_key(pair))
    return summary


if __name__ == "__main__":
    main()
