"""Per-token traces: what was emitted, where it came from, and the numbers behind each decision."""
import json
import math
from dataclasses import dataclass, field

from .rules import outcome_unchanged

SOURCES = ("accepted", "deferred", "replaced")


@dataclass
class Trace:
    """One generation. ``positions[i]`` describes output token i:
    token, text, source, proposal (the draft's token), proposal_text, block, max_q, max_p, tv, q_x, p_x,
    accept_prob, a_star ({rule: a*} for the proposal), top_q / top_p ([[id, text, prob], ...] top-10).
    Fields a baseline cannot know (q for target-only, p for draft-only) are None."""

    prompt_ids: list
    settings: dict
    prompt: str | None = None
    positions: list = field(default_factory=list)
    counters: dict = field(default_factory=dict)
    finished: bool = False
    stop_reason: str | None = None
    resumed_from: int = 0  # positions before this were reused from an earlier trace, not generated here

    @property
    def tokens(self):
        return [pos["token"] for pos in self.positions]

    @property
    def sources(self):
        return [pos["source"] for pos in self.positions]

    @property
    def text(self):
        return "".join(pos["text"] for pos in self.positions)

    @property
    def stats(self):
        """Provenance counts and rates describe the whole text; calls, time and the rates built on them
        describe the tokens this run generated (after ``resumed_from``)."""
        c = self.counters
        n = len(self.positions)
        new = n - self.resumed_from
        counts = {s: self.sources.count(s) for s in SOURCES}
        cascade = bool(c.get("draft_calls") and c.get("target_calls"))
        wall = c.get("wall_seconds", 0.0)
        per_call = {role: c[f"{role}_seconds"] / c[f"{role}_calls"] for role in ("draft", "target")
                    if c.get(f"{role}_calls") and c.get(f"{role}_seconds")}
        return {
            "tokens": n,
            "new_tokens": new,
            "resumed_from": self.resumed_from,
            **counts,
            "target_calls": c.get("target_calls", 0),
            "draft_calls": c.get("draft_calls", 0),
            "acceptance_rate": (counts["accepted"] + counts["deferred"]) / n if cascade and n else None,
            "tokens_per_target_call": new / c["target_calls"] if c.get("target_calls") else None,
            "deferral_rate": (counts["deferred"] + counts["replaced"]) / n if n else None,
            "cost_ratio": per_call["draft"] / per_call["target"] if len(per_call) == 2 else None,
            "prefill_seconds": c.get("prefill_seconds", 0.0),
            "wall_seconds": wall,
            "tokens_per_second": new / wall if wall > 0 else None,
        }

    def recolour(self, rule, alpha):
        """Provenance of every position under (rule, alpha), read from the stored a*; no model call.

        Returns (sources, first_changed): first_changed is the first position whose token may differ
        under the new setting (None if none); sources after it are the old ones, to be regenerated."""
        old_rule, old_alpha = self.settings["rule"], self.settings["alpha"]
        sources = []
        for i, pos in enumerate(self.positions):
            a_old = pos["a_star"] and pos["a_star"].get(old_rule)
            a_new = pos["a_star"] and pos["a_star"].get(rule)
            if not outcome_unchanged(old_rule, old_alpha, a_old, rule, alpha, a_new):
                return sources + self.sources[i:], i
            sources.append(_source(pos, rule, alpha))
        return sources, None

    def to_json(self):
        data = {
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "settings": self.settings,
            "tokens": self.tokens,
            "sources": self.sources,
            "text": self.text,
            "positions": self.positions,
            "stats": self.stats,
            "counters": self.counters,
            "finished": self.finished,
            "stop_reason": self.stop_reason,
            "resumed_from": self.resumed_from,
        }
        return json.dumps(_encode_infinities(data))

    @classmethod
    def from_json(cls, text):
        data = _decode_infinities(json.loads(text))
        return cls(prompt_ids=data["prompt_ids"], settings=data["settings"], prompt=data["prompt"],
                   positions=data["positions"], counters=data["counters"], finished=data["finished"],
                   stop_reason=data["stop_reason"], resumed_from=data.get("resumed_from", 0))


def _source(pos, rule, alpha):
    """A kept proposal is 'deferred' if the rule deferred there, else 'accepted'; others were replaced.
    A position with no a* for this rule (a baseline's) keeps the label it has."""
    a_star = (pos["a_star"] or {}).get(rule)
    if a_star is None or (pos["source"] == "replaced" and pos["token"] != pos["proposal"]):
        return pos["source"]
    return "deferred" if alpha < a_star else "accepted"


def _encode_infinities(obj):
    """JSON has no infinities (a* is +-inf for some rules); encode them as the strings 'inf'/'-inf'."""
    if isinstance(obj, float) and math.isinf(obj):
        return "inf" if obj > 0 else "-inf"
    if isinstance(obj, dict):
        return {k: _encode_infinities(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_encode_infinities(v) for v in obj]
    return obj


def _decode_infinities(data):
    """Undo _encode_infinities where numbers live (a*, alpha); token texts stay strings."""
    def number(v):
        return float(v) if v in ("inf", "-inf") else v

    data["settings"]["alpha"] = number(data["settings"]["alpha"])
    for pos in data["positions"]:
        if pos["a_star"]:
            pos["a_star"] = {rule: number(v) for rule, v in pos["a_star"].items()}
    return data
