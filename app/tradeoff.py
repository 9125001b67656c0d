"""The Trade-off tab: for the current prompt, the frontier the selected rules trace as alpha sweeps (the sweeps
package, with prefix sharing and progress); or a prompt set's frontier from a sweep's rows.jsonl."""
import json
import queue

import gradio as gr

from cascade_core import RULES
from cascade_core.strict_json import dumps
from sweeps import sweep
from sweeps.figures import frontier_figure
from sweeps.report import summarise

from .callbacks import raises_for_client, warns_in_page
from .controls import Settings, run_controls
from .explore import opened_in_explore
from .gpu import gpu
from .options import GENERATING, INSTANT, example_prompts
from .worker import ENGINE

RULE_CHOICES = [r for r in RULES if RULES[r].kind != "baseline"] + ["target"]
DEFAULT_RULES = ["lossless", "chow", "opt", "v3"]


class Stopped(Exception):
    """The page asked for no more chains (Stop, or the visitor left)."""


def point_choices(rows):
    return [(f"{r['rule']}" + ("" if r["alpha"] is None else f" alpha {r['alpha']:g}"), i)
            for i, r in enumerate(summarise(rows))]


class TradeoffHandlers:
    def __init__(self, pairs, default_pair_spec):
        self.pairs, self.default_pair_spec = pairs, default_pair_spec

    def settings(self, prompt, rules, gamma, temperature, seed, max_new_tokens):
        """The run settings, checked as Explore checks them (the first rule stands in for all)."""
        if not rules or not all(isinstance(r, str) for r in rules):
            raise ValueError(f"rules: choose at least one of {', '.join(RULE_CHOICES)}, got {rules!r}")
        return Settings.from_inputs(prompt, self.default_pair_spec, True, "lossless", 0.0, gamma, temperature,
                                    max_new_tokens, seed)

    def frontier_rows(self, s, rules, alphas, share_prefix=True, progress=None):
        item = dict(prompt=s.prompt, prompt_id="0", category=None, reference=None, answer=None)
        return sweep(s.pair_spec, [item], rules, alphas, [s.seed], gamma=s.gamma, temperature=s.temperature,
                     max_new_tokens=s.max_new_tokens, share_prefix=share_prefix, progress=progress,
                     pair=self.pairs.get(s.pair_spec))

    @warns_in_page(lambda message: (gr.skip(), gr.skip(), gr.skip(), message))
    @gpu
    def run(self, prompt, rules, alphas, gamma, temperature, seed, max_new_tokens, share_prefix, x_axis, c):
        """Outputs: rows state, figure, point chooser, status."""
        s = self.settings(prompt, rules, gamma, temperature, seed, max_new_tokens)
        messages, stop = queue.Queue(), []

        def progress(done, total, rows):
            if stop:
                raise Stopped
            messages.put(f"{done} of {total} chains done ({rows[0]['rule']}: {len(rows)} alphas)…")

        future = ENGINE.submit(self.frontier_rows, s, rules, alphas, bool(share_prefix), progress)
        try:
            yield gr.skip(), gr.skip(), gr.skip(), "Placing the alphas with a pilot run…"
            while not future.done():
                try:
                    yield gr.skip(), gr.skip(), gr.skip(), messages.get(timeout=0.25)
                except queue.Empty:
                    pass
        finally:
            stop.append(True)  # a closed page stops the sweep after its current chain
        rows = future.result()
        figure = frontier_figure(summarise(rows), x_axis, "target_nll", c)
        generated = sum(r["generated_tokens"] for r in rows)
        yield (rows, figure, gr.update(choices=point_choices(rows), value=None),
               f"Done: {len(rows)} runs, {sum(r['tokens'] for r in rows)} tokens in them, {generated} generated.")

    @staticmethod
    def redraw(rows, x_axis, c):
        return gr.skip() if not rows else frontier_figure(summarise(rows), x_axis, "target_nll", c)

    @staticmethod
    def open_point(rows, index, prompt, gamma, temperature, seed, max_new_tokens):
        if not rows or index is None:
            gr.Warning("Run the trade-off first, then choose one of its points.")
            return [gr.skip()] * 9
        point = summarise(rows)[int(index)]
        return opened_in_explore(prompt, point["rule"], point["alpha"] or 0.0, gamma, temperature, max_new_tokens,
                                 seed) + [gr.Tabs(selected="explore")]

    @staticmethod
    def upload(file, x_axis, c):
        """A sweep's rows.jsonl: the prompt set's frontier, means with 95% intervals."""
        if file is None:
            return gr.skip(), gr.skip(), ""
        try:
            rows = [json.loads(line) for line in open(file, encoding="utf-8") if line.strip()]
            title = f"{len({r['prompt_id'] for r in rows})} prompts, {len(rows)} rows: means with 95% intervals"
            return rows, frontier_figure(summarise(rows), x_axis, "target_nll", c, title), f"Loaded {len(rows)} rows."
        except (ValueError, KeyError, TypeError) as error:
            return gr.skip(), gr.skip(), f"⚠️ not a sweep's rows.jsonl: {type(error).__name__}: {error}"

    @raises_for_client
    def api_frontier(self, prompt: str, rules: list, alphas: str = "auto:6", seed: int = 0, gamma: int = 4,
                     temperature: float = 1.0, max_new_tokens: int = 48) -> str:
        """For one prompt on the app's default pair: one row per (rule, alpha), as sweeps.sweep makes them (JSON)."""
        s = self.settings(prompt, rules, gamma, temperature, seed, max_new_tokens)
        yield dumps(ENGINE.call(self.frontier_rows, s, rules, alphas))


