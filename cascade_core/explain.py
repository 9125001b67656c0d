"""A position's decision in words and numbers: the statistic a rule thresholds, and why it did what it did.

Works on a trace position (see Trace) so the app can explain any token under any (rule, alpha) without a
model call. Every rule defers iff alpha < a*; the threshold form (each rule's record) is the same test, as
the paper writes it."""
import math

import torch

from .rules import RULES, Distributions, get_rule, total_variation
from .sampling import acceptance_and_residual, output_distribution
from .values import is_finite_number, shown


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


ROUNDING = 1e-12


def dissect(rule, q, p, alpha):
    """Every number of one decision, for distributions q and p over a small vocabulary (lists, normalised here;
    temperature 1): pi, the acceptance probability and the residual per token, a* per token (a position rule's
    single a* repeated), which tokens the rule defers, TV, ``rejection_prob`` (that the draft's token is rejected),
    and ``output``: the probability that the verified token is each token, enumerated over the draft's proposals,
    which equals pi (lossy: its own output). Where max(0, pi - q) is zero everywhere (pi = q) no rejection can
    happen and the residual is all zeros: the engine's fallback to pi there is never sampled."""
    record = get_rule(rule)
    record.check_alpha(alpha)
    q, p = (_distribution(v, name) for v, name in ((q, "q"), (p, "p")))
    if len(q) != len(p):
        raise ValueError(f"q and p must have the same length, got {len(q)} and {len(p)}")
    d = Distributions(q, p)
    accept, excess, pi = acceptance_and_residual(rule, d, alpha)
    a_star = record.a_star(d)
    a_star = a_star if record.per_token else a_star.expand(len(q))
    # A token rule that keeps every token renormalises q into pi: the difference is float64 rounding (~1e-17),
    # not a residual, so below ROUNDING no rejection can happen.
    rejects = bool((pi - q).clamp_min(0).sum() > ROUNDING)
    return dict(q=q.tolist(), p=p.tolist(), pi=pi.tolist(), accept_prob=accept.tolist(),
                residual=(excess / excess.sum() if rejects else torch.zeros_like(q)).tolist(),
                rejection_prob=max(0.0, 1 - float((q * accept).sum())), a_star=a_star.tolist(),
                defers=(alpha < a_star).tolist(), tv=float(total_variation(q, p)),
                output=output_distribution(rule, d, alpha).tolist())


def _distribution(values, name):
    """A probability vector from non-negative weights (normalised), or a ValueError naming q or p. Weights are
    scaled by their largest first, so that weights near the float limit (1e308 each) do not overflow their sum."""
    if not isinstance(values, (list, tuple)) or not 2 <= len(values) <= 64 or \
            not all(is_finite_number(v) and v >= 0 for v in values):
        raise ValueError(f"{name} must be a list of 2 to 64 non-negative numbers, got {shown(values)}")
    weights = torch.tensor([float(v) for v in values], dtype=torch.float64)
    if weights.max() <= 0:
        raise ValueError(f"{name} must have some positive weight, got {shown(values)}")
    weights = weights / weights.max()
    return weights / weights.sum()
