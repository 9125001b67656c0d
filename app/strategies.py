"""The Strategies tab: one prompt, the target alone and four ways to spend the draft and the target (see
cascade_core.decoding.strategies), each run for real, on one clock."""
import gradio as gr

from cascade_core import mapped
from cascade_core.decoding.running_batches import OTHER_ROWS
from cascade_core.decoding.strategies import STRATEGIES, strategy_steps
from cascade_core.messages import is_number, shown
from cascade_core.method.rules import RULES

from .controls import alpha_slider, check_budget, draft_control, rule_changed, run_controls, run_defaults
from .explore import special_ids
from .gpu import gpu
from .links import Linked, fraction
from .options import GENERATING, INSTANT, example_prompts
from .pairs import drafts_with_a_head, pair_default_draft
from .settings import AppSettings
from .streaming import progress_messages, raises_for_client, read_or_stopped, warns_in_page
from .viz.timeline import lanes_figure, lanes_html
from .worker import ENGINE


# The runs the strategies make at most: the target alone, the draft's answer and the target's, speculative
# decoding, the speculative cascade and the sequential cascade.
RUNS = 6
# the rules a cascade can defer by: every position and token rule, the engines' keep sets and lossy's lenience
CASCADE_RULES = tuple(name for name, rule in RULES.items()
                      if rule.kind in ("position", "token", "keep-set") or rule.lenience)


def progress_text(strategy, trace):
    return f"Strategy {STRATEGIES.index(strategy) + 1} of {len(STRATEGIES)}, {strategy}: {len(trace.positions)} tokens…"


def drawn_as_they_finish(rule, special=frozenset()):
    """A step's page update: the finished lanes drawn as each one finishes (the chart stayed empty until the last),
    the status always; ``special``: the pair's special token ids, drawn as a mark."""
    drawn = 0

    def update(step):
        nonlocal drawn
        strategy, trace, finished = step
        if len(finished) == drawn:
            return gr.skip(), gr.skip(), progress_text(strategy, trace)
        drawn = len(finished)
        return lanes_figure(finished), lanes_html(finished, rule, special), progress_text(strategy, trace)
    return update


def checked_threshold(threshold):
    if not is_number(threshold) or not 0 <= threshold <= 1:
        raise ValueError(f"threshold must be a number from 0 to 1 (the draft's mean max q), got {shown(threshold)}")
    return float(threshold)


DEFAULTS = dict(rule="v3", alpha=0.5, threshold=0.6, **run_defaults(auto_gamma=True))  # and the API's


def other_calls_note(rows):
    """What times measured on a busy server include: ``rows``, the most rows of other calls that shared a block
    (cascade_core.decoding.running_batches's OTHER_ROWS); nothing when none did."""
    return (f"Other calls were generating meanwhile (up to {rows} of their rows in the same forwards), so these times "
            "include their share; run again when the server is quiet to time these runs alone." if rows else "")


def done_text(lanes):
    """The status once the strategies are done, naming those the draft could not run."""
    skipped = [lane["name"] for lane in lanes if lane["totals"] is None]
    beside = max((lane["totals"][OTHER_ROWS] for lane in lanes if lane["totals"]), default=0)
    done = ("Done: times are the engine's own clock (its calls and its work, not the page's redraw), call by call; "
            "a speed-up over the target alone is priced with this machine's measured calls.")
    return done + (f" {other_calls_note(beside)}" if beside else "") + (
        f" Not run with an EAGLE-3 head, which reads the target's hidden states: the {' and the '.join(skipped)} "
        "(they need a draft that runs alone; choose the draft model for them)." if skipped else "")


