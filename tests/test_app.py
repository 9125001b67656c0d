"""The app on the tiny pair: the /run API through gradio_client, and the callbacks behind the page."""
import html
import importlib.util
from pathlib import Path

import gradio as gr

from app.block_steps import step_block
import pytest
from gradio_client import Client

from app.explore import ExploreHandlers, Run, status_only
from app.explore_views import View
from app.explore_views import view_of
from app.controls import alpha_slider_range, rule_changed
from app.settings import AppSettings
from app.pairs import PairCache, check_public
from app.viz.format import markdown_text, token_repr
from cascade_core import Trace, generate, load_pair
from cascade_core.formats.loading import parse_pair
from same_results import assert_same

TIMING = {"prefill_seconds", "wall_seconds", "tokens_per_second", "cost_ratio", "overhead_seconds_per_block",
          "engine_seconds"}
SETTINGS = dict(prompt="Hello there", pair="tiny", draft="model", chat=True, rule="v3", alpha=0.5, gamma=4,
                temperature=1.0, max_new_tokens=48, seed=0, cost_ratio=0.25)


def fresh(pair, **overrides):
    """The engine's own run for the page's SETTINGS with overrides."""
    s = {**SETTINGS, **overrides}
    return generate(pair, s["prompt"], rule=s["rule"], alpha=s["alpha"], gamma=s["gamma"],
                    temperature=s["temperature"], seed=s["seed"], max_new_tokens=s["max_new_tokens"])


@pytest.fixture(scope="module")
def tiny():
    return load_pair("tiny")


@pytest.fixture(scope="module")
def client(tiny_app_url):
    return Client(tiny_app_url, verbose=False)


@pytest.fixture
def handlers():
    pairs = PairCache()
    pairs.get("tiny")
    return ExploreHandlers(pairs, "tiny")


def untimed(stats):
    return {k: v for k, v in stats.items() if k not in TIMING}


@pytest.mark.parametrize("rule, alpha", [("v3", 0.3), ("chow", 0.5), ("opt", -0.5), ("lossless", 0.0),
                                         ("lossy", 0.5), ("target", 0.0)])
def test_run_api_agrees_with_generate(client, tiny, rule, alpha):
    args = dict(prompt="The cat", rule=rule, alpha=alpha, gamma=3, temperature=0.8, max_new_tokens=40, seed=7)
    trace = Trace.from_json(client.predict(**args, api_name="/run"))
    expected = generate(tiny, args.pop("prompt"), **args)
    assert trace.tokens == expected.tokens
    assert trace.sources == expected.sources
    assert_same(untimed(trace.stats), untimed(expected.stats), "stats")  # the app's engine thread: other threads
    assert trace.settings["rule"] == rule


def test_run_api_with_a_prompt_alone_runs_the_pages_defaults(client, tiny):
    """The page's rule, alpha, gamma "auto", temperature, tokens and draft: a client and a visitor get one run."""
    trace = Trace.from_json(client.predict(prompt="The cat", api_name="/run"))
    s = trace.settings
    assert (s["rule"], s["alpha"], s["gamma"], s["temperature"], s["max_new_tokens"], s["seed"]) == (
        "v3", 0.5, "auto", 0.7, 64, 0)
    headed = Trace.from_json(client.predict(prompt="The cat", draft="head", gamma=3, max_new_tokens=12,
                                            api_name="/run"))
    head_pair = load_pair("tiny", draft="head")
    assert headed.tokens == generate(head_pair, "The cat", rule="v3", alpha=0.5, gamma=3, temperature=0.7,
                                     max_new_tokens=12).tokens


def test_explore_runs_the_draft_chosen_beside_the_pair_and_says_which(handlers):
    view = run_to_end(handlers, draft="head", gamma=3, max_new_tokens=12)
    assert view.run.pair_spec == "head -> tiny" and "EAGLE\\-3 head" in view.stats  # Markdown-escaped
    head_pair = load_pair("tiny", draft="head")
    assert view.run.trace.tokens == generate(head_pair, SETTINGS["prompt"], rule="v3", alpha=0.5, gamma=3,
                                             max_new_tokens=12).tokens
    with pytest.warns(UserWarning, match="draft 'eagle' is not one of the tiny pair's drafts"):
        assert "draft 'eagle'" in run_to_end(handlers, draft="eagle").status


