"""The page: controls on the left, the streamed answer with its legend and stats on the right, the
inspector and the plots below, and a "How to read this" panel."""
import json
import os
from pathlib import Path

import gradio as gr

from cascade_core import MAX_GAMMA, RULES

from .callbacks import Handlers, Recoloured, View
from .controls import APP_MAX_NEW_TOKENS, alpha_slider_range, cost_presets, rule_info
from .pairs import BUNDLED, CHOICES, SEED_PAIR, PairCache
from .viz.format import rules_table
from .viz.stats import speedup_markdown, stats_markdown
from .viz.tokens import inspector_html, legend_html, tokens_html

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEFAULT_RULE, DEFAULT_ALPHA = "v3", 0.3
DEFAULT_COST_RATIO = 0.25  # a typical GPU draft/target ratio; each run also reports the one it measured
QUEUE_SIZE = 24  # runs that may wait for the generation slot; each holds it for at most APP_MAX_NEW_TOKENS tokens
# A click on a token sends its position to the server (gr.HTML's trigger); the listener sits on the
# component so it survives every re-render of the tokens.
CLICK_TO_INSPECT = """
element.addEventListener('click', (event) => {
  const token = event.target.closest('[data-pos]');
  if (!token) return;
  element.querySelectorAll('.tok.selected').forEach((t) => t.classList.remove('selected'));
  token.classList.add('selected');
  trigger('click', {pos: Number(token.dataset.pos)});
});
"""


def on_space():
    return bool(os.environ.get("SPACE_ID"))


def default_pair_spec():
    return SEED_PAIR if on_space() else BUNDLED


def example_prompts():
    return json.loads((ASSETS / "examples.json").read_text())


def how_to_read():
    """The "How to read this" panel, its rules table read from the rules' records."""
    return (ASSETS / "how_to_read.md").read_text().replace("{rules_table}", rules_table())


def unread_messages(demo, session_hash):
    """How many messages Gradio holds for a session that no client has read: a caller who posted a run and never
    listens leaves them piling up. Gradio 6 keeps no public count; where its internals differ this is 0."""
    pending = getattr(getattr(demo, "_queue", None), "pending_messages_per_session", {}).get(session_hash)
    return pending.qsize() if pending is not None else 0


