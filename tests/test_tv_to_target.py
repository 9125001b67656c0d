"""The mean TV to the target: per position TV(pi_t, p_t), where pi_t is the distribution the emitted token follows
(the exactness of Algorithm 4's verification) and p_t the target's tempered distribution at the same prefix. Each
rule's number is checked against an oracle built here from both models' full passes over the text (tiny64: float64,
so cached and recomputed logits agree to ~1e-15), with each rule's decision and pi written out independently."""
import math

import pytest
import torch

from cascade_core import Trace, generate
from cascade_core.method.sampling import untempered_and_tempered
from sweeps.quality import draft_only_tv
from test_floor import dear
from test_hardening import strict_loads

T = 0.8
RUN = dict(gamma=3, temperature=T, seed=1, max_new_tokens=24, stop_at_eos=False)
CLOSE = 1e-9


def distributions(pair, trace, model):
    """(temperature-1, tempered) distributions of a model at every emitted position, from one pass over the text."""
    ids = torch.tensor([trace.prompt_ids + trace.tokens])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, len(trace.prompt_ids) - 1: -1, : pair.vocab_size]
    return untempered_and_tempered(logits, trace.settings["temperature"])


def tv(a, b):
    return (b - a).clamp_min(0).sum(-1)


def token_pi(q, p, r):
    """Eq. (11): pi(v) = q(v) (1 - r(v)) + eta p(v), eta = sum_v r(v) q(v)."""
    eta = (q * r).sum(-1, keepdim=True)
    return q * ~r + eta * p


def oracle(rule, alpha, q_1, q, p_1, p):
    """pi per position over the whole vocabulary, from the rule's test as the paper writes it (q_1, p_1: temperature
    1, what the rules threshold; q, p: tempered, what is sampled and verified)."""
    max_q, max_p = q_1.amax(-1, keepdim=True), p_1.amax(-1, keepdim=True)
    position = {"chow": max_q < 1 - alpha,  # Eq. (2)
                "diff": max_q < max_p - alpha,  # Eq. (5)
                "opt": max_q < max_p - alpha * tv(q, p).unsqueeze(-1)}  # Eq. (10), TV of the tempered q and p
    if rule in position:
        return torch.where(position[rule], p, q)
    token = {"v1": q_1 < max_p - alpha, "v2": p_1 < max_p - alpha, "v3": p_1 < (1 - alpha) * max_p}  # Eq. (13)-(15)
    if rule in token:
        return token_pi(q, p, token[rule])
    if rule == "lossy":  # keep x with min(1, p / ((1 - alpha) q)), else sample norm(max(0, p - q))
        kept = q * (p / ((1 - alpha) * q)).clamp_max(1)
        excess = (p - q).clamp_min(0)
        return kept + (1 - kept.sum(-1, keepdim=True)) * excess / excess.sum(-1, keepdim=True)
    return {"lossless": p, "target": p, "draft": q}[rule]


@pytest.mark.parametrize("rule, alpha", [("chow", 0.5), ("diff", 0.05), ("opt", 0.2), ("v1", 0.0), ("v2", 0.1),
                                         ("v3", 0.5), ("lossy", 0.5), ("lossless", 0.0), ("target", 0.0)])
def test_each_positions_tv_is_the_oracles(tiny64, rule, alpha):
    trace = generate(tiny64, "Hello there", rule=rule, alpha=alpha, **RUN)
    q_1, q = distributions(tiny64, trace, tiny64.draft)
    p_1, p = distributions(tiny64, trace, tiny64.target)
    expected = tv(oracle(rule, alpha, q_1, q, p_1, p), p).tolist()
    got = [pos["tv_to_target"] for pos in trace.positions]
    assert max(abs(a - b) for a, b in zip(got, expected)) < CLOSE
    assert math.isclose(trace.stats["tv_to_target"], sum(expected) / len(expected), abs_tol=CLOSE)
    if rule in ("lossless", "target"):
        assert set(got) == {0.0}
    else:
        assert trace.stats["tv_to_target"] > 0.01, "a run that never kept q's distribution checks nothing"


