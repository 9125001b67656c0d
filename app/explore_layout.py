"""Explore's layout: controls on the left, the streamed answer with its legend and stats on the right, the inspector
and the plots below, and a "How to read this" panel, wired to ExploreHandlers (app/explore.py)."""
from dataclasses import dataclass

import gradio as gr

from cascade_core import MAX_GAMMA, RULES

from .block_steps import build_block_steps, wire_block_steps
from .controls import APP_MAX_NEW_TOKENS, alpha_slider, cost_presets, rule_changed, rule_info
from .explore import (DEFAULT_ALPHA, DEFAULT_COST_RATIO, DEFAULT_GAMMA, DEFAULT_MAX_NEW_TOKENS, DEFAULT_RULE,
                      DEFAULT_TEMPERATURE, ExploreHandlers)
from .explore_views import Recoloured, View
from .links import Linked, flag
from .options import ASSETS, GENERATING, INSTANT, example_prompts, how_to_read
from .pairs import CHOICES, DRAFT_CHOICES, pair_default_draft
from .viz.stats import speedup_markdown, stats_markdown
from .viz.tokens import inspector_html, legend_html, tokens_html

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
class Explore:
    """The tab's components that other tabs and the API wiring need."""

    handlers: ExploreHandlers
    settings: list  # ExploreHandlers.run's inputs, in order
    view: list  # its outputs (View's order)
    run_state: gr.State
    opened: list  # what "open in Explore" sets: prompt, draft, rule, alpha, rule text, gamma, T, tokens, seed
    linked: Linked  # what a link sets


def build_explore(handlers: ExploreHandlers, pair_spec, public):
    run_state = gr.State(None)
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            c = controls(handlers, pair_spec, public)
        with gr.Column(scale=2):
            o = outputs()
    with gr.Row():
        # side by side where both fit; one above the other on a phone (each needs ~400 px for its legend and title)
        # (their titles say what they are: Gradio's label badge would cover a title's first words)
        o.update(step_plot=gr.Plot(label="Per step", show_label=False, elem_id="step-plot", min_width=400),
                 alpha_plot=gr.Plot(label="Critical alpha", show_label=False, elem_id="alpha-plot", min_width=400),
                 decision_plot=gr.Plot(label="Decision map", show_label=False, elem_id="decision-plot", min_width=400))
    with gr.Accordion("How to read this", open=False, elem_id="how-to-read"):
        gr.Markdown(how_to_read(), sanitize_html=False)
    settings = [c[name] for name in ("prompt", "pair", "draft", "chat", "rule", "alpha", "gamma", "temperature",
                                     "max_new_tokens", "seed")] + [o["cost_ratio"], c["reproducible"]]
    view = list(View(run_state, o["answer"], o["stats"], o["speedup"], o["step_plot"], o["alpha_plot"],
                     o["decision_plot"], c["status"]))
    wire(handlers, c, o, run_state, settings, view)
    fields = {name: c[name] for name in ("prompt", "draft", "rule", "alpha", "gamma", "temperature", "seed",
                                         "max_new_tokens", "reproducible")}
    linked = explore_linked(fields, c["rule_text"])
    opened = [c[name] for name in ("prompt", "draft", "rule", "alpha", "rule_text", "gamma", "temperature",
                                   "max_new_tokens", "seed")]
    return Explore(handlers, settings, view, run_state, opened, linked)


REPRODUCIBLE_MEANING = "decode alone, bitwise the solo run"


def explore_linked(fields, rule_text):
    """What a link sets on Explore: the run fields and ``reproducible``, into these controls."""
    return Linked("explore", {name: field.value for name, field in fields.items()}, "run", tuple(RULES),
                  auto_gamma=True, fields=fields, rule_text=rule_text,
                  parsers=dict(reproducible=lambda text: flag(text, "reproducible", REPRODUCIBLE_MEANING)))


