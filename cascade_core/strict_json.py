"""Strict JSON for everything the project emits (traces, the API, the CLI, sweep rows): no NaN, no Infinity,
which strict parsers such as the browser's ``JSON.parse`` reject. Infinities (a* of rules that always or never
defer, open ends of alpha ranges) travel as the strings "inf" and "-inf"; NaN travels as null."""
import json
import math

INFINITIES = {"inf": math.inf, "-inf": -math.inf}


def strict(obj):
    """obj with every float made JSON-safe and tuples made lists (json.dumps would pass their floats through)."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        return ("inf" if obj > 0 else "-inf") if math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def dumps(obj, **kwargs):
    """json.dumps of ``strict(obj)``; ``allow_nan=False`` makes any slip an error here, not in a client."""
    return json.dumps(strict(obj), allow_nan=False, **kwargs)


def number(value):
    """Undo ``strict`` for a field known to hold a number ("inf" -> inf); token texts are never passed here."""
    return INFINITIES.get(value, value) if isinstance(value, str) else value
