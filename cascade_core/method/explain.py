"""A position's decision in numbers: the statistic a rule thresholds, whether it deferred, and one decision taken
apart (``dissect``, the Sandbox's). Works on a trace position (see Trace), so the app can explain any token under
any (rule, alpha) without a model call (its words: app/viz/tokens.py). Every rule defers iff alpha < a*; the
threshold form (each rule's record) is the same test, as the paper writes it."""
import math

import torch

from cascade_core.messages import is_finite_number, shown
from cascade_core.method.distributions import Distributions, total_variation
from cascade_core.method.keep_sets import keep_set_output
from cascade_core.method.rules import RULES, acceptance_probability, get_rule, residual
from cascade_core.method.sampling import verified_output


def threshold(rule, pos, alpha):
    """(statistic label, statistic value, threshold value, threshold formula) or None where the rule has no
    threshold or the position lacks its numbers. The rule defers iff statistic < threshold, except the
    divergence rules (``defers_above``: BiLD*, fuzzy, the KL judge), which defer iff statistic > threshold."""
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


ROUNDING = 1e-12


def dissect(rule, q, p, alpha, rest=None):
    """Every number of one decision, for distributions q and p over a small vocabulary (lists, normalised here;
    temperature 1): pi, the acceptance probability and the residual per token, a* per token (a position rule's
    single a* repeated), which tokens the rule defers, TV, ``rejection_prob`` (that the draft's token is rejected),
    and ``output``: the probability that the verified token is each token, enumerated over the draft's proposals,
    which equals pi (lossy: its own output). Where max(0, pi - q) is zero everywhere (pi = q) no rejection can
    happen and the residual is all zeros: the engine's fallback to pi there is never sampled.

    ``rest``: the last entry is not a token but the rest of a real vocabulary (a trace position's unlisted tokens),
    as a dict: ``q_bound``, ``p_bound`` (no token in it has more), and the engine's ``tv`` and ``a_star`` (a
    position rule's a*, which reads the whole vocabulary: TV, D(q, p)). The rest is never a rule's max; its a* is
    None, and its ``defers`` True or False where all its tokens fall on one side of the threshold, else None
    (``rest_split``: the numbers then take none of them as deferred)."""
    record = get_rule(rule)
    record.check_alpha(alpha)
    q, p = (_distribution(v, name) for v, name in ((q, "q"), (p, "p")))
    if len(q) != len(p):
        raise ValueError(f"q and p must have the same length, got {len(q)} and {len(p)}")
    d, tokens = Distributions(q, p), len(q) - (rest is not None)
    if record.keep is not None:
        return _keep_set(record, d, alpha, rest)
    if record.per_token:  # the listed tokens' own a*, the rest left out of every max
        a_star = record.a_star(Distributions(q[:tokens], p[:tokens]))
    else:  # one a* for the position: the engine's where the rest hides part of the vocabulary
        a_star = (record.a_star(d) if rest is None else q.new_tensor(float(rest["a_star"][rule]))).expand(tokens)
    defers = alpha < a_star
    rest_defers = None
    if rest is not None:
        rest_defers = _rest_defers(record, q[:tokens], p[:tokens], rest, alpha, bool(defers[0]))
        defers = torch.cat([defers, torch.tensor([bool(rest_defers)])])
        a_star = torch.cat([a_star, torch.tensor([math.nan], dtype=q.dtype)])
    pi = record.pi(d, defers if record.per_token else defers[0], alpha)
    accept = acceptance_probability(q, pi, alpha if record.lenience else 0.0)
    excess = (pi - q).clamp_min(0)
    # A token rule that keeps every token renormalises q into pi: the difference is float64 rounding (~1e-17),
    # not a residual, so below ROUNDING no rejection can happen.
    rejects = bool(excess.sum() > ROUNDING)
    a_stars = [None if math.isnan(a) else a for a in a_star.tolist()]
    shown_defers = defers.tolist()
    if rest is not None:
        shown_defers[-1] = rest_defers
    return dict(q=q.tolist(), p=p.tolist(), pi=pi.tolist(), accept_prob=accept.tolist(),
                residual=(excess / excess.sum() if rejects else torch.zeros_like(q)).tolist(),
                rejection_prob=max(0.0, 1 - float((q * accept).sum())), a_star=a_stars, defers=shown_defers,
                tv=float(total_variation(q, p)) if rest is None else float(rest["tv"]),
                output=verified_output(q, accept, residual(pi, q)).tolist(),
                rest_split=rest is not None and rest_defers is None and record.kind == "token")


def _keep_set(record, d, alpha, rest):
    """``dissect`` for a keep-set rule (cascade_core/method/keep_sets.py): no pi and no residual; ``accept_prob`` is
    a(v), ``base`` what a rejection samples from before the rejected token is taken out, ``output`` the emitted
    distribution. A trace position's rest counts as one token here (its a*, top-10 and entropy included)."""
    keep, base = record.keep(d, alpha), record.base(d)
    a_star = record.a_star(d)
    return dict(q=d.q.tolist(), p=d.p.tolist(), pi=None, accept_prob=keep.tolist(), residual=None,
                base=(base / base.sum()).tolist(), rejection_prob=max(0.0, 1 - float((d.q * keep).sum())),
                a_star=[None if math.isnan(a) else a for a in a_star.tolist()], defers=(alpha < a_star).tolist(),
                tv=float(total_variation(d.q, d.p)) if rest is None else float(rest["tv"]),
                output=keep_set_output(d.q, keep, base).tolist(), rest_split=False)


def _rest_defers(record, q, p, rest, alpha, position_defers):
    """Whether every token of the rest defers (True), none does (False), or it splits (None). A token rule's a*
    is monotone in the token's own q or p: between a token at the bounds and one at zero lies every a* in it."""
    if not record.per_token:
        return position_defers
    ends = [record.a_star(Distributions(torch.cat([q, q.new_tensor([q_v])]), torch.cat([p, p.new_tensor([p_v])])))[-1]
            for q_v, p_v in ((rest["q_bound"], rest["p_bound"]), (0.0, 0.0))]
    lo, hi = min(map(float, ends)), max(map(float, ends))
    return True if alpha < lo else False if alpha >= hi else None


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
