"""Deferral rules: when to use the target, and the distribution pi the draft token is verified against.

Every rule is defined by its critical alpha a*: the rule defers iff ``alpha < a*`` (strict, so ties go
to the draft, and larger alpha always means less deferral). Position rules have one a* per position;
token rules have one a*(v) per vocabulary token, and r(v) = [alpha < a*(v)] over the whole vocabulary.
Defining the decision through a* keeps the decision, the reported a* and the live recolouring in the
UI consistent by construction.

Shapes: q, p are ``[..., V]`` probability tensors. ``q``/``p`` are the sampling distributions
(temperature applied); ``q_stat``/``p_stat`` are the untempered ones whose statistics rules threshold.
"""
import math

import torch

POSITION_RULES = ("chow", "diff", "opt", "bild")
TOKEN_RULES = ("v1", "v2", "v3")
PAPER_RULES = ("chow", "diff", "opt", "v1", "v2", "v3")
RULES = PAPER_RULES + ("lossless", "lossy", "bild", "target", "draft")

# Rules whose pi is p wherever they defer: their outcome is the same whichever of them defers.
PI_IS_P_WHEN_DEFERRED = ("chow", "diff", "opt", "bild", "lossless")
# Rules that ignore alpha.
ALPHA_FREE = ("lossless", "target", "draft")

ALPHA_RANGE = {
    "chow": (0.0, 1.0),
    "diff": (-1.0, 1.0),
    "opt": (-math.inf, math.inf),
    "v1": (-1.0, 1.0),
    "v2": (-1.0, 1.0),
    "v3": (0.0, 1.0),
    "lossless": (-math.inf, math.inf),
    "lossy": (0.0, 1.0),  # lenience; 1 itself would accept everything and divide by zero
    "bild": (0.0, 10.0),
    "target": (-math.inf, math.inf),
    "draft": (-math.inf, math.inf),
}

DESCRIPTIONS = {
    "chow": "defer when the draft is unsure: max q < 1 - alpha",
    "diff": "defer when the target is surer than the draft: max q < max p - alpha",
    "opt": "defer when the target's extra confidence outweighs the cost of disagreeing: max q < max p - alpha * TV(p, q)",
    "v1": "token rule: defer tokens the draft rates low against the target's best: q(v) < max p - alpha",
    "v2": "token rule: defer tokens the target rates low against its best: p(v) < max p - alpha",
    "v3": "token rule: keep tokens within a factor (1 - alpha) of the target's best: defer p(v) < (1 - alpha) max p",
    "lossless": "speculative decoding: always verify against p; output distributed exactly as the target",
    "lossy": "lossy speculative decoding: keep with prob min(1, p(x) / ((1 - alpha) q(x))), alpha = lenience",
    "bild": "BiLD*: defer when the target finds the draft surprising: -sum q log p > alpha",
    "target": "target only: plain sampling from the large model (baseline)",
    "draft": "draft only: plain sampling from the small model (baseline)",
}


def check_rule(rule):
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; the rules are: {', '.join(RULES)}")


def check_alpha(rule, alpha):
    check_rule(rule)
    lo, hi = ALPHA_RANGE[rule]
    if not isinstance(alpha, (int, float)) or math.isnan(alpha):
        raise ValueError(f"alpha must be a number, got {alpha!r}")
    upper_ok = alpha < hi if rule == "lossy" else alpha <= hi
    if not (lo <= alpha and upper_ok):
        closing = ")" if rule == "lossy" else "]"
        raise ValueError(f"alpha={alpha} is outside rule {rule!r}'s range [{lo}, {hi}{closing}")


def _tv(q, p):
    return (p - q).clamp_min(0).sum(-1)


def _max(d):
    return d.max(-1).values


def _safe_ratio(num, den):
    """num / den, with 0/0 -> -inf and x/0 -> sign(x) * inf (used only where den = TV >= 0)."""
    ratio = num / den
    undefined = den == 0
    return torch.where(undefined, torch.where(num > 0, math.inf, -math.inf), ratio)


def _cross_entropy(q_stat, p_stat, greedy):
    log_p = p_stat.clamp_min(1e-30).log()
    if greedy:
        return -log_p.gather(-1, q_stat.argmax(-1, keepdim=True)).squeeze(-1)
    return -(q_stat * log_p).sum(-1)


def position_critical_alpha(rule, q_stat, p_stat, q, p, greedy=False):
    """a* for a position rule, shape ``[...]``."""
    if rule == "chow":
        return 1 - _max(q_stat)
    if rule == "diff":
        return _max(p_stat) - _max(q_stat)
    if rule == "opt":
        return _safe_ratio(_max(p_stat) - _max(q_stat), _tv(q, p))
    if rule == "bild":
        return _cross_entropy(q_stat, p_stat, greedy)
    raise ValueError(f"{rule!r} is not a position rule")


