"""Both drafts of the bundled pair side by side: the independent 4-layer draft and the EAGLE-3 head that reads the
target, every method against target-only in one process (alternating, medians), then the seed's Qwen3-1.7B target
with a head of AngelSlim's shapes and with the Qwen3-0.6B draft, random weights (a forward costs what the real
one does): per-call times and c on this CPU.

Then, greedy, identical tokens required: this engine's lossless with the head against transformers' assisted
generation with the independent draft, as its users call it; and the Trade-off frontier of both drafts over the
bundled prompt set's first three prompts of each category (21), with 95% intervals over prompts.

    python -m bench.drafts_bench [--rounds 2] [--max-new-tokens 48] [--skip-qwen] [--skip-frontier]

Prompts: assets/prompts/bench.json's "drafts", outside every training set (the head's and the draft's). Writes its
section to docs/benchmarks.md.
"""
import argparse
import statistics
import time

import torch

from bench.engine_bench import hf_generate, ours
from bench.harness import (BENCHMARKS, acceptance_by_step, alternate, by_method, decode, known_median, prompts,
                           shown_number, stamp, timed, write_section)
from bench.seed_pair import CONFIGS, shape_only
from bench.speedup_bench import label
from cascade_core import load_pair
from cascade_core.decoding.row import encode_prompt
from cascade_core.decoding.run_settings import AUTO_GAMMAS
from cascade_core.formats.eagle3_head import new_head
from cascade_core.speed.kernels import cpu_description
from cascade_core.speed.prices import calls_seconds, measure_prices, measured_prices
from sweeps import load_prompts, sweep
from sweeps.prompts import per_category
from sweeps.quality import target_nll
from sweeps.report import summarise as summarise_rows

TEMPERATURE = 0.7  # the app's default
METHODS = ([("target", 0.0, 1), ("lossless", 0.0, "auto"), ("lossless", 0.0, 3)]
           + [("v3", a, "auto") for a in (0.5, 0.7, 0.9)] + [("chow", 0.5, "auto"), ("opt", 0.2, "auto")])
DRAFTS = ("model", "head")
FRONTIER = dict(prompts="assets/prompts/default.jsonl", per_category=3, rules=("lossless", "v3", "opt", "chow"),
                alphas="auto:4", gamma=3)
GREEDY = {"transformers generate (target only)": lambda pairs, stock, ids, n: hf_generate(stock.target, ids, n),
          "transformers assisted, independent draft (its defaults)":
              lambda pairs, stock, ids, n: hf_generate(stock.target, ids, n, stock.draft),
          "ours lossless, independent draft, gamma auto":
              lambda pairs, stock, ids, n: ours(pairs["model"], ids, n, "lossless", gamma="auto", details=False),
          "ours lossless, head, gamma auto":
              lambda pairs, stock, ids, n: ours(pairs["head"], ids, n, "lossless", gamma="auto", details=False)}


def run_all(pairs, rounds, n, say):
    """{(draft, method): [(tokens/s, trace), ...]}: both drafts' methods alternating."""
    def run(prompt, key, r):
        draft, (rule, alpha, gamma) = key
        return decode(pairs[draft], prompt, rule=rule, alpha=alpha, gamma=gamma, temperature=TEMPERATURE, seed=r,
                      max_new_tokens=n, stop_at_eos=False)
    keys = [(d, m) for d in pairs for m in METHODS]
    return by_method(alternate(keys, prompts("drafts"), rounds, run, say), keys)


def summarise(results):
    base = statistics.median(s for d in DRAFTS for s, _ in results[d, ("target", 0.0, 1)])
    rows = []
    for (draft, (rule, alpha, gamma)), runs in results.items():
        if rule == "target" and draft == "head":
            continue  # one target-only row: both pairs' targets are the same model
        speeds, traces = [s for s, _ in runs], [t for _, t in runs]
        rows.append(dict(draft="-" if rule == "target" else draft, name=label(rule, alpha, gamma), rule=rule,
                         tok_s=statistics.median(speeds), speedup=statistics.median(speeds) / base,
                         spread=(min(speeds), max(speeds)),
                         acceptance=None if rule == "target" else known_median(
                             t.stats["acceptance_rate"] for t in traces),
                         by_step=None if rule == "target" else acceptance_by_step(traces, 5),
                         tokens_per_call=statistics.median(t.stats["tokens_per_target_call"] for t in traces),
                         nll=statistics.median(target_nll([p["p_token"] for p in t.positions]) for t in traces)))
    return dict(rows=rows, base=base)


