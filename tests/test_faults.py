"""A fault in a shared step (issue: failure isolation): an exception of any type raised by the target's or the
draft's forward, after it has grown the caches, is the running batch's to handle. Raised once, every row still
writes exactly its solo run; raised for one row's input always, only that row ends, with one sentence, and every
other row writes its solo run (tokens, sources and counts compared exactly; float64)."""
import json

import pytest
import torch

from cascade_core import generate, stream
from cascade_core.decoding.cached_model import CachedModel
from cascade_core.decoding.running_batches import RunningBatches
from cascade_core.formats.loading import tiny_pair
from test_running import interleaved

MARK = [95, 96, 95, 96]  # the marked row's prompt holds these ids; no other prompt does
ROWS = [dict(prompt="The cat", rule="v3", alpha=0.5, gamma=3, seed=0, max_new_tokens=24),
        dict(prompt_ids=[40, *MARK, 41], rule="chow", alpha=0.3, gamma="auto", seed=1, max_new_tokens=20),
        dict(prompt="Once", rule="lossless", alpha=0.0, gamma=2, seed=2, max_new_tokens=30),
        dict(prompt="2 plus 3", rule="opt", alpha=0.2, gamma=5, seed=3, max_new_tokens=18),
        dict(prompt="Hello", rule="target", alpha=0.0, gamma=4, seed=4, max_new_tokens=17),
        dict(prompt="Why", rule="diff", alpha=0.1, gamma="auto", seed=5, max_new_tokens=26)]


@pytest.fixture(scope="module")
def head64():
    return tiny_pair(dtype=torch.float64, draft_kind="head")


def holds(sequence, mark=MARK):
    sequence = list(sequence)
    return any(sequence[i : i + len(mark)] == mark for i in range(len(sequence)))


@pytest.fixture
def faults(monkeypatch):
    """faults(role, once=..., marked=...): the role's forward raises after it ran (the caches grown): ``once`` on
    the first call over two or more rows; ``marked`` on every call that feeds the row whose prompt holds MARK."""
    prefill, call = CachedModel.prefill, CachedModel.__call__
    plan = {}

    def watched_prefill(self, sequences, inputs=None):
        if self.role == plan.get("role"):
            plan["marked"] |= {id(self.counters[r]) for r, s in enumerate(sequences) if holds(s)}
        return prefill(self, sequences, inputs)

    def faulty_call(self, inputs, extra=None):
        counters = list(self.counters)
        logits = call(self, inputs, extra)
        if self.role == plan.get("role"):
            feeding = [r for r, ids in enumerate(inputs) if ids]
            if plan["once"] and len(feeding) > 1:
                plan["once"] = False
                raise RuntimeError("injected fault")
            if plan["always"] and any(id(counters[r]) in plan["marked"] for r in feeding):
                raise RuntimeError("injected fault for the marked row")
        return logits

    monkeypatch.setattr(CachedModel, "prefill", watched_prefill)
    monkeypatch.setattr(CachedModel, "__call__", faulty_call)

    def arm(role, once=False, marked=False):
        plan.update(role=role, once=once, always=marked, marked=set())
        return plan

    def disarm():
        plan.clear()

    return arm, disarm


def solo(pair, row):
    row = dict(row)
    return generate(pair, row.pop("prompt", None), **row)


def same(trace, expected):
    assert trace.tokens == expected.tokens and trace.sources == expected.sources
    for key in ("target_calls", "draft_calls", "gammas"):
        assert trace.counters.get(key) == expected.counters.get(key), key


