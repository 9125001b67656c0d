"""The Learn tab: nine short lessons on the deferral rules. Each asks one question before anything runs, runs a
prepared setting here (rows side by side, the Sandbox, a frontier, or timed runs), says what to look for with
that run's own numbers, and opens the tab it talks about in that state."""
import functools

import gradio as gr

from cascade_core import mapped, stream
from cascade_core.decoding.strategies import REPEATS

from .block_steps import build_block_steps, opened, replay_progress, replaying, wire_block_steps
from .compare import compare_steps, label, progress_line, tokens_asked
from .derivation import LATEX, STEPS, check, shown_answers, step_markdown
from .explore import special_ids
from .findings import build_findings
from .gpu import gpu
from .lessons import LESSONS, introduction
from .links import PRESS_JS, Linked, restore_outputs, restored
from .options import GENERATING, INSTANT, QUEUED_INSTANT
from .pairs import pair_default_draft
from .sandbox import START, SandboxHandlers
from .settings import AppSettings
from .streaming import event_index, warns_in_page
from .tradeoff import TradeoffHandlers
from .viz.compare import compare_html
from .viz.decision_map import decision_map_figure
from .worker import ENGINE

TAB_NAMES = {"explore": "Explore", "compare": "Compare", "tradeoff": "Trade-off", "sandbox": "Sandbox",
             "strategies": "Strategies"}
WAITING = ("*Commit to an answer first, then run it: whether it held, and what to look for, appear here with this "
           "run's numbers.*")
NOT_COMMITTED = ("*This run started before an answer was committed: pick one above and run it again to see whether "
                 "it holds.*")
LOOK_FOR = "**What to look for in this run**\n\n"
# A click on a token of a lesson's rows outlines its position in every row (the rows share positions) and sends it:
# "Step through its block" then opens the block that wrote it.
TOKENS_JS = """
element.addEventListener('click', (event) => {
  const token = event.target.closest('.tok[data-pos]');
  if (!token) return;
  element.querySelectorAll('.tok.selected').forEach((t) => t.classList.remove('selected'));
  element.querySelectorAll(`.tok[data-pos="${token.dataset.pos}"]`).forEach((t) => t.classList.add('selected'));
  trigger('click', {pos: Number(token.dataset.pos)});
});
"""