@pytest.mark.parametrize("args, message", [
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt="hi", alpha=1.5), "outside rule 'v3'"),
    (dict(prompt="hi", rule="nope"), "unknown rule"),
    (dict(prompt="hi", gamma=99), "gamma must be"),
    (dict(prompt="x" * 4100, max_new_tokens=8), "exceeds the models' context"),
])
def test_bad_input_gives_a_clear_message_and_the_app_keeps_serving(client, args, message):
    with pytest.raises(Exception, match=message):
        client.predict(**args, api_name="/run")
    assert Trace.from_json(client.predict(prompt="still here", max_new_tokens=4, api_name="/run")).tokens


def run_to_end(handlers, **overrides):
    s = {**SETTINGS, **overrides}
    *_, last = handlers.run(*s.values())
    return last


def rerun_to_end(handlers, run, **overrides):
    s = {**SETTINGS, **overrides}
    *_, last = handlers.rerun(run, *s.values())
    return last


def test_run_streams_block_by_block_and_ends_with_figures(handlers, tiny, monkeypatch):
    monkeypatch.setattr("app.explore.view_interval", lambda tokens: 0.0)
    views = list(handlers.run(*SETTINGS.values()))
    runs = [v.run for v in views if isinstance(v.run, Run)]
    assert len(runs) > 3  # one view per block
    last = views[-1]
    assert isinstance(last, View)
    run, answer, stats, speedup, status = last.run, last.answer, last.stats, last.speedup, last.status
    step_plot, alpha_plot, decision_plot = last.step_plot, last.alpha_plot, last.decision_plot
    expected = fresh(tiny)
    assert run.trace.tokens == expected.tokens
    assert answer.count('class="tok ') == len(expected.tokens)
    assert f"| target calls | {expected.stats['target_calls']} |" in stats
    assert "Speed-up over the target alone on this machine" in speedup and status.startswith("Done")
    assert step_plot.data and alpha_plot.data and decision_plot.data
    steps = run.trace.speculative_decoding
    bars = last.acceptance_plot.data[0]  # the run's own verify steps, vLLM's per-position rates
    assert list(bars.y) == steps["acceptance_rate_per_position"] and list(bars.x) == list(range(1, len(bars.y) + 1))
    kept, checked = steps["num_accepted_draft_tokens"], run.trace.stats["tokens"] - run.trace.sources.count("target")
    assert f"kept {kept} of {checked} checked ({run.trace.stats['acceptance_rate']:.0%}), of " \
           f"{steps['num_draft_tokens']} drafted" in last.acceptance_plot.layout.title.text  # the stats' rate, vLLM's
    blank = next(v for v in views if isinstance(v.run, Run))
    assert blank.acceptance_plot is None and blank.step_plot is None  # a new run's plots go blank until it ends


def test_views_of_a_long_run_come_at_most_once_per_interval(handlers, monkeypatch):
    """The browser draws the whole answer again for each view: a fast run shows its first block at once, then at
    most one view per interval, and always its end."""
    monkeypatch.setattr("app.explore.view_interval", lambda tokens: 3600.0)
    views = [v for v in handlers.run(*SETTINGS.values()) if isinstance(v.run, Run)]
    assert len(views) == 2 and views[0].status.startswith("Generating") and views[1].status.startswith("Done")


def test_recolour_greys_from_the_first_flip(handlers):
    run = run_to_end(handlers).run
    sources, first = run.trace.recolour("v3", 0.95)
    assert first is not None
    answer, step_plot, alpha_plot, decision_plot, status = ExploreHandlers.recolour(run, "v3", 0.95)
    assert answer.count("class=\"tok will-change") == len(run.trace.positions) - first
    assert f'data-pos="{first}"' in answer.split("flip")[1][:40]
    assert f"token #{first} may change" in status
    unchanged, _, _, _, status = ExploreHandlers.recolour(run, "v3", 0.5)
    assert "will-change" not in unchanged and "every token stands" in status


