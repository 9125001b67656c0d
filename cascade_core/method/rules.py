"""Deferral rules of speculative cascades (Narasimhan et al., ICLR 2025): one record per rule.

A rule says, at every output position, which distribution ``pi`` the draft's token is verified against.
Each rule is defined by its critical alpha a*: it defers (uses the target) iff ``alpha < a*``. The test is
strict, so ties go to the draft, and a larger alpha always means less deferral. Position rules have one a*
per position; token rules one a*(v) per vocabulary token, and defer the set r(v) = [alpha < a*(v)], taken
over the whole vocabulary. Defining every decision through a* keeps the decision, the a* a trace reports and
the app's recolouring consistent by construction.

Equation and lemma numbers are arXiv 2405.19261v2's (Lemma 8: §C.3, the greedy limit). Shapes: distributions are
``[..., V]``; a* is ``[...]`` (one per position) or ``[..., V]`` (one per token, ``per_token``).
"""
import math
from dataclasses import dataclass
from typing import Callable

import torch

from cascade_core.messages import is_finite_number, shown
from cascade_core.method.distributions import Distributions, column
from cascade_core.method.keep_sets import (RELAXED_READING, SGLANG_READING, TYPICAL_READING, kept_outright,
                                           relaxed_a_star, replacement, sglang_a_star, sglang_keep, target_argmax,
                                           target_itself, typical_a_star)


# -- The formulas every rule shares (the spec's "Notation" and "One block") --------------------------------

def acceptance_probability(q_x, pi_x, lenience=0.0):
    """Speculative sampling keeps a draft token x with probability min(1, pi(x) / q(x)); lossy speculative
    decoding divides by (1 - lenience) q(x) instead (Leviathan et al., 2023, A.5). q(x) is clamped at 1e-10."""
    return (pi_x / ((1 - lenience) * q_x.clamp_min(1e-10))).clamp_max(1.0)


def residual(pi, q):
    """What a rejection samples from, unnormalised: max(0, pi - q). Where rounding leaves it all zero (pi ~= q),
    pi itself, as the spec says."""
    excess = (pi - q).clamp_min(0)
    kept = excess.sum(-1, keepdim=True) > 0
    return excess if bool(kept.all()) else torch.where(kept, excess, pi)  # where over [n, V]: see token_mass


def _per_position(d):
    """A tensor of the positions' shape ``[...]``, to fill."""
    return (d.q if d.q is not None else d.p)[..., 0]


# -- a*: each rule's deferral test, solved for alpha -------------------------------------------------------

def chow_a_star(d):
    """Eq. (2): defer iff max q < 1 - alpha."""
    return 1 - d.max_q


def diff_a_star(d):
    """Eq. (5): defer iff max q < max p - alpha."""
    return d.max_p - d.max_q


def opt_a_star(d):
    """Eq. (10): defer iff max q < max p - alpha * TV(p, q), so a* = (max p - max q) / TV. Where TV = 0 the
    models agree (pi = p = q either way): a* is +inf if the target is surer, else -inf."""
    gain, tv = diff_a_star(d), d.tv
    return torch.where(tv == 0, torch.where(gain > 0, math.inf, -math.inf), gain / tv)


def bild_a_star(d):
    """BiLD* (Kim et al., 2023), the paper's baseline: defer iff D(q, p) = -sum_v q(v) log p(v) > alpha
    (greedy: -log p(argmax q))."""
    if d.greedy:
        return -d.log_p.gather(-1, d.on_q.q_untempered.argmax(-1, keepdim=True)).squeeze(-1)
    return d.cross_entropy


FSD_DIFFERS = ("FSD itself rejects the draft's token outright above its threshold and samples p (its code drafts "
               "greedily); here a deferral verifies the draft's token against pi = p with min(1, p / q), rejecting "
               "with probability TV(p, q) (Lemma 3) instead of 1, so rejections are fewer than FSD's.")


def fuzzy_a_star(d):
    """FSD's criterion as a cascade rule (fuzzy speculative decoding, Holsman et al., ACL Findings 2025, arXiv
    2502.20704), with its Jensen-Shannon divergence: pi = q where JS(q, p) <= alpha, else pi = p, verified with
    min(1, pi / q) like every position rule; FSD itself decides deterministically (FSD_DIFFERS says how that
    differs). JS is symmetric and at most ln 2, so alpha >= ln 2 never defers."""
    return d.js


