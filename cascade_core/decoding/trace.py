"""Per-token traces: what was emitted, where it came from, and the numbers behind each decision.

The engine hands every verified block to ``Trace.add_block``; the per-position records (a* of every rule,
the top-10 of q and p, token texts) are built here, and callers that need only tokens ask for ``details=False``.
"""
import json
import math
import weakref
from dataclasses import dataclass, field

import torch

from cascade_core.decoding.cached_model import Counters
from cascade_core.method.acceptance_metrics import metrics, trace_steps
from cascade_core.method.decision import TOP_K
from cascade_core.method.distributions import total_variation
from cascade_core.method.rules import RULES, critical_alphas, outcome_unchanged, pi_draft, pi_per_position, pi_target
from cascade_core.method.sampling import NEAR_TIE, emitted_distribution
from cascade_core.strict_json import dumps, number

# target: gamma "auto"'s floor (cascade_core/decoding/batch_block.py)
SOURCES = ("accepted", "deferred", "replaced", "target")
DETAIL_FIELDS = ("proposal_text", "max_q", "tv", "q_x", "p_x", "top_q", "top_p")


class Detokenizer:
    """Emitted ids to text pieces that concatenate to the decoded text (a multi-byte character split over
    tokens lands on the token that completes it). Without a tokenizer (transformers' entry) texts are empty.

    One per tokenizer (``for_tokenizer``), so that every row shares its memo of single tokens' texts: a block's
    records name ~40 tokens (the top-10 of q and p), whose decoding was a quarter of the engine's own time
    (docs/design.md, "Measured choices")."""

    WINDOW = 8
    _shared = weakref.WeakKeyDictionary()

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.texts = {}  # id -> its text decoded alone

    @classmethod
    def for_tokenizer(cls, tokenizer):
        if tokenizer is None:
            return cls(None)
        if tokenizer not in cls._shared:
            cls._shared[tokenizer] = cls(tokenizer)
        return cls._shared[tokenizer]

    def pieces(self, tokens, start):
        if self.tokenizer is None:
            return [""] * (len(tokens) - start)
        out = []
        for i in range(start, len(tokens)):
            window = tokens[max(0, i - self.WINDOW): i]
            before = self.tokenizer.decode(window)
            after = self.tokenizer.decode(window + [tokens[i]])
            out.append("" if after.endswith("\ufffd") else after[len(before.rstrip("\ufffd")):])
        return out

    def singles(self, ids):
        if self.tokenizer is None:
            return [""] * len(ids)
        new = list({i for i in ids if i not in self.texts})
        self.texts.update(zip(new, self.tokenizer.batch_decode([[i] for i in new])))
        return [self.texts[i] for i in ids]


def _top(d, other, detokenizer, columns=None):
    """Each position's top-k of d as [id, text, prob, the other model's prob of that token (None: not run)], so a
    token listed under one model has both numbers (the Sandbox loads a position from them). ``columns``: the token
    id of each of d's columns where d covers a draft's support only."""
    probs, ids = d.topk(min(TOP_K, d.shape[-1]), dim=-1)
    ids = ids if columns is None else columns[ids]
    others = [[None] * ids.shape[-1]] * ids.shape[0] if other is None else other.gather(-1, ids).tolist()
    ids, probs = ids.tolist(), probs.tolist()
    texts = iter(detokenizer.singles([i for row in ids for i in row]))
    return [[[i, next(texts), pr, o] for i, pr, o in zip(row_i, row_p, row_o)]
            for row_i, row_p, row_o in zip(ids, probs, others)]


def _column(values, m):
    return values.tolist() if values is not None else [None] * m


def _gather(t, ids):
    return None if t is None else t.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def near_ties(block, rule, alpha, a_star):
    """Per emitted position, the decisions taken within NEAR_TIE of going the other way: a draw near its bin's edge,
    a keep test's uniform near its probability, alpha near the rule's a*, or (greedy) a model's top two tokens."""
    m, d = len(block.tokens), block.d
    ties = [[name for name, values in block.margins.items() if values[i] is not None and values[i] < NEAR_TIE]
            for i in range(m)]
    for i, stars in enumerate(a_star):
        if stars and math.isfinite(stars.get(rule, math.inf)) and abs(alpha - stars[rule]) < NEAR_TIE:
            ties[i].append("deferral")
    if d.greedy:
        for name, t in (("draft's top two", d.q_untempered), ("target's top two", d.p_untempered)):
            if t is not None and t.shape[-1] > 1:
                top = t.topk(2, dim=-1).values
                for i in ((top[:, 0] - top[:, 1]) < NEAR_TIE).nonzero().flatten().tolist():
                    ties[i].append(name)
    return ties


