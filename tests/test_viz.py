"""app.viz: token HTML (escaping, whitespace, classes) and the plotly figures' data."""
import html
import math

import pytest

from app.viz import figures
from app.viz.format import number
from app.viz.stats import speedup_markdown, stats_markdown
from app.viz.tokens import explain, legend_html, token_text_html, tokens_html, tooltip
from cascade_core import generate, load_pair


def position(text, source="accepted", **overrides):
    pos = dict(token=1, text=text, source=source, proposal=1, proposal_text=text, block=0, max_q=0.6, max_p=0.7,
               tv=0.2, q_x=0.5, p_x=0.4, accept_prob=0.8, top_q=[[1, text, 0.5], [2, "b", 0.3]],
               top_p=[[2, "b", 0.7], [1, text, 0.4]],
               a_star={"chow": 0.4, "diff": 0.1, "opt": 0.5, "v1": 0.2, "v2": 0.3, "v3": 0.43, "bild": 1.2,
                       "lossy": -0.1, "lossless": math.inf, "target": math.inf, "draft": -math.inf})
    pos.update(overrides)
    return pos


@pytest.fixture(scope="module")
def trace():
    return generate(load_pair("tiny"), "Hello", rule="v3", alpha=0.3, max_new_tokens=40, seed=1)


def test_script_tokens_are_escaped_in_text_and_tooltip():
    html = tokens_html([position("<script>alert(1)</script>")], ["accepted"], "v3")
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert 'data-tip="#0 &#x27;&lt;script&gt;' in html


def test_attribute_breaking_quotes_are_escaped():
    html = tokens_html([position('" onmouseover="x')], ["accepted"], "v3")
    assert 'onmouseover="x' not in html


def test_newlines_are_marked_and_kept():
    assert token_text_html("a\nb") == 'a<span class="nl">↵</span>\nb'
    assert token_text_html("\n\n").count("↵") == 2


def test_edge_spaces_are_visible_real_spaces():
    html = token_text_html("  hi there ")
    assert html.startswith('<span class="sp"> </span><span class="sp"> </span>hi there')
    assert html.endswith('<span class="sp"> </span>')
    assert token_text_html("   ").count('class="sp"') == 3


def test_tabs_and_empty_pieces_are_visible():
    assert "→" in token_text_html("\t")
    assert 'class="empty"' in token_text_html("")


def test_sources_become_classes_and_positions_are_clickable():
    html = tokens_html([position("a"), position("b"), position("c")], ["accepted", "deferred", "replaced"], "v3")
    for i, source in enumerate(("accepted", "deferred", "replaced")):
        assert f'class="tok {source}" data-pos="{i}"' in html


def test_tokens_from_first_changed_on_will_change():
    html = tokens_html([position("a"), position("b"), position("c")], ["accepted"] * 3, "v3", first_changed=1)
    assert 'class="tok accepted" data-pos="0"' in html
    assert 'class="tok will-change flip" data-pos="1"' in html
    assert 'class="tok will-change" data-pos="2"' in html


def test_tooltip_has_proposal_numbers_and_rule_a_star():
    tip = tooltip(3, position(" x", proposal_text=" y"), "deferred", "v3")
    assert "#3 ' x'  (deferred)" in tip
    assert "draft proposed ' y'" in tip
    for fragment in ("q(x) = 0.500", "p(x) = 0.400", "max q = 0.600", "max p = 0.700", "TV = 0.200",
                     "acceptance prob = 0.800", "a*(v3) = 0.430"):
        assert fragment in tip
    # the statistics the rules read are temperature 1's, TV and the keep test the sampling distributions' (issue 64)
    assert "p(x) = 0.400   (T = 1)" in tip and "max p = 0.700   (T = 1)   TV = 0.200   (the run's T)" in tip


def test_a_baselines_tokens_have_a_label_of_their_own():
    """Target-only tokens are not "deferred" (nothing was checked or kept) and name no draft proposal."""
    pos = position("a", q_x=None, max_q=None, a_star={"target": math.inf})
    tip = tooltip(0, pos, "target-only", "target")
    assert tip == "#0 'a'  (target-only)\nsampled from the target alone   p(x) = 0.400"
    html = tokens_html([pos], ["deferred"], "target")
    assert 'class="tok target-only"' in html and "deferred" not in html and "proposed" not in html
    assert 'class="tok draft-only"' in tokens_html([position("b")], ["accepted"], "draft")
    assert "target alone" in legend_html(["v3", "target"]) and "target alone" not in legend_html(["v3"])