ENSEMBLE_READING = ("transformers' assistant_ensemble_weight w (huggingface/transformers PR #45979, its sampling path "
                    "in generation/utils.py's _speculative_sampling, read from the PR's diff and tests): keep x with "
                    "min(1, v(x) / q(x)), v = w p + (1 - w) q, and on a rejection sample norm(max(0, p - q)), which "
                    "is norm(max(0, v - q)); w = 1 (or unset) is lossless. Its greedy path, argmax of v, is not "
                    "reproduced: here T = 0 verifies one-hot q and p like every rule.")


JUDGE_CONFIDENCE = 0.9  # the KL judge's confidence mask: above this max p, plain speculative sampling
JUDGE_READING = ("The KL's direction, KL(q || p), and the fallback above the threshold, standard speculative sampling "
                 "(pi = p), are this project's reading: the stored abstract of arXiv 2601.04766 fixes neither. "
                 "KL(q || p) averages over the tokens the draft proposes (it is BiLD*'s cross-entropy less the "
                 "draft's entropy), and falling back to the speculative sampling the confidence mask uses keeps every "
                 "deferral exact against p, as in every position rule.")


def judge_a_star(d):
    """The training-free KL judge ("Revisiting Judge Decoding", Sun et al., arXiv 2601.04766): defer where
    KL(q || p) > alpha, and always where the target is confident (max p > 0.9), so a* is inf there. The stored
    abstract fixes the KL relaxation and the mask (standard speculative sampling above max p 0.9); the KL's
    direction and what happens above the threshold are this project's reading (JUDGE_READING)."""
    return torch.where(d.max_p > JUDGE_CONFIDENCE, math.inf, d.kl_q_p)


def v1_a_star(d, x=None):
    """Eq. (13): defer token v iff q(v) < max p - alpha."""
    return d.max_p.unsqueeze(-1) - column(d.q_untempered, x)


def v2_a_star(d, x=None):
    """Eq. (14): defer token v iff p(v) < max p - alpha."""
    return d.max_p.unsqueeze(-1) - column(d.p_untempered, x)


def v3_a_star(d, x=None):
    """Eq. (15): defer token v iff p(v) < (1 - alpha) max p; the kept set is min-p-like, not a top-k."""
    return 1 - column(d.p_untempered, x) / d.max_p.unsqueeze(-1)


def lossy_a_star(d, x=None):
    """Lossy speculative decoding keeps v for certain iff p(v) >= (1 - alpha) q(v): a*(v) = 1 - p(v) / q(v)."""
    return 1 - column(d.p, x) / column(d.q, x).clamp_min(1e-10)


def always(d):
    return torch.full_like(_per_position(d), math.inf)


def never(d):
    return torch.full_like(_per_position(d), -math.inf)


# -- pi: the distribution a draft token is verified against -------------------------------------------------

def pi_per_position(d, defer, alpha=None):
    """Position rules: pi = p where the rule defers, q elsewhere."""
    return torch.where(defer.unsqueeze(-1), d.p, d.q)


def pi_per_token(d, defer, alpha=None):
    """Token rules: pi(v) = q(v) (1 - r(v)) + eta p(v), with r = defer over the whole vocabulary and
    eta = sum_v r(v) q(v), the draft's mass on deferred tokens."""
    return token_pi(d.q, d.p, defer, *token_mass(d.q, defer, d.p.sum(-1, keepdim=True)))


def token_mass(q, defer, p_total):
    """(eta, Z) per position, each ``[..., 1]``: eta = sum_v r(v) q(v) and pi's normaliser Z = sum_v q(v)(1 - r(v))
    + eta sum_v p(v) (1 up to rounding; ``p_total`` is sum_v p(v)). With them pi at any token is ``token_pi`` of that
    token's column alone, and q and r need only q's support (eta's terms are zero elsewhere)."""
    # q * r, not where(r, q, 0): the same numbers (q is finite and >= 0), and a third of where's time
    # (docs/design.md, "Measured choices")
    eta = (q * defer).sum(-1, keepdim=True)
    return eta, q.sum(-1, keepdim=True) - eta + eta * p_total


