"""The acceptance rules serving engines ship, as keep sets: SGLang's thresholds, TensorRT-LLM's relaxed acceptance,
Medusa's typical acceptance (docs/lab/2026-12-07-engine-acceptance-rules.md, read from their source).

None of them verifies against a distribution pi with min(1, pi(x) / q(x)) (Algorithm 4). Each keeps the draft's
token x with a probability a(x) read off the target alone (1 or 0 for the deterministic ones), and a rejection of x
samples a replacement: ``base`` with x taken out, renormalised, where ``base`` is p (SGLang) or a one-hot on the
target's argmax (the other two, whose argmax is always kept, so taking x out changes nothing). The token a position
emits then follows

    out(y) = q(y) a(y) + base(y) sum_{x != y} q(x) (1 - a(x)) / (B - base(x)),   B = sum_v base(v),

which is no paper rule's pi in general: these rules are not exact against any target the reader chose.

Each has one alpha, larger always keeping more (the rules module's convention), and an a*(v) per token: below it,
v is not kept outright (the position "defers" to the target's test, or for the deterministic rules is rejected).
"""
import math

import torch

from cascade_core.method.distributions import column

TOP_K = 10  # TensorRT-LLM's relaxed_topk in its DeepSeek-R1 preset (the default, 1, is greedy matching)
TYPICAL_DELTA = 0.3  # Medusa's posterior_alpha as medusa_generate passes it
SGLANG_FLOOR = 1e-9  # SGLang floors its threshold_acc here


# -- a*: below it the token is not kept outright ------------------------------------------------------------------

def sglang_a_star(d, x=None):
    """SGLang keeps x outright where p(x) >= t_single; with alpha = 1 - t, where alpha >= 1 - p(x)."""
    return 1 - column(d.p, x)


def relaxed_a_star(d, x=None):
    """TensorRT-LLM keeps v iff v is among the target's top K and p(v) >= max p - delta (alpha = delta): a*(v) =
    max p - p(v) inside the top K, +inf outside it (never kept). p at temperature 1 (its softmax has none)."""
    p = d.p_untempered
    kth = p.topk(min(TOP_K, p.shape[-1]), dim=-1).values[..., -1:]
    return torch.where(column(p, x) >= kth, d.max_p.unsqueeze(-1) - column(p, x), math.inf)


def typical_a_star(d, x=None):
    """Medusa keeps v iff p(v) > min(epsilon, delta exp(-H(p))), p tempered; with alpha = 1 - epsilon, v is kept
    for every alpha where p(v) > delta exp(-H) (a* = -inf), else for alpha >= 1 - p(v)."""
    entropy = -(d.p * (d.p + 1e-5).log()).sum(-1, keepdim=True)  # Medusa's own entropy, 1e-5 inside the log
    floor = TYPICAL_DELTA * torch.exp(-entropy)
    return torch.where(column(d.p, x) > floor, -math.inf, 1 - column(d.p, x))


# -- a(v): the probability of keeping v were the draft to propose it ---------------------------------------------

def sglang_keep(d, alpha, x=None):
    """1 where p(v) >= t, else p(v) / t, with t = max(1 - alpha, 1e-9): min(1, p(v) / t) either way (lossy's keep
    test with the draft's q(x) read as 1: SGLang's kernel is handed an all-zero draft distribution). Over the
    vocabulary, or at draft tokens x only (``column``), as a*."""
    return (column(d.p, x) / max(1 - alpha, SGLANG_FLOOR)).clamp_max(1.0)


def kept_outright(a_star):
    """A deterministic rule's a(v): 1 where alpha reaches a*(v), else 0 (ties go to the draft, as every rule's)."""
    return lambda d, alpha, x=None: (alpha >= a_star(d, x)).to(d.p.dtype)


# -- what a rejection samples from -----------------------------------------------------------------------------------

def target_itself(d):
    """SGLang: p, from which a rejection takes the rejected token out (relu(p - one-hot x))."""
    return d.p


def target_argmax(d):
    """TensorRT-LLM and Medusa: the target's greedy token (argmax of its logits, whatever the temperature)."""
    p = d.p_untempered
    return torch.zeros_like(p).scatter_(-1, p.argmax(-1, keepdim=True), 1.0)


def replacement(base, x):
    """What a rejection of x samples from, unnormalised: base with x taken out (base itself where that leaves
    nothing: SGLang's p all on x, which it never rejects)."""
    taken = base.scatter(-1, x.view(-1, 1), 0.0)
    return torch.where(taken.sum(-1, keepdim=True) > 0, taken, base)


def keep_set_output(q, keep, base):
    """The distribution of the emitted token (the module's formula), over the whole vocabulary ``[..., V]``."""
    total = base.sum(-1, keepdim=True)
    room = total - base  # what is left of base once x is taken out
    share = torch.where(room > 0, q * (1 - keep) / room.clamp_min(1e-30), 0.0)
    return q * keep + base * (share.sum(-1, keepdim=True) - share)


# -- what each reproduces, and what it leaves out ----------------------------------------------------------------

SGLANG_READING = ("SGLang's kernel on a chain (one draft token per depth): keep x if p(x) >= t_single, else with "
                  "probability p(x) / t_acc, one uniform per position; a rejection samples relu(p - one-hot x). Here "
                  "t_single = t_acc = t = 1 - alpha, and p is the tempered target (its top-k / top-p filters left "
                  "out). It never reads q (its caller passes zeros). At t = 1 it keeps x with p(x), which emits p "
                  "exactly for any draft (q(y) p(y) + p(y) (1 - q(y))) but rejects with 1 - sum_x q(x) p(x), more than "
                  "lossless's TV(p, q); below 1 it is lossy.")
RELAXED_READING = ("TensorRT-LLM's MTP relaxed acceptance: keep x iff it is among the target's top relaxed_topk = 10 "
                   "tokens with p(x) >= max p - delta, p the softmax of the logits (no temperature); a rejection emits "
                   "the target's argmax. TensorRT-LLM applies delta only inside a <think> span (0 outside it, greedy "
                   "matching); here it applies everywhere, and at a tie at the 10th probability more than 10 tokens "
                   "may qualify.")
TYPICAL_READING = ("Medusa's evaluate_posterior: keep x iff p(x) > min(epsilon, 0.3 exp(-H(p))), p = softmax(logits / "
                   "T), H with 1e-5 inside the log; the next token after a rejection is the target's argmax "
                   "(medusa_generate). Here epsilon = 1 - alpha, and a tie p(x) = epsilon keeps x (Medusa's strict > "
                   "rejects it). Medusa reads no draft probabilities: its heads' tokens are taken as given.")
