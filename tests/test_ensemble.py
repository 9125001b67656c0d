"""transformers' static ensemble verification as a rule (cascade_core/method/rules.py, ``ensemble``, alpha = w): the
numbers of its own tests (huggingface/transformers PR #45979), Lemma 3 with a fractional r, and its two ends, the
draft kept everywhere (w = 0) and lossless (w = 1). Its exactness against the naive loop, its chi-square and gamma
invariance run with every rule's (test_exactness, test_distribution, test_head, test_replay)."""
import pytest
import torch

from app.sandbox import START, SandboxHandlers
from cascade_core import generate
from cascade_core.method.costs import rejection_terms
from cascade_core.method.distributions import Distributions
from cascade_core.method.explain import dissect
from cascade_core.method.rules import RULES, acceptance_probability, residual

RUN = dict(gamma=3, temperature=1.0, seed=3, max_new_tokens=24, stop_at_eos=False)


def random_pair(seed, size=12):
    generator = torch.Generator().manual_seed(seed)
    q, p = (torch.rand(size, generator=generator, dtype=torch.float64) ** 3 for _ in range(2))
    return q / q.sum(), p / p.sum()


def test_transformers_own_numbers():
    """Its test: q(x) = 0.8, p(x) = 0.4, w = 0.7 keeps x with 1 - w + w p / q = 0.65; its fallback is
    norm(max(0, p - q)) at any w > 0 (v - q = w (p - q))."""
    q, p = torch.tensor([0.8, 0.2], dtype=torch.float64), torch.tensor([0.4, 0.6], dtype=torch.float64)
    pi = RULES["ensemble"].target(Distributions(q, p), 0.7)
    assert float(acceptance_probability(q[0], pi[0])) == pytest.approx(0.65)
    for w in (0.1, 0.7, 1.0):
        excess = residual(RULES["ensemble"].target(Distributions(q, p), w), q)
        assert torch.allclose(excess / excess.sum(), torch.tensor([0.0, 1.0], dtype=torch.float64))


@pytest.mark.parametrize("seed", range(5))
def test_it_rejects_w_tv_lemma_3_with_a_fractional_r(seed):
    q, p = random_pair(seed)
    tv = float((p - q).clamp_min(0).sum())
    for w in (0.0, 0.3, 0.8, 1.0):
        cost = rejection_terms("ensemble", q, p, w)
        assert cost.total == pytest.approx(w * tv) and cost.eta == w
        assert dissect("ensemble", q.tolist(), p.tolist(), w)["rejection_prob"] == pytest.approx(w * tv)


def test_the_sandbox_says_it_decides_nothing_and_rejects_w_tv():
    shown = SandboxHandlers.update("ensemble", 0.4, *START[0], *START[1], *START[2])[1]
    assert "ensemble decides nothing: every proposal is verified against the mix pi = 0.40 p + 0.60 q" in shown
    assert "Lemma 3 with a fractional r = alpha" in shown and "= 0.4 × 0.4300 = 0.1720, below lossless" in shown


def test_w_1_is_lossless_and_w_0_keeps_every_proposal(tiny64):
    lossless = generate(tiny64, "Hello there", rule="lossless", **RUN)
    assert generate(tiny64, "Hello there", rule="ensemble", alpha=1.0, **RUN).tokens == lossless.tokens
    draft_kept = generate(tiny64, "Hello there", rule="ensemble", alpha=0.0, **RUN)
    assert "replaced" not in draft_kept.sources
    assert draft_kept.tokens == [pos["proposal"] for pos in draft_kept.positions]