def token_pi(q, p, defer, eta, z):
    """pi = (q (1 - r) + eta p) / Z over the columns given (the whole vocabulary, or the proposals')."""
    return (q * ~defer + eta * p) / z  # q (1 - r) as a product: see token_mass


def pi_target(d, defer, alpha=None):
    return d.p


def pi_draft(d, defer, alpha=None):
    return d.q


def pi_ensemble(d, defer, alpha):
    """Static ensemble verification: pi = alpha p + (1 - alpha) q at every position, alpha the target's weight w.
    Lemma 3's pi with a fractional r = w, so a proposal is rejected with probability w TV(p, q), and the residual
    norm(max(0, pi - q)) = norm(max(0, p - q)) is lossless's."""
    return alpha * d.p + (1 - alpha) * d.q


@dataclass(frozen=True)
class Rule:
    """What a rule is. ``statistic`` and ``threshold`` are the paper's form of the same test, read off a trace
    position: the rule defers iff statistic < threshold (``defers_above``: statistic > threshold)."""

    name: str
    kind: str  # "position", "token", "speculative" or "baseline"
    gist: str  # what it does, in words
    defers_when: str  # the test, as the paper writes it
    a_star_formula: str
    alpha_range: tuple
    alpha_meaning: str
    source: str  # the paper's equation, or the method it comes from
    a_star: Callable  # Distributions -> a*, per position or (per_token) per vocabulary token
    pi: Callable | None  # (Distributions, defer, alpha) -> the distribution the draft token is verified against
    statistic: tuple | None = None  # (label, position -> value)
    threshold: tuple | None = None  # (formula, (position, alpha) -> value)
    per_token: bool = False
    upper_open: bool = False  # alpha must stay below the range's top
    lenience: bool = False  # alpha is the acceptance's lenience (lossy)
    alpha_used: bool = True
    decides_on_q: bool = False  # its decision reads the draft alone (a sequential cascade calls p only to defer)
    defers_above: bool = False  # it defers where its statistic is above the threshold (a divergence), not below
    mix: bool = False  # pi = alpha p + (1 - alpha) q everywhere: alpha is Lemma 3's r itself, not a threshold
    note: str = ""  # how it differs from the method it comes from, or which reading of its source it takes
    # A keep-set rule (an engine's, cascade_core/method/keep_sets.py) has no pi: (Distributions, alpha, x=None) -> a(v),
    # the probability of keeping each token (at draft tokens x only, as a_star), and Distributions -> the base a
    # rejection samples from, the rejected token taken out
    keep: Callable | None = None
    base: Callable | None = None

    @property
    def target_alone_is_exact(self):
        """pi is p wherever q stands and the verification is exact (lossless): the target's own token is then an
        exact sample of pi, which gamma "auto" takes where no block length pays
        (cascade_core/decoding/batch_block.py)."""
        return self.pi is pi_target and self.kind == "speculative" and not self.lenience

    @property
    def summary(self):
        return f"{self.gist}: {self.defers_when}"

    def defers(self, d, alpha):
        return alpha < self.a_star(d)

    def target(self, d, alpha):
        """pi at every position of d."""
        return self.pi(d, self.defers(d, alpha), alpha)

    def a_star_at(self, d, x):
        """a* of the draft tokens x (shape ``[...]``): a token rule's at those tokens alone."""
        return self.a_star(d, x).squeeze(-1) if self.per_token else self.a_star(d)

    def at_proposals(self, d, alpha, x):
        """(pi(x) at each position, pi's row j as a function, whether each position deferred) for draft tokens x.
        pi over the whole vocabulary is built only where it is read (the row a rejection samples from): a token
        rule's pi at a token reads the deferral of every token q can propose through eta and Z (q's support: a
        head's sub-vocabulary), a position rule's pi is p or q itself: the same numbers as through pi over the whole
        vocabulary, at less cost (docs/design.md, "Measured choices")."""
        deferred = alpha < self.a_star_at(d, x)
        if self.pi is pi_per_token:  # eta and Z read the deferrals where q is non-zero; pi itself only its columns
            eta, z = token_mass(d.on_q.q, self.defers(d.on_q, alpha), d.p.sum(-1, keepdim=True))
            pi_x = token_pi(column(d.q, x), column(d.p, x), deferred.unsqueeze(-1), eta, z).squeeze(-1)
            return pi_x, lambda j: token_pi(d.q[j : j + 1], d.p[j : j + 1], self.defers(d.rows(j, j + 1), alpha),
                                            eta[j : j + 1], z[j : j + 1]), deferred
        if self.pi is pi_per_position:
            at = torch.where(deferred, column(d.p, x).squeeze(-1), column(d.q, x).squeeze(-1))
            return at, lambda j: (d.p if deferred[j] else d.q)[j : j + 1], deferred
        pi = self.pi(d, None, alpha)  # p or q itself, or the ensemble's mixture of both
        return column(pi, x).squeeze(-1), lambda j: pi[j : j + 1], deferred

    def verification(self, d, alpha, x):
        """(the probability of keeping each draft token x_j, what a rejection at j samples from as a function of j,
        unnormalised ``[1, V]``, whether each position deferred): speculative sampling against pi (min(1, pi / q),
        lossy's lenient form; the residual max(0, pi - q)), or a keep-set rule's a(x) and its base without x."""
        if self.keep is not None:
            accept = self.keep(d, alpha, x).squeeze(-1)
            return accept, lambda j: replacement(self.base(d.rows(j, j + 1)), x[j : j + 1]), \
                alpha < self.a_star_at(d, x)
        pi_x, pi_row, deferred = self.at_proposals(d, alpha, x)
        accept = acceptance_probability(column(d.q, x).squeeze(-1), pi_x, alpha if self.lenience else 0.0)
        return accept, lambda j: residual(pi_row(j), d.q[j : j + 1]), deferred

    def check_alpha(self, alpha):
        if not is_finite_number(alpha):
            raise ValueError(f"alpha must be a finite number, got {shown(alpha)}")
        lo, hi = self.alpha_range
        if not (lo <= alpha and (alpha < hi if self.upper_open else alpha <= hi)):
            raise ValueError(f"alpha={shown(alpha)} is outside rule {self.name!r}'s range {self.range_text()}")

    def range_text(self):
        lo, hi = self.alpha_range
        return "any real number" if (lo, hi) == ANY else f"[{lo:g}, {hi:g}{')' if self.upper_open else ']'}"


