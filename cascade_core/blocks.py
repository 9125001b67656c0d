"""Steps 3 to 5 of a block for one row, given its proposal and the target's logits: pure functions of a row's own
numbers (its distributions and its position-keyed uniforms), so a row decides the same in any batch."""
import torch

from .rules import RULES, Distributions
from .sampling import DRAFT, sample_inverse_cdf, untempered_and_tempered, verify
from .trace import Block


def needs_target(row, proposal):
    """Whether the target reads this block: every rule but draft-only does, except a sequential cascade whose
    rule decides on q alone and keeps the draft's token (the target reads that position on its next call)."""
    if not row.uses_target or row.trace.finished:
        return False
    if not row.sequential:
        return True
    rule = RULES[row.rule]
    return not rule.decides_on_q or bool(rule.defers(Distributions(proposal.q, None, proposal.q_untempered), row.alpha))


def cascade_block(row, proposal, p_logits, uniforms):
    """Steps 2 (the tempering) to 5 of one row's block; returns the block and how many slots to forget."""
    x, q_untempered, q = proposal.tokens, proposal.q_untempered, proposal.q
    p_untempered, p = untempered_and_tempered(p_logits.to(q.dtype), row.temperature)
    d = Distributions(q, p, q_untempered, p_untempered, greedy=row.temperature == 0)
    verdict = verify(row.rule, d, torch.tensor(x, device=q.device), row.alpha, uniforms)  # 3
    m = verdict.emitted
    tokens = x[: verdict.kept] + ([verdict.correction] if verdict.correction is not None else [])
    block = Block(row.counters["target_calls"] - 1, x[:m], tokens, verdict.sources(), d.first(m),  # 5
                  verdict.accept_prob[:m])
    return block, len(x) - m  # 4: both processed [last, x_0 .. x_{n-2}]; keep [last, x_0 .. x_{m-2}]


def sequential_block(row, proposal, p_logits, uniforms):
    """One position of a token-level sequential cascade, the way a cascade runs without speculation: the draft
    proposes x from q; the target is called for this one position only where the rule needs it (where it defers,
    and, for every rule that reads p, to decide at all). Its randomness is cascade_block's, so its tokens are
    the speculative cascade's; only the cost differs."""
    x, q_untempered, q = proposal.tokens, proposal.q_untempered, proposal.q
    if p_logits is None:
        return Block(row.counters["draft_calls"] - 1, x, x, ["accepted"], Distributions(q, None, q_untempered)), 0
    p_untempered, p = untempered_and_tempered(p_logits.to(q.dtype), row.temperature)
    d = Distributions(q, p, q_untempered, p_untempered, greedy=row.temperature == 0)
    verdict = verify(row.rule, d, torch.tensor(x, device=q.device), row.alpha, uniforms[:1])
    token = x if verdict.kept else [verdict.correction]
    return Block(row.counters["target_calls"] - 1, x, token, verdict.sources(), d, verdict.accept_prob), 0


def plain_block(row, proposal, p_logits, uniforms):
    """A baseline: one token sampled from the target (target-only) or the draft (draft-only: the draft's first
    proposal) alone, with the position's draft uniform."""
    if not row.uses_target:
        x, q_untempered, q = proposal.tokens, proposal.q_untempered, proposal.q
        return Block(row.counters["draft_calls"] - 1, x, x, ["accepted"], Distributions(q, None, q_untempered)), 0
    untempered, tempered = untempered_and_tempered(p_logits, row.temperature)
    token = int(sample_inverse_cdf(tempered, uniforms[:, DRAFT])[0])
    return Block(row.counters["target_calls"] - 1, [token], [token], ["deferred"],
                 Distributions(None, tempered, None, untempered)), 0


def decide(row, proposal, p_logits, uniforms):
    """Steps 3 to 5 for one row: its block, and how many of its slots both caches forget."""
    if RULES[row.rule].kind == "baseline":
        return plain_block(row, proposal, p_logits, uniforms)
    return (sequential_block if row.sequential else cascade_block)(row, proposal, p_logits, uniforms)
