"""What each lesson's run shows, in that run's own numbers: the "What to look for" text under a lesson (app/lessons.py
names which lesson reads which)."""
from cascade_core import RULES
from cascade_core.decoding.batch_block import run_prices
from cascade_core.decoding.running_batches import OTHER_ROWS
from cascade_core.decoding.strategies import engine_rate, fastest, faster_than, measured_speedup, spread
from cascade_core.method.costs import (break_even_cost_ratio, expected_tokens_per_call, speedup_over_target,
                                       rejection_terms)
from cascade_core.method.explain import dissect

from .compare import label, row_stats
from .sandbox import START
from .strategies import other_calls_note
from .viz.format import number
from .worker import ENGINE

FRONTIER_BUDGET = 0.8  # lesson 7's question: the points with at most 80% of lossless's target calls per token
FRONTIER_RULES = ("chow", "opt", "v3")  # its answers, in order (then "none")


def percent(value):
    return "–" if value is None else f"{100 * value:.0f}%"


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


GREEDY = ("at temperature 0, pi = p is one-hot on the target's top token, so the verification keeps a proposal "
          "only where it is that token and otherwise replaces it by that token")


def near_tie(target, lossless, k):
    """Why lossless's greedy text parts from the target's at token k, with the target's probabilities there."""
    top = {entry[0]: entry[2] for entry in lossless.positions[k].get("top_p") or []}
    ours, theirs = lossless.tokens[k] if k < len(lossless.tokens) else None, \
        target.tokens[k] if k < len(target.tokens) else None
    numbers = (f" (in lossless's pass the target gave its token p {number(top[ours], 4)} and the target-alone run's "
               f"token p {number(top[theirs], 4)})") if ours in top and theirs in top else ""
    return (f"Lossless wrote a different text from the target alone from token {k}. Both write the target's top "
            f"token at every position ({GREEDY}), but lossless reads p from the block's pass over several tokens and "
            "the target alone from one-token passes, and passes of different shapes round differently: where the "
            f"target's two best tokens are within that rounding of each other (a near tie), the passes can pick "
            f"different ones{numbers}.")


def look_for_speculative(pair, traces):
    target, lossless = traces
    s, k = lossless.stats, first_difference(target.tokens, lossless.tokens)
    if k is None and len(target.tokens) == len(lossless.tokens):
        same = f"Lossless wrote the same text as the target alone ({s['tokens']} tokens): {GREEDY}."
    else:
        same = near_tie(target, lossless, min(len(target.tokens), len(lossless.tokens)) if k is None else k)
    return (f"- {same}\n"
            f"- The target checked and kept {s['deferred']} of the draft's tokens and replaced {s['replaced']}; "
            "each replacement ended its block.\n"
            f"- Target calls: {target.stats['target_calls']} alone, {s['target_calls']} with the draft "
            f"({number(s['tokens_per_target_call'], 2)} tokens per call).")


def look_for_chow(pair, traces):
    stats = [ENGINE.call(row_stats, pair, t) for t in traces]
    lines = [f"| {r['label']} | {percent(r['deferral_rate'])} | {r['target_calls']} | {number(r['target_nll'], 2)} |"
             for r in stats]
    lo, hi = stats[0], stats[-1]
    trend = "fell" if hi["deferral_rate"] < lo["deferral_rate"] else "did not fall"
    return ("| row | deferred | target calls | target NLL |\n|---|---|---|---|\n" + "\n".join(lines) +
            f"\n\nFrom {lo['label']} to {hi['label']} the deferral rate {trend} "
            f"({percent(lo['deferral_rate'])} to {percent(hi['deferral_rate'])}) and target calls went from "
            f"{lo['target_calls']} to {hi['target_calls']}; the target's NLL of the text went from "
            f"{number(lo['target_nll'], 2)} to {number(hi['target_nll'], 2)}: larger alpha trusts the draft more.")


