"""Weight precision side by side in one process: how fast the target runs in each, what the cascade adds over it, and
how far each moves the model.

    python -m bench.precision_bench [--pair bundled] [--rounds 2] [--max-new-tokens 64] [--precisions fp32,bf16,...]

The pair is loaded once per precision of --precisions (cascade_core/formats/precision.py), and once at --precision (by
default "auto", the loader's default) to show what that picks here and the calls it timed. On the benchmark prompts
of every kind (assets/prompts/kinds.json, never trained on), each precision's target-only, the app's default (v3
alpha 0.5, the pair's default draft, gamma auto, T 0.7) and lossless run alternating per prompt and round (seed =
round, EOS ignored, long answers twice the tokens); the speed-ups are over target-only in the same precision. How
far a precision moves the model: the mean next-token TV between the float32 target's distributions and the
precision's (temperature 1), at every position of float32 target-only's answers (the prompts are held out); the
draft's lossless acceptance: the mean keep probability min(1, p/q) of its proposals in the lossless runs (T 0.7),
draft and target in that precision. The CPU and its flags head every table. Writes its section to
docs/benchmarks.md, one per pair and CPU kind (a run on another CPU adds its own).
"""
import statistics

import torch

from bench.harness import alternate, named_pair, shown_number, speed_arguments, stamp, write_section
from bench.kinds_bench import METHODS, TEMPERATURE, asked, run
from cascade_core.decoding.batch_block import measure_auto_prices
from cascade_core.formats.precision import AUTO_CANDIDATES, MAX_TV, PRECISIONS, precision_of, said
from cascade_core.method.distributions import total_variation
from cascade_core.speed.kernels import cpu_description

TITLE = "## Weight precision side by side"


def load_all(args, precisions, say):
    """(the pair at --precision: what the default picks and timed, {precision: the pair in it} for --precisions)."""
    pairs = {}
    for precision in (args.precision, *precisions):
        say(f"loading the {args.target or args.pair} pair in {precision}")
        pairs[precision] = named_pair(args, precision=precision, progress=say)
    return pairs[args.precision], {p: pairs[p] for p in precisions}


def measure(pairs, cases, rounds, n, say):
    """{(precision, kind, prompt, rule): [(tokens/s, trace), ...]}: every precision's methods alternating."""
    combos = [(p, rule, alpha) for p in pairs for rule, alpha in METHODS]
    results = alternate(combos, cases, rounds,
                        lambda case, combo, r: run(pairs[combo[0]], *case, *combo[1:], r, n), say)
    return {(precision, *case, rule): runs for (case, (precision, rule, _)), runs in results.items()}


def mean_tv(reference, model, sequences):
    """The mean TV between two models' next-token distributions (temperature 1) over every answer position of
    ``sequences`` ([(prompt ids, answer ids)]): each read in one forward, as the reference's answer."""
    tvs = []
    with torch.inference_mode():
        for prompt_ids, answer in sequences:
            ids = torch.tensor([prompt_ids + answer[:-1]], device=reference.device)
            at = slice(len(prompt_ids) - 1, ids.shape[1])
            p_ref, p = (torch.softmax(m(input_ids=ids).logits[0, at].float(), -1) for m in (reference, model))
            tvs += total_variation(p, p_ref).tolist()
    return statistics.mean(tvs)


def keep_probability(traces):
    """The mean keep probability of the proposals in these runs (lossless: min(1, p/q), 1 - TV(p, q) in expectation)."""
    kept = [pos["accept_prob"] for trace in traces for pos in trace.positions if pos["accept_prob"] is not None]
    return statistics.mean(kept) if kept else None


def summary(pairs, results, cases):
    """{precision: the table's numbers}: target-only tokens/s (median over prompts of each prompt's median), the
    default's and lossless's median and lowest speed-up over it, TV to float32, the draft's lossless keep
    probability, and each kind's median speed-ups."""
    fp32 = pairs.get("fp32")
    answers = [(t.prompt_ids, t.tokens) for kind, prompt in cases
               for _, t in results.get(("fp32", kind, prompt, "target"), [])[:1]]
    rows = {}
    for precision, pair in pairs.items():
        speed = {key[1:]: statistics.median(s for s, _ in runs) for key, runs in results.items() if key[0] == precision}
        ups = {rule: {(k, p): speed[k, p, rule] / speed[k, p, "target"] for k, p in cases}
               for rule in ("v3", "lossless")}
        rows[precision] = dict(
            target=statistics.median(speed[k, p, "target"] for k, p in cases), ups=ups,
            tv=mean_tv(fp32.target, pair.target, answers) if fp32 is not None and answers else None,
            keep=keep_probability(t for k, p in cases for _, t in results[precision, k, p, "lossless"]))
    return rows


