"""The block loop (cascade_core.decoding.running_batches): generations handed one RunningBatches share a running batch,
join and leave it between blocks, and each one's tokens, sources and counts are its solo run's (float64)."""
import pytest
import torch

from app.strategies import done_text
from cascade_core import finish, generate, stream, stream_batch, stream_lanes
from cascade_core.decoding.run_settings import RunSettings
from cascade_core.decoding.running_batches import RunningBatches
from cascade_core.decoding.strategies import strategy_steps
from cascade_core.formats.loading import tiny_pair

COUNTS = ("target_calls", "draft_calls")
STRATEGY = RunSettings(rule="v3", alpha=0.5, gamma=3, temperature=1.0, seed=0, max_new_tokens=20)
# (prompt, rule, alpha, seed, tokens): tokens of one size class (17 to 64), which share a batch
RUNS = [("The cat", "v3", 0.5, 0, 40), ("Once upon a time", "chow", 0.3, 1, 18),
        ("2 plus 3 is", "lossless", 0.0, 2, 30), ("x", "opt", 0.2, 3, 25), ("Hello", "target", 0.0, 4, 19),
        ("Tell me", "diff", 0.1, 5, 33)]


@pytest.fixture(scope="module")
def head64():
    return tiny_pair(dtype=torch.float64, draft_kind="head")


def same_as_solo(pair, trace, prompt, rule, alpha, seed, tokens, gamma):
    solo = generate(pair, prompt, rule=rule, alpha=alpha, seed=seed, max_new_tokens=tokens, gamma=gamma)
    assert trace.tokens == solo.tokens and trace.sources == solo.sources, (rule, prompt)
    assert [trace.counters[k] for k in COUNTS] == [solo.counters[k] for k in COUNTS], (rule, prompt)
    assert trace.counters.get("gammas") == solo.counters.get("gammas")


def interleaved(generations, start_at=None, close_at=None):
    """Advance the generations round by round; generation i starts in round start_at[i] (joining the running batch
    late; all in round 0 by default) and, where close_at gives a round, is closed then (its caller gone). Returns
    each one's last value (a solo stream's error where it raised one)."""
    start_at = start_at or [0] * len(generations)
    close_at, last, running, round_ = close_at or {}, {}, {}, 0
    while len(last) < len(generations):
        for i, steps in enumerate(generations):
            if i in last or start_at[i] > round_:
                continue
            if close_at.get(i) == round_:
                steps.close()
                last[i] = None
                continue
            try:
                running[i] = next(steps)
            except StopIteration as end:
                last[i] = end.value
            except ValueError as error:  # a solo stream raises its row's error
                last[i] = error
        round_ += 1
    return [last[i] for i in range(len(generations))]


@pytest.mark.parametrize("gamma", [3, "auto"])
@pytest.mark.parametrize("draft", ["model", "head"])
def test_generations_that_join_and_leave_a_running_batch_equal_their_solo_runs(tiny64, head64, draft, gamma):
    pair = tiny64 if draft == "model" else head64
    batches = RunningBatches()
    generations = [stream(pair, prompt, batches=batches, rule=rule, alpha=alpha, seed=seed, max_new_tokens=tokens,
                          gamma=gamma)
                   for prompt, rule, alpha, seed, tokens in RUNS]
    traces = interleaved(generations, start_at=[0, 0, 2, 5, 5, 9], close_at={1: 3})
    assert batches.rows() == 0 and not batches.running  # every row left; the empty batch went
    for trace, run in zip(traces, RUNS):
        if trace is not None:
            same_as_solo(pair, trace, *run, gamma)
    assert traces[1] is None


@pytest.mark.parametrize("draft", ["model", "head"])
def test_rows_of_different_gammas_share_one_batch_and_equal_their_solo_runs(tiny64, head64, draft):
    """One running batch per pair: a block drafts as far as its longest row's gamma (fixed or "auto"), the others
    sitting the last steps out, and each row's blocks are its own gamma's."""
    pair = tiny64 if draft == "model" else head64
    gammas = [1, 5, "auto", 3, 2, "auto"]
    batches = RunningBatches()
    generations = [stream(pair, prompt, batches=batches, rule=rule, alpha=alpha, seed=seed, max_new_tokens=tokens,
                          gamma=gamma)
                   for (prompt, rule, alpha, seed, tokens), gamma in zip(RUNS, gammas)]
    traces = interleaved(generations, start_at=[0, 0, 1, 1, 3, 4])
    assert len(batches.running) == 0
    for trace, run, gamma in zip(traces, RUNS, gammas):
        same_as_solo(pair, trace, *run, gamma)


def test_one_batch_holds_every_gamma(tiny64):
    batches = RunningBatches()
    generations = [stream(tiny64, "The cat", batches=batches, max_new_tokens=12, gamma=gamma)
                   for gamma in (2, 4, "auto")]
    for steps in generations + generations[:1]:
        next(steps)
    assert len(batches.running) == 1 and batches.rows() == 3
    assert len(next(iter(batches.running.values())).rows) == 3


def test_calls_of_another_size_class_get_a_batch_of_their_own(tiny64):
    """A short call beside long ones decodes in a batch of its own size class, which its steps move."""
    batches = RunningBatches()
    short, long_ = (stream(tiny64, "The cat", batches=batches, max_new_tokens=n, gamma=3) for n in (12, 200))
    next(long_)
    next(short)
    assert len(batches.running) == 2 and sorted(len(b.rows) for b in batches.running.values()) == [1, 1]
    trace = finish(short)
    assert len(batches.running) == 1
    long_.close()
    same_as_solo(tiny64, trace, "The cat", "v3", 0.3, 0, 12, 3)