class StrategiesHandlers:
    def __init__(self, pairs, default_pair_spec, unread=lambda session_hash: 0):
        self.pairs, self.default_pair_spec, self.unread = pairs, default_pair_spec, unread
        self.default_draft = pair_default_draft(default_pair_spec)

    def settings(self, prompt, draft, rule, alpha, threshold, gamma, temperature, seed, max_new_tokens):
        """(run settings, threshold), checked, and the call's tokens against the request budget."""
        if rule not in CASCADE_RULES:
            raise ValueError(f"rule must be one of {', '.join(CASCADE_RULES)} (the speculative cascade's deferral "
                             "rule; the strategies run lossless decoding and the baselines themselves), got "
                             f"{shown(rule)}")
        s = AppSettings.from_inputs(prompt, self.default_pair_spec, True, rule, alpha, gamma, temperature,
                                 max_new_tokens, seed, auto_gamma=True, draft=draft)
        threshold = checked_threshold(threshold)
        check_budget(RUNS, s.max_new_tokens, "the target alone and the four strategies")
        return s, threshold

    def lane_steps(self, s, threshold):
        """The target alone and the four strategies block by block (cascade_core.decoding.strategies.strategy_steps)."""
        pair = self.pairs.get(s.pair_spec)
        return strategy_steps(pair, s.prompt, s.for_pair(pair), threshold, batches=ENGINE.batches)

    @warns_in_page(lambda message: (gr.skip(), gr.skip(), message))
    @gpu(lambda a: RUNS * a["max_new_tokens"],
         lambda a: drafts_with_a_head(a["self"].default_pair_spec, a["draft"]))
    def run(self, prompt, draft, rule, alpha, threshold, gamma, temperature, seed, max_new_tokens):
        s, threshold = self.settings(prompt, draft, rule, alpha, threshold, gamma, temperature, seed, max_new_tokens)
        steps = ENGINE.iterate(self.lane_steps(s, threshold), RUNS * s.max_new_tokens)
        special = special_ids(self.pairs.get(s.pair_spec))
        lanes = yield from mapped(steps, drawn_as_they_finish(rule, special))
        yield lanes_figure(lanes), lanes_html(lanes, rule, special), done_text(lanes)

    @raises_for_client
    def api_strategies(self, prompt: str, rule: str = DEFAULTS["rule"], alpha: float = DEFAULTS["alpha"],
                       threshold: float = DEFAULTS["threshold"], gamma: int | str = "auto",
                       temperature: float = DEFAULTS["temperature"], max_new_tokens: int = DEFAULTS["max_new_tokens"],
                       seed: int = 0, draft: str = "", request: gr.Request = None) -> str:
        """Per strategy (target alone, cascade, speculative decoding, speculative cascade, sequential cascade; totals
        in seconds on the engine's clock, and "speedup" over the target alone as every tab prices it) at the page's
        defaults, with ``draft`` ("model", "head", or empty for the page's default): its calls ([role, start, end]
        in seconds), text and totals, as JSON, or for a strategy the draft cannot run (an EAGLE-3 head: the cascade
        and the sequential cascade) totals null and "skipped", the sentence why; before that it streams
        {"generating": {"strategy": name, "tokens": t}} as /run does."""
        s, threshold = self.settings(prompt, draft or self.default_draft, rule, alpha, threshold, gamma, temperature,
                                     seed, max_new_tokens)
        yield from read_or_stopped(self._lane_messages(s, threshold), self.unread, request)

    @gpu(lambda a: RUNS * a["s"].max_new_tokens, lambda a: drafts_with_a_head(a["s"].pair_spec))
    def _lane_messages(self, s, threshold):
        def progress(step):
            strategy, trace, _ = step
            return {"strategy": strategy, "tokens": len(trace.positions)}

        yield from progress_messages(self.lane_steps(s, threshold), RUNS * s.max_new_tokens, progress,
                                     lambda lanes: [{key: lane[key] for key in ("name", "calls", "text", "totals",
                                                                                "skipped") if key in lane}
                                                    for lane in lanes])


def strategies_linked(draft):
    """What a link sets on this tab (its fields' defaults; ``draft``: the app's default draft)."""
    return Linked("strategies", dict(prompt=example_prompts()[0], draft=draft, **DEFAULTS),
                  "strategies-run", CASCADE_RULES, auto_gamma=True,
                  parsers=dict(threshold=lambda text: fraction(text, "threshold")))


def build_strategies(handlers, values):
    """The tab, its fields at ``values``; returns them by name."""
    with gr.Row():
        with gr.Column(scale=1, min_width=320):
            prompt = gr.Textbox(label="Prompt", lines=2, value=values["prompt"], elem_id="strategies-prompt")
            draft = draft_control(values["draft"], "strategies-draft")
            rule = gr.Dropdown(list(CASCADE_RULES), value=values["rule"], label="Rule", elem_id="strategies-rule")
            alpha = alpha_slider(values["rule"], values["alpha"], elem_id="strategies-alpha")
            threshold = gr.Slider(0, 1, value=values["threshold"], step=0.01, elem_id="strategies-threshold",
                                  label="cascade threshold (a SeqCascade variant, Eq. 1): the target answers again "
                                        "if the draft's mean max q is below")
            gamma, temperature, max_new_tokens, seed = run_controls(values, auto_gamma=True)
            run = gr.Button("Run the target alone and the four strategies", variant="primary", elem_id="strategies-run")
            status = gr.Markdown("", elem_id="strategies-status")
        with gr.Column(scale=2):
            plot = gr.Plot(label="Strategies on one clock", elem_id="strategies-plot")
            texts = gr.HTML("", elem_id="strategies-texts")
    rule.input(lambda r, a: rule_changed(r, a)[0], [rule, alpha], alpha, **INSTANT)
    run.click(handlers.run, [prompt, draft, rule, alpha, threshold, gamma, temperature, seed, max_new_tokens],
              [plot, texts, status], **GENERATING)
    return dict(prompt=prompt, draft=draft, rule=rule, alpha=alpha, threshold=threshold, gamma=gamma,
                temperature=temperature, seed=seed, max_new_tokens=max_new_tokens)
