"""The settings of a run, checked before any model is called: each bad value gets one sentence that names the
field, the value and what is allowed, whatever type a caller sends (None, strings, lists, bools, bytes)."""
from dataclasses import dataclass, fields, replace
from typing import Callable

from cascade_core.decoding.draft_protocol import check_alone
from cascade_core.decoding.prompt_checks import blank
from cascade_core.messages import is_finite_number, shown
from cascade_core.method.rules import RULES, get_rule

MAX_GAMMA = 16
AUTO = "auto"  # gamma chosen by the cost model as the run goes (see costs.best_gamma)
AUTO_GAMMAS = range(1, 7)  # what "auto" chooses from (each block length's verification is measured once)
TARGET_ALONE = "target alone"  # "auto"'s floor for lossless rows: a block of one token, the target's own
MAX_NEW_TOKENS = 2048
MAX_SEED = 2**63 - 1
MAX_BATCH_ROWS = 32
INPUT_FIELDS = ("prompt", "prompt_ids", "resume")  # what a row reads, beside its RunSettings
# Below this a temperature cannot be computed in float32: logits / T overflow to inf and softmax gives NaN.
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 10.0


def whole_number(value, name, lo, hi):
    """value as an int in [lo, hi]; 4.0 counts as 4 (sliders and JSON clients send floats)."""
    if is_finite_number(value) and value == int(value) and lo <= value <= hi:
        return int(value)
    raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {shown(value)}")


def gamma_value(value):
    """gamma as the engine uses it: a whole number from 1 to MAX_GAMMA, or "auto"."""
    if value == AUTO:
        return AUTO
    try:
        return whole_number(value, "gamma", 1, MAX_GAMMA)
    except ValueError:
        raise ValueError(f"gamma must be a whole number from 1 to {MAX_GAMMA} or \"auto\", "
                         f"got {shown(value)}") from None


def temperature_value(value):
    if is_finite_number(value) and (value == 0 or MIN_TEMPERATURE <= value <= MAX_TEMPERATURE):
        return float(value)
    raise ValueError(f"temperature must be 0 (greedy) or a number from {MIN_TEMPERATURE} to {MAX_TEMPERATURE:g}, "
                     f"got {shown(value)}")


