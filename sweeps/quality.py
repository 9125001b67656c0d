"""How a sweep row's text relates to the target and how good it is: its mean TV to the target (exact, from the trace),
target NLL and top-1 agreement (the target's own view of the text, a diagnostic), ROUGE-L against a reference, exact
match of the last number against an answer."""
import functools
import math
import re

import torch

from cascade_core.method.distributions import total_variation
from cascade_core.method.sampling import untempered_and_tempered

NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")


def text_logits(pair, model, prompt_ids, tokens):
    """A model's logits for every emitted token of a text (at the prefix before it), from one pass over the whole."""
    ids = torch.tensor([list(prompt_ids) + list(tokens)], device=pair.target.device)
    with torch.inference_mode():
        return model(input_ids=ids).logits[0, len(prompt_ids) - 1: -1, : pair.vocab_size]


def target_probabilities(pair, prompt_ids, tokens):
    """p(token | emitted prefix) and whether the token is the target's argmax, at temperature 1, for every emitted
    token, from one target pass over the whole text (for runs that never called the target: draft-only)."""
    if not tokens:
        return [], []
    p = untempered_and_tempered(text_logits(pair, pair.target, prompt_ids, tokens), 1.0)[0]
    chosen = p.gather(-1, torch.tensor(tokens, device=p.device).unsqueeze(-1)).squeeze(-1)
    return chosen.tolist(), (chosen >= p.max(-1).values).tolist()


def draft_only_tv(pair, trace):
    """A draft-only run's mean TV to the target, which its trace cannot hold (the target never ran): draft-only
    samples q at every position (pi = q), so per position TV(q_t, p_t) of both models' sampling distributions
    (tempered as the engine tempers them), from one pass of each over the text. None without tokens, or where the
    run set min_new_tokens (the engine's end-of-text mask before it is not redone here)."""
    s = trace.settings
    if not trace.tokens or s.get("min_new_tokens"):
        return None
    q, p = (untempered_and_tempered(text_logits(pair, model, trace.prompt_ids, trace.tokens), s["temperature"])[1]
            for model in (pair.draft, pair.target))
    return total_variation(q, p).double().mean().item()


def target_view(pair, trace):
    """What the target makes of a run: per emitted token its temperature-1 p(token) and whether it is the target's
    argmax (the NLL's material), and the run's mean TV to the target (``Trace.stats``' tv_to_target). A draft-only
    run, which never called the target, takes one target pass over its text (and one of the draft: draft_only_tv)."""
    if trace.settings["rule"] == "draft":
        return (*target_probabilities(pair, trace.prompt_ids, trace.tokens), draft_only_tv(pair, trace))
    return ([pos["p_token"] for pos in trace.positions], [pos["p_token"] >= pos["max_p"] for pos in trace.positions],
            trace.stats["tv_to_target"])


def target_nll(p_tokens):
    """Mean -log p(token) over the emitted tokens."""
    return sum(-math.log(max(p, 1e-30)) for p in p_tokens) / len(p_tokens) if p_tokens else None


@functools.cache
def rouge_scorer():
    """ROUGE-L, imported where a prompt set has references: the app never scores one, and runs without the
    package (requirements-dev.txt); a sweep checks it imports before any model loads (packages.py)."""
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"])


def rouge_l(text, reference):
    return None if reference is None else rouge_scorer().score(reference, text)["rougeL"].fmeasure


def exact_match(text, answer):
    """Whether the last number in the text equals the answer (commas as thousands separators ignored)."""
    if answer is None:
        return None
    numbers = NUMBER.findall(text)
    if not numbers:
        return False
    try:
        return math.isclose(float(numbers[-1].replace(",", "")), float(answer))
    except ValueError:
        return False
