"""Speculative sampling against a rule's pi, with position-keyed common random numbers.

Every output position i gets three uniforms from a stream keyed by (seed, i): one for the draft's
inverse-CDF sample, one for the acceptance coin, one for the residual sample. Because nothing else
consumes randomness, the emitted token at position i depends only on the prefix and these three
numbers: not on gamma, KV caching or where a block started. Tests and the app's re-runs rely on that.
"""
import functools
from dataclasses import dataclass

import numpy as np
import torch

from cascade_core.method.distributions import Distributions
from cascade_core.method.keep_sets import keep_set_output
from cascade_core.method.rules import RULES, acceptance_probability, get_rule, residual

DRAFT, ACCEPT, RESIDUAL = 0, 1, 2
# A decision this close to its threshold (a sample to its bin's edge, a keep test's uniform to its probability, alpha
# to a*, the greedy top two to each other) is a near-tie: a row in another batch, whose float32 numbers differ in
# their last bits (~1e-6 on the tiny and bundled pairs), can decide it the other way. The trace marks them.
NEAR_TIE = 1e-5


def position_uniforms(seed, positions):
    """float64 uniforms [len(positions), 3] in [0, 1), a pure function of (seed, position)."""
    positions = list(positions)
    if not positions:
        return torch.zeros(0, 3, dtype=torch.float64)
    first, last = min(positions) // CHUNK, max(positions) // CHUNK
    table = torch.cat([_chunk(seed, k) for k in range(first, last + 1)])
    start = positions[0] - first * CHUNK
    if positions == list(range(positions[0], positions[0] + len(positions))):  # a block's: a slice, no gather
        return table[start : start + len(positions)]
    return table[torch.tensor(positions) - first * CHUNK]


CHUNK = 32


@functools.lru_cache(maxsize=1 << 12)
def _chunk(seed, k):
    """Positions k * CHUNK .. (k + 1) * CHUNK - 1's uniforms, drawn together and kept: one position's generator
    drawn alone between two model calls runs cold after a forward, 32 in a row cost a tenth each, and a block after a
    rejection draws again the positions it drafted past it (docs/design.md, "Measured choices")."""
    return torch.tensor(np.array([np.random.default_rng([seed, pos]).random(3) for pos in range(k * CHUNK,
                                                                                               (k + 1) * CHUNK)]))


def sample_inverse_cdf(d, u):
    """Rows of d ([n, V], not necessarily normalised) sampled with uniforms u ([n]): the smallest v
    whose cumulative mass exceeds u * total. float64 so the result does not hinge on summation order.

    Returns (ids, margins): a margin is how far u * total lies from the nearer edge of the sampled token's bin, as a
    share of the total (a list of floats). Where it is below the rounding of the numbers behind d (a near-tie:
    NEAR_TIE), the same uniform over d rounded otherwise (another batch's kernels) can sample a neighbouring token."""
    cdf = d.to(torch.float64).cumsum(-1)
    total = cdf[:, -1:]
    target = u.to(cdf.device).unsqueeze(-1) * total
    idx = torch.searchsorted(cdf, target, right=True).clamp_max_(d.shape[-1] - 1)
    # the bin's edges, the target and the total read back in one list: a draw is a few rows, and between two model
    # calls each tensor op costs more in dispatch than in arithmetic
    numbers = torch.cat([cdf.gather(-1, torch.cat([idx - 1, idx], -1).clamp_min_(0)), target, total], -1).tolist()
    margins = [min(t - (lower if i > 0 else 0.0), upper - t) / whole
               for (lower, upper, t, whole), i in zip(numbers, idx.view(-1).tolist())]
    return idx.squeeze(-1), margins


def finite(logits, model):
    """The logits, or a ValueError naming the model if any is NaN or +inf, or all are -inf. A -inf alone is a token
    the model cannot emit (a sub-vocabulary head's other tokens)."""
    # One reduction: max propagates NaN and is +inf where any logit is (and -inf only if every logit is).
    if not torch.isfinite(logits.max()):  # on CUDA this waits for the GPU: real time, counted as the call's
        name = getattr(getattr(model, "config", None), "name_or_path", None) or "a model"
        raise ValueError(f"{name} produced NaN or inf logits; the weights or the dtype are broken for this input")
    return logits