def pi_is_q_or_p(rule):
    """Whether the rule's pi is q or p at every position (Lemma 3's two cases: a position rule, lossless, a
    baseline), so that its TV to the target is TV(q, p) where it kept q and 0 where it deferred."""
    r = RULES[rule]
    return r.pi in (pi_per_position, pi_target, pi_draft) and not r.lenience


def tv_to_target(d, rule, alpha):
    """Per position of d, TV(pi_t, p_t): how far the distribution the emitted token follows (pi_t, the exactness of
    Algorithm 4's verification; lossy: its output distribution) lies from the target's own sampling distribution
    p_t (tempered) at the same prefix, over the whole vocabulary. 0 is the target's distribution. Where pi is q or p
    (``pi_is_q_or_p``) it is TV(q, p) where the rule kept q and 0 where it deferred or the target sampled alone
    (target-only, gamma "auto"'s floor); a token rule's pi (Eq. 11) and lossy's output take the full vectors. None
    where the target never scored the position (draft-only, a sequential cascade's step that did not call it)."""
    if d.p is None:
        return None
    if not pi_is_q_or_p(rule):
        return total_variation(emitted_distribution(rule, d, alpha), d.p)
    if d.q is None or RULES[rule].pi is pi_target:
        return torch.zeros_like(d.p[..., 0])
    return torch.where(RULES[rule].defers(d, alpha), 0.0, d.tv)


def block_records(block, rule, alpha, detokenizer, details=True):
    """One dict per emitted position (see Trace). Untempered statistics: max q, max p, q(x), p(x), p_token;
    TV from the sampling distributions, as the rules use it."""
    d, m = block.d, len(block.tokens)
    ref = d.q if d.q is not None else d.p
    x = torch.tensor(block.proposals, device=ref.device)
    tokens = torch.tensor(block.tokens, device=ref.device)
    both = d.q is not None and d.p is not None
    if block.sources == ["target"]:  # gamma "auto"'s floor: nothing was proposed, so no rule had an a* to read
        a_star = [{}]
    elif details and both:
        stars = {name: a.tolist() for name, a in critical_alphas(d, x).items()}
        a_star = [{name: values[i] for name, values in stars.items()} for i in range(m)]
    else:  # the run's own rule only (a baseline's always or never defers; a sequential chow step has no p)
        a_star = [{rule: a} for a in RULES[rule].a_star_at(d, x).tolist()]
    columns = dict(a_star=a_star, near_tie=near_ties(block, rule, alpha, a_star),
                   accept_prob=_column(block.accept_prob, m),
                   max_p=_column(None if d.p is None else d.max_p, m),
                   tv_to_target=_column(tv_to_target(d, rule, alpha), m),
                   p_token=_column(_gather(d.p_untempered, tokens), m))
    if details:
        columns.update(
            proposal_text=detokenizer.singles(block.proposals),
            max_q=_column(None if d.q is None else d.max_q, m),
            tv=_column(d.tv if both else None, m),
            q_x=_column(_gather(d.q_untempered, x), m), p_x=_column(_gather(d.p_untempered, x), m),
            top_q=[None] * m if d.q is None else _top(d.on_q.q_untempered, d.p_untempered if both else None,
                                                      detokenizer, d.support),
            top_p=[None] * m if d.p is None else _top(d.p_untempered, d.q_untempered if both else None, detokenizer))
    else:
        columns.update({key: [None] * m for key in DETAIL_FIELDS})
    return [dict(token=block.tokens[i], source=block.sources[i], proposal=block.proposals[i], block=block.index,
                 **{key: values[i] for key, values in columns.items()}) for i in range(m)]


