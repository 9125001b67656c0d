"""A deliberately naive speculative-cascade loop, written from the spec's formulas and nothing else.

One position at a time (gamma = 1 in effect), no KV cache: both models re-read the whole sequence for
every token. The rules are restated literally (inequalities, not the engine's a* form), sampling is
numpy inverse-CDF. Only the position-keyed uniforms are shared with the engine: they are the contract.
"""
import numpy as np
import torch

from cascade_core.method.sampling import position_uniforms


def softmaxes(logits, temperature):
    logits = logits.double().numpy()
    stat = np.exp(logits - logits.max())
    stat /= stat.sum()
    if temperature == 0:
        sample = np.zeros_like(stat)
        sample[logits.argmax()] = 1.0
    else:
        z = logits / temperature
        sample = np.exp(z - z.max())
        sample /= sample.sum()
    return stat, sample


def inverse_cdf(d, u):
    cdf = np.cumsum(d)
    return int(min(np.searchsorted(cdf, u * cdf[-1], side="right"), len(d) - 1))


def kl_divergence(a, b):
    """KL(a || b) = sum_v a(v) log(a(v) / b(v)), terms with a(v) = 0 left out; b clamped at 1e-30 as BiLD*'s p."""
    at = a > 0
    return float((a[at] * (np.log(a[at]) - np.log(np.maximum(b[at], 1e-30)))).sum())


def js_divergence(a, b):
    """JS(a, b) = (KL(a || m) + KL(b || m)) / 2 with m = (a + b) / 2."""
    m = (a + b) / 2
    return (kl_divergence(a, m) + kl_divergence(b, m)) / 2


def literal_pi(rule, qs, ps, q, p, alpha, greedy):
    """The spec's table, read literally. qs/ps: untempered statistics; q/p: sampling distributions."""
    max_q, max_p, tv = qs.max(), ps.max(), np.maximum(0, p - q).sum()
    position_defer = {
        "chow": lambda: max_q < 1 - alpha,
        "diff": lambda: max_q < max_p - alpha,
        "opt": lambda: max_q < max_p - alpha * tv,
        "bild": lambda: (-np.log(max(ps[qs.argmax()], 1e-30)) if greedy
                         else -(qs * np.log(np.maximum(ps, 1e-30))).sum()) > alpha,
        "fuzzy": lambda: js_divergence(qs, ps) > alpha,
        "judge": lambda: ps.max() > 0.9 or kl_divergence(qs, ps) > alpha,
    }
    if rule == "lossless":
        return p
    if rule == "ensemble":  # transformers' v = w p + (1 - w) q, w = alpha
        return alpha * p + (1 - alpha) * q
    if rule in position_defer:
        return p if position_defer[rule]() else q
    r = {"v1": qs < max_p - alpha, "v2": ps < max_p - alpha, "v3": ps < (1 - alpha) * max_p}[rule].astype(float)
    eta = (r * q).sum()
    pi = q * (1 - r) + eta * p
    return pi / pi.sum()


def literal_keep(rule, x, ps, p, alpha):
    """The engines' keep tests as their code writes them (docs/lab/2026-12-07-engine-acceptance-rules.md): the
    probability of keeping x, and what a rejection samples from (SGLang: p without x; the others: the target's
    argmax). ps: the target's untempered statistics; p: its sampling distribution."""
    if rule == "sglang":  # threshold_single = threshold_acc = 1 - alpha
        t = max(1 - alpha, 1e-9)
        without_x = p.copy()
        without_x[x] = 0
        return (1.0 if p[x] >= t else min(1.0, p[x] / t)), without_x
    argmax = np.zeros_like(p)
    argmax[ps.argmax()] = 1.0
    if rule == "relaxed":  # top relaxed_topk = 10 of the softmax, within delta = alpha of its top
        return float(x in np.argsort(-ps)[:10] and ps[x] >= ps.max() - alpha), argmax
    entropy = -(p * np.log(p + 1e-5)).sum()  # Medusa's typical acceptance, epsilon = 1 - alpha, its delta 0.3
    return float(p[x] > min(1 - alpha, 0.3 * np.exp(-entropy))), argmax


def verified_token(rule, x, q_pair, p_pair, alpha, greedy, u):
    """The token a position emits for the draft's proposal x: kept with probability min(1, pi(x) / q(x)) (lossy:
    its own test), else a residual sample. q_pair, p_pair: (untempered statistics, sampling distribution)."""
    (qs, q), (ps, p) = q_pair, p_pair
    if rule in ("sglang", "relaxed", "typical"):
        keep, replacement = literal_keep(rule, x, ps, p, alpha)
        return x if u[1] < keep else inverse_cdf(replacement, u[2])
    if rule == "lossy":
        keep, pi = min(1.0, p[x] / ((1 - alpha) * max(q[x], 1e-10))), p
    else:
        pi = literal_pi(rule, qs, ps, q, p, alpha, greedy)
        keep = min(1.0, pi[x] / max(q[x], 1e-10))
    residual = np.maximum(0, pi - q)
    return x if u[1] < keep else inverse_cdf(residual if residual.sum() > 0 else pi, u[2])


def reference_generate(pair, prompt_ids, rule, alpha, temperature, seed, max_new_tokens, min_new_tokens=0,
                       target_alone=()):
    """Before min_new_tokens, end-of-text's logits are -inf for both models (transformers' min-length processor).
    At the positions in ``target_alone`` (gamma "auto"'s floor) the token is the target's own, as target-only's."""
    seq, out = list(prompt_ids), []
    greedy = temperature == 0
    V = pair.vocab_size
    for i in range(max_new_tokens):
        ids = torch.tensor([seq])
        with torch.no_grad():
            q_logits, p_logits = (model(ids).logits[0, -1, :V].clone() for model in (pair.draft, pair.target))
        if i < min_new_tokens:
            for logits in (q_logits, p_logits):
                logits[sorted(pair.eos_token_ids)] = float("-inf")
        qs, q = softmaxes(q_logits, temperature)
        ps, p = softmaxes(p_logits, temperature)
        u = position_uniforms(seed, [i])[0].numpy()
        if rule == "target" or i in target_alone:
            token = inverse_cdf(p, u[0])
        elif rule == "draft":
            token = inverse_cdf(q, u[0])
        else:
            token = verified_token(rule, inverse_cdf(q, u[0]), (qs, q), (ps, p), alpha, greedy, u)
        out.append(token)
        seq.append(token)
        if token in pair.eos_token_ids:
            break
    return out
