"""Sweeps on the tiny pair: rows with every key, prefix sharing that changes nothing but the work, auto alphas that
spread deferral, resumable output, Ray rows equal to in-process rows, and one clear line for bad input."""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cascade_core import RULES, generate, load_pair
from cascade_core.method.costs import priced_speedup
from same_results import assert_same
from sweeps import load_prompts, sweep
from sweeps.alphas import OPEN_TOP, auto_alphas
from sweeps.chain import TIMING_FIELDS, run_chain
from sweeps.figures import QUALITY, X_AXES, frontier_figure
from sweeps.prompts import per_category
from sweeps.quality import exact_match, rouge_l
from sweeps.report import summarise, write_report, write_summary
from sweeps.sweep import pilot_positions

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"prompt_id", "category", "draft", "rule", "alpha", "seed", "gamma", "temperature", "tokens", "text",
        "target_calls", "draft_calls", "acceptance_rate", "deferral_rate", "wall_seconds", "cost_ratio",
        "projected_speedup", "tv_to_target", "target_nll", "target_top1", "rouge_l", "exact_match", "generated_tokens",
        "speculative_decoding"}
SETTINGS = dict(gamma=3, temperature=1.0, max_new_tokens=24)
RULES_SWEPT = ["lossless", "chow", "opt", "v3", "lossy", "draft"]


@pytest.fixture(scope="module")
def tiny():
    return load_pair("tiny")


@pytest.fixture(scope="module")
def prompts(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "p.jsonl"
    path.write_text('{"id": "a", "category": "fact", "prompt": "The cat", "reference": "The cat sat."}\n'
                    '{"prompt": "Once upon", "category": "story"}\n\n'
                    '{"id": "sum", "category": "arithmetic", "prompt": "2 plus 3 is", "answer": 5}\n')
    return load_prompts(path)


def untimed(rows):
    """Rows without timing fields (and the work prefix sharing saves). Their floats are compared within
    same_results' tolerance: where blocks start elsewhere (a resumed run, a Ray worker's one thread, another CPU's
    kernels) the target's p of the same token differs by float32 rounding, ~1e-7 relative."""
    return [{k: v for k, v in r.items() if k not in TIMING_FIELDS + ("generated_tokens",)} for r in rows]


@pytest.fixture(scope="module")
def fresh_rows(tiny, prompts):
    return sweep("tiny", prompts, RULES_SWEPT, "auto:4", [0, 1], share_prefix=False, pair=tiny, **SETTINGS)


def test_projected_speedup_is_priced_with_the_pairs_measured_calls(prompts):
    pair = load_pair("tiny")
    # prices as if measured on a CPU like the bundled pair's (a verification dearer than a target token)
    # and the engine's own seconds per block, measured once per pair: every view prices a text alike
    pair.prices.update({("target", 1): 0.080, ("draft", 1): 0.012, ("target", 4): 0.098})
    pair.overhead = 0.004
    rows = [row for rule, alpha in (("v3", 0.5), ("lossless", None)) for row in
            run_chain(pair, prompts[0], rule, [alpha], 0, gamma=3, temperature=1.0, max_new_tokens=24)]
    assert len(pair.prices) == 3 and pair.overhead == 0.004  # nothing measured again
    for r in rows:
        assert r["projected_speedup"] == pytest.approx(priced_speedup(r["acceptance_rate"], 3, 0.080, 0.012, 0.098,
                                                                      0.004))
        assert 0 < r["projected_speedup"] < r["tokens"] / r["target_calls"]


def test_rows_have_every_key_and_one_row_per_setting(fresh_rows, prompts):
    assert all(set(r) == KEYS for r in fresh_rows) and {r["draft"] for r in fresh_rows} == {"model"}
    per_rule = {rule: {r["alpha"] for r in fresh_rows if r["rule"] == rule} for rule in RULES_SWEPT}
    assert per_rule["lossless"] == per_rule["draft"] == {None}
    assert all(len(per_rule[rule]) >= 3 for rule in ("chow", "opt", "v3", "lossy"))
    expected = sum(len(per_rule[rule]) for rule in RULES_SWEPT) * len(prompts) * 2
    assert len(fresh_rows) == expected
    assert [r["prompt_id"] for r in fresh_rows[:1]] == ["a"] and fresh_rows[-1]["prompt_id"] == "sum"
    assert {r["prompt_id"] for r in fresh_rows} == {"a", "1", "sum"}  # no id: the 0-based line number
    assert all((r["rouge_l"] is None) == (r["prompt_id"] != "a") for r in fresh_rows)
    assert all((r["exact_match"] is None) == (r["prompt_id"] != "sum") for r in fresh_rows)
    assert all(r["target_nll"] > 0 and 0 <= r["target_top1"] <= 1 for r in fresh_rows)
    json.loads(json.dumps(fresh_rows), parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))


