"""The Explore tab's handlers (run, recolour, re-run, inspect, stop, and the /run API): they call cascade_core for
every number and app.viz for every picture; its layout is app/explore_layout.py, what it shows
app/explore_views.py."""
import time

import gradio as gr

from cascade_core import Trace, replay_steps, stream
from cascade_core.decoding.batch_block import measure_auto_prices, run_prices
from cascade_core.decoding.replay import replay_length
from cascade_core.decoding.run_settings import AUTO_GAMMAS, whole_number
from cascade_core.formats.loading import DRAFT_KINDS, with_draft
from cascade_core.speed.prices import measured_c, missing_prices

from .explore_panels import cleared, differences, inspector_view, retargeted, settings_note
from .explore_views import (Recoloured, Run, acceptance_view, answer_view, figures_view, recolour_status,
                            slider_c, slider_maximum, stats_view, status_only, view_of, view_interval)
from .block_steps import closed, opened, replay_progress, replaying
from .controls import run_defaults
from .gpu import gpu
from .page_runs import PageRuns
from .pairs import drafts_with_a_head, pair_default_draft
from .recent_runs import RecentRuns
from .settings import AppSettings
from .streaming import event_index, progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz.format import markdown_text
from .worker import ENGINE

DEFAULT_RULE, DEFAULT_ALPHA = "v3", 0.5
# the page's one set of run defaults (controls.run_defaults), gamma "auto": each block's length priced fastest from
# this machine's measured calls (docs/benchmarks.md)
DEFAULT_GAMMA, DEFAULT_TEMPERATURE, DEFAULT_SEED, DEFAULT_MAX_NEW_TOKENS = (
    run_defaults(auto_gamma=True)[name] for name in ("gamma", "temperature", "seed", "max_new_tokens"))