class LearnHandlers:
    def __init__(self, pairs, default_pair_spec, tradeoff: TradeoffHandlers):
        self.pairs, self.default_pair_spec, self.tradeoff = pairs, default_pair_spec, tradeoff
        self.default_draft = pair_default_draft(default_pair_spec)

    def settings(self, lesson, rule="lossless", alpha=0.0, draft=None):
        """A run of the lesson, with the prompt, gamma and seed its link opens (``draft``: the app's by default)."""
        link = lesson.link()
        return AppSettings.from_inputs(link["prompt"], self.default_pair_spec, True, rule, alpha, int(link["gamma"]),
                                    lesson.temperature, lesson.max_new_tokens, int(link["seed"]),
                                    draft=draft or self.default_draft)

    @warns_in_page(lambda message: (gr.skip(), gr.skip(), message))
    @gpu(lambda a: LESSONS[a["index"]].tokens)
    def run(self, index, choice=None):
        """Lesson ``index``'s prepared run; ``choice``: the answer the learner committed to before it (its text), which
        the run then reveals (a run without one, as a link's run=1 starts it, says how to get the reveal). Outputs:
        rows HTML, figure, the reveal and what to look for (progress while it runs)."""
        lesson = LESSONS[index]
        committed = choice in [answer.text for answer in lesson.answers]
        said = lambda *results: (f"{lesson.reveal(choice, *results) if committed else NOT_COMMITTED}\n\n"  # noqa: E731
                                 f"{LOOK_FOR}{lesson.look(*results)}")
        if lesson.kind == "sandbox":
            figure = SandboxHandlers.update(*lesson.rows[-1], *START[0], *START[1], *START[2])[0]
            yield "", figure, said(lesson.rows)
            return
        if lesson.kind == "frontier":
            s = self.settings(lesson)
            steps = ENGINE.iterate(self.tradeoff.frontier_steps(s, list(lesson.rows), "auto:3"), lesson.tokens)
            rows = yield from mapped(steps, lambda progress: (gr.skip(), gr.skip(),
                                                              f"Running: {progress.tokens} tokens so far…"))
            yield "", self.tradeoff.redraw(rows, "calls", 0.25), said(rows)
            return
        settings = [self.settings(lesson, *row) for row in lesson.rows]
        pair = self.pairs.get(settings[0].pair_spec)
        special = special_ids(pair)  # one target, one tokenizer: its special tokens are a mark in every row
        if lesson.kind == "rows":
            traces = []
            for traces in ENGINE.iterate(compare_steps(self.pairs, settings), tokens_asked(settings)):
                yield rows_html(traces, special=special), gr.skip(), f"Running: {progress_line(traces)}"
            also = lesson.rows[0] if len(lesson.rows) > 1 else None
            figure = decision_map_figure(traces[-1].positions, *lesson.rows[-1], also=also) \
                if lesson.decision_map else gr.skip()
            yield rows_html(traces, special=special), figure, said(pair, traces)
            return
        # timed: one after another, so that each run's clock is its own, REPEATS times (their spread is reported)
        pairs = [self.pairs.get(s.pair_spec) for s in settings]
        drafts = [None] + [f"{p.draft_kind} draft" for p in pairs[1:]]
        repeats = []
        for repeat in range(1, REPEATS + 1):
            traces = []
            for s, pair in zip(settings, pairs):
                for trace in ENGINE.iterate(stream(pair, s.prompt, batches=ENGINE.batches, settings=s),
                                            s.max_new_tokens):
                    yield (rows_html(traces + [trace], drafts, special), gr.skip(),
                           f"Repeat {repeat} of {REPEATS}: running {label(s.rule, s.alpha)}…")
                traces.append(trace)
            repeats.append(traces)
        yield rows_html(repeats[0], drafts, special), gr.skip(), said(pairs, repeats)


    @gpu(lambda a: 2 * LESSONS[a["index"]].max_new_tokens)
    def open_block(self, index, clicked=None):
        """The block of the lesson's last row that wrote the ``clicked`` token (its position, from any row: the rows
        share positions), else its first block of several tokens that ends in a rejection (where the keep test
        passes, then fails, and the residual is sampled), replayed for the step-through. Outputs:
        block_steps.outputs."""
        lesson = LESSONS[index]
        s = self.settings(lesson, *lesson.rows[-1])
        pair = self.pairs.get(s.pair_spec)
        yield replaying(f"Running {label(s.rule, s.alpha)} to find its block…")
        trace = yield from mapped(ENGINE.iterate(stream(pair, s.prompt, batches=ENGINE.batches, settings=s),
                                                 s.max_new_tokens), lambda trace: (gr.skip(),) * 4)
        shown = clicked is not None and 0 <= clicked < len(trace.positions)
        position = clicked if shown else telling_block(trace.positions)
        replay = yield from replay_progress(pair, s, position=position, run=trace)  # one block, from the run
        yield opened(replay, trace.tokens, special_ids(pair))


def telling_block(positions):
    """The first position of the first block that wrote several tokens and ends in a rejection (its keep tests pass,
    then one fails, and the residual is sampled), else of several tokens, else of a rejection, else 0."""
    blocks, firsts = {}, {}
    for i, pos in enumerate(positions):
        blocks.setdefault(pos["block"], []).append(pos["source"])
        firsts.setdefault(pos["block"], i)
    for wanted in (lambda b: len(b) > 1 and b[-1] == "replaced", lambda b: len(b) > 1, lambda b: "replaced" in b):
        found = next((firsts[k] for k, b in blocks.items() if wanted(b)), None)
        if found is not None:
            return found
    return 0


def clicked_token(event: gr.EventData):
    """A lesson row's clicked token: its position (None for anything else a crafted call sends)."""
    position = event_index(event, "pos")
    return None if position < 0 else position


def rows_html(traces, drafts=(), special=frozenset()):
    """The runs side by side, each named by its rule (and, where given, the draft that ran it); ``special``: the
    pair's special token ids, a mark, not text."""
    drafts = list(drafts) + [None] * len(traces)
    return compare_html([(label(t.settings["rule"], t.settings["alpha"]) + (f", {d}" if d else ""), t.positions,
                          t.sources) for t, d in zip(traces, drafts)], special, opens=False)


