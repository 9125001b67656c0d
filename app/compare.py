"""The Compare tab: one prompt, seed and temperature; up to six (rule, alpha) rows side by side on the same random
numbers, streamed from the engine, aligned by position; a click on a row opens it in Explore."""
import gradio as gr

from cascade_core import RULES, get_rule, stream, stream_batch
from cascade_core.costs import expected_speedup
from cascade_core.values import shown
from sweeps.alphas import auto_alphas
from sweeps.quality import target_nll, target_probabilities

from .controls import Settings, check_budget, draft_control, run_controls, run_defaults
from .explore import NOT_OPENED, opened_in_explore
from .gpu import gpu
from .links import LinkField, Linked, listed, number
from .options import GENERATING, INSTANT, example_prompts
from .pairs import drafts_with_a_head, pair_default_draft
from .streaming import event_index, progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz.compare import compare_html, compare_stats_markdown
from .viz.format import html_text
from .worker import ENGINE

MAX_ROWS = 6
SAME_DEFERRAL = "lossless vs opt vs v3 vs chow at about the same deferral rate"
PRESETS = {
    SAME_DEFERRAL: None,  # placed by a pilot run of this prompt: each rule's alpha at half deferral
    "v3 as alpha grows": [("v3", a) for a in (0.1, 0.3, 0.5, 0.7, 0.9)],
    "the paper's six rules": [("chow", 0.5), ("diff", 0.1), ("opt", 0.2), ("v1", 0.2), ("v2", 0.2), ("v3", 0.5)],
    "baselines and speculative decoding": [("target", 0.0), ("draft", 0.0), ("lossless", 0.0), ("lossy", 0.5)],
}
FIRST = "the paper's six rules"
DEFAULTS = run_defaults(max_new_tokens=48)  # the page's, and its API's


def label(rule, alpha):
    return f"{rule} alpha {alpha:g}" if RULES[rule].alpha_used else rule


def row_stats(pair, trace, c):
    """The numbers Compare shows beside a row."""
    stats, s = trace.stats, trace.settings
    if s["rule"] == "draft":  # the target never ran: its view of the text takes one pass
        p_tokens = target_probabilities(pair, trace.prompt_ids, trace.tokens)[0]
    else:
        p_tokens = [pos["p_token"] for pos in trace.positions]
    acceptance = stats["acceptance_rate"]
    return dict(label=label(s["rule"], s["alpha"]), target_calls=stats["target_calls"],
                deferral_rate=stats["deferral_rate"], acceptance_rate=acceptance, target_nll=target_nll(p_tokens), c=c,
                speedup=None if acceptance is None else expected_speedup(acceptance, s["gamma"], c, s["gamma"] + 1))


def compare_steps(pair, settings):
    """Every row in one batch (cascade_core's batched engine: each row is its solo run): yields all the traces,
    growing together, after every block and returns them."""
    return (yield from stream_batch(pair, [dict(prompt=s.prompt, **s.row_kwargs()) for s in settings],
                                    gamma=settings[0].gamma))


def runnable(pair, settings):
    """(the rows this pair can run, {row number: why not} for the rest): draft-only needs a draft that runs alone,
    and an EAGLE-3 head reads the target's hidden states. With nothing left to run, the sentence is the error."""
    if pair.draft_kind != "head":
        return settings, {}
    skipped = {i: f"row {i} ({label(s.rule, s.alpha)}) needs a draft that runs alone, and this pair's draft is an "
                  "EAGLE-3 head, which reads the target's hidden states; choose the draft model for it"
               for i, s in enumerate(settings, 1) if s.rule == "draft"}
    if len(skipped) == len(settings):
        raise ValueError(next(iter(skipped.values())))
    return [s for i, s in enumerate(settings, 1) if i not in skipped], skipped


def skipped_text(skipped):
    return "".join(f" Not run: {why}." for why in skipped.values())


