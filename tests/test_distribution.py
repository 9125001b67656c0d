"""The emitted token follows pi: chi-square over many seeded samples (deterministic: fixed seeds)."""
import pytest
import torch

from cascade_core import RULES, generate, output_distribution, target_distribution
from cascade_core.formats.loading import tiny_pair
from cascade_core.method.distributions import Distributions
from cascade_core.method.sampling import DRAFT, position_uniforms, sample_inverse_cdf, verify

ALPHA = {"chow": 0.5, "diff": 0.05, "opt": 0.3, "v1": 0.2, "v2": 0.2, "v3": 0.5, "lossless": 0.0, "lossy": 0.4,
         "bild": 1.0, "fuzzy": 0.3, "judge": 2.5, "ensemble": 0.6, "sglang": 0.3, "relaxed": 0.3, "typical": 0.8,
         "target": 0.0, "draft": 0.0}  # random distributions' alphas: where each rule both defers and keeps
N_SAMPLES = 6000


def chi_square_p_value(counts, probs, n):
    """Pearson chi-square p-value; bins with expected count < 5 pooled into one."""
    expected = probs * n
    small = expected < 5
    obs = torch.cat([counts[~small], counts[small].sum().reshape(1)]) if small.any() else counts
    exp = torch.cat([expected[~small], expected[small].sum().reshape(1)]) if small.any() else expected
    keep = exp > 0
    assert (obs[~keep] == 0).all(), "a token with zero probability was emitted"
    stat = ((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()
    dof = int(keep.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), stat / 2))


def emit_one(rule, q, p, alpha, uniforms):
    """What the engine does at one position: draft sample from q, then the rule's verification."""
    if rule in ("target", "draft"):
        return int(sample_inverse_cdf((p if rule == "target" else q)[None], uniforms[:1, DRAFT])[0][0])
    x, _ = sample_inverse_cdf(q[None], uniforms[:1, DRAFT])
    verdict = verify(rule, Distributions(q[None], p[None]), x, alpha, uniforms[:1])
    return int(x[0]) if verdict.kept else verdict.correction


def q_and_p():
    q = torch.tensor([0.40, 0.25, 0.15, 0.10, 0.06, 0.04], dtype=torch.float64)
    p = torch.tensor([0.10, 0.45, 0.05, 0.20, 0.02, 0.18], dtype=torch.float64)
    return q, p


def sub_vocabulary_q_and_p():
    """q from a head over tokens 0, 1 and 3 only (renormalised there, zero elsewhere), as the bundled draft's."""
    q, p = q_and_p()
    q = q * torch.tensor([1, 1, 0, 1, 0, 0], dtype=q.dtype)
    return q / q.sum(), p


# every rule in the full suite; the fast tier (make test-fast) samples one rule of each kind of verification
FAST_RULES = ("opt", "v3", "lossless", "lossy", "ensemble", "sglang", "relaxed", "target")
EVERY_RULE = [rule if rule in FAST_RULES else pytest.param(rule, marks=pytest.mark.slow) for rule in RULES]


@pytest.mark.parametrize("draws", [q_and_p, sub_vocabulary_q_and_p], ids=["full head", "sub-vocabulary head"])
@pytest.mark.parametrize("rule", EVERY_RULE)
def test_emitted_token_follows_pi(rule, draws):
    q, p = draws()
    pi = target_distribution(rule, q, p, ALPHA[rule])
    uniforms = position_uniforms(1234, range(N_SAMPLES))
    counts = torch.zeros(len(q), dtype=torch.float64)
    for i in range(N_SAMPLES):
        counts[emit_one(rule, q, p, ALPHA[rule], uniforms[i : i + 1])] += 1
    assert chi_square_p_value(counts, pi, N_SAMPLES) > 1e-3
    # The test has power: the same samples are far from q whenever pi is (where q has holes: they fall in them).
    if (pi - q).abs().sum() > 0.2:
        if float(pi[q == 0].sum()) > 0:
            assert counts[q == 0].sum() > 0.5 * N_SAMPLES * float(pi[q == 0].sum())
        else:
            assert chi_square_p_value(counts, q, N_SAMPLES) < 1e-6


def test_lossless_follows_p_and_cascade_differs_from_p():
    q, p = q_and_p()
    uniforms = position_uniforms(99, range(N_SAMPLES))
    # chow at alpha 0.7 does not defer (max q = 0.4 >= 0.3): its output follows q, not p.
    for rule, alpha, expect_p in (("lossless", 0.0, True), ("chow", 0.7, False)):
        counts = torch.zeros(len(q), dtype=torch.float64)
        for i in range(N_SAMPLES):
            counts[emit_one(rule, q, p, alpha, uniforms[i : i + 1])] += 1
        assert (chi_square_p_value(counts, p, N_SAMPLES) > 1e-3) == expect_p


@pytest.mark.parametrize("rule", ["lossless", "v3", "opt", "lossy"])
def test_engine_first_token_follows_pi(rule):
    """End to end through generate() on an 8-token model: the first emitted token over 1500 seeds."""
    pair = tiny_pair(dtype=torch.float64, vocab_size=8)
    prompt = [1, 2, 3]
    with torch.no_grad():
        ids = torch.tensor([prompt])
        q = torch.softmax(pair.draft(ids).logits[0, -1, :8], -1)
        p = torch.softmax(pair.target(ids).logits[0, -1, :8], -1)
    alpha = {"lossless": 0.0, "v3": 0.5, "opt": 0.3, "lossy": 0.4}[rule]
    pi = target_distribution(rule, q, p, alpha)
    n = 1500
    counts = torch.zeros(8, dtype=torch.float64)
    for seed in range(n):
        trace = generate(pair, prompt_ids=prompt, rule=rule, alpha=alpha, gamma=2, seed=seed, max_new_tokens=1)
        counts[trace.tokens[0]] += 1
    assert chi_square_p_value(counts, pi, n) > 1e-3


@pytest.mark.parametrize("draws", [q_and_p, sub_vocabulary_q_and_p], ids=["full head", "sub-vocabulary head"])
@pytest.mark.parametrize("rule", RULES)
def test_output_distribution_is_pi_by_enumeration(rule, draws):
    """Enumerating every draft proposal v (probability q(v), kept with accept(v), else the normalised residual)
    gives pi for every rule: the verified token follows the rule's target distribution exactly."""
    q, p = draws()
    d = Distributions(q, p)
    output = output_distribution(rule, d, ALPHA[rule])
    assert torch.allclose(output, target_distribution(rule, q, p, ALPHA[rule]), atol=1e-12)
    assert torch.allclose(output.sum(), torch.tensor(1.0, dtype=torch.float64))
    if rule != "lossy" and RULES[rule].keep is None:  # a keep-set rule has no pi: tests/test_keep_sets.py
        assert torch.allclose(output, RULES[rule].target(d, ALPHA[rule]), atol=1e-12)
