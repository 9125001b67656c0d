"""The Learn tab: six short lessons on the deferral rules. Each asks one question before anything runs, runs a
prepared setting here (rows side by side, the Sandbox, a frontier, or timed runs), says what to look for with
that run's own numbers, and opens the tab it talks about in that state."""
import functools
from dataclasses import dataclass
from typing import Callable

import gradio as gr

from cascade_core import RULES, mapped, stream
from cascade_core.costs import break_even_cost_ratio, expected_speedup, expected_tokens_per_call, priced_speedup
from cascade_core.explain import dissect
from cascade_core.running import OTHER_ROWS

from .block_steps import build_block_steps, opened, replay_progress, replaying, wire_block_steps
from .compare import compare_steps, label, progress_line, row_stats, tokens_asked
from .gpu import gpu
from .links import PRESS_JS, Linked, restore_outputs, restored
from .options import GENERATING, INSTANT, QUEUED_INSTANT, example_prompts
from .pairs import pair_default_draft
from .sandbox import START, SandboxHandlers
from .settings import AppSettings
from .strategies import other_calls_note
from .streaming import warns_in_page
from .tradeoff import TradeoffHandlers
from .viz.compare import compare_html
from .viz.decision_map import decision_map_figure
from .viz.format import number
from .worker import ENGINE

TAB_NAMES = {"explore": "Explore", "compare": "Compare", "tradeoff": "Trade-off", "sandbox": "Sandbox",
             "strategies": "Strategies"}
WAITING = "*Answer the question first, then run it: what to look for appears here, with this run's numbers.*"
LOOK_FOR = "**What to look for in this run**\n\n"
NEAR_LOSSLESS = 1.1  # "near lossless": a target NLL at most 10% above lossless's (not a quality score)


@dataclass(frozen=True)
class Lesson:
    title: str
    short: str  # the walkthrough's step label
    idea: str  # what the lesson teaches (Markdown)
    predict: str  # the question to answer before moving a control
    kind: str  # "rows" (side by side), "timed" (one after another), "sandbox", "frontier"
    rows: tuple = ()  # (rule, alpha) for "rows", (rule, alpha, draft) for "timed", the rules for "frontier"
    temperature: float = 0.7
    max_new_tokens: int = 48
    opens: tuple = ()  # the tab the lesson talks about, and its rule and alpha there, as (name, value) pairs
    # What to look for, from the run's results: (pair, traces) for "rows", (each run's pair, traces) for "timed",
    # the rules' (rule, alpha) for "sandbox", the sweep's rows for "frontier"
    look: Callable = None
    steps_through: bool = False  # after its run, one block of its last row can be opened and stepped through
    decision_map: bool = False  # its run draws its last row's decision map, with its first row's boundary beside

    def link(self):
        """The query that opens the lesson's tab in its state: its run's prompt, seed and lengths too (a tab takes
        the fields it has controls for), and run=1 where the tab has a Run."""
        params = dict(prompt=example_prompts()[0], gamma=4, seed=0, temperature=self.temperature,
                      max_new_tokens=self.max_new_tokens, **dict(self.opens))
        return {name: str(value) for name, value in dict(params, run=int(params["tab"] != "sandbox")).items()}

    @property
    def tokens(self):
        """The tokens a run of this lesson may generate (a frontier: its rules x 3 alphas, and a pilot)."""
        return (len(self.rows) * 3 + 1 if self.kind == "frontier" else len(self.rows)) * self.max_new_tokens


def introduction(k, lesson):
    return f"### {k}. {lesson.title}\n{lesson.idea}\n\n**Before you run:** {lesson.predict}"


def percent(value):
    return "–" if value is None else f"{100 * value:.0f}%"


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


GREEDY = ("at temperature 0, pi = p is one-hot on the target's top token, so the verification keeps a proposal "
          "only where it is that token and otherwise replaces it by that token")