def check_prompt(prompt):
    """The prompt as text the tokenizer can take: a string that shows something (not only spaces or invisible
    characters such as zero-width spaces: prompts.blank), without lone surrogates (which invalid UTF-8 in a command
    line, or a JSON client's escapes, can produce)."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be text, got {type(prompt).__name__} {shown(prompt)}")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"prompt must be valid Unicode text; character {error.start} is a lone surrogate "
                         f"{prompt[error.start]!r} (invalid UTF-8?)") from None
    if blank(prompt):
        raise ValueError("the prompt is empty; type something for the models to continue")
    return prompt


@dataclass(frozen=True)
class RunSettings:
    """One run's settings, checked once, here: a bad value is refused in one sentence naming the field, the value
    and what is allowed, before any model call, whatever type a caller sends. Built from keywords
    (``RunSettings.of``); the app builds it from its API calls, links and controls (app/settings.py). gamma is a
    number or "auto"; eos_token_ids None means the pair's; min_new_tokens: end-of-text is impossible before it;
    stop: a predicate on the generated ids; reproducible: the call's rows decode in a batch of their own, never
    beside another call's, so that a one-row call is bitwise its solo run whoever else is decoding (by default rows
    share forwards, and a decision taken within sampling.NEAR_TIE of its threshold, which the trace marks, can go
    the other way: docs/spec.md)."""

    rule: str = "v3"
    alpha: float = 0.3
    gamma: int | str = 4
    temperature: float = 1.0
    seed: int = 0
    max_new_tokens: int = 64
    chat: bool = True
    details: bool = True
    sequential: bool = False
    stop_at_eos: bool = True
    eos_token_ids: frozenset | None = None
    min_new_tokens: int = 0
    stop: Callable | None = None
    reproducible: bool = False

    def __post_init__(self):
        get_rule(self.rule).check_alpha(self.alpha)
        checked = dict(gamma=gamma_value(self.gamma), temperature=temperature_value(self.temperature),
                       seed=whole_number(self.seed, "seed", 0, MAX_SEED),
                       max_new_tokens=whole_number(self.max_new_tokens, "max_new_tokens", 1, self.most_tokens),
                       eos_token_ids=token_ids(self.eos_token_ids))
        checked["min_new_tokens"] = whole_number(self.min_new_tokens, "min_new_tokens", 0, checked["max_new_tokens"])
        if self.stop is not None and not callable(self.stop):
            raise ValueError(f"stop must be a function of the generated token ids, got {shown(self.stop)}")
        for name in ("chat", "details", "sequential", "stop_at_eos", "reproducible"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {shown(getattr(self, name))}")
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    most_tokens = MAX_NEW_TOKENS  # a subclass's own limit (the app's)

    @classmethod
    def of(cls, base=None, **keywords):
        """From keywords (over ``base``'s values where given), an unknown one refused in one sentence."""
        names = [f.name for f in fields(cls)]
        unknown = [key for key in keywords if key not in names]
        if unknown:
            raise ValueError(f"{shown(unknown[0])} is not a setting; the settings are {', '.join(names)}")
        return cls(**keywords) if base is None else replace(base, **keywords)

    def check_for(self, pair, prompt_ids):
        """What depends on the pair: the draft's capabilities, the compiled path's fixed gamma, the context."""
        check_alone(pair.drafting, self.rule, self.sequential)
        if self.gamma == AUTO and pair.compiled:
            raise ValueError('gamma "auto" changes the block length as the run goes, and the compiled path compiles '
                             "every length anew: give gamma a number")
        if not prompt_ids:
            raise ValueError("the prompt is empty; type something for the models to continue")
        if len(prompt_ids) + self.max_new_tokens > pair.max_positions:
            raise ValueError(f"the prompt ({len(prompt_ids)} tokens) plus max_new_tokens ({self.max_new_tokens}) "
                             f"exceeds the models' context of {pair.max_positions} tokens; shorten the prompt or ask "
                             "for fewer tokens")

    def recorded(self, pair):
        """The settings a trace records (strict JSON: the stopping predicate and end-of-text ids stay out), with the
        pair's precision: what ran and where its weights came from (precision.py)."""
        record = dict(rule=self.rule, alpha=self.alpha, gamma=self.gamma, temperature=self.temperature,
                      seed=self.seed, details=self.details, sequential=self.sequential,
                      max_new_tokens=self.max_new_tokens, chat=self.chat, pair=pair.name,
                      precision=pair.precision, alpha_range=RULES[self.rule].alpha_range)
        if self.min_new_tokens:
            record["min_new_tokens"] = self.min_new_tokens
        if self.reproducible:
            record["reproducible"] = True
        return record


def token_ids(value):
    """End-of-text ids as a frozenset (None stays None: the pair's)."""
    if value is None:
        return None
    ids = [value] if is_finite_number(value) else value
    if not isinstance(ids, (list, tuple, set, frozenset)) or not all(is_finite_number(i) and i == int(i) and i >= 0
                                                                    for i in ids):
        raise ValueError(f"eos_token_ids must be a token id or a list of them (whole numbers >= 0), got {shown(value)}")
    return frozenset(int(i) for i in ids)


def check_rows(rows):
    """A batch's shape: a non-empty list of at most MAX_BATCH_ROWS dicts of known fields (each row's values are
    checked like a solo run's, the message naming the row)."""
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError(f"a batch must be a non-empty list of rows (dicts of settings), got {shown(rows)}")
    if len(rows) > MAX_BATCH_ROWS:
        raise ValueError(f"a batch may have at most {MAX_BATCH_ROWS} rows, got {len(rows)}; split it")
    known = INPUT_FIELDS + ("settings",) + tuple(f.name for f in fields(RunSettings))
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"row {index} must be a dict of settings, got {shown(row)}")
        unknown = [key for key in row if key not in known]
        if unknown:
            raise ValueError(f"row {index}: unknown field {shown(unknown[0])}; a row may set {', '.join(known)}")
