"""The Explore tab: controls on the left, the streamed answer with its legend and stats on the right, the inspector
and the plots below, and a "How to read this" panel; its handlers (run, recolour, re-run, inspect, stop, and the
/run API) call cascade_core for every number and app.viz for every picture."""
import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import gradio as gr

from cascade_core import MAX_GAMMA, RULES, Trace, stream
from cascade_core.costs import expected_speedup, priced_speedup
from cascade_core.batch import measure_auto_prices
from cascade_core.explain import deferred, explain
from cascade_core.prices import measured_prices, missing_prices
from cascade_core.settings import AUTO_GAMMAS

from .controls import (APP_MAX_NEW_TOKENS, Settings, alpha_slider, alpha_slider_range, cost_presets, rule_changed,
                       rule_info)
from .gpu import gpu
from .links import Linked
from .options import ASSETS, GENERATING, INSTANT, example_prompts, how_to_read
from .pairs import CHOICES, DRAFT_CHOICES, drafts_with_a_head, pair_default_draft
from .streaming import event_index, progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz import figures
from .viz.format import markdown_text
from .viz.stats import speedup_markdown, stats_markdown
from .viz.tokens import inspector_html, legend_html, tokens_html
from .worker import ENGINE

DEFAULT_RULE, DEFAULT_ALPHA, DEFAULT_TEMPERATURE = "v3", 0.5, 0.7
DEFAULT_GAMMA = 0  # auto: each block's length priced fastest from this machine's measured calls (docs/benchmarks.md)
DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_COST_RATIO = 0.25  # a typical GPU draft/target ratio; each run also reports the one it measured
# A click on a token sends its position to the server (gr.HTML's trigger); hovering a token or a plotted step
# highlights the other (the listeners sit on the component, so they survive every re-render of the tokens).
ANSWER_JS = """
element.addEventListener('click', (event) => {
  const token = event.target.closest('[data-pos]');
  if (!token) return;
  element.querySelectorAll('.tok.selected').forEach((t) => t.classList.remove('selected'));
  token.classList.add('selected');
  trigger('click', {pos: Number(token.dataset.pos)});
});
const plots = () => [...document.querySelectorAll('#step-plot .js-plotly-plot, #alpha-plot .js-plotly-plot')];
const mark = (pos) => {
  element.querySelectorAll('.tok.linked').forEach((t) => t.classList.remove('linked'));
  const token = pos === null ? null : element.querySelector(`.tok[data-pos="${pos}"]`);
  if (token) token.classList.add('linked');
};
element.addEventListener('mouseover', (event) => {
  const token = event.target.closest('[data-pos]');
  if (!token || !window.Plotly) return;
  const pos = Number(token.dataset.pos);
  for (const plot of plots()) {  // calcdata: plotly's decoded points (the figures' x arrive base64-encoded)
    const points = [], subplots = new Set();  // the per-step figure has two panels: hover on both
    (plot.calcdata || []).forEach((trace, curve) => trace.forEach((point, i) => {
      const data = plot._fullData[curve];
      if (point.x === pos && data.visible === true) {
        points.push({curveNumber: curve, pointNumber: i});
        subplots.add(data.xaxis + data.yaxis);
      }
    }));
    if (points.length) window.Plotly.Fx.hover(plot, points, [...subplots]);
  }
});
element.addEventListener('mouseleave', () => plots().forEach((plot) => window.Plotly && window.Plotly.Fx.unhover(plot)));
new MutationObserver(() => plots().forEach((plot) => {
  if (plot.dataset.linked) return;
  plot.dataset.linked = '1';
  plot.on('plotly_hover', (event) => mark(Math.round(event.points[0].x)));
  plot.on('plotly_unhover', () => mark(null));
})).observe(document.body, {subtree: true, childList: true});
"""


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
    status: Any


class Recoloured(NamedTuple):
    """What moving alpha or the rule updates, without a model call."""

    answer: Any
    step_plot: Any
    alpha_plot: Any
    status: Any