def test_empty_answer_and_legend():
    assert "Run the cascade" in tokens_html([], [], "v3")
    legend = legend_html()
    for name in ("accepted", "deferred", "replaced", "will change"):
        assert name in legend


def test_number_formatting():
    assert number(None) == "–" and number(math.inf) == "∞" and number(-math.inf) == "−∞"
    assert number(0.12345) == "0.123"


def test_step_figure_has_statistics_and_threshold(trace):
    sources, _ = trace.recolour("v3", 0.3)
    fig = figures.step_figure(trace.positions, sources, "v3", 0.3)
    names = [t.name for t in fig.data]
    assert names[:3] == ["max q", "max p", "TV(p, q)"]
    assert {t.visible for t in fig.data[:3]} == {None}  # shown: a row each under the rule's panel
    rows = [fig.layout[f"yaxis{t.yaxis[1:]}"].domain for t in fig.data[:3]]
    assert rows[2][1] < rows[1][0] < rows[1][1] < rows[0][0] < rows[0][1] < fig.layout.yaxis.domain[0]
    statistic = {x: (y, t.name) for t in fig.data if t.name.startswith("p(x), ") for x, y in zip(t.x, t.y)}
    assert [statistic[i][1] for i in range(len(sources))] == [f"p(x), {s}" for s in sources]
    assert "threshold: (1 - alpha) * max p" in names
    threshold = fig.data[names.index("threshold: (1 - alpha) * max p")]
    assert threshold.y[0] == pytest.approx(0.7 * trace.positions[0]["max_p"])
    assert list(fig.data[0].customdata) == [html.escape(repr(p["text"]), quote=False) for p in trace.positions]


def test_step_figure_puts_bild_on_its_own_scale_in_the_top_panel(trace):
    """D(q, p) is no probability: the top panel's axis takes its scale (it was a right-hand axis drawn over the
    whole figure, the max q / max p / TV panels included)."""
    fig = figures.step_figure(trace.positions, trace.sources, "bild", 2.0)
    on = {t.yaxis for t in fig.data if t.name.startswith(("threshold", "D(q, p)"))}
    assert on == {"y"} and fig.layout.yaxis.title.text == "D(q, p)" and fig.layout.yaxis.range is None
    assert fig.layout.yaxis.domain == tuple(figures.STEP_PANELS["y"]) and "yaxis2" not in fig.to_dict()["layout"]
    assert {t.yaxis for t in fig.data[:3]} == {"y3", "y4", "y5"}


def test_plot_labels_show_quotes_as_typed():
    """plotly decodes no &quot;: a token "'s" showed as &quot;'s&quot; in the inspector's bars and title."""
    pos = {"proposal": 1, "token": 1, "proposal_text": "'s", "top_q": [[1, "'s", 0.6], [2, "<b>", 0.4]],
           "top_p": [[1, "'s", 0.5], [2, "<b>", 0.5]], "a_star": {}, "source": "accepted"}
    fig = figures.inspector_figure(pos, "v3", 0.5)
    labels = [label for t in fig.data for label in t.y] + [fig.layout.title.text]
    assert "&quot;" not in " ".join(labels) and "&#x27;" not in " ".join(labels)
    assert "\"'s\" " in labels and "'&lt;b&gt;' " in labels


def points(fig):
    """{position: (a* drawn, trace name, symbol)} over the chart's traces."""
    return {x: (y, t.name, t.marker.symbol) for t in fig.data for x, y in zip(t.x, t.y)}


def test_critical_alpha_figure_marks_alpha_and_first_flip(trace):
    sources, first = trace.recolour("v3", 0.9)
    assert first is not None
    fig = figures.critical_alpha_figure(trace.positions, sources, "v3", 0.9, (0, 1), first)
    drawn = points(fig)
    assert [drawn[i][0] for i in range(len(trace.positions))] == pytest.approx(
        [p["a_star"]["v3"] for p in trace.positions])
    assert [drawn[i][1] for i in range(first)] == sources[:first]
    assert {drawn[i][1] for i in range(first, len(trace.positions))} == {"will change"}
    assert fig.layout.shapes[0].y0 == 0.9  # the alpha line
    assert fig.layout.shapes[1].x0 == first - 0.5  # the first flip


