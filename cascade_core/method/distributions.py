"""Both models' next-token distributions at a block's positions, and the statistics over them that several rules,
the verification and the trace read: computed once per block, not once per reader (a block's a* of every rule read
max p nine times).

A head drafts over its own sub-vocabulary (8,192 of the bundled target's 49,152 tokens), so its q is zero outside
those columns (``support``). Every statistic that q weighs (BiLD*'s cross-entropy, the judge's KL, JS's and TV's
terms where q is non-zero) and every token rule's eta then reads those columns alone, and the rest of the
vocabulary enters through p's mass there; the same sums as over the whole vocabulary, whose other terms are zero
or p(v) times a constant (docs/lab/2026-12-04-engine-time.md).
"""
import math
from dataclasses import dataclass
from functools import cached_property

import torch
from torch.linalg import vecdot


def total_variation(q, p):
    """TV(p, q) = sum_v max(0, p(v) - q(v)): half the L1 distance; 1 - TV is the lossless acceptance rate."""
    return (p - q).clamp_min(0).sum(-1)


def max_prob(d):
    """The largest probability at each position. amax, not max(-1): max also finds the index, which
    no reader needs and which costs ten times the reduction (the engine takes ~15 per block; docs/design.md,
    "Measured choices")."""
    return d.amax(-1)


def log_of(d):
    """log d, 1e-30 where a probability is 0 (its term in a divergence is then 0 * finite). In place on the clamp's
    fresh tensor: one [n, V] tensor fewer to allocate and fill (docs/design.md, "Measured choices")."""
    return d.clamp_min(1e-30).log_()


def column(t, x):
    """t over the whole vocabulary ``[..., V]``, or (draft tokens x given) at x only, ``[..., 1]``: a token rule's
    a* at the proposals is the same formula on one column (elementwise, so the same numbers)."""
    return t if x is None else t.gather(-1, x.unsqueeze(-1))


@dataclass(frozen=True)
class Distributions:
    """Both models' next-token distributions at some positions, each ``[..., V]`` (None: not computed).

    ``q``, ``p``: what tokens are sampled from and verified with (temperature applied; one-hot at T = 0).
    ``q_untempered``, ``p_untempered``: the temperature-1 softmax, whose statistics (max q, max p, q(v), p(v)) the
    rules threshold, so chow's, diff's, v1's, v2's and v3's decisions do not depend on temperature. opt's do: its
    TV reads the tempered q and p (at T = 0, where both are one-hot, its pi is diff's at every alpha: Lemma 8), as
    does lossy's p(x) / q(x), and BiLD* takes its greedy form at T = 0. They default to ``q`` and ``p``.
    ``support``: the columns outside which q is zero (a head's sub-vocabulary), or None for all; ``q_on_support``:
    (q_untempered, q) at those columns, where the draft computed them so (else they are gathered)."""

    q: torch.Tensor | None
    p: torch.Tensor | None
    q_untempered: torch.Tensor | None = None
    p_untempered: torch.Tensor | None = None
    greedy: bool = False
    support: torch.Tensor | None = None
    q_on_support: tuple | None = None

    def __post_init__(self):
        for name in ("q", "p"):
            if getattr(self, f"{name}_untempered") is None:
                object.__setattr__(self, f"{name}_untempered", getattr(self, name))

    def rows(self, start, stop):
        """Positions start .. stop - 1 (with the statistics already computed for them)."""
        cut = lambda t: None if t is None else t[start:stop]  # noqa: E731
        part = Distributions(cut(self.q), cut(self.p), cut(self.q_untempered), cut(self.p_untempered), self.greedy,
                             self.support, None if self.q_on_support is None else tuple(map(cut, self.q_on_support)))
        for name in STATISTICS:
            if name not in self.__dict__ or (name == "on_q" and self.support is None):  # on_q is then self
                continue
            value = self.__dict__[name]
            part.__dict__[name] = value.rows(start, stop) if name == "on_q" else cut(value) if torch.is_tensor(
                value) else value
        return part

    def first(self, m):
        return self.rows(0, m)

    @cached_property
    def on_q(self):
        """These distributions at q's support only (itself where q may be non-zero anywhere), with max p of the
        whole vocabulary: a token rule's a*(v) there, and what q weighs, are the same numbers as over every token."""
        if self.support is None:
            return self
        cols = lambda t: None if t is None else t.index_select(-1, self.support)  # noqa: E731
        q_untempered, q = self.q_on_support or (cols(self.q_untempered), cols(self.q))
        part = Distributions(q, cols(self.p), q_untempered, cols(self.p_untempered), self.greedy)
        if self.p is not None:
            part.__dict__["max_p"] = self.max_p
        return part

    @cached_property
    def max_q(self):
        return max_prob(self.on_q.q_untempered)

    @cached_property
    def max_p(self):
        return max_prob(self.p_untempered)

    @cached_property
    def p_outside(self):
        """p's temperature-1 mass where q is zero: 0 without a support (a draft model's q covers every token)."""
        return 0.0 if self.support is None else self.p_untempered.sum(-1) - self.on_q.p_untempered.sum(-1)

    @cached_property
    def tv(self):
        """TV of the tempered q and p: where q is zero its term is p(v) itself."""
        if self.support is None:
            return total_variation(self.q, self.p)
        return total_variation(self.on_q.q, self.on_q.p) + (self.p.sum(-1) - self.on_q.p.sum(-1))

    @cached_property
    def log_q(self):
        """log q on q's support."""
        return log_of(self.on_q.q_untempered)

    @cached_property
    def log_p(self):
        """log p on q's support (what q weighs)."""
        return log_of(self.on_q.p_untempered)

    @cached_property
    def cross_entropy(self):
        """-sum_v q(v) log p(v), over q's support (q is zero elsewhere)."""
        return -vecdot(self.on_q.q_untempered, self.log_p)

    @cached_property
    def kl_q_p(self):
        """KL(q || p) = sum_v q(v) (log q(v) - log p(v)), over q's support."""
        return vecdot(self.on_q.q_untempered, self.log_q - self.log_p)

    @cached_property
    def js(self):
        """JS(q, p) = (KL(q || m) + KL(p || m)) / 2 with m = (q + p) / 2. Where q is zero, m = p / 2 and p's term is
        p(v) ln 2: the mass p_outside times ln 2."""
        on = self.on_q
        log_m = (on.q_untempered + on.p_untempered).mul_(0.5).clamp_min_(1e-30).log_()  # in place: see log_of
        inside = vecdot(on.q_untempered, self.log_q - log_m) + vecdot(on.p_untempered, self.log_p - log_m)
        return (inside + math.log(2) * self.p_outside) / 2


STATISTICS = ("on_q", "max_q", "max_p", "p_outside", "tv", "log_q", "log_p", "cross_entropy", "kl_q_p", "js")
