"""The Rule sandbox: no model, a vocabulary of eight tokens whose q and p you set, and every number of one
decision, recomputed as a slider moves."""
import json
import time

import gradio as gr

from cascade_core import RULES
from cascade_core.messages import shown
from cascade_core.method.costs import rejection_terms
from cascade_core.method.explain import dissect
from cascade_core.strict_json import dumps

from .api_once import result_next
from .explore_views import View
from .controls import alpha_slider, alpha_slider_range, rule_changed, rule_info
from .links import LinkField, Linked, fraction, listed
from .options import INSTANT, QUEUED_INSTANT
from .streaming import raises_for_client
from .viz.format import html_text
from .viz.sandbox import REST, sandbox_figure, sandbox_html

SIZE = 8
START = (["The", "A", "In", "Once", "It", "This", "My", "other"],
         [0.40, 0.25, 0.15, 0.08, 0.05, 0.04, 0.02, 0.01], [0.10, 0.45, 0.05, 0.20, 0.02, 0.10, 0.05, 0.03])
DEFAULTS = dict(rule="v3", alpha=0.5)  # the page's, and its API's


MOVED = 0.006  # a loaded q or p that moved further (a slider's step is 0.01) is the user's own


def top_tokens(pos, size=SIZE):
    """A trace position as the sandbox's vocabulary: the draft's proposal and the size - 2 likeliest other tokens
    under either model (the trace's top-10s carry both models' probabilities), then REST, the rest of the
    vocabulary with each model's remaining mass. Returns (labels, q, p, rest): ``rest`` what cascade_core's
    dissect needs to treat REST as many tokens, not one (the most any of its tokens has under q and p, and the
    engine's TV and a*, which read the whole vocabulary)."""
    known = {i: (text, q, p) for i, text, p, q in pos["top_p"]}
    known.update({i: (text, q, p) for i, text, q, p in pos["top_q"]})
    known[pos["proposal"]] = (pos["proposal_text"], pos["q_x"], pos["p_x"])
    ids = [pos["proposal"]] + sorted((i for i in known if i != pos["proposal"]),
                                     key=lambda i: -max(known[i][1], known[i][2]))[: size - 2]
    hidden = [known[i] for i in known if i not in ids]
    qs, ps = [known[i][1] for i in ids], [known[i][2] for i in ids]
    # an unlisted token has at most the smallest listed probability of each model's top-10
    rest = dict(q_bound=max([q for _, q, _ in hidden] + [min(prob for _, _, prob, _ in pos["top_q"])]),
                p_bound=max([p for _, _, p in hidden] + [min(prob for _, _, prob, _ in pos["top_p"])]),
                tv=pos["tv"], a_star=pos["a_star"])
    return ([known[i][0] for i in ids] + [REST], qs + [max(0.0, 1 - sum(qs))], ps + [max(0.0, 1 - sum(ps))], rest)


def loaded_position(run, index):
    """What the Sandbox keeps of a loaded position: its vocabulary (top_tokens), the run's settings and what the
    engine did there."""
    pos, settings = run.trace.positions[index], run.trace.settings
    labels, q, p, rest = top_tokens(pos)
    return dict(index=index, labels=labels, q=q, p=p, rest=rest, temperature=settings["temperature"],
                rule=settings["rule"], alpha=settings["alpha"], accept_prob=pos["accept_prob"],
                source=pos["source"], proposal=pos["proposal_text"], position=pos)


def still_loaded(loaded, labels, q, p):
    """Whether the controls still hold the loaded position (labels as loaded, weights within a slider step)."""
    return loaded is not None and list(labels) == loaded["labels"] and all(
        abs(a - b) <= MOVED for a, b in zip(list(q) + list(p), loaded["q"] + loaded["p"]))


def costs(rule, numbers, alpha):
    """The rule's rejection probability and lossless's (cascade_core.method.costs.Rejection, each) at dissect's q and p,
    or None where the Sandbox shows no such comparison: lossy (its lenient keep test is not min(1, pi / q)) and the
    rules without an alpha (lossless itself, the models alone). A loaded position's last entry is the rest of a
    vocabulary, not a token, so the caller passes none there."""
    record = RULES[rule]
    if record.lenience or not record.alpha_used:
        return None
    q, p = numbers["q"], numbers["p"]
    return rejection_terms(rule, q, p, alpha), rejection_terms("lossless", q, p, 0.0)


