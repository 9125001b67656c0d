"""One order for the fields every API shares: a raw HTTP call (or gradio_client's positional one) sends its values
in the order of the endpoint's signature, and the endpoints that share fields list them in SHARED_ORDER's order,
each endpoint's own fields in their place (/compare's rows and /frontier's rules and alphas where /run has rule and
alpha; /strategies' threshold after alpha; /run's reproducible and /block's block last).

Three endpoints once had another order (OLD_ORDERS): /compare and /strategies sent seed before max_new_tokens,
/frontier seed right after alphas. A call written for an old order is refused in one sentence wherever its values'
types and ranges fit that order and not the current one (seed 0 read as max_new_tokens 0, a temperature read as
max_new_tokens); where both fit (seed 5 and max_new_tokens 32 can swap), values are read in the current order, as
no server can tell them apart."""
import gradio as gr

from cascade_core.decoding.run_settings import MAX_GAMMA, MAX_SEED, MAX_TEMPERATURE, MIN_TEMPERATURE
from cascade_core.messages import is_number, shown

from .controls import APP_MAX_NEW_TOKENS

SHARED_ORDER = ("prompt", "rule", "alpha", "gamma", "temperature", "max_new_tokens", "seed", "draft")
OLD_ORDERS = {
    "compare": ("prompt", "rows", "gamma", "temperature", "seed", "max_new_tokens", "draft"),
    "frontier": ("prompt", "rules", "alphas", "seed", "gamma", "temperature", "max_new_tokens", "draft"),
    "strategies": ("prompt", "rule", "alpha", "threshold", "gamma", "temperature", "seed", "max_new_tokens", "draft"),
}


def whole(value, lo, hi):
    """An integer as JSON writes one (4, not 4.0 or true) from lo to hi."""
    return is_number(value) and isinstance(value, int) and lo <= value <= hi


# What each field's value looks like, strictly (a call's own check takes 4.0 for 4; telling orders apart does not)
LOOKS = {
    "gamma": lambda v: v == "auto" or whole(v, 0, MAX_GAMMA),
    "temperature": lambda v: is_number(v) and (v == 0 or MIN_TEMPERATURE <= v <= MAX_TEMPERATURE),
    "max_new_tokens": lambda v: whole(v, 1, APP_MAX_NEW_TOKENS),
    "seed": lambda v: whole(v, 0, MAX_SEED),
    "draft": lambda v: isinstance(v, str),
}


def fits(names, values):
    """Whether every value looks like the field it lands on when read in the order ``names``."""
    return all(LOOKS[name](value) for name, value in zip(names, values) if name in LOOKS)


def check_order(name, names, values):
    """Refuse, in one sentence, an endpoint's values that fit its old order but not its order now (``names``)."""
    old = OLD_ORDERS.get(name)
    if old is None or fits(names, values) or not fits(old, values):
        return
    field, value = next((field, value) for field, value in zip(names, values)
                        if field in LOOKS and not LOOKS[field](value))
    raise gr.Error(f"these values fit /{name}'s old order ({', '.join(old)}) but not its order now "
                   f"({', '.join(names)}), in which {field} would be {shown(value)}; send them in the order now, seed "
                   "after max_new_tokens as in every endpoint", print_exception=False)
