"""Links that restore a view (app.links) and the lessons (app.learn), without a browser."""
from urllib.parse import parse_qsl, urlsplit

import gradio as gr
import pytest

from app.compare import compare_linked
from app.explore_layout import explore_linked
from app.learn import LOOK_FOR, NOT_COMMITTED, LearnHandlers, learn_linked
from app.lessons import LESSONS
from app.links import Linked, link_to, read_link, restore_outputs, restored, view_class
from app.pairs import PairCache
from app.sandbox import sandbox_linked
from app.strategies import strategies_linked
from app.tradeoff import TradeoffHandlers, tradeoff_linked
from cascade_core import RULES, generate
from cascade_core.messages import shown


@pytest.fixture(scope="module")
def linked():
    """Explore's Linked with controls (drawn with the page), and the other tabs' own, each with its view state."""
    with gr.Blocks():
        fields = dict(prompt=gr.Textbox("Who is Buzz Aldrin?"), draft=gr.Dropdown(["model", "head"], value="model"),
                      rule=gr.Dropdown(list(RULES), value="v3"), alpha=gr.Slider(0, 1, value=0.5),
                      gamma=gr.Slider(1, 16, value=4), temperature=gr.Slider(0, 2, value=0.7), seed=gr.Number(0),
                      max_new_tokens=gr.Slider(1, 1024, value=64))
        fields["reproducible"] = gr.Checkbox(False)
        with gr.Accordion("Advanced settings", open=False) as advanced:
            pass
        explore = explore_linked(fields, gr.Markdown(), advanced)
        others = [sandbox_linked(), learn_linked(), tradeoff_linked("model"), strategies_linked("model"),
                  compare_linked("model")]
        for other in others:
            other.view = gr.State(None)
    return [explore, *others]


def by_tab(linked):
    return {one.tab: one for one in linked}


def test_a_link_sets_the_tabs_controls_as_they_take_them(linked):
    params = dict(tab="explore", prompt="Hi there", draft="head", rule="opt", alpha="1.5", gamma="3", temperature="0",
                  seed="12345678901234567", max_new_tokens="12", run="1")
    tab, values, run, errors = read_link(params, by_tab(linked))
    assert tab.tab == "explore" and run and errors == []
    assert values == dict(prompt="Hi there", draft="head", rule="opt", alpha=1.5, gamma=3, temperature=0.0,
                          seed=12345678901234567, max_new_tokens=12)


@pytest.mark.parametrize("params, message, kept", [
    (dict(alpha="1.5"), "alpha=1.5 is outside rule 'v3''s range [0, 1]", {}),  # checked against the tab's rule
    (dict(rule="chow", alpha="-0.1"), "alpha=-0.1 is outside rule 'chow''s range [0, 1]", dict(rule="chow")),
    (dict(rule="opt", alpha="5"), "alpha=5 is outside the slider's range [-2, 2] for rule 'opt'", dict(rule="opt")),
    (dict(rule="nope"), "rule must be one of chow, diff, opt, v1, v2, v3, lossless, lossy, ensemble, sglang, "
                        "relaxed, typical, bild, fuzzy, judge, target, draft on this tab, got 'nope'", {}),
    (dict(gamma="17"), "gamma must be a whole number from 0 to 16, got 17", {}),
    (dict(gamma="two"), "gamma must be a number written with the digits 0-9, got 'two'", {}),
    (dict(max_new_tokens="١٢"), "max_new_tokens must be a number written with the digits 0-9, got '١٢'", {}),
    (dict(gamma="５"), "gamma must be a number written with the digits 0-9, got '５'", {}),
    (dict(max_new_tokens="1_000"), "max_new_tokens must be a number written with the digits 0-9, got '1_000'", {}),
    (dict(temperature="9" * 5000), "temperature must be a number written with the digits 0-9, got " +
     shown("9" * 5000), {}),
    (dict(temperature="3"), "temperature must be 0 (greedy) or a number up to 2, got '3'", {}),
    (dict(max_new_tokens="5000"), "max_new_tokens must be a whole number from 1 to 1024, got 5000", {}),
    (dict(prompt="   "), "the prompt is empty; type something for the models to continue", {}),
    (dict(tab="nowhere"), "tab must be one of explore, compare, tradeoff, sandbox, strategies, learn, got 'nowhere'",
     {}),
    (dict(run="yes"), "run must be 1 (run the view) or 0, got 'yes'", {}),
    (dict(draft="eagle"), "draft must be model (the draft model) or head (the EAGLE-3 head), got 'eagle'", {}),
    (dict(alhpa="0.3"), "the link's 'alhpa' is not a setting; a link may set tab, run, prompt, draft, rule, alpha, "
                        "gamma, temperature, seed, max_new_tokens, step, reproducible, tokens, q, p, rules, alphas, "
                        "threshold, rows", {}),
    (dict(reproducible="yes"), "reproducible must be 1 (decode alone, bitwise the solo run) or 0, got 'yes'", {}),
])
def test_a_bad_value_is_one_sentence_and_the_rest_of_the_link_applies(linked, params, message, kept):
    _, values, _, errors = read_link(dict(params, seed="9"), by_tab(linked))
    assert errors == [message] and values == dict(kept, seed=9)


