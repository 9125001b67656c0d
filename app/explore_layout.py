"""Explore's layout: the prompt with Run / Continue / Stop and the status on the left, the settings under them,
and on the right what to look for, the streamed answer, the inspector's sentence and the per-step plot under it,
then the inspector's bars and block and the stats; the critical-alpha plot and the decision map below, and a "How
to read this" panel; wired to ExploreHandlers (app/explore.py). On a phone's width the answer comes right after the
prompt, before the settings (assets/style.css)."""
from dataclasses import dataclass
from typing import Callable

import gradio as gr

from cascade_core import MAX_GAMMA, RULES

from .block_steps import build_block_steps, outputs as block_outputs, wire_block_steps
from .controls import APP_MAX_NEW_TOKENS, alpha_slider, cost_presets, rule_changed, rule_info
from .explore import (DEFAULT_ALPHA, DEFAULT_GAMMA, DEFAULT_MAX_NEW_TOKENS, DEFAULT_RULE,
                      DEFAULT_SEED, DEFAULT_TEMPERATURE, ExploreHandlers)
from .explore_views import Recoloured, View, slider_maximum
from .links import Linked, flag
from .options import ASSETS, GENERATING, INSTANT, example_prompts, how_to_read
from .pairs import CHOICES, DRAFT_CHOICES, pair_default_draft
from .viz.stats import speedup_markdown, stats_markdown
from .viz.tokens import inspector_html, legend_html, tokens_html

# A click on a token (or Enter / Space on the focused one) sends its position to the server (gr.HTML's trigger);
# Tab reaches one token and the arrow keys the others; hovering or focusing a token shows its card (one box, kept
# inside the window) and highlights its step in the plots, and hovering a plotted step highlights its token (the
# listeners sit on the component, so they survive every re-render of the tokens). A number typed into one of the
# settings applies on Enter, as a slider let go of does (Enter leaves the box, and Gradio's slider releases on that).
ANSWER_JS = """
element.addEventListener('click', (event) => {
  const token = event.target.closest('[data-pos]');
  if (!token) return;
  element.querySelectorAll('.tok.selected').forEach((t) => t.classList.remove('selected'));
  token.classList.add('selected');
  trigger('click', {pos: Number(token.dataset.pos)});
});
element.addEventListener('keydown', (event) => {
  const token = event.target.closest && event.target.closest('.tok[data-pos]');
  if (!token) return;
  if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); token.click(); return; }
  const all = [...element.querySelectorAll('.tok[data-pos]')], i = all.indexOf(token);
  const to = {ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: all.length - 1}[event.key];
  if (to === undefined || !all[to]) return;
  event.preventDefault();
  token.tabIndex = -1; all[to].tabIndex = 0; all[to].focus();
});
const tip = document.createElement('div');
tip.className = 'tok-tip'; tip.setAttribute('role', 'tooltip'); document.body.appendChild(tip);
const hideTip = () => { tip.style.display = 'none'; };
const showTip = (token) => {
  tip.textContent = token.dataset.tip; tip.style.display = 'block';
  const box = token.getBoundingClientRect(), width = tip.offsetWidth, height = tip.offsetHeight;
  tip.style.left = Math.max(8, Math.min(box.left, window.innerWidth - width - 8)) + 'px';
  const below = box.bottom + 4 + height < window.innerHeight;
  tip.style.top = (below ? box.bottom + 4 : Math.max(8, box.top - height - 4)) + 'px';
};
window.addEventListener('scroll', hideTip, {passive: true});
const plots = () => [...document.querySelectorAll('#step-plot .js-plotly-plot, #alpha-plot .js-plotly-plot')];
const mark = (pos) => {
  element.querySelectorAll('.tok.linked').forEach((t) => t.classList.remove('linked'));
  const token = pos === null ? null : element.querySelector(`.tok[data-pos="${pos}"]`);
  if (token) token.classList.add('linked');
};
const link = (pos) => {
  if (!window.Plotly) return;
  for (const plot of plots()) {  // calcdata: plotly's decoded points (the figures' x arrive base64-encoded)
    const points = [], subplots = new Set();  // the per-step figure has several panels: hover on all
    (plot.calcdata || []).forEach((trace, curve) => trace.forEach((point, i) => {
      const data = plot._fullData[curve];
      if (point.x === pos && data.visible === true && data.hoverinfo !== 'skip') {
        points.push({curveNumber: curve, pointNumber: i});
        subplots.add(data.xaxis + data.yaxis);
      }
    }));
    if (points.length) window.Plotly.Fx.hover(plot, points, [...subplots]);
  }
};
const show = (event) => {
  const token = event.target.closest && event.target.closest('.tok[data-pos]');
  if (!token) return;
  showTip(token);
  link(Number(token.dataset.pos));
};
element.addEventListener('mouseover', show);
element.addEventListener('focusin', show);
element.addEventListener('mouseout', hideTip);
element.addEventListener('focusout', hideTip);
element.addEventListener('mouseleave',
  () => plots().forEach((plot) => window.Plotly && window.Plotly.Fx.unhover(plot)));
new MutationObserver(() => plots().forEach((plot) => {
  if (plot.dataset.linked) return;
  plot.dataset.linked = '1';
  plot.on('plotly_hover', (event) => mark(Math.round(event.points[0].x)));
  plot.on('plotly_unhover', () => mark(null));
})).observe(document.body, {subtree: true, childList: true});
document.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && event.target.matches && event.target.matches('#explore-settings input[type=number]')) {
    event.target.blur();
  }
});
"""
LOOK_FOR = ("**What to look for:** blue tokens are the draft's (the rule did not defer), orange ones the target "
            "checked and kept, red ones the target replaced; the plot under the text gives each step's numbers (the "
            "rule's test, max q, max p, TV). Drag alpha (larger: less deferral): grey tokens may change, outlined "
            "ones are decided otherwise.")
