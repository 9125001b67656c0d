"""How good a sweep row's text is: target NLL and top-1 agreement (the target's own view of the text), ROUGE-L
against a reference, exact match of the last number against an answer."""
import functools
import math
import re

import torch

NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")


def target_probabilities(pair, prompt_ids, tokens):
    """p(token | emitted prefix) and whether the token is the target's argmax, at temperature 1, for every emitted
    token, from one target pass over the whole text (for runs that never called the target: draft-only)."""
    if not tokens:
        return [], []
    ids = torch.tensor([list(prompt_ids) + list(tokens)], device=pair.target.device)
    with torch.inference_mode():
        logits = pair.target(input_ids=ids).logits[0, len(prompt_ids) - 1: -1, : pair.vocab_size].float()
    p = torch.softmax(logits, -1)
    chosen = p.gather(-1, torch.tensor(tokens, device=p.device).unsqueeze(-1)).squeeze(-1)
    return chosen.tolist(), (chosen >= p.max(-1).values).tolist()


def target_nll(p_tokens):
    """Mean -log p(token) over the emitted tokens."""
    return sum(-math.log(max(p, 1e-30)) for p in p_tokens) / len(p_tokens) if p_tokens else None


@functools.cache
def rouge_scorer():
    """ROUGE-L, imported where a prompt set has references: the app never scores one, and runs without the
    package (requirements-dev.txt)."""
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