def test_compare_links_may_ask_for_each_draft_and_only_there(linked):
    assert read_link(dict(tab="compare", draft="each"), by_tab(linked))[1:] == (dict(draft="each"), False, [])
    _, values, _, errors = read_link(dict(tab="compare", draft="both", seed="3"), by_tab(linked))
    assert values == dict(seed=3) and errors == ["draft must be model (the draft model), head (the EAGLE-3 head) or "
                                                 "each (every row with each), got 'both'"]
    assert read_link(dict(tab="explore", draft="each"), by_tab(linked))[3] == [
        "draft must be model (the draft model) or head (the EAGLE-3 head), got 'each'"]


def test_a_long_list_of_bad_names_makes_a_short_message(linked):
    """1,500 unknown names made a 199,955-character status: the message names five and counts the rest."""
    values = restored({**{f"x{i}": "1" for i in range(1500)}, "tab": "explore"}, linked)
    assert len(values[1]) < 2000 and "… and 1495 more problems" in values[1]


@pytest.mark.parametrize("params, values", [
    (dict(tab="tradeoff", rules="chow,v3,chow", alphas="0.1,0.5"), dict(rules=["chow", "v3"], alphas="0.1,0.5")),
    (dict(tab="strategies", threshold="0.35"), dict(threshold=0.35)),
    (dict(tab="sandbox", q="1,0,0,0,0,0,0,0.5", tokens='["a", "b,c", "d", "e", "f", "g", "h", "i"]'),
     dict(q=[1, 0, 0, 0, 0, 0, 0, 0.5], tokens=["a", "b,c", "d", "e", "f", "g", "h", "i"])),
])
def test_a_link_sets_a_tabs_own_controls(linked, params, values):
    _, read, _, errors = read_link(params, by_tab(linked))
    assert errors == [] and read == values


@pytest.mark.parametrize("params, message", [
    (dict(tab="tradeoff", rules="chow,nope"), "rules must be names separated by commas from chow, diff, opt"),
    (dict(tab="tradeoff", alphas="auto:x"), "auto:N needs a whole number"),
    (dict(tab="strategies", threshold="1.5"), "threshold must be a number from 0 to 1, got '1.5'"),
    (dict(tab="sandbox", q="1,2"), "q must list 8 values separated by commas, got 2"),
    (dict(tab="sandbox", p="1,0,0,0,0,0,0,7"), "p must be a number from 0 to 1, got '7'"),
    (dict(tab="sandbox", tokens="[1]"), "tokens must be a JSON list of 8 texts"),
    (dict(tab="sandbox", tokens="[" * 5000), "tokens must be a JSON list of 8 texts"),
])
def test_a_bad_value_of_a_tabs_own_field_is_one_sentence(linked, params, message):
    _, values, _, errors = read_link(params, by_tab(linked))
    assert len(errors) == 1 and message in errors[0] and values == {}


def test_a_lesson_step_out_of_range_is_named(linked):
    _, values, _, errors = read_link(dict(tab="learn", step="10"), by_tab(linked))
    assert errors == ["step must be a whole number from 1 to 9, got 10"] and values == {}