def look_for_tv(pair, traces):
    lines = []
    for trace in traces:
        rule, alpha = trace.settings["rule"], trace.settings["alpha"]
        deferred = [p["tv"] for p in trace.positions if p["a_star"][rule] > alpha]
        kept = [p["tv"] for p in trace.positions if p["a_star"][rule] <= alpha]
        mean = lambda values: number(sum(values) / len(values), 3) if values else "–"  # noqa: E731
        lines.append(f"| {label(rule, alpha)} | {len(deferred)} of {len(trace.positions)} | {mean(deferred)} | "
                     f"{mean(kept)} |")
    return ("| row | positions deferred | mean TV where it deferred | mean TV where it did not |\n"
            "|---|---|---|---|\n" + "\n".join(lines) + "\n\n" + OPT_ANSWER)


OPT_ANSWER = ("**The rule says:** at the same confidence gap max p - max q and alpha > 0, opt defers where the gap "
              "exceeds alpha * TV (Eq. 10), so it defers more where the models agree (small TV) and less where they "
              "disagree. Where a position rule defers, pi = p and the draft's token is rejected with probability TV "
              "(Lemma 3), and alpha * TV is the price of that rejection. Across a run's positions the gap and TV are "
              "tied (at T = 1, |max p - max q| <= TV, and a position with TV = 0 has p = q and never defers), a "
              "large-TV position still defers when its gap is larger still, and diff ignores TV, so this run's TV "
              "columns mix these effects and may show the opposite. The decision map above shows the rule: each of "
              "opt's positions is a "
              "point (TV, max p - max q); opt defers above its line max p - max q = alpha * TV, which rises with TV, "
              "and diff above its flat line max p - max q = alpha (dashed).")


def start_table():
    """The Sandbox's eight tokens with their q and p, as a Markdown table (lesson 6's question reads them)."""
    return "| token | q | p |\n|---|---|---|\n" + "\n".join(f"| {t} | {a:g} | {b:g} |" for t, a, b in zip(*START))


def accepted_set(rule, alpha):
    """The tokens of the Sandbox's START that ``rule`` keeps at alpha (its set A)."""
    labels, q, p = START
    return [t for t, defers in zip(labels, dissect(rule, q, p, alpha)["defers"]) if not defers]


def look_for_sandbox(rules):
    """Each rule's accepted set and its rejection probability in Eq. 11's two terms (rejection_terms), lossless's
    TV beside them, and the last rule at an alpha 0.1 larger: fewer deferrals, not always fewer rejections."""
    labels, q, p = START
    favourite = labels[max(range(len(q)), key=q.__getitem__)]
    lines, costs = [], {}
    for rule, alpha in (*rules, ("lossless", 0.0)):
        accepted, costs[rule] = accepted_set(rule, alpha), rejection_terms(rule, q, p, alpha)
        cost = costs[rule]
        lines.append(f"| {rule}{f' alpha {alpha:g}' if RULES[rule].alpha_used else ' (pi = p)'} | "
                     f"{', '.join(accepted) or 'none'} | {'yes' if favourite in accepted else 'no'} | "
                     f"{number(cost.eta, 2)} | {number(cost.kept, 4)} + {number(cost.deferred, 4)} = "
                     f"**{number(cost.total, 4)}** |")
    rule, alpha = rules[-1]
    ours, tv = costs[rule].total, costs["lossless"].total
    higher = round(alpha + 0.1, 10)
    then = rejection_terms(rule, q, p, higher).total
    than = "more often than" if ours > tv else "less often than" if ours < tv else "as often as"
    return (f"The draft's favourite is '{favourite}' (q {number(q[labels.index(favourite)], 2)}, p "
            f"{number(p[labels.index(favourite)], 2)}): v1 reads its q(v), v2 and v3 its p(v).\n\n"
            f"| rule | A | '{favourite}' in A | eta | P(rejected) = eta sum_(v in A) p(v) + sum_(v not in A) "
            "max(0, eta p(v) - q(v)) |\n|---|---|---|---|---|\n" +
            "\n".join(lines) +
            f"\n\n{rule} at alpha {alpha:g} rejects the draft's token {than} lossless ({number(ours, 4)} against "
            f"TV = {number(tv, 4)}): a proposal outside A passes with min(1, eta p(v) / q(v)), never more often than "
            f"under lossless's min(1, p(v) / q(v)). At alpha {higher:g}, {rule} keeps "
            f"A = {{{', '.join(accepted_set(rule, higher))}}} and rejects with {number(then, 4)}"
            + (": a larger alpha, fewer deferrals, and yet more rejections; a token rule's rejection probability "
               "need not fall as alpha grows (Lemma 3's r TV, which does, is a position rule's)." if then > ours
               else "."))


