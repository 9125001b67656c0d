"""What the controls mean for the engine: the alpha slider's range per rule, and the settings a run uses."""
import json
import math
from dataclasses import dataclass, replace

import gradio as gr

from cascade_core import RULES, get_rule
from cascade_core.models import with_draft
from cascade_core.settings import AUTO, MAX_GAMMA, MAX_SEED, check_prompt, gamma_value, temperature_value, whole_number
from cascade_core.values import is_finite_number, shown

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
    return f"{record.summary} ({record.source}" + (")" if record.alpha_used else "; alpha is ignored)")


def rule_changed(rule, alpha):
    """The alpha slider follows the rule's natural range (alpha-free rules disable it); the rule's
    one-line explanation is shown under it. Outputs: alpha slider, rule explanation."""
    return gr.update(**alpha_slider_props(rule, alpha)), rule_info(rule)


# gamma "auto" where a pair decodes on the compiled path, whose every block length is a graph of its own: the fastest
# fixed gamma at the app's defaults on the 2-core EPYC (docs/benchmarks.md, the speed-up table).
COMPILED_GAMMA = 3


@dataclass(frozen=True)
class Settings:
    """One run's inputs as the page holds them; ``pair_spec`` names the model pair, its draft included ('tiny',
    'head -> bundled', 'draft -> target')."""

    prompt: str
    pair_spec: str
    chat: bool
    rule: str
    alpha: float
    gamma: int
    temperature: float
    max_new_tokens: int
    seed: int

    @classmethod
    def from_inputs(cls, prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                    auto_gamma=False, draft=None):
        """Checked as the engine checks them, so the page and the API say the same about a bad value.
        ``auto_gamma``: gamma may be "auto" (0 on Explore's slider), as a solo run can re-choose it per block;
        ``draft``: the draft chosen beside the pair ('model', 'head', or a folder or id: models.with_draft)."""
        get_rule(rule).check_alpha(alpha)
        return cls(check_prompt(prompt), with_draft(pair_spec, draft), bool(chat), rule, float(alpha),
                   explore_gamma(gamma) if auto_gamma else whole_number(gamma, "gamma", 1, MAX_GAMMA),
                   temperature_value(temperature),
                   whole_number(max_new_tokens, "max_new_tokens", 1, APP_MAX_NEW_TOKENS),
                   whole_number(seed, "seed", 0, MAX_SEED))

    def for_pair(self, pair):
        """These settings as ``pair`` runs them: on the compiled path gamma "auto" is COMPILED_GAMMA."""
        return replace(self, gamma=COMPILED_GAMMA) if self.gamma == AUTO and pair.compiled else self

    def row_kwargs(self):
        """A row of a batch (the batch holds gamma)."""
        return dict(rule=self.rule, alpha=self.alpha, temperature=self.temperature, seed=self.seed,
                    max_new_tokens=self.max_new_tokens, chat=self.chat)

    def engine_kwargs(self):
        return dict(self.row_kwargs(), gamma=self.gamma)

    def same_text_inputs(self, trace, pair_spec):
        """Whether a trace was made from the same prompt and sampling inputs (rule, alpha and gamma aside)."""
        s = trace.settings
        return (trace.prompt == self.prompt and pair_spec == self.pair_spec and s["chat"] == self.chat
                and s["temperature"] == self.temperature and s["seed"] == self.seed
                and s["max_new_tokens"] == self.max_new_tokens)


def explore_gamma(value):
    """Explore's gamma: a whole number from 1 to MAX_GAMMA, or "auto" (0 on its slider)."""
    if is_finite_number(value) and value == 0:
        return AUTO
    try:
        return gamma_value(value)
    except ValueError:
        raise ValueError(f"gamma must be a whole number from 1 to {MAX_GAMMA}, or 0 or \"auto\" for the cost "
                         f"model's choice, got {shown(value)}") from None


def run_defaults(max_new_tokens, auto_gamma=False):
    """The defaults of ``run_controls``' fields (a tab's link fields): gamma 4 (or 0, "auto"), T 0.7, seed 0."""
    return dict(gamma=0 if auto_gamma else 4, temperature=0.7, seed=0, max_new_tokens=max_new_tokens)


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