def near_tie(target, lossless, k):
    """Why lossless's greedy text parts from the target's at token k, with the target's probabilities there."""
    top = {entry[0]: entry[2] for entry in lossless.positions[k].get("top_p") or []}
    ours, theirs = lossless.tokens[k] if k < len(lossless.tokens) else None, \
        target.tokens[k] if k < len(target.tokens) else None
    numbers = (f" (in lossless's pass the target gave its token p {number(top[ours], 4)} and the target-alone run's "
               f"token p {number(top[theirs], 4)})") if ours in top and theirs in top else ""
    return (f"Lossless wrote a different text from the target alone from token {k}. Both write the target's top "
            f"token at every position ({GREEDY}), but lossless reads p from the block's pass over several tokens and "
            "the target alone from one-token passes, and passes of different shapes round differently: where the "
            f"target's two best tokens are within that rounding of each other (a near tie), the passes can pick "
            f"different ones{numbers}.")


def look_for_speculative(pair, traces):
    target, lossless = traces
    s, k = lossless.stats, first_difference(target.tokens, lossless.tokens)
    if k is None and len(target.tokens) == len(lossless.tokens):
        same = f"Lossless wrote the same text as the target alone ({s['tokens']} tokens): {GREEDY}."
    else:
        same = near_tie(target, lossless, min(len(target.tokens), len(lossless.tokens)) if k is None else k)
    return (f"- {same}\n"
            f"- The target checked and kept {s['deferred']} of the draft's tokens and replaced {s['replaced']}; "
            "each replacement ended its block.\n"
            f"- Target calls: {target.stats['target_calls']} alone, {s['target_calls']} with the draft "
            f"({number(s['tokens_per_target_call'], 2)} tokens per call).")


def look_for_chow(pair, traces):
    stats = [ENGINE.call(row_stats, pair, t, 0.25) for t in traces]
    lines = [f"| {r['label']} | {percent(r['deferral_rate'])} | {r['target_calls']} | {number(r['target_nll'], 2)} |"
             for r in stats]
    lo, hi = stats[0], stats[-1]
    trend = "fell" if hi["deferral_rate"] < lo["deferral_rate"] else "did not fall"
    return ("| row | deferred | target calls | target NLL |\n|---|---|---|---|\n" + "\n".join(lines) +
            f"\n\nFrom {lo['label']} to {hi['label']} the deferral rate {trend} "
            f"({percent(lo['deferral_rate'])} to {percent(hi['deferral_rate'])}) and target calls went from "
            f"{lo['target_calls']} to {hi['target_calls']}; the target's NLL of the text went from "
            f"{number(lo['target_nll'], 2)} to {number(hi['target_nll'], 2)}: larger alpha trusts the draft more.")


def look_for_tv(pair, traces):
    lines = []
    for trace in traces:
        rule, alpha = trace.settings["rule"], trace.settings["alpha"]
        deferred = [p["tv"] for p in trace.positions if p["a_star"][rule] > alpha]
        kept = [p["tv"] for p in trace.positions if p["a_star"][rule] <= alpha]
        mean = lambda values: number(sum(values) / len(values), 3) if values else "–"  # noqa: E731
        lines.append(f"| {label(rule, alpha)} | {len(deferred)} of {len(trace.positions)} | {mean(deferred)} | "
                     f"{mean(kept)} |")
    return ("| row | positions deferred | mean TV where it deferred | mean TV where it did not |\n"
            "|---|---|---|---|\n" + "\n".join(lines) + "\n\n" + OPT_ANSWER)


OPT_ANSWER = ("**The answer:** at the same confidence gap max p - max q and alpha > 0, opt defers where the gap "
              "exceeds alpha * TV, so it defers more where the models agree (small TV) and less where they disagree. A "
              "deferred position is rejected with probability TV (Lemma 3), and alpha * TV is the price of that "
              "rejection. A large-TV position still defers when its gap is larger still, and diff ignores TV, so "
              "this run's TV columns mix both effects. The decision map below shows it: each of opt's positions is a "
              "point (TV, max p - max q); opt defers above its line max p - max q = alpha * TV, which rises with TV, "
              "and diff above its flat line max p - max q = alpha (dashed).")