def calls_per_token(row):
    return row["target_calls"] / row["tokens"]


def lossless_cost(rows):
    return calls_per_token(next(row for row in rows if row["rule"] == "lossless"))


def alpha_text(alpha):
    return "–" if alpha is None else f"{alpha:.3g}"


def nearest_within_budget(rows):
    """The point nearest the target's distribution (the lowest mean TV to the target; the first on a tie) among those
    with at most FRONTIER_BUDGET of lossless's target calls per token, or None where no point is that cheap."""
    budget = FRONTIER_BUDGET * lossless_cost(rows)
    cheap = [row for row in rows if row["rule"] != "lossless" and row["tv_to_target"] is not None
             and calls_per_token(row) <= budget]
    return min(cheap, key=lambda row: row["tv_to_target"], default=None)


def look_for_frontier(rows):
    """Every point's target calls per token and mean TV to the target, and the nearest one within the budget."""
    best = nearest_within_budget(rows)
    lines = [f"| {row['rule']} | {alpha_text(row['alpha'])} | {number(calls_per_token(row), 2)} | "
             f"{number(row['tv_to_target'], 3)} |" for row in rows]
    found = ("no point called the target that little" if best is None else
             f"the nearest to the target's distribution is {best['rule']} alpha {alpha_text(best['alpha'])} (mean TV "
             f"{number(best['tv_to_target'], 3)} at {number(calls_per_token(best), 2)} calls per token)")
    return ("| rule | alpha | target calls per token | mean TV to the target |\n|---|---|---|---|\n" +
            "\n".join(lines) + f"\n\nWith at most {percent(FRONTIER_BUDGET)} of lossless's "
            f"{number(lossless_cost(rows), 2)} target calls per token, {found}. Lossless is 0: pi = p at every "
            "position. A lower point is nearer the target's distribution, not better text: the paper measures quality "
            "with task metrics, where its token rule often scores above the large model itself (Fig. 3). One prompt "
            "and 24 tokens cannot rank the rules: another prompt or seed moves every point, which is why the sweeps "
            "average prompt sets with intervals (docs/sweeps.md).")


def rate_spread(repeats, i):
    """Run i's tokens per second on the engine's clock over the repeats: 'median (least-most)'."""
    lo, mid, hi = spread([engine_rate(traces[i]) for traces in repeats])
    return f"{number(mid, 1)} ({number(lo, 1)}-{number(hi, 1)})"


