"""The Compare tab: one prompt, seed and temperature; up to six (rule, alpha) rows side by side on the same random
numbers, with one draft or each draft in turn, streamed from the engine, aligned by position; a click on a row opens
it in Explore."""
from dataclasses import dataclass

import gradio as gr

from cascade_core import RULES, get_rule, stream, stream_batch
from cascade_core.decoding.batch_block import run_prices
from cascade_core.formats.loading import DRAFT_KINDS
from cascade_core.messages import shown
from cascade_core.method.costs import speedup_over_target
from sweeps.alphas import auto_alphas, proposed_a_stars
from sweeps.quality import target_nll, target_view

from .controls import check_budget, draft_control, run_controls, run_defaults
from .explore import special_ids
from .explore_layout import NOT_OPENED, opened_in_explore
from .gpu import gpu
from .links import LinkField, Linked, listed
from .options import GENERATING, INSTANT, example_prompts
from .pairs import DRAFT_CHOICES, drafts_with_a_head, pair_default_draft
from .settings import AppSettings, number
from .streaming import event_index, progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz.compare import compare_html, compare_stats_markdown
from .viz.format import html_text, plural
from .worker import ENGINE, advance

MAX_ROWS = 6
SAME_DEFERRAL = "lossless vs opt vs v3 vs chow at about the same deferral rate"
PRESETS = {
    SAME_DEFERRAL: None,  # placed by a pilot run of this prompt: each rule's alpha at half deferral
    "v3 as alpha grows": [("v3", a) for a in (0.1, 0.3, 0.5, 0.7, 0.9)],
    "the paper's six rules": [("chow", 0.5), ("diff", 0.1), ("opt", 0.2), ("v1", 0.2), ("v2", 0.2), ("v3", 0.5)],
    "baselines and speculative decoding": [("target", 0.0), ("draft", 0.0), ("lossless", 0.0), ("lossy", 0.5)],
}
FIRST = "the paper's six rules"
DEFAULTS = run_defaults()  # the page's, and its API's
# Beside one draft, Compare can run every row with each draft kind, side by side (the draft model's row, then the
# head's): which draft suits a rule, on the same random numbers.
EACH_DRAFT = "each"
COMPARE_DRAFT_CHOICES = DRAFT_CHOICES + [("each draft, side by side (every row twice)", EACH_DRAFT)]


def label(rule, alpha):
    return f"{rule} alpha {alpha:g}" if RULES[rule].alpha_used else rule


def row_drafts(draft):
    """The drafts every row runs with: the one chosen, or with EACH_DRAFT every kind in turn."""
    return list(DRAFT_KINDS) if draft == EACH_DRAFT else [draft]


@dataclass(frozen=True)
class Row:
    """A Compare row: its run's settings, the draft it runs with and its name on the page."""

    settings: AppSettings
    draft: str
    name: str


def row_stats(pair, trace, name=None):
    """The numbers Compare shows beside a row (named ``name``, by default its rule): its mean TV to the target, the
    target's NLL of its text as a diagnostic (a draft-only row's take a pass of the models: target_view), and its
    speed-up over the target alone priced with its own draft's calls as measured here (costs.speedup_over_target,
    Explore's number for the same text), with that draft's measured c."""
    stats, s = trace.stats, trace.settings
    p_tokens, _, tv = target_view(pair, trace)
    prices = run_prices(pair, trace.gamma)
    return dict(label=name or label(s["rule"], s["alpha"]), target_calls=stats["target_calls"],
                deferral_rate=stats["deferral_rate"], acceptance_rate=stats["acceptance_rate"], tv_to_target=tv,
                target_nll=target_nll(p_tokens), c=None if prices is None or s["rule"] == "target" else prices.c,
                speedup=speedup_over_target(trace.sources, s["rule"], trace.gamma, prices))