def test_recolour_says_why_a_token_whose_decision_stands_may_change(handlers):
    """v3 0.5 -> a smaller alpha: a position deferred under both is greyed all the same (pi reads eta), and the
    status says so; where the position's own decision flips it does not."""
    from cascade_core.method.explain import deferred

    run = run_to_end(handlers).run
    seen = set()
    for alpha in [a / 100 for a in range(0, 101, 2)]:
        _, first = run.trace.recolour("v3", alpha)
        if first is None:
            continue
        stands = deferred("v3", run.trace.positions[first], 0.5) == deferred("v3", run.trace.positions[first], alpha)
        status = ExploreHandlers.recolour(run, "v3", alpha).status
        assert ("its own decision stands" in status) == stands, (alpha, status)
        seen.add(stands)
    assert True in seen
    assert "its own decision stands" not in ExploreHandlers.recolour(run, "chow", 0.9).status  # a position rule: pi = p


def test_rerun_from_the_flip_equals_a_fresh_run(handlers, tiny):
    run = run_to_end(handlers).run
    _, first = run.trace.recolour("v3", 0.9)
    rerun = rerun_to_end(handlers, run, alpha=0.9)
    new_run, stats = rerun.run, rerun.stats
    expected = fresh(tiny, alpha=0.9)
    assert new_run.trace.resumed_from == first
    assert new_run.trace.tokens == expected.tokens and new_run.trace.sources == expected.sources
    assert f"Re-run from token #{first}" in stats


def test_rule_change_reruns_only_the_changed_part(handlers, tiny):
    run = run_to_end(handlers).run
    new_run = rerun_to_end(handlers, run, rule="chow", alpha=0.3).run
    assert new_run.trace.tokens == fresh(tiny, rule="chow", alpha=0.3).tokens


def test_gamma_alone_keeps_the_text_and_changes_the_cost(handlers):
    run = run_to_end(handlers).run
    rerun = rerun_to_end(handlers, run, gamma=1)
    new_run = rerun.run
    assert new_run.trace.text == run.trace.text
    assert new_run.trace.resumed_from == 0 and new_run.trace.settings["gamma"] == 1
    assert new_run.trace.stats["target_calls"] != run.trace.stats["target_calls"]


def test_other_changes_rerun_from_scratch(handlers, tiny):
    run = run_to_end(handlers).run
    new_run = rerun_to_end(handlers, run, seed=4).run
    assert new_run.trace.resumed_from == 0
    assert new_run.trace.tokens == fresh(tiny, seed=4).tokens


def test_rerun_with_nothing_changed_says_so(handlers):
    run = run_to_end(handlers).run
    assert "Nothing changed" in rerun_to_end(handlers, run).status
    assert "press Run" in rerun_to_end(handlers, None).status


def test_inspect_explains_with_numbers(handlers):
    run = run_to_end(handlers).run
    text, fig, index = ExploreHandlers.inspect(run, "v3", 0.5, gr.EventData(None, {"pos": 2}))
    assert "<strong>Token #2</strong>" in text and "p(x) = " in text and "(1 - alpha) * max p" in text
    assert fig["visible"] and len(fig["value"].data) == 2
    assert ExploreHandlers.inspect(run, "v3", 0.5, gr.EventData(None, {"pos": 999})) == (gr.skip(),) * 3


def test_a_token_opens_its_block_step_by_step(handlers):
    """The inspected token's block, replayed: its emitted tokens are the page's, and each press shows one more stage."""
    run = run_to_end(handlers).run
    index = len(run.trace.positions) // 2
    *_, (opened, step, view, buttons) = handlers.open_block(run, index)
    replay, note = opened
    start = replay["start"]
    assert replay["emitted"] == run.trace.tokens[start: start + len(replay["emitted"])] and note == ""
    assert start <= index < start + len(replay["emitted"]) and step == 1 and buttons["visible"]
    assert "stage 1 of 5" in view and "The draft proposes" in view and "keep test" not in view
    for expected in range(2, 6):
        step, view = step_block(opened, step, 1)
        assert step == expected and f"stage {expected} of 5" in view
    assert "What both caches keep" in view and step_block(opened, 5, 1)[0] == 5
    assert step_block(opened, 1, -1)[0] == 1
    *_, (opened, _, view, buttons) = handlers.open_block(None, None)
    assert opened is None and "Click a token of a run first" in view and not buttons["visible"]