def look_for_sandbox(rules):
    labels, q, p = START
    favourite = labels[max(range(len(q)), key=q.__getitem__)]
    lines = []
    for rule, alpha in rules:
        numbers = dissect(rule, q, p, alpha)
        accepted = [t for t, defers in zip(labels, numbers["defers"]) if not defers]
        lines.append(f"| {rule} alpha {alpha:g} | {', '.join(accepted) or 'none'} | "
                     f"{'yes' if favourite in accepted else 'no'} | {number(numbers['rejection_prob'], 3)} |")
    return (f"The draft's favourite is '{favourite}' (q {number(q[labels.index(favourite)], 2)}, p "
            f"{number(p[labels.index(favourite)], 2)}).\n\n| rule | accepted set A | '{favourite}' in A | "
            "P(the draft's token is rejected) |\n|---|---|---|---|\n" + "\n".join(lines))


def look_for_frontier(rows):
    """Each rule's cheapest point whose target NLL is at most 10% above lossless's (the target's own samples)."""
    by_rule = {}
    for row in rows:
        by_rule.setdefault(row["rule"], []).append((row["target_calls"] / row["tokens"], row["target_nll"]))
    cost, quality = by_rule.pop("lossless")[0]
    lines = []
    for rule, points in by_rule.items():
        near = [c for c, nll in points if nll <= NEAR_LOSSLESS * quality]
        cheapest = f"{number(min(near), 2)} ({percent(min(near) / cost)} of lossless's)" if near else "none"
        lines.append(f"| {rule} | {len(points)} | {number(min(c for c, _ in points), 2)}–"
                     f"{number(max(c for c, _ in points), 2)} | {cheapest} |")
    return (f"Lossless: {number(cost, 2)} target calls per token, target NLL {number(quality, 2)}.\n\n"
            f"| rule | points | target calls per token | fewest calls per token within {percent(NEAR_LOSSLESS - 1)} "
            "of lossless's NLL |\n|---|---|---|---|\n" + "\n".join(lines) +
            "\n\nAt equal target calls a lower point is text the target finds likelier, not better text: a point "
            "below lossless is more mode-seeking than the target's own samples. One prompt and 24 tokens cannot rank "
            "the rules: another prompt or seed moves every point, which is why the sweeps average prompt sets with "
            "intervals (docs/sweeps.md).")


def per_call(trace, role):
    c = trace.counters
    return c[f"{role}_seconds"] / c[f"{role}_calls"]


def look_for_timed(pairs, traces):
    """Per draft: measured speed-up, and the cost model priced with the calls these runs timed: one target token
    (the target alone), one draft call and one verification of up to gamma + 1 tokens (the cascade); for a head,
    the emitted tokens outside its vocabulary."""
    target, *cascades = traces
    one = per_call(target, "target")
    lines, notes = [], []
    for pair, cascade in zip(pairs[1:], cascades):
        gamma, a = cascade.settings["gamma"], cascade.stats["acceptance_rate"]
        measured = cascade.stats["tokens_per_second"] / target.stats["tokens_per_second"]
        draft, verify = per_call(cascade, "draft"), per_call(cascade, "target")
        priced = priced_speedup(a, gamma, one, draft, verify)
        kind = pair.drafting.label
        lines.append(f"| {kind} | {number(cascade.stats['tokens_per_second'], 1)} | {number(measured, 2)}x | "
                     f"{number(1000 * draft, 1)} ms (c = {number(draft / one, 2)}) | {number(verify / one, 2)} | "
                     f"{number(a, 2)} | "
                     f"{number(priced, 2)}x | {number(expected_speedup(a, gamma, draft / one, gamma + 1), 2)}x |")
        notes.append(f"- With the {kind}: {pays(a, gamma, verify / one)}")
        vocabulary = pair.drafting.vocabulary(pair.draft)
        if vocabulary is not None:
            outside = sum(token not in vocabulary for token in cascade.tokens)
            notes.append(f"- The {kind} proposes only the {len(vocabulary):,} tokens of its vocabulary (q = 0 "
                         f"elsewhere): {outside} of the {len(cascade.tokens)} tokens written came from outside it, "
                         "each one the target's replacement, never a kept proposal.")
    beside = max(trace.counters.get(OTHER_ROWS, 0) for trace in traces)
    if beside:
        notes.append(f"- {other_calls_note(beside)}")
    gamma = cascades[0].settings["gamma"]
    return (f"Target alone: {number(target.stats['tokens_per_second'], 1)} tokens/s, one target token "
            f"{number(1000 * one, 1)} ms.\n\n"
            f"| v3, alpha 0.5, with | tokens/s | measured | one draft call | a verification of up to {gamma + 1} "
            "tokens, in target tokens | acceptance | cost model, these prices | Leviathan et al.'s (2023) estimate, "
            f"{gamma + 1} draft calls |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n" +
            "\n".join(notes) + "\n- A draft much cheaper than its target whose tokens are kept often, and a "
            "verification that costs about one target token (a large target on a GPU), are what make a cascade pay.")


