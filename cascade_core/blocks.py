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
    settings = row.settings
    if not settings.sequential:
        return True
    rule = RULES[settings.rule]
    return not rule.decides_on_q or bool(rule.defers(Distributions(proposal.q, None, proposal.q_untempered),
                                                     settings.alpha))


def verified(row, proposal, p_logits, uniforms):
    """Steps 2 (the tempering) and 3: the row's distributions at the proposals and the rule's verdict on them."""
    settings, q = row.settings, proposal.q
    p_untempered, p = untempered_and_tempered(p_logits.to(q.dtype), settings.temperature)
    d = Distributions(q, p, proposal.q_untempered, p_untempered, greedy=settings.temperature == 0)
    return d, verify(settings.rule, d, torch.tensor(proposal.tokens, device=q.device), settings.alpha, uniforms)


def cascade_block(row, proposal, p_logits, uniforms):
    """Steps 2 to 5 of one row's block; returns the block and how many slots to forget."""
    x = proposal.tokens
    d, verdict = verified(row, proposal, p_logits, uniforms)
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
    x = proposal.tokens
    if p_logits is None:
        q = Distributions(proposal.q, None, proposal.q_untempered)
        return Block(row.counters["draft_calls"] - 1, x, x, ["accepted"], q), 0
    d, verdict = verified(row, proposal, p_logits, uniforms[:1])
    token = x if verdict.kept else [verdict.correction]
    return Block(row.counters["target_calls"] - 1, x, token, verdict.sources(), d, verdict.accept_prob), 0


def plain_block(row, proposal, p_logits, uniforms):
    """A baseline: one token sampled from the target (target-only) or the draft (draft-only: the draft's first
    proposal) alone, with the position's draft uniform."""
    if not row.uses_target:
        x, q = proposal.tokens, Distributions(proposal.q, None, proposal.q_untempered)
        return Block(row.counters["draft_calls"] - 1, x, x, ["accepted"], q), 0
    untempered, tempered = untempered_and_tempered(p_logits, row.settings.temperature)
    token = int(sample_inverse_cdf(tempered, uniforms[:, DRAFT])[0])
    return Block(row.counters["target_calls"] - 1, [token], [token], ["deferred"],
                 Distributions(None, tempered, None, untempered)), 0


def decide(row, proposal, p_logits, uniforms):
    """Steps 3 to 5 for one row: its block, and how many of its slots both caches forget."""
    settings = row.settings
    if RULES[settings.rule].kind == "baseline":
        return plain_block(row, proposal, p_logits, uniforms)
    return (sequential_block if settings.sequential else cascade_block)(row, proposal, p_logits, uniforms)
