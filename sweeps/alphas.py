"""Which alphas a sweep runs per rule: an explicit list, checked against each rule's range, or ``auto:N``: N alphas
spread so that the deferral rates of a pilot run cover 0 to 1 evenly (the ensemble's, which defers nothing, spread
over its range)."""
import math
import re

import numpy as np

from cascade_core import RULES
from cascade_core.messages import is_finite_number, shown

MAX_AUTO = 50  # auto:N places at most this many alphas per rule
OPEN_TOP = 0.99  # the highest alpha tried in a range open at its top (lossy's [0, 1))


def parse_alphas(spec):
    """'auto:N' -> ('auto', N); '0.1,0.3' or [0.1, 0.3] -> the sorted list of distinct numbers."""
    if isinstance(spec, (list, tuple)):
        values = list(spec)
        bad = next((v for v in values if not is_finite_number(v)), None)
        if bad is not None:
            raise ValueError(f"alphas: every alpha must be a finite number, got {shown(bad)} in {shown(spec)}")
    elif isinstance(spec, str) and spec.startswith("auto:"):
        n = spec.removeprefix("auto:")
        if not re.fullmatch("[0-9]{1,2}", n) or not 1 <= int(n) <= MAX_AUTO:
            raise ValueError(f"alphas {shown(spec)}: auto:N needs a whole number N from 1 to {MAX_AUTO}")
        return "auto", int(n)
    elif isinstance(spec, str):
        try:
            values = [float(v) for v in spec.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"alphas {shown(spec)}: give 'auto:N' or numbers separated by commas") from None
        if not all(map(math.isfinite, values)):
            raise ValueError(f"alphas {shown(spec)}: every alpha must be a finite number")
    else:
        raise ValueError(f"alphas must be 'auto:N' or a list of numbers, got {shown(spec)}")
    if not values:
        raise ValueError(f"alphas {shown(spec)}: give 'auto:N' or at least one number")
    return sorted(set(values))


def needs_pilot(rules, alphas):
    """Whether auto alphas must be placed by a pilot run: 'auto:N' and a rule that reads alpha."""
    return alphas[0] == "auto" and any(RULES[r].alpha_used for r in rules)


def check_alphas(rules, alphas):
    """Every explicit alpha inside every rule's range that uses alpha; a ValueError names the first that is not."""
    if alphas[0] == "auto":
        return
    for rule in rules:
        if RULES[rule].alpha_used:
            for alpha in alphas:
                RULES[rule].check_alpha(alpha)


def auto_alphas(rule, a_stars, n):
    """n alphas for a rule, from the a* of a pilot run's positions: the rule defers at a position iff alpha < a*,
    so the deferral rate at alpha is the share of a* above it. Rates k / (n - 1), k = 0 .. n - 1, are reached at
    the (1 - rate) quantiles of a* (just below the smallest a* for rate 1), clipped into the rule's range."""
    record = RULES[rule]
    if record.mix:  # its alpha weighs the target in every position's pi: nothing defers, so spread the range
        return [round(float(a), 4) for a in np.linspace(*record.alpha_range, n)] if n > 1 else [0.5]
    finite = np.array([a for a in a_stars if math.isfinite(a)])
    lo, hi = record.alpha_range
    lo = lo if math.isfinite(lo) else (finite.min() - 0.01 if len(finite) else -1.0)
    hi = OPEN_TOP if record.upper_open else hi if math.isfinite(hi) else (finite.max() if len(finite) else 1.0)
    values = np.clip(np.array(a_stars, dtype=float), lo, hi)
    rates = np.linspace(0, 1, n) if n > 1 else np.array([0.5])
    chosen = [float(np.quantile(values, 1 - r)) - (1e-4 if r == 1 else 0) for r in rates]
    return sorted({round(min(max(a, lo), hi), 4) for a in chosen})


def proposed_a_stars(rule, positions):
    """The rule's a* at the positions the draft proposed at (gamma "auto"'s floor proposed nothing: no a*)."""
    return [pos["a_star"][rule] for pos in positions if pos["a_star"]]


def alphas_per_rule(rules, alphas, pilot_positions):
    """{rule: alphas}; alpha-free rules get [None]. pilot_positions: trace positions with a* for every rule."""
    chosen = {}
    for rule in rules:
        if not RULES[rule].alpha_used:
            chosen[rule] = [None]
        elif alphas[0] == "auto":
            chosen[rule] = auto_alphas(rule, proposed_a_stars(rule, pilot_positions), alphas[1])
        else:
            chosen[rule] = list(alphas)
    return chosen