def untempered_and_tempered(logits, temperature, model=None):
    """(the temperature-1 softmax the rules threshold, the distribution tokens are sampled from: temperature
    applied, or one-hot argmax at temperature 0). Float32 at least. A ValueError where either is not finite: naming
    ``model`` where its logits are broken (``finite``), else the temperature."""
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    untempered = torch.softmax(logits, -1)
    if temperature == 0:
        tempered = torch.zeros_like(untempered).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    else:
        tempered = untempered if temperature == 1 else torch.softmax(logits / temperature, -1)
    # One reduction checks both (a pass over the vocabulary each, four per drafting step before):
    # a softmax is in [0, 1] or NaN, NaN throughout a row whose logits hold a NaN or +inf or are all -inf, and the
    # tempered one also where finite logits overflow once divided by a tiny temperature. At T = 0 the one-hot is
    # finite whatever the logits, so the untempered one is checked.
    if not torch.isfinite((untempered if temperature == 0 else tempered).sum()):
        finite(logits, model)
        raise ValueError(f"the next-token distribution at temperature {temperature} is not finite (NaN); "
                         "raise the temperature or use 0 for greedy decoding")
    return untempered, tempered


def output_distribution(name, d, alpha):
    """The exact distribution of the verified token, enumerated over the draft's proposals: v is proposed with
    probability q(v) and kept with its acceptance; a rejection samples norm(residual). For every rule verified by
    min(1, pi / q) this is pi itself (the guarantee the tests check); for lossy it is lossy decoding's output, for
    a keep-set rule its own (cascade_core/method/keep_sets.py)."""
    rule = RULES[name]
    if rule.keep is not None:
        return keep_set_output(d.q, rule.keep(d, alpha), rule.base(d))
    pi = rule.target(d, alpha)
    accept = acceptance_probability(d.q, pi, alpha if rule.lenience else 0.0)
    return verified_output(d.q, accept, residual(pi, d.q))


def verified_output(q, accept, excess):
    """The verified token's distribution from the draft's q, each token's acceptance and the residual."""
    kept = q * accept
    return kept + (1 - kept.sum(-1, keepdim=True)) * excess / excess.sum(-1, keepdim=True)


def emitted_distribution(name, d, alpha):
    """The distribution the emitted token follows at every position of d, over the whole vocabulary: the rule's pi
    (the exactness of the verification, Algorithm 4), or for lossy and the keep-set rules, whose acceptance is not
    of the min(1, pi / q) form, their exact output distribution."""
    rule = RULES[name]
    return output_distribution(name, d, alpha) if rule.lenience or rule.keep else rule.target(d, alpha)


def target_distribution(name, q, p, alpha):
    """``emitted_distribution`` for ``[..., V]`` probability tensors at temperature 1, the rule and alpha checked."""
    get_rule(name).check_alpha(alpha)
    return emitted_distribution(name, Distributions(q, p), alpha)


@dataclass
class Verdict:
    """How a block's draft tokens fared: the first ``kept`` stand; ``correction`` (None if all were kept) is
    the residual sample that replaces token ``kept``, ``correction_margin`` its sample's margin, ``replacement``
    what it was sampled from (unnormalised ``[V]``: the replay shows it). Per position: the acceptance probability
    of the draft's token, and whether the rule deferred there."""

    kept: int
    correction: int | None
    accept_prob: torch.Tensor
    deferred: torch.Tensor
    correction_margin: float | None = None
    replacement: torch.Tensor | None = None

    @property
    def emitted(self):
        return self.kept + (self.correction is not None)

    def sources(self):
        kept = ["deferred" if deferred else "accepted" for deferred in self.deferred[: self.kept].tolist()]
        return kept + ["replaced"] * (self.correction is not None)


def verify(name, d, x, alpha, uniforms):
    """Verify draft tokens x ([n]) position by position: keep x_j with the rule's probability (min(1, pi_j(x_j) /
    q_j(x_j)); lossy's lenient form; a keep-set rule's a(x_j)) until the first rejection, whose replacement (the
    residual, or the keep-set rule's base without x_j) is sampled; the block ends there."""
    accept, rejection_row, deferred = RULES[name].verification(d, alpha, x)
    kept = uniforms[:, ACCEPT].to(accept.device) < accept.double()
    rejected = (~kept).nonzero()
    if len(rejected) == 0:
        return Verdict(len(x), None, accept, deferred)
    j = int(rejected[0])
    replacement = rejection_row(j)
    correction, margin = sample_inverse_cdf(replacement, uniforms[j : j + 1, RESIDUAL])
    return Verdict(j, int(correction[0]), accept, deferred, margin[0], replacement[0])