def token_critical_alpha(rule, q_stat, p_stat):
    """a*(v) for a token rule over the whole vocabulary, shape ``[..., V]``."""
    max_p = _max(p_stat).unsqueeze(-1)
    if rule == "v1":
        return max_p - q_stat
    if rule == "v2":
        return max_p - p_stat
    if rule == "v3":
        return 1 - p_stat / max_p
    raise ValueError(f"{rule!r} is not a token rule")


def critical_alphas(q_stat, p_stat, q, p, x, greedy=False):
    """a* of every rule for draft tokens ``x`` (shape ``[...]``); returns {rule: tensor[...]}."""
    x = x.unsqueeze(-1)
    full = torch.full(x.shape[:-1], math.inf, dtype=q.dtype, device=q.device)
    out = {rule: position_critical_alpha(rule, q_stat, p_stat, q, p, greedy) for rule in POSITION_RULES}
    for rule in TOKEN_RULES:
        out[rule] = token_critical_alpha(rule, q_stat, p_stat).gather(-1, x).squeeze(-1)
    q_x, p_x = q.gather(-1, x).squeeze(-1), p.gather(-1, x).squeeze(-1)
    out["lossy"] = 1 - p_x / q_x.clamp_min(1e-10)
    out["lossless"] = full
    out["target"] = full
    out["draft"] = -full
    return out


def critical_alpha(rule, q, p, x):
    """Public a*: the rule defers on draft token x iff alpha < a* (temperature 1: statistics = sampling)."""
    check_rule(rule)
    x = torch.as_tensor(x, device=q.device)
    return critical_alphas(q, p, q, p, x)[rule]


def _normalise(d):
    return d / d.sum(-1, keepdim=True)


def pi_distribution(rule, q_stat, p_stat, q, p, alpha, greedy=False):
    """pi for the verification of a draft token sampled from q (the rule's target distribution)."""
    if rule in ("lossless", "target"):
        return p
    if rule == "draft":
        return q
    if rule in POSITION_RULES:
        defer = alpha < position_critical_alpha(rule, q_stat, p_stat, q, p, greedy)
        return torch.where(defer.unsqueeze(-1), p, q)
    if rule in TOKEN_RULES:
        r = (alpha < token_critical_alpha(rule, q_stat, p_stat)).to(q.dtype)
        eta = (r * q).sum(-1, keepdim=True)
        return _normalise(q * (1 - r) + eta * p)
    raise ValueError(f"{rule!r} has no pi of its own (lossy is verified by lenience)")


def lossy_output_distribution(q, p, alpha):
    """The exact distribution of lossy speculative decoding's emitted token."""
    keep = q * torch.minimum(torch.ones_like(q), p / ((1 - alpha) * q.clamp_min(1e-10)))
    residual = (p - q).clamp_min(0)
    residual_mass = residual.sum(-1, keepdim=True)
    residual = torch.where(residual_mass > 0, residual / residual_mass.clamp_min(1e-30), p)
    return keep + (1 - keep.sum(-1, keepdim=True)) * residual


def target_distribution(rule, q, p, alpha):
    """pi for probability tensors of shape [..., V], statistics and sampling distributions equal (T = 1).

    For every rule this is the distribution the emitted token follows; for lossy, whose acceptance
    is not of the min(1, pi/q) form, it is that exact output distribution."""
    check_alpha(rule, alpha)
    if rule == "lossy":
        return lossy_output_distribution(q, p, alpha)
    return pi_distribution(rule, q, p, q, p, alpha)


def outcome_unchanged(old_rule, old_alpha, a_star_old, new_rule, new_alpha, a_star_new):
    """Whether a position's emitted token is certain to stay the same when (rule, alpha) changes.

    With position-keyed random numbers the draft proposes the same x under any rule. If neither
    setting defers, x stands in both; if both defer to pi = p, the same coins meet the same pi.
    Anything else (token rules' eta, lossy's lenience, target-only's direct sampling) may differ."""
    if old_rule == new_rule and (old_alpha == new_alpha or old_rule in ALPHA_FREE):
        return True
    if a_star_old is None or a_star_new is None:
        return False
    old_deferred, new_deferred = old_alpha < a_star_old, new_alpha < a_star_new
    if not old_deferred and not new_deferred:
        return True
    return (old_deferred and new_deferred
            and old_rule in PI_IS_P_WHEN_DEFERRED and new_rule in PI_IS_P_WHEN_DEFERRED)
