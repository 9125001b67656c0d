"""Steps 3 to 5 of a block for one row, given its proposal and the target's logits: pure functions of a row's own
numbers (its distributions and its position-keyed uniforms), so a row decides the same in any batch."""
from dataclasses import dataclass, field

import torch

from cascade_core.method.distributions import Distributions, column
from cascade_core.method.rules import RULES
from cascade_core.method.sampling import ACCEPT, DRAFT, RESIDUAL, sample_inverse_cdf, untempered_and_tempered, verify

TOP_K = 10


@dataclass
class Block:
    """One verified block as the engine hands it over: for each emitted position, the draft's proposal, the
    token and its source, both models' distributions there (``d``; a baseline has only its model's) and the
    acceptance probability of the proposal (None for baselines)."""

    index: int  # its row's block count before it (rows.Row.blocks): the run's blocks are numbered from 0
    proposals: list
    tokens: list
    sources: list
    d: object
    accept_prob: torch.Tensor | None = None
    margins: dict = field(default_factory=dict)  # decision -> per position, how near it came to going the other way


def needs_target(row, proposal):
    """Whether the target reads this block: every rule but draft-only does, except a sequential cascade whose
    rule decides on q alone and keeps the draft's token (the target reads that position on its next call)."""
    if not row.uses_target or row.trace.finished:
        return False
    settings = row.settings
    if not settings.sequential:
        return True
    rule = RULES[settings.rule]
    return not rule.decides_on_q or bool(rule.defers(proposal.distributions(),
                                                     settings.alpha))


def verified(row, proposal, p_logits, uniforms):
    """Steps 2 (the tempering) and 3: the row's distributions at the proposals and the rule's verdict on them."""
    settings, q = row.settings, proposal.q
    p_untempered, p = untempered_and_tempered(p_logits.to(q.dtype), settings.temperature)
    d = proposal.distributions(p, p_untempered, greedy=settings.temperature == 0)
    return d, verify(settings.rule, d, torch.tensor(proposal.tokens, device=q.device), settings.alpha, uniforms)


def margins(proposal, verdict, uniforms, m):
    """How near each of the first m positions' decisions came to going the other way (sampling.NEAR_TIE): the
    draft's draw, the keep test (its uniform against its probability) and, at a rejection, the correction's draw."""
    keep = (uniforms[:m, ACCEPT] - verdict.accept_prob[:m].double().cpu()).abs().tolist()
    correction = [None] * verdict.kept + [verdict.correction_margin] * (verdict.correction is not None)
    return {"draft sample": proposal.margins[:m], "keep test": keep, "correction sample": correction}


def cascade_block(row, proposal, p_logits, uniforms):
    """Steps 2 to 5 of one row's block; returns the block and how many slots to forget."""
    x = proposal.tokens
    d, verdict = verified(row, proposal, p_logits, uniforms)
    m = verdict.emitted
    tokens = x[: verdict.kept] + ([verdict.correction] if verdict.correction is not None else [])
    block = Block(row.blocks, x[:m], tokens, verdict.sources(), d.first(m),  # 5
                  verdict.accept_prob[:m], margins(proposal, verdict, uniforms, m))
    return block, len(x) - m  # 4: both processed [last, x_0 .. x_{n-2}]; keep [last, x_0 .. x_{m-2}]


def sequential_block(row, proposal, p_logits, uniforms):
    """One position of a token-level sequential cascade, the way a cascade runs without speculation: the draft
    proposes x from q; the target is called for this one position only where the rule needs it (where it defers,
    and, for every rule that reads p, to decide at all). Its randomness is cascade_block's, so its tokens are
    the speculative cascade's; only the cost differs."""
    x = proposal.tokens
    if p_logits is None:
        q = proposal.distributions()
        return Block(row.blocks, x, x, ["accepted"], q, margins={"draft sample": proposal.margins}), 0
    d, verdict = verified(row, proposal, p_logits, uniforms[:1])
    token = x if verdict.kept else [verdict.correction]
    return Block(row.blocks, x, token, verdict.sources(), d, verdict.accept_prob,
                 margins(proposal, verdict, uniforms, 1)), 0


def target_sample(row, p_logits, uniforms, source):
    """One token sampled from the target alone, with the position's draft uniform (target-only's draw)."""
    untempered, tempered = untempered_and_tempered(p_logits, row.settings.temperature)
    token, margin = sample_inverse_cdf(tempered, uniforms[:, DRAFT])
    return Block(row.blocks, [int(token[0])], [int(token[0])], [source],
                 Distributions(None, tempered, None, untempered), margins={"target sample": margin}), 0