def test_a_position_rule_adds_tv_q_p_where_it_kept_q_and_nothing_where_it_deferred(tiny64):
    """Lemma 3's two cases: pi = q (TV(q, p), the detail field ``tv``) or pi = p (0), by the recorded decision."""
    trace = generate(tiny64, "Hello there", rule="opt", alpha=0.2, **RUN)
    deferred = [0.2 < pos["a_star"]["opt"] for pos in trace.positions]
    assert any(deferred) and not all(deferred)
    assert all(pos["tv_to_target"] == (0.0 if d else pos["tv"]) for pos, d in zip(trace.positions, deferred))


def test_the_floor_of_gamma_auto_is_the_targets_own_sample(tiny64):
    trace = generate(dear(tiny64), "Hello there", rule="lossless", **dict(RUN, gamma="auto"))
    assert "target" in trace.sources and set(pos["tv_to_target"] for pos in trace.positions) == {0.0}


def test_draft_only_has_none_in_its_trace_and_tv_q_p_from_the_models(tiny64):
    trace = generate(tiny64, "Hello there", rule="draft", **RUN)
    assert trace.stats["tv_to_target"] is None and {pos["tv_to_target"] for pos in trace.positions} == {None}
    q_1, q = distributions(tiny64, trace, tiny64.draft)
    p_1, p = distributions(tiny64, trace, tiny64.target)
    assert math.isclose(draft_only_tv(tiny64, trace), tv(q, p).mean().item(), abs_tol=CLOSE)


def test_a_sequential_cascade_knows_it_only_where_the_target_ran(tiny64):
    """opt reads p at every position (the same numbers as the speculative run); chow calls the target only to defer,
    so the positions it kept the draft's token at have no p, and the run's mean is unknown."""
    speculative = generate(tiny64, "Hello there", rule="opt", alpha=0.2, **RUN)
    sequential = generate(tiny64, "Hello there", rule="opt", alpha=0.2, sequential=True, **RUN)
    assert sequential.tokens == speculative.tokens
    assert math.isclose(sequential.stats["tv_to_target"], speculative.stats["tv_to_target"], abs_tol=CLOSE)
    chow = generate(tiny64, "Hello there", rule="chow", alpha=0.5, sequential=True, **RUN)
    assert None in [pos["tv_to_target"] for pos in chow.positions] and chow.stats["tv_to_target"] is None


def test_the_mean_travels_in_strict_json(tiny64):
    trace = generate(tiny64, "Hello there", rule="v3", alpha=0.5, details=False, **RUN)
    data = strict_loads(trace.to_json())
    assert data["stats"]["tv_to_target"] == trace.stats["tv_to_target"] > 0
    assert [pos["tv_to_target"] for pos in data["positions"]] == [pos["tv_to_target"] for pos in trace.positions]
    assert Trace.from_json(trace.to_json()).stats["tv_to_target"] == trace.stats["tv_to_target"]


def resumed_from_flip(pair, old, rule, alpha):
    """A run under (rule, alpha) resumed from ``old`` at its first flipped decision, as the app's re-runs and the
    sweeps' chains resume."""
    _, k = old.recolour(rule, alpha)
    return generate(pair, rule=rule, alpha=alpha, resume=(old, len(old.positions) if k is None else k), **RUN), k


def test_a_resumed_position_rule_carries_its_prefixs_tv(tiny64):
    old = generate(tiny64, "Hello there", rule="chow", alpha=0.3, **RUN)
    new, k = resumed_from_flip(tiny64, old, "chow", 0.6)
    fresh = generate(tiny64, "Hello there", rule="chow", alpha=0.6, **RUN)
    assert k and new.tokens == fresh.tokens
    assert [pos["tv_to_target"] for pos in new.positions] == pytest.approx(
        [pos["tv_to_target"] for pos in fresh.positions], abs=CLOSE)


def test_a_resumed_token_rule_does_not_carry_another_alphas_tv(tiny64):
    """v3's pi at a token both alphas keep moves with alpha through eta (Eq. 11): the reused positions' TV is
    unknown under the new alpha, never the old alpha's number."""
    old = generate(tiny64, "Hello there", rule="v3", alpha=0.3, **RUN)
    new, k = resumed_from_flip(tiny64, old, "v3", 0.6)
    assert k
    assert [pos["tv_to_target"] for pos in new.positions[:k]] == [None] * k
    assert None not in [pos["tv_to_target"] for pos in new.positions[k:]] and new.stats["tv_to_target"] is None