def progress_line(traces):
    """Where a Compare call is: tokens so far of all rows, and rows finished."""
    done = sum(t.finished for t in traces)
    return (f"{sum(len(t.positions) for t in traces)} of {sum(t.settings['max_new_tokens'] for t in traces)} "
            f"tokens; {done} of {len(traces)} rows finished…")


def tokens_asked(settings):
    """The tokens a Compare call may generate: its rows x max_new_tokens."""
    return len(settings) * settings[0].max_new_tokens


def row_key(rule, alpha):
    """What makes two rows the same run: the rule, and alpha where the rule reads it."""
    return rule, alpha if RULES[rule].alpha_used else None


def preset_cells(rows):
    rows = rows + [("", 0.0)] * (MAX_ROWS - len(rows))
    return [value for rule, alpha in rows for value in (rule, alpha)]


class CompareHandlers:
    def __init__(self, pairs, default_pair_spec, unread=lambda session_hash: 0):
        self.pairs, self.default_pair_spec, self.unread = pairs, default_pair_spec, unread
        self.default_draft = pair_default_draft(default_pair_spec)

    def settings(self, prompt, draft, rows, gamma, temperature, seed, max_new_tokens):
        """One checked Settings per row; rows: [(rule, alpha)] (empty rules skipped), all with ``draft``. A bad row
        is named by its number; two rows that are the same run are refused."""
        rows = [(i, rule, alpha) for i, (rule, alpha) in enumerate(rows, 1) if rule]
        if not 1 <= len(rows) <= MAX_ROWS:
            raise ValueError(f"rows: give 1 to {MAX_ROWS} (rule, alpha) rows, got {len(rows)}")
        settings, seen = [], {}
        for i, rule, alpha in rows:
            try:
                s = Settings.from_inputs(prompt, self.default_pair_spec, True, rule, alpha, gamma, temperature,
                                         max_new_tokens, seed, draft=draft)
            except ValueError as error:
                raise ValueError(f"row {i}: {error}") from None
            key = row_key(s.rule, s.alpha)
            if key in seen:
                raise ValueError(f"rows {seen[key]} and {i} are the same run ({label(s.rule, s.alpha)}); "
                                 "give each row another rule or alpha")
            seen[key] = i
            settings.append(s)
        check_budget(len(settings), settings[0].max_new_tokens, "rows")
        return settings

    @warns_in_page(lambda message: (gr.skip(), gr.skip(), gr.skip(), message))
    @gpu(lambda a: sum(1 for rule in a["cells"][::2] if rule) * a["max_new_tokens"],
         lambda a: drafts_with_a_head(a["self"].default_pair_spec, a["draft"]))
    def run(self, prompt, draft, gamma, temperature, seed, max_new_tokens, cost_ratio, *cells):
        """Stream the rows together, block by block. Outputs: traces state, rows HTML, stats, status."""
        settings = self.settings(prompt, draft, list(zip(cells[::2], cells[1::2])), gamma, temperature, seed,
                                 max_new_tokens)
        pair = self.pairs.get(settings[0].pair_spec)
        settings, skipped = runnable(pair, settings)
        traces = []
        for traces in ENGINE.iterate(compare_steps(pair, settings), tokens_asked(settings)):
            yield (gr.skip(), compare_html([(label(t.settings["rule"], t.settings["alpha"]), t.positions, t.sources)
                                            for t in traces]), gr.skip(),
                   progress_line(traces))
        stats = [ENGINE.call(row_stats, pair, t, cost_ratio) for t in traces]
        yield traces, gr.skip(), compare_stats_markdown(stats), f"Done: {len(traces)} rows.{skipped_text(skipped)}"

    @gpu(lambda a: a["max_new_tokens"], lambda a: drafts_with_a_head(a["self"].default_pair_spec, a["draft"]))
    def preset(self, name, prompt, draft, gamma, temperature, max_new_tokens):
        """The rows of a preset, as values for the 2 x MAX_ROWS row controls (unchanged after bad input); a preset
        placed by a pilot run yields no change while the pilot runs, block by block."""
        rows = PRESETS.get(name, [])
        if rows is None:
            try:
                s = Settings.from_inputs(prompt, self.default_pair_spec, True, "lossless", 0.0, gamma, temperature,
                                         max_new_tokens, 0, draft=draft)
                pilot = None
                pilot_steps = stream(self.pairs.get(s.pair_spec), s.prompt, **s.engine_kwargs())
                for pilot in ENGINE.iterate(pilot_steps, s.max_new_tokens):
                    yield [gr.skip()] * (2 * MAX_ROWS)
            except ValueError as error:
                gr.Warning(html_text(error))
                yield [gr.skip()] * (2 * MAX_ROWS)
                return
            rows = [("lossless", 0.0)] + [(r, auto_alphas(r, [p["a_star"][r] for p in pilot.positions], 3)[1])
                                          for r in ("opt", "v3", "chow")]
        yield preset_cells(rows)

    @staticmethod
    def open_row(traces, draft, event: gr.EventData):
        """A clicked row's settings for Explore (its tab selected), or nothing when no row was clicked."""
        index = event_index(event, "row")
        if not traces or not 0 <= index < len(traces):
            return NOT_OPENED
        s, trace = traces[index].settings, traces[index]
        return opened_in_explore(trace.prompt, draft, s["rule"], s["alpha"], s["gamma"], s["temperature"],
                                 s["max_new_tokens"], s["seed"]) + [gr.Tabs(selected="explore")]

    @raises_for_client
    def api_compare(self, prompt: str, rows: list, gamma: int = DEFAULTS["gamma"],
                    temperature: float = DEFAULTS["temperature"], seed: int = 0,
                    max_new_tokens: int = DEFAULTS["max_new_tokens"], draft: str = "",
                    request: gr.Request = None) -> str:
        """Every row of rows ([{"rule": ..., "alpha": ...}]) on the app's default pair with ``draft`` ("model",
        "head", or empty for the page's default), at the page's defaults. Its last value is a JSON list of traces,
        each what /run returns for that row (a draft-only row with an EAGLE-3 head: {"rule", "alpha", "skipped":
        the sentence why}); before that it streams {"generating": {"rows": n, "finished": k,
        "tokens": t (all rows'), "max_new_tokens": m (each row's)}} as /run does."""
        if not isinstance(rows, list) or not all(isinstance(r, dict) and "rule" in r for r in rows):
            raise ValueError(f"rows must be a list of {{\"rule\": ..., \"alpha\": ...}} objects, got {shown(rows)}")
        settings = self.settings(prompt, draft or self.default_draft, [(r["rule"], r.get("alpha", 0.0)) for r in rows],
                                 gamma, temperature, seed, max_new_tokens)
        yield from read_or_stopped(self._compare_messages(settings), self.unread, request)

    @gpu(lambda a: tokens_asked(a["settings"]), lambda a: drafts_with_a_head(a["settings"][0].pair_spec))
    def _compare_messages(self, settings):
        def progress(traces):
            return {"rows": len(traces), "finished": sum(t.finished for t in traces),
                    "tokens": sum(len(t.positions) for t in traces), "max_new_tokens": settings[0].max_new_tokens}

        asked, pair = settings, self.pairs.get(settings[0].pair_spec)
        settings, skipped = runnable(pair, asked)

        def result(traces):
            done = iter(traces)
            return [dict(rule=s.rule, alpha=s.alpha, skipped=skipped[i]) if i in skipped else next(done).to_dict()
                    for i, s in enumerate(asked, 1)]

        yield from progress_messages(compare_steps(pair, settings), tokens_asked(settings), progress, result)


