"""Rows beside other calls' rows: where a row parts from its solo run, it parts at a decision the trace marks as a
near-tie, and a ``reproducible`` row is bitwise its solo run however busy the batch. The case is issue 47's: on the
tiny pair, "e5" (lossy, alpha 0.9999999999, gamma 3, T 2.0, 500 tokens, seed 5) started beside eight long calls
parted from its solo text at token 424 (70 for 71: the draft's own draw), 3 times out of 3."""
import json

import pytest

from cascade_core import generate, stream
from cascade_core.decoding.running_batches import OTHER_ROWS, RunningBatches
from cascade_core.method.sampling import NEAR_TIE
from test_running import interleaved

E5 = dict(rule="lossy", alpha=0.9999999999, gamma=3, temperature=2.0, max_new_tokens=500, seed=5)
OTHERS = [dict(rule=rule, alpha=alpha, gamma=gamma, temperature=t, max_new_tokens=n, seed=i)
          for i, (rule, alpha, gamma, t, n) in enumerate([
              ("v3", 0.5, 4, 1.0, 1000), ("opt", 0.3, 2, 0.7, 800), ("v2", 0.2, 5, 1.5, 600),
              ("diff", 0.1, 3, 1.0, 1000), ("target", 0.0, 1, 1.0, 500), ("draft", 0.0, 1, 1.2, 700),
              ("v3", 0.9, 6, 2.0, 900), ("opt", 0.6, 4, 0.5, 1000)])]


def beside_eight_calls(pair, **settings):
    """e5's trace when it starts 20 rounds after eight long calls, all stepping in one RunningBatches (as the
    server's engine thread steps its callers in turn)."""
    batches = RunningBatches()
    generations = [stream(pair, f"Tell me about {i}", batches=batches, **kw) for i, kw in enumerate(OTHERS)]
    generations.append(stream(pair, "e5", batches=batches, **{**E5, **settings}))
    return interleaved(generations, start_at=[0] * len(OTHERS) + [20])[-1]


@pytest.fixture(scope="module")
def tiny():
    from cascade_core import load_pair
    return load_pair("tiny", draft="model")


@pytest.fixture(scope="module")
def solo(tiny):
    return generate(tiny, "e5", **E5)


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), None)


def test_a_shared_row_parts_from_its_solo_run_only_at_a_marked_near_tie(tiny, solo):
    shared = beside_eight_calls(tiny)
    assert shared.counters[OTHER_ROWS] >= 8  # it did decode beside the other calls' rows
    k = first_difference(solo, shared)
    if k is not None:  # on the machines this was seen on: token 424, the draft's draw
        assert solo.positions[k]["near_tie"] and shared.positions[k]["near_tie"], k
    marked = [i for i, pos in enumerate(solo.positions) if pos["near_tie"]]
    assert len(marked) <= 5, marked  # a near-tie is rare: 1 in 500 positions here
    assert json.loads(solo.to_json())["positions"][marked[0] if marked else 0]["near_tie"] == \
        solo.positions[marked[0] if marked else 0]["near_tie"]


def test_a_reproducible_row_is_bitwise_its_solo_run_beside_any_calls(tiny, solo):
    alone = beside_eight_calls(tiny, reproducible=True)
    assert alone.tokens == solo.tokens and alone.sources == solo.sources
    assert [pos["accept_prob"] for pos in alone.positions] == [pos["accept_prob"] for pos in solo.positions]
    assert alone.counters.get(OTHER_ROWS, 0) == 0 and alone.settings["reproducible"] is True


def test_a_draw_near_its_bins_edge_is_marked(tiny):
    """The margin is the uniform's distance from the sampled token's bin edges: a uniform placed at an edge (within
    NEAR_TIE) is marked, the same run's other positions not."""
    import torch
    from cascade_core.method.sampling import sample_inverse_cdf
    d = torch.tensor([[0.25, 0.25, 0.5]], dtype=torch.float64)
    for u, token, margin in ((0.1, 0, 0.1), (0.25 + NEAR_TIE / 2, 1, NEAR_TIE / 2), (0.9, 2, 0.1)):
        ids, margins = sample_inverse_cdf(d, torch.tensor([u], dtype=torch.float64))
        assert int(ids[0]) == token and float(margins[0]) == pytest.approx(margin)


def test_reproducible_is_a_setting_refused_in_one_sentence(tiny):
    with pytest.raises(ValueError, match="reproducible must be true or false, got 'yes'"):
        generate(tiny, "Hi", reproducible="yes", max_new_tokens=2)