def look_for_timed(pairs, repeats):
    """Per draft: its speed on the engine's clock (the spread of the repeats), and the speed-up every tab shows
    (costs.speedup_over_target), priced with the pair's calls measured in alternation (prices.py): one target token,
    one draft call, one verification of gamma + 1 tokens; for a head, the emitted tokens outside its vocabulary."""
    target, *cascades = repeats[0]
    lines, notes = [], []
    for k, (pair, cascade) in enumerate(zip(pairs[1:], cascades), 1):
        gamma, a = cascade.gamma, cascade.stats["acceptance_rate"]
        prices = ENGINE.call(run_prices, pair, gamma)
        priced = speedup_over_target(cascade.sources, cascade.settings["rule"], gamma, prices)
        kind = pair.drafting.label
        lines.append(f"| {kind} | {rate_spread(repeats, k)} | {number(measured_speedup(repeats, k), 2)}x · "
                     f"{number(priced, 2)}x | {number(1000 * prices.draft, 1)} ms (c = {number(prices.c, 2)}) · "
                     f"{number(prices.verify_ratio, 2)} | {number(a, 2)} |")
        notes.append(f"- With the {kind}: {pays(a, gamma, prices.verify_ratio)}")
        vocabulary = pair.drafting.vocabulary(pair.draft)
        if vocabulary is not None:
            outside = sum(token not in vocabulary for token in cascade.tokens)
            notes.append(f"- The {kind} proposes only the {len(vocabulary):,} tokens of its vocabulary (q = 0 "
                         f"elsewhere): {outside} of the {len(cascade.tokens)} tokens written came from outside it, "
                         "each one the target's replacement, never a kept proposal.")
    beside = max(trace.counters.get(OTHER_ROWS, 0) for traces in repeats for trace in traces)
    if beside:
        notes.append(f"- {other_calls_note(beside)}")
    doubt = timed_doubt(pairs, repeats)
    one = ENGINE.call(run_prices, pairs[0], cascades[0].gamma).target
    block = cascades[0].gamma + 1
    return (f"Target alone: {rate_spread(repeats, 0)} tokens/s on the engine's clock (median, and least-most of "
            f"{len(repeats)} repeats), one target token {number(1000 * one, 1)} ms.\n\n"
            "Each row: v3 at alpha 0.5 with one draft; its tokens/s as above; against the target alone, the measured "
            "ratio and the priced speed-up every tab shows; one draft call, and a verification of "
            f"{block} tokens in target tokens.\n\n"
            "| draft | tokens/s | measured · priced | draft call · verification | acceptance |\n"
            "|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n" + "\n".join(notes) +
            (f"\n- {doubt}" if doubt else "") + "\n- A draft much cheaper than its target whose tokens are kept "
            "often, and a verification that costs about one target token (a large target on a GPU), are what make a "
            "cascade pay.")


def pays(a, gamma, verify_ratio):
    """When a cascade pays at this acceptance and verification cost, in one sentence."""
    c = break_even_cost_ratio(a, gamma, gamma + 1, verify_ratio)
    if c > 0:
        return f"At this acceptance and verification cost the cascade pays when c is below {number(c, 2)}."
    tokens = number(expected_tokens_per_call(a, gamma), 2)
    return (f"At this acceptance no draft is cheap enough: a block yields {tokens} tokens, and its verification alone "
            f"costs {number(verify_ratio, 2)} target tokens.")


# -- which committed answer held: each returns the index of the lesson's answer (app/lessons.py) this run bore out --

def held_speculative(pair, traces):
    """0: the same text in fewer target calls; 1: another text; 2: the same text in as many calls."""
    target, lossless = traces
    if target.tokens != lossless.tokens:
        return 1
    return 0 if lossless.stats["target_calls"] < target.stats["target_calls"] else 2


def held_chow(pair, traces):
    """0: the largest alpha deferred least; 1: the smallest did; 2: every alpha deferred as often."""
    low, high = traces[0].stats["deferral_rate"], traces[-1].stats["deferral_rate"]
    return 0 if high < low else 1 if high > low else 2


def held_tv(pair, traces):
    """0: opt defers more where TV is small, at the same confidence gap. A property of its rule, not of one run: opt
    defers iff max p - max q > alpha TV (Eq. 10), so at a fixed positive gap it defers exactly for TV below gap /
    alpha (tests/test_teaching_claims.py pins it on the engine's decisions)."""
    return 0


def held_sandbox(rules):
    """Whether the lesson's last rule (v3 at alpha 0.5) rejects the draft's token at the Sandbox's START more often
    than lossless (0), less often (1) or as often (2), by rejection_terms."""
    labels, q, p = START
    rule, alpha = rules[-1]
    ours, lossless = rejection_terms(rule, q, p, alpha).total, rejection_terms("lossless", q, p, 0.0).total
    return 2 if abs(ours - lossless) <= 1e-12 else 0 if ours > lossless else 1