def test_rows_past_the_width_wait_and_join_as_others_finish(tiny64):
    batches = RunningBatches(width=2)
    generations = [stream(tiny64, prompt, batches=batches, rule=rule, alpha=alpha, seed=seed, max_new_tokens=tokens,
                          gamma=3)
                   for prompt, rule, alpha, seed, tokens in RUNS]
    for steps in generations:  # the first starts the batch; the others arrive while it runs and wait
        next(steps)
    width = lambda: sum(len(b.rows) for b in batches.running.values())  # noqa: E731
    assert width() == 1 and batches.rows() == len(RUNS)
    next(generations[0])  # its next block: the rows that arrived join it, up to the width
    assert width() == 2 and batches.rows() == len(RUNS)
    traces = [finish(steps) for steps in generations]
    for trace, run in zip(traces, RUNS):
        same_as_solo(tiny64, trace, *run, 3)


def test_batches_lanes_and_strategies_share_with_solo_runs(tiny64):
    """Every kind of generation the app makes (a batch of rows, lanes whose next run resumes the previous one, the
    strategies' runs one after another) decodes in the shared batch beside the others, each equal to its solo run."""
    rows = [dict(prompt=p, rule=r, alpha=a, seed=s, max_new_tokens=n) for p, r, a, s, n in RUNS[:3]]

    def lane(prompt, alphas):
        previous, traces = None, []
        for alpha in alphas:
            settings = dict(rule="v3", alpha=alpha, seed=7, max_new_tokens=20)
            if previous is None:
                trace = yield dict(prompt=prompt, **settings)
            else:
                _, k = previous.recolour("v3", alpha)
                trace = yield dict(resume=(previous, len(previous.positions) if k is None else k), **settings)
            traces.append(trace)
            previous = trace
        return traces

    batches = RunningBatches()
    generations = [stream_batch(tiny64, rows, gamma=3, batches=batches),
                   stream_lanes(tiny64, [lane("The cat", [0.2, 0.6]), lane("Once", [0.3, 0.9])], gamma=3, width=1,
                                batches=batches),
                   strategy_steps(tiny64, "Hello", STRATEGY, 0.6, batches=batches),
                   stream(tiny64, "Why", batches=batches, rule="chow", alpha=0.4, seed=9, max_new_tokens=30, gamma=3)]
    batch, lanes, strategies, alone = interleaved(generations, start_at=[0, 1, 2, 3])
    for trace, run in zip(batch, RUNS[:3]):
        same_as_solo(tiny64, trace, *run, 3)
    for prompt, alphas, traces in (("The cat", [0.2, 0.6], lanes[0]), ("Once", [0.3, 0.9], lanes[1])):
        for alpha, trace in zip(alphas, traces):
            assert trace.tokens == generate(tiny64, prompt, rule="v3", alpha=alpha, seed=7, max_new_tokens=20,
                                            gamma=3).tokens
    for lane in strategies:  # every call on the lane's own clock, though its rows joined a batch already running
        assert 0 <= lane["calls"][0][1] and max(end for _, _, end in lane["calls"]) <= lane["totals"]["seconds"] + 1e-3
    # their times include the other calls' rows, and say so; a call alone has none beside it
    assert all(lane["totals"]["rows_of_other_calls"] > 0 for lane in strategies[:2])
    assert "Other calls were generating meanwhile" in done_text(strategies)
    assert "rows_of_other_calls" not in generate(tiny64, "Hello", max_new_tokens=4, gamma=3).counters
    batches = RunningBatches()
    quiet = finish(strategy_steps(tiny64, "Hello", STRATEGY, 0.6, batches=batches))
    assert all(lane["totals"]["rows_of_other_calls"] == 0 for lane in quiet) and "Other" not in done_text(quiet)
    names = [lane["name"] for lane in strategies if lane["totals"]]
    assert names == ["target alone", "cascade", "speculative decoding", "speculative cascade", "sequential cascade"]
    solo = generate(tiny64, "Hello", rule="v3", alpha=0.5, seed=0, max_new_tokens=20, gamma=3)
    assert [lane["text"] for lane in strategies][3:] == [solo.text, solo.text]
    same_as_solo(tiny64, alone, "Why", "chow", 0.4, 9, 30, 3)


def test_pairs_whose_rows_cannot_share_a_batch_keep_one_per_generation(tiny64, monkeypatch):
    """Sliding-window attention is not masked across a batch's rows yet: such a pair's generations decode alone."""
    from transformers import MistralConfig, MistralForCausalLM

    from cascade_core.decoding.cached_model import sliding_window

    windowed = MistralForCausalLM(MistralConfig(vocab_size=98, hidden_size=32, intermediate_size=64,
                                                num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                                sliding_window=8))
    assert sliding_window(windowed) and not sliding_window(tiny64.target)
    monkeypatch.setattr("cascade_core.decoding.running_batches.sliding_window", lambda model: True)
    batches = RunningBatches()
    steps, other = (stream(tiny64, "The cat", batches=batches, max_new_tokens=12, gamma=3) for _ in range(2))
    next(steps)
    next(other)
    assert len(batches.running) == 2 and [len(b.rows) for b in batches.running.values()] == [1, 1]
    trace = finish(steps)
    other.close()
    same_as_solo(tiny64, trace, "The cat", "v3", 0.3, 0, 12, 3)