def controls(handlers, pair_spec, public):
    """The left column: the prompt, Run / Re-run / Stop and the status under it, the examples and every setting."""
    choices = CHOICES if any(value == pair_spec for _, value in CHOICES) else CHOICES + [(pair_spec, pair_spec)]
    c = dict(prompt=gr.Textbox(label="Prompt", lines=3, elem_id="prompt", value=example_prompts()[0]))
    # under the prompt, in view when the page opens (below the settings they were at y ~1311 px)
    with gr.Row():
        c["run"] = gr.Button("Run", variant="primary", elem_id="run", scale=2, min_width=80)
        c["rerun"] = gr.Button("Re-run", elem_id="rerun", scale=1, min_width=80)
        c["stop"] = gr.Button("Stop", variant="stop", elem_id="stop", scale=1, min_width=70)
    c["status"] = gr.Markdown("", elem_id="status")
    gr.Examples([[p] for p in example_prompts()], inputs=[c["prompt"]], label="Examples")
    c["chat"] = gr.Checkbox(True, label="Apply the chat template (when the model has one); off: raw text",
                            elem_id="chat")
    c["pair"] = gr.Dropdown(choices, value=pair_spec, label="Model pair (draft -> target)",
                            allow_custom_value=not public, elem_id="pair",
                            info="hub ids or local folders as 'draft -> target'" if not public
                            else "public mode: allow-listed models only")
    c["draft"] = gr.Dropdown(DRAFT_CHOICES, value=handlers.default_draft, label="Draft", allow_custom_value=not public,
                             elem_id="draft", info="beside a hub target, also a draft model's or EAGLE-3 head's id or "
                             "folder" if not public else None)
    c["rule"] = gr.Dropdown([(r, r) for r in RULES], value=DEFAULT_RULE, label="Rule", elem_id="rule")
    c["rule_text"] = gr.Markdown(rule_info(DEFAULT_RULE), elem_id="rule-info")
    c["alpha"] = alpha_slider(DEFAULT_RULE, DEFAULT_ALPHA, elem_id="alpha")
    with gr.Row():
        c["gamma"] = gr.Slider(0, MAX_GAMMA, value=DEFAULT_GAMMA, step=1, precision=0, label="gamma (0: auto)",
                               info="draft block; auto: the cost model's pick", elem_id="gamma")
        c["temperature"] = gr.Slider(0, 2, value=DEFAULT_TEMPERATURE, step=0.05, label="temperature",
                                     elem_id="temperature")
    with gr.Row():
        c["max_new_tokens"] = gr.Slider(1, APP_MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=1, precision=0,
                                        label="max new tokens", elem_id="max-new-tokens")
        c["seed"] = gr.Number(0, precision=0, label="seed", elem_id="seed")
    c["reproducible"] = gr.Checkbox(False, elem_id="reproducible",
                                    label=f"Reproducible: {REPRODUCIBLE_MEANING} (slower on a busy server)")
    return c


def outputs():
    """The right column: legend, answer, stats, the cost ratio and its presets, the projected speed-up, the
    inspector."""
    gr.HTML(legend_html(("target", "draft")), elem_id="legend")
    o = dict(answer=gr.HTML(tokens_html([], [], DEFAULT_RULE), elem_id="answer", js_on_load=ANSWER_JS))
    with gr.Row():
        with gr.Column():
            o["stats"] = gr.Markdown(stats_markdown(None), elem_id="stats")
        with gr.Column():
            o["cost_ratio"] = gr.Slider(0.01, 1.0, value=DEFAULT_COST_RATIO, step=0.01, elem_id="cost-ratio",
                                        label="draft/target cost ratio c (time of one draft call / one target call)")
            o["presets"] = cost_presets(ASSETS / "measured-costs.json")
            o["preset_buttons"] = [gr.Button(label, size="sm", elem_classes=["cost-preset"])
                                   for label, _ in o["presets"]]
            o["speedup"] = gr.Markdown(speedup_markdown(None, None, DEFAULT_COST_RATIO, None, None), elem_id="speedup")
    with gr.Group(elem_classes=["inspector"]):  # an elem_id: Gradio gives a Group's two divs the same id
        o["inspector_text"] = gr.HTML(inspector_html(), elem_id="inspector-text")
        o["inspector_plot"] = gr.Plot(label="Top-10 of q and p", elem_id="inspector-plot", visible=False)
        o["block"] = build_block_steps("block")
    o["inspected"] = gr.State(None)
    return o


def wire(handlers, c, o, run_state, settings, view):
    """Explore's events: one run per page (ExploreHandlers._supervised: a newer one takes the view from the one
    before), instant recolouring, the inspector, the cost ratio."""
    live = list(Recoloured(o["answer"], o["step_plot"], o["alpha_plot"], o["decision_plot"], c["status"]))
    rule, alpha, cost_ratio, speedup = c["rule"], c["alpha"], o["cost_ratio"], o["speedup"]
    c["run"].click(handlers.run, settings, view, api_name="run_ui", **GENERATING)
    c["prompt"].submit(handlers.run, settings, view, api_name="submit_ui", **GENERATING)
    c["rerun"].click(handlers.rerun, [run_state, *settings], view, **GENERATING)
    for release in (alpha.release, c["gamma"].release):
        release(handlers.regenerate, [run_state, *settings], view, **GENERATING)
    # .input, not .change: another tab opening a run here sets the rule without asking for a re-run
    # another pair: the draft it runs with unless one is chosen
    c["pair"].input(draft_for_pair, c["pair"], c["draft"], **INSTANT)
    rule.input(rule_changed, [rule, alpha], [alpha, c["rule_text"]], **INSTANT).then(
        handlers.recolour, [run_state, rule, alpha], live, **INSTANT).then(
        handlers.regenerate, [run_state, *settings], view, **GENERATING)
    # no cancels: a cancelled stream's last message could land after Stop's and leave "Generating…" on screen
    c["stop"].click(handlers.stop, None, c["status"], **INSTANT)
    alpha.input(handlers.recolour, [run_state, rule, alpha], live, trigger_mode="always_last", **INSTANT)
    cost_ratio.input(handlers.update_speedup, [run_state, cost_ratio], speedup, **INSTANT)
    for button, (_, ratio) in zip(o["preset_buttons"], o["presets"]):
        button.click(lambda ratio=ratio: ratio, None, cost_ratio, **INSTANT).then(
            handlers.update_speedup, [run_state, cost_ratio], speedup, **INSTANT)
    o["answer"].click(handlers.inspect, [run_state, rule, alpha], [o["inspector_text"], o["inspector_plot"],
                                                                   o["inspected"]], **INSTANT)
    wire_block_steps(o["block"], handlers.open_block, [run_state, o["inspected"]])


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
