"""What each lesson's run shows, in that run's own numbers: the "What to look for" text under a lesson (app/lessons.py
names which lesson reads which)."""
from cascade_core import RULES
from cascade_core.costs import (break_even_cost_ratio, expected_speedup, expected_tokens_per_call, priced_speedup,
                                rejection_terms)
from cascade_core.explain import dissect
from cascade_core.running import OTHER_ROWS

from .compare import label, row_stats
from .sandbox import START
from .strategies import other_calls_note
from .viz.format import number
from .worker import ENGINE

NEAR_LOSSLESS = 1.1  # "near lossless": a target NLL at most 10% above lossless's (not a quality score)


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
    stats = [ENGINE.call(row_stats, pair, t, 0.25) for t in traces]
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
              "columns mix these effects and may show the opposite. The decision map below shows the rule: each of "
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


def look_for_frontier(rows):
    """Each rule's cheapest point whose target NLL is at most 10% above lossless's (the target's own samples)."""
    by_rule = {}
    for row in rows:
        by_rule.setdefault(row["rule"], []).append((row["target_calls"] / row["tokens"], row["target_nll"]))
    cost, quality = by_rule.pop("lossless")[0]
    lines = []
    for rule, points in by_rule.items():
        near = [c for c, nll in points if nll <= NEAR_LOSSLESS * quality]
        cheapest = f"{number(min(near), 2)} ({percent(min(near) / cost)} of lossless's)" if near else "none"
        lines.append(f"| {rule} | {len(points)} | {number(min(c for c, _ in points), 2)}–"
                     f"{number(max(c for c, _ in points), 2)} | {cheapest} |")
    return (f"Lossless: {number(cost, 2)} target calls per token, target NLL {number(quality, 2)}.\n\n"
            f"| rule | points | target calls per token | fewest calls per token within {percent(NEAR_LOSSLESS - 1)} "
            "of lossless's NLL |\n|---|---|---|---|\n" + "\n".join(lines) +
            "\n\nAt equal target calls a lower point is text the target finds likelier, not better text: a point "
            "below lossless is more mode-seeking than the target's own samples. One prompt and 24 tokens cannot rank "
            "the rules: another prompt or seed moves every point, which is why the sweeps average prompt sets with "
            "intervals (docs/sweeps.md).")


def per_call(trace, role):
    c = trace.counters
    return c[f"{role}_seconds"] / c[f"{role}_calls"]


def look_for_timed(pairs, traces):
    """Per draft: measured speed-up, and the cost model priced with the calls these runs timed: one target token
    (the target alone), one draft call and one verification of up to gamma + 1 tokens (the cascade); for a head,
    the emitted tokens outside its vocabulary."""
    target, *cascades = traces
    one = per_call(target, "target")
    lines, notes = [], []
    for pair, cascade in zip(pairs[1:], cascades):
        gamma, a = cascade.settings["gamma"], cascade.stats["acceptance_rate"]
        measured = cascade.stats["tokens_per_second"] / target.stats["tokens_per_second"]
        draft, verify = per_call(cascade, "draft"), per_call(cascade, "target")
        priced = priced_speedup(a, gamma, one, draft, verify)
        kind = pair.drafting.label
        lines.append(f"| {kind} | {number(cascade.stats['tokens_per_second'], 1)} | {number(measured, 2)}x | "
                     f"{number(1000 * draft, 1)} ms (c = {number(draft / one, 2)}) | {number(verify / one, 2)} | "
                     f"{number(a, 2)} | "
                     f"{number(priced, 2)}x | {number(expected_speedup(a, gamma, draft / one, gamma + 1), 2)}x |")
        notes.append(f"- With the {kind}: {pays(a, gamma, verify / one)}")
        vocabulary = pair.drafting.vocabulary(pair.draft)
        if vocabulary is not None:
            outside = sum(token not in vocabulary for token in cascade.tokens)
            notes.append(f"- The {kind} proposes only the {len(vocabulary):,} tokens of its vocabulary (q = 0 "
                         f"elsewhere): {outside} of the {len(cascade.tokens)} tokens written came from outside it, "
                         "each one the target's replacement, never a kept proposal.")
    beside = max(trace.counters.get(OTHER_ROWS, 0) for trace in traces)
    if beside:
        notes.append(f"- {other_calls_note(beside)}")
    gamma = cascades[0].settings["gamma"]
    return (f"Target alone: {number(target.stats['tokens_per_second'], 1)} tokens/s, one target token "
            f"{number(1000 * one, 1)} ms.\n\n"
            f"| v3, alpha 0.5, with | tokens/s | measured | one draft call | a verification of up to {gamma + 1} "
            "tokens, in target tokens | acceptance | cost model, these prices | Leviathan et al.'s (2023) estimate, "
            f"{gamma + 1} draft calls |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n" +
            "\n".join(notes) + "\n- A draft much cheaper than its target whose tokens are kept often, and a "
            "verification that costs about one target token (a large target on a GPU), are what make a cascade pay.")


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
    """0: some point's target NLL lies below lossless's; 1: none does."""
    lossless = next(row["target_nll"] for row in rows if row["rule"] == "lossless")
    return 0 if any(row["target_nll"] < lossless for row in rows if row["rule"] != "lossless") else 1