def ratio_cells(ups):
    """'median (lowest)' of a method's speed-ups over the prompts."""
    return f"{statistics.median(ups.values()):.2f}x ({min(ups.values()):.2f}x)"


def precision_table(rows):
    base = rows["fp32"]["target"] if "fp32" in rows else None
    lines = ["| precision | target-only tok/s | vs fp32 target-only | v3 0.5 over target-only (median, lowest) | "
             "lossless (median, lowest) | mean next-token TV to fp32 | draft's lossless keep probability |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for precision, row in rows.items():
        lines.append(f"| {precision} | {row['target']:.1f} | "
                     f"{shown_number(base and row['target'] / base, '{:.2f}x')} | {ratio_cells(row['ups']['v3'])} | "
                     f"{ratio_cells(row['ups']['lossless'])} | {shown_number(row['tv'], '{:.4f}')} | "
                     f"{shown_number(row['keep'], '{:.3f}')} |")
    return lines


def kinds_table(rows, cases):
    """Each kind's median speed-ups over target-only in the same precision, v3 0.5 / lossless, per precision."""
    kinds = list(dict.fromkeys(kind for kind, _ in cases))
    lines = ["| kind | " + " | ".join(f"{p}: v3 0.5 / lossless" for p in rows) + " |",
             "|---|" + "---:|" * len(rows)]
    for kind in kinds:
        cells = [" / ".join(f"{statistics.median(u for (k, _), u in row['ups'][rule].items() if k == kind):.2f}x"
                            for rule in ("v3", "lossless")) for row in rows.values()]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return lines


def auto_lines(default):
    """What the default (--precision) runs here, and the calls "auto" timed (ms, fastest of 5), by role."""
    lines = [f"**{default.asked_precision}** runs: {said(default)}."]
    for role, timings in (default.precision_timings or {}).items():
        calls = ", ".join(f"{p} " + " / ".join(f"{1e3 * s:.1f}" for s in t.values()) for p, t in timings.items())
        lines.append(f"- {role}'s timed calls ({' / '.join(next(iter(timings.values())))} tokens, ms): {calls}")
    return lines


def markdown(args, default, pairs, rows, cases):
    any_pair = next(iter(pairs.values()))
    broken = [p for p, row in rows.items() if row["tv"] is not None and row["tv"] > MAX_TV]
    lines = [f"{TITLE}: {any_pair.name} pair, {cpu_description()}", "",
             f"`python -m bench.precision_bench --pair {args.pair} --rounds {args.rounds} --max-new-tokens "
             f"{args.max_new_tokens} --precisions {','.join(pairs)}`, {stamp()}, CPU: {cpu_description()}; "
             f"{any_pair.description}; weights: {any_pair.weights}. {len(cases)} prompts (every kind), "
             f"{args.rounds} rounds, T {TEMPERATURE}, gamma auto, {args.max_new_tokens} tokens (twice for long "
             "answers; EOS ignored), every precision's three methods alternating per prompt; medians over rounds, "
             "then prompts. Speed-ups are over target-only in the same precision.", "",
             *precision_table(rows), "", *kinds_table(rows, cases), "", *auto_lines(default), "",
             f"Precisions moving the target by more than {MAX_TV} in mean TV here: "
             f"{', '.join(broken) if broken else 'none'}; auto may pick fp32 or {', '.join(AUTO_CANDIDATES)} "
             "(precision.py's AUTO_CANDIDATES).", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = speed_arguments(__doc__, 64)
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="comma-separated, fp32 first")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per kind")
    args = parser.parse_args(argv)
    default, pairs = load_all(args, args.precisions.split(","), print)
    for pair in pairs.values():
        measure_auto_prices(pair)  # gamma auto's prices, before any run
    cases = asked(args.prompts)
    results = measure(pairs, cases, args.rounds, args.max_new_tokens, print)
    rows = summary(pairs, results, cases)
    text = markdown(args, default, pairs, rows, cases)
    print(text)
    if args.out:
        write_section(args.out, text, text.splitlines()[0])  # a section per pair and CPU kind: others' stay
    return rows, {p: precision_of(pair.target) for p, pair in pairs.items()}


if __name__ == "__main__":
    main()