def build_app(pair_spec=None, public=None, pairs=None):
    """The Gradio Blocks app. ``pair_spec``: the default pair ('tiny', 'bundled', 'draft -> target');
    ``public``: restrict model ids to the allow-list (default: on a Space); ``pairs``: a PairCache to share."""
    pair_spec = pair_spec or default_pair_spec()
    public = on_space() if public is None else public
    pairs = pairs or PairCache(public=public)
    demo = gr.Blocks(title="Speculative Cascades Explorer", analytics_enabled=False)
    handlers = Handlers(pairs, pair_spec, unread=lambda session_hash: unread_messages(demo, session_hash))
    choices = CHOICES if any(value == pair_spec for _, value in CHOICES) else CHOICES + [(pair_spec, pair_spec)]
    lo, hi = alpha_slider_range(DEFAULT_RULE)

    with demo:
        run_state = gr.State(None)
        gr.Markdown("# Speculative Cascades Explorer\nA small *draft* model proposes tokens, a large *target* "
                    "model checks them, and a deferral rule decides whom to trust. Every token below tells its story: "
                    "hover for numbers, click to inspect, drag alpha to see which decisions flip.")
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                prompt = gr.Textbox(label="Prompt", lines=3, elem_id="prompt", value=example_prompts()[0])
                gr.Examples([[p] for p in example_prompts()], inputs=[prompt], label="Examples")
                chat = gr.Checkbox(True, label="Apply the chat template (when the model has one); off: raw text",
                                   elem_id="chat")
                pair_box = gr.Dropdown(choices, value=pair_spec, label="Model pair (draft -> target)",
                                       allow_custom_value=not public, elem_id="pair",
                                       info="hub ids or local folders as 'draft -> target'" if not public
                                       else "public mode: allow-listed models only")
                rule = gr.Dropdown([(r, r) for r in RULES], value=DEFAULT_RULE, label="Rule", elem_id="rule")
                rule_text = gr.Markdown(rule_info(DEFAULT_RULE), elem_id="rule-info")
                alpha = gr.Slider(lo, hi, value=DEFAULT_ALPHA, step=0.01, label="alpha", elem_id="alpha")
                with gr.Row():
                    gamma = gr.Slider(1, MAX_GAMMA, value=4, step=1, precision=0, label="gamma (draft block)",
                                      elem_id="gamma")
                    temperature = gr.Slider(0, 2, value=1.0, step=0.05, label="temperature", elem_id="temperature")
                with gr.Row():
                    max_new_tokens = gr.Slider(1, APP_MAX_NEW_TOKENS, value=64, step=1, precision=0,
                                               label="max new tokens", elem_id="max-new-tokens")
                    seed = gr.Number(0, precision=0, label="seed", elem_id="seed")
                with gr.Row():
                    run_button = gr.Button("Run", variant="primary", elem_id="run")
                    rerun_button = gr.Button("Re-run", elem_id="rerun")
                    stop_button = gr.Button("Stop", variant="stop", elem_id="stop")
                status = gr.Markdown("", elem_id="status")
            with gr.Column(scale=2):
                gr.HTML(legend_html(), elem_id="legend")
                answer = gr.HTML(tokens_html([], [], DEFAULT_RULE), elem_id="answer", js_on_load=CLICK_TO_INSPECT)
                with gr.Row():
                    with gr.Column():
                        stats = gr.Markdown(stats_markdown(None), elem_id="stats")
                    with gr.Column():
                        cost_ratio = gr.Slider(0.01, 1.0, value=DEFAULT_COST_RATIO, step=0.01,
                                               label="draft/target cost ratio c (time of one draft call / one target call)",
                                               elem_id="cost-ratio")
                        presets = [gr.Button(label, size="sm", elem_classes=["cost-preset"])
                                   for label, _ in cost_presets(ASSETS / "measured-costs.json")]
                        speedup = gr.Markdown(speedup_markdown(None, None, DEFAULT_COST_RATIO, None, None), elem_id="speedup")
                with gr.Group(elem_id="inspector"):
                    inspector_text = gr.HTML(inspector_html(), elem_id="inspector-text")
                    inspector_plot = gr.Plot(label="Top-10 of q and p", elem_id="inspector-plot", visible=False)
        with gr.Row():
            step_plot = gr.Plot(label="Per step", elem_id="step-plot")
            alpha_plot = gr.Plot(label="Critical alpha", elem_id="alpha-plot")
        with gr.Accordion("How to read this", open=False, elem_id="how-to-read"):
            gr.Markdown(how_to_read(), sanitize_html=False)

        settings = [prompt, pair_box, chat, rule, alpha, gamma, temperature, max_new_tokens, seed, cost_ratio]
        view = list(View(run_state, answer, stats, speedup, step_plot, alpha_plot, status))
        live = list(Recoloured(answer, step_plot, alpha_plot, status))
        quiet = dict(api_visibility="undocumented")
        # The status line reports progress; Gradio's own would draw the streaming answer at 20% opacity.
        generating = dict(quiet, concurrency_id="generate", concurrency_limit=1, show_progress="hidden")
        instant = dict(quiet, concurrency_limit=None, queue=False)

        run_event = run_button.click(handlers.run, settings, view, api_name="run_ui", **generating)
        prompt_event = prompt.submit(handlers.run, settings, view, api_name="submit_ui", **generating)
        rerun_triggers = [rerun_button.click(handlers.rerun, [run_state, *settings], view, **generating),
                          alpha.release(handlers.rerun, [run_state, *settings], view, **generating),
                          gamma.release(handlers.rerun, [run_state, *settings], view, **generating)]
        rule_event = rule.change(handlers.rule_changed, [rule, alpha], [alpha, rule_text], **instant).then(
            handlers.recolour, [run_state, rule, alpha], live, **instant).then(
            handlers.rerun, [run_state, *settings], view, **generating)
        stop_button.click(handlers.stopped, [run_state, rule, alpha, cost_ratio], view,
                          cancels=[run_event, prompt_event, rule_event, *rerun_triggers], **quiet)
        alpha.input(handlers.recolour, [run_state, rule, alpha], live, trigger_mode="always_last", **instant)
        cost_ratio.input(handlers.update_speedup, [run_state, cost_ratio], speedup, **instant)
        for button, (_, c) in zip(presets, cost_presets(ASSETS / "measured-costs.json")):
            button.click(lambda c=c: c, None, cost_ratio, **instant).then(
                handlers.update_speedup, [run_state, cost_ratio], speedup, **instant)
        answer.click(handlers.inspect, [run_state, rule, alpha], [inspector_text, inspector_plot], **instant)
        gr.api(handlers.api_run, api_name="run", concurrency_id="generate", concurrency_limit=1)
    return demo


def launch(demo, host="127.0.0.1", port=None, share=False, prevent_thread_lock=False, quiet=False,
           queue_size=QUEUE_SIZE):
    """Launch with the app's stylesheet (Gradio 6 takes CSS at launch) and a bounded queue: past queue_size
    waiting runs a new one is refused at once ("Queue is full! Please try again.") instead of waiting minutes."""
    return demo.queue(default_concurrency_limit=1, max_size=queue_size).launch(
        server_name=host, server_port=port, share=share, prevent_thread_lock=prevent_thread_lock, quiet=quiet,
        css_paths=[ASSETS / "style.css"], footer_links=["api", "gradio"])
