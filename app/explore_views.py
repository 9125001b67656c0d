"""What Explore's handlers show: the run on screen (``Run``), the outputs a generating handler updates (``View``) or
moving alpha updates (``Recoloured``), and each output's content for a run (answer, stats, plots, status)."""
from dataclasses import dataclass
from typing import Any, NamedTuple

import gradio as gr

from cascade_core import RULES, Trace
from cascade_core.formats.loading import BUNDLED, parse_pair
from cascade_core.method.costs import speedup_at_c, speedup_over_target
from cascade_core.method.explain import deferred

from .controls import alpha_slider_range
from .viz import figures
from .viz.decision_map import decision_map_figure
from .viz.stats import speedup_markdown, stats_markdown
from .viz.tokens import tokens_html


@dataclass
class Run:
    """The trace on screen, the spec of the pair that made it and, once it has finished, the pair's measured call
    prices for its block length (prices.py), which the projected speed-up is priced with; ``pair``: what the pair
    is, its draft said (its description), and the precision it ran in with where its weights came from
    (``Pair.ran_on``)."""

    trace: Trace
    pair_spec: str
    prices: Any = None
    pair: str = ""
    special: frozenset = frozenset()  # the pair's special token ids: the answer shows them as a mark, not as text


class View(NamedTuple):
    """What a generating handler updates, in the order of the page's outputs (a tuple, as Gradio wants): the run
    and what shows it, the status, the mark saying the controls no longer match the run (``note``), and the
    panels that follow the run on screen (the inspector and its block's step-through: app/explore_panels.py).
    Build one with ``view_of``: what it does not name is left as it is."""

    run: Any
    answer: Any
    stats: Any
    speedup: Any
    step_plot: Any
    alpha_plot: Any
    decision_plot: Any
    acceptance_plot: Any
    status: Any
    note: Any
    inspector_text: Any
    inspector_plot: Any
    inspected: Any
    block_opened: Any
    block_step: Any
    block_view: Any
    block_buttons: Any


def view_of(**given):
    """A View of the outputs ``given``, every other one skipped (a fresh gr.skip() each: Gradio edits update
    dicts in place)."""
    return View(**{name: given[name] if name in given else gr.skip() for name in View._fields})


class Recoloured(NamedTuple):
    """What moving alpha or the rule updates, without a model call."""

    answer: Any
    step_plot: Any
    alpha_plot: Any
    decision_plot: Any
    status: Any


def status_only(message):
    """A view update that leaves the answer, stats and plots as they are and shows a status line."""
    return view_of(status=message)


def resume_caption(trace):
    """What the measured numbers cover after a re-run that reused a prefix."""
    if not trace.resumed_from:
        return ""
    n = len(trace.positions)
    if trace.resumed_from >= n:
        return "Nothing needed regenerating: every token stands under this rule and alpha."
    return (f"Re-run from token #{trace.resumed_from}: calls, rates and time cover the "
            f"{n - trace.resumed_from} regenerated tokens; the first {trace.resumed_from} were reused.")


def slider_c(c):
    """c on the c slider's scale (from 0.01, in steps of 0.01). No upper clamp: a draft's measured c can exceed 1
    (the tiny pair's draft costs about what its target does: 1.14 and 1.57 measured on a 2-core CPU), and the
    slider reaches it (``slider_maximum``), so that the slider stands at the c the speed-up sentence says."""
    return max(round(c, 2), 0.01)


def slider_maximum(c):
    """The c slider's right end with the slider at ``c``: 1 (a draft that costs what its target does), or a measured
    c above it, which the slider must reach to stand there."""
    return max(1.0, slider_c(c))


def stats_view(run, cost_ratio, unset=()):
    """(stats Markdown, speed-up Markdown) for the run on screen: its speed-up over the target alone priced with the
    pair's measured calls (costs.speedup_over_target, the one every tab shows), once the run has finished, and
    Leviathan et al.'s estimate at the slider's c only where the user set c: neither this draft's measured c nor
    one the slider was put at rather than set (``unset``: where it started, another draft's measured c it
    followed)."""
    if run is None:
        return stats_markdown(None), speedup_markdown(None, None)
    trace, prices = run.trace, run.prices
    rule, gamma = trace.settings["rule"], trace.gamma
    priced = speedup_over_target(trace.sources, rule, gamma, prices)
    own_c = None if prices is None else slider_c(prices.c)
    set_by_user = slider_c(cost_ratio) not in {own_c, *map(slider_c, unset)}  # on the slider's scale, all of them
    at_c = speedup_at_c(trace.sources, rule, gamma, cost_ratio) if set_by_user else None
    target_alone = None if prices is None else 1 / prices.target  # one target call per token, measured here
    return (stats_markdown(trace.stats, resume_caption(trace), run.pair, target_alone),
            speedup_markdown(trace.stats, trace.settings["gamma"], prices, priced, gamma, cost_ratio, at_c))


