"""What the controls mean for the engine: the alpha slider's range per rule, the request's token budget and the run
controls every tab lays out (the settings they make: app/settings.py)."""
import json
import math

import gradio as gr

from cascade_core import RULES
from cascade_core.decoding.run_settings import MAX_GAMMA

from .pairs import DRAFT_CHOICES

# The page's slider and the API share one token limit per run,
APP_MAX_NEW_TOKENS = 1024
# and one limit on the tokens a whole call may generate: its runs (Compare's rows, Trade-off's rules x alphas and its
# pilot, the four strategies) x max_new_tokens. Six runs of APP_MAX_NEW_TOKENS, Compare's largest call, fit.
REQUEST_TOKEN_BUDGET = 6 * APP_MAX_NEW_TOKENS
OPEN_END = 2.0  # an infinite end of a rule's alpha range is shown as +-2 on the slider
BELOW_OPEN_TOP = 0.01  # a range open at its top (lossy's [0, 1)) stops one slider step below it


def alpha_slider_range(rule):
    """(minimum, maximum) of the alpha slider for a rule: its natural range, infinite ends shown as +-2; [0, 1] for a
    rule that reads no alpha (its disabled slider kept the range of the rule before: opt's -2..2)."""
    record = RULES[rule]
    if not record.alpha_used:
        return 0.0, 1.0
    lo, hi = record.alpha_range
    lo = -OPEN_END if math.isinf(lo) else lo
    hi = OPEN_END if math.isinf(hi) else hi
    return lo, round(hi - BELOW_OPEN_TOP, 2) if record.upper_open else hi


def cost_presets(path):
    """(button label, c) for the cost ratios the benchmarks measured (bench/seed_pair.py writes them), rounded to
    the slider's step; none where nothing was measured."""
    if not path.exists():
        return []
    presets = []
    for pair, record in json.loads(path.read_text()).items():
        for path_name in ("eager", "compiled"):
            if path_name in record:
                c = round(min(max(record[path_name]["c"], 0.01), 1.0), 2)
                presets.append((f"Set c to {c:.2f}, another pair's: {pair}, {path_name}, measured on "
                                f"{record['device']}", c))
    return presets


def check_budget(runs, max_new_tokens, fields):
    """The tokens a call asks for (runs x max_new_tokens), refused before any model call past REQUEST_TOKEN_BUDGET;
    ``fields`` names what set the number of runs."""
    if runs * max_new_tokens > REQUEST_TOKEN_BUDGET:
        raise ValueError(f"{fields} and max_new_tokens ask for {runs} runs x {max_new_tokens} = "
                         f"{runs * max_new_tokens} tokens; one call may generate at most {REQUEST_TOKEN_BUDGET} "
                         "tokens: ask for fewer runs or fewer tokens")
    return runs * max_new_tokens


def alpha_is_used(rule):
    return RULES[rule].alpha_used


def clamp_alpha(rule, alpha):
    lo, hi = alpha_slider_range(rule)
    return min(max(alpha, lo), hi)


def alpha_slider_props(rule, alpha):
    """The alpha slider as it follows a rule: the rule's range, alpha held inside it, still where the rule reads
    none (a new slider's arguments, or a rule change's update)."""
    lo, hi = alpha_slider_range(rule)
    return dict(minimum=lo, maximum=hi, value=clamp_alpha(rule, alpha), interactive=alpha_is_used(rule))


def alpha_slider(rule, alpha, **kwargs):
    """A tab's alpha slider for a rule (``alpha_slider_props``)."""
    return gr.Slider(**alpha_slider_props(rule, alpha), step=0.01, label="alpha", **kwargs)


def rule_info(rule):
    record = RULES[rule]
    return f"{record.summary} ({record.source}" + (")" if record.alpha_used else "; alpha is ignored)") + \
        (f". {record.note}" if record.note else "")


def rule_changed(rule, alpha):
    """The alpha slider follows the rule's natural range (alpha-free rules disable it); the rule's
    one-line explanation is shown under it. Outputs: alpha slider, rule explanation."""
    return gr.update(**alpha_slider_props(rule, alpha)), rule_info(rule)


# One set of run defaults for every tab and its API: T 0.7, seed 0, 64 new tokens (a row of Compare at Explore's
# rule and alpha is then Explore's text), and gamma "auto" where a tab's runs choose each block's length (Explore,
# Strategies), FIXED_GAMMA where a tab prices all its rows at one block length (Compare, the Trade-off).
RUN_DEFAULTS = dict(temperature=0.7, seed=0, max_new_tokens=64)
FIXED_GAMMA = 4


def run_defaults(auto_gamma=False):
    """The defaults of ``run_controls``' fields (a tab's link fields): RUN_DEFAULTS, gamma FIXED_GAMMA or 0 ("auto",
    ``auto_gamma``)."""
    return dict(gamma=0 if auto_gamma else FIXED_GAMMA, **RUN_DEFAULTS)


def draft_control(value, elem_id, choices=DRAFT_CHOICES):
    """The draft a tab's runs use beside its pair (models.with_draft): the draft model or the EAGLE-3 head (and
    where a tab offers more, ``choices``)."""
    return gr.Dropdown(choices, value=value, label="Draft", elem_id=elem_id)


def run_controls(values, auto_gamma=False):
    """gamma, temperature, max new tokens and seed at ``values`` (a tab's fields), two to a row, as the Compare,
    Trade-off and Strategies tabs lay them out; ``auto_gamma``: the gamma slider's 0 is "auto"."""
    with gr.Row():
        gamma = gr.Slider(0 if auto_gamma else 1, MAX_GAMMA, value=values["gamma"], step=1, precision=0,
                          label="gamma (0: auto)" if auto_gamma else "gamma")
        temperature = gr.Slider(0, 2, value=values["temperature"], step=0.05, label="temperature")
    with gr.Row():
        max_new_tokens = gr.Slider(1, APP_MAX_NEW_TOKENS, value=values["max_new_tokens"], step=1, precision=0,
                                   label="max new tokens")
        seed = gr.Number(values["seed"], precision=0, label="seed")
    return gamma, temperature, max_new_tokens, seed
