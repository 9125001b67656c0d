"""A run's settings as the app holds them (the engine's RunSettings with the prompt and the model pair) and every
conversion of them, in one place: from a tab's controls or an API call (``from_inputs``), from a link's query
(``field_value`` per field, ``from_query``), back to a link (``to_query``) and back to the controls
(``to_controls``). tests/test_settings.py round-trips them."""
import re
from dataclasses import dataclass, replace

from cascade_core import get_rule
from cascade_core.decoding.prompt_checks import check_length
from cascade_core.decoding.run_settings import (AUTO, MAX_GAMMA, MAX_SEED, RunSettings, check_prompt, gamma_value,
                                                temperature_value, whole_number)
from cascade_core.formats.loading import DRAFT_KINDS, KNOWN_DRAFTS, offline_draft, parse_pair, with_draft
from cascade_core.messages import is_finite_number, shown

from .controls import APP_MAX_NEW_TOKENS, alpha_slider_range

MAX_TEMPERATURE = 2.0  # the temperature sliders' end, and a link's (the engine itself allows more)
# gamma "auto" where a pair decodes on the compiled path, whose every block length is a graph of its own: the fastest
# fixed gamma at the app's defaults on the 2-core EPYC (docs/benchmarks.md, the speed-up table).
COMPILED_GAMMA = 3
# The fields of a run a link can set, in the order they are read (rule before alpha: alpha is checked against it).
RUN_FIELDS = ("prompt", "draft", "rule", "alpha", "gamma", "temperature", "seed", "max_new_tokens")
# A number as a person types it in a link: ASCII digits only (int() also takes '١٢', '５' and '1_000'), and short
# (a 5,000-digit seed read as a float was reported as 'inf').
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
INTEGER = re.compile(r"[+-]?[0-9]+")
MAX_NUMBER_LENGTH = 32


@dataclass(frozen=True)
class AppSettings(RunSettings):
    """One run's inputs as a tab holds them; ``pair_spec`` names the model pair, its draft included ('tiny',
    'head -> bundled', 'draft -> target'). The engine takes it as its RunSettings."""

    prompt: str = ""
    pair_spec: str = "tiny"
    most_tokens = APP_MAX_NEW_TOKENS

    def __post_init__(self):
        check_prompt(self.prompt)
        super().__post_init__()

    @classmethod
    def from_inputs(cls, prompt, pair_spec, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                    auto_gamma=False, draft=None, reproducible=False):
        """From a tab's controls or an API call's arguments, checked as the engine checks them, so the page and the
        API say the same about a bad value. ``auto_gamma``: gamma may be "auto" (0 on a slider), as a run can
        re-choose it per block; ``draft``: the draft chosen beside the pair ('model', 'head', or a folder or id)."""
        get_rule(rule).check_alpha(alpha)
        check_prompt(prompt)
        return cls(prompt=prompt, pair_spec=with_draft(pair_spec, draft), chat=bool(chat), rule=rule,
                   alpha=float(alpha), gamma=auto_or_fixed_gamma(gamma) if auto_gamma else fixed_gamma(gamma),
                   temperature=temperature, max_new_tokens=max_new_tokens, seed=seed, reproducible=reproducible)

    @classmethod
    def from_query(cls, params, defaults, pair_spec, auto_gamma=True):
        """A link's query (text by field name) over a tab's ``defaults`` (control values by field name); the first
        bad value is refused in its one sentence."""
        values = dict(defaults)
        for name in RUN_FIELDS:
            if name in params:
                values[name] = field_value(name, params[name], values["rule"], auto_gamma=auto_gamma)
        return cls.from_inputs(values["prompt"], pair_spec, True, values["rule"], values["alpha"], values["gamma"],
                               values["temperature"], values["max_new_tokens"], values["seed"], auto_gamma,
                               values.get("draft"))

    @classmethod
    def of_run(cls, trace, pair_spec):
        """The settings that made a trace (a page's run), to run it again: a replay of one of its blocks."""
        s = trace.settings
        return cls(prompt=trace.prompt, pair_spec=pair_spec, chat=s["chat"], rule=s["rule"], alpha=s["alpha"],
                   gamma=s["gamma"], temperature=s["temperature"], max_new_tokens=s["max_new_tokens"], seed=s["seed"])

    def to_controls(self):
        """The values of a tab's run controls (gamma "auto" is a slider's 0)."""
        return dict(prompt=self.prompt, draft=draft_of(self.pair_spec), rule=self.rule, alpha=self.alpha,
                    gamma=0 if self.gamma == AUTO else self.gamma, temperature=self.temperature, seed=self.seed,
                    max_new_tokens=self.max_new_tokens)

    def to_query(self):
        """The link's text of each run field (``from_query`` reads it back)."""
        return {name: link_text(value) for name, value in self.to_controls().items()}

    def for_pair(self, pair):
        """These settings as ``pair`` runs them: on the compiled path gamma "auto" is COMPILED_GAMMA. A prompt too
        long for the pair's context whatever its tokens is refused here, in the handler's thread, before any
        tokenizer reads it (prompts.check_length; the engine thread never sees it)."""
        check_length(self.prompt, pair, self.max_new_tokens)
        return replace(self, gamma=COMPILED_GAMMA) if self.gamma == AUTO and pair.compiled else self

    def same_text_inputs(self, trace, pair_spec):
        """Whether a trace was made from the same prompt and sampling inputs (rule, alpha and gamma aside)."""
        s = trace.settings
        return (trace.prompt == self.prompt and pair_spec == self.pair_spec and s["chat"] == self.chat
                and s["temperature"] == self.temperature and s["seed"] == self.seed
                and s["max_new_tokens"] == self.max_new_tokens and s.get("reproducible", False) == self.reproducible)