APPLY_HINT = ("Every setting applies when you let go of it (a slider on release, a typed number on Enter, a menu "
              "or box on choice): the run is regenerated from the first token it changes. The prompt runs on "
              "Shift+Enter or Run; Continue finishes a stopped run.")


@dataclass
class Explore:
    """The tab's components that other tabs and the API wiring need."""

    handlers: ExploreHandlers
    settings: list  # ExploreHandlers.run's inputs, in order
    view: list  # its outputs (View's order)
    run_state: gr.State
    opened: list  # what "open in Explore" sets: prompt, draft, rule, alpha, rule text, gamma, T, tokens, seed
    linked: Linked  # what a link sets
    after_run: Callable  # chains onto an event that runs here what follows every run (wire's then_note)


def build_explore(handlers: ExploreHandlers, pair_spec, public):
    run_state = gr.State(None)
    # three columns in one grid (assets/style.css): the run's controls and the settings one above the other on the
    # left, the answer beside them; on a phone one after the other, the answer before the settings
    with gr.Row(elem_id="explore-top"):
        with gr.Column(scale=1, min_width=320, elem_id="explore-run"):
            c = run_controls()
        with gr.Column(scale=2, elem_id="explore-view"):
            o = outputs()
        with gr.Column(scale=1, min_width=320, elem_id="explore-settings"):
            c.update(settings_controls(handlers, pair_spec, public, c["prompt"], o))
    with gr.Row():
        # side by side where both fit; one above the other on a phone (each needs ~400 px for its legend and title)
        # (their titles say what they are: Gradio's label badge would cover a title's first words)
        o.update(alpha_plot=gr.Plot(label="Critical alpha", show_label=False, elem_id="alpha-plot", min_width=400),
                 decision_plot=gr.Plot(label="Decision map", show_label=False, elem_id="decision-plot", min_width=400))
    with gr.Accordion("How to read this", open=False, elem_id="how-to-read"):
        gr.Markdown(how_to_read(), sanitize_html=False)
    settings = [c[name] for name in ("prompt", "pair", "draft", "chat", "rule", "alpha", "gamma", "temperature",
                                     "max_new_tokens", "seed")] + [o["cost_ratio"], c["reproducible"], o["inspected"]]
    view = list(View(run_state, o["answer"], o["stats"], o["speedup"], o["step_plot"], o["alpha_plot"],
                     o["decision_plot"], o["acceptance_plot"], c["status"], o["note"], o["inspector_text"],
                     o["inspector_plot"], o["inspected"], *block_outputs(o["block"])))
    after_run = wire(handlers, c, o, run_state, settings, view)
    fields = {name: c[name] for name in ("prompt", "draft", "rule", "alpha", "gamma", "temperature", "seed",
                                         "max_new_tokens", "reproducible")}
    linked = explore_linked(fields, c["rule_text"], c["advanced"])
    opened = [c[name] for name in ("prompt", "draft", "rule", "alpha", "rule_text", "gamma", "temperature",
                                   "max_new_tokens", "seed")]
    return Explore(handlers, settings, view, run_state, opened, linked, after_run)


REPRODUCIBLE_MEANING = "decode alone, bitwise the solo run"


def explore_linked(fields, rule_text, advanced):
    """What a link sets on Explore: the run fields and ``reproducible``, into these controls (opening the advanced
    settings where it sets one of them)."""
    return Linked("explore", {name: field.value for name, field in fields.items()}, "run", tuple(RULES),
                  auto_gamma=True, fields=fields, rule_text=rule_text,
                  parsers=dict(reproducible=lambda text: flag(text, "reproducible", REPRODUCIBLE_MEANING)),
                  folded=advanced, folded_names=("seed", "reproducible"))