def held_timed(pairs, traces):
    """0: both drafts finished first; 1: the head only; 2: the draft model only; 3: neither."""
    target, *cascades = traces
    faster = {pair.draft_kind: trace.stats["tokens_per_second"] > target.stats["tokens_per_second"]
              for pair, trace in zip(pairs[1:], cascades)}
    return {(True, True): 0, (True, False): 1, (False, True): 2, (False, False): 3}[(faster["head"], faster["model"])]


def look_for_why(pairs, traces):
    """The three kinds of decoding on this machine: speed against the target alone, calls, and the target's NLL."""
    target, *others = traces
    stats = [ENGINE.call(row_stats, pair, trace, 0.25) for pair, trace in zip(pairs, traces)]
    base, one = target.stats["tokens_per_second"], per_call(target, "target")
    draft = per_call(others[-1], "draft")
    c = draft / one
    lines = [f"| {name} | {number(t.stats['tokens_per_second'], 1)} | "
             f"{number(t.stats['tokens_per_second'] / base, 2)}x | {t.stats['target_calls']} | "
             f"{percent(t.stats['acceptance_rate'])} | {number(t.stats['tokens_per_target_call'], 2)} | "
             f"{number(s['target_nll'], 2)} |"
             for name, t, s in zip(WHY_ROWS, traces, stats)]
    return ("| decoding | tokens/s | speed against the target alone | target calls | acceptance (proposals kept) | "
            "tokens per target call | target NLL |\n|---|---|---|---|---|---|---|\n" + "\n".join(lines) +
            f"\n\n{blocks_compared(*others)}\n\n"
            f"Here a draft call cost {number(c, 2)} of a target token ({number(1000 * draft, 1)} ms against "
            f"{number(1000 * one, 1)} ms). The paper's speed-ups are measured at the large model's quality with T5 at "
            "batch size 1 on a TPUv4, where (as speculative decoding assumes) scoring a few tokens costs about as "
            "much as one; on a small CPU the target is compute-bound, a verification of several tokens costs more "
            "than one, and a cascade pays only where c is small and proposals are kept (lesson 8; docs/benchmarks.md). "
            "Lossless's NLL is the target's own samples'; the cascade's moves with alpha.")


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


def held_why(pairs, traces):
    """The index of the run that wrote its tokens fastest: 0 the cascade, 1 lossless, 2 the target alone."""
    speeds = [trace.stats["tokens_per_second"] for trace in traces]
    return {2: 0, 1: 1, 0: 2}[max(range(3), key=speeds.__getitem__)]


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
            "\n\nThe decision map below places every position: opt's own decisions (alpha < a*) fall above its line "
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
