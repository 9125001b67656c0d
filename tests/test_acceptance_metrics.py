"""Acceptance metrics in the serving engines' schema (cascade_core/method/acceptance_metrics.py): every field recomputed
from the trace's own positions and the calls it counted, on every kind of rule, at a fixed gamma and gamma "auto",
resumed, batched and through every JSON output."""
import json

import pytest

from cascade_core import generate, generate_batch
from cascade_core.method.acceptance_metrics import KEPT, metrics
from cascade_core.method.costs import fresh_run_calls, fresh_run_steps
from test_hardening import strict_loads

RUN = dict(max_new_tokens=24, stop_at_eos=False, temperature=1.0)


def test_the_schema_on_steps_worked_by_hand():
    """Three steps of 4 drafts: all kept (4 emitted, no bonus token), 1 kept then a rejection (2 emitted), none
    kept (the correction alone)."""
    m = metrics([(4, 4), (4, 1), (4, 0)])
    assert m == {"num_spec_steps": 3, "num_draft_tokens": 12, "num_accepted_draft_tokens": 5,
                 "draft_acceptance_rate": 5 / 12, "mean_acceptance_length": (4 + 2 + 1) / 3,
                 "acceptance_histogram": [1, 1, 0, 0, 1], "num_spec_tokens": 4, "per_step_accepted": [4, 1, 0],
                 "acceptance_rate_per_position": [2 / 3, 1 / 3, 1 / 3, 1 / 3]}
    assert metrics([]) is None


def blocks(trace):
    """[(block, sources)] of the run's cascade blocks, in order, read straight off the positions."""
    found = {}
    for pos in trace.positions[trace.resumed_from:]:
        if pos["source"] != "target":
            found.setdefault(pos["block"], []).append(pos["source"])
    return list(found.values())


def check_against_the_trace(trace):
    """Each field from the trace's positions and counters, counted here independently."""
    m, found, drafted = trace.speculative_decoding, blocks(trace), trace.counters["drafted"]
    kept = [sum(s in KEPT for s in sources) for sources in found]
    assert m["num_spec_steps"] == len(found) == len(drafted) == len(trace.counters["gammas"])
    assert m["per_step_accepted"] == kept and m["num_accepted_draft_tokens"] == sum(kept)
    assert m["num_draft_tokens"] == sum(drafted) and m["num_spec_tokens"] == max(drafted)
    assert all(d == min(g + 1, trace.settings["max_new_tokens"] - start)
               for d, g, start in zip(drafted, trace.counters["gammas"], block_starts(trace)))
    assert m["draft_acceptance_rate"] == sum(kept) / sum(drafted)
    assert m["mean_acceptance_length"] * len(found) == pytest.approx(sum(len(s) for s in found))
    assert sum(m["acceptance_histogram"]) == len(found)
    assert m["acceptance_rate_per_position"][0] * len(found) == sum(s[0] in KEPT for s in found)
    return m


def block_starts(trace):
    starts, seen = [], set()
    for i, pos in enumerate(trace.positions):
        if i >= trace.resumed_from and pos["source"] != "target" and pos["block"] not in seen:
            seen.add(pos["block"])
            starts.append(i)
    return starts


@pytest.mark.parametrize("rule,alpha", [("lossless", 0.0), ("chow", 0.5), ("opt", 0.3), ("v3", 0.5), ("lossy", 0.3),
                                        ("bild", 2.0)])
def test_every_field_is_the_traces_own_count_and_a_fresh_runs(tiny64, rule, alpha):
    """At a fixed gamma the run's own steps are the ones a fresh run of its sources takes (costs.fresh_blocks):
    the same steps the sweeps' rows count, and one target call each."""
    trace = generate(tiny64, "Hello there", rule=rule, alpha=alpha, gamma=3, seed=4, **RUN)
    m = check_against_the_trace(trace)
    assert m == metrics(fresh_run_steps(trace.sources, 3, RUN["max_new_tokens"]))
    assert (m["num_spec_steps"], m["num_draft_tokens"]) == fresh_run_calls(trace.sources, rule, 3, 24)
    assert m["num_spec_steps"] == trace.stats["target_calls"]


def test_gamma_auto_counts_its_own_block_lengths(tiny64):
    trace = generate(tiny64, "Hello there", rule="v3", alpha=0.5, gamma="auto", seed=2, **RUN)
    m = check_against_the_trace(trace)
    floor = trace.sources.count("target")
    assert m["num_spec_steps"] + floor == trace.stats["target_calls"]


def test_a_resumed_run_counts_only_the_steps_it_took(tiny64):
    first = generate(tiny64, "Hello there", rule="v3", alpha=0.5, gamma=3, seed=4, **RUN)
    resumed = generate(tiny64, "Hello there", rule="v3", alpha=0.8, gamma=3, seed=4, resume=(first, 10), **RUN)
    m = check_against_the_trace(resumed)
    assert resumed.resumed_from == 10 and m["num_spec_steps"] == resumed.stats["target_calls"]


def test_baselines_and_sequential_cascades_have_no_verify_steps(tiny64):
    for keywords in (dict(rule="target"), dict(rule="draft"), dict(rule="chow", alpha=0.5, sequential=True)):
        trace = generate(tiny64, "Hello there", gamma=3, seed=1, **keywords, **RUN)
        assert trace.speculative_decoding is None and trace.to_dict()["speculative_decoding"] is None


def test_a_batched_row_reports_what_it_reports_alone(tiny64):
    rows = [dict(prompt=p, rule="v3", alpha=0.5, seed=s, **RUN) for p, s in (("Hello there", 1), ("Once upon", 2))]
    batched = generate_batch(tiny64, rows, gamma=3)
    for row, trace in zip(rows, batched):
        alone = generate(tiny64, row.pop("prompt"), gamma=3, **row)
        assert trace.tokens == alone.tokens and trace.speculative_decoding == alone.speculative_decoding


def test_the_trace_json_carries_them_as_strict_json(tiny64):
    trace = generate(tiny64, "Hello there", rule="v3", alpha=0.5, gamma=3, seed=4, **RUN)
    assert strict_loads(trace.to_json())["speculative_decoding"] == json.loads(json.dumps(trace.speculative_decoding))