def pays(a, gamma, verify_ratio):
    """When a cascade pays at this acceptance and verification cost, in one sentence."""
    c = break_even_cost_ratio(a, gamma, gamma + 1, verify_ratio)
    if c > 0:
        return f"At this acceptance and verification cost the cascade pays when c is below {number(c, 2)}."
    tokens = number(expected_tokens_per_call(a, gamma), 2)
    return (f"At this acceptance no draft is cheap enough: a block yields {tokens} tokens, and its verification alone "
            f"costs {number(verify_ratio, 2)} target tokens.")


LESSONS = (
    Lesson("Speculative decoding", "Speculative decoding",
           "The draft proposes a block of tokens; the target scores the whole block in one pass and checks the "
           "proposals in order (rule `lossless`: pi = p), keeping each with probability min(1, p(x) / q(x)). At the "
           "first rejection it writes a token sampled from the residual norm(max(0, p - q)) instead, and that ends "
           "the block: every later proposal is discarded unseen. Kept tokens cost no target call of their own. "
           "After the run, step through one of its blocks, one stage a press, with the engine's own numbers.",
           "At temperature 0, will the lossless row write a different text from the target alone? How many target "
           "calls will it need for the same tokens?",
           "rows", (("target", 0.0), ("lossless", 0.0)), temperature=0.0, look=look_for_speculative,
           opens=(("tab", "explore"), ("rule", "lossless")), steps_through=True),
    Lesson("A cascade by confidence: chow", "Chow",
           "A cascade lets the draft answer where it is sure. Chow's rule defers to the target when the draft's "
           f"top probability is low, `{RULES['chow'].defers_when}`. Where it does not defer, pi = q: the target "
           "still scores the position in the block's pass, and the verification keeps the draft's token with "
           "probability pi(x) / q(x) = 1, so only deferred positions can be replaced.",
           "Which alpha lets the draft speak most often, and what does that do to the target's calls and to how "
           "likely the target finds the text?",
           "rows", (("chow", 0.3), ("chow", 0.6), ("chow", 0.9)), look=look_for_chow,
           opens=(("tab", "explore"), ("rule", "chow"), ("alpha", 0.6))),
    Lesson("Asking the target: diff and opt", "diff and opt",
           "In a speculative cascade the target has scored every position anyway, so a rule may read p. `diff` "
           f"defers when `{RULES['diff'].defers_when}`; `opt` when `{RULES['opt'].defers_when}`, the paper's "
           "plug-in estimate (Eq. 10) of the optimal rule of Lemma 4 (Eq. 9): it weighs the target's extra "
           "confidence, max p - max q, against alpha times how much the two models disagree, TV(p, q).",
           "Where will opt defer more: at positions where draft and target agree (small TV) or disagree?",
           "rows", (("diff", 0.1), ("opt", 0.2)), look=look_for_tv,
           opens=(("tab", "explore"), ("rule", "opt"), ("alpha", 0.2)), decision_map=True),
    Lesson("Token rules: v1, v2, v3 and the accepted set", "Token rules",
           "Token rules decide per token v: they keep an accepted set A of tokens (r(v) = 0) and move the rest of "
           "q's mass onto p, pi(v) = q(v)(1 - r(v)) + eta p(v) with eta = sum_v r(v) q(v). On A, pi(v) >= q(v), so "
           "a proposal from A is verified and kept with probability 1. "
           f"v1 defers v when `{RULES['v1'].defers_when}`, v2 when `{RULES['v2'].defers_when}`, v3 when "
           f"`{RULES['v3'].defers_when}`. Eight tokens, their q and p set in the Sandbox:",
           "The draft's favourite token is one the target rates low. Which of v1, v2 and v3 keep it in A?",
           # alphas at which each rule's accepted set is a part of the eight (v1 and v2 keep all eight at 0.5)
           "sandbox", (("v1", 0.1), ("v2", 0.1), ("v3", 0.5)), look=look_for_sandbox,
           opens=(("tab", "sandbox"), ("rule", "v3"), ("alpha", 0.5))),
    Lesson("The trade-off", "Trade-off",
           "Each alpha is one point: target calls per token (cost) against the target's negative log-likelihood of "
           "the text (lower: text the target finds likelier). The NLL shows how far a rule moves the text from what "
           "the target finds likely, not how good it is: it rewards mode-seeking text, so greedy text can score "
           "below the target's own samples (lossless). The paper measures quality with task metrics (BLEU, "
           "ROUGE-2, accuracy) at matched latency; one prompt and 24 tokens, as here, cannot rank the rules.",
           "Which rule's points lie lowest at the same cost, and does any lie below lossless (the target's own "
           "samples)?",
           "frontier", ("lossless", "chow", "opt", "v3"), max_new_tokens=24, look=look_for_frontier,
           opens=(("tab", "tradeoff"),)),
    Lesson("When it pays: c, gamma, the draft and the measured speed-up", "When it pays",
           "The app's block drafts gamma + 1 proposals (gamma + 1 draft calls), scores all of them in one target "
           "pass (one target call) and verifies them in order, with no bonus token: the paper's Algorithm 4 drafts "
           "gamma and, when all pass, draws a bonus token from pi at the next position, which needs q there, so "
           "here that position is a proposal like the others (docs/spec.md). A run's counters show it: one target "
           "call per block, gamma + 1 draft calls per block (fewer in the last blocks, cut short by the token "
           "limit). It pays when the "
           "tokens a target call yields outweigh the draft's cost, c = (one draft call) / (one target call), "
           "measured here on this machine. Two drafts are timed: a draft model, which runs its own layers and "
           "scores the whole vocabulary, and an EAGLE-3 head, one decoder layer that reads three of the target's "
           "hidden states (already computed by the target's last pass) and scores a draft vocabulary of the tokens "
           "the target writes most. The head's call is cheap: one layer and a small vocabulary. Its q is zero "
           "outside that vocabulary, so such a token is never proposed: where pi wants it, it comes from the "
           "residual (the Sandbox shows a q with zeros).",
           "On this machine, will the cascade finish 48 tokens before the target alone, and with which draft?",
           "timed", (("target", 0.0, "model"), ("v3", 0.5, "model"), ("v3", 0.5, "head")), look=look_for_timed,
           opens=(("tab", "strategies"), ("rule", "v3"), ("alpha", 0.5))),
)


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
    def run(self, index):
        """Lesson ``index``'s prepared run. Outputs: rows HTML, figure, what to look for (progress while it runs)."""
        lesson = LESSONS[index]
        if lesson.kind == "sandbox":
            figure = SandboxHandlers.update(*lesson.rows[-1], *START[0], *START[1], *START[2])[0]
            yield "", figure, LOOK_FOR + lesson.look(lesson.rows)
            return
        if lesson.kind == "frontier":
            s = self.settings(lesson)
            steps = ENGINE.iterate(self.tradeoff.frontier_steps(s, list(lesson.rows), "auto:3"), lesson.tokens)
            rows = yield from mapped(steps, lambda progress: (gr.skip(), gr.skip(),
                                                              f"Running: {progress.tokens} tokens so far…"))
            yield "", self.tradeoff.redraw(rows, "calls", 0.25), LOOK_FOR + lesson.look(rows)
            return
        settings = [self.settings(lesson, *row) for row in lesson.rows]
        pair = self.pairs.get(settings[0].pair_spec)
        if lesson.kind == "rows":
            traces = []
            for traces in ENGINE.iterate(compare_steps(self.pairs, settings), tokens_asked(settings)):
                yield rows_html(traces), gr.skip(), f"Running: {progress_line(traces)}"
            figure = decision_map_figure(traces[-1].positions, *lesson.rows[-1], also=lesson.rows[0]) \
                if lesson.decision_map else gr.skip()
            yield rows_html(traces), figure, LOOK_FOR + lesson.look(pair, traces)
            return
        traces, pairs = [], []  # timed: one after another, so that each run's clock is its own
        for s in settings:
            pairs.append(self.pairs.get(s.pair_spec))
            drafts = [None] + [f"{p.draft_kind} draft" for p in pairs[1:]]
            for trace in ENGINE.iterate(stream(pairs[-1], s.prompt, batches=ENGINE.batches, settings=s),
                                        s.max_new_tokens):
                yield rows_html(traces + [trace], drafts), gr.skip(), f"Running {label(s.rule, s.alpha)}…"
            traces.append(trace)
        yield rows_html(traces, drafts), gr.skip(), LOOK_FOR + lesson.look(pairs, traces)


    @gpu(lambda a: 2 * LESSONS[a["index"]].max_new_tokens)
    def open_block(self, index):
        """The lesson's last row's first block that ends in a rejection (else its first), replayed for the step-through.
        Outputs: block_steps.outputs."""
        lesson = LESSONS[index]
        s = self.settings(lesson, *lesson.rows[-1])
        pair = self.pairs.get(s.pair_spec)
        yield replaying(f"Running {label(s.rule, s.alpha)} to find a block that ends in a rejection…")
        trace = yield from mapped(ENGINE.iterate(stream(pair, s.prompt, batches=ENGINE.batches, settings=s),
                                                 s.max_new_tokens), lambda trace: (gr.skip(),) * 4)
        position = next((i for i, source in enumerate(trace.sources) if source == "replaced"), 0)
        replay = yield from replay_progress(pair, s, position=position)
        yield opened(replay, trace.tokens)