def plain_block(row, proposal, p_logits, uniforms):
    """A baseline: one token sampled from the target (target-only) or the draft (draft-only: the draft's first
    proposal) alone, with the position's draft uniform."""
    if not row.uses_target:
        x, q = proposal.tokens, proposal.distributions()
        return Block(row.blocks, x, x, ["accepted"], q, margins={"draft sample": proposal.margins}), 0
    return target_sample(row, p_logits, uniforms, "deferred")


def decide(row, proposal, p_logits, uniforms):
    """Steps 3 to 5 for one row: its block, and how many of its slots both caches forget. A cascade row without a
    proposal is gamma "auto"'s floor (batch_block.py): the target's own token, source "target"."""
    settings = row.settings
    if RULES[settings.rule].kind == "baseline":
        return plain_block(row, proposal, p_logits, uniforms)
    if proposal is None:
        return target_sample(row, p_logits, uniforms, "target")
    return (sequential_block if settings.sequential else cascade_block)(row, proposal, p_logits, uniforms)


def block_in_full(row, proposal, p_logits, uniforms):
    """Every number one row's block decided on, for a replay (cascade_core/decoding/replay.py): per proposal up to the
    first rejection, q(x_j), p(x_j) and pi_j(x_j) (tempered: what the rule and the verification read), the keep
    probability and the uniform it was compared with; at the rejection, the residual norm(max(0, pi_j - q_j)) and
    the uniform its sample read. The same function of the same inputs as ``cascade_block``, so the same verdict.
    gamma "auto"'s floor (no proposal): ``target_alone_in_full``."""
    if proposal is None:
        return target_alone_in_full(row, p_logits, uniforms)
    settings, x = row.settings, proposal.tokens
    d, verdict = verified(row, proposal, p_logits, uniforms)
    xs = torch.tensor(x, device=d.q.device)
    rule = RULES[settings.rule]
    # a keep-set rule has no pi: its keep probability is read off p alone (cascade_core/method/keep_sets.py)
    pi = [None] * len(x) if rule.pi is None else rule.at_proposals(d, settings.alpha, xs)[0].tolist()
    at = lambda t: column(t, xs).squeeze(-1).tolist()  # noqa: E731
    columns = dict(q=at(d.q), p=at(d.p), pi=pi, keep_probability=verdict.accept_prob.tolist(),
                   uniform=uniforms[:, ACCEPT].tolist(), draft_uniform=uniforms[:, DRAFT].tolist(),
                   deferred=verdict.deferred.tolist())
    texts = row.trace.detokenizer.singles(x)
    checked = verdict.emitted  # the first rejection is looked at; what follows it is not
    positions = [dict(token=x[j], text=texts[j], kept=j < verdict.kept, **{k: v[j] for k, v in columns.items()})
                 for j in range(checked)]
    full = dict(positions=positions, discarded=x[checked:], correction=None, residual_top=[], residual_uniform=None,
                target_alone=None,
                # what the draft and the target had computed for them when the block ended
                discarded_detail=[dict(token=x[j], text=texts[j], q=columns["q"][j], p=columns["p"][j])
                                  for j in range(checked, len(x))])
    if verdict.correction is not None:
        j = verdict.kept
        excess = verdict.replacement / verdict.replacement.sum()
        top_p, top_ids = excess.topk(min(TOP_K, excess.shape[-1]))
        names = row.trace.detokenizer.singles(top_ids.tolist() + [verdict.correction])
        full.update(correction=dict(token=verdict.correction, text=names[-1],
                                    residual=float(excess[verdict.correction])),
                    residual_top=[dict(token=t, text=n, probability=pr)
                                  for t, n, pr in zip(top_ids.tolist(), names, top_p.tolist())],
                    residual_uniform=float(uniforms[j, RESIDUAL]))
    return full


def target_alone_in_full(row, p_logits, uniforms):
    """gamma "auto"'s floor's block for a replay: nothing proposed, and the target's own token (``target_sample``'s
    very draw) with its tempered p, the target's mass on the tokens before it (its bin in p's CDF is [below,
    below + p)) and the draft uniform u that fell in that bin."""
    block, _ = target_sample(row, p_logits, uniforms, "target")
    token, p = block.tokens[0], block.d.p[0].to(torch.float64)
    total = p.sum()
    alone = dict(token=token, text=row.trace.detokenizer.singles([token])[0], p=float(p[token] / total),
                 below=float(p[:token].sum() / total), uniform=float(uniforms[0, DRAFT]))
    return dict(positions=[], discarded=[], discarded_detail=[], correction=None, residual_top=[],
                residual_uniform=None, target_alone=alone)