@dataclass
class Trace:
    """One generation. ``positions[i]`` describes output token i: token, text, source (SOURCES; "target": the
    target's own token, where gamma "auto"'s floor took one), proposal (the draft's token), block, accept_prob,
    a_star ({rule: a*} for the proposal; {} at the floor's tokens, where nothing was proposed), max_p and p_token
    (the target's temperature-1 probability of its best and of the emitted token), tv_to_target (TV(pi, p) there,
    ``tv_to_target``; its mean over the text is ``stats``' tv_to_target), near_tie (the decisions at it taken within
    sampling.NEAR_TIE of going the other way: where a row in another batch can part from its solo run) and, with
    details: proposal_text, max_q, tv, q_x, p_x, top_q / top_p ([[id, text, prob, other model's prob], ...] top-10,
    temperature 1). Without details a_star holds the run's own rule only and the detail fields are None, as are
    fields a baseline cannot know (q for target-only)."""

    prompt_ids: list
    settings: dict
    prompt: str | None = None
    positions: list = field(default_factory=list)
    counters: Counters = field(default_factory=Counters)  # its row's calls and clocks
    finished: bool = False
    stop_reason: str | None = None  # "eos", "max_new_tokens", "stop" (the caller's predicate), or "error" (a batch's
    # row whose model failed)
    error: str | None = None
    resumed_from: int = 0  # positions before this were reused from an earlier trace, not generated here
    detokenizer: Detokenizer = field(default=Detokenizer(None), repr=False, compare=False)

    @property
    def tokens(self):
        return [pos["token"] for pos in self.positions]

    @property
    def sources(self):
        return [pos["source"] for pos in self.positions]

    @property
    def text(self):
        return "".join(pos["text"] for pos in self.positions)

    def add_block(self, block, eos=(), max_new_tokens=None, stop=None):
        """Append a verified block's positions (up to an end-of-text token, or the first at which
        ``stop(tokens)`` holds) and their text pieces."""
        start = len(self.positions)
        details = self.settings.get("details", True)
        for record in block_records(block, self.settings["rule"], self.settings["alpha"], self.detokenizer, details):
            self.positions.append(record)
            if record["token"] in eos:
                self.finished, self.stop_reason = True, "eos"
                break
            if stop is not None and stop(self.tokens):
                self.finished, self.stop_reason = True, "stop"
                break
        for record, text in zip(self.positions[start:], self.detokenizer.pieces(self.tokens, start)):
            record["text"] = text
        if not self.finished and max_new_tokens is not None and len(self.positions) >= max_new_tokens:
            self.finished, self.stop_reason = True, "max_new_tokens"

    @property
    def gamma(self):
        """The gamma its blocks used: the setting, or for gamma "auto" the one they used most (the first on a tie;
        1 before any block)."""
        used = self.counters.gammas or [1]
        return max(used, key=used.count) if self.settings["gamma"] == "auto" else self.settings["gamma"]

    @property
    def stats(self):
        """Provenance counts and rates describe the whole text; calls, time and the rates built on them
        describe the tokens this run generated (after ``resumed_from``)."""
        c = self.counters
        n = len(self.positions)
        new = n - self.resumed_from
        counts = {s: self.sources.count(s) for s in SOURCES}
        drafted = n - counts["target"]  # positions the draft proposed at (all but gamma "auto"'s floor)
        cascade = bool(c.draft_calls and c.target_calls)
        wall = c.wall_seconds
        per_call = {role: c[f"{role}_seconds"] / c[f"{role}_calls"] for role in ("draft", "target")
                    if c[f"{role}_calls"] and c[f"{role}_seconds"]}
        return {
            "tokens": n,
            "new_tokens": new,
            "resumed_from": self.resumed_from,
            **counts,
            "target_calls": c.target_calls,
            "draft_calls": c.draft_calls,
            "acceptance_rate": (counts["accepted"] + counts["deferred"]) / drafted if cascade and drafted else None,
            "target_alone_share": counts["target"] / n if n else None,
            "tokens_per_target_call": new / c.target_calls if c.target_calls else None,
            "tv_to_target": mean_tv_to_target(self.positions),
            "deferral_rate": (counts["deferred"] + counts["replaced"] + counts["target"]) / n if n else None,
            "cost_ratio": per_call["draft"] / per_call["target"] if len(per_call) == 2 else None,
            # the engine's own time per block beyond the model calls (sampling, verification, records)
            "overhead_seconds_per_block": (wall - c.prefill_seconds - c.target_seconds - c.draft_seconds) /
                                          c.target_calls if cascade and wall > 0 else None,
            "prefill_seconds": c.prefill_seconds,
            "wall_seconds": wall,
            "tokens_per_second": new / wall if wall > 0 else None,
            # the engine's own clock (prefill and blocks, batch_block.py): what a timed view compares, not the wall,
            # which counts the time a reader (the page's streaming and redraw) holds the stream
            "engine_seconds": c.engine_seconds,
        }

    @property
    def speculative_decoding(self):
        """This run's verify steps in the serving engines' schema (acceptance_metrics), None without any."""
        return metrics(trace_steps(self.positions[self.resumed_from:], self.counters.drafted))

    def recolour(self, rule, alpha):
        """Provenance of every position under (rule, alpha), read from the stored a*; no model call.

        Returns (sources, first_changed): first_changed is the first position whose token may differ
        under the new setting (None if none); sources after it are the old ones, to be regenerated."""
        old_rule, old_alpha = self.settings["rule"], self.settings["alpha"]
        sources = []
        for i, pos in enumerate(self.positions):
            a_old, a_new = ((pos["a_star"] or {}).get(name) for name in (old_rule, rule))
            if not outcome_unchanged(old_rule, old_alpha, a_old, rule, alpha, a_new):
                return sources + self.sources[i:], i
            sources.append(source_under(pos, rule, alpha))
        return sources, None

    def to_dict(self):
        return {
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "settings": self.settings,
            "tokens": self.tokens,
            "sources": self.sources,
            "text": self.text,
            "positions": self.positions,
            "stats": self.stats,
            "speculative_decoding": self.speculative_decoding,
            "counters": self.counters.to_dict(),
            "finished": self.finished,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "resumed_from": self.resumed_from,
        }

    def to_json(self):
        """Strict JSON: a* of +-inf travel as the strings 'inf' / '-inf' (see strict_json)."""
        return dumps(self.to_dict())

    @classmethod
    def from_json(cls, text):
        data = json.loads(text)
        settings = data["settings"]
        settings["alpha"] = number(settings["alpha"])
        if "alpha_range" in settings:
            settings["alpha_range"] = [number(v) for v in settings["alpha_range"]]
        for pos in data["positions"]:
            if pos["a_star"]:
                pos["a_star"] = {rule: number(v) for rule, v in pos["a_star"].items()}
        return cls(prompt_ids=data["prompt_ids"], settings=data["settings"], prompt=data["prompt"],
                   positions=data["positions"], counters=Counters.of(data["counters"]), finished=data["finished"],
                   stop_reason=data["stop_reason"], error=data.get("error"), resumed_from=data.get("resumed_from", 0))