def fixed_gamma(value):
    return whole_number(value, "gamma", 1, MAX_GAMMA)


def auto_or_fixed_gamma(value):
    """A gamma control's value: a whole number from 1 to MAX_GAMMA, or "auto" (0 on its slider)."""
    if is_finite_number(value) and value == 0:
        return AUTO
    try:
        return gamma_value(value)
    except ValueError:
        raise ValueError(f"gamma must be a whole number from 1 to {MAX_GAMMA}, or 0 or \"auto\" for the cost "
                         f"model's choice, got {shown(value)}") from None


def draft_of(spec):
    """The draft a pair spec runs with, as a link names it (one of DRAFT_KINDS)."""
    ids = parse_pair(spec)
    if "name" in ids:
        return offline_draft(ids["name"], ids.get("draft"))
    return "head" if ids["draft"] == KNOWN_DRAFTS.get(ids["target"], {}).get("head") else "model"


def link_text(value):
    """A control's value as a link writes it (a list: its items separated by commas; a flag: 1 or 0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def number(text, name):
    if len(text) > MAX_NUMBER_LENGTH or not NUMBER.fullmatch(text):
        raise ValueError(f"{name} must be a number written with the digits 0-9, got {shown(text)}")
    return int(text) if INTEGER.fullmatch(text) else float(text)


def field_value(name, text, rule, rules=None, auto_gamma=False):
    """One run field of a link as its control takes it, or a ValueError naming it: ``rule`` is the link's (alpha
    is checked against its slider's range), ``rules`` the rules the tab offers (None: every rule), ``auto_gamma``
    whether the tab's gamma slider has 0 for "auto"."""
    if name == "prompt":
        return check_prompt(text)
    if name == "draft":
        if text not in DRAFT_KINDS:
            raise ValueError(f"draft must be model (the draft model) or head (the EAGLE-3 head), got {shown(text)}")
        return text
    if name == "rule":
        if rules is None:
            get_rule(text)
        elif text not in rules:
            raise ValueError(f"rule must be one of {', '.join(rules)} on this tab, got {shown(text)}")
        return text
    if name == "alpha":
        alpha = number(text, "alpha")
        get_rule(rule).check_alpha(alpha)
        lo, hi = alpha_slider_range(rule)
        if not lo <= alpha <= hi:
            raise ValueError(f"alpha={shown(alpha)} is outside the slider's range [{lo:g}, {hi:g}] for rule {rule!r}")
        return alpha
    if name == "temperature":
        temperature = temperature_value(number(text, "temperature"))
        if temperature > MAX_TEMPERATURE:
            raise ValueError(f"temperature must be 0 (greedy) or a number up to {MAX_TEMPERATURE:g}, got {shown(text)}")
        return temperature
    if name == "gamma" and auto_gamma:  # a slider whose 0 is "auto"
        return 0 if text == AUTO else whole_number(number(text, name), name, 0, MAX_GAMMA)
    limits = {"gamma": (1, MAX_GAMMA), "seed": (0, MAX_SEED), "max_new_tokens": (1, APP_MAX_NEW_TOKENS)}
    return whole_number(number(text, name), name, *limits[name])