def test_rows_carry_the_engines_acceptance_metrics_of_a_fresh_run(fresh_rows):
    """A row's verify steps are its target calls and its drafted tokens its draft calls (a draft model: one call
    a token); what they kept is the acceptance rate's numerator; none for the draft alone."""
    for r in fresh_rows:
        m = r["speculative_decoding"]
        if r["rule"] == "draft":
            assert m is None
            continue
        assert (m["num_spec_steps"], m["num_draft_tokens"]) == (r["target_calls"], r["draft_calls"])
        assert m["num_accepted_draft_tokens"] == round(r["acceptance_rate"] * r["tokens"])
        assert m["num_spec_tokens"] == SETTINGS["gamma"] + 1 and sum(m["acceptance_histogram"]) == m["num_spec_steps"]


def test_rows_record_the_draft_that_ran_and_a_head_runs_no_draft_alone(prompts):
    rows = sweep("head -> tiny", prompts[:1], ["lossless", "v3"], [0.5], [0], **SETTINGS)
    assert [(r["draft"], r["rule"]) for r in rows] == [("head", "lossless"), ("head", "v3")]
    with pytest.raises(ValueError, match="needs a draft that runs alone"):
        sweep("head -> tiny", prompts[:1], ["draft"], [0.5], [0], **SETTINGS)


def test_prefix_sharing_changes_only_the_work(tiny, prompts, fresh_rows):
    shared = sweep("tiny", prompts, RULES_SWEPT, "auto:4", [0, 1], share_prefix=True, pair=tiny, **SETTINGS)
    assert_same(untimed(shared), untimed(fresh_rows), "rows")
    assert sum(r["generated_tokens"] for r in shared) < sum(r["generated_tokens"] for r in fresh_rows)


def test_auto_alphas_spread_the_pilots_deferral_from_none_to_all(tiny, prompts):
    positions = pilot_positions(tiny, prompts, **SETTINGS)
    for rule in [name for name, record in RULES.items() if record.alpha_used]:
        a_stars = [pos["a_star"][rule] for pos in positions]
        alphas = auto_alphas(rule, a_stars, 5)
        rates = [sum(alpha < a for a in a_stars) / len(a_stars) for alpha in alphas]
        lo, hi = RULES[rule].alpha_range
        assert all(lo <= alpha <= hi for alpha in alphas), rule
        assert rates == sorted(rates, reverse=True) and len(alphas) >= 3, rule
        top = OPEN_TOP if RULES[rule].upper_open else hi
        assert (rates[-1] <= 0.2 or alphas[-1] == top) and (rates[0] >= 0.8 or alphas[0] == lo), (rule, rates)
    assert auto_alphas("ensemble", [math.inf] * 8, 5) == [0.0, 0.25, 0.5, 0.75, 1.0]  # it defers nothing: its range


def test_report_summary_and_html(fresh_rows, tmp_path):
    summary = write_summary(fresh_rows, tmp_path / "summary.csv")
    assert {(s["rule"], s["alpha"]) for s in summary} == {(r["rule"], r["alpha"]) for r in fresh_rows}
    lossless = next(s for s in summary if s["rule"] == "lossless")
    assert lossless["n"] == 6 and lossless["target_nll_ci"] > 0
    assert math.isclose(lossless["target_nll_mean"], sum(r["target_nll"] for r in fresh_rows
                                                         if r["rule"] == "lossless") / 6)
    write_report(fresh_rows, tmp_path / "report.html", "tiny <sweep>")
    html = (tmp_path / "report.html").read_text()
    assert html.count("Pareto front") >= 3 and "tiny &lt;sweep&gt;" in html and "plotly" in html
    assert summary[0]["tv_to_target_mean"] is not None and "The target's NLL has no front" in html