def held_frontier(rows):
    """The index in FRONTIER_RULES of the rule whose point lies nearest the target within the budget
    (nearest_within_budget); len(FRONTIER_RULES) where no point is that cheap."""
    best = nearest_within_budget(rows)
    return len(FRONTIER_RULES) if best is None else FRONTIER_RULES.index(best["rule"])


def held_timed(pairs, repeats):
    """0: both drafts finished first; 1: the head only; 2: the draft model only; 3: neither (by the median of the
    repeats on the engine's clock: timed_doubt says where they disagree)."""
    faster = {pair.draft_kind: faster_than(repeats, k, 0)[0] for k, pair in enumerate(pairs[1:], 1)}
    return {(True, True): 0, (True, False): 1, (False, True): 2, (False, False): 3}[(faster["head"], faster["model"])]


def timed_doubt(pairs, repeats):
    """Lesson 8's verdict's caveat where its repeats disagree on whether a draft's cascade beat the target alone
    ('' where they agree)."""
    split = [pair.drafting.label for k, pair in enumerate(pairs[1:], 1) if not faster_than(repeats, k, 0)[1]]
    return "" if not split else (
        f"The {len(repeats)} repeats disagree on whether the cascade with the {' and the '.join(split)} beat the "
        "target alone: on this machine the timing does not decide it, and the verdict goes by the median.")


def why_doubt(pairs, repeats):
    """Lesson 1's verdict's caveat where its repeats disagree on which run finished first ('' where they agree)."""
    _, each = fastest(repeats)
    return "" if len(set(each)) == 1 else (
        f"The {len(repeats)} repeats disagree on which finished first ({', '.join(WHY_ROWS[i] for i in each)}): on "
        "this machine the timing does not decide it, and the verdict goes by the median.")


def look_for_why(pairs, repeats):
    """The three kinds of decoding on this machine: speed on the engine's clock (the spread of the repeats) against
    the target alone, the speed-up every tab shows (costs.speedup_over_target), calls, and the target's NLL."""
    traces = repeats[0]
    stats = [ENGINE.call(row_stats, pair, trace) for pair, trace in zip(pairs, traces)]
    prices = ENGINE.call(run_prices, pairs[-1], traces[-1].gamma)
    # five columns, two numbers to a cell: the table stays readable at a phone's width
    lines = [f"| {name} | {rate_spread(repeats, i)} | {number(measured_speedup(repeats, i), 2)}x · "
             f"{number(s['speedup'], 2)}x | {t.stats['target_calls']} · {number(t.stats['tokens_per_target_call'], 2)} "
             f"| {percent(t.stats['acceptance_rate'])} · {number(s['target_nll'], 2)} |"
             for i, (name, t, s) in enumerate(zip(WHY_ROWS, traces, stats))]
    doubt = why_doubt(pairs, repeats)
    return ("Tokens/s on the engine's clock (its calls and work, not the page's): the median and least-most of "
            f"{len(repeats)} repeats; against the target alone: the measured ratio and the priced speed-up every tab "
            "shows.\n\n| decoding | tokens/s | measured · priced | target calls · tokens per call | acceptance · "
            "target NLL |\n"
            "|---|---|---|---|---|\n" + "\n".join(lines) +
            (f"\n\n{doubt}" if doubt else "") + f"\n\n{blocks_compared(*traces[1:])}\n\n"
            f"Here a draft call cost {number(prices.c, 2)} of a target token ({number(1000 * prices.draft, 1)} ms "
            f"against {number(1000 * prices.target, 1)} ms) and a verification of {prices.block} tokens "
            f"{number(prices.verify_ratio, 2)} target tokens, measured in alternation (prices.py). The paper's "
            "speed-ups are measured at the large model's quality with T5 at batch size 1 on a TPUv4, where (as "
            "speculative decoding assumes) scoring a few tokens costs about as much as one; on a small CPU the target "
            "is compute-bound, a verification of several tokens costs more than one, and a cascade pays only where c "
            "is small and proposals are kept (lesson 8; docs/benchmarks.md). Lossless's NLL is the target's own "
            "samples'; the cascade's moves with alpha.")