ROWS_JS = """
element.addEventListener('click', (event) => {
  const row = event.target.closest('.row-label');
  if (row) trigger('click', {row: Number(row.dataset.row)});
});
"""


def rows_text(*cells):
    """A link's ``rows`` from the row controls (rule, alpha, ...): 'chow:0.5,lossless,v3:0.5'."""
    return ",".join(rule if not RULES[rule].alpha_used else f"{rule}:{float(alpha or 0.0):g}"
                    for rule, alpha in zip(cells[::2], cells[1::2]) if rule)


def read_rows(text):
    """A link's ``rows`` as [(rule, alpha)], each checked as a row of the tab is, or a ValueError naming it."""
    rows = []
    for i, item in enumerate(listed(text, "rows"), 1):
        rule, _, alpha = item.partition(":")
        try:
            alpha = number(alpha, "alpha") if alpha else 0.0
            get_rule(rule).check_alpha(alpha)
        except ValueError as error:
            raise ValueError(f"rows: row {i} ({shown(item)}): {error}") from None
        rows.append((rule, alpha))
    if not 1 <= len(rows) <= MAX_ROWS:
        raise ValueError(f"rows: give 1 to {MAX_ROWS} rows as rule:alpha separated by commas, got {len(rows)}")
    return rows


def compare_linked(draft):
    """What a link sets on this tab (its fields' defaults; ``draft``: the app's default draft)."""
    return Linked("compare", dict(prompt=example_prompts()[0], draft=draft, rows=PRESETS[FIRST], **DEFAULTS),
                  "compare-run", parsers=dict(rows=read_rows))