def _read(key):
    return lambda pos: pos[key]


ANY = (-math.inf, math.inf)
RULES = {rule.name: rule for rule in (
    Rule("chow", "position", "defer when the draft is unsure", "max q < 1 - alpha", "1 - max q", (0.0, 1.0),
         "how unsure the draft may be before the target is asked", "Chow's rule, Eq. (2)", chow_a_star,
         pi_per_position, ("max q", _read("max_q")), ("1 - alpha", lambda pos, a: 1 - a), decides_on_q=True),
    Rule("diff", "position", "defer when the target is surer than the draft", "max q < max p - alpha",
         "max p - max q", (-1.0, 1.0), "how much surer than the draft the target must be", "Eq. (5)", diff_a_star,
         pi_per_position, ("max q", _read("max_q")), ("max p - alpha", lambda pos, a: pos["max_p"] - a)),
    Rule("opt", "position", "defer when the target's extra confidence outweighs the cost of disagreeing",
         "max q < max p - alpha * TV(p, q)", "(max p - max q) / TV", ANY, "the price of disagreeing, per unit of TV",
         "the plug-in estimate of the optimal rule (Eq. 10)", opt_a_star, pi_per_position, ("max q", _read("max_q")),
         ("max p - alpha * TV", lambda pos, a: pos["max_p"] - a * pos["tv"])),
    Rule("v1", "token", "token rule: defer tokens the draft rates low against the target's best",
         "q(v) < max p - alpha", "max p - q(x)", (-1.0, 1.0), "slack below the target's best for the draft's own "
         "score", "Eq. (13)", v1_a_star, pi_per_token, ("q(x)", _read("q_x")),
         ("max p - alpha", lambda pos, a: pos["max_p"] - a), per_token=True),
    Rule("v2", "token", "token rule: defer tokens the target rates low against its best", "p(v) < max p - alpha",
         "max p - p(x)", (-1.0, 1.0), "slack below the target's best for the target's score", "Eq. (14)",
         v2_a_star, pi_per_token, ("p(x)", _read("p_x")), ("max p - alpha", lambda pos, a: pos["max_p"] - a),
         per_token=True),
    Rule("v3", "token", "token rule: keep tokens within a factor (1 - alpha) of the target's best",
         "p(v) < (1 - alpha) max p", "1 - p(x) / max p", (0.0, 1.0), "tokens within a factor (1 - alpha) of the "
         "target's best are kept", "Eq. (15)", v3_a_star, pi_per_token, ("p(x)", _read("p_x")),
         ("(1 - alpha) * max p", lambda pos, a: (1 - a) * pos["max_p"]), per_token=True),
    Rule("lossless", "speculative", "speculative decoding: output distributed exactly as the target's",
         "always (pi = p)", "inf", ANY, "-", "speculative sampling (Leviathan et al., 2023; Chen et al., 2023)",
         always, pi_target, alpha_used=False),
    Rule("lossy", "speculative", "lossy speculative decoding, alpha = lenience",
         "keep x with prob min(1, p(x) / ((1 - alpha) q(x)))", "1 - p(x) / q(x)", (0.0, 1.0), "lenience",
         "Leviathan et al. (2023), A.5", lossy_a_star, pi_target,
         ("p(x) / q(x)", lambda pos: 1 - pos["a_star"]["lossy"]),
         ("1 - alpha", lambda pos, a: 1 - a), per_token=True, upper_open=True, lenience=True),
    Rule("ensemble", "speculative", "static ensemble verification: the draft's token checked against a mix of both "
         "models", "always: pi = alpha p + (1 - alpha) q", "inf", (0.0, 1.0), "the target's weight w in the mix: "
         "larger is nearer the target and rejects more (w TV, Lemma 3 with r = w)", "transformers' "
         "assistant_ensemble_weight (DIVERSED, arXiv 2604.07622; PR #45979)", always, pi_ensemble,
         mix=True, note=ENSEMBLE_READING),
    Rule("sglang", "keep-set", "SGLang's thresholds: keep the draft's token where the target rates it high enough, "
         "else with probability p(x) / t", "p(x) < 1 - alpha: kept with p(x) / (1 - alpha)", "1 - p(x)", (0.0, 1.0),
         "1 - SGLang's threshold t (speculative_accept_threshold_single = _acc = t); 0 is its default",
         "SGLang's speculative_accept_threshold_single / _acc (sgl-kernel tree_speculative_sampling_target_only, "
         "120affb9)", sglang_a_star, None, ("1 - p(x)", lambda pos: pos["a_star"]["sglang"]),
         ("alpha", lambda pos, a: a), per_token=True, defers_above=True, keep=sglang_keep,
         base=target_itself, note=SGLANG_READING),
    Rule("relaxed", "keep-set", "TensorRT-LLM's relaxed acceptance: keep the draft's token if it is among the "
         "target's top 10 within delta of its best, else the target's argmax", "x outside the top 10 or p(x) < max p "
         "- alpha", "max p - p(x); inf outside the top 10", (0.0, 1.0), "delta (relaxed_delta): how far below the "
         "target's best a top-10 token may be", "TensorRT-LLM's use_relaxed_acceptance_for_thinking "
         "(mtpRelaxedAcceptanceKernel, 3585984b)", relaxed_a_star, None,
         ("max p - p(x)", lambda pos: pos["a_star"]["relaxed"]), ("alpha", lambda pos, a: a), per_token=True,
         defers_above=True, keep=kept_outright(relaxed_a_star), base=target_argmax,
         note=RELAXED_READING),
    Rule("typical", "keep-set", "Medusa's typical acceptance: keep the draft's token if the target gives it more "
         "than min(epsilon, 0.3 exp(-H(p))), else the target's argmax", "p(x) <= min(1 - alpha, 0.3 exp(-H(p)))",
         "1 - p(x) where p(x) <= 0.3 exp(-H); else -inf", (0.0, 1.0), "1 - Medusa's posterior_threshold epsilon "
         "(its 0.09 is alpha 0.91)", "Medusa's typical acceptance (evaluate_posterior, 10a2697c)",
         typical_a_star, None, ("1 - p(x) if p(x) <= 0.3 exp(-H)", lambda pos: pos["a_star"]["typical"]),
         ("alpha", lambda pos, a: a), per_token=True, defers_above=True,
         keep=kept_outright(typical_a_star), base=target_argmax,
         note=TYPICAL_READING),
    Rule("bild", "position", "BiLD*: defer when the target finds the draft surprising", "-sum_v q(v) log p(v) > alpha",
         "that cross-entropy", (0.0, 10.0), "how surprised the target may be", "BiLD* (Kim et al., 2023), the "
         "paper's baseline", bild_a_star, pi_per_position, ("D(q, p)", lambda pos: pos["a_star"]["bild"]),
         ("alpha", lambda pos, a: a), defers_above=True),
    Rule("fuzzy", "position", "FSD's criterion as a cascade rule: defer when the models' distributions diverge",
         "JS(q, p) > alpha", "JS(q, p)", (0.0, 0.7), "how far apart q and p may be (JS is at most ln 2 = 0.693)",
         "FSD's criterion (Holsman et al., 2025) as a cascade rule, JS divergence", fuzzy_a_star, pi_per_position,
         ("JS(q, p)", lambda pos: pos["a_star"]["fuzzy"]), ("alpha", lambda pos, a: a), defers_above=True,
         note=FSD_DIFFERS),
    Rule("judge", "position", "KL judge: defer when the draft diverges from the target, always when the target is "
         "confident", "KL(q || p) > alpha or max p > 0.9", "KL(q || p); inf where max p > 0.9", (0.0, 10.0),
         "how far the draft may diverge where the target is unsure", "the training-free KL judge (Sun et al., 2026); "
         "KL direction and fallback: this project's reading", judge_a_star, pi_per_position,
         ("KL(q || p)", lambda pos: pos["a_star"]["judge"]), ("alpha", lambda pos, a: a), defers_above=True,
         note=JUDGE_READING),
    Rule("target", "baseline", "target only (baseline)", "plain sampling from p", "-", ANY, "-", "baseline", always,
         pi_target, alpha_used=False),
    Rule("draft", "baseline", "draft only (baseline)", "plain sampling from q", "-", ANY, "-", "baseline", never,
         pi_draft, alpha_used=False),
)}