def status_only(message):
    """A view update that leaves the answer, stats and plots as they are and shows a status line."""
    return View(*(gr.skip(),) * 6, status=message)


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
    acceptance = stats["acceptance_rate"]
    at_c = None if acceptance is None else expected_speedup(acceptance, gamma, cost_ratio, gamma + 1)
    prices = run.prices
    overhead = stats["overhead_seconds_per_block"] or 0.0
    priced = (None if acceptance is None or prices is None else
              priced_speedup(acceptance, gamma, prices.target, prices.draft, prices.verify, overhead))
    return (stats_markdown(stats, resume_caption(run.trace), run.pair),
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
            figures.critical_alpha_figure(positions, sources, rule, alpha, alpha_slider_range(rule), first_changed))


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


class Ticket:
    """One run of a page: whether Stop was pressed for it, or a newer run of the page took its view."""

    def __init__(self, page, pressed):
        self.page, self.pressed = page, pressed  # pressed: started by the reader (Run), not by a control's change
        self.stop_asked = self.superseded = self.streaming = False


class PageRuns:
    """The runs each page (a session) has going in Explore; one at a time streams into its view."""

    def __init__(self):
        self._runs, self._lock = {}, threading.Lock()  # page -> its tickets

    def join(self, request, pressed=True):
        ticket = Ticket(getattr(request, "session_hash", None), pressed)
        with self._lock:
            if ticket.page is not None:
                self._runs.setdefault(ticket.page, []).append(ticket)
        return ticket

    def take_view(self, ticket):
        """The ticket's run streams its first tokens: the page's other runs give up the view, unless one streams
        that outranks it (pressed for where this one is not, or as pressed and started after it: then this one gives
        up). A run that only says something ("Nothing changed since the last run") takes nothing from the one
        streaming."""
        with self._lock:
            runs = self._runs.get(ticket.page, [ticket])
            later = runs[runs.index(ticket) + 1:]
            outranks = [other for other in runs if other is not ticket and (
                other.pressed > ticket.pressed or other.pressed == ticket.pressed and other in later)]
            if any(other.streaming for other in outranks):
                ticket.superseded = True
                return
            ticket.streaming = True
            for other in runs:
                other.superseded = other.superseded or (other is not ticket and other not in outranks)

    def finish(self, ticket):
        with self._lock:
            runs = self._runs.get(ticket.page, [])
            if ticket in runs:
                runs.remove(ticket)
            if not runs:
                self._runs.pop(ticket.page, None)

    def stop(self, request):
        """Ask the page's runs to stop; whether one was going."""
        with self._lock:
            runs = self._runs.get(getattr(request, "session_hash", None), [])
            for ticket in runs:
                ticket.stop_asked = True
            return bool(runs)


LIVE_HANDLERS = {}


def live_handlers(key):
    return LIVE_HANDLERS[key]