def compare_steps(pairs, settings):
    """Every row on the batch of its pair (cascade_core's batched engine: each row is its solo run); rows of two
    pairs (one row per draft) make two batches, which take a block each in turn. ``pairs``: a PairCache. Yields all
    the traces, in row order, growing together, after every round of blocks and returns them."""
    specs = list(dict.fromkeys(s.pair_spec for s in settings))
    going = {spec: stream_batch(pairs.get(spec), [dict(prompt=s.prompt, settings=s)
                                                  for s in settings if s.pair_spec == spec], gamma=settings[0].gamma,
                              batches=ENGINE.batches)
             for spec in specs}
    latest = {}
    while going:
        for spec, batch in list(going.items()):
            finished, latest[spec] = advance(batch)
            if finished:
                del going[spec]
        ordered = {spec: iter(traces) for spec, traces in latest.items()}
        traces = [next(ordered[s.pair_spec]) for s in settings]
        if going:
            yield traces
    return traces


def runnable(pairs, rows):
    """(the rows that can run, {row number: why not} for the rest): draft-only needs a draft that runs alone (an
    EAGLE-3 head reads the target's hidden states). With nothing left to run, the sentence is the error. A prompt
    too long for its pair's context is refused here, before the engine's thread tokenizes it."""
    for row in rows:
        row.settings.for_pair(pairs.get(row.settings.pair_spec))
    drafting = {i: pairs.get(row.settings.pair_spec).drafting for i, row in enumerate(rows, 1)}
    skipped = {i: f"row {i} ({row.name}) needs a draft that runs alone, and this row's draft is "
                  f"{drafting[i].described}; choose the draft model for it"
               for i, row in enumerate(rows, 1) if row.settings.rule == "draft" and not drafting[i].runs_alone}
    if len(skipped) == len(rows):
        raise ValueError(next(iter(skipped.values())))
    return [row for i, row in enumerate(rows, 1) if i not in skipped], skipped


def skipped_text(skipped):
    return "".join(f" Not run: {why}." for why in skipped.values())


def progress_line(traces):
    """Where a Compare call is: tokens so far of all rows, and rows finished."""
    done = sum(t.finished for t in traces)
    return (f"{sum(len(t.positions) for t in traces)} of {sum(t.settings['max_new_tokens'] for t in traces)} "
            f"tokens; {done} of {len(traces)} rows finished…")


def tokens_asked(settings):
    """The tokens a Compare call may generate: its runs x max_new_tokens."""
    return len(settings) * settings[0].max_new_tokens


def run_call_tokens(arguments):
    """For @gpu: the tokens a call of ``run`` may generate, from its arguments (the row cells and the draft)."""
    rows = sum(1 for rule in arguments["cells"][::2] if rule)
    return rows * len(row_drafts(arguments["draft"])) * arguments["max_new_tokens"]


def with_heads_only(arguments):
    """For @gpu: whether every run of a call drafts with an EAGLE-3 head."""
    return all(drafts_with_a_head(arguments["self"].default_pair_spec, draft)
               for draft in row_drafts(arguments["draft"]))


