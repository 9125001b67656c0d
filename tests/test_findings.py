"""The Learn tab's "What the paper found" (app/findings.py): every number and citation is rendered, every number is
the paper's as its digest gives it (where the shared notes are present), and each sentence about what this app
reproduces is checked against the engine where a run can check it."""
import math
import re
from pathlib import Path

import pytest

from app.findings import COLUMNS, FINDINGS, METHODS, PLAIN, QUALITY, SPEEDUP, STATUSES, TIMES, findings_markdown, \
    table_rows
from app.learn import TAB_NAMES
from app.lessons import LESSONS
from app.sandbox import START
from cascade_core import generate
from cascade_core.method.costs import expected_speedup
from cascade_core.method.explain import dissect
from cascade_core.method.rules import RULES

DIGEST = Path(__file__).resolve().parents[2] / "shared" / "notes" / "paper-digest.md"  # beside the repository
PANEL = findings_markdown()
RUN = dict(max_new_tokens=24, stop_at_eos=False, seed=1)


def test_the_panel_renders_every_findings_source_numbers_and_verdict():
    for k, finding in enumerate(FINDINGS, 1):
        assert f"#### {k}. {finding.title} ({finding.source})" in PANEL
        assert finding.found in PANEL and finding.here in PANEL
        assert all(number in finding.found for number in finding.numbers), finding.title
        assert finding.status in STATUSES and f"**Here: {finding.status}.**" in PANEL


def test_the_panel_prints_both_halves_of_table_2_in_full():
    assert len(METHODS) == len(SPEEDUP) == len(QUALITY) == 8
    assert all(len(row) == len(COLUMNS) for row in SPEEDUP + QUALITY)
    for rows, fmt in ((SPEEDUP, TIMES), (QUALITY, PLAIN)):
        for line in table_rows(rows, fmt):
            assert line in PANEL
        assert all(fmt(v) in PANEL for row in rows for v in row)
    assert sum(finding.source == "Table 2" for finding in FINDINGS) == 2


def test_the_panel_cites_what_the_brief_asks_for():
    for citation in ("Table 2", "Fig. 1", "Fig. 2", "Fig. 3", "Fig. 5", "Fig. 6", "Fig. 7", "Lemma 5", "Lemma 8",
                     "§E.7", "ensembling", "SQuAD 2.0", "truncates", "calibration"):
        assert citation in PANEL, citation


def test_the_rules_and_tabs_it_names_are_the_apps():
    assert set(re.findall(r"`([a-z0-9]+)`", PANEL)) <= set(RULES)
    assert set(re.findall(r"the ([A-Z][\w-]*) tab", PANEL)) <= set(TAB_NAMES.values()) | {"Learn"}
    lessons = {int(k) for k in re.findall(r"lessons? (\d)", PANEL)} | {8}  # "lessons 1 and 8"
    assert lessons <= set(range(1, len(LESSONS) + 1))


@pytest.mark.skipif(not DIGEST.exists(), reason="the paper's digest lives beside the repository, in shared/notes")
def test_every_number_it_cites_is_the_digests():
    digest = DIGEST.read_text()
    for finding in FINDINGS:
        for number in finding.numbers:
            assert number in digest, (finding.title, number)
    for rows, fmt in ((SPEEDUP, TIMES), (QUALITY, PLAIN)):  # each row as the digest prints it, bold bests included
        for line in table_rows(rows, fmt):
            assert line in digest, line


# -- The sentences about this app, checked on the tiny pair ----------------------------------------------------

def test_greedy_opt_and_diff_rows_write_the_same_text(tiny64):
    """Finding 4: Lemma 8 in Compare (the decisions may differ; pi does not)."""
    for alpha in (0.0, 0.2, 0.6):
        opt, diff = (generate(tiny64, "Hello there", rule=rule, alpha=alpha, gamma=3, temperature=0.0, **RUN)
                     for rule in ("opt", "diff"))
        assert opt.tokens == diff.tokens


def test_the_sequential_cascade_with_diff_calls_the_target_at_every_position(tiny64):
    """Finding 3: the same tokens, one target call a position against one a block."""
    sequential, speculative = (generate(tiny64, "Hello there", rule="diff", alpha=0.1, gamma=3, sequential=s, **RUN)
                               for s in (True, False))
    assert sequential.tokens == speculative.tokens
    assert sequential.stats["target_calls"] == len(sequential.tokens)
    assert speculative.stats["target_calls"] == len({pos["block"] for pos in speculative.positions})
    assert speculative.stats["target_calls"] < len(speculative.tokens)


def test_the_sequential_cascade_with_chow_calls_the_target_only_where_chow_defers(tiny64):
    """Finding 8: the sequential cascade reads p only at deferred positions; the speculative one every block."""
    trace = generate(tiny64, "Hello there", rule="chow", alpha=0.6, gamma=3, sequential=True, **RUN)
    deferred = sum(source != "accepted" for source in trace.sources)
    assert 0 < deferred < len(trace.tokens) and trace.stats["target_calls"] == deferred


@pytest.mark.parametrize("gamma", [3, 7])
def test_where_every_proposal_is_kept_a_target_call_yields_gamma_plus_one_tokens(tiny64, gamma):
    """Finding 5: 1/8 target call per token at gamma 7, 1/4 at gamma 3 (chow at alpha 1 never defers)."""
    trace = generate(tiny64, "Hello there", rule="chow", alpha=1.0, gamma=gamma, **RUN)
    assert set(trace.sources) == {"accepted"}
    assert trace.stats["target_calls"] == math.ceil(len(trace.tokens) / (gamma + 1))


def test_the_cost_model_prices_high_acceptance_up_and_low_acceptance_down_at_a_larger_gamma():
    """Finding 5: this app's cost model (gamma + 1 draft calls a block) at c = 0.25."""
    at = lambda acceptance, gamma: expected_speedup(acceptance, gamma, 0.25, gamma + 1)  # noqa: E731
    assert at(0.95, 7) > at(0.95, 3) and at(0.35, 7) < at(0.35, 3)


def test_v3_scales_the_targets_tail_by_eta():
    """Finding 7: outside v3's accepted set pi(v) = eta p(v), eta the draft's mass there (Eq. 11, Eq. 15)."""
    _, q, p = START
    numbers = dissect("v3", q, p, 0.5)
    deferred = [i for i, defers in enumerate(numbers["defers"]) if defers]
    eta = sum(numbers["q"][i] for i in deferred)
    assert deferred and eta < 1
    for i in deferred:
        assert numbers["pi"][i] == pytest.approx(eta * numbers["p"][i])
