"""The spec's cost model: expected tokens per target call and speed-up over target-only decoding.

The formulas are Leviathan et al.'s (2023), with an i.i.d. acceptance a per position. Narasimhan et al. (ICLR
2025) have no analytic cost model: they measure rejection rates (Lemma 3: a position is rejected with probability
r * TV(p, q)) and wall-clock latency; ``rejection_terms`` computes that probability for any rule, token rules
included, whose is not r * TV."""
from typing import NamedTuple

import torch

from cascade_core.method.acceptance_metrics import KEPT
from cascade_core.method.distributions import Distributions
from cascade_core.method.rules import get_rule


class Rejection(NamedTuple):
    """The probability that the draft's token is rejected at one position, sum_v max(0, pi(v) - q(v)), split by the
    rule's r(v): ``kept`` sums over the tokens it keeps (r = 0, a token rule's set A), ``deferred`` over the rest;
    ``eta`` = sum_v r(v) q(v), the draft's mass on deferred tokens (a position rule's r itself)."""

    eta: float
    kept: float
    deferred: float

    @property
    def total(self):
        return self.kept + self.deferred


def rejection_terms(rule, q, p, alpha):
    """P(the draft's token is rejected) under ``rule`` at alpha, for full distributions q and p ``[V]`` at
    temperature 1, from the rule's own pi. A proposal x ~ q is kept with probability min(1, pi(x) / q(x)), so it
    is rejected with probability sum_v max(0, q(v) - pi(v)) = sum_v max(0, pi(v) - q(v)), the residual's mass.

    - A position rule's pi is q or p: (r, 0, r TV(p, q)), Lemma 3; lossless is r = 1, TV. The ensemble's pi =
      (1 - alpha) q + alpha p is Lemma 3's with a fractional r = alpha: (alpha, 0, alpha TV(p, q)).
    - A token rule's pi(v) = q(v)(1 - r(v)) + eta p(v) (Eq. 11): ``kept`` = eta sum_{v in A} p(v) and ``deferred``
      = sum_{v not in A} max(0, eta p(v) - q(v)). Not r TV: every token of A passes, but a deferred one only with
      min(1, eta p(v) / q(v)) <= min(1, p(v) / q(v)), so a token rule can reject more often than lossless, and
      need not reject less as alpha grows.

    - A keep-set rule (cascade_core/method/keep_sets.py) has no pi: (eta, 0, sum_v q(v) (1 - a(v))), eta the draft's
    mass
      on the tokens it does not keep outright.

    Lossy's keep test is lenient, min(1, p(x) / ((1 - alpha) q(x))), not min(1, pi(x) / q(x)): a ValueError."""
    record = get_rule(rule)
    if record.lenience:
        raise ValueError(f"rule {rule!r} keeps a token with min(1, p(x) / ((1 - alpha) q(x))), not min(1, pi(x) / "
                         "q(x)): its rejection probability is cascade_core.method.explain.dissect's rejection_prob")
    record.check_alpha(alpha)
    q, p = (torch.as_tensor(v, dtype=torch.float64) for v in (q, p))
    d = Distributions(q, p)
    defer = record.defers(d, alpha)
    if record.keep is not None:  # a keep-set rule rejects x with 1 - a(x); a token kept outright never
        return Rejection(float((q * defer).sum()), 0.0, float((q * (1 - record.keep(d, alpha))).sum()))
    excess = (record.pi(d, defer, alpha) - q).clamp_min(0)
    if record.mix:  # pi = (1 - r) q + r p with r = alpha at every token: Lemma 3's r TV, all of it deferred mass
        return Rejection(float(alpha), 0.0, float(excess.sum()))
    r = defer.to(q.dtype).expand_as(q)  # a position rule's one decision, at every token
    return Rejection(float((r * q).sum()), float((excess * (1 - r)).sum()), float((excess * r).sum()))


def expected_tokens_per_call(acceptance, gamma):
    """(1 - a^(g+1)) / (1 - a): a block verifies g + 1 positions and stops at the first rejection."""
    a = acceptance
    return gamma + 1 if a >= 1 else (1 - a ** (gamma + 1)) / (1 - a)


def expected_speedup(acceptance, gamma, cost_ratio, draft_calls_per_block=None):
    """Speed-up over target-only decoding for draft/target cost ratio c.

    Leviathan et al.'s (2023) estimate charges g draft calls per block: (1 - a^(g+1)) / ((1 - a)(g c + 1)). This
    engine also verifies the (g+1)-th position, which costs the draft one more call; pass
    ``draft_calls_per_block=gamma + 1`` to price that in."""
    calls = gamma if draft_calls_per_block is None else draft_calls_per_block
    return expected_tokens_per_call(acceptance, gamma) / (calls * cost_ratio + 1)


def break_even_cost_ratio(acceptance, gamma, draft_calls_per_block=None, verify_ratio=1.0):
    """The draft/target cost ratio c below which a block pays for itself (0: no c does): the tokens a block yields
    must outweigh its draft calls plus its verification, ``verify_ratio`` one-token target calls (1: Leviathan et
    al.'s (2023) assumption; measured on a small CPU it is more)."""
    calls = gamma if draft_calls_per_block is None else draft_calls_per_block
    return max(0.0, (expected_tokens_per_call(acceptance, gamma) - verify_ratio) / calls)