def view_interval(tokens):
    """Seconds between two views of a streaming answer of ``tokens`` tokens: the browser draws the whole answer
    again for each (its HTML component), which takes longer as it grows and shares the machine with the engine. A
    1024-token run on the bundled pair reached "Done" in the page at 1.73x its /run time with a view every block
    (about six a second), 1.25x with 0.25 s + 0.5 s per thousand tokens between views, 1.13-1.33x with 0.25 s + 1 s
    per thousand (1.16x once the cursor stopped blinking), and 1.13x with this: a quarter second, growing by two
    seconds per thousand tokens (a view every 1.3 s at 512 tokens, 2.3 s at 1024), which keeps the text moving."""
    return 0.25 + tokens / 500


SMALL_TARGET = "a 135M target: its answers are often wrong; the method is what to watch"


def answer_view(run, rule, alpha, running=False, selected=None):
    """(tokens HTML, first_changed, sources, decides) for the run shown under the page's (rule, alpha), the inspected
    token ``selected``; under the text, why it ended (and, on the bundled pair, that its target is small);
    ``decides``: the positions whose own test flips (decision_flips), outlined."""
    trace = run.trace
    sources, first_changed = trace.recolour(rule, alpha)
    note = "" if running else "; ".join([{"eos": "end of text", "max_new_tokens": "max new tokens reached"}.get(
        trace.stop_reason, "stopped")] + [SMALL_TARGET] * (parse_pair(run.pair_spec).get("name") == BUNDLED))
    decides = decision_flips(trace, rule, alpha, first_changed)
    html = tokens_html(trace.positions, sources, rule, first_changed, running, note, run.special, selected,
                       focusable=True, decides=decides)
    return html, first_changed, sources, decides


def decision_flips(trace, rule, alpha, first_changed):
    """The positions from ``first_changed`` on where the rule's own test goes the other way under (rule, alpha)
    than under the run's setting (alpha crossed a*): what a move of alpha changes at a token, as opposed to what
    may change because the text before it, or a token rule's eta (Eq. 11), does."""
    if first_changed is None:
        return frozenset()
    old_rule, old_alpha = trace.settings["rule"], trace.settings["alpha"]
    return frozenset(i for i, pos in enumerate(trace.positions[first_changed:], first_changed)
                     if pos["source"] != "target" and (pos.get("a_star") or {}).get(rule) is not None
                     and deferred(old_rule, pos, old_alpha) != deferred(rule, pos, alpha))


def acceptance_view(run):
    """The run's acceptance by draft position: its own verify steps, which moving alpha does not change."""
    return figures.acceptance_figure(run.trace.speculative_decoding)


def figures_view(run, rule, alpha, sources, first_changed):
    positions = run.trace.positions
    return (figures.step_figure(positions, sources, rule, alpha, first_changed),
            figures.critical_alpha_figure(positions, sources, rule, alpha, alpha_slider_range(rule), first_changed),
            decision_map_figure(positions, rule, alpha))


def recolour_status(run, rule, alpha, first_changed, decides):
    """What moving alpha or the rule would change: where the text may change from, why where a token rule's
    decision stands there, how many tokens would be regenerated and at how many the rule's own test flips."""
    if first_changed is None:
        return f"Under {rule}, alpha = {alpha:.2f}, every token stands as it is."
    n = len(run.trace.positions)
    settings, pos = run.trace.settings, run.trace.positions[first_changed]
    reused = f" (the first {first_changed} are reused)" if first_changed else ""
    said = (f"Under {rule}, alpha = {alpha:.2f}, token #{first_changed} may change: the {n - first_changed} greyed "
            f"tokens are regenerated when you let go of the control{reused}; at the {len(decides)} outlined ones the "
            "rule's own test goes the other way.")
    if deferred(settings["rule"], pos, settings["alpha"]) == deferred(rule, pos, alpha) and RULES[rule].per_token:
        # its own decision stands: under a token rule a deferred token is kept with probability min(1, eta p / q)
        said += (f" At token #{first_changed} its own decision stands, but {rule} keeps a deferred token with "
                 "probability min(1, eta p(x) / q(x)), and eta, the draft's mass on the tokens it defers over the "
                 "whole vocabulary (Eq. 11), moves with alpha: under a token rule the grey starts at the first token "
                 "deferred at either setting (moving alpha under chow, diff or opt, at the first outlined one).")
    return said
