"""Lesson 5's derivation (app/derivation.py) against the paper's argument and the engine's rules: six steps in the
paper's order (arXiv 2405.19261v2's numbers), each with an exercise whose answers are computed here with
cascade_core's own functions, the numbers read out of the answer texts, so that a wrong number fails."""
import math
import re

import pytest
import torch

from app import derivation
from app.derivation import EXAMPLE, P, Q, STEPS, check
from cascade_core.method.distributions import Distributions
from cascade_core.method.explain import dissect
from cascade_core.method.rules import RULES, critical_alpha
from cascade_core.method.sampling import untempered_and_tempered

# What each step's title and text must cite, in the paper's order (the digest's §3; the review's items 4-7)
CITED = (("Eq. 3",), ("Lemma 1", "Eq. 4", "Eq. 5", "Remark 1", "Remark 2"), ("Lemma 3",),
         ("Eq. 7", "Eq. 8", "Lemma 4", "Eq. 9"), ("Eq. 10", "Lemma 5"), ("Lemma 8",))
CITATION = re.compile(r"\b(?:Eq\.|Lemma|Remarks?|step) \d+(?:-\d+)?|§\S+")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def numbers(text):
    """The numbers a text states, in order, leaving out the equations, lemmas and steps it cites."""
    return [float(n) for n in NUMBER.findall(CITATION.sub("", text))]


def given(text, name):
    """The value a question gives ``name``: 'name = 0.1', or 'name = (0.5, 0.5, 0)' as a float64 tensor."""
    found = re.search(rf"\b{re.escape(name)} = (\(([^)]*)\)|\d+(?:\.\d+)?)", text)
    assert found, f"{name!r} is not given in {text!r}"
    if found.group(2) is None:
        return float(found.group(1))
    return torch.tensor([float(v) for v in found.group(2).split(",")], dtype=torch.float64)


def at(step):
    """The distributions the step's question gives (temperature 1)."""
    return Distributions(given(step.question, "q"), given(step.question, "p"))


def a_star(rule, d):
    """The rule's a* at temperature 1, as the engine's public critical_alpha gives it."""
    return float(critical_alpha(rule, d.q, d.p, 0))


def test_six_steps_in_the_papers_order_each_with_an_exercise():
    assert len(STEPS) == len(CITED) == 6
    for step, cited in zip(STEPS, CITED):
        said = step.title + step.text
        assert all(c in said for c in cited), (step.title, [c for c in cited if c not in said])
        assert step.question and len(step.answers) >= 3 and step.why
        assert not step.answers[0].wrong_because and all(a.wrong_because for a in step.answers[1:])
    assert "2405.19261v2" in derivation.__doc__
    assert EXAMPLE == f"q = ({', '.join(f'{v:g}' for v in Q)}) and p = ({', '.join(f'{v:g}' for v in P)})"


def test_each_check_says_right_or_what_the_wrong_answer_misses():
    for i, step in enumerate(STEPS):
        assert check(i, step.answers[0].text) == f"**Right.** {step.why}"
        for wrong in step.answers[1:]:
            reveal = check(i, wrong.text)
            assert reveal.startswith("**Not quite.**") and wrong.wrong_because in reveal
            assert step.answers[0].text in reveal
    assert check(1, None) == "*Pick an answer first.*"


def test_step_1_a_sequential_deferral_adds_the_targets_loss_and_the_constant_price():
    """Eq. 3 at r = 1: l_p + alpha; the losses are the 0-1 loss's plug-ins at the example (1 - max)."""
    step = STEPS[0]
    d, alpha = at(step), given(step.question, "alpha")
    assert torch.equal(d.q, torch.tensor(Q, dtype=torch.float64))
    assert torch.equal(d.p, torch.tensor(P, dtype=torch.float64))
    l_q, l_p, tv = 1 - float(d.max_q), 1 - float(d.max_p), float(d.tv)
    assert [given(step.question, "ℓ_q"), given(step.question, "ℓ_p")] == pytest.approx([l_q, l_p])
    deferring = l_p + alpha
    assert numbers(step.answers[0].text) == pytest.approx([deferring])
    assert numbers(step.why) == pytest.approx([1, l_p, alpha, deferring, l_q])
    assert numbers(step.answers[1].text) == pytest.approx([l_p])
    assert numbers(step.answers[2].text) == pytest.approx([l_p + alpha * tv, l_p, alpha, tv])  # Eq. 8's price


def test_step_2_diff_needs_the_target_at_every_position():
    """Lemma 1's plug-in is diff (a* = max p - max q); it reads p, chow (the q-only plug-in) does not."""
    step = STEPS[1]
    d, alpha = at(step), given(step.question, "alpha")
    max_q, max_p, diff = float(d.max_q), float(d.max_p), a_star("diff", d)
    assert diff == pytest.approx(max_p - max_q) and alpha < diff  # it defers
    assert numbers(step.answers[0].text) == pytest.approx([max_q, max_p, alpha]) and "it defers" in step.answers[0].text
    assert numbers(step.why) == pytest.approx([diff, alpha])
    assert not RULES["diff"].decides_on_q and RULES["chow"].decides_on_q
    draft_alone = Distributions(d.q, None)
    chow = float(RULES["chow"].a_star(draft_alone))
    with pytest.raises((AttributeError, TypeError)):
        RULES["diff"].a_star(draft_alone)
    assert numbers(step.answers[1].text) == pytest.approx([max_q, 1, alpha]) and alpha < chow  # chow's test, Eq. 2