def build_lesson_block(handlers, k, rows, run):
    """Lesson ``k``'s step-through: the block of its last row that wrote the token clicked in its rows (a new run
    forgets the click), else a block of several tokens that ends in a rejection."""
    clicked = gr.State(None)
    last = label(*LESSONS[k - 1].rows[-1])
    block = build_block_steps(f"lesson-{k}-block", "Step through its block",
                              f'Click a token of either row, then "Step through its block" to watch the {last} block '
                              "that wrote it, one stage a press (without a click: its first block of several tokens "
                              "that ends in a rejection).")
    wire_block_steps(block, functools.partial(handlers.open_block, k - 1), clicked)
    rows.click(clicked_token, None, clicked, **INSTANT)
    run.click(lambda: None, None, clicked, **INSTANT)


def build_derivation(k):
    """The derivation's steps, each with its exercise: an answer, Check, and the reveal (no model call)."""
    for i, step in enumerate(STEPS):
        gr.Markdown(step_markdown(i + 1, step), latex_delimiters=LATEX, elem_id=f"lesson-{k}-step-{i + 1}")
        with gr.Row():
            choice = gr.Radio(shown_answers(i, step), label=step.question, elem_id=f"lesson-{k}-exercise-{i + 1}",
                              scale=4)
            check_button = gr.Button("Check", size="sm", elem_id=f"lesson-{k}-check-{i + 1}", scale=0, min_width=90)
        revealed = gr.Markdown("", elem_id=f"lesson-{k}-reveal-{i + 1}")
        check_button.click(functools.partial(check, i), choice, revealed, **INSTANT)


def learn_linked():
    """What a link sets on this tab: the lesson on screen."""
    return Linked("learn", dict(step=1), "lesson-{step}-run", steps=len(LESSONS))


def build_learn(handlers: LearnHandlers, linked, tabs, link_status, press, values):
    """The lessons in a walkthrough at lesson ``values["step"]``; ``linked``: the other tabs' Linked, which "Open
    it in ..." restores. Returns its field (the lesson on screen) by name."""
    step_box = gr.Number(values["step"], precision=0, visible=False)
    # tabs, not a gr.Walkthrough: a walkthrough disables every step not yet reached, and a reader may start anywhere
    with gr.Tabs(selected=values["step"], elem_id="lessons") as walkthrough:
        for k, lesson in enumerate(LESSONS, 1):
            with gr.Tab(f"{k}. {lesson.short}", id=k, elem_id=f"lesson-{k}") as step:
                gr.Markdown(introduction(k, lesson), latex_delimiters=LATEX)
                if lesson.derivation:
                    build_derivation(k)
                answer = gr.Radio([a.text for a in lesson.answers], label=f"Before you run: {lesson.predict}",
                                  elem_id=f"lesson-{k}-answer")
                with gr.Row():
                    run = gr.Button("Show it" if lesson.kind == "sandbox" else "Run it here", variant="primary",
                                    elem_id=f"lesson-{k}-run", scale=0, min_width=160)
                    opened = gr.Button(f"Open it in {TAB_NAMES[dict(lesson.opens)['tab']]}",
                                       elem_id=f"lesson-{k}-open", scale=0, min_width=260)
                rows = gr.HTML("", elem_id=f"lesson-{k}-rows", js_on_load=TOKENS_JS if lesson.steps_through else None)
                plot = gr.Plot(elem_id=f"lesson-{k}-plot", visible=lesson.kind in ("sandbox", "frontier") or
                               lesson.decision_map, show_label=False)
                look = gr.Markdown(WAITING, elem_id=f"lesson-{k}-look")
                if lesson.steps_through:
                    build_lesson_block(handlers, k, rows, run)
                with gr.Row():
                    if k > 1:
                        back = gr.Button(f"← {k - 1}. {LESSONS[k - 2].title}", size="sm", elem_id=f"lesson-{k}-back")
                        back.click(lambda k=k: (gr.Tabs(selected=k - 1), k - 1), None,
                                   [walkthrough, step_box], **INSTANT)
                    if k < len(LESSONS):
                        ahead = gr.Button(f"{k + 1}. {LESSONS[k].title} →", size="sm", elem_id=f"lesson-{k}-next")
                        ahead.click(lambda k=k: (gr.Tabs(selected=k + 1), k + 1), None,
                                    [walkthrough, step_box], **INSTANT)
            step.select(lambda k=k: k, None, step_box, **INSTANT)
            run.click(functools.partial(handlers.run, k - 1), answer, [rows, plot, look], **GENERATING)
            opened.click(lambda params=lesson.link(): restored(params, linked), None,
                         restore_outputs(linked, tabs, link_status, press), **QUEUED_INSTANT).then(
                None, press, press, js=PRESS_JS)
    build_findings()
    return dict(step=step_box)