WHY_ROWS = ("target alone", "speculative decoding (lossless)", "speculative cascade (v3, alpha 0.5)")


def blocks_compared(lossless, cascade):
    """Whose blocks ran longer in this run, lossless's or the cascade's, by the share of proposals kept, and why it
    can go either way (Eq. 11)."""
    ours, theirs = cascade.stats["acceptance_rate"], lossless.stats["acceptance_rate"]
    longer = "longer than" if ours > theirs else "shorter than" if ours < theirs else "as long as"
    return (f"In this run v3 kept {percent(ours)} of its proposals and lossless {percent(theirs)}, so v3's blocks ran "
            f"{longer} lossless's ({number(cascade.stats['tokens_per_target_call'], 2)} against "
            f"{number(lossless.stats['tokens_per_target_call'], 2)} tokens per target call). It can go either way: "
            "v3 keeps every proposal from its accepted set A, but one outside A only with probability "
            "min(1, eta p(v) / q(v)), less often than lossless's min(1, p(v) / q(v)) (Eq. 11), so where the draft "
            "puts its mass decides (lesson 6).")


def held_why(pairs, repeats):
    """The index of the run that wrote its tokens fastest on the engine's clock, by the median of the repeats
    (why_doubt says where they disagree): 0 the cascade, 1 lossless, 2 the target alone."""
    return {2: 0, 1: 1, 0: 2}[fastest(repeats)[0]]


def derivation_predictions(pos, alpha):
    """What each of the derivation lesson's answers predicts at a position: above opt's line, max p > max q, a TV
    above a half."""
    gap, tv = pos["max_p"] - pos["max_q"], pos["tv"]
    return gap > alpha * tv, gap > 0, tv > 0.5


def held_derivation(pair, traces):
    """The answer whose prediction matches the engine's own opt decisions at the most positions of the run (positions
    within rounding of opt's line left out)."""
    trace = traces[-1]
    alpha = trace.settings["alpha"]
    positions = [pos for pos in trace.positions if abs(pos["max_p"] - pos["max_q"] - alpha * pos["tv"]) > 1e-9]
    matches = [sum(derivation_predictions(pos, alpha)[k] == (alpha < pos["a_star"]["opt"]) for pos in positions)
               for k in range(3)]
    return max(range(3), key=matches.__getitem__)


def look_for_derivation(pair, traces):
    trace = traces[-1]
    return ("Two positions of this run, in the steps' terms:\n\n" + live_numbers(trace, trace.settings["alpha"]) +
            "\n\nThe decision map above places every position: opt's own decisions (alpha < a*) fall above its line "
            "max p - max q = alpha TV and below it, never across.")


def live_numbers(trace, alpha):
    """Lemma 3 and Eq. 10 at two positions of the lesson's opt run: one it deferred at, one it did not."""
    positions = [(i, pos) for i, pos in enumerate(trace.positions) if pos.get("tv") is not None]
    lines = []
    for wanted, verb in ((True, "deferred"), (False, "did not defer")):
        found = next(((i, pos) for i, pos in positions if (alpha < pos["a_star"]["opt"]) == wanted and pos["tv"] > 0),
                     None)
        if found is None:
            continue
        i, pos = found
        gap, tv = pos["max_p"] - pos["max_q"], pos["tv"]
        risk = "risked" if wanted else "would have risked"
        lines.append(f"- Token #{i} ({pos['text']!r}): max p - max q = {number(gap)}, TV = {number(tv)}, alpha TV = "
                     f"{number(alpha * tv)}, so opt {verb} (a* = {number(pos['a_star']['opt'])}); deferring there "
                     f"{risk} a rejection with probability TV = {number(tv)} (Lemma 3).")
    return "\n".join(lines)