class SandboxHandlers:
    @staticmethod
    def update(rule, alpha, *cells):
        """cells: SIZE labels, SIZE q weights, SIZE p weights. Outputs: figure, explanation, timing note."""
        return SandboxHandlers.update_loaded(None, rule, alpha, *cells)

    @staticmethod
    def update_loaded(loaded, rule, alpha, *cells):
        """``update``, where the controls may hold a position loaded from Explore's run (``loaded_position``): while
        they do, its last token is the rest of the vocabulary and the numbers are the engine's."""
        start = time.perf_counter()
        labels, q, p = list(cells[:SIZE]), list(cells[SIZE: 2 * SIZE]), list(cells[2 * SIZE:])
        loaded = loaded if still_loaded(loaded, labels, q, p) else None
        if loaded is not None:
            q, p = loaded["q"], loaded["p"]  # exact, not as the sliders round them
        try:
            numbers = dissect(rule, q, p, alpha, rest=loaded and loaded["rest"])
        except ValueError as error:
            return gr.skip(), f'<p class="warning">⚠️ {html_text(error)}</p>', ""
        figure = sandbox_figure(labels, numbers, rule, alpha, alpha_slider_range(rule))
        text = sandbox_html(labels, numbers, rule, alpha, loaded, None if loaded else costs(rule, numbers, alpha))
        return figure, text, f"computed in {(time.perf_counter() - start) * 1000:.0f} ms on the server"

    @staticmethod
    def load(run, index):
        """Explore's run, position index: its vocabulary and its q and p on the sliders, the loaded state, and the
        run's rule and alpha (the slider following the rule, with its explanation)."""
        if run is None or index is None or not 0 <= int(index) < len(run.trace.positions):
            gr.Warning("Run something in Explore first, then give one of its token positions.")
            return [gr.skip()] * (3 * SIZE + 4)
        pos = run.trace.positions[int(index)]
        if not pos["top_q"] or not pos["top_p"]:
            gr.Warning("That token has only one model's distribution: it comes from a baseline run, or it is the "
                       "target's own token (gamma auto's floor), where the draft proposed nothing.")
            return [gr.skip()] * (3 * SIZE + 4)
        loaded = loaded_position(run, int(index))
        return (loaded["labels"] + loaded["q"] + loaded["p"] + [loaded, loaded["rule"]] +
                list(rule_changed(loaded["rule"], loaded["alpha"])))

    @staticmethod
    def stale(run, loaded):
        """A line under Load where Explore's run no longer holds the loaded position (it has run again since)."""
        index = None if loaded is None else loaded["index"]
        if index is None or run is not None and index < len(run.trace.positions) and \
                run.trace.positions[index] == loaded["position"]:
            return ""
        return (f'<p class="warning">⚠️ Explore has run again since this position was loaded: these are the numbers '
                f"of token #{index} of the run before. Load again for the run now shown.</p>")

    @raises_for_client
    def api_sandbox(self, q: list, p: list, rule: str = DEFAULTS["rule"], alpha: float = DEFAULTS["alpha"]) -> str:
        """One decision's numbers for q and p (lists of equal length, normalised here): pi, accept_prob, residual
        (zeros where no rejection can happen), a_star, defers (per token), tv, rejection_prob, and output (the
        probability that the verified token is each token). An engine's keep-set rule (sglang, relaxed, typical) has
        no pi and no residual (null): accept_prob is its keep probability a(v)."""
        numbers = dissect(rule, q, p, alpha)
        result_next()  # sent once, as the call's "complete" (app/api_once.py)
        yield dumps({key: numbers[key] for key in ("pi", "accept_prob", "residual", "a_star", "defers", "tv",
                                                   "rejection_prob", "output")})


def read_weights(name):
    """A link's ``q`` or ``p``: SIZE weights from 0 to 1 (the sliders' range), separated by commas."""
    return lambda text: [fraction(item, name) for item in listed(text, name, SIZE)]


def read_tokens(text):
    """A link's ``tokens``: SIZE labels as a JSON list of strings (a label may hold a comma)."""
    try:
        labels = json.loads(text)
    except (ValueError, RecursionError):
        labels = None
    if not (isinstance(labels, list) and len(labels) == SIZE and all(isinstance(t, str) and len(t) <= 64
                                                                      for t in labels)):
        raise ValueError(f"tokens must be a JSON list of {SIZE} texts of at most 64 characters, got {shown(text)}")
    return labels