def test_per_category_keeps_the_first_of_each(prompts):
    assert [p["prompt_id"] for p in per_category(prompts + prompts[:1], 1)] == ["a", "1", "sum"]
    default = per_category(load_prompts(ROOT / "assets" / "prompts" / "default.jsonl"), 2)
    assert len(default) == 14 and len({p["category"] for p in default}) == 7


def test_quality_measures():
    assert exact_match("The answer is 1,391.", 1391) and not exact_match("3 then 4", 3)
    assert exact_match("no digits", 2) is False and exact_match("x", None) is None
    assert rouge_l("the cat sat", "the cat sat") == 1.0 and rouge_l("x", None) is None


def sweep_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "sweeps", "--pair", "tiny", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("setup, args, message", [
    ("{\"prompt\": \"ok\"}\n{oops\n", [], "p.jsonl:2: not a JSON object"),
    ("{\"id\": 1}\n", [], "p.jsonl:1: \"prompt\" must be non-empty text"),
    ("{\"prompt\": \"ok\", \"colour\": 1}\n", [], "unknown field 'colour'"),
    ("{\"prompt\": \"ok\"}\n", ["--rules", "v3,v9"], "unknown rule 'v9'"),
    ("{\"prompt\": \"ok\"}\n", ["--rules", "v3", "--alphas", "0.5,1.5"], "alpha=1.5 is outside rule 'v3'"),
    ("{\"prompt\": \"ok\"}\n", ["--alphas", "auto:x"], "auto:N needs a whole number"),
    ("{\"prompt\": \"ok\"}\n", ["--out", "/proc/sweep"], "is not a folder this sweep can write to"),
    ("{\"prompt\": \"ok\"}\n", ["--pair", "no/such -> models/here"],
     "'models/here' and the draft 'no/such' are not downloaded"),
    ("{\"prompt\": \"ok\"}\n", ["--per-category", "0"], "--per-category 0: give 1 or more"),
    ("{\"prompt\": \"ok\"}\n", ["--pair", "tiny", "--draft", "eagle"], "draft 'eagle' is not one of the tiny pair's"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, setup, args, message):
    """In-process (sweeps.__main__.main, as `python -m sweeps` runs it): each import of torch in a subprocess cost a
    CI run ~25 s; the Ray cluster's case below runs as a subprocess, the command's smoke test."""
    from sweeps.__main__ import main
    (tmp_path / "p.jsonl").write_text(setup)
    try:
        status = main(["--pair", "tiny", "--prompts", str(tmp_path / "p.jsonl"), "--out", str(tmp_path / "out"), *args])
    except SystemExit as exit_:  # argparse's own refusals
        status = exit_.code
    stderr = capsys.readouterr().err
    assert status == 2 and message in stderr and "Traceback" not in stderr, stderr
    assert len([line for line in stderr.splitlines() if line.startswith("error:")]) == 1


def test_an_unreachable_ray_cluster_is_one_line_and_exit_2(tmp_path):
    """The command as a user types it, in a process of its own (ray.init's failure must not touch this one)."""
    (tmp_path / "p.jsonl").write_text('{"prompt": "ok"}\n')
    r = sweep_cli("--prompts", str(tmp_path / "p.jsonl"), "--out", str(tmp_path / "out"), "--rules", "v3", "--alphas",
                  "0.5", "--ray-address", "ray://127.0.0.1:1")
    assert r.returncode == 2 and "cannot reach the Ray cluster at 'ray://127.0.0.1:1'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert len([line for line in r.stderr.splitlines() if line.startswith("error:")]) == 1


def test_an_interrupted_sweep_resumes_to_the_same_rows(tmp_path, tiny):
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Story {i}:"}) + "\n"
                                              for i in range(4)))
    argv = ["--prompts", str(tmp_path / "p.jsonl"), "--rules", "chow,v3", "--alphas", "0.3,0.6,0.9",
            "--max-new-tokens", "80", "--out", str(tmp_path / "out")]
    killed = subprocess.Popen([sys.executable, "-m", "sweeps", "--pair", "tiny", *argv], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows_file = tmp_path / "out" / "rows.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not rows_file.exists() or len(rows_file.read_text().splitlines()) < 3):
        time.sleep(0.2)
    killed.kill()
    killed.wait()
    written = len(rows_file.read_text().splitlines())
    assert 3 <= written < 24, "the sweep was meant to be killed half-way"
    with open(rows_file, "a") as f:
        f.write('{"prompt_id": "p3", "rule": "v3", "al')  # a row cut short mid-write
    from sweeps.__main__ import main
    assert main(["--pair", "tiny", *argv]) == 0  # the resume in this process: one torch import less
    resumed = [json.loads(line) for line in rows_file.read_text().splitlines()]
    whole = sweep("tiny", load_prompts(tmp_path / "p.jsonl"), ["chow", "v3"], [0.3, 0.6, 0.9], [0], gamma=4,
                  max_new_tokens=80, pair=tiny)
    assert_same(untimed(resumed), untimed(whole), "rows")
    assert (tmp_path / "out" / "summary.csv").exists() and (tmp_path / "out" / "report.html").exists()


def test_a_finished_sweep_resumed_adds_nothing_rewrites_its_summary_and_exits_0(tmp_path, prompts):
    """A resume with nothing left to run: no row added, summary and report written again, exit status 0."""
    from sweeps.__main__ import main

    (tmp_path / "p.jsonl").write_text('{"prompt": "The cat"}\n{"prompt": "Once upon"}\n')
    argv = ["--pair", "tiny", "--prompts", str(tmp_path / "p.jsonl"), "--rules", "lossless,opt,v3", "--alphas",
            "auto:3", "--seeds", "0", "--gamma", "3", "--temperature", "1", "--max-new-tokens", "16",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    out = tmp_path / "out"
    rows = (out / "rows.jsonl").read_text()
    (out / "summary.csv").unlink()
    (out / "report.html").unlink()
    assert main(argv) == 0
    assert (out / "rows.jsonl").read_text() == rows
    assert (out / "summary.csv").exists() and (out / "report.html").exists()


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module (2 CPUs, no dashboard), shut down afterwards."""
    ray = pytest.importorskip("ray")
    from sweeps.distributed import connect

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    connect(None)
    yield ray
    ray.shutdown()


def test_ray_rows_equal_in_process_rows(local_ray, tiny, prompts, fresh_rows):
    on_ray = sweep("tiny", prompts, RULES_SWEPT, "auto:4", [0, 1], ray=True, **SETTINGS)
    assert_same(untimed(on_ray), untimed(sweep("tiny", prompts, RULES_SWEPT, "auto:4", [0, 1], pair=tiny, **SETTINGS)),
                "rows")
    assert_same(untimed(on_ray), untimed(fresh_rows), "rows")


@pytest.mark.parametrize("change, caught", [
    (dict(target_nll=lambda v: v * (1 + 1e-7)), False),  # another CPU's summation order: the same row
    (dict(target_nll=lambda v: v + 1e-7), False),
    (dict(target_nll=lambda v: v * 1.001), True),
    (dict(tokens=lambda v: v + 1), True),
    (dict(text=lambda v: v + "!"), True),
    (dict(target_calls=lambda v: v + 1), True),
    (dict(rule=lambda v: "v1"), True),
    (dict(alpha=lambda v: None), True),
    (dict(rouge_l=lambda v: 0.5), True),  # None against a number
])
def test_rows_compare_discrete_fields_exactly_and_floats_within_a_tolerance(fresh_rows, change, caught):
    """What the cross-process comparisons above accept: float noise of a few ulps, never a changed token, text,
    count or rule."""
    (key, how), = change.items()
    i = next(i for i, r in enumerate(fresh_rows) if r["alpha"] is not None and r["rouge_l"] is None)
    changed = [dict(r, **{key: how(r[key])}) if j == i else r for j, r in enumerate(fresh_rows)]
    if caught:
        with pytest.raises(AssertionError, match=f"rows\\[{i}\\]\\['{key}'\\]"):
            assert_same(untimed(changed), untimed(fresh_rows), "rows")
    else:
        assert_same(untimed(changed), untimed(fresh_rows), "rows")


def test_summary_ignores_missing_measures(fresh_rows):
    rows = [dict(r, rouge_l=None) for r in fresh_rows]
    assert all(s["rouge_l_mean"] is None for s in summarise(rows))


def test_rows_hold_the_mean_tv_to_the_target(tiny, prompts, fresh_rows):
    """0 for lossless (pi = p), the draft's TV(q, p) for draft-only (measured with both models' passes), between for
    the cascades; the summary averages it and the report draws its front."""
    from sweeps.chain import row
    from sweeps.quality import draft_only_tv

    assert all(r["tv_to_target"] == 0.0 for r in fresh_rows if r["rule"] == "lossless")
    assert all(0 < r["tv_to_target"] < 1 for r in fresh_rows if r["rule"] in ("draft", "v3", "lossy"))
    draft = [r for r in fresh_rows if r["rule"] == "draft"]
    assert all(r["tv_to_target"] > 0.05 for r in draft)
    trace = generate(tiny, prompts[0]["prompt"], rule="draft", seed=draft[0]["seed"], gamma=3, temperature=1.0,
                     max_new_tokens=24, details=False)
    assert row(tiny, prompts[0], trace, None)["tv_to_target"] == draft_only_tv(tiny, trace)
    assert draft_only_tv(tiny, trace) == pytest.approx(draft[0]["tv_to_target"], rel=1e-5)
    summary = summarise(fresh_rows)
    chow = [s["tv_to_target_mean"] for s in summary if s["rule"] == "chow"]  # alphas in increasing order
    assert chow == sorted(chow) and chow[0] < chow[-1], "a larger alpha keeps q at more positions"


@pytest.mark.parametrize("quality", list(QUALITY))
def test_the_front_is_drawn_only_where_the_measure_ranks_the_text(fresh_rows, quality):
    """The mean TV to the target (lower: nearer the target's distribution) and the reference-based measures have a
    Pareto front; the target's NLL, a diagnostic, has none and says so on its axis."""
    summary = summarise(fresh_rows)
    for x in X_AXES:
        figure = frontier_figure(summary, x, quality)
        fronts = [t for t in figure.data if t.legendgroup == "front"]
        assert len(fronts) == (quality != "target_nll"), (quality, x)
        assert any(t.legendgroup != "front" for t in figure.data)
        if quality == "tv_to_target":  # lower is nearer: along the front, each cheaper point lies farther
            front = fronts[0]
            assert list(front.x) == sorted(front.x) and list(front.y) == sorted(front.y, reverse=x == "calls")
    if quality == "target_nll":
        assert "diagnostic" in QUALITY[quality] and "not better text" in QUALITY[quality]


def test_lossless_is_drawn_over_the_rules_that_reach_it_and_one_point_draws_no_negative_cost(fresh_rows, tmp_path):
    """Lossless (one point) sits where a position rule lands at the alpha that defers everywhere (pi = p): it is
    drawn after every rule's line, a large open diamond over their markers, not under them. An uploaded rows file of
    one row keeps its axes at 0 and up (plotly pads a lone point on both sides: negative calls per token)."""
    from app.tradeoff import TradeoffHandlers

    for x in X_AXES:
        drawn = [t for t in frontier_figure(summarise(fresh_rows), x).data if t.legendgroup != "front"]
        names = [t.name for t in drawn]
        alone = [name for name in ("lossless", "draft") if name in names]  # draft-only has no acceptance for at_c
        assert names == [name for name in names if name not in alone] + alone, x  # the alpha-less rules last
        lossless = next(t for t in drawn if t.name == "lossless")
        assert lossless.marker.symbol == "diamond-open" and lossless.marker.size > drawn[0].marker.size
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(next(r for r in fresh_rows if r["rule"] == "chow")) + "\n", encoding="utf-8")
    rows, figure, status = TradeoffHandlers.upload(str(path), "calls", 0.25)
    assert status == "Loaded 1 row." and len(figure.data[0].x) == 1
    assert figure.layout.xaxis.rangemode == figure.layout.yaxis.rangemode == "nonnegative"


def test_a_measure_no_row_has_draws_a_sentence_not_an_empty_chart(fresh_rows):
    figure = frontier_figure(summarise([dict(r, tv_to_target=None) for r in fresh_rows]))
    said = figure.layout.annotations[0].text.replace("<br>", " ")
    assert not figure.data and "No row here has the mean TV to the target" in said