def build_compare(handlers, explore, tabs, values):
    """The tab, its fields at ``values``; returns them by name."""
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(label="Prompt", lines=2, value=values["prompt"], elem_id="compare-prompt")
            draft = draft_control(values["draft"], "compare-draft")
            named = next((name for name, rows in PRESETS.items() if rows == values["rows"]), None)
            preset = gr.Dropdown(list(PRESETS), value=named, label="Preset rows (choosing one runs it)",
                                 elem_id="compare-preset")
            cell_values, cells = preset_cells(list(values["rows"])), []
            for i in range(MAX_ROWS):
                with gr.Row():
                    cells.append(gr.Dropdown([""] + list(RULES), value=cell_values[2 * i], label=f"row {i + 1}: rule",
                                             elem_id=f"compare-rule-{i}", min_width=120))
                    cells.append(gr.Number(cell_values[2 * i + 1], label="alpha", elem_id=f"compare-alpha-{i}",
                                           min_width=80))
            gamma, temperature, max_new_tokens, seed = run_controls(values)
            cost_ratio = gr.Slider(0.01, 1.0, value=0.25, step=0.01,
                                   label="c for the paper's speed-up estimate (a verification priced as one target "
                                         "token; Explore prices a run with this machine's measured calls)")
            run = gr.Button("Compare", variant="primary", elem_id="compare-run")
            status = gr.Markdown("", elem_id="compare-status")
        with gr.Column(scale=2):
            rows = gr.HTML("", elem_id="compare-rows", js_on_load=ROWS_JS)
            stats = gr.Markdown("", elem_id="compare-stats")
    traces = gr.State(None)
    inputs = [prompt, draft, gamma, temperature, seed, max_new_tokens, cost_ratio, *cells]
    preset.input(handlers.preset, [preset, prompt, draft, gamma, temperature, max_new_tokens], cells,
                 **GENERATING).then(
        handlers.run, inputs, [traces, rows, stats, status], **GENERATING)
    run.click(handlers.run, inputs, [traces, rows, stats, status], **GENERATING)
    rows.click(handlers.open_row, [traces, draft], explore.opened + [tabs], **INSTANT).then(
        explore.handlers.run, explore.settings, explore.view, **GENERATING)
    return dict(prompt=prompt, draft=draft, rows=LinkField(cells, rows_text), gamma=gamma, temperature=temperature,
                seed=seed, max_new_tokens=max_new_tokens)
