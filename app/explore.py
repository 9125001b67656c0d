"""The Explore tab's handlers (run, recolour, re-run, inspect, stop, and the /run API): they call cascade_core for
every number and app.viz for every picture; its layout is app/explore_layout.py, what it shows
app/explore_views.py."""
import time

import gradio as gr

from cascade_core import Trace, replay_steps, stream
from cascade_core.batch import measure_auto_prices
from cascade_core.prices import measured_prices, missing_prices
from cascade_core.settings import AUTO_GAMMAS

from .explore_views import (Recoloured, Run, View, answer_view, figures_view, recolour_status, stats_view,
                            status_only, view_interval)
from .block_steps import closed, opened, replay_progress, replaying
from .gpu import gpu
from .page_runs import PageRuns
from .pairs import drafts_with_a_head, pair_default_draft
from .settings import AppSettings
from .streaming import event_index, progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz import figures
from .viz.format import markdown_text
from .viz.tokens import explain, inspector_html
from .worker import ENGINE

DEFAULT_RULE, DEFAULT_ALPHA, DEFAULT_TEMPERATURE = "v3", 0.5, 0.7
DEFAULT_GAMMA = 0  # auto: each block's length priced fastest from this machine's measured calls (docs/benchmarks.md)
DEFAULT_MAX_NEW_TOKENS = 64
DEFAULT_COST_RATIO = 0.25  # a typical GPU draft/target ratio; each run also reports the one it measured
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
        plots = figures_view(run, rule, alpha, sources, first_changed) if with_figures else (gr.skip(),) * 3
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
            yield view._replace(step_plot=None, alpha_plot=None, decision_plot=None) if i == 0 and not trace.finished else view

    def run(self, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
            reproducible=False, request: gr.Request = None):
        """Run from scratch, streaming block by block (the page's one run: see ``_supervised``)."""
        views = self._run(prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
                          reproducible)
        yield from self._supervised(views, request, rule, alpha, cost_ratio)

    def rerun(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
              reproducible=False, request: gr.Request = None):
        """Re-run pressed: regenerate what the new settings change (see ``_rerun``), as the page's one run."""
        views = self._rerun(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens,
                            seed, cost_ratio, reproducible)
        yield from self._supervised(views, request, rule, alpha, cost_ratio, run)

    def regenerate(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                   cost_ratio, reproducible=False, request: gr.Request = None):
        """A rule change or a released slider: ``rerun``, but never in the place of a run the reader started."""
        views = self._rerun(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens,
                            seed, cost_ratio, reproducible, pressed=False)
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
    def _run(self, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
             reproducible=False):
        s = AppSettings.from_inputs(prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                                    auto_gamma=True, draft=draft, reproducible=reproducible)
        loaded = yield from self._load(s.pair_spec)
        s = s.for_pair(loaded)
        yield from self._stream(stream(loaded, s.prompt, batches=ENGINE.batches, settings=s), s, cost_ratio, loaded)

    @warns_in_page(status_only)
    @gpu(lambda a: a["max_new_tokens"], lambda a: drafts_with_a_head(a["pair_spec"], a["draft"]))
    def _rerun(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
               reproducible=False, pressed=True):
        """From the first flipped token after a rule/alpha change, from scratch after any other change (gamma
        alone: same text, new costs). Where nothing changed, only a pressed Re-run says so: a regeneration's word
        would replace the status of a run that has just shown its own settings' result."""
        s = AppSettings.from_inputs(prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                                    auto_gamma=True, draft=draft, reproducible=reproducible)
        if run is None:
            yield status_only("Nothing to re-run yet: press Run.")
            return
        loaded = yield from self._load(s.pair_spec)
        s = s.for_pair(loaded)
        if not s.same_text_inputs(run.trace, run.pair_spec) or run.trace.settings["gamma"] != s.gamma:
            yield from self._stream(stream(loaded, s.prompt, batches=ENGINE.batches, settings=s), s, cost_ratio, loaded)
            return
        old = run.trace.settings
        _, first_changed = run.trace.recolour(s.rule, s.alpha)
        if first_changed is None and run.trace.finished and (old["rule"], old["alpha"]) == (s.rule, s.alpha):
            if pressed:
                yield status_only("Nothing changed since the last run.")
            return
        start = len(run.trace.positions) if first_changed is None else first_changed
        resumed = stream(loaded, resume=(run.trace, start), batches=ENGINE.batches, settings=s)
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
            return Recoloured(gr.skip(), gr.skip(), gr.skip(), gr.skip(), "")
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
            return gr.skip(), gr.skip(), gr.skip()
        pos = run.trace.positions[index]
        _, first_changed = run.trace.recolour(rule, alpha)
        note = ""
        if first_changed is not None and index >= first_changed:
            rule, alpha = run.trace.settings["rule"], run.trace.settings["alpha"]
            note = f"This token will change; shown under the run's own setting {rule}, alpha = {alpha:.2f}."
        figure = figures.inspector_figure(pos, rule, alpha)
        text = inspector_html(index, pos, explain(rule, pos, alpha), note, rule)
        return text, gr.update(value=figure, visible=True), index

    # -- one block, step by step (app/block_steps.py) --------------------------------------------------

    def open_block(self, run, index):
        """"Step through its block": the block that emitted the inspected token, replayed with the engine's own
        numbers (cascade_core/replay.py). Outputs: block_steps.OUTPUTS."""
        if run is None or index is None or not 0 <= index < len(run.trace.positions):
            yield closed("Click a token of a run first.")
            return
        yield replaying(f"Replaying the run to the block of token #{index}…")
        try:
            replay = yield from self.replay(AppSettings.of_run(run.trace, run.pair_spec), position=index)
        except ValueError as error:
            yield closed(str(error))
            return
        yield opened(replay, run.trace.tokens)

    @gpu(lambda a: a["s"].max_new_tokens, lambda a: drafts_with_a_head(a["s"].pair_spec))
    def replay(self, s, **where):
        """block_steps.replay_progress on the pair of ``s`` (a GPU function on ZeroGPU)."""
        return (yield from replay_progress(self.pairs.get(s.pair_spec), s, **where))

    # -- API ---------------------------------------------------------------------------------------

    @raises_for_client
    def api_run(self, prompt: str, rule: str = DEFAULT_RULE, alpha: float = DEFAULT_ALPHA, gamma: int | str = "auto",
                temperature: float = DEFAULT_TEMPERATURE, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, seed: int = 0,
                draft: str = "", reproducible: bool = False, request: gr.Request = None) -> str:
        """Run the cascade on the app's default pair with the page's defaults (gamma: a number, or "auto"; draft:
        "model", "head", or empty for the page's default draft; reproducible: decode alone, bitwise the solo run,
        instead of beside other calls' rows, whose near-ties the trace marks). Its last value is the trace as JSON
        (cascade_core's Trace.to_json); before that it streams {"generating": {"tokens": n, "max_new_tokens": m}}
        every PROGRESS_INTERVAL seconds (see read_or_stopped for callers who leave)."""
        s = self._api_settings(prompt, rule, alpha, gamma, temperature, max_new_tokens, seed, draft, reproducible)
        yield from read_or_stopped(self._trace_messages(s), self.unread, request)

    @raises_for_client
    def api_block(self, prompt: str, rule: str = DEFAULT_RULE, alpha: float = DEFAULT_ALPHA, gamma: int | str = "auto",
                  temperature: float = DEFAULT_TEMPERATURE, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, seed: int = 0,
                  draft: str = "", block: int = 0, request: gr.Request = None) -> str:
        """One block of /run's run (the same arguments) replayed with the engine's own numbers, ``block`` its index
        in the run from 0 (cascade_core/replay.py says what it returns). Streams progress as /run does
        ({"generating": ...}); its last value is the block as JSON."""
        s = self._api_settings(prompt, rule, alpha, gamma, temperature, max_new_tokens, seed, draft)
        yield from read_or_stopped(self._block_messages(s, block), self.unread, request)

    def _api_settings(self, prompt, rule, alpha, gamma, temperature, max_new_tokens, seed, draft, reproducible=False):
        """An API call's settings on the app's default pair (gamma may be "auto"; an empty draft: the page's)."""
        return AppSettings.from_inputs(prompt, self.default_pair_spec, True, rule, alpha, gamma, temperature,
                                       max_new_tokens, seed, auto_gamma=True, draft=draft or self.default_draft,
                                       reproducible=reproducible)

    @gpu(lambda a: a["s"].max_new_tokens, lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _block_messages(self, s, block):
        pair = self.pairs.get(s.pair_spec)
        steps = replay_steps(pair, s.prompt, settings=s.for_pair(pair), block=block, batches=ENGINE.batches)
        yield from progress_messages(steps, s.max_new_tokens, generated(s), lambda replay: replay)

    @gpu(lambda a: a["s"].max_new_tokens, lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _trace_messages(self, s):
        pair = self.pairs.get(s.pair_spec)
        steps = stream(pair, s.prompt, batches=ENGINE.batches, settings=s.for_pair(pair))
        yield from progress_messages(steps, s.max_new_tokens, generated(s), Trace.to_dict)


def generated(s):
    """An API call's progress message for a trace so far."""
    return lambda trace: {"tokens": len(trace.positions), "max_new_tokens": s.max_new_tokens}
