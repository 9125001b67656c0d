"""The claims the app teaches about the method (lessons, legends, tooltips, docstrings), each checked against the
engine or the rules, so that a false sentence fails a test. Equations and lemmas are Narasimhan et al.'s (ICLR 2025);
the block and its randomness are docs/spec.md's."""
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from app.lesson_looks import OPT_ANSWER, look_for_frontier, look_for_speculative
from app.lessons import LESSONS
from app.sandbox import START, loaded_position
from app.viz.compare import WHY
from app.viz.decision_map import map_points
from app.viz.sandbox import loaded_html
from app.viz.tokens import LEGEND
from cascade_core import generate
from cascade_core.method.costs import expected_speedup
from cascade_core.method.distributions import Distributions
from cascade_core.method.explain import dissect
from cascade_core.method.rules import RULES, critical_alpha
from cascade_core.method.sampling import untempered_and_tempered
from sweeps.quality import target_nll, target_probabilities

ROOT = Path(__file__).resolve().parents[1]
RUN = dict(max_new_tokens=24, stop_at_eos=False)
GAMMA = 3


def run(pair, rule, alpha=0.0, temperature=1.0, seed=1):
    return generate(pair, "Hello there", rule=rule, alpha=alpha, gamma=GAMMA, temperature=temperature, seed=seed,
                    **RUN)


def blocks(trace):
    """Each block's sources, in order (a position's ``block`` is the target call that verified it)."""
    found = {}
    for pos in trace.positions:
        found.setdefault(pos["block"], []).append(pos["source"])
    return list(found.values())


# -- Lesson 2: the first rejection ends the block --------------------------------------------------------------

def test_a_block_ends_at_its_first_rejection(tiny64):
    """Not "keeps or replaces each token": a replacement is always a block's last token, and blocks cut short by
    one emit fewer than gamma + 1 tokens (the later proposals are discarded)."""
    found = blocks(run(tiny64, "lossless"))
    assert all(len(sources) <= GAMMA + 1 and "replaced" not in sources[:-1] for sources in found)
    assert any(sources[-1] == "replaced" and len(sources) < GAMMA + 1 for sources in found)
    idea = LESSONS[1].idea
    assert "first rejection" in idea and "discarded unseen" in idea and "keeps or replaces" not in idea


# -- Lesson 8: what a block costs, as the counters show it ------------------------------------------------------

@pytest.mark.parametrize("rule, alpha", [("lossless", 0.0), ("v3", 0.5), ("opt", 0.2)])
def test_a_block_costs_gamma_plus_one_draft_calls_and_one_target_call(tiny64, rule, alpha):
    trace = run(tiny64, rule, alpha, seed=2)
    starts = [i for i, pos in enumerate(trace.positions) if i == 0 or pos["block"] != trace.positions[i - 1]["block"]]
    assert trace.stats["target_calls"] == len(starts)
    # every block drafts gamma + 1 proposals, however early it ends; only the last blocks are cut by the token limit
    assert trace.stats["draft_calls"] == sum(min(GAMMA + 1, RUN["max_new_tokens"] - i) for i in starts)
    idea = LESSONS[7].idea
    assert "gamma + 1 proposals (gamma + 1 draft calls)" in idea and "one target call" in idea
    assert "no bonus token" in idea and "Algorithm 4 drafts gamma" in idea


