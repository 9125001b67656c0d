"""What Explore's handlers show: the run on screen (``Run``), the outputs a generating handler updates (``View``) or
moving alpha updates (``Recoloured``), and each output's content for a run (answer, stats, plots, status)."""
from dataclasses import dataclass
from typing import Any, NamedTuple

import gradio as gr

from cascade_core import RULES, Trace
from cascade_core.costs import expected_speedup, priced_speedup, with_target_alone
from cascade_core.explain import deferred

from .controls import alpha_slider_range
from .viz import figures
from .viz.decision_map import decision_map_figure
from .viz.stats import speedup_markdown, stats_markdown
from .viz.tokens import tokens_html


@dataclass
class Run:
    """The trace on screen, the spec of the pair that made it and, once it has finished, the pair's measured call
    prices for its block length (prices.py), which the projected speed-up is priced with; ``pair``: what the pair
    is, its draft said (its description)."""

    trace: Trace
    pair_spec: str
    prices: Any = None
    pair: str = ""


class View(NamedTuple):
    """What a generating handler updates, in the order of the page's outputs (a tuple, as Gradio wants)."""

    run: Any
    answer: Any
    stats: Any
    speedup: Any
    step_plot: Any
    alpha_plot: Any
    decision_plot: Any
    status: Any


class Recoloured(NamedTuple):
    """What moving alpha or the rule updates, without a model call."""

    answer: Any
    step_plot: Any
    alpha_plot: Any
    decision_plot: Any
    status: Any


def status_only(message):
    """A view update that leaves the answer, stats and plots as they are and shows a status line."""
    return View(*(gr.skip(),) * 7, status=message)


def resume_caption(trace):
    """What the measured numbers cover after a re-run that reused a prefix."""
    if not trace.resumed_from:
        return ""
    n = len(trace.positions)
    if trace.resumed_from >= n:
        return "Nothing needed regenerating: every token stands under this rule and alpha."
    return (f"Re-run from token #{trace.resumed_from}: calls, rates and time cover the "
            f"{n - trace.resumed_from} regenerated tokens; the first {trace.resumed_from} were reused.")


def stats_view(run, cost_ratio):
    """(stats Markdown, projected speed-up Markdown) for the run on screen: the cost model at the slider's c, and
    priced with the calls measured on this machine once the run has finished."""
    if run is None:
        return stats_markdown(None), speedup_markdown(None, None, cost_ratio, None)
    stats, gamma = run.trace.stats, run.trace.gamma
    acceptance, share = stats["acceptance_rate"], stats["target_alone_share"] or 0.0
    at_c = None if acceptance is None else with_target_alone(expected_speedup(acceptance, gamma, cost_ratio, gamma + 1),
                                                             share)
    prices = run.prices
    overhead = stats["overhead_seconds_per_block"] or 0.0
    priced = (None if acceptance is None or prices is None else
              with_target_alone(priced_speedup(acceptance, gamma, prices.target, prices.draft, prices.verify, overhead),
                                share))
    target_alone = None if prices is None else 1 / prices.target  # one target call per token, measured here
    return (stats_markdown(stats, resume_caption(run.trace), run.pair, target_alone),
            speedup_markdown(stats, run.trace.settings["gamma"], cost_ratio, at_c, prices, priced, gamma))


def view_interval(tokens):
    """Seconds between two views of a streaming answer of ``tokens`` tokens: the browser draws the whole answer
    again for each (its HTML component), which takes longer as it grows and shares the machine with the engine. A
    1024-token run on the bundled pair reached "Done" in the page at 1.73x its /run time with a view every block
    (about six a second), 1.25x with 0.25 s + 0.5 s per thousand tokens between views, 1.13-1.33x with 0.25 s + 1 s
    per thousand (1.16x once the cursor stopped blinking), and 1.13x with this: a quarter second, growing by two
    seconds per thousand tokens (a view every 1.3 s at 512 tokens, 2.3 s at 1024), which keeps the text moving."""
    return 0.25 + tokens / 500


def answer_view(run, rule, alpha, running=False):
    """(tokens HTML, first_changed, sources) for the run shown under the page's (rule, alpha)."""
    trace = run.trace
    sources, first_changed = trace.recolour(rule, alpha)
    note = "" if running else {"eos": "end of text", "max_new_tokens": "max new tokens reached"}.get(
        trace.stop_reason, "stopped")
    return tokens_html(trace.positions, sources, rule, first_changed, running, note), first_changed, sources


def figures_view(run, rule, alpha, sources, first_changed):
    positions = run.trace.positions
    return (figures.step_figure(positions, sources, rule, alpha, first_changed),
            figures.critical_alpha_figure(positions, sources, rule, alpha, alpha_slider_range(rule), first_changed),
            decision_map_figure(positions, rule, alpha))


def recolour_status(run, rule, alpha, first_changed):
    if first_changed is None:
        return f"Under {rule}, alpha = {alpha:.2f}, every token stands as it is."
    flips = len(run.trace.positions) - first_changed
    settings, pos = run.trace.settings, run.trace.positions[first_changed]
    why = ""
    if deferred(settings["rule"], pos, settings["alpha"]) == deferred(rule, pos, alpha) and RULES[rule].per_token:
        # its own decision stands: under a token rule pi reads the whole deferred set (eta), which alpha changed
        why = (f" (its own decision stands, but {rule}'s pi there reads the whole vocabulary's deferred set, which "
               "alpha changes, so its acceptance test may go the other way)")
    return (f"Under {rule}, alpha = {alpha:.2f}, token #{first_changed} may change{why}: the {flips} greyed tokens "
            "will be regenerated on release (or press Re-run); the prefix is reused.")
