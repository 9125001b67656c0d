"""The draft head's vocabulary (FR-Spec, Zhao et al., 2025; EAGLE-3): the tokens the target itself writes most.

A draft's output head over the whole vocabulary is a 576 x 49,152 product, about half of a draft call on a small
CPU. A head over the target's most frequent tokens costs a sixth of that and loses little: the draft's q is its
softmax over that subset (zero elsewhere), and verification stays exact because a rejection's residual
max(0, pi - q) covers every other token. The ranking is by the target's own expected token counts: the sum of
its next-token distributions p over every position of its sampled answers to the training instructions (never
the held-out prompts). That counts every token the target gives mass to, not only those it happened to draw, so
a few hundred answers rank the whole vocabulary.
"""
import collections
import json
from pathlib import Path

import torch

from cascade_core.formats.shipped_draft import save_head_vocabulary

from . import data


class ExpectedCounts:
    """Adds up the softmax of every row's logits at every sampling step (sampled_answers' ``watch``). Rows that
    already ended (padding) are counted too; their share is small and the same for every token."""

    def __init__(self, vocab_size):
        self.mass = torch.zeros(vocab_size, dtype=torch.float64)

    def __call__(self, scores):
        # float32 softmax, float64 sums: a row's probabilities need no more (over 256 rows x 49,152 tokens: 19 ms
        # a sampling step instead of 64 ms in float64)
        self.mass += torch.softmax(scores[:, : len(self.mass)].float(), -1).sum(0).double().cpu()


def ranked_vocabulary(pair, prompts, answer_tokens, batch_size, seed, say):
    """Every token id of the pair's vocabulary by the target's expected count in its own answers, most first
    (ties by id); with the expected counts and the sampled tokens' counts."""
    expected, drawn = ExpectedCounts(pair.vocab_size), collections.Counter()
    for example in data.sampled_answers(pair, prompts, answer_tokens, batch_size, seed, say, watch=expected):
        drawn.update(example["input_ids"][example["first"] + 1:])
    ranked = sorted(range(pair.vocab_size), key=lambda v: (-float(expected.mass[v]), v))
    return ranked, expected.mass, drawn


def coverage(ranked, weights, sizes):
    """For each head size: the share of the weights (expected or drawn counts) its vocabulary holds."""
    total = sum(weights[v] for v in range(len(ranked)))
    return {n: float(sum(weights[v] for v in ranked[:n]) / total) for n in sizes}


def rank_head_vocabulary(pair, out, work, size, prompts, answer_tokens, batch_size, seed, say):
    """Sample the target's answers, rank, and store the head's first ``size`` ids in the shipped draft file."""
    instructions = data.instructions(seed)[:prompts]
    ranked, expected, drawn = ranked_vocabulary(pair, instructions, answer_tokens, batch_size, seed, say)
    sizes = sorted({1024, 2048, 4096, 8192, 16384, 32768, size})
    mass, shares = coverage(ranked, expected.tolist(), sizes), coverage(ranked, drawn, sizes)
    summary = dict(size=size, prompts=prompts, answer_tokens=answer_tokens, ranking="expected count",
                   drawn=sum(drawn.values()), distinct=len(drawn),
                   coverage_of_p={str(n): round(s, 4) for n, s in mass.items()},
                   coverage_of_drawn={str(n): round(s, 4) for n, s in shares.items()})
    Path(work).mkdir(parents=True, exist_ok=True)
    (Path(work) / "head-vocabulary.json").write_text(json.dumps({**summary, "ranked": ranked}))
    save_head_vocabulary(out, torch.tensor(ranked[:size], dtype=torch.int32), summary)
    say(f"head vocabulary: {size} of {pair.vocab_size} tokens, holding {mass[size]:.1%} of the target's probability "
        f"mass over its answers and {shares[size]:.1%} of the {summary['drawn']} tokens it drew "
        f"({summary['distinct']} distinct); stored in {out}")
    return summary
