"""Each rule's pi against hand-computed cases, and a* consistent with the rule's decisions."""
import math

import pytest
import torch

from cascade_core import RULES, critical_alpha, target_distribution
from cascade_core.method.rules import get_rule, outcome_unchanged

# V = 4. max q = 0.5, max p = 0.6, TV(p, q) = 0.2 + 0.0 + 0.1 + 0.0 ... computed below.
q = torch.tensor([0.5, 0.3, 0.1, 0.1], dtype=torch.float64)
p = torch.tensor([0.2, 0.6, 0.2, 0.0], dtype=torch.float64)
TV = 0.3 + 0.1  # p - q positive at tokens 1 (0.3) and 2 (0.1)


def close(a, b):
    return torch.allclose(torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize("rule, alpha, defers", [
    ("chow", 0.4, True),    # 0.5 < 1 - 0.4
    ("chow", 0.5, False),   # 0.5 < 0.5 is false: ties go to the draft
    ("diff", 0.05, True),   # 0.5 < 0.6 - 0.05
    ("diff", 0.1, False),   # tie
    ("opt", 0.2, True),     # 0.5 < 0.6 - 0.2 * 0.4 = 0.52
    ("opt", 0.25, False),   # 0.5 < 0.6 - 0.25 * 0.4 = 0.5 is false
    ("bild", 1.5, True),    # -sum q log p = 1.6094... with p(3) = 0 clamped: huge
    ("fuzzy", 0.10, True),  # JS(q, p) = (KL(q || m) + KL(p || m)) / 2 = (0.0855 + 0.1182) / 2 = 0.1019
    ("fuzzy", 0.11, False),
    ("judge", 6.8, True),   # KL(q || p) = 0.458 - 0.208 - 0.069 + 0.1 ln(0.1 / 1e-30) = 6.858 (p(3) = 0 clamped)
    ("judge", 6.9, False),  # and max p = 0.6: no confidence mask
])
def test_position_rules(rule, alpha, defers):
    pi = target_distribution(rule, q, p, alpha)
    assert close(pi, p if defers else q)


def test_v1_by_hand():
    # r(v) = q(v) < 0.6 - 0.2 = 0.4 -> tokens 1, 2, 3 deferred; eta = 0.3 + 0.1 + 0.1 = 0.5
    pi = 0.5 * p + torch.tensor([0.5, 0, 0, 0], dtype=torch.float64)
    assert close(target_distribution("v1", q, p, 0.2), pi)


def test_v2_by_hand():
    # r(v) = p(v) < 0.6 - 0.3 = 0.3 -> tokens 0, 2, 3 deferred; eta = 0.5 + 0.1 + 0.1 = 0.7
    pi = 0.7 * p + torch.tensor([0, 0.3, 0, 0], dtype=torch.float64)
    assert close(target_distribution("v2", q, p, 0.3), pi)


def test_v3_by_hand():
    # kept set p(v) >= (1 - 0.5) * 0.6 = 0.3 -> only token 1; eta = 0.5 + 0.1 + 0.1 = 0.7
    pi = 0.7 * p + torch.tensor([0, 0.3, 0, 0], dtype=torch.float64)
    assert close(target_distribution("v3", q, p, 0.5), pi)
    # alpha = 2/3: threshold 0.2, p(0) = p(2) = 0.2 are not < 0.2, so they are kept: only token 3 deferred
    pi = 0.1 * p + torch.tensor([0.5, 0.3, 0.1, 0], dtype=torch.float64)
    assert close(target_distribution("v3", q, p, 2 / 3), pi)


def test_baselines_by_hand():
    assert close(target_distribution("lossless", q, p, 0.0), p)
    assert close(target_distribution("target", q, p, 0.0), p)
    assert close(target_distribution("draft", q, p, 0.0), q)
    # lossy, lenience 0.5: keep x w.p. min(1, p / (0.5 q)) = [0.8, 1, 1, 0];
    # residual norm(max(0, p - q)) = [0, .75, .25, 0]
    keep = q * torch.tensor([0.8, 1, 1, 0], dtype=torch.float64)
    expected = keep + (1 - keep.sum()) * torch.tensor([0, 0.75, 0.25, 0], dtype=torch.float64)
    assert close(target_distribution("lossy", q, p, 0.5), expected)
    # lossy with lenience 0 is lossless
    assert close(target_distribution("lossy", q, p, 0.0), p)


def test_critical_alpha_by_hand():
    assert close(critical_alpha("chow", q, p, 0), 0.5)
    assert close(critical_alpha("diff", q, p, 0), 0.1)
    assert close(critical_alpha("opt", q, p, 0), 0.1 / TV)
    assert close(critical_alpha("v1", q, p, 2), 0.6 - 0.1)
    assert close(critical_alpha("v2", q, p, 2), 0.6 - 0.2)
    assert close(critical_alpha("v3", q, p, 2), 1 - 0.2 / 0.6)
    assert critical_alpha("lossless", q, p, 0) == math.inf
    assert critical_alpha("draft", q, p, 0) == -math.inf


def literal_defers(rule, q, p, x, alpha):
    """The spec's inequalities, for the a* consistency check."""
    max_q, max_p, tv = q.max(), p.max(), (p - q).clamp_min(0).sum()
    return {
        "chow": max_q < 1 - alpha, "diff": max_q < max_p - alpha, "opt": max_q < max_p - alpha * tv,
        "v1": q[x] < max_p - alpha, "v2": p[x] < max_p - alpha, "v3": p[x] < (1 - alpha) * max_p,
        "bild": -(q * p.clamp_min(1e-30).log()).sum() > alpha,
        "fuzzy": js(q, p) > alpha, "judge": max_p > 0.9 or kl(q, p) > alpha,
    }[rule]


def kl(a, b):
    """KL(a || b) of distributions without zeros (the random ones below)."""
    return (a * (a.log() - b.log())).sum()


def js(a, b):
    m = (a + b) / 2
    return (kl(a, m) + kl(b, m)) / 2


def test_the_kl_judge_defers_wherever_the_target_is_confident():
    """Its confidence mask: above max p = 0.9 it defers at every alpha, even where q = p (KL 0)."""
    confident = torch.tensor([0.95, 0.03, 0.02, 0.0], dtype=torch.float64)
    assert critical_alpha("judge", confident, confident, 0) == math.inf
    assert close(target_distribution("judge", q, confident, 10.0), confident)


@pytest.mark.parametrize("rule", ["chow", "diff", "opt", "v1", "v2", "v3", "bild", "fuzzy", "judge"])
def test_critical_alpha_matches_rule(rule):
    gen = torch.Generator().manual_seed(1)
    lo, hi = RULES[rule].alpha_range
    lo, hi = (-3.0, 3.0) if math.isinf(lo) else (lo, hi)
    checked = 0
    for _ in range(500):
        q = torch.softmax(torch.randn(12, generator=gen, dtype=torch.float64) * 2, -1)
        p = torch.softmax(torch.randn(12, generator=gen, dtype=torch.float64) * 2, -1)
        x = int(torch.randint(12, (), generator=gen))
        alpha = float(lo + (hi - lo) * torch.rand((), generator=gen, dtype=torch.float64))
        a_star = float(critical_alpha(rule, q, p, x))
        assert bool(literal_defers(rule, q, p, x, alpha)) == (alpha < a_star)
        checked += bool(alpha < a_star)
    assert 0 < checked < 500, "alphas should land on both sides of a*"


def test_token_rules_use_whole_vocabulary():
    # the draft token is kept under v3 (alpha=0.5 keeps token 1) yet eta gathers q from all deferred tokens
    pi = target_distribution("v3", q, p, 0.5)
    assert close(pi.sum(), 1.0) and pi[1] > q[1]


@pytest.mark.parametrize("rule, alpha", [("chow", 1.5), ("v3", -0.1), ("diff", 2.0), ("lossy", 1.0), ("bild", -1.0)])
def test_alpha_out_of_range(rule, alpha):
    with pytest.raises(ValueError, match="outside"):
        get_rule(rule).check_alpha(alpha)


def test_unknown_rule_lists_rules():
    with pytest.raises(ValueError) as e:
        target_distribution("v4", q, p, 0.1)
    for rule in RULES:
        assert rule in str(e.value)


def test_outcome_unchanged():
    assert outcome_unchanged("chow", 0.2, 0.5, "chow", 0.4, 0.5)       # deferred in both, pi = p
    assert not outcome_unchanged("chow", 0.2, 0.5, "chow", 0.6, 0.5)   # flips
    assert outcome_unchanged("chow", 0.6, 0.5, "v3", 0.9, 0.3)         # neither defers: the draft token stands
    assert not outcome_unchanged("v3", 0.1, 0.5, "v3", 0.2, 0.5)       # token rule deferred: eta may change
    assert outcome_unchanged("lossless", 0.0, math.inf, "lossless", 0.7, math.inf)


def test_fsds_criterion_as_a_cascade_rule_rejects_with_probability_tv_not_one():
    """rules.FSD_DIFFERS: where fuzzy defers, pi = p and the draft's token x ~ q is kept with probability
    min(1, p(x) / q(x)), so it is rejected with probability sum_x q(x) (1 - min(1, p(x) / q(x))) = TV(p, q) (Lemma 3),
    here 0.4, where FSD itself rejects it outright (probability 1)."""
    pi = target_distribution("fuzzy", q, p, 0.10)  # JS = 0.1019 > 0.10: deferred
    assert close(pi, p)
    rejected = float((q * (1 - (pi / q).clamp_max(1.0))).sum())
    assert rejected == pytest.approx(TV, abs=1e-12) and rejected < 1
    assert "rejects the draft's token outright" in RULES["fuzzy"].note and "TV(p, q)" in RULES["fuzzy"].note
    assert RULES["fuzzy"].gist.startswith("FSD's criterion as a cascade rule")


def test_the_judges_reading_is_said_and_its_kl_is_bilds_cross_entropy_less_the_drafts_entropy():
    """rules.JUDGE_READING names the KL's direction and the fallback as this project's reading, and says KL(q || p) is
    BiLD*'s cross-entropy less the draft's entropy: KL(q || p) = -sum q log p - (-sum q log q)."""
    from cascade_core.method.distributions import Distributions

    gen = torch.Generator().manual_seed(3)
    qs, ps = (torch.rand(5, 7, generator=gen, dtype=torch.float64).softmax(-1) for _ in range(2))
    d = Distributions(qs, ps)
    entropy = -(qs * qs.log()).sum(-1)
    assert close(d.kl_q_p, d.cross_entropy - entropy)
    assert "this project's reading" in RULES["judge"].note and "fixes neither" in RULES["judge"].note
    assert "this project's reading" in RULES["judge"].source


def test_the_rules_table_escapes_a_pipe_in_a_cell():
    """KL(q || p) in a Markdown table cell would end the cell: every row of rules_table has its six cells."""
    import re

    from cascade_core.method.rules import rules_table

    for line in rules_table().splitlines():
        assert len(re.findall(r"(?<!\\)\|", line)) == 7, line
    assert r"`KL(q \|\| p) > alpha or max p > 0.9`" in rules_table()


def test_the_rule_text_under_the_menu_says_how_a_rule_differs_from_its_source():
    from app.controls import rule_info

    assert rule_info("fuzzy").endswith(RULES["fuzzy"].note) and rule_info("judge").endswith(RULES["judge"].note)
    assert rule_info("chow") == f"{RULES['chow'].summary} ({RULES['chow'].source})"