def test_restored_outputs_match_their_components_and_the_slider_follows_the_rule(linked):
    outputs = restore_outputs(linked, gr.Tabs(), gr.Markdown(), gr.Textbox())
    values = restored(dict(tab="explore", rule="opt", alpha="-1.5", run="1"), linked)
    assert len(values) == len(outputs)
    alpha = values[2 + list(linked[0].fields).index("alpha")]
    assert (alpha["minimum"], alpha["maximum"], alpha["value"]) == (-2.0, 2.0, -1.5)
    assert values[-1] == "#run" and values[0].selected == "explore"
    plain = restored({}, linked)
    assert plain[1] == "" and all(isinstance(v, type(gr.skip())) for v in plain[:1] + plain[2:-1])
    # a link setting one of the advanced settings opens them, so that what it set is in view
    folded = outputs.index(linked[0].folded)
    assert restored(dict(tab="explore", seed="7"), linked)[folded]["open"] is True
    assert values[folded] == gr.skip()


def test_a_tab_drawn_later_gets_the_links_view_and_its_run_waits_for_that_drawing(linked):
    """Its view state holds the link's values; every restore is a new view (so a tab asked twice is drawn again),
    and run=1 presses the Run button drawn in that view, not one still on screen from before."""
    outputs = restore_outputs(linked, gr.Tabs(), gr.Markdown(), gr.Textbox())
    sandbox = restored(dict(tab="sandbox", rule="v1"), linked)
    at = outputs.index(linked[1].view)
    assert sandbox[at]["values"] == dict(rule="v1") and sandbox[-1] == ""  # the sandbox has no Run to press
    assert all(isinstance(sandbox[outputs.index(other.view)], type(gr.skip())) for other in linked[2:])
    first = restored(dict(tab="strategies", alpha="0.3", run="1"), linked)
    again = restored(dict(tab="strategies", alpha="0.3", run="1"), linked)
    at = outputs.index(linked[4].view)
    assert first[at]["values"] == again[at]["values"] == dict(alpha=0.3) and first[at] != again[at]
    assert again[-1] == f".{view_class(again[at])} #strategies-run"


@pytest.mark.parametrize("reproducible", [True, False])
def test_a_copied_link_opens_the_same_view(linked, reproducible):
    values = ["Hello & goodbye?", "head", "chow", 0.25, 3, 0.5, 7, 20, reproducible]
    url = link_to("http://host/", linked[0], True, *values)
    params = dict(parse_qsl(urlsplit(url).query))
    assert params.get("reproducible") == ("1" if reproducible else None)  # an off flag is left out: the default
    tab, read, run, errors = read_link(params, by_tab(linked))
    assert tab.tab == "explore" and run and not errors
    assert read == {name: value for name, value in zip(linked[0].fields, values) if value is not False}
    assert dict(parse_qsl(urlsplit(link_to("http://host/", linked[2], True, 4)).query)) == dict(tab="learn", step="4",
                                                                                             run="1")
    assert restored(dict(tab="learn", step="4", run="1"), linked)[-1].endswith("#lesson-4-run")


@pytest.fixture(scope="module")
def lessons():
    pairs = PairCache()
    return LearnHandlers(pairs, "tiny", TradeoffHandlers(pairs, "tiny"))


def last(steps):
    value = None
    for value in steps:
        pass
    return value


def test_every_lesson_runs_and_says_what_to_look_for(lessons):
    for index, lesson in enumerate(LESSONS):
        choice = lesson.answers[index % len(lesson.answers)].text
        rows, figure, look = last(lessons.run(index, choice))
        reveal, looked = look.split(LOOK_FOR)
        assert reveal.startswith(f"**Your answer:** {choice} **It ") and looked, (index, look)
        drawn = not (isinstance(figure, dict) and figure.get("__type__") == "update")
        assert drawn == (LESSONS[index].kind in ("sandbox", "frontier") or LESSONS[index].decision_map)
        if LESSONS[index].decision_map:  # opt's points and line, beside diff's where the lesson runs both
            rows = LESSONS[index].rows
            assert [t.name for t in figure.data if t.mode == "lines"] == \
                [f"opt, alpha {rows[-1][1]:.2f}: max p − max q = alpha · TV"] + \
                ["diff, alpha 0.10: max p − max q = alpha"] * (len(rows) > 1)


def test_a_lesson_run_without_a_committed_answer_says_how_to_get_the_reveal(lessons):
    """A link's run=1 presses Run before any answer is chosen: the run goes ahead and says so."""
    _, _, look = last(lessons.run(5))
    assert look.startswith(NOT_COMMITTED + "\n\n" + LOOK_FOR)