def test_stop_keeps_the_partial_trace(handlers):
    views = handlers.run(*SETTINGS.values())
    run = next(v for v in views if isinstance(v.run, Run)).run
    views.close()
    view = handlers.stopped(run, "v3", 0.3, 0.25)
    assert view.run is run and "Stopped after" in view.status


def test_stop_ends_the_pages_run_at_its_next_block_and_says_so(handlers):
    """Stop: the run's own last view is the stopped one (nothing streams after it), with the partial trace."""
    page = gr.Request(session_hash="page-1")
    assert handlers.stop(page).startswith("Nothing is running")
    views = handlers.run(*{**SETTINGS, "gamma": 2}.values(), request=page)
    seen = [next(v for v in views if isinstance(v.run, Run))]
    assert handlers.stop(gr.Request(session_hash="another page")).startswith("Nothing is running")
    assert handlers.stop(page) == gr.skip()  # the run says it stopped
    seen += list(views)
    assert len(seen) == 2 and seen[-1].status.startswith("Stopped after")
    assert len(seen[-1].run.trace.positions) == len(seen[0].run.trace.positions) < SETTINGS["max_new_tokens"]
    assert handlers.stop(page).startswith("Nothing is running")  # the run is over


def test_a_newer_run_of_the_page_takes_its_view(handlers):
    """A rule change's re-run and a Run pressed just after: the first ends without another word at its next
    block; the second streams to Done."""
    page = gr.Request(session_hash="page-2")
    first = handlers.run(*SETTINGS.values(), request=page)
    next(v for v in first if isinstance(v.run, Run))
    second = handlers.run(*{**SETTINGS, "rule": "chow"}.values(), request=page)
    views = list(second)
    assert list(first) == []  # it had shown its first tokens: it ends without another word
    assert views[-1].status.startswith("Done") and views[-1].run.trace.settings["rule"] == "chow"
    assert views[-1].run.trace.tokens == fresh(handlers.pairs.get("tiny"), rule="chow").tokens



def test_the_newest_run_to_stream_keeps_the_view():
    """Runs take the view in the order they were started, whichever streams its first tokens first."""
    from app.page_runs import PageRuns

    runs, page = PageRuns(), gr.Request(session_hash="p")
    older, newer = runs.join(page), runs.join(page)
    runs.take_view(newer)
    runs.take_view(older)  # its first tokens come later: it gives up
    assert older.superseded and not newer.superseded
    newest = runs.join(page)
    runs.take_view(newest)
    assert newer.superseded and not newest.superseded
    assert runs.stop(page) and newest.stop_asked and not runs.stop(gr.Request(session_hash="q"))
    for ticket in (older, newer, newest):
        runs.finish(ticket)
    assert not runs.stop(page)
    # a regeneration (a rule change, a released slider) never replaces a run the reader pressed for
    pressed, changed = runs.join(page), runs.join(page, pressed=False)
    runs.take_view(changed)
    runs.take_view(pressed)
    assert changed.superseded and not pressed.superseded
    later = runs.join(page, pressed=False)
    runs.take_view(later)
    assert later.superseded and not pressed.superseded
    # a run started after one streams first still takes the view when its own tokens come
    first, second = runs.join(page), runs.join(page)
    runs.take_view(first)
    assert not second.superseded and pressed.superseded
    runs.take_view(second)
    assert first.superseded and not second.superseded


def test_a_run_that_only_says_something_leaves_the_streaming_run_alone(handlers):
    """A re-run with nothing to do ("Nothing changed since the last run") does not take the view from a run."""
    page = gr.Request(session_hash="page-3")
    done = run_to_end(handlers).run
    first = handlers.run(*SETTINGS.values(), request=page)
    next(v for v in first if isinstance(v.run, Run))
    said = list(handlers.rerun(done, *SETTINGS.values(), request=page))
    assert [v.status for v in said] == ["Nothing changed since the last run, which has finished: nothing to continue."]
    assert list(first)[-1].status.startswith("Done")
    assert list(handlers.regenerate(done, *SETTINGS.values(), request=page)) == [status_only(gr.skip())]  # silent