def sandbox_linked():
    """What a link sets on this tab (its fields' defaults)."""
    labels, q, p = START
    return Linked("sandbox", dict(tokens=labels, q=q, p=p, **DEFAULTS), rules=tuple(RULES),
                  parsers=dict(tokens=read_tokens, q=read_weights("q"), p=read_weights("p")))


def build_sandbox(handlers, explore, values):
    """The tab, its fields at ``values`` and its numbers drawn for them; returns its fields by name."""
    labels, q, p = values["tokens"], values["q"], values["p"]
    with gr.Row():
        with gr.Column(scale=1, min_width=340):
            rule = gr.Dropdown(list(RULES), value=values["rule"], label="Rule", elem_id="sandbox-rule")
            rule_text = gr.Markdown(rule_info(values["rule"]))
            alpha = alpha_slider(values["rule"], values["alpha"], elem_id="sandbox-alpha")
            gr.Markdown("Token, q (draft) and p (target) weights; each model's weights are normalised.")
            cells = [[], [], []]
            for i in range(SIZE):
                with gr.Row(equal_height=True):
                    cells[0].append(gr.Textbox(labels[i], show_label=False, min_width=70, scale=1,
                                               elem_id=f"sandbox-token-{i}"))
                    cells[1].append(gr.Slider(0, 1, value=q[i], step=0.01, label="q", min_width=110, scale=2,
                                              elem_id=f"sandbox-q-{i}"))
                    cells[2].append(gr.Slider(0, 1, value=p[i], step=0.01, label="p", min_width=110, scale=2,
                                              elem_id=f"sandbox-p-{i}"))
            with gr.Row():
                position = gr.Number(None, precision=0, label="Explore token #", min_width=100,
                                     elem_id="sandbox-position")
                load = gr.Button("Load q and p from Explore's run", elem_id="sandbox-load")
            stale = gr.HTML("", elem_id="sandbox-stale")
        with gr.Column(scale=2):
            # drawn here, not by a load event: that would fetch plotly's 4.6 MB script before the tab is ready
            figure, explanation, _ = handlers.update(values["rule"], alpha.value, *labels, *q, *p)
            plot = gr.Plot(figure, label="One decision", show_label=False, elem_id="sandbox-plot")
            text = gr.HTML(explanation, elem_id="sandbox-text")
            timing = gr.Markdown("", elem_id="sandbox-timing")
    loaded = gr.State(None)  # a position loaded from Explore's run, while the controls hold it
    everything = [loaded, rule, alpha, *cells[0], *cells[1], *cells[2]]
    outputs = [plot, text, timing]
    live = dict(INSTANT, trigger_mode="always_last", show_progress="hidden")
    for control in [alpha, *cells[1], *cells[2]]:
        control.input(handlers.update_loaded, everything, outputs, **live)
    for box in cells[0]:
        box.submit(handlers.update_loaded, everything, outputs, **live)
    rule.input(rule_changed, [rule, alpha], [alpha, rule_text], **INSTANT).then(
        handlers.update_loaded, everything, outputs, **live)
    # the State is set through the queue (a State set outside it fires nothing, and the update reads it next)
    load.click(handlers.load, [explore.run_state, position],
               [*cells[0], *cells[1], *cells[2], loaded, rule, alpha, rule_text],
               **QUEUED_INSTANT).then(handlers.update_loaded, everything, outputs, **live).then(
        handlers.stale, [explore.run_state, loaded], stale, **INSTANT)
    # the answer in Explore changes with every run: the loaded position is marked when it is no longer its run's
    View(*explore.view).answer.change(handlers.stale, [explore.run_state, loaded], stale, trigger_mode="always_last",
                                      **INSTANT)
    return dict(rule=rule, alpha=alpha,
                tokens=LinkField(cells[0], lambda *labels: json.dumps(list(labels), ensure_ascii=False)),
                q=LinkField(cells[1], lambda *q: ",".join(f"{v:g}" for v in q)),
                p=LinkField(cells[2], lambda *p: ",".join(f"{v:g}" for v in p)))
