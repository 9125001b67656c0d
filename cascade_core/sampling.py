"""Position-keyed common random numbers and the one-position verification step.

Every output position i gets three uniforms from a stream keyed by (seed, i): one for the draft's
inverse-CDF sample, one for the acceptance coin, one for the residual sample. Because nothing else
consumes randomness, the emitted token at position i depends only on the prefix and these three
numbers: not on gamma, KV caching or where a block started. Tests and the UI's re-runs rely on that.
"""
import numpy as np
import torch

from .rules import pi_distribution

DRAFT, ACCEPT, RESIDUAL = 0, 1, 2


def position_uniforms(seed, positions):
    """float64 uniforms [len(positions), 3] in [0, 1), a pure function of (seed, position)."""
    return torch.tensor(
        np.array([np.random.default_rng([seed, pos]).random(3) for pos in positions]), dtype=torch.float64
    ).reshape(len(positions), 3)


def sample_inverse_cdf(d, u):
    """Rows of d ([n, V], not necessarily normalised) sampled with uniforms u ([n]): the smallest v
    whose cumulative mass exceeds u * total. float64 so the result does not hinge on summation order."""
    cdf = d.to(torch.float64).cumsum(-1)
    target = (u.to(cdf.device) * cdf[:, -1]).unsqueeze(-1)
    idx = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    return idx.clamp_max(d.shape[-1] - 1)


def sampling_distribution(logits, temperature):
    """(stat, sample): the untempered softmax the rules threshold, and the distribution tokens are
    drawn from (temperature-scaled, or one-hot argmax at temperature 0). Float32 log-softmax at least."""
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    stat = torch.softmax(logits, -1)
    if temperature == 0:
        sample = torch.zeros_like(stat).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    elif temperature == 1:
        sample = stat
    else:
        sample = torch.softmax(logits / temperature, -1)
    return stat, sample


def acceptance_and_residual(rule, q_stat, p_stat, q, p, x, alpha, greedy):
    """Per position: the probability of keeping draft token x, and the residual to sample from otherwise."""
    x = x.unsqueeze(-1)
    q_x = q.gather(-1, x).squeeze(-1).clamp_min(1e-10)
    if rule == "lossy":
        accept = (p.gather(-1, x).squeeze(-1) / ((1 - alpha) * q_x)).clamp_max(1.0)
        pi = p
    else:
        pi = pi_distribution(rule, q_stat, p_stat, q, p, alpha, greedy)
        accept = (pi.gather(-1, x).squeeze(-1) / q_x).clamp_max(1.0)
    residual = (pi - q).clamp_min(0)
    # Rounding can leave an all-zero residual where pi ~= q; the spec says sample from pi then.
    empty = residual.sum(-1, keepdim=True) <= 0
    residual = torch.where(empty, pi, residual)
    return accept, residual


def verify(rule, q_stat, p_stat, q, p, x, alpha, uniforms, greedy):
    """Verify draft tokens x ([n]) position by position.

    Returns (n_kept, correction, accept_prob): the number of leading positions whose draft token is
    kept, the residual token for position n_kept (None if all were kept), and per-position acceptance
    probabilities. Only the first rejection's residual is sampled, as the block ends there."""
    accept, residual = acceptance_and_residual(rule, q_stat, p_stat, q, p, x, alpha, greedy)
    kept = uniforms[:, ACCEPT].to(accept.device) < accept.double()
    rejected = (~kept).nonzero()
    if len(rejected) == 0:
        return len(x), None, accept
    j = int(rejected[0])
    correction = int(sample_inverse_cdf(residual[j : j + 1], uniforms[j : j + 1, RESIDUAL])[0])
    return j, correction, accept