@pytest.mark.parametrize("overrides, message", [
    (dict(prompt=""), "prompt is empty"),
    (dict(pair="just-one-id"), "not understood"),
    (dict(prompt="x" * 5000), "exceeds the models' context"),
    (dict(rule="v3", alpha=1.5), "outside rule 'v3'"),
])
def test_bad_input_in_the_page_is_a_warning_that_leaves_the_view(handlers, overrides, message):
    with pytest.warns(UserWarning, match=message):
        view = run_to_end(handlers, **overrides)
    assert view[:6] == (gr.skip(),) * 6 and message in view.status


def test_failed_model_load_is_shown_and_retried_later():
    def loader(name=None, target=None, draft=None, progress=None):
        progress("loading target")
        raise ValueError(f"{draft!r} and {target!r} use different tokenizers")

    handlers = ExploreHandlers(PairCache(loader=loader), "tiny")
    views = handlers.run(*{**SETTINGS, "pair": "a -> b"}.values())
    assert markdown_text("Loading model pair a -> b") in next(views).status  # shown as text: a pair is typed
    with pytest.warns(UserWarning, match="use different tokenizers"):
        assert "use different tokenizers" in list(views)[-1].status
    assert not handlers.pairs.loaded("a -> b")


def test_slider_follows_the_rule():
    assert alpha_slider_range("opt") == (-2.0, 2.0)
    assert alpha_slider_range("lossy") == (0.0, 0.99)
    assert alpha_slider_range("bild") == (0.0, 10.0)
    update, text = rule_changed("lossless", 0.3)
    assert update["interactive"] is False and "alpha is ignored" in text
    assert (update["minimum"], update["maximum"]) == (0.0, 1.0)  # not the rule before's range
    assert rule_changed("target", -1.5)[0]["value"] == 0.0
    update, text = rule_changed("opt", 0.3)
    assert (update["minimum"], update["maximum"], update["value"]) == (-2.0, 2.0, 0.3)
    assert rule_changed("lossy", 1.5)[0]["value"] == 0.99


def test_pairs_and_public_mode():
    assert parse_pair("tiny") == {"name": "tiny"}
    assert parse_pair(" Qwen/Qwen3-0.6B -> Qwen/Qwen3-1.7B ") == {"draft": "Qwen/Qwen3-0.6B",
                                                                  "target": "Qwen/Qwen3-1.7B"}
    check_public("Qwen/Qwen3-0.6B -> Qwen/Qwen3-1.7B")
    check_public("AngelSlim/Qwen3-1.7B_eagle3 -> Qwen/Qwen3-1.7B")
    for offline in ("bundled", "model -> bundled", "head -> bundled", "head -> tiny"):  # either draft of theirs
        check_public(offline)
    with pytest.raises(ValueError, match="only loads"):
        check_public("evil/model -> Qwen/Qwen3-1.7B")
    with pytest.raises(ValueError, match="only loads"):
        PairCache(public=True).get("evil/model -> other/model")