def rows_html(traces, drafts=()):
    """The runs side by side, each named by its rule (and, where given, the draft that ran it)."""
    drafts = list(drafts) + [None] * len(traces)
    return compare_html([(label(t.settings["rule"], t.settings["alpha"]) + (f", {d}" if d else ""), t.positions,
                          t.sources) for t, d in zip(traces, drafts)])


def learn_linked():
    """What a link sets on this tab: the lesson on screen."""
    return Linked("learn", dict(step=1), steps=len(LESSONS))


def build_learn(handlers: LearnHandlers, linked, tabs, link_status, press, values):
    """The lessons in a walkthrough at lesson ``values["step"]``; ``linked``: the other tabs' Linked, which "Open
    it in ..." restores. Returns its field (the lesson on screen) by name."""
    step_box = gr.Number(values["step"], precision=0, visible=False)
    # tabs, not a gr.Walkthrough: a walkthrough disables every step not yet reached, and a reader may start anywhere
    with gr.Tabs(selected=values["step"], elem_id="lessons") as walkthrough:
        for k, lesson in enumerate(LESSONS, 1):
            with gr.Tab(f"{k}. {lesson.short}", id=k, elem_id=f"lesson-{k}") as step:
                gr.Markdown(introduction(k, lesson))
                with gr.Row():
                    run = gr.Button("Show it" if lesson.kind == "sandbox" else "Run it here", variant="primary",
                                    elem_id=f"lesson-{k}-run", scale=0, min_width=160)
                    opened = gr.Button(f"Open it in {TAB_NAMES[dict(lesson.opens)['tab']]}",
                                       elem_id=f"lesson-{k}-open", scale=0, min_width=260)
                rows = gr.HTML("", elem_id=f"lesson-{k}-rows")
                plot = gr.Plot(elem_id=f"lesson-{k}-plot", visible=lesson.kind in ("sandbox", "frontier") or
                               lesson.decision_map, show_label=False)
                look = gr.Markdown(WAITING, elem_id=f"lesson-{k}-look")
                if lesson.steps_through:
                    block = build_block_steps(f"lesson-{k}-block", "Step through one of its blocks")
                    wire_block_steps(block, functools.partial(handlers.open_block, k - 1), None)
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
            run.click(functools.partial(handlers.run, k - 1), None, [rows, plot, look], **GENERATING)
            opened.click(lambda params=lesson.link(): restored(params, linked), None,
                         restore_outputs(linked, tabs, link_status, press), **QUEUED_INSTANT).then(
                None, press, press, js=PRESS_JS)
    return dict(step=step_box)