class ExploreHandlers:
    """Explore's callbacks, bound to its pair cache; generating handlers yield Views."""

    def __init__(self, pairs, default_pair_spec, unread=lambda session_hash: 0):
        self.pairs = pairs
        self.default_pair_spec = default_pair_spec
        self.default_draft = pair_default_draft(default_pair_spec)
        self.unread = unread  # messages the app holds for a session that no client has read yet
        self.runs = PageRuns()
        LIVE_HANDLERS[id(self)] = self

    def __reduce__(self):
        # ZeroGPU's @spaces.GPU runs a call in a forked worker and pickles its arguments, self included: a
        # ExploreHandlers travels as its key, and the worker finds its forked copy, loaded models and all.
        return live_handlers, (id(self),)

    # -- generation --------------------------------------------------------------------------------

    @staticmethod
    def _view(run, rule, alpha, cost_ratio, running, with_figures=True, status=None):
        answer, first_changed, sources = answer_view(run, rule, alpha, running)
        stats, speedup = stats_view(run, cost_ratio)
        plots = figures_view(run, rule, alpha, sources, first_changed) if with_figures else (gr.skip(), gr.skip())
        n = len(run.trace.positions)
        status = status or (f"Generating… {n} tokens" if running else f"Done: {n} tokens ({run.trace.stop_reason}).")
        return View(run, answer, stats, speedup, *plots, status)

    def _load(self, spec):
        """Yields status updates while the pair loads (once) and its call prices are measured (once: gamma "auto"
        and the projected speed-up read them); returns the pair."""
        loading = self.pairs.load_with_progress(spec)
        while True:
            try:
                message = next(loading)
            except StopIteration as done:
                pair = done.value
                break
            yield status_only(markdown_text(message))
        if missing_prices(pair, AUTO_GAMMAS):
            yield status_only("Measuring this pair's calls on this machine (once; the cost model prices blocks with "
                              "them)…")
            ENGINE.call(measure_auto_prices, pair)
        return pair

    def _stream(self, trace_iter, s, cost_ratio, pair):
        """Tokens as blocks come, at most one view per ``view_interval`` (None in its place for the blocks between,
        so that Stop is still heard after every block); the plots are cleared when a run starts and drawn when it
        ends. Redrawing them while tokens stream cost the page a third of its speed on a 2-core machine (plotly
        redraws in the browser compete with generation; docs/app-benchmarks.md). A finished run is priced with the
        pair's measured calls (measured on the engine thread the first time, about a second), unless it is a
        baseline or the pair is compiled (prices.py prices no compiled pair)."""
        shown = None
        for i, trace in enumerate(ENGINE.iterate(trace_iter, s.max_new_tokens)):
            if not trace.finished and shown is not None and (time.perf_counter() - shown <
                                                             view_interval(len(trace.positions))):
                yield None
                continue
            shown = time.perf_counter()
            priced = trace.finished and trace.stats["acceptance_rate"] is not None  # baselines project nothing
            prices = ENGINE.call(measured_prices, pair, trace.gamma) if priced else None
            view = self._view(Run(trace, s.pair_spec, prices, pair.description or pair.name), s.rule, s.alpha, cost_ratio, not trace.finished,
                              with_figures=trace.finished)
            yield view._replace(step_plot=None, alpha_plot=None) if i == 0 and not trace.finished else view

    def run(self, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
            request: gr.Request = None):
        """Run from scratch, streaming block by block (the page's one run: see ``_supervised``)."""
        views = self._run(prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio)
        yield from self._supervised(views, request, rule, alpha, cost_ratio)

    def rerun(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
              request: gr.Request = None):
        """Re-run pressed: regenerate what the new settings change (see ``_rerun``), as the page's one run."""
        views = self._rerun(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens,
                            seed, cost_ratio)
        yield from self._supervised(views, request, rule, alpha, cost_ratio, run)

    def regenerate(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                   cost_ratio, request: gr.Request = None):
        """A rule change or a released slider: ``rerun``, but never in the place of a run the reader started."""
        views = self._rerun(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens,
                            seed, cost_ratio, pressed=False)
        yield from self._supervised(views, request, rule, alpha, cost_ratio, run, pressed=False)

    def _supervised(self, views, request, rule, alpha, cost_ratio, run=None, pressed=True):
        """A page streams one run into its view. Its views are checked after every block, here in the server's
        process (on ZeroGPU the run itself is in a forked GPU process): a newer run of the same page takes the view
        once it streams, and the one it replaces ends without a word, but a regeneration (``pressed`` False: a rule
        change, a released slider) never replaces a run the reader pressed for (Run, Re-run, a row opened here);
        Stop ends the run with the partial trace and says so. Closing ``views`` stops the engine's work between two
        blocks."""
        ticket, spoke = self.runs.join(request, pressed), False
        try:
            for view in views:
                if ticket.superseded:
                    break
                if ticket.stop_asked:
                    views.close()
                    yield self.stopped(run, rule, alpha, cost_ratio)
                    return
                if view is None:  # a block between two views (_stream)
                    continue
                if isinstance(view.run, Run):
                    if not ticket.streaming:
                        self.runs.take_view(ticket)
                        if ticket.superseded:
                            break
                    run = view.run
                spoke = True
                yield view
            if not spoke:  # a generator that yields nothing blanks every output in the page: say "no change"
                yield status_only(gr.skip())
        finally:
            views.close()
            self.runs.finish(ticket)

    @warns_in_page(status_only)
    @gpu(lambda a: a["max_new_tokens"], lambda a: drafts_with_a_head(a["pair_spec"], a["draft"]))
    def _run(self, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio):
        s = Settings.from_inputs(prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                                 auto_gamma=True, draft=draft)
        loaded = yield from self._load(s.pair_spec)
        s = s.for_pair(loaded)
        yield from self._stream(stream(loaded, s.prompt, batches=ENGINE.batches, **s.engine_kwargs()), s, cost_ratio, loaded)

    @warns_in_page(status_only)
    @gpu(lambda a: a["max_new_tokens"], lambda a: drafts_with_a_head(a["pair_spec"], a["draft"]))
    def _rerun(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
               pressed=True):
        """From the first flipped token after a rule/alpha change, from scratch after any other change (gamma
        alone: same text, new costs). Where nothing changed, only a pressed Re-run says so: a regeneration's word
        would replace the status of a run that has just shown its own settings' result."""
        s = Settings.from_inputs(prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                                 auto_gamma=True, draft=draft)
        if run is None:
            yield status_only("Nothing to re-run yet: press Run.")
            return
        loaded = yield from self._load(s.pair_spec)
        s = s.for_pair(loaded)
        if not s.same_text_inputs(run.trace, run.pair_spec) or run.trace.settings["gamma"] != s.gamma:
            yield from self._stream(stream(loaded, s.prompt, batches=ENGINE.batches, **s.engine_kwargs()), s, cost_ratio, loaded)
            return
        old = run.trace.settings
        _, first_changed = run.trace.recolour(s.rule, s.alpha)
        if first_changed is None and run.trace.finished and (old["rule"], old["alpha"]) == (s.rule, s.alpha):
            if pressed:
                yield status_only("Nothing changed since the last run.")
            return
        start = len(run.trace.positions) if first_changed is None else first_changed
        resumed = stream(loaded, resume=(run.trace, start), batches=ENGINE.batches, **s.engine_kwargs())
        yield from self._stream(resumed, s, cost_ratio, loaded)

    def stop(self, request: gr.Request = None):
        """Stop pressed: the page's run ends at its next block and shows what it has (``_supervised``)."""
        if self.runs.stop(request):
            return gr.skip()  # the run's own last message says it stopped (a message here could land after it)
        return "Nothing is running; Run starts a run, Re-run regenerates what a change affects."

    def stopped(self, run, rule, alpha, cost_ratio):
        """After Stop: the partial trace with fresh figures; Re-run continues it."""
        if run is None:
            return status_only("Stopped before the first token.")
        return self._view(run, rule, alpha, cost_ratio, running=False,
                          status=f"Stopped after {len(run.trace.positions)} tokens; Re-run continues from there.")

    # -- live controls -----------------------------------------------------------------------------

    @staticmethod
    def recolour(run, rule, alpha):
        """Instant: provenance under the new (rule, alpha) from the stored a*, no model call.
        Outputs: tokens, step plot, critical-alpha plot, status."""
        if run is None:
            return Recoloured(gr.skip(), gr.skip(), gr.skip(), "")
        answer, first_changed, sources = answer_view(run, rule, alpha)
        return Recoloured(answer, *figures_view(run, rule, alpha, sources, first_changed),
                          recolour_status(run, rule, alpha, first_changed))

    @staticmethod
    def update_speedup(run, cost_ratio):
        return stats_view(run, cost_ratio)[1]

    # -- inspector ---------------------------------------------------------------------------------

    @staticmethod
    def inspect(run, rule, alpha, event: gr.EventData):
        """A clicked token: its top-10 q and p, the rule's threshold, and why the rule did what it did.
        Tokens that will change are explained under the setting that produced them."""
        index = event_index(event, "pos")
        if run is None or not 0 <= index < len(run.trace.positions):
            return gr.skip(), gr.skip()
        pos = run.trace.positions[index]
        _, first_changed = run.trace.recolour(rule, alpha)
        note = ""
        if first_changed is not None and index >= first_changed:
            rule, alpha = run.trace.settings["rule"], run.trace.settings["alpha"]
            note = f"This token will change; shown under the run's own setting {rule}, alpha = {alpha:.2f}."
        figure = figures.inspector_figure(pos, rule, alpha)
        return inspector_html(index, pos, explain(rule, pos, alpha), note), gr.update(value=figure, visible=True)

    # -- API ---------------------------------------------------------------------------------------

    @raises_for_client
    def api_run(self, prompt: str, rule: str = DEFAULT_RULE, alpha: float = DEFAULT_ALPHA, gamma: int | str = "auto",
                temperature: float = DEFAULT_TEMPERATURE, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, seed: int = 0,
                draft: str = "", request: gr.Request = None) -> str:
        """Run the cascade on the app's default pair with the page's defaults (gamma: a number, or "auto"; draft:
        "model", "head", or empty for the page's default draft). Its last value is the trace as JSON
        (cascade_core's Trace.to_json); before that it streams {"generating": {"tokens": n, "max_new_tokens": m}}
        every PROGRESS_INTERVAL seconds (see read_or_stopped for callers who leave)."""
        s = Settings.from_inputs(prompt, self.default_pair_spec, True, rule, alpha, gamma, temperature,
                                 max_new_tokens, seed, auto_gamma=True, draft=draft or self.default_draft)
        yield from read_or_stopped(self._trace_messages(s), self.unread, request)

    @gpu(lambda a: a["s"].max_new_tokens, lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _trace_messages(self, s):
        pair = self.pairs.get(s.pair_spec)
        steps = stream(pair, s.prompt, batches=ENGINE.batches, **s.for_pair(pair).engine_kwargs())
        yield from progress_messages(steps, s.max_new_tokens, lambda trace: {"tokens": len(trace.positions),
                                                                             "max_new_tokens": s.max_new_tokens},
                                     Trace.to_dict)


@dataclass
class Explore:
    """The tab's components that other tabs and the API wiring need."""

    handlers: ExploreHandlers
    settings: list  # ExploreHandlers.run's inputs, in order
    view: list  # its outputs (View's order)
    run_state: gr.State
    opened: list  # what "open in Explore" sets: prompt, draft, rule, alpha, rule text, gamma, T, tokens, seed
    linked: Linked  # what a link sets


def build_explore(handlers: ExploreHandlers, pair_spec, public):
    choices = CHOICES if any(value == pair_spec for _, value in CHOICES) else CHOICES + [(pair_spec, pair_spec)]
    run_state = gr.State(None)
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(label="Prompt", lines=3, elem_id="prompt", value=example_prompts()[0])
            # under the prompt, in view when the page opens (below the settings they were at y ~1311 px)
            with gr.Row():
                run_button = gr.Button("Run", variant="primary", elem_id="run", scale=2, min_width=80)
                rerun_button = gr.Button("Re-run", elem_id="rerun", scale=1, min_width=80)
                stop_button = gr.Button("Stop", variant="stop", elem_id="stop", scale=1, min_width=70)
            status = gr.Markdown("", elem_id="status")
            gr.Examples([[p] for p in example_prompts()], inputs=[prompt], label="Examples")
            chat = gr.Checkbox(True, label="Apply the chat template (when the model has one); off: raw text",
                               elem_id="chat")
            pair_box = gr.Dropdown(choices, value=pair_spec, label="Model pair (draft -> target)",
                                   allow_custom_value=not public, elem_id="pair",
                                   info="hub ids or local folders as 'draft -> target'" if not public
                                   else "public mode: allow-listed models only")
            draft_box = gr.Dropdown(DRAFT_CHOICES, value=handlers.default_draft, label="Draft",
                                    allow_custom_value=not public, elem_id="draft",
                                    info="beside a hub target, also a draft model's or EAGLE-3 head's id or folder"
                                    if not public else None)
            rule = gr.Dropdown([(r, r) for r in RULES], value=DEFAULT_RULE, label="Rule", elem_id="rule")
            rule_text = gr.Markdown(rule_info(DEFAULT_RULE), elem_id="rule-info")
            alpha = alpha_slider(DEFAULT_RULE, DEFAULT_ALPHA, elem_id="alpha")
            with gr.Row():
                gamma = gr.Slider(0, MAX_GAMMA, value=DEFAULT_GAMMA, step=1, precision=0,
                                  label="gamma (0: auto)", info="draft block; auto: the cost model's pick",
                                  elem_id="gamma")
                temperature = gr.Slider(0, 2, value=DEFAULT_TEMPERATURE, step=0.05, label="temperature",
                                        elem_id="temperature")
            with gr.Row():
                max_new_tokens = gr.Slider(1, APP_MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=1, precision=0,
                                           label="max new tokens", elem_id="max-new-tokens")
                seed = gr.Number(0, precision=0, label="seed", elem_id="seed")
        with gr.Column(scale=2):
            gr.HTML(legend_html(("target", "draft")), elem_id="legend")
            answer = gr.HTML(tokens_html([], [], DEFAULT_RULE), elem_id="answer", js_on_load=ANSWER_JS)
            with gr.Row():
                with gr.Column():
                    stats = gr.Markdown(stats_markdown(None), elem_id="stats")
                with gr.Column():
                    cost_ratio = gr.Slider(0.01, 1.0, value=DEFAULT_COST_RATIO, step=0.01, elem_id="cost-ratio",
                                           label="draft/target cost ratio c (time of one draft call / one target call)")
                    presets = cost_presets(ASSETS / "measured-costs.json")
                    buttons = [gr.Button(label, size="sm", elem_classes=["cost-preset"]) for label, _ in presets]
                    speedup = gr.Markdown(speedup_markdown(None, None, DEFAULT_COST_RATIO, None, None),
                                          elem_id="speedup")
            with gr.Group(elem_classes=["inspector"]):  # an elem_id: Gradio gives a Group's two divs the same id
                inspector_text = gr.HTML(inspector_html(), elem_id="inspector-text")
                inspector_plot = gr.Plot(label="Top-10 of q and p", elem_id="inspector-plot", visible=False)
    with gr.Row():
        # side by side where both fit; one above the other on a phone (each needs ~400 px for its legend and title)
        # (their titles say what they are: Gradio's label badge would cover a title's first words)
        step_plot = gr.Plot(label="Per step", show_label=False, elem_id="step-plot", min_width=400)
        alpha_plot = gr.Plot(label="Critical alpha", show_label=False, elem_id="alpha-plot", min_width=400)
    with gr.Accordion("How to read this", open=False, elem_id="how-to-read"):
        gr.Markdown(how_to_read(), sanitize_html=False)

    settings = [prompt, pair_box, draft_box, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio]
    view = list(View(run_state, answer, stats, speedup, step_plot, alpha_plot, status))
    live = list(Recoloured(answer, step_plot, alpha_plot, status))
    # one run per page (ExploreHandlers._supervised): a newer one takes the view from the one before
    run_button.click(handlers.run, settings, view, api_name="run_ui", **GENERATING)
    prompt.submit(handlers.run, settings, view, api_name="submit_ui", **GENERATING)
    rerun_button.click(handlers.rerun, [run_state, *settings], view, **GENERATING)
    for release in (alpha.release, gamma.release):
        release(handlers.regenerate, [run_state, *settings], view, **GENERATING)
    # .input, not .change: another tab opening a run here sets the rule without asking for a re-run
    # another pair: the draft it runs with unless one is chosen
    pair_box.input(draft_for_pair, pair_box, draft_box, **INSTANT)
    rule.input(rule_changed, [rule, alpha], [alpha, rule_text], **INSTANT).then(
        handlers.recolour, [run_state, rule, alpha], live, **INSTANT).then(
        handlers.regenerate, [run_state, *settings], view, **GENERATING)
    # no cancels: a cancelled stream's last message could land after Stop's and leave "Generating…" on screen
    stop_button.click(handlers.stop, None, status, **INSTANT)
    alpha.input(handlers.recolour, [run_state, rule, alpha], live, trigger_mode="always_last", **INSTANT)
    cost_ratio.input(handlers.update_speedup, [run_state, cost_ratio], speedup, **INSTANT)
    for button, (_, c) in zip(buttons, presets):
        button.click(lambda c=c: c, None, cost_ratio, **INSTANT).then(
            handlers.update_speedup, [run_state, cost_ratio], speedup, **INSTANT)
    answer.click(handlers.inspect, [run_state, rule, alpha], [inspector_text, inspector_plot], **INSTANT)
    fields = dict(prompt=prompt, draft=draft_box, rule=rule, alpha=alpha, gamma=gamma, temperature=temperature, seed=seed,
                  max_new_tokens=max_new_tokens)
    linked = Linked("explore", {name: field.value for name, field in fields.items()}, "run", tuple(RULES),
                    auto_gamma=True, fields=fields, rule_text=rule_text)
    return Explore(handlers, settings, view, run_state,
                   [prompt, draft_box, rule, alpha, rule_text, gamma, temperature, max_new_tokens, seed], linked)


def draft_for_pair(spec):
    """The draft control's value for a newly chosen pair (a pair not understood is said so when it runs)."""
    try:
        return pair_default_draft(spec)
    except ValueError:
        return gr.skip()


def opened_in_explore(prompt, draft, rule, alpha, gamma, temperature, max_new_tokens, seed):
    """Values for Explore.opened: a run of another tab, shown in Explore with its settings."""
    slider, text = rule_changed(rule, alpha)
    return [prompt, draft, rule, slider, text, gamma, temperature, max_new_tokens, seed]


NOT_OPENED = [gr.skip()] * 10  # Explore.opened and the tabs, left as they are