@pytest.mark.parametrize("role", ["target", "draft"])
@pytest.mark.parametrize("draft", ["model", "head"])
@pytest.mark.parametrize("kind", ["once", "marked"])
def test_a_fault_in_a_shared_step_loses_no_other_row(tiny64, head64, faults, role, draft, kind):
    pair = tiny64 if draft == "model" else head64
    rows = [r for r in ROWS if not (draft == "head" and r["rule"] == "draft")][: 6 if kind == "once" else 4]
    arm, disarm = faults
    expected = [solo(pair, row) for row in rows]
    batches = RunningBatches()
    plan = arm(role, once=kind == "once", marked=kind == "marked")
    outcomes = interleaved([stream(pair, row.get("prompt"), batches=batches,
                                   **{k: v for k, v in row.items() if k != "prompt"}) for row in rows])
    assert not plan["once"] and (kind == "once" or plan["marked"])  # the fault was raised
    disarm()
    assert batches.rows() == 0 and not batches.running
    for row, outcome, solo_trace in zip(rows, outcomes, expected):
        if kind == "marked" and "prompt_ids" in row:  # the marked row (chow: it calls both models)
            assert isinstance(outcome, ValueError)
            message = str(outcome)
            assert "injected fault" in message and "only this row" in message and "\n" not in message
        else:
            same(outcome, solo_trace)


def test_a_row_whose_prefill_always_fails_ends_alone(tiny64, monkeypatch):
    """A fault while a row joins (its prefill) is the batch's too: the others join and write their solo runs."""
    prefill = CachedModel.prefill

    def failing(self, sequences, inputs=None):
        if self.role == "target" and any(holds(s) for s in sequences):
            raise RuntimeError("injected prefill fault")
        return prefill(self, sequences, inputs)

    expected = [solo(tiny64, row) for row in ROWS[:3]]
    monkeypatch.setattr(CachedModel, "prefill", failing)
    batches = RunningBatches()
    outcomes = interleaved([stream(tiny64, row.get("prompt"), batches=batches,
                                   **{k: v for k, v in row.items() if k != "prompt"}) for row in ROWS[:3]])
    assert isinstance(outcomes[1], ValueError) and "injected prefill fault" in str(outcomes[1])
    same(outcomes[0], expected[0])
    same(outcomes[2], expected[2])


def test_a_fault_once_in_a_solo_run_is_retried(tiny64, monkeypatch):
    """A solo run is a running batch with one caller: an out-of-memory in its third target call is undone and
    retried."""
    expected = generate(tiny64, "The cat", gamma=3, max_new_tokens=20)
    original, calls = CachedModel.__call__, {"target": 0}

    def once(self, inputs, extra=None):
        logits = original(self, inputs, extra)
        if self.role == "target":
            calls["target"] += 1
            if calls["target"] == 3:
                raise MemoryError("injected out-of-memory")
        return logits

    monkeypatch.setattr(CachedModel, "__call__", once)
    same(generate(tiny64, "The cat", gamma=3, max_new_tokens=20), expected)
    assert calls["target"] == expected.counters["target_calls"] + 1


def test_four_api_calls_sharing_a_step_that_fails_once_all_return_their_solo_texts():
    """The issue's repro through the app: four /run calls share the running batch, one target forward among their
    shared steps raises once; every call returns its solo text, none an error."""
    from gradio_client import Client

    from app import build_app, launch
    from app.pairs import PairCache
    from browser import free_port

    pairs = PairCache()
    pair = pairs.get("tiny")
    prompts = ["Hello", "Once upon", "The cat", "Why"]
    settings = dict(rule="v3", alpha=0.5, gamma=3, temperature=1.0, max_new_tokens=120)
    solo = [generate(pair, prompt, seed=i, **settings).tokens for i, prompt in enumerate(prompts)]
    forwards, rows_at_fault = [], []

    def fault(module, args, kwargs):
        forwards.append(1)
        if len(forwards) == 12:
            rows_at_fault.append(kwargs["input_ids"].shape[0])
            raise RuntimeError("injected kernel fault")

    handle = pair.target.register_forward_pre_hook(fault, with_kwargs=True)
    demo = build_app("tiny", pairs=pairs)
    _, url, _ = launch(demo, port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        client = Client(url, verbose=False)
        jobs = [client.submit(prompt=prompt, seed=i, **settings, api_name="/run") for i, prompt in enumerate(prompts)]
        traces = [json.loads(job.result(timeout=120)) for job in jobs]
    finally:
        handle.remove()
        demo.close()
    assert rows_at_fault and rows_at_fault[0] > 1  # the fault hit a step shared by several calls
    assert [[pos["token"] for pos in trace["positions"]] for trace in traces] == solo
    assert all(trace["error"] is None for trace in traces)
