"""The settings of a run, checked before any model is called: each bad value gets one sentence that names the
field, the value and what is allowed, whatever type a caller sends (None, strings, lists, bools, bytes)."""
from .rules import get_rule
from .values import is_finite_number, shown

MAX_GAMMA = 16
AUTO = "auto"  # gamma chosen by the cost model as the run goes (see costs.best_gamma)
AUTO_GAMMAS = range(1, 7)  # what "auto" chooses from (each block length's verification is measured once)
MAX_NEW_TOKENS = 2048
MAX_SEED = 2**63 - 1
MAX_BATCH_ROWS = 32
ROW_FIELDS = ("prompt", "prompt_ids", "rule", "alpha", "gamma", "temperature", "seed", "max_new_tokens", "resume",
              "details", "chat", "stop_at_eos", "sequential", "eos_token_ids", "min_new_tokens", "stop")
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
    """The prompt as text the tokenizer can take: a non-empty string without lone surrogates (which invalid
    UTF-8 in a command line, or a JSON client's escapes, can produce)."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be text, got {type(prompt).__name__} {shown(prompt)}")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"prompt must be valid Unicode text; character {error.start} is a lone surrogate "
                         f"{prompt[error.start]!r} (invalid UTF-8?)") from None
    if not prompt.strip():
        raise ValueError("the prompt is empty; type something for the models to continue")
    return prompt


def check_settings(pair, prompt_ids, rule, alpha, gamma, temperature, seed, max_new_tokens):
    """Every run setting, in the order a caller reads them; returns (gamma, temperature, seed, max_new_tokens)
    as the engine uses them (ints, and a float)."""
    get_rule(rule).check_alpha(alpha)
    gamma = gamma_value(gamma)
    if gamma == AUTO and pair.compiled:
        raise ValueError('gamma "auto" changes the block length as the run goes, and the compiled path compiles '
                         "every length anew: give gamma a number")
    temperature = temperature_value(temperature)
    seed = whole_number(seed, "seed", 0, MAX_SEED)
    max_new_tokens = whole_number(max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)
    if not prompt_ids:
        raise ValueError("the prompt is empty; type something for the models to continue")
    limit = pair.max_positions
    if len(prompt_ids) + max_new_tokens > limit:
        raise ValueError(f"the prompt ({len(prompt_ids)} tokens) plus max_new_tokens ({max_new_tokens}) exceeds "
                         f"the models' context of {limit} tokens; shorten the prompt or ask for fewer tokens")
    return gamma, temperature, seed, max_new_tokens


def check_stopping(eos_token_ids, min_new_tokens, stop, max_new_tokens):
    """How a run may stop: end-of-text ids (None: the pair's), the tokens before which end-of-text is impossible,
    and a predicate on the generated ids. Returns (eos_token_ids, min_new_tokens) as the engine uses them."""
    if eos_token_ids is not None:
        ids = [eos_token_ids] if is_finite_number(eos_token_ids) else eos_token_ids
        if not isinstance(ids, (list, tuple, set)) or not all(is_finite_number(i) and i == int(i) and i >= 0
                                                              for i in ids):
            raise ValueError(f"eos_token_ids must be a token id or a list of them (whole numbers >= 0), got "
                             f"{shown(eos_token_ids)}")
        eos_token_ids = {int(i) for i in ids}
    min_new_tokens = whole_number(min_new_tokens, "min_new_tokens", 0, max_new_tokens)
    if stop is not None and not callable(stop):
        raise ValueError(f"stop must be a function of the generated token ids, got {shown(stop)}")
    return eos_token_ids, min_new_tokens


def check_rows(rows):
    """A batch's shape: a non-empty list of at most MAX_BATCH_ROWS dicts of known fields (each row's values are
    checked like a solo run's, the message naming the row)."""
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError(f"a batch must be a non-empty list of rows (dicts of settings), got {shown(rows)}")
    if len(rows) > MAX_BATCH_ROWS:
        raise ValueError(f"a batch may have at most {MAX_BATCH_ROWS} rows, got {len(rows)}; split it")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"row {index} must be a dict of settings, got {shown(row)}")
        unknown = [key for key in row if key not in ROW_FIELDS]
        if unknown:
            raise ValueError(f"row {index}: unknown field {shown(unknown[0])}; a row may set {', '.join(ROW_FIELDS)}")