def load_script():
    """app.py itself (the package app/ shadows it as a module name)."""
    spec = importlib.util.spec_from_file_location("app_script", Path(__file__).parent.parent / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_command_line():
    parse_args = load_script().parse_args
    args = parse_args(["--pair", "tiny", "--port", "7999"])
    assert (args.pair, args.port, args.host, args.share) == ("tiny", 7999, "127.0.0.1", False)
    assert parse_args(["--target", "t", "--draft", "d"]).target == "t"
    with pytest.raises(SystemExit):
        parse_args(["--target", "t"])


def test_handlers_survive_zerogpu_pickling(handlers, tiny):
    """On a ZeroGPU Space, ``spaces.GPU`` runs each call in a forked worker and pickles its arguments (self
    included) on the way in and every yielded view on the way out: both must pickle, and cheaply."""
    import pickle

    payload = pickle.dumps((handlers, *SETTINGS.values()))
    assert len(payload) < 10_000  # the models stay behind: the worker has its own forked copy
    assert pickle.loads(payload)[0] is handlers
    views = [pickle.loads(pickle.dumps(view)) for view in handlers.run(*SETTINGS.values())]
    run = views[-1].run
    assert run.trace.tokens == fresh(tiny).tokens
    views = [pickle.loads(pickle.dumps(view)) for view in handlers.rerun(*pickle.loads(pickle.dumps(
        (run, *{**SETTINGS, "alpha": 0.95}.values()))))]
    assert views[-1].run.trace.tokens == fresh(tiny, alpha=0.95).tokens
    settings = AppSettings.from_inputs("Hello there", "tiny", True, "v3", 0.5, 4, 1.0, 48, 0)
    assert len(pickle.dumps((handlers, settings))) < 10_000  # the /run API's GPU call


def test_explores_gamma_zero_is_auto_and_the_projection_is_priced_with_measured_calls(handlers, tiny):
    """The page's default gamma (0: auto) runs the engine's gamma "auto" (the same text as any gamma), measures the
    pair's call prices once before the run, and the finished run's projection is priced with them."""
    view = run_to_end(handlers, gamma=0)
    run = view.run
    assert run.trace.settings["gamma"] == "auto" and run.trace.counters["gammas"]
    assert run.trace.tokens == fresh(tiny, gamma=2).tokens
    gammas = run.trace.counters["gammas"]
    assert run.prices is not None and run.prices.block == max(gammas, key=gammas.count) + 1
    assert "on this machine" in view.speedup and "gamma auto (mostly" in view.speedup
    assert f"c = {run.prices.c:.2f}" in view.speedup
    assert 'gamma must be a whole number from 1 to 16, or 0 or "auto"' in run_to_end(handlers, gamma=-1).status


def test_a_new_run_never_leaves_the_inspector_on_the_run_before(handlers, tiny, monkeypatch):
    """The inspector and the step-through follow the run shown: cleared at a new run's first view (its token #5 is
    not explained over the new text), on the same position of the new run at its last view, that token selected."""
    monkeypatch.setattr("app.explore.view_interval", lambda tokens: 0.0)
    views = [v for v in handlers.run(*{**SETTINGS, "prompt": "Another prompt"}.values(), inspected=5)
             if isinstance(v.run, Run)]
    first, last = views[0], views[-1]
    assert "A new run: token #5 is inspected again" in first.inspector_text and first.inspected == gr.skip()
    assert first.inspector_plot["visible"] is False and first.block_opened is None and first.note == ""
    assert not first.block_buttons["visible"] and "the run before's" in html.unescape(first.block_view)
    expected = fresh(tiny, prompt="Another prompt")
    assert last.inspected == 5 and "<strong>Token #5</strong>" in last.inspector_text
    assert html.escape(token_repr(expected.positions[5]["text"])) in last.inspector_text
    assert "Re-inspected" in last.inspector_text and last.inspector_plot["visible"]
    assert 'data-pos="5" tabindex="0"' in last.answer and "selected" in last.answer.split('data-pos="5"')[0][-60:]
    middle = views[1:-1]
    assert middle and all(v.inspector_text == gr.skip() and v.note == gr.skip() for v in middle)
    shorter = list(handlers.run(*{**SETTINGS, "max_new_tokens": 3}.values(), inspected=5))[-1]
    assert "This run has no token #5" in shorter.inspector_text


def test_the_run_shown_is_marked_while_a_control_does_not_match_it(handlers):
    """explore_panels.settings_note: empty while the controls are the run's own, else each setting it was not made
    with, both values said; the page runs it after every change of a control and after every run."""
    run = run_to_end(handlers).run
    assert ExploreHandlers.settings_note(run, *SETTINGS.values()) == ""
    assert ExploreHandlers.settings_note(None, *SETTINGS.values()) == ""
    for change, words in ((dict(draft="head"), "draft model (now head)"),
                          (dict(alpha=0.8), "alpha 0.50 (now 0.80)"), (dict(prompt="Other"), "another prompt"),
                          (dict(seed=3), "seed 0 (now 3)"), (dict(chat=False), "chat template on (now off)"),
                          (dict(gamma=0), "gamma 4 (now auto)"), (dict(pair="model -> tiny"), None)):
        note = ExploreHandlers.settings_note(run, *{**SETTINGS, **change}.values())
        if words is None:  # the same pair, spelled with its draft
            assert note == ""
        else:
            assert "Not these settings" in note and words in note, (change, note)
    assert "alpha" not in ExploreHandlers.settings_note(run, *{**SETTINGS, "rule": "lossless", "alpha": 0.0}.values())


def test_a_regeneration_says_what_it_applies_and_a_stopped_run_waits_for_continue(handlers):
    run = run_to_end(handlers).run
    *_, last = handlers.regenerate(run, *{**SETTINGS, "draft": "head", "seed": 2}.values())
    assert last.status.startswith("Done") and "for the new draft, seed" in last.status
    assert last.run.pair_spec == "head -> tiny"
    views = handlers.run(*SETTINGS.values())
    partial = next(v for v in views if isinstance(v.run, Run)).run
    views.close()
    assert list(handlers.regenerate(partial, *SETTINGS.values())) == [status_only(gr.skip())]  # a box blurred
    continued = list(handlers.rerun(partial, *SETTINGS.values()))[-1]
    assert continued.status.startswith("Done") and continued.run.trace.tokens == run.trace.tokens


def test_dragging_alpha_outlines_where_the_rules_own_test_flips(handlers):
    """Under v3 the grey starts at the first token deferred at either alpha (eta, Eq. 11); the tokens outlined
    are those whose a* alpha crossed, and under a position rule the grey starts at the first of them."""
    from app.explore_views import decision_flips

    run = run_to_end(handlers).run
    a_stars = [pos["a_star"]["v3"] for pos in run.trace.positions]
    alpha = 0.8
    _, first = run.trace.recolour("v3", alpha)
    flips = decision_flips(run.trace, "v3", alpha, first)
    assert flips == {i for i, a in enumerate(a_stars) if i >= first and (0.5 < a) != (alpha < a)}
    answer, *_, status = ExploreHandlers.recolour(run, "v3", alpha)
    assert answer.count("decided-otherwise") == len(flips) and f"at the {len(flips)} outlined ones" in status
    chow = run_to_end(handlers, rule="chow", alpha=0.5).run
    _, first = chow.trace.recolour("chow", 0.8)
    assert first is not None and first == min(decision_flips(chow.trace, "chow", 0.8, first))


def test_the_bundled_pairs_answer_says_its_target_is_small(handlers):
    from app.explore_views import SMALL_TARGET, answer_view

    run = run_to_end(handlers).run
    assert SMALL_TARGET not in answer_view(run, "v3", 0.5)[0]
    assert SMALL_TARGET in answer_view(Run(run.trace, "head -> bundled"), "v3", 0.5)[0]
    assert SMALL_TARGET == "a 135M target: its answers are often wrong; the method is what to watch"


def test_a_regeneration_stopped_before_its_first_token_leaves_the_view_to_the_run_shown(handlers):
    """Stop asks every run of the page to end: one that has streamed shows its partial trace, a run pressed for says
    it stopped, and a regeneration that has shown nothing yet ends without a word (its base run is not put back
    over the run the page shows)."""
    run = run_to_end(handlers).run

    def loading():
        yield status_only("Loading…")
        yield view_of(run=run, status="Generating…")

    for pressed, expected in ((False, ["Loading…"]), (True, ["Loading…", "Stopped after"])):
        page = gr.Request(session_hash=f"page-stop-{pressed}")
        supervised = handlers._supervised(loading(), page, "v3", 0.5, 0.25, run, pressed=pressed)
        said = [next(supervised).status]
        handlers.stop(page)
        said += [view.status for view in supervised]
        assert [s[:len(e)] for s, e in zip(said, expected)] == expected and len(said) == len(expected), said