def compare_draft(text):
    """A link's ``draft`` on this tab: a draft kind, or each of them."""
    if text not in (*DRAFT_KINDS, EACH_DRAFT):
        raise ValueError(f"draft must be model (the draft model), head (the EAGLE-3 head) or {EACH_DRAFT} (every row "
                         f"with each), got {shown(text)}")
    return text


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

    def rows(self, prompt, draft, cells, gamma, temperature, seed, max_new_tokens):
        """One checked Row per (rule, alpha) of ``cells`` (empty rules skipped) and per draft (``draft``, or
        EACH_DRAFT: every kind, side by side). A bad row is named by its number; two rows that are the same run are
        refused."""
        cells = [(i, rule, alpha) for i, (rule, alpha) in enumerate(cells, 1) if rule]
        if not 1 <= len(cells) <= MAX_ROWS:
            raise ValueError(f"rows: give 1 to {MAX_ROWS} (rule, alpha) rows, got {len(cells)}")
        drafts, rows, seen = row_drafts(draft), [], {}
        for i, rule, alpha in cells:
            try:
                runs = [AppSettings.from_inputs(prompt, self.default_pair_spec, True, rule, alpha, gamma, temperature,
                                             max_new_tokens, seed, draft=each) for each in drafts]
            except ValueError as error:
                raise ValueError(f"row {i}: {error}") from None
            key = row_key(runs[0].rule, runs[0].alpha)
            if key in seen:
                raise ValueError(f"rows {seen[key]} and {i} are the same run ({label(*key)}); "
                                 "give each row another rule or alpha")
            seen[key] = i
            rows += [Row(s, each, label(s.rule, s.alpha) + (f", {each} draft" if len(drafts) > 1 else ""))
                     for s, each in zip(runs, drafts)]
        check_budget(len(rows), rows[0].settings.max_new_tokens, "rows")
        return rows

    @warns_in_page(lambda message: (gr.skip(), gr.skip(), gr.skip(), message))
    @gpu(run_call_tokens, with_heads_only)
    def run(self, prompt, draft, gamma, temperature, seed, max_new_tokens, *cells):
        """Stream the rows together, block by block. Outputs: the runs' state ([(Row, Trace)]), rows HTML, stats,
        status."""
        rows, skipped = runnable(self.pairs, self.rows(prompt, draft, list(zip(cells[::2], cells[1::2])), gamma,
                                                       temperature, seed, max_new_tokens))
        settings, traces = [row.settings for row in rows], []
        special = frozenset().union(*(special_ids(self.pairs.get(s.pair_spec)) for s in settings))
        for traces in ENGINE.iterate(compare_steps(self.pairs, settings), tokens_asked(settings)):
            shown = [(row.name, t.positions, t.sources) for row, t in zip(rows, traces)]
            yield gr.skip(), compare_html(shown, special), gr.skip(), progress_line(traces)
        stats = [ENGINE.call(row_stats, self.pairs.get(row.settings.pair_spec), t, row.name)
                 for row, t in zip(rows, traces)]
        yield (list(zip(rows, traces)), gr.skip(), compare_stats_markdown(stats),
               f"Done: {plural(len(traces), 'row')}.{skipped_text(skipped)}")

    @gpu(lambda a: a["max_new_tokens"],
         lambda a: drafts_with_a_head(a["self"].default_pair_spec, row_drafts(a["draft"])[0]))
    def preset(self, name, prompt, draft, gamma, temperature, max_new_tokens):
        """The rows of a preset, as values for the 2 x MAX_ROWS row controls (unchanged after bad input); a preset
        placed by a pilot run yields no change while the pilot runs, block by block."""
        rows = PRESETS.get(name, [])
        if rows is None:
            try:
                s = AppSettings.from_inputs(prompt, self.default_pair_spec, True, "lossless", 0.0, gamma, temperature,
                                         max_new_tokens, 0, draft=row_drafts(draft)[0])
                pilot = None
                pilot_steps = stream(self.pairs.get(s.pair_spec), s.prompt, batches=ENGINE.batches,
                                     settings=s)
                for pilot in ENGINE.iterate(pilot_steps, s.max_new_tokens):
                    yield [gr.skip()] * (2 * MAX_ROWS)
            except ValueError as error:
                gr.Warning(html_text(error))
                yield [gr.skip()] * (2 * MAX_ROWS)
                return
            rows = [("lossless", 0.0)] + [(r, auto_alphas(r, proposed_a_stars(r, pilot.positions), 3)[1])
                                          for r in ("opt", "v3", "chow")]
        yield preset_cells(rows)

    @staticmethod
    def open_row(runs, event: gr.EventData):
        """A clicked row's settings for Explore (its tab selected), or nothing when no row was clicked. ``runs``:
        the tab's [(Row, Trace)]."""
        index = event_index(event, "row")
        if not runs or not 0 <= index < len(runs):
            return NOT_OPENED
        row, trace = runs[index]
        s = trace.settings
        return opened_in_explore(trace.prompt, row.draft, s["rule"], s["alpha"], s["gamma"], s["temperature"],
                                 s["max_new_tokens"], s["seed"]) + [gr.Tabs(selected="explore")]

    @raises_for_client
    def api_compare(self, prompt: str, rows: list, gamma: int = DEFAULTS["gamma"],
                    temperature: float = DEFAULTS["temperature"], max_new_tokens: int = DEFAULTS["max_new_tokens"],
                    seed: int = 0, draft: str = "", request: gr.Request = None) -> str:
        """Every row of rows ([{"rule": ..., "alpha": ...}]) on the app's default pair with ``draft`` ("model",
        "head", "each" for every row with each of them in turn, or empty for the page's default), at the page's
        defaults. Its last value is a JSON list of traces, one per row and draft, each what /run returns for that
        row with its "draft" added (a draft-only row with an EAGLE-3 head: {"rule", "alpha", "draft", "skipped":
        the sentence why}); before that it streams {"generating": {"rows": n, "finished": k, "tokens": t (all
        rows'), "max_new_tokens": m (each row's)}} as /run does."""
        if isinstance(rows, list) and len(rows) > MAX_ROWS:  # first: a long list costs its length to look through
            raise ValueError(f"rows: give 1 to {MAX_ROWS} (rule, alpha) rows, got {len(rows)}")
        if not isinstance(rows, list) or not all(isinstance(r, dict) and "rule" in r for r in rows):
            raise ValueError(f"rows must be a list of {{\"rule\": ..., \"alpha\": ...}} objects, got {shown(rows)}")
        asked = self.rows(prompt, draft or self.default_draft, [(r["rule"], r.get("alpha", 0.0)) for r in rows],
                          gamma, temperature, seed, max_new_tokens)
        yield from read_or_stopped(self._compare_messages(asked), self.unread, request)

    @gpu(lambda a: tokens_asked([row.settings for row in a["asked"]]),
         lambda a: all(drafts_with_a_head(row.settings.pair_spec) for row in a["asked"]))
    def _compare_messages(self, asked):
        rows, skipped = runnable(self.pairs, asked)
        settings = [row.settings for row in rows]

        def progress(traces):
            return {"rows": len(traces), "finished": sum(t.finished for t in traces),
                    "tokens": sum(len(t.positions) for t in traces), "max_new_tokens": settings[0].max_new_tokens}

        def result(traces):
            done = iter(traces)
            return [dict(rule=row.settings.rule, alpha=row.settings.alpha, draft=row.draft, skipped=skipped[i])
                    if i in skipped else dict(next(done).to_dict(), draft=row.draft) for i, row in enumerate(asked, 1)]

        yield from progress_messages(compare_steps(self.pairs, settings), tokens_asked(settings), progress, result)


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
                  "compare-run", parsers=dict(rows=read_rows, draft=compare_draft))