def greedy_runs(pairs, stock, rounds, n, say):
    """Every GREEDY method on every prompt, alternating, after a warm-up call of each: tokens/s and whether every
    method's tokens were the same in every run."""
    ids = [torch.tensor([encode_prompt(stock.tokenizer, p)]) for p in prompts("drafts")]
    for fn in GREEDY.values():
        fn(pairs, stock, ids[0], 2)
    runs = by_method(alternate(GREEDY, range(len(ids)), rounds,
                               lambda i, name, _: timed(lambda: GREEDY[name](pairs, stock, ids[i], n)), say), GREEDY)
    speeds = {name: [n / seconds for seconds, _ in done] for name, done in runs.items()}
    tokens = [[out["tokens"] for _, out in done] for done in runs.values()]
    return dict(tok_s={name: statistics.median(v) for name, v in speeds.items()},
                spread={name: (min(v), max(v)) for name, v in speeds.items()},
                identical=all(t == tokens[0] for t in tokens))


def frontiers(pairs, n, say):
    """Per draft: the sweep's summary (per rule and alpha, means and 95% intervals over the prompts) at the app's
    temperature, and the fastest point (projected speed-up) within +10% of lossless's target NLL."""
    prompts = per_category(load_prompts(FRONTIER["prompts"]), FRONTIER["per_category"])
    out = {}
    for draft, pair in pairs.items():
        start = time.perf_counter()
        # lanes=1: chains one after another, so that each row's engine time per block (which its projection is
        # priced with) is its own, not shared with the chains decoded beside it
        rows = sweep("bundled", prompts, FRONTIER["rules"], FRONTIER["alphas"], (0,), gamma=FRONTIER["gamma"],
                     temperature=TEMPERATURE, max_new_tokens=n, pair=pair, lanes=1)
        summary = summarise_rows(rows)
        lossless = next(s for s in summary if s["rule"] == "lossless")["target_nll_mean"]
        within = [s for s in summary if s["target_nll_mean"] <= 1.1 * lossless and s["projected_speedup_mean"]]
        out[draft] = dict(summary=summary, prompts=len(prompts), lossless_nll=lossless,
                          fastest=max(within, key=lambda s: s["projected_speedup_mean"]))
        say(f"frontier of the {draft} draft: {len(rows)} runs in {time.perf_counter() - start:.0f} s")
    return out


def qwen_costs(repeats=3):
    """One-token cached calls of random-weight Qwen3-1.7B (target), Qwen3-0.6B (draft) and an EAGLE-3 head of
    AngelSlim/Qwen3-1.7B_eagle3's shapes (32,000-token vocabulary), float32 on this CPU."""
    cpu = torch.device("cpu")
    target, draft = (shape_only(name, cpu, torch.float32) for name in ("Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B"))
    head = new_head(target, list(range(32000))).eval()
    vocab = CONFIGS["Qwen/Qwen3-1.7B"]["vocab_size"]
    return calls_seconds({"target": (target, vocab, 1, None), "draft": (draft, vocab, 1, None),
                          "head": (head, vocab, 1, None), "verify": (target, vocab, 4, None)}, repeats)


def greedy_markdown(g, rounds):
    fastest_assisted = g["tok_s"]["transformers assisted, independent draft (its defaults)"]
    lines = ["", f"Greedy (T 0), the same {len(prompts('drafts'))} prompts x {rounds} rounds, alternating; "
             "transformers on its own "
             "Linear path (as installed), ours on the measured kernels; ours as the transformers entry runs it (no "
             "per-position records).", "", "| method | tokens/s (min-max) | vs transformers assisted |",
             "|---|---|---|"]
    for name, rate in g["tok_s"].items():
        low, high = g["spread"][name]
        lines.append(f"| {name} | {rate:.1f} ({low:.1f}-{high:.1f}) | {rate / fastest_assisted:.2f}x |")
    lines += ["", f"- Greedy outputs identical (every method, every run): **{g['identical']}**."]
    return lines


def frontier_markdown(f, n):
    fmt = lambda v, ci: "-" if v is None else f"{v:.2f}" + ("" if ci is None else f" ± {ci:.2f}")  # noqa: E731
    any_draft = next(iter(f.values()))
    lines = ["", f"Trade-off frontier (`sweeps`): the bundled prompt set's first {FRONTIER['per_category']} prompts of "
             f"each category ({any_draft['prompts']} prompts), rules {', '.join(FRONTIER['rules'])}, alphas "
             f"{FRONTIER['alphas']}, gamma {FRONTIER['gamma']}, T {TEMPERATURE}, {n} tokens, seed 0; means ± 95% "
             "intervals over the prompts; speed-up: the projection priced with this pair's measured calls.", "",
             "| draft | rule | alpha | target NLL | projected speed-up | acceptance | target calls per token |",
             "|---|---|---|---|---|---|---|"]
    for draft, d in f.items():
        for s in d["summary"]:
            alpha = "-" if s["alpha"] is None else f"{s['alpha']:.3g}"
            lines.append(f"| {draft} | {s['rule']} | {alpha} | {fmt(s['target_nll_mean'], s['target_nll_ci'])} | "
                         f"{fmt(s['projected_speedup_mean'], s['projected_speedup_ci'])}x | "
                         f"{fmt(s['acceptance_rate_mean'], s['acceptance_rate_ci'])} | "
                         f"{fmt(s['target_calls_per_token_mean'], s['target_calls_per_token_ci'])} |")
    lines.append("")
    for draft, d in f.items():
        best = d["fastest"]
        lines.append(f"- {draft}: fastest point within +10% of lossless's target NLL ({d['lossless_nll']:.2f}): "
                     f"**{best['rule']} {best['alpha'] or 0:.3g}, {best['projected_speedup_mean']:.2f}x** projected "
                     f"(NLL {best['target_nll_mean']:.2f}).")
    return lines