def test_the_first_lessons_numbers_are_its_runs(lessons):
    _, _, look = last(lessons.run(1, LESSONS[1].answers[0].text))
    pair = PairCache().get("tiny")
    runs = [generate(pair, "Who is Buzz Aldrin?", rule=rule, temperature=0, seed=0, max_new_tokens=48)
            for rule in ("target", "lossless")]
    assert runs[0].tokens == runs[1].tokens and "wrote the same text" in look
    s = runs[1].stats
    assert f"kept {s['deferred']} of the draft's tokens and replaced {s['replaced']}" in look
    assert f"Target calls: {runs[0].stats['target_calls']} alone, {s['target_calls']} with the draft" in look


def test_the_speculative_decoding_lesson_steps_through_the_clicked_tokens_block(lessons):
    """Lesson 2's step-through opens the block of its lossless row that wrote the clicked token; without a click, its
    first block of several tokens that ends in a rejection. At its temperature 0 every q(x), p(x) and keep
    probability is 1 or 0, as the view says, and the residual lists only the tokens it gives mass (one), not the
    top-k's ties at 0 (where the tiny tokenizer's special tokens sat); a special token is a mark, not its text."""
    from app.block_steps import opened
    from app.learn import clicked_token
    from app.viz.block import GREEDY, block_html

    pair = PairCache().get("tiny")
    run = generate(pair, "Who is Buzz Aldrin?", rule="lossless", temperature=0, seed=0, max_new_tokens=48)
    (replay, _), step, view, _ = last(lessons.open_block(1))
    assert step == 1 and len(replay["emitted"]) > 1 and replay["sources"][-1] == "replaced"
    assert replay["start"] == next(i for i, pos in enumerate(run.positions) if pos["block"] == replay["block"])
    for clicked in (0, len(run.positions) - 1, replay["start"] + 1):
        (chosen, _), *_ = last(lessons.open_block(1, clicked))
        assert chosen["start"] <= clicked < chosen["start"] + len(chosen["emitted"]), clicked
        assert chosen["block"] == run.positions[clicked]["block"]
    numbers = [pos[key] for pos in replay["positions"] for key in ("q", "p", "keep_probability")]
    assert set(numbers) <= {0.0, 1.0} and GREEDY.strip() in block_html(replay, 3)  # the view's sentence holds
    assert "residual-row" in block_html(replay, 4) and block_html(replay, 4).count('class="residual-row') == 1
    correction = replay["correction"]["token"]
    marked = opened(replay, run.tokens, {correction})[2]
    assert 'block-token special' in marked and "∎" in marked
    assert clicked_token(gr.EventData(None, {"pos": 5})) == 5
    assert clicked_token(gr.EventData(None, {"pos": "x"})) is None  # what a crafted call can send


def test_the_when_it_pays_lesson_times_both_drafts_in_its_own_runs(lessons):
    rows, _, look = last(lessons.run(7, LESSONS[7].answers[3].text))
    head_pair = PairCache().get("head -> tiny")
    run = generate(head_pair, "Who is Buzz Aldrin?", rule="v3", alpha=0.5, gamma=4, temperature=0.7, seed=0,
                   max_new_tokens=48)
    outside = sum(token not in set(head_pair.draft.token_ids.tolist()) for token in run.tokens)
    assert "| draft model |" in look and "| EAGLE-3 head |" in look
    assert f"{outside} of the {len(run.tokens)} tokens written came from outside it" in look and outside > 0
    assert "v3 alpha 0.5, model draft" in rows and "v3 alpha 0.5, head draft" in rows


def test_each_lessons_link_opens_its_tab_in_its_state(linked):
    for lesson in LESSONS:
        tab, values, run, errors = read_link(lesson.link(), by_tab(linked))
        opens = dict(lesson.opens)
        assert tab.tab == opens["tab"] and errors == [] and run == (tab.tab != "sandbox")
        assert {k: v for k, v in values.items() if k in opens} == {k: v for k, v in opens.items() if k != "tab"}
        if "max_new_tokens" in tab.defaults:
            assert values["max_new_tokens"] == lesson.max_new_tokens and values["temperature"] == lesson.temperature


def test_explore_gamma_takes_auto_as_its_sliders_zero():
    explore = Linked("explore", dict(gamma=0), "run", auto_gamma=True)
    for text, expected in (("auto", 0), ("0", 0), ("3", 3)):
        assert read_link(dict(gamma=text), {"explore": explore})[1] == dict(gamma=expected)
    assert read_link(dict(gamma="17"), {"explore": explore})[3] == ["gamma must be a whole number from 0 to 16, got 17"]