def run_controls():
    """The prompt, Run / Continue / Stop and the status under them: in view when the page opens, at any width."""
    c = dict(prompt=gr.Textbox(label="Prompt", lines=3, elem_id="prompt", value=example_prompts()[0]))
    with gr.Row():
        c["run"] = gr.Button("Run", variant="primary", elem_id="run", scale=2, min_width=80)
        c["rerun"] = gr.Button("Continue", elem_id="rerun", scale=1, min_width=90)
        c["stop"] = gr.Button("Stop", variant="stop", elem_id="stop", scale=1, min_width=70)
    c["status"] = gr.Markdown("", elem_id="status")
    return c


def settings_controls(handlers, pair_spec, public, prompt, o):
    """How a setting applies, then the settings: rule, alpha, draft, gamma, temperature and tokens, the examples, and
    in an accordion the
    advanced ones (the pair, the chat template, reproducible, the seed, the cost ratio c and its presets, which
    go into ``o``)."""
    choices = CHOICES if any(value == pair_spec for _, value in CHOICES) else CHOICES + [(pair_spec, pair_spec)]
    gr.Markdown(APPLY_HINT, elem_id="apply-hint")
    c = dict(rule=gr.Dropdown([(r, r) for r in RULES], value=DEFAULT_RULE, label="Rule", elem_id="rule"))
    c["rule_text"] = gr.Markdown(rule_info(DEFAULT_RULE), elem_id="rule-info")
    c["alpha"] = alpha_slider(DEFAULT_RULE, DEFAULT_ALPHA, elem_id="alpha")
    c["draft"] = gr.Dropdown(DRAFT_CHOICES, value=handlers.default_draft, label="Draft", allow_custom_value=not public,
                             elem_id="draft", info="beside a hub target, also a draft model's or EAGLE-3 head's id or "
                             "folder" if not public else None)
    with gr.Row():
        c["gamma"] = gr.Slider(0, MAX_GAMMA, value=DEFAULT_GAMMA, step=1, precision=0, label="gamma (0: auto)",
                               info="draft block; auto: the cost model's pick", elem_id="gamma")
        c["temperature"] = gr.Slider(0, 2, value=DEFAULT_TEMPERATURE, step=0.05, label="temperature",
                                     elem_id="temperature")
    c["max_new_tokens"] = gr.Slider(1, APP_MAX_NEW_TOKENS, value=DEFAULT_MAX_NEW_TOKENS, step=1, precision=0,
                                    label="max new tokens", elem_id="max-new-tokens")
    gr.Examples([[text] for text in example_prompts()], inputs=[prompt], label="Examples")
    with gr.Accordion("Advanced settings: pair, chat template, seed, reproducible, cost ratio", open=False,
                      elem_id="advanced") as c["advanced"]:
        c["pair"] = gr.Dropdown(choices, value=pair_spec, label="Model pair (draft -> target)",
                                allow_custom_value=not public, elem_id="pair",
                                info="hub ids or local folders as 'draft -> target'" if not public
                                else "public mode: allow-listed models only")
        c["chat"] = gr.Checkbox(True, label="Apply the chat template (when the model has one); off: raw text",
                                elem_id="chat")
        c["seed"] = gr.Number(DEFAULT_SEED, precision=0, label="seed", elem_id="seed")
        c["reproducible"] = gr.Checkbox(False, elem_id="reproducible",
                                        label=f"Reproducible: {REPRODUCIBLE_MEANING} (slower on a busy server)")
        start_c = handlers.default_cost_ratio()
        o["cost_ratio"] = gr.Slider(0.01, slider_maximum(start_c), value=start_c, step=0.01, elem_id="cost-ratio",
                                    label="draft/target cost ratio c (one draft call / one target call): the run's "
                                          "draft's measured c, following the draft you choose; move it for a "
                                          "hypothetical draft's estimate")
        o["presets"] = cost_presets(ASSETS / "measured-costs.json")
        o["preset_buttons"] = [gr.Button(label, size="sm", elem_classes=["cost-preset"]) for label, _ in o["presets"]]
    return c