def test_a_block_whose_proposals_all_pass_emits_gamma_plus_one_tokens_and_no_bonus(tiny64):
    """chow at alpha 1 never defers: every proposal is verified against pi = q and kept."""
    trace = run(tiny64, "chow", 1.0)
    assert [len(sources) for sources in blocks(trace)] == [GAMMA + 1] * (RUN["max_new_tokens"] // (GAMMA + 1))
    assert trace.stats["target_calls"] == RUN["max_new_tokens"] // (GAMMA + 1)
    assert trace.stats["draft_calls"] == RUN["max_new_tokens"]


# -- Lessons 3 and 6, the legend: a token the rule did not defer is still verified -------------------------------

@pytest.mark.parametrize("rule, alpha", [("chow", 0.5), ("v1", 0.2), ("v3", 0.5)])
def test_a_token_the_rule_did_not_defer_is_verified_and_kept_with_probability_one(tiny64, rule, alpha):
    trace = run(tiny64, rule, alpha, seed=3)
    kept = [pos for pos in trace.positions if alpha >= pos["a_star"][rule]]
    assert kept and all(pos["accept_prob"] == pytest.approx(1.0) and pos["source"] == "accepted" for pos in kept)
    assert "unchecked" not in LESSONS[2].idea + LESSONS[5].idea and "probability 1" in LEGEND["accepted"]


@pytest.mark.parametrize("rule, alpha", [("v1", 0.1), ("v2", 0.1), ("v3", 0.5)])
def test_a_token_rules_accepted_set_has_pi_at_least_q(rule, alpha):
    _, q, p = START
    numbers = dissect(rule, q, p, alpha)
    accepted = [i for i, defers in enumerate(numbers["defers"]) if not defers]
    assert accepted and all(numbers["pi"][i] >= numbers["q"][i] - 1e-12 for i in accepted)
    assert all(numbers["accept_prob"][i] == pytest.approx(1.0) for i in accepted)


# -- rules.py and the Sandbox: which rules' decisions depend on temperature -------------------------------------

LOGITS = 2 * torch.randn(2, 64, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def at_temperature(t):
    (q_untempered, q), (p_untempered, p) = (untempered_and_tempered(logits, t) for logits in LOGITS)
    return Distributions(q, p, q_untempered, p_untempered, greedy=t == 0)


def test_chow_diff_and_the_token_rules_decide_alike_at_every_temperature():
    for name in ("chow", "diff", "v1", "v2", "v3"):
        for t in (0.0, 0.5, 2.0):
            assert torch.equal(RULES[name].a_star(at_temperature(t)), RULES[name].a_star(at_temperature(1.0))), name


def test_opts_deferral_set_changes_with_temperature():
    cold, warm = (RULES["opt"].a_star(at_temperature(t)) for t in (0.5, 1.0))
    i = next(i for i in range(len(cold)) if math.isfinite(cold[i]) and math.isfinite(warm[i]) and cold[i] != warm[i])
    alpha = float(cold[i] + warm[i]) / 2
    assert bool(RULES["opt"].defers(at_temperature(0.5), alpha)[i]) != bool(RULES["opt"].defers(at_temperature(1.0),
                                                                                              alpha)[i])


def test_lossy_and_bild_at_zero_depend_on_temperature():
    assert not torch.equal(RULES["lossy"].a_star(at_temperature(0.5)), RULES["lossy"].a_star(at_temperature(1.0)))
    assert torch.equal(RULES["bild"].a_star(at_temperature(0.5)), RULES["bild"].a_star(at_temperature(1.0)))
    assert not torch.equal(RULES["bild"].a_star(at_temperature(0.0)), RULES["bild"].a_star(at_temperature(1.0)))


@pytest.mark.parametrize("alpha", [-1.0, -0.2, 0.0, 0.1, 0.4, 1.0])
def test_under_greedy_decoding_opts_pi_is_diffs(alpha):
    """Lemma 8: at T = 0 both q and p are one-hot, so TV is 0 (where their tokens agree, pi = p = q anyway) or 1."""
    d = at_temperature(0.0)
    assert torch.equal(RULES["opt"].target(d, alpha), RULES["diff"].target(d, alpha))


def test_a_loaded_position_at_another_temperature_defers_as_the_run_did_for_every_rule_but_lossy(tiny64):
    trace = run(tiny64, "opt", 0.2, temperature=0.6)
    differs = {}
    for i in range(len(trace.positions)):
        loaded = loaded_position(SimpleNamespace(trace=trace), i)
        for rule, alpha in (("opt", 0.2), ("bild", 2.0), ("chow", 0.5), ("v3", 0.5), ("lossy", 0.3)):
            numbers = dissect(rule, loaded["q"], loaded["p"], alpha, rest=loaded["rest"])
            engine = trace.positions[i]["a_star"][rule]
            differs[rule] = differs.get(rule, False) or numbers["a_star"][0] != pytest.approx(engine, rel=1e-6)
    assert differs == dict(opt=False, bild=False, chow=False, v3=False, lossy=True)
    words = loaded_html(loaded, loaded["labels"], numbers, "lossy", 0.3)
    assert "every rule but lossy" in words and "same at every temperature" not in words


# -- Lesson 4: where opt defers more --------------------------------------------------------------------------

def test_at_a_fixed_confidence_gap_opt_defers_less_where_the_models_disagree_more():
    q = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    agree, disagree = (torch.tensor(p, dtype=torch.float64) for p in ([0.7, 0.2, 0.1], [0.1, 0.2, 0.7]))
    # both gaps max p - max q are 0.2; TV is 0.2 and 0.5, so a* = 0.2 / TV is 1.0 and 0.4
    a_agree, a_disagree = (float(critical_alpha("opt", q, p, 0)) for p in (agree, disagree))
    assert a_agree == pytest.approx(1.0) and a_disagree == pytest.approx(0.4)
    assert 0.6 < a_agree and not 0.6 < a_disagree  # at alpha 0.6 opt defers where the models agree, only there
    assert "defers more where the models agree (small TV) and less where they disagree" in OPT_ANSWER


# -- Lesson 2's look-for: the greedy text and a near tie --------------------------------------------------------

@pytest.mark.parametrize("rule, alpha, temperature", [("opt", 0.2, 1.0), ("opt", 0.7, 0.6), ("opt", 0.3, 0.0),
                                                     ("diff", 0.1, 1.0), ("diff", 0.0, 0.0)])
def test_the_decision_maps_line_separates_the_engines_decisions(tiny64, rule, alpha, temperature):
    """The decision map draws diff's boundary as max p - max q = alpha (Eq. 5) and opt's as max p - max q = alpha TV
    (Eq. 10): above the line, and only there, the engine's own decision (alpha < a*) defers."""
    points = map_points(run(tiny64, rule, alpha, temperature).positions, rule, alpha)
    assert len(points) == RUN["max_new_tokens"] and {p[2] for p in points} == {True, False}
    for tv, gap, defers, _ in points:
        boundary = alpha * tv if rule == "opt" else alpha
        if abs(gap - boundary) > 1e-9:
            assert defers == (gap > boundary), (tv, gap, defers)


def test_greedy_lossless_writes_the_top_token_of_the_p_its_verification_read(tiny64):
    target, lossless = (run(tiny64, rule, temperature=0.0) for rule in ("target", "lossless"))
    assert all(pos["p_token"] == pos["max_p"] for pos in lossless.positions)
    assert target.tokens == lossless.tokens  # float64: no near tie breaks differently


def test_where_greedy_lossless_parts_from_the_target_the_look_for_says_why():
    stats = dict(tokens=3, deferred=1, replaced=1, target_calls=2, tokens_per_target_call=1.5)
    top = [[4, "a", 0.40001, 0.1], [3, "b", 0.39999, 0.2]]
    target = SimpleNamespace(tokens=[1, 2, 3], stats=dict(stats, target_calls=3))
    lossless = SimpleNamespace(tokens=[1, 2, 4], stats=stats, positions=[{}, {}, dict(top_p=top)])
    look = look_for_speculative(None, (target, lossless))
    assert "different text from the target alone from token 2" in look and "near tie" in look
    assert "p 0.4000" in look and "different shapes round differently" in look
    assert "speculative decoding is the target's greedy text" not in look


# -- Lesson 7: what the target's NLL shows ---------------------------------------------------------------------

def test_the_targets_greedy_text_scores_a_lower_nll_than_its_own_samples(tiny64):
    """So lossless (sampling from the target) is no floor of the NLL, and a lower NLL is not better text."""
    def nll(trace):
        return target_nll(target_probabilities(tiny64, trace.prompt_ids, trace.tokens)[0])

    greedy = nll(run(tiny64, "target", temperature=0.0))
    assert all(greedy < nll(run(tiny64, "lossless", seed=seed)) for seed in range(3))
    idea = LESSONS[6].idea
    assert "task metrics" in idea and "cannot rank" in idea and "Better means lower NLL" not in idea


def test_the_frontiers_look_for_does_not_call_a_lower_point_better():
    look = look_for_frontier(FRONTIER_ROWS)
    assert "not better text" in look and "better rule" not in look and "cannot rank" in look


# -- Compare: when rows coincide ------------------------------------------------------------------------------

def test_rows_verifying_against_the_same_pi_write_the_same_text(tiny64):
    assert run(tiny64, "diff", -1.0).tokens == run(tiny64, "lossless").tokens  # diff at -1 always defers: pi = p
    assert run(tiny64, "chow", 1.0).tokens == run(tiny64, "draft").tokens  # chow at 1 never defers: pi = q


def test_target_only_and_lossless_part_at_positive_temperature_and_agree_greedily(tiny64):
    assert all(run(tiny64, "target", seed=s).tokens != run(tiny64, "lossless", seed=s).tokens for s in range(3))
    assert run(tiny64, "target", temperature=0.0).tokens == run(tiny64, "lossless", temperature=0.0).tokens
    assert "rows agree until" not in WHY and "only by chance" in WHY


# -- The cost model is Leviathan et al.'s, not the paper's -----------------------------------------------------

def test_the_cost_model_is_leviathan_et_als_formula():
    a, g, c = 0.6, 4, 0.2
    assert expected_speedup(a, g, c) == pytest.approx((1 - a ** (g + 1)) / ((1 - a) * (g * c + 1)))
    assert expected_speedup(a, g, c, g + 1) == pytest.approx((1 - a ** (g + 1)) / ((1 - a) * ((g + 1) * c + 1)))


FALSE = re.compile(r"paper'?s (speed-up )?estimate|paper assumes|paper's assumption|keeps or replaces each|"
                   r"stands unchecked|same at every temperature|the target's own quality", re.IGNORECASE)


def test_no_false_sentence_about_the_method_is_left():
    files = [p for folder in ("app", "cascade_core", "sweeps", "docs") for p in (ROOT / folder).rglob("*")
             if p.suffix in (".py", ".md")] + [ROOT / "README.md", *(ROOT / "assets").glob("*.md")]
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files for m in FALSE.finditer(p.read_text())]
    assert not found, found


@pytest.mark.parametrize("index", range(len(LESSONS)))
def test_every_lessons_reveal_says_whether_the_answer_held_and_names_the_misconception_of_a_wrong_one(index):
    """Each answer, as the run's outcome and as the learner's choice: a choice that held is told so (with its caveat,
    if any); one that did not is told what the run showed and the misconception it reflects."""
    lesson = LESSONS[index]
    assert len(lesson.answers) >= 2 and len({a.text for a in lesson.answers}) == len(lesson.answers)
    for outcome, happened in enumerate(lesson.answers):
        told = [type(lesson).reveal(SimpleNamespace(answers=lesson.answers, held=lambda *r: outcome,
                                                    rule_property=lesson.rule_property, doubt=None), a.text)
                for a in lesson.answers]
        shows = "The rule says" if lesson.rule_property else "What this run shows"
        for chosen, text in zip(lesson.answers, told):
            assert text.startswith(f"**Your answer:** {chosen.text} ")
            if chosen is happened:
                assert "**It held.**" in text and text.endswith(chosen.caveat)
            else:
                assert f"**It did not hold.** {shows}: *{happened.text}*" in text
                assert text.endswith(chosen.wrong_because)
    correct_in_general = [a for a in lesson.answers if not a.wrong_because]
    assert len(correct_in_general) <= 1  # every other answer names the misconception behind it


def test_the_sandbox_lessons_outcome_is_computed_from_the_rules_rejection_probabilities():
    """Lesson 6's outcome (v3 or lossless rejects more) is computed by cascade_core.method.costs.rejection_terms, not
    written down: v3 at alpha 0.5 rejects more than lossless, and at 0.99, keeping all eight tokens (pi = q), less."""
    from app.lesson_looks import held_sandbox
    lesson = LESSONS[5]
    assert lesson.answers[held_sandbox(lesson.rows)].text == "v3 at alpha 0.5."
    assert lesson.answers[held_sandbox((("v3", 0.99),))].text == "Lossless."


# -- Lesson 5: the derivation's run, against opt's decisions (its exercises: tests/test_derivation.py) ---------

def test_the_derivation_lessons_outcome_is_the_engines_decisions(tiny64):
    """The lesson's answer that held is the one whose prediction matches opt's own decisions: its line."""
    from app.lesson_looks import held_derivation
    traces = [run(tiny64, "opt", 0.3, 0.7)]
    assert held_derivation(None, traces) == 0
    # decisions made by "the target is surer" instead (a* = +inf where max p > max q, else -inf): answer 1 held
    surer = [dict(pos, a_star=dict(pos["a_star"], opt=math.inf if pos["max_p"] > pos["max_q"] else -math.inf))
             for pos in traces[0].positions]
    assert held_derivation(None, [SimpleNamespace(positions=surer, settings=traces[0].settings)]) == 1


def defers(rule, q, p, alpha):
    q, p = (torch.tensor(v, dtype=torch.float64) for v in (q, p))
    return bool(RULES[rule].defers(Distributions(q[None], p[None]), alpha)[0])


def test_docs_spec_how_fuzzy_and_the_judge_relate_to_chow_diff_and_opt():
    """docs/spec.md, "How the two later rules relate": each sentence on one pair of distributions."""
    # equally unsure, disagreeing: fuzzy defers, diff and opt (alpha >= 0) do not
    q, p = [0.4, 0.3, 0.3, 0.0], [0.0, 0.3, 0.3, 0.4]
    assert defers("fuzzy", q, p, 0.2) and not defers("diff", q, p, 0.0) and not defers("opt", q, p, 0.0)
    # agreeing, both unsure: fuzzy never defers (JS 0), nor the judge below its mask; chow does
    same = [0.4, 0.3, 0.2, 0.1]
    assert not any(defers(rule, same, same, alpha) for rule in ("fuzzy", "judge") for alpha in (0.0, 0.3, 0.69))
    assert defers("chow", same, same, 0.5)
    # the target confident, the draft surer still: the judge defers at every alpha; diff and opt do not
    q, p = [0.97, 0.01, 0.01, 0.01], [0.92, 0.04, 0.02, 0.02]
    assert all(defers("judge", q, p, alpha) for alpha in (0.0, 5.0, 10.0))
    assert not defers("diff", q, p, 0.0) and not defers("opt", q, p, 0.0)


# -- The docs, README and the Hub card: what they teach about the method ---------------------------------------

def doc(path):
    return (ROOT / path).read_text()


def flat(text):
    """A Markdown text with its line breaks as spaces, so a sentence reads as one line."""
    return " ".join(text.split())


def test_the_readme_and_the_hub_card_say_deferring_changes_pi_and_the_first_rejection_ends_the_block():
    """Item 16: a deferral picks the pi the draft's token is verified against (Alg. 4/5); the target does not "take
    over", and this engine drafts gamma + 1 tokens a block."""
    from cascade_core.tools.hub_export import exported_files
    card, readme = flat(exported_files()["README.md"]), flat(doc("README.md"))
    for text in (card, readme):
        assert "takes over" not in text and "the target decides" not in text
        assert "which distribution pi the draft's token is verified against" in text.replace("`", "")
        assert "the first rejection ends the block" in text
    assert "proposes `gamma + 1` tokens" in card and "proposes `gamma` tokens" not in card


def as_python(formula):
    """A speed-up formula as the docs write it (a^b, implied products) as a Python expression."""
    formula = formula.replace("^", "**")
    formula = re.sub(r"\)\s*(?=[(\w])", ")*", formula)
    return re.sub(r"(\w)\s+(?=[(a-z])", r"\1*", formula)


def test_the_speed_up_the_docs_give_is_what_the_app_calls():
    """Item 15: spec.md's formula with (gamma + 1) c is expected_speedup(a, gamma, c, gamma + 1), and every call in
    the app and the sweeps' figures passes gamma + 1 draft calls a block."""
    import ast
    spec = flat(doc("docs/spec.md"))
    shown, leviathan = re.search(r"The speed-up the app shows beside its measured projection, `([^`]+)`, is Leviathan "
                                 r"et al.'s \(2023\) estimate `([^`]+)` with this engine's gamma \+ 1 draft calls",
                                 spec).groups()
    for a, gamma, c in ((0.6, 4, 0.2), (0.9, 2, 0.05), (0.3, 7, 0.5)):
        assert eval(as_python(shown)) == pytest.approx(expected_speedup(a, gamma, c, gamma + 1))
        assert eval(as_python(leviathan)) == pytest.approx(expected_speedup(a, gamma, c))
    calls = [(path, node) for path in [*(ROOT / "app").rglob("*.py"), *(ROOT / "sweeps").rglob("*.py"),
                                       *(ROOT / "cascade_core").rglob("*.py")]
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "expected_speedup"]
    assert len(calls) >= 2  # costs.speedup_at_c (the app's hypothetical c) and the sweeps' figures
    for path, call in calls:
        assert len(call.args) == 4 and ast.unparse(call.args[3]) == ast.unparse(call.args[1]) + " + 1", path


def token_rules_rejection(rule, alpha):
    """The rejection probability sum_v max(0, pi - q) in the Sandbox's starting q and p, and the same by the formula
    the docs give, eta sum_{v in A} p(v) + sum_{v not in A} max(0, eta p(v) - q(v))."""
    _, q, p = START
    numbers = dissect(rule, q, p, alpha)
    eta = sum(qv for qv, d in zip(q, numbers["defers"]) if d)
    by_formula = sum(eta * pv if not d else max(0.0, eta * pv - qv) for qv, pv, d in zip(q, p, numbers["defers"]))
    assert numbers["rejection_prob"] == pytest.approx(by_formula)
    return round(numbers["rejection_prob"], 4), sum(numbers["defers"])


def test_a_token_rule_can_reject_more_often_than_lossless_and_more_as_alpha_grows_as_the_docs_say():
    """Items 1, 10 and the class plan: not r TV (Lemma 3 holds for pi in {q, p}); v3 at alpha 0.5 rejects more than
    lossless (TV), and at 0.6 it defers fewer tokens yet rejects more."""
    (lossless, _), (v3, deferred), (v3_later, deferred_later) = (
        token_rules_rejection(rule, alpha) for rule, alpha in (("lossless", 0.0), ("v3", 0.5), ("v3", 0.6)))
    assert (lossless, v3, v3_later) == (0.43, 0.4725, 0.4861) and deferred_later < deferred
    for path in ("docs/spec.md", "docs/teaching.md"):
        text = flat(doc(path))
        assert "0.4725" in text and "0.43" in text and "0.4861" in text, path


def test_worksheet_7_a_constant_price_and_a_price_per_unit_of_tv_decide_differently():
    """Eq. 4/5 against Eq. 10: max q 0.5, max p 0.7, TV 0.4, alpha 0.3: diff keeps the draft, opt defers."""
    q, p = [0.5, 0.1, 0.4], [0.7, 0.3, 0.0]
    assert float(Distributions(*(torch.tensor(v, dtype=torch.float64) for v in (q, p))).tv) == pytest.approx(0.4)
    assert not defers("diff", q, p, 0.3) and defers("opt", q, p, 0.3)
    assert "0.5 > 0.3 + 0.3 x 0.4 = 0.42" in doc("docs/teaching.md")


def test_under_greedy_decoding_opt_and_diff_can_defer_at_different_positions_with_the_same_pi():
    """Lemma 8 as the docs state it: where both top tokens agree (TV = 0), opt defers wherever max p > max q and
    diff only past alpha, but pi = p = q there, so the output is the same."""
    (q1, q0), (p1, p0) = (untempered_and_tempered(torch.tensor(logits, dtype=torch.float64)[None], 0.0)
                          for logits in ([1.0, 0.5, 0.0], [2.0, 0.5, 0.0]))
    d = Distributions(q0, p0, q1, p1, greedy=True)
    assert float(d.tv) == 0.0 and float(p1.amax() - q1.amax()) < 0.3
    assert bool(RULES["opt"].defers(d, 0.3)[0]) and not bool(RULES["diff"].defers(d, 0.3)[0])
    assert torch.equal(RULES["opt"].target(d, 0.3), RULES["diff"].target(d, 0.3))
    for path in ("docs/spec.md", "docs/teaching.md"):
        assert "The deferral counts can still differ" in flat(doc(path)), path


def test_a_sequential_cascade_with_diff_calls_the_target_at_every_position(tiny64):
    """Remark 1: diff needs p everywhere, so in a sequential cascade the target reads every position; chow, which
    decides on q alone, calls it only where it defers (Remark 2: a speculative cascade has p from the block's pass)."""
    diff, chow = (generate(tiny64, "Hello there", rule=rule, alpha=0.3, sequential=True, seed=1, **RUN)
                  for rule in ("diff", "chow"))
    assert diff.stats["target_calls"] == RUN["max_new_tokens"] > chow.stats["target_calls"]


def test_the_docs_say_every_derivation_step_has_an_exercise_and_it_does():
    """Item 6: six steps, each with an exercise, in the app and in every doc that counts them."""
    from app.derivation import STEPS
    assert len(STEPS) == 6 and all(step.answers for step in STEPS)
    for path in ("README.md", "docs/teaching.md"):
        text = flat(doc(path))
        assert "six steps, each with an exercise" in text and "exercise a step" not in text, path


DOCS_FALSE = re.compile(r"takes over|verifies all of them|exercise a step|plug-in optimal rule|"
                        r"KL\(q \|\| p\)|larger alpha[^.]*faster|cascade in the usual sense", re.IGNORECASE)


def test_no_doc_repeats_a_corrected_sentence():
    """Items 8, 16, 6, 21, 10 and the plug-in's name: none of the corrected sentences is back in the docs, the README,
    the Hub card or the Strategies module (a bare KL(q || p) ends a Markdown table's cell: it is written
    KL(q \\|\\| p))."""
    files = ["README.md", "cascade_core/tools/model_card.md", "cascade_core/decoding/strategies.py",
             "app/strategies.py", *(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
    found = [f"{path}: {m.group(0)}" for path in files for m in DOCS_FALSE.finditer(flat(doc(path)))]
    assert not found, found


# -- What a token rule costs: its rejection probability is not r TV (Eq. 11, Lemma 3) --------------------------

def random_distribution(generator, size, zeros=0):
    """A random distribution over ``size`` tokens, ``zeros`` of them with probability 0 (a head's q)."""
    weights = torch.rand(size, generator=generator, dtype=torch.float64) ** 3
    weights[torch.randperm(size, generator=generator)[:zeros]] = 0.0
    return weights / weights.sum()


# Eq. 13-15 as the paper writes them, apart from the engine's a*: the tokens each token rule keeps (its A)
KEPT = dict(v1=lambda q, p, alpha: q >= p.max() - alpha, v2=lambda q, p, alpha: p >= p.max() - alpha,
            v3=lambda q, p, alpha: p >= (1 - alpha) * p.max())
ALPHAS = dict(chow=(0.0, 1.0), diff=(-1.0, 1.0), opt=(-3.0, 3.0), bild=(0.0, 4.0), fuzzy=(0.0, 0.7),
              judge=(0.0, 3.0), v1=(-1.0, 1.0), v2=(-1.0, 1.0), v3=(0.0, 1.0), lossless=(0.0, 0.0), draft=(0.0, 0.0))


@pytest.mark.parametrize("rule", list(ALPHAS))
def test_rejection_terms_are_eq_11s_closed_form_for_token_rules_and_r_tv_for_position_rules(rule):
    """cascade_core.method.costs.rejection_terms on random q and p: the chance the keep test min(1, pi(x) / q(x)) fails
    (dissect's enumeration over the draft's proposals); for a token rule eta sum_{v in A} p(v) + sum_{v not in A}
    max(0, eta p(v) - q(v)) with A from Eq. 13-15; for a position rule r TV(p, q) (Lemma 3)."""
    from cascade_core.method.costs import rejection_terms
    generator = torch.Generator().manual_seed(7)
    lo, hi = ALPHAS[rule]
    for trial in range(40):
        q, p = random_distribution(generator, 9, zeros=trial % 3), random_distribution(generator, 9)
        alpha = lo + (hi - lo) * float(torch.rand(1, generator=generator, dtype=torch.float64))
        terms = rejection_terms(rule, q, p, alpha)
        assert terms.total == pytest.approx(dissect(rule, q.tolist(), p.tolist(), alpha)["rejection_prob"], abs=1e-12)
        tv = float((q - p).abs().sum() / 2)
        if rule in KEPT:
            kept = KEPT[rule](q, p, alpha)
            eta = float(q[~kept].sum())
            assert terms.eta == pytest.approx(eta, abs=1e-12)
            assert terms.kept == pytest.approx(eta * float(p[kept].sum()), abs=1e-12)
            assert terms.deferred == pytest.approx(float((eta * p - q)[~kept].clamp_min(0).sum()), abs=1e-12)
        else:
            r = float(RULES[rule].a_star(Distributions(q, p)) > alpha)
            assert (terms.eta, terms.kept) == (pytest.approx(r), 0.0)
            assert terms.deferred == pytest.approx(r * tv, abs=1e-12)


def test_rejection_terms_refuse_lossys_lenient_test():
    from cascade_core.method.costs import rejection_terms
    _, q, p = START
    with pytest.raises(ValueError, match="lossy"):
        rejection_terms("lossy", q, p, 0.3)


def test_on_lesson_6s_q_and_p_v3_rejects_more_than_lossless_and_more_as_alpha_grows():
    """Review items 1 and 10 on the Sandbox's START: v3 at alpha 0.5 rejects 0.4725 against lossless's TV 0.43, and
    0.4861 at alpha 0.6; v1 0.158 at 0.1 and 0.193 at 0.2. The lesson's table, question and answers say so."""
    from app.lesson_looks import look_for_sandbox
    from cascade_core.method.costs import rejection_terms
    _, q, p = START
    total = {(rule, alpha): round(rejection_terms(rule, q, p, alpha).total, 4)
             for rule, alpha in (("lossless", 0.0), ("v3", 0.5), ("v3", 0.6), ("v1", 0.1), ("v1", 0.2))}
    assert total == {("lossless", 0.0): 0.43, ("v3", 0.5): 0.4725, ("v3", 0.6): 0.4861, ("v1", 0.1): 0.158,
                     ("v1", 0.2): 0.193}
    lesson = LESSONS[5]
    look = look_for_sandbox(lesson.rows)
    assert "| lossless (pi = p) | none | no | 1.00 | 0.0000 + 0.4300 = **0.4300** |" in look
    assert "| v3 alpha 0.5 | A | no | 0.75 | 0.3375 + 0.1350 = **0.4725** |" in look
    assert "| The | 0.4 | 0.1 |" in lesson.idea  # the q and p the question reads
    assert "more often than lossless (0.4725 against TV = 0.4300)" in look
    assert "At alpha 0.6, v3 keeps A = {A, Once} and rejects with 0.4861: a larger alpha, fewer deferrals" in look
    assert "v3" in lesson.predict and "lossless" in lesson.predict
    wrong = next(a for a in lesson.answers if a.text == "Lossless.")
    assert "A token rule keeps more of the draft's tokens, so it always rejects less: not so." in wrong.wrong_because
    assert "eta sum_{v in A} p(v) + sum_{v not in A} max(0, eta p(v) - q(v))" in lesson.idea


def test_a_rule_propertys_reveal_says_what_the_rule_says_not_what_the_run_shows():
    """Review item 3: lesson 4's answer is a property of opt (held_tv reads no run), asked at one confidence gap."""
    lesson = LESSONS[3]
    assert lesson.rule_property and "same confidence gap" in lesson.predict
    told = lesson.reveal("Where they disagree (large TV).", None, [])
    assert "The rule says: *Where they agree (small TV).*" in told and "What this run shows" not in told
    assert [k for k, other in enumerate(LESSONS) if other.rule_property] == [3, 8]  # opt, and the engines' rules
    assert "What this run shows" in LESSONS[5].reveal("Lossless.", LESSONS[5].rows)  # computed at its q and p


def test_lesson_1_does_not_say_a_cascades_blocks_run_longer_and_its_look_for_says_whose_did():
    """Review item 1: v3's blocks may run longer or shorter than lossless's; the look-for compares this run's."""
    from app.lesson_looks import blocks_compared
    lesson = LESSONS[0]
    assert all("so its blocks run longer" not in a.wrong_because + a.caveat for a in lesson.answers)
    assert "Whether v3's blocks run longer depends on where the draft puts its mass" in lesson.answers[1].wrong_because
    assert "cannot trade any quality" not in lesson.idea and "distributed exactly as the target's" in lesson.idea

    def trace(acceptance, per_call):
        return SimpleNamespace(stats=dict(acceptance_rate=acceptance, tokens_per_target_call=per_call))

    shorter = blocks_compared(trace(0.8, 3.1), trace(0.6, 2.2))
    assert "v3 kept 60% of its proposals and lossless 80%, so v3's blocks ran shorter than lossless's" in shorter
    assert "(2.20 against 3.10 tokens per target call)" in shorter and "either way" in shorter
    assert "ran longer than" in blocks_compared(trace(0.6, 2.2), trace(0.8, 3.1))


def test_the_sandbox_shows_the_rules_rejection_probability_beside_lossless():
    """The Sandbox's text carries rejection_terms' numbers: a token rule's two terms (Eq. 11), a position rule's
    r TV (Lemma 3), each beside lossless's TV; none for lossy, whose keep test is lenient."""
    from app.sandbox import SandboxHandlers
    text = lambda rule, alpha: SandboxHandlers.update(rule, alpha, *START[0], *START[1], *START[2])[1]  # noqa: E731
    v3 = text("v3", 0.5)
    assert "= 0.3375 + 0.1350 = 0.4725 (eta = 0.750), above lossless&#x27;s TV(p, q) = 0.4300" in v3
    assert "can reject more often than lossless" in v3
    assert "r TV(p, q) = 1 × 0.4300 = 0.4300, equal to lossless&#x27;s TV(p, q) = 0.4300" in text("chow", 0.5)
    assert "r TV(p, q) = 0 × 0.4300 = 0.0000, below lossless" in text("chow", 0.9)  # a* 0.6: pi = q
    assert 'id="sandbox-cost"' not in text("lossy", 0.3) and 'id="sandbox-cost"' not in text("lossless", 0.0)


def test_a_loaded_positions_sandbox_shows_no_cost_line_and_says_pi_is_t_1s_for_every_rule(tiny64):
    """A loaded position's last entry is the rest of a vocabulary, not one token: no Eq. 11 line there. Review item
    17: at the run's T != 1, pi and the keep probabilities are T = 1's for every rule, not lossy's alone."""
    from app.sandbox import SandboxHandlers
    trace = run(tiny64, "v3", 0.5, temperature=0.6)
    loaded = loaded_position(SimpleNamespace(trace=trace), 0)
    shown = SandboxHandlers.update_loaded(loaded, "v3", 0.5, *loaded["labels"], *loaded["q"], *loaded["p"])[1]
    assert 'id="sandbox-cost"' not in shown and "Loaded from Explore" in shown
    assert "pi, the keep probabilities and the residual here are T = 1&#x27;s for every rule" in shown


def test_how_to_read_and_lesson_1_no_longer_say_a_larger_alpha_is_always_faster():
    """Review items 10 and 22."""
    how = flat(doc("assets/how_to_read.md"))
    assert "always means less deferral (faster" not in how
    assert "For token rules it usually does, but not always" in how and "(Lemma 3)" in how
    looks = (ROOT / "app" / "lesson_looks.py").read_text()
    assert "batch size 1 on a TPUv4" in looks and "costs about the same for one token or several" not in looks


# -- Lesson 7: the frontier's quality axis is the mean TV to the target (issue 65, review items 11 and 12) ------

FRONTIER_ROWS = [dict(rule="lossless", alpha=None, target_calls=18, tokens=24, tv_to_target=0.0, target_nll=2.0),
                 dict(rule="chow", alpha=0.4, target_calls=11, tokens=24, tv_to_target=0.33, target_nll=1.5),
                 dict(rule="opt", alpha=0.2, target_calls=13, tokens=24, tv_to_target=0.26, target_nll=1.9),
                 dict(rule="v3", alpha=0.8, target_calls=12, tokens=24, tv_to_target=0.22, target_nll=1.7),
                 dict(rule="v3", alpha=0.99, target_calls=5, tokens=24, tv_to_target=0.6, target_nll=3.0)]


def test_lesson_7_teaches_the_mean_tv_to_the_target_and_the_papers_own_measure():
    idea = LESSONS[6].idea
    assert "mean TV to the target" in idea and "Lossless is 0 (pi = p)" in idea and "(Eq. 11)" in idea
    assert ("the paper measures quality with task metrics (BLEU, ROUGE-2/L, exact match, pass@1, F1) against measured "
            "latency (T5) or rejection rate (Gemma), reporting both the speed-up at the large model's quality and the "
            "best quality at its latency") in idea  # review item 12's corrected sentence
    assert "at matched latency" not in idea and "diagnostic" in idea and "not better text" in idea


def test_lesson_7s_question_reads_the_frontier_it_asks_about():
    """The nearest point to the target within 80% of lossless's calls per token, and the answer it makes."""
    from app.lesson_looks import FRONTIER_BUDGET, FRONTIER_RULES, held_frontier

    lesson = LESSONS[6]
    assert f"{100 * FRONTIER_BUDGET:.0f}% of lossless's target calls per token" in lesson.predict
    assert [a.text.split("'")[0] for a in lesson.answers[:3]] == list(FRONTIER_RULES)
    assert lesson.answers[held_frontier(FRONTIER_ROWS)].text == "v3's."  # 0.22 at 0.5 calls per token
    nearer_opt = [dict(r, tv_to_target=0.1) if r["rule"] == "opt" else r for r in FRONTIER_ROWS]
    assert lesson.answers[held_frontier(nearer_opt)].text == "opt's."
    dear = [dict(r, target_calls=17) if r["rule"] != "lossless" else r for r in FRONTIER_ROWS]  # none below 0.6
    assert lesson.answers[held_frontier(dear)].text.startswith("None")
    assert "v3 alpha 0.8 (mean TV 0.220 at 0.50 calls per token)" in look_for_frontier(FRONTIER_ROWS)


def test_lesson_7s_run_draws_the_tv_axis_with_its_front_and_nll_without_one():
    """Review item 11: the frontier the lesson draws (Trade-off's redraw, as app/learn.py calls it) is the mean TV to
    the target with a Pareto front; the target's NLL is labelled a diagnostic and has no front."""
    from app.tradeoff import QUALITY_CHOICES, TradeoffHandlers
    from sweeps.figures import QUALITY
    from sweeps.report import summarise

    rows = [dict(r, gamma=4, acceptance_rate=0.5, deferral_rate=0.5) for r in FRONTIER_ROWS]
    figure = TradeoffHandlers.redraw(rows, "calls", 0.25)
    assert figure.layout.yaxis.title.text.replace("<br>", " ") == QUALITY["tv_to_target"] == QUALITY_CHOICES[0][0]
    assert [t.name for t in figure.data if t.legendgroup == "front"] == ["Pareto front (least TV at each cost)"]
    nll = TradeoffHandlers.redraw(rows, "calls", 0.25, "target_nll")
    assert not [t for t in nll.data if t.legendgroup == "front"]
    assert "diagnostic: likelier under the target, not better text" in nll.layout.yaxis.title.text.replace("<br>", " ")
    assert summarise(rows)[0]["tv_to_target_mean"] == 0.0


def test_a_position_rules_tv_is_tv_q_p_where_it_keeps_q_and_a_smaller_alpha_defers_at_more_positions(tiny64):
    """Lesson 7's idea on the engine: per position TV(q, p) or 0 by the decision (Eq. 6), and the positions a smaller
    alpha defers at include a larger alpha's (every rule defers iff alpha < a*)."""
    trace = run(tiny64, "chow", 0.5)
    for pos in trace.positions:
        assert pos["tv_to_target"] == (0.0 if 0.5 < pos["a_star"]["chow"] else pos["tv"])
    assert run(tiny64, "lossless").stats["tv_to_target"] == 0.0 < trace.stats["tv_to_target"]
    for small, large in ((0.2, 0.5), (0.5, 0.8)):
        assert all(small < pos["a_star"]["chow"] for pos in trace.positions if large < pos["a_star"]["chow"])