DEFAULT_COST_RATIO = 0.25  # c's slider before the default draft's c is measured (then it starts at that c)
LIVE_HANDLERS = {}
PLOTS = ("step_plot", "alpha_plot", "decision_plot")


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
        self.start_c = DEFAULT_COST_RATIO  # where c's slider starts (default_cost_ratio): no c the user set
        self.recent = RecentRuns()  # /run's last results, which /block replays from
        LIVE_HANDLERS[id(self)] = self

    def default_cost_ratio(self):
        """Where c's slider starts: the default draft's c as measured on this machine (prices.measured_c) once its
        pair is loaded and priced, else DEFAULT_COST_RATIO; on the slider's scale (from 0.01, in steps of 0.01).
        Kept as ``start_c``: a c there is not one the user set, and shows no hypothetical figure."""
        spec = with_draft(self.default_pair_spec, self.default_draft)
        pair = self.pairs.peek(spec)
        c = None if pair is None else measured_c(pair)
        self.start_c = DEFAULT_COST_RATIO if c is None else slider_c(c)
        return self.start_c

    def unset_cs(self, run):
        """The c's the slider is put at rather than set by the user: where it started (``start_c``) and each draft's
        measured c beside the run's target (prices.measured_c, where that pair is loaded and priced), which the
        slider follows (``follow_c``). At any other c the user set it, and Leviathan's estimate is shown there."""
        cs = {self.start_c}
        for kind in DRAFT_KINDS:
            try:
                pair = self.pairs.peek(with_draft(run.pair_spec, kind))
            except ValueError:  # a hub target without a known draft of this kind
                continue
            c = None if pair is None else measured_c(pair)
            cs |= set() if c is None else {slider_c(c)}
        return cs

    def follow_c(self, run, cost_ratio):
        """After a run: c's slider at the run's own draft's measured c, with the speed-up redrawn there, where the
        slider holds no c the user set (``unset_cs``), so that choosing another draft moves it to that draft's c once
        it is measured; left as it is where the user set c, or before the run's prices are known. The slider's right
        end moves to a c above 1 (``slider_maximum``): clamped at 1, it stood at another c than the sentence's."""
        c = None if run is None or run.prices is None else slider_c(run.prices.c)
        unset = set() if c is None else self.unset_cs(run)
        if c is None or slider_c(cost_ratio) == c or slider_c(cost_ratio) not in unset:
            return gr.skip(), gr.skip()
        return gr.update(value=c, maximum=slider_maximum(c)), stats_view(run, c, unset)[1]

    def __reduce__(self):
        # ZeroGPU's @spaces.GPU runs a call in a forked worker and pickles its arguments, self included: a
        # ExploreHandlers travels as its key, and the worker finds its forked copy, loaded models and all.
        return live_handlers, (id(self),)

    # -- generation --------------------------------------------------------------------------------

    def _view(self, run, rule, alpha, cost_ratio, running, with_figures=True, status=None, applying=()):
        """The view of ``run`` under (rule, alpha); ``applying``: the settings a regeneration applies (its status
        says them)."""
        answer, first_changed, sources, _ = answer_view(run, rule, alpha, running)
        stats, speedup = stats_view(run, cost_ratio, self.unset_cs(run))
        plots = figures_view(run, rule, alpha, sources, first_changed) if with_figures else (gr.skip(),) * 3
        # the run's own verify steps: they stay as they are when alpha moves (figures_view's plots follow it)
        acceptance = acceptance_view(run) if with_figures else gr.skip()
        n = len(run.trace.positions)
        why = f", for the new {', '.join(applying)}" if applying else ""
        status = status or (f"Generating… {n} tokens{why}" if running else
                            f"Done: {n} tokens ({run.trace.stop_reason}){why}.")
        return view_of(run=run, answer=answer, stats=stats, speedup=speedup, **dict(zip(PLOTS, plots)),
                       acceptance_plot=acceptance, status=status)

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

    def _stream(self, trace_iter, s, cost_ratio, pair, applying=()):
        """Tokens as blocks come, at most one view per ``view_interval`` (None in its place for the blocks between,
        so that Stop is still heard after every block); the plots are cleared when a run starts and drawn when it
        ends. Redrawing them while tokens stream cost the page a third of its speed on a 2-core machine (plotly
        redraws in the browser compete with generation; docs/lab/2026-11-30-explorer-page.md). A finished run, a
        baseline's too, is priced with the pair's measured calls and the engine's own work per block
        (batch.run_prices: measured on the engine thread the first time), unless the pair is compiled (run_prices
        returns None there)."""
        shown = None
        for i, trace in enumerate(ENGINE.iterate(trace_iter, s.max_new_tokens)):
            if not trace.finished and shown is not None and (time.perf_counter() - shown <
                                                             view_interval(len(trace.positions))):
                yield None
                continue
            shown = time.perf_counter()
            prices = ENGINE.call(run_prices, pair, trace.gamma) if trace.finished else None
            shown_run = Run(trace, s.pair_spec, prices, pair.ran_on, special_ids(pair))
            view = self._view(shown_run, s.rule, s.alpha, cost_ratio, not trace.finished, with_figures=trace.finished,
                              applying=applying)
            blank = dict.fromkeys((*PLOTS, "acceptance_plot"))  # a new run's plots go blank until it ends
            yield view._replace(**blank) if i == 0 and not trace.finished else view

    def run(self, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio,
            reproducible=False, inspected=None, request: gr.Request = None):
        """Run from scratch, streaming block by block (the page's one run: see ``_supervised``); ``inspected``: the
        position the inspector shows, re-targeted to the new run."""
        views = self._run(prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                          cost_ratio, reproducible)
        yield from self._supervised(views, request, rule, alpha, cost_ratio, inspected=inspected)

    def rerun(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
              cost_ratio, reproducible=False, inspected=None, request: gr.Request = None):
        """Continue pressed: finish a stopped run, or regenerate what changed settings change (see ``_rerun``), as
        the page's one run."""
        views = self._rerun(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens,
                            seed, cost_ratio, reproducible)
        yield from self._supervised(views, request, rule, alpha, cost_ratio, run, inspected=inspected)

    def regenerate(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                   cost_ratio, reproducible=False, inspected=None, request: gr.Request = None):
        """A control let go of (any setting but the prompt): ``rerun``, but never in the place of a run the reader
        started."""
        views = self._rerun(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens,
                            seed, cost_ratio, reproducible, pressed=False)
        yield from self._supervised(views, request, rule, alpha, cost_ratio, run, pressed=False, inspected=inspected)

    @staticmethod
    def settings_note(run, *settings):
        """The mark above the tokens for the controls as they are now (explore_panels.settings_note): run after
        every change of a control and after every run, so it holds whatever the order they ended in."""
        return settings_note(run, *settings[:12])

    def _supervised(self, views, request, rule, alpha, cost_ratio, run=None, pressed=True, inspected=None):
        """A page streams one run into its view. Its views are checked after every block, here in the server's
        process (on ZeroGPU the run itself is in a forked GPU process): a newer run of the same page takes the view
        once it streams, and the one it replaces ends without a word, but a regeneration (``pressed`` False: a
        control let go of) never replaces a run the reader pressed for (Run, Continue, a row opened here); Stop
        ends the run with the partial trace and says so (a regeneration that has shown nothing yet ends silently:
        the view is another run's). Closing ``views`` stops the engine's work between two blocks. The inspector and
        the step-through follow the run shown (explore_panels): cleared at its first view, on the ``inspected``
        position of it at its last."""
        ticket, spoke, fresh = self.runs.join(request, pressed), False, True
        try:
            for view in views:
                if ticket.superseded:
                    break
                if ticket.stop_asked:
                    views.close()
                    if ticket.streaming or pressed:  # a regeneration that never showed a token ends without a word
                        yield self.stopped(run, rule, alpha, cost_ratio, inspected if not fresh else None)
                    elif not spoke:  # (a generator that yields nothing blanks every output)
                        yield status_only(gr.skip())
                    return
                if view is None:  # a block between two views (_stream)
                    continue
                if isinstance(view.run, Run):
                    if not ticket.streaming:
                        self.runs.take_view(ticket)
                        if ticket.superseded:
                            break
                    run, view = view.run, self._followed(view, inspected, fresh)
                    fresh = False
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
    def _rerun(self, run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
               cost_ratio, reproducible=False, pressed=True):
        """From the first flipped token after a rule/alpha change, from scratch after any other change (gamma
        alone: same text, new costs). Where nothing changed, only a pressed Continue says so: a regeneration's word
        would replace the status of a run that has just shown its own settings' result."""
        s = AppSettings.from_inputs(prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                                    auto_gamma=True, draft=draft, reproducible=reproducible)
        if run is None:
            yield status_only("No run yet: press Run (settings then apply as you let go of them).")
            return
        applying = () if pressed else tuple(name for name, _ in differences(
            run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, reproducible))
        loaded = yield from self._load(s.pair_spec)
        s = s.for_pair(loaded)
        if not s.same_text_inputs(run.trace, run.pair_spec) or run.trace.settings["gamma"] != s.gamma:
            yield from self._stream(stream(loaded, s.prompt, batches=ENGINE.batches, settings=s), s, cost_ratio,
                                    loaded, applying)
            return
        old = run.trace.settings
        _, first_changed = run.trace.recolour(s.rule, s.alpha)
        if first_changed is None and (old["rule"], old["alpha"]) == (s.rule, s.alpha) and (
                run.trace.finished or not pressed):  # a stopped run is continued when asked, not when a box blurs
            if pressed:
                yield status_only("Nothing changed since the last run, which has finished: nothing to continue.")
            return
        start = len(run.trace.positions) if first_changed is None else first_changed
        resumed = stream(loaded, resume=(run.trace, start), batches=ENGINE.batches, settings=s)
        yield from self._stream(resumed, s, cost_ratio, loaded, applying)

    @staticmethod
    def _followed(view, inspected, fresh):
        """A view of a run with the panels that follow it: at the run's first view the mark above the tokens and
        the inspector cleared (the run before's token is not explained over the new text), at its last the
        inspector on the same position of it (and that token selected in the text)."""
        if fresh:
            view = view._replace(note="", **cleared(inspected))
        if view.run.trace.finished and inspected is not None:
            s = view.run.trace.settings
            view = view._replace(answer=answer_view(view.run, s["rule"], s["alpha"], selected=inspected)[0],
                                 **retargeted(view.run, inspected))
        return view

    def stop(self, request: gr.Request = None):
        """Stop pressed: the page's run ends at its next block and shows what it has (``_supervised``)."""
        if self.runs.stop(request):
            return gr.skip()  # the run's own last message says it stopped (a message here could land after it)
        return "Nothing is running; Run starts a run, Continue finishes a stopped one."

    def stopped(self, run, rule, alpha, cost_ratio, inspected=None):
        """After Stop: the partial trace with fresh figures and the inspector on it; Continue finishes it."""
        if run is None:
            return status_only("Stopped before the first token.")
        stopped = self._view(run, rule, alpha, cost_ratio, running=False,
                             status=f"Stopped after {len(run.trace.positions)} tokens; Continue finishes the run "
                                    "from there, Run starts afresh.")
        return stopped._replace(**retargeted(run, inspected))

    # -- live controls -----------------------------------------------------------------------------

    @staticmethod
    def recolour(run, rule, alpha, inspected=None):
        """Instant: provenance under the new (rule, alpha) from the stored a*, no model call (the ``inspected``
        token stays selected). Outputs: tokens, step plot, critical-alpha plot, decision map, status."""
        if run is None:
            return Recoloured(gr.skip(), gr.skip(), gr.skip(), gr.skip(), "")
        answer, first_changed, sources, decides = answer_view(run, rule, alpha, selected=inspected)
        return Recoloured(answer, *figures_view(run, rule, alpha, sources, first_changed),
                          recolour_status(run, rule, alpha, first_changed, decides))

    def update_speedup(self, run, cost_ratio):
        return stats_view(run, cost_ratio, () if run is None else self.unset_cs(run))[1]

    # -- inspector ---------------------------------------------------------------------------------

    @staticmethod
    def inspect(run, rule, alpha, event: gr.EventData):
        """A clicked token: its top-10 q and p, the rule's threshold, and why the rule did what it did.
        Tokens that will change are explained under the setting that produced them."""
        index = event_index(event, "pos")
        if run is None or not 0 <= index < len(run.trace.positions):
            return gr.skip(), gr.skip(), gr.skip()
        return inspector_view(run, rule, alpha, index)

    # -- one block, step by step (app/block_steps.py) --------------------------------------------------

    def open_block(self, run, index):
        """"Step through its block": the block that emitted the inspected token, replayed with the engine's own
        numbers (cascade_core/decoding/replay.py), from the page's run (one block decoded, not the run up to it) where
        that run was decoded from its start. Outputs: block_steps.OUTPUTS."""
        if run is None or index is None or not 0 <= index < len(run.trace.positions):
            yield closed("Click a token of a run first.")
            return
        yield replaying(f"Replaying the run to the block of token #{index}…")
        try:
            replay = yield from self.replay(AppSettings.of_run(run.trace, run.pair_spec), position=index,
                                            run=None if run.trace.resumed_from else run.trace)
        except ValueError as error:
            yield closed(str(error))
            return
        yield opened(replay, run.trace.tokens, run.special)

    @gpu(lambda a: replay_length(a["s"], a["where"].get("run")), lambda a: drafts_with_a_head(a["s"].pair_spec))
    def replay(self, s, **where):
        """block_steps.replay_progress on the pair of ``s`` (a GPU function on ZeroGPU)."""
        return (yield from replay_progress(self.pairs.get(s.pair_spec), s, **where))

    # -- API ---------------------------------------------------------------------------------------

    @raises_for_client
    def api_run(self, prompt: str, rule: str = DEFAULT_RULE, alpha: float = DEFAULT_ALPHA, gamma: int | str = "auto",
                temperature: float = DEFAULT_TEMPERATURE, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                seed: int = DEFAULT_SEED, draft: str = "", reproducible: bool = False,
                request: gr.Request = None) -> str:
        """Run the cascade on the app's default pair with the page's defaults (gamma: a number, or "auto"; draft:
        "model", "head", or empty for the page's default draft; reproducible: decode alone, bitwise the solo run,
        instead of beside other calls' rows, whose near-ties the trace marks). Its last value is the trace as JSON
        (cascade_core's Trace.to_json); before that it streams {"generating": {"tokens": n, "max_new_tokens": m}}
        every PROGRESS_INTERVAL seconds (see read_or_stopped for callers who leave)."""
        s = self._api_settings(prompt, rule, alpha, gamma, temperature, max_new_tokens, seed, draft, reproducible)
        messages = self.recent.remembering(s, self.pairs.get(s.pair_spec), self._trace_messages(s))
        yield from read_or_stopped(messages, self.unread, request)

    @raises_for_client
    def api_block(self, prompt: str, rule: str = DEFAULT_RULE, alpha: float = DEFAULT_ALPHA, gamma: int | str = "auto",
                  temperature: float = DEFAULT_TEMPERATURE, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                  seed: int = DEFAULT_SEED, draft: str = "", block: int = 0, request: gr.Request = None) -> str:
        """One block of /run's run (the same arguments) replayed with the engine's own numbers, ``block`` its index
        in the run from 0 (cascade_core/decoding/replay.py says what it returns). After a /run with the same settings
        (one of the last RECENT_RUNS) it decodes that block alone, from the run's trace, and a block past the run's end
        is refused at once; else it decodes the run up to the block. Streams progress as /run does
        ({"generating": ...}); its last value is the block as JSON."""
        s = self._api_settings(prompt, rule, alpha, gamma, temperature, max_new_tokens, seed, draft)
        block = whole_number(block, "block", 0, s.max_new_tokens - 1)
        run = self.recent.find(s, self.pairs.get(s.pair_spec))
        yield from read_or_stopped(self._block_messages(s, block, run), self.unread, request)

    def _api_settings(self, prompt, rule, alpha, gamma, temperature, max_new_tokens, seed, draft, reproducible=False):
        """An API call's settings on the app's default pair (gamma may be "auto"; an empty draft: the page's)."""
        return AppSettings.from_inputs(prompt, self.default_pair_spec, True, rule, alpha, gamma, temperature,
                                       max_new_tokens, seed, auto_gamma=True, draft=draft or self.default_draft,
                                       reproducible=reproducible)

    @gpu(lambda a: replay_length(a["s"], a.get("run")), lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _block_messages(self, s, block, run=None):
        pair = self.pairs.get(s.pair_spec)
        steps = replay_steps(pair, s.prompt, settings=s.for_pair(pair), block=block, run=run, batches=ENGINE.batches)
        yield from progress_messages(steps, replay_length(s, run), generated(s), lambda replay: replay)

    @gpu(lambda a: a["s"].max_new_tokens, lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _trace_messages(self, s):
        pair = self.pairs.get(s.pair_spec)
        steps = stream(pair, s.prompt, batches=ENGINE.batches, settings=s.for_pair(pair))
        yield from progress_messages(steps, s.max_new_tokens, generated(s), Trace.to_dict)


def special_ids(pair):
    """The pair's special token ids (end of turn, end of text, ...): the answer shows them as a mark."""
    return frozenset(getattr(pair.tokenizer, "all_special_ids", None) or ())


def generated(s):
    """An API call's progress message for a trace so far."""
    return lambda trace: {"tokens": len(trace.positions), "max_new_tokens": s.max_new_tokens}