def test_step_3_a_deferred_token_is_rejected_with_probability_tv():
    """Lemma 3 from the verification's own acceptance (dissect): r TV at r = 1 and 0."""
    step = STEPS[2]
    d = at(step)
    tv, excess = float(d.tv), (d.p - d.q).clamp_min(0).tolist()
    deferring, keeping = (dissect("diff", d.q.tolist(), d.p.tolist(), alpha) for alpha in (0.0, 0.9))
    assert deferring["defers"][0] and deferring["rejection_prob"] == pytest.approx(tv)
    assert not keeping["defers"][0] and keeping["rejection_prob"] == 0
    assert numbers(step.answers[0].text) == pytest.approx([tv])
    assert numbers(step.why) == pytest.approx([0, *excess, tv])
    kept = float(torch.minimum(d.p, d.q).sum())
    assert numbers(step.answers[1].text) == pytest.approx([kept]) == [1 - tv]
    assert numbers(step.answers[1].wrong_because) == pytest.approx([1, kept])
    x = int(torch.argmax(d.q - d.p))  # the token the test can reject
    assert numbers(step.answers[2].wrong_because) == pytest.approx([1, 1, float(d.p[x]), float(d.q[x])])


def test_step_4_the_gain_must_pay_alpha_tv():
    """Lemma 4's rule (Eq. 9) with the 0-1 plug-ins is opt: on distributions with the question's gap and TV."""
    step = STEPS[3]
    gap, tv, alpha = (given(step.question, name) for name in ("ℓ_q - ℓ_p", "TV(p, q)", "alpha"))
    q = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    p = torch.tensor([0.5 + gap, 0.5 - tv, tv - gap], dtype=torch.float64)  # max p - max q = gap, TV = tv
    d = Distributions(q, p)
    assert [float(d.max_p - d.max_q), float(d.tv)] == pytest.approx([gap, tv])
    defers = bool(RULES["opt"].defers(d, alpha))
    assert step.answers[0].text.startswith("Yes" if defers else "No") and not defers
    assert numbers(step.answers[0].text) == pytest.approx([gap, alpha * tv])
    assert numbers(step.why) == pytest.approx([gap, alpha, tv, alpha * tv])
    assert numbers(step.answers[1].wrong_because) == pytest.approx([alpha, tv, alpha * tv, gap])


def test_step_5_opts_critical_alpha():
    """Eq. 10: a* = (max p - max q) / TV, and the rule defers below it; diff's a* is the wrong answer's."""
    step = STEPS[4]
    d = at(step)
    opt, diff = a_star("opt", d), a_star("diff", d)
    assert bool(RULES["opt"].defers(d, opt - 1e-9)) and not bool(RULES["opt"].defers(d, opt))
    assert step.answers[0].text.startswith("alpha <") and numbers(step.answers[0].text) == pytest.approx([opt])
    assert numbers(step.why) == pytest.approx([float(d.max_p), float(d.max_q), float(d.tv), opt])
    assert numbers(step.answers[1].text) == pytest.approx([diff])
    assert numbers(step.answers[1].wrong_because) == pytest.approx([float(d.tv)])
    assert "max_v |P(v) - q(v)| + \\max_v |P(v) - p(v)|" in step.text  # Lemma 5's bound


def greedy(q, p):
    """Distributions at temperature 0 from temperature-1 q and p: one-hot to sample and verify, q and p to threshold."""
    (q1, q0), (p1, p0) = (untempered_and_tempered(v.log(), 0.0) for v in (q, p))
    return Distributions(q0, p0, q1, p1, greedy=True)


def test_step_6_greedy_opt_defers_where_diff_does_not_and_pi_is_the_same():
    step = STEPS[5]
    d, alpha = greedy(given(step.question, "q"), given(step.question, "p")), given(step.question, "alpha")
    gap, diff = float(d.max_p - d.max_q), float(RULES["diff"].a_star(d))
    assert float(d.tv) == 0 and gap > 0 and float(RULES["opt"].a_star(d)) == math.inf
    assert bool(RULES["opt"].defers(d, alpha)) and not bool(RULES["diff"].defers(d, alpha))  # "opt alone"
    assert torch.equal(RULES["opt"].target(d, alpha), RULES["diff"].target(d, alpha))
    assert step.answers[0].text.startswith("opt alone")
    assert numbers(step.why) == pytest.approx([0, gap, 0, diff, alpha])
    assert numbers(step.answers[1].text) == pytest.approx([0, gap, alpha])  # "at temperature 0 ..., 0.05 < 0.1"
    assert numbers(step.answers[2].wrong_because) == pytest.approx([gap, alpha])


def test_lemma_8_opts_pi_is_diffs_at_every_position_and_its_deferrals_can_differ():
    """At temperature 0, on random positions: TV is 0 or 1, pi is the same under both rules at every alpha, and the
    deferrals differ at some alpha (where the tops agree)."""
    generator = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(400, 6, generator=generator, dtype=torch.float64)
    d = greedy(torch.softmax(logits[:200], -1), torch.softmax(logits[200:], -1))
    assert set(d.tv.tolist()) == {0.0, 1.0}
    differed = []
    for alpha in (-0.5, 0.0, 0.1, 0.3, 0.6):
        assert torch.equal(RULES["opt"].target(d, alpha), RULES["diff"].target(d, alpha))
        differ = RULES["opt"].defers(d, alpha) != RULES["diff"].defers(d, alpha)
        assert not differ[d.tv == 1].any()  # where the tops differ, opt's test is diff's
        differed.append(bool(differ.any()))
    assert any(differed)
