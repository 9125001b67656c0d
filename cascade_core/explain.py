"""A position's decision in words and numbers: the statistic a rule thresholds, and why it did what it did.

Works on a trace position (see Trace) so the UI can explain any token under any (rule, alpha) without a
model call. Every rule defers iff alpha < a*; the threshold form below is the same test, as the paper
writes it."""
import math

FORMS = {
    "chow": ("max q", lambda pos, a: pos["max_q"], lambda pos, a: 1 - a, "1 - alpha"),
    "diff": ("max q", lambda pos, a: pos["max_q"], lambda pos, a: pos["max_p"] - a, "max p - alpha"),
    "opt": ("max q", lambda pos, a: pos["max_q"], lambda pos, a: pos["max_p"] - a * pos["tv"], "max p - alpha * TV"),
    "v1": ("q(x)", lambda pos, a: pos["q_x"], lambda pos, a: pos["max_p"] - a, "max p - alpha"),
    "v2": ("p(x)", lambda pos, a: pos["p_x"], lambda pos, a: pos["max_p"] - a, "max p - alpha"),
    "v3": ("p(x)", lambda pos, a: pos["p_x"], lambda pos, a: (1 - a) * pos["max_p"], "(1 - alpha) * max p"),
    # These two defer when the statistic is *above* / below in their own sense; expressed through a*.
    "bild": ("D(q, p)", lambda pos, a: pos["a_star"]["bild"], lambda pos, a: a, "alpha"),
    "lossy": ("p(x) / q(x)", lambda pos, a: 1 - pos["a_star"]["lossy"], lambda pos, a: 1 - a, "1 - alpha"),
}


def threshold(rule, pos, alpha):
    """(statistic label, statistic value, threshold value, threshold formula) or None for alpha-free rules.
    The rule defers iff statistic < threshold, except BiLD*, which defers iff statistic > threshold."""
    if rule not in FORMS or not pos.get("a_star") or rule not in pos["a_star"]:
        return None
    label, stat, thresh, formula = FORMS[rule]
    return label, stat(pos, alpha), thresh(pos, alpha), formula


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