def get_rule(name):
    """The record of a rule, or a ValueError that lists the rules."""
    if not isinstance(name, str) or name not in RULES:
        raise ValueError(f"unknown rule {shown(name)}; the rules are: {', '.join(RULES)}")
    return RULES[name]


def critical_alphas(d, x):
    """a* of every rule for draft tokens x (shape ``[...]``): {rule: tensor[...]}."""
    return {name: r.a_star_at(d, x) for name, r in RULES.items()}


def critical_alpha(name, q, p, x):
    """Public a*: the rule defers on draft token x iff alpha < a* (temperature 1: statistics = sampling)."""
    return get_rule(name).a_star_at(Distributions(q, p), torch.as_tensor(x, device=q.device))


def outcome_unchanged(old_rule, old_alpha, a_star_old, new_rule, new_alpha, a_star_new):
    """Whether a position's emitted token is certain to stay the same when (rule, alpha) changes.

    With position-keyed random numbers the draft proposes the same x under any rule. If neither setting
    defers, x stands in both; if both defer to pi = p, the same coins meet the same pi. Anything else (token
    rules' eta, lossy's lenience, target-only's direct sampling) may differ."""
    if old_rule == new_rule and (old_alpha == new_alpha or not RULES[old_rule].alpha_used):
        return True
    if a_star_old is None or a_star_new is None:
        return False
    old_deferred, new_deferred = old_alpha < a_star_old, new_alpha < a_star_new
    if not old_deferred and not new_deferred:
        return True
    return old_deferred and new_deferred and _verifies_against_p_where_deferred(old_rule, new_rule)


def _verifies_against_p_where_deferred(*names):
    """Position rules verify against pi = p wherever they defer, and lossless everywhere."""
    return all(RULES[name].kind == "position" or name == "lossless" for name in names)


def rules_table():
    """The rules as a Markdown table, read from their records: the README, the app's "How to read this" and the
    Hub export's model card show it. A ``|`` in a cell (KL(q || p)) is escaped, else it would end the cell (GFM
    splits cells at it even inside code)."""
    lines = ["| rule | defers when | a* | alpha | what alpha means | from |", "|---|---|---|---|---|---|"]
    for r in RULES.values():
        alpha = r.range_text() if r.alpha_used else "-"
        cells = (f"`{r.name}`", f"`{r.defers_when}`", f"`{r.a_star_formula}`", alpha, r.alpha_meaning, r.source)
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)
