"""Prompt sets: JSONL, one object per line with ``prompt`` (required) and optionally ``id``, ``category``,
``reference`` (scored with ROUGE-L) and ``answer`` (a number, scored by exact match)."""
import json
from collections import Counter
from pathlib import Path

FIELDS = ("prompt", "id", "category", "reference", "answer")


def load_prompts(path):
    """The prompt set in ``path`` as dicts with every field (None where a line leaves it out); ``prompt_id`` is the
    line's ``id``, else its 0-based line number. Any problem is a ValueError naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read the prompt file {str(path)!r}: {error}") from None
    items = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path}:{number + 1}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}: not a JSON object ({error.msg}); each line must be one JSON object") from None
        if not isinstance(item, dict):
            raise ValueError(f"{where}: each line must be a JSON object with a \"prompt\", got {type(item).__name__}")
        unknown = set(item) - set(FIELDS)
        if unknown:
            raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}; the fields are {', '.join(FIELDS)}")
        if not isinstance(item.get("prompt"), str) or not item["prompt"].strip():
            raise ValueError(f"{where}: \"prompt\" must be non-empty text")
        if "answer" in item and not isinstance(item["answer"], (int, float)):
            raise ValueError(f"{where}: \"answer\" must be a number, got {item['answer']!r}")
        items.append({**{key: item.get(key) for key in FIELDS},
                      "prompt_id": str(item["id"]) if item.get("id") is not None else str(number)})
    ids = [item["prompt_id"] for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: prompt ids must be unique; {next(i for i in ids if ids.count(i) > 1)!r} repeats")
    if not items:
        raise ValueError(f"{path}: no prompts (one JSON object per line, each with a \"prompt\")")
    return items


def per_category(prompts, n):
    """The first n prompts of each category, in file order: a smaller set with every category in it."""
    counts, kept = Counter(), []
    for item in prompts:
        counts[item["category"]] += 1
        if counts[item["category"]] <= n:
            kept.append(item)
    return kept