def outputs():
    """The right column: what to look for, the mark of settings the run was not made with, the answer and its
    legend, the inspector's sentence, the per-step plot, the inspector's bars and block, the stats and the
    projected speed-up."""
    gr.Markdown(LOOK_FOR, elem_id="look-for")
    o = dict(note=gr.HTML("", elem_id="run-note"),
             answer=gr.HTML(tokens_html([], [], DEFAULT_RULE), elem_id="answer", js_on_load=ANSWER_JS))
    gr.HTML(legend_html(("target", "draft")), elem_id="legend")
    o.update(inspector_text=gr.HTML(inspector_html(), elem_id="inspector-text"),
             # its title says what it is: Gradio's label badge would cover a title's first words
             step_plot=gr.Plot(label="Per step", show_label=False, elem_id="step-plot"))
    with gr.Group(elem_classes=["inspector"]):  # an elem_id: Gradio gives a Group's two divs the same id
        o["inspector_plot"] = gr.Plot(label="Top-10 of q and p", elem_id="inspector-plot", visible=False)
        o["block"] = build_block_steps("block")
    o["inspected"] = gr.State(None)
    with gr.Row():
        with gr.Column():
            o["stats"] = gr.Markdown(stats_markdown(None), elem_id="stats")
        with gr.Column():
            o["speedup"] = gr.Markdown(speedup_markdown(None, None), elem_id="speedup")
    o["acceptance_plot"] = gr.Plot(label="Acceptance by draft position", show_label=False, elem_id="acceptance-plot")
    return o


def wire(handlers, c, o, run_state, settings, view):
    """Explore's events: one run per page (ExploreHandlers._supervised: a newer one takes the view from the one
    before), every setting applied when let go of (the prompt on Shift+Enter or Run), instant recolouring, the mark of
    settings the run shown was not made with (after every change and every run), the inspector, the cost ratio.
    Returns what chains onto an event that runs here what follows every run (Explore.after_run)."""
    live = list(Recoloured(o["answer"], o["step_plot"], o["alpha_plot"], o["decision_plot"], c["status"]))
    rule, alpha, cost_ratio, speedup = c["rule"], c["alpha"], o["cost_ratio"], o["speedup"]
    noted = [run_state, *settings]

    def then_note(event):
        """After a run: the mark of the settings it was not made with, and c's slider at the run's own draft's
        measured c unless the user set c (ExploreHandlers.follow_c)."""
        return event.then(handlers.settings_note, noted, o["note"], **INSTANT).then(
            handlers.follow_c, [run_state, cost_ratio], [cost_ratio, speedup], **INSTANT)

    then_note(c["run"].click(handlers.run, settings, view, api_name="run_ui", **GENERATING))
    then_note(c["prompt"].submit(handlers.run, settings, view, api_name="submit_ui", **GENERATING))
    then_note(c["rerun"].click(handlers.rerun, noted, view, **GENERATING))
    # .input, .release, .blur: a user's act, not .change: another tab opening a run here sets the controls without
    # asking for a regeneration (it runs its own); one event with every trigger (each event costs page-load time),
    # each let-go its own call while another runs (the newest regeneration takes the view: _supervised)
    let_go = [alpha.release, c["gamma"].release, c["temperature"].release, c["max_new_tokens"].release,
              c["seed"].blur, c["draft"].input, c["chat"].input, c["reproducible"].input]
    then_note(gr.on(let_go, handlers.regenerate, noted, view, trigger_mode="multiple", **GENERATING))
    # another pair: the draft it runs with unless one is chosen
    then_note(c["pair"].input(draft_for_pair, c["pair"], c["draft"], **INSTANT).then(
        handlers.regenerate, noted, view, **GENERATING))
    then_note(rule.input(rule_changed, [rule, alpha], [alpha, c["rule_text"]], **INSTANT).then(
        handlers.recolour, [run_state, rule, alpha, o["inspected"]], live, **INSTANT).then(
        handlers.regenerate, noted, view, **GENERATING))
    gr.on([control.change for control in settings[:10] + [c["reproducible"]]], handlers.settings_note, noted,
          o["note"], trigger_mode="always_last", **INSTANT)
    # no cancels: a cancelled stream's last message could land after Stop's and leave "Generating…" on screen
    c["stop"].click(handlers.stop, None, c["status"], **INSTANT)
    alpha.input(handlers.recolour, [run_state, rule, alpha, o["inspected"]], live, trigger_mode="always_last",
                **INSTANT)
    cost_ratio.input(handlers.update_speedup, [run_state, cost_ratio], speedup, **INSTANT)
    for button, (_, ratio) in zip(o["preset_buttons"], o["presets"]):
        button.click(lambda ratio=ratio: ratio, None, cost_ratio, **INSTANT).then(
            handlers.update_speedup, [run_state, cost_ratio], speedup, **INSTANT)
    o["answer"].click(handlers.inspect, [run_state, rule, alpha], [o["inspector_text"], o["inspector_plot"],
                                                                   o["inspected"]], **INSTANT)
    wire_block_steps(o["block"], handlers.open_block, [run_state, o["inspected"]])
    return then_note


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