def test_critical_alpha_figure_clips_infinities(trace):
    fig = figures.critical_alpha_figure(trace.positions, trace.sources, "lossless", 0.0, (-2, 2))
    assert {(y, symbol) for y, _, symbol in points(fig).values()} == {(2, "triangle-up")}


def test_inspector_bars_and_threshold():
    pos = position("a", token=2, proposal=1, source="replaced")
    fig = figures.inspector_figure(pos, "v3", 0.3)
    q_bars, p_bars = fig.data
    assert list(q_bars.x) == [0.3, 0.5] and list(p_bars.x) == [0.4, 0.7]  # largest on top
    assert fig.layout.shapes[0].x0 == pytest.approx(0.7 * 0.7)  # (1 - alpha) * max p, on the p panel
    assert fig.layout.shapes[0].xref == "x2"


def test_inspector_for_baseline_without_draft():
    fig = figures.inspector_figure(position("a", top_q=None, a_star={"target": math.inf}), "target", 0.0)
    assert len(fig.data) == 1
    assert fig.layout.annotations[0].text == "draft q: not run"


def test_stats_and_speedup_markdown(trace):
    text = stats_markdown(trace.stats, "caption")
    counts = " · ".join(f"{trace.stats[s]} {s}" for s in ("accepted", "deferred", "replaced"))
    assert f"| tokens | {trace.stats['tokens']} |" in text and counts in text
    assert "*caption*" in text
    # the headline: this run's tokens/s beside tokens per target call and the target alone's, from its measured token
    headline = stats_markdown(trace.stats, target_alone=1 / 0.08).splitlines()[0]
    assert headline == (f"**{trace.stats['tokens_per_second']:.1f} tokens/s** · "
                        f"{trace.stats['tokens_per_target_call']:.2f} tokens per target call · the target alone here: "
                        "at most 12.5 tokens/s (its measured one-token call, the engine's work aside)")
    assert "the target alone here: at most – tokens/s" in text.splitlines()[0]
    assert "not priced" in speedup_markdown(trace.stats, 4)
    from cascade_core.speed.prices import Prices

    prices = Prices(target=0.080, draft=0.008, verify=0.100, block=5, overhead=0.012)
    measured = speedup_markdown(trace.stats, 4, prices, 1.25)
    assert "on this machine: 1.25×" in measured and "c = 0.10" in measured and "1.25 target tokens" in measured
    assert "a target token 80 ms, a draft call 8.0 ms, the verification 100 ms" in measured
    assert "12 ms of the engine's own work" in measured
    tiny = speedup_markdown(trace.stats, 4, Prices(target=0.0004, draft=0.0003, verify=0.00112, block=5,
                                                   overhead=0.00063), 0.3)
    assert "0.63 ms of the engine's own work" in tiny
    assert "a target token 0.40 ms, a draft call 0.30 ms, the verification 1.1 ms" in tiny  # not "0 ms"
    assert "set by you" not in measured  # a hypothetical c only where the user set one
    hypothetical = speedup_markdown(trace.stats, 4, prices, 1.25, cost_ratio=0.3, at_c=2.0)
    assert "At c = 0.30, set by you" in hypothetical and "2.00×" in hypothetical
    assert "gamma auto (mostly 2)" in speedup_markdown(trace.stats, "auto", prices, 1.25, 2)
    assert "–" in speedup_markdown(None, 4)


def test_a_running_answer_only_grows_so_the_page_streams_what_was_appended():
    """Gradio sends a streamed text as the part appended to the last one when it begins with it: each block's view
    of a running answer begins with the one before (the answer is not sent again every block)."""
    positions = [position(text) for text in ("a", "b", "c", "d")]
    views = [tokens_html(positions[:k], ["accepted"] * k, "v3", running=True) for k in range(5)]
    assert all(later.startswith(earlier) for earlier, later in zip(views, views[1:]))
    done = tokens_html(positions, ["accepted"] * 4, "v3", note="end of text")
    assert "running" not in done and done.count("<div") == done.count("</div>")


