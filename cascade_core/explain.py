"""A position's decision in words and numbers: the statistic a rule thresholds, and why it did what it did.

Works on a trace position (see Trace) so the app can explain any token under any (rule, alpha) without a
model call. Every rule defers iff alpha < a*; the threshold form (each rule's record) is the same test, as
the paper writes it."""
import math

from .rules import RULES


def threshold(rule, pos, alpha):
    """(statistic label, statistic value, threshold value, threshold formula) or None where the rule has no
    threshold or the position lacks its numbers. The rule defers iff statistic < threshold, except BiLD*,
    which defers iff statistic > threshold."""
    record = RULES.get(rule)
    if record is None or record.statistic is None or rule not in (pos.get("a_star") or {}):
        return None
    (label, statistic), (formula, bound) = record.statistic, record.threshold
    if statistic(pos) is None:  # a trace without details keeps only a*
        return None
    return label, statistic(pos), bound(pos, alpha), formula


def deferred(rule, pos, alpha):
    a_star = (pos.get("a_star") or {}).get(rule)
    return a_star is not None and alpha < a_star


def explain(rule, pos, alpha):
    """One sentence, with the numbers, saying why the rule did what it did at this position."""
    if rule not in (pos.get("a_star") or {}):
        return (f"{rule} cannot be evaluated at this token: it comes from a baseline run that computed only one "
                "model's distribution. Run a cascade rule to compare q and p.")
    token, proposal = repr(pos["text"]), repr(pos["proposal_text"])
    if rule == "target":
        return f"Target only: {token} was sampled from p (p = {pos['p_x']:.3f})." if pos.get("p_x") is not None \
            else f"Target only: {token} was sampled from p."
    if rule == "draft":
        return f"Draft only: {token} was sampled from q."
    kept = pos["source"] != "replaced"
    outcome = (f"the target's acceptance test kept it (probability {pos['accept_prob']:.3f})" if kept else
               f"the target rejected it (keep probability {pos['accept_prob']:.3f}) and sampled {token} instead")
    if rule == "lossless":
        return f"Lossless: the draft proposed {proposal} with q = {pos['q_x']:.3f}, p = {pos['p_x']:.3f}; {outcome}."
    label, stat, thresh, formula = threshold(rule, pos, alpha)
    a_star = pos["a_star"][rule]
    a_text = "inf" if math.isinf(a_star) else f"{a_star:.3f}"
    if rule == "bild":
        compare = f"{label} = {stat:.3f} {'>' if deferred(rule, pos, alpha) else '<='} alpha = {alpha:.3f}"
    else:
        compare = f"{label} = {stat:.3f} {'<' if deferred(rule, pos, alpha) else '>='} {formula} = {thresh:.3f}"
    if not deferred(rule, pos, alpha):
        return (f"{rule} did not defer: {compare}, so the draft's {proposal} stands "
                f"(it would defer for alpha < a* = {a_text}).")
    return f"{rule} deferred: {compare} (alpha < a* = {a_text}), so the draft's {proposal} went to the target; {outcome}."
