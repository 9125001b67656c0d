"""A chain proposal, and drafting one: what both of today's drafts do in step 1 of a block."""
from dataclasses import dataclass

import torch

from cascade_core.method.distributions import Distributions
from cascade_core.method.sampling import DRAFT, sample_inverse_cdf, untempered_and_tempered


@dataclass
class Proposal:
    """A row's proposals x_0 .. x_{n-1} with q_j of each: ``q`` tempered (what the rule and the verification read),
    ``q_untempered`` (temperature 1: the records and the rules' confidence); ``margins``: each draw's margin
    (sampling.sample_inverse_cdf: how near its uniform fell to a neighbouring token); ``support``: the columns
    outside which q is zero (a head's sub-vocabulary), None for all."""

    tokens: list
    q_untempered: torch.Tensor  # [n, V]
    q: torch.Tensor  # [n, V]
    margins: list
    support: torch.Tensor | None = None
    q_on_support: tuple | None = None  # (q_untempered, q) at the support's columns, [n, K] each

    def distributions(self, p=None, p_untempered=None, greedy=False):
        """q at the proposals, with the target's p where it scored them."""
        return Distributions(self.q, p, self.q_untempered, p_untempered, greedy, self.support, self.q_on_support)

    def target_inputs(self, last):
        """What the target reads to score every proposal in one pass: [last, x_0 .. x_{n-2}]."""
        return [last] + self.tokens[:-1]


def propose_chain(step, model, rows, lengths, uniforms, columns=None, vocab_size=None):
    """Every row samples x_0 .. x_{n-1} autoregressively, x_j from q_j with position j's draft uniform; rows step
    together, one forward per position (``step(inputs)``: one draft call, per row its ids or [] to sit out). A row
    whose logits are broken fails (its sentence in its trace) and draws no further. ``columns``: the target id of
    each logit column where a draft's logits cover a sub-vocabulary (q is zero elsewhere), so that each step's
    softmaxes and draw run over its K columns, not the whole vocabulary (a head's 8,192 of 49,152), and q is widened
    to ``vocab_size`` once a block. Returns per row a Proposal, or None for rows that draw nothing."""
    x, untempered, tempered, margins = ([[] for _ in rows] for _ in range(4))
    for j in range(max(lengths, default=0)):
        feeding = [j < n and not row.trace.finished for row, n in zip(rows, lengths)]
        logits = step([[x[r][-1] if x[r] else row.last] if feeding[r] else [] for r, row in enumerate(rows)])
        for r, row in enumerate(rows):
            if not feeding[r]:
                continue
            try:
                q_logits = row.allowed(logits[r], len(row.trace.positions) + j, columns)
                q_untempered, q = untempered_and_tempered(q_logits, row.settings.temperature, model)
            except ValueError as error:
                row.fail(error)
                continue
            column, margin = sample_inverse_cdf(q, uniforms[r][j : j + 1, DRAFT])
            x[r].append(int(column[0]) if columns is None else int(columns[column[0]]))
            margins[r].append(margin[0])
            untempered[r].append(q_untempered)
            tempered[r].append(q)
    return [chain(x[r], torch.cat(untempered[r]), torch.cat(tempered[r]), margins[r], columns, vocab_size)
            if x[r] else None for r in range(len(rows))]


def chain(tokens, q_untempered, q, margins, columns, vocab_size):
    """A row's Proposal from its q over the draft's columns: widened to the whole vocabulary once a block (scatter_:
    docs/lab/2026-12-04-engine-time.md), its columns kept beside for what reads q's support alone."""
    if columns is None:
        return Proposal(tokens, q_untempered, q, margins)
    widen = lambda t: t.new_zeros(len(t), vocab_size).scatter_(-1, columns.expand(len(t), -1), t)  # noqa: E731
    return Proposal(tokens, widen(q_untempered), widen(q), margins, columns, (q_untempered, q))