def priced_speedup(acceptance, gamma, target_seconds, draft_seconds, verify_seconds, overhead_seconds=0.0):
    """The same estimate with the block's measured prices: g + 1 draft calls, one (g+1)-token verification and
    the engine's own work between calls (sampling, verification, records), against one target call per token."""
    block = (gamma + 1) * draft_seconds + verify_seconds + overhead_seconds
    return expected_tokens_per_call(acceptance, gamma) * target_seconds / block


def with_target_alone(speedup, share):
    """A run's speed-up where a share of its tokens is the target's own (gamma "auto"'s floor: one target call each,
    the target-only price) and the rest come from blocks of this ``speedup``: 1 / (share + (1 - share) / speedup)."""
    return 1 / (share + (1 - share) / speedup)


def provenance_rates(sources):
    """(acceptance, target-alone share) of a text from its tokens' provenance: the share of the draft's proposals
    kept (accepted or deferred-and-kept, of the positions it proposed at), None where it proposed at none, and the
    share of the tokens that are gamma "auto"'s floor (the target's own, one call each). Read from the text, not
    from a run's counters, so a resumed run and a fresh one of the same text price alike."""
    n, alone = len(sources), sources.count("target")
    drafted = n - alone
    kept = sum(source in KEPT for source in sources)
    return (kept / drafted if drafted else None), (alone / n if n else 0.0)


def speedup_over_target(sources, rule, gamma, prices):
    """The speed-up over the target alone, the one every view shows (Explore, Compare, the Trade-off, Strategies,
    the lessons): the cost model priced with the pair's calls as measured on this machine (``prices``, a
    prices.Prices: a one-token target call, one call of this pair's draft, be it a draft model or an EAGLE-3 head,
    the verification of a block and the engine's own work per block), at the text's acceptance, with gamma
    "auto"'s floor at the target's price. The target alone is 1; the draft alone is one draft call per token, 1 / c.
    None where nothing prices it (no prices: the compiled path) or nothing was written."""
    if rule == "target":
        return 1.0
    if prices is None or not sources:
        return None
    if rule == "draft":
        return prices.target / prices.draft
    acceptance, share = provenance_rates(sources)
    if acceptance is None:  # every token the target's own
        return 1.0
    drafted = priced_speedup(acceptance, gamma, prices.target, prices.draft, prices.verify, prices.overhead)
    return with_target_alone(drafted, share)


def speedup_at_c(sources, rule, gamma, c):
    """A hypothetical figure for a cost ratio c the user sets, not a measurement: Leviathan et al.'s (2023) estimate
    (a verification priced as one target token, no engine work) with this engine's gamma + 1 draft calls per block,
    at the text's acceptance and with gamma "auto"'s floor at the target's price; the target alone 1, the draft
    alone 1 / c."""
    if rule == "target":
        return 1.0
    if not sources:
        return None
    if rule == "draft":
        return 1 / c
    acceptance, share = provenance_rates(sources)
    if acceptance is None:
        return 1.0
    return with_target_alone(expected_speedup(acceptance, gamma, c, gamma + 1), share)


def best_gamma(acceptance, price, gammas):
    """The gamma in ``gammas`` of the highest priced speed-up at this acceptance; ``price(gamma)`` gives the
    (target, draft, verification of gamma + 1, overhead per block) seconds. Ties go to the shorter block."""
    return max(gammas, key=lambda g: (priced_speedup(acceptance, g, *price(g)), -g))


def fresh_blocks(sources, gamma, max_new_tokens):
    """(start, drafted, end) of each block a fresh run that emitted these sources verified, drafted 0 for gamma
    "auto"'s floor (the target's own token, nothing drafted). Blocks of gamma + 1 positions start at position 0;
    each ends at its first replaced token, and which tokens are replaced does not depend on gamma or on where a run
    resumed: a resumed run's own counters cover only what it regenerated, from blocks that start where it resumed."""
    i, n = 0, len(sources)
    while i < n:
        if sources[i] == "target":
            yield i, 0, i + 1
            i += 1
            continue
        drafted = min(gamma + 1, max_new_tokens - i)  # the draft proposes this many tokens, the target scores them
        end = min(i + drafted, n)
        j = next((k for k in range(i, end) if sources[k] == "replaced"), None)
        yield i, drafted, end if j is None else j + 1
        i = end if j is None else j + 1


def fresh_run_calls(sources, rule, gamma, max_new_tokens):
    """(target calls, draft calls) of a fresh run that emitted these sources: what the whole text costs from
    scratch (fresh_blocks)."""
    if rule in ("target", "draft"):  # one model alone: one call per token
        return (len(sources), 0) if rule == "target" else (0, len(sources))
    blocks = list(fresh_blocks(sources, gamma, max_new_tokens))
    return len(blocks), sum(drafted for _, drafted, _ in blocks)


def fresh_run_steps(sources, gamma, max_new_tokens):
    """[(drafted, kept)] of a fresh run's verify steps (acceptance_metrics), from its sources (fresh_blocks)."""
    return [(drafted, sum(s in KEPT for s in sources[start:end]))
            for start, drafted, end in fresh_blocks(sources, gamma, max_new_tokens) if drafted]