def build_tradeoff(handlers, explore, tabs):
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(label="Prompt", lines=2, value=example_prompts()[0], elem_id="tradeoff-prompt")
            rules = gr.CheckboxGroup(RULE_CHOICES, value=DEFAULT_RULES, label="Rules", elem_id="tradeoff-rules")
            alphas = gr.Textbox("auto:6", label="alphas: auto:N (spread over deferral rates), or numbers",
                                elem_id="tradeoff-alphas")
            gamma, temperature, max_new_tokens, seed = run_controls(max_new_tokens=32)
            share = gr.Checkbox(True, label="prefix sharing (each alpha resumes where a decision first flips)")
            x_axis = gr.Radio([("target calls per token", "calls"), ("projected speed-up", "speedup")], value="calls",
                              label="x axis", elem_id="tradeoff-x")
            c = gr.Slider(0.01, 1.0, value=0.25, step=0.01, label="cost ratio c (for the speed-up axis)")
            run = gr.Button("Sweep alpha", variant="primary", elem_id="tradeoff-run")
            status = gr.Markdown("", elem_id="tradeoff-status")
            upload = gr.File(label="…or a sweep's rows.jsonl (a prompt set's frontier)", file_types=[".jsonl"],
                             elem_id="tradeoff-upload")
        with gr.Column(scale=2):
            plot = gr.Plot(label="Frontier", elem_id="tradeoff-plot")
            with gr.Row():
                point = gr.Dropdown([], label="A point of the frontier", elem_id="tradeoff-point")
                open_button = gr.Button("Open it in Explore", elem_id="tradeoff-open")
    rows = gr.State(None)
    run.click(handlers.run, [prompt, rules, alphas, gamma, temperature, seed, max_new_tokens, share, x_axis, c],
              [rows, plot, point, status], **GENERATING)
    for control in (x_axis, c):
        control.input(handlers.redraw, [rows, x_axis, c], plot, **INSTANT)
    upload.upload(handlers.upload, [upload, x_axis, c], [rows, plot, status], **INSTANT)
    open_button.click(handlers.open_point, [rows, point, prompt, gamma, temperature, seed, max_new_tokens],
                      explore.opened + [tabs], **INSTANT).then(
        explore.handlers.run, explore.settings, explore.view, **GENERATING)