def markdown(s, pairs, rounds, n, qwen, greedy=None, frontier=None):
    lines = [f"## Both drafts of the bundled pair: the independent draft and the EAGLE-3 head, {cpu_description()}", "",
             f"`python -m bench.drafts_bench --rounds {rounds} --max-new-tokens {n}`, {stamp()}; "
             f"model: {pairs['model'].description}; "
             f"head: {pairs['head'].description}. Temperature {TEMPERATURE}, {n} tokens (EOS ignored), "
             f"{len(prompts('drafts'))} prompts outside every training set x {rounds} rounds (seed = round), "
             "both drafts' "
             "methods alternating in one process; medians. Acceptance by step: the mean acceptance probability of "
             "the proposals at each step of their block (1st, 2nd, ...).", "",
             "| draft | rule, alpha, gamma | tokens/s (min-max) | vs target-only | acceptance | by step | "
             "tokens per target call | target NLL |", "|---|---|---|---|---|---|---|---|"]
    for r in s["rows"]:
        steps = "-" if r["by_step"] is None else " / ".join(shown_number(a) for a in r["by_step"][:4])
        lines.append(f"| {r['draft']} | {r['name']} | {r['tok_s']:.1f} ({r['spread'][0]:.1f}-{r['spread'][1]:.1f}) | "
                     f"{r['speedup']:.2f}x | {shown_number(r['acceptance'])} | {steps} | "
                     f"{shown_number(r['tokens_per_call'])} | "
                     f"{shown_number(r['nll'])} |")
    lines.append("")
    for draft in DRAFTS:
        p = measured_prices(pairs[draft], 3)
        lines.append(f"- {draft}: a target token {1000 * p.target:.1f} ms, a draft call {1000 * p.draft:.2f} ms "
                     f"(**c = {p.c:.3f}**), verifying 4 tokens {1000 * p.verify:.0f} ms.")
    if qwen:
        lines += ["", "Seed pair on this CPU, random weights, float32, one-token cached calls after 64 tokens "
                  "(median of 3): Qwen3-1.7B target {:.0f} ms (4-token verification {:.0f} ms); Qwen3-0.6B draft "
                  "{:.0f} ms (c = {:.2f}); EAGLE-3 head of AngelSlim's shapes (one layer, 32,000-token vocabulary) "
                  "{:.1f} ms (c = {:.3f}).".format(1000 * qwen["target"], 1000 * qwen["verify"], 1000 * qwen["draft"],
                                                    qwen["draft"] / qwen["target"], 1000 * qwen["head"],
                                                    qwen["head"] / qwen["target"])]
    if greedy:
        lines += greedy_markdown(greedy, rounds)
    if frontier:
        lines += frontier_markdown(frontier, n)
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--skip-qwen", action="store_true", help="skip the seed pair's random-weight call times")
    p.add_argument("--skip-greedy", action="store_true", help="skip the greedy comparison with transformers")
    p.add_argument("--skip-frontier", action="store_true", help="skip both drafts' Trade-off frontiers")
    p.add_argument("--out", default=str(BENCHMARKS), help="markdown file to update ('' to skip)")
    args = p.parse_args(argv)
    pairs = {d: load_pair("bundled", draft=d) for d in DRAFTS}
    for pair in pairs.values():
        measure_prices(pair, AUTO_GAMMAS)
    summary = summarise(run_all(pairs, args.rounds, args.max_new_tokens, print))
    greedy = None
    if not args.skip_greedy:
        stock = load_pair("bundled", draft="model", measured_kernels=False)
        greedy = greedy_runs(pairs, stock, args.rounds, args.max_new_tokens, print)
    frontier = None if args.skip_frontier else frontiers(pairs, args.max_new_tokens, print)
    qwen = None if args.skip_qwen else qwen_costs()
    text = markdown(summary, pairs, args.rounds, args.max_new_tokens, qwen, greedy, frontier)
    print(text)
    if args.out:
        write_section(args.out, text, "## Both drafts of the bundled pair")
    return summary


if __name__ == "__main__":
    main()