@pytest.mark.parametrize("rule, alpha, a_star, words", [
    ("fuzzy", 0.2, 0.35, "fuzzy deferred: JS(q, p) = 0.350 > alpha = 0.200"),
    ("fuzzy", 0.5, 0.35, "fuzzy did not defer: JS(q, p) = 0.350 <= alpha = 0.500"),
    ("judge", 2.0, 1.5, "judge did not defer: KL(q || p) = 1.500 <= alpha = 2.000"),
    ("judge", 2.0, math.inf, "judge deferred: its test is KL(q || p) > alpha or max p > 0.9, and max p = 0.950"),
])
def test_a_divergence_rule_explains_its_test_with_its_numbers(rule, alpha, a_star, words):
    pos = position("a", source="deferred" if alpha < a_star else "accepted", max_p=0.95)
    pos["a_star"].update(fuzzy=0.35, judge=1.5)
    pos["a_star"][rule] = a_star
    assert explain(rule, pos, alpha).startswith(words)


def test_the_step_figure_draws_an_infinite_statistic_above_the_rest():
    """The KL judge's a* is inf where max p > 0.9: those positions are drawn (at the top, marked), not dropped."""
    positions = [position("a", max_p=0.5), position("b", max_p=0.95, source="deferred")]
    positions[0]["a_star"]["judge"], positions[1]["a_star"]["judge"] = 1.5, math.inf
    fig = figures.step_figure(positions, ["accepted", "deferred"], "judge", 2.0)
    marked = [t for t in fig.data if t.name == "KL(q || p) = inf"]
    assert len(marked) == 1 and list(marked[0].x) == [1] and marked[0].y[0] > 2.0


def test_explores_tokens_are_reached_by_keyboard_and_special_tokens_are_a_mark():
    """One token in the page's Tab order (the selected one, else the first), the others -1 (the arrow keys reach
    them); a special token (<|im_end|>) keeps its card and its place but shows no text."""
    positions = [position("a"), position("<|im_end|>", token=7)]
    answer = tokens_html(positions, ["accepted"] * 2, "v3", focusable=True, special={7})
    assert 'data-pos="0" tabindex="0"' in answer and 'data-pos="1" tabindex="-1"' in answer
    assert 'class="tok accepted special" data-pos="1"' in answer
    assert "&lt;|im_end|&gt;</span>" not in answer and "#1 &#x27;&lt;|im_end|&gt;&#x27;" in answer  # in its card
    selected = tokens_html(positions, ["accepted"] * 2, "v3", focusable=True, selected=1)
    assert 'class="tok accepted selected" data-pos="1" tabindex="0"' in selected
    assert "tabindex" not in tokens_html(positions, ["accepted"] * 2, "v3")  # Compare's and the lanes' rows


def test_tokens_whose_decision_flips_are_outlined_among_the_greyed():
    html_ = tokens_html([position("a"), position("b"), position("c")], ["accepted"] * 3, "v3", first_changed=1,
                        decides={2})
    assert 'class="tok will-change flip" data-pos="1"' in html_
    assert 'class="tok will-change decided-otherwise" data-pos="2"' in html_
    assert "decided otherwise" in legend_html() and "decided otherwise" not in legend_html(regenerates=False)


def test_the_step_figures_hover_reads_one_position(trace):
    """The hover is one x at a time ("x unified"), each trace answering with its point nearest that x: the
    provenance markers (a trace each, with gaps) say nothing, and one trace over every position says its statistic
    and provenance, so that no line of a hover is a neighbour's."""
    sources, _ = trace.recolour("v3", 0.3)
    fig = figures.step_figure(trace.positions, sources, "v3", 0.3)
    hovered = [t for t in fig.data if t.hoverinfo != "skip"]
    assert all(len(t.x) == len(trace.positions) for t in hovered)
    said = next(t for t in hovered if t.name == "p(x)")
    assert [row[2] for row in said.customdata] == [s for s in sources]
    assert [row[1] for row in said.customdata][:3] == [number(pos["p_x"]) for pos in trace.positions[:3]]
    assert all(t.hoverinfo == "skip" for t in fig.data if t.name.startswith("p(x), "))


def test_compare_rows_open_in_explore_but_a_lessons_rows_are_text():
    """Compare's row labels are buttons its page script opens in Explore; a lesson's rows have no such link, so their
    labels are not buttons that do nothing (app/learn.py's rows_html)."""
    from app.viz.compare import compare_html
    rows = [("v3 alpha 0.5", [position("a")], ["accepted"])]
    assert '<button class="row-label" data-row="0"' in compare_html(rows)
    shown = compare_html(rows, opens=False)
    assert "<button" not in shown and '<span class="row-label">v3 alpha 0.5</span>' in shown