def mean_tv_to_target(positions):
    """The mean over the text of each position's TV(pi, p) (``tv_to_target``): how far the run's output distribution
    lies from the target's, exactly, from the trace. None without positions or where a position's is unknown
    (the target never scored it: draft-only, a sequential cascade's steps without it; a reused position whose pi
    moved with the setting: ``resumed``)."""
    values = [pos.get("tv_to_target") for pos in positions]
    return sum(values) / len(values) if values and None not in values else None


def resumed(pos, old_settings, rule, alpha):
    """A position an earlier trace (run under ``old_settings``) hands to a run under (rule, alpha), where
    ``Trace.recolour`` found its token unchanged: its source under the new setting, and its TV to the target where
    pi there is the same distribution (the same setting; or two rules whose pi is q or p, where reuse means both
    kept q or both deferred), else None: a token rule's pi at a kept token moves with alpha through eta (Eq. 11),
    lossy's output with its lenience."""
    old_rule, old_alpha = old_settings["rule"], old_settings["alpha"]
    same = old_rule == rule and (old_alpha == alpha or not RULES[rule].alpha_used)
    carried = same or pi_is_q_or_p(old_rule) and pi_is_q_or_p(rule)
    return dict(pos, source=source_under(pos, rule, alpha), tv_to_target=pos.get("tv_to_target") if carried else None)


def source_under(pos, rule, alpha):
    """A kept proposal is 'deferred' if the rule deferred there, else 'accepted'; others were replaced.
    A position with no a* for this rule (a baseline's) or no proposal (the target's own token) keeps its label."""
    a_star = (pos["a_star"] or {}).get(rule)
    if a_star is None or pos["source"] == "target" or (pos["source"] == "replaced" and pos["token"] != pos["proposal"]):
        return pos["source"]
    return "deferred" if alpha < a_star else "accepted"