def build_compare(handlers, explore, tabs, values):
    """The tab, its fields at ``values``; returns them by name."""
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(label="Prompt", lines=2, value=values["prompt"], elem_id="compare-prompt")
            draft = draft_control(values["draft"], "compare-draft", COMPARE_DRAFT_CHOICES)
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
            run = gr.Button("Compare", variant="primary", elem_id="compare-run")
            status = gr.Markdown("", elem_id="compare-status")
        with gr.Column(scale=2):
            rows = gr.HTML("", elem_id="compare-rows", js_on_load=ROWS_JS)
            stats = gr.Markdown("", elem_id="compare-stats")
    runs = gr.State(None)
    inputs = [prompt, draft, gamma, temperature, seed, max_new_tokens, *cells]
    preset.input(handlers.preset, [preset, prompt, draft, gamma, temperature, max_new_tokens], cells,
                 **GENERATING).then(
        handlers.run, inputs, [runs, rows, stats, status], **GENERATING)
    run.click(handlers.run, inputs, [runs, rows, stats, status], **GENERATING)
    explore.after_run(rows.click(handlers.open_row, runs, explore.opened + [tabs], **INSTANT).then(
        explore.handlers.run, explore.settings, explore.view, **GENERATING))
    return dict(prompt=prompt, draft=draft, rows=LinkField(cells, rows_text), gamma=gamma, temperature=temperature,
                seed=seed, max_new_tokens=max_new_tokens)
