"""The living benchmarks run end to end (tiny pair, few tokens) and write their markdown sections; the harness they
share alternates methods fairly, reads its prompts from assets/prompts/ and replaces a section where it stands."""
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bench.harness import acceptance_by_step, alternate, by_method, every_prompt, prompt_kinds, prompts, write_section

ROOT = Path(__file__).resolve().parents[1]


def test_the_engine_benchmark_runs_as_a_module_and_writes_its_section(tmp_path):
    out = tmp_path / "bench.md"
    r = subprocess.run([sys.executable, "-m", "bench.engine_bench", "--pair", "tiny", "--runs", "2",
                        "--max-new-tokens", "6", "--no-compile", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## Engine benchmark on cpu: tiny pair" in text and "`python -m bench.engine_bench --pair tiny" in text
    assert "Greedy outputs identical (transformers generate = transformers assisted = ours lossless, every path): " \
           "**True**" in text
    for name in ("transformers generate (target only)", "transformers assisted", "ours lossless", "ours v3 alpha=0.3",
                 "ours opt alpha=0.5", "records skipped"):
        assert name in text


def test_write_section_replaces_by_key_whatever_the_numbers_in_the_title(tmp_path):
    """A re-run whose title carries new numbers (the draft's 1 - TV) replaces its old section where it stands."""
    path, key = tmp_path / "b.md", "## Engine benchmark on cpu: bundled pair"
    write_section(path, f"{key}, draft (1 - TV 0.33)\n\nold\n", key)
    write_section(path, "## Bundled draft: draft (1 - TV 0.33)\n\nreport\n", "## Bundled draft:")
    write_section(path, f"{key}, draft (1 - TV 0.41)\n\nnew\n", key)
    text = path.read_text()
    assert text.count(key) == 1
    assert "old" not in text
    assert text.index(f"{key}, draft (1 - TV 0.41)\n\nnew") < text.index("## Bundled draft: draft (1 - TV 0.33)")


def test_alternate_runs_every_method_on_every_case_and_turns_the_order():
    """Each method runs once per case and round, and over as many cases as there are methods each goes first once."""
    order = []
    results = alternate("abc", ["x", "y", "z"], 2, lambda case, m, r: order.append(m) or (case, m, r), lambda _: None)
    assert {key: len(runs) for key, runs in results.items()} == {(c, m): 2 for c in "xyz" for m in "abc"}
    assert results["y", "b"] == [("y", "b", 0), ("y", "b", 1)]
    firsts = order[::3]
    assert firsts[:3] == ["a", "b", "c"] and firsts[3:] == ["a", "b", "c"]
    assert list(by_method(results, "cab")) == ["c", "a", "b"]
    assert by_method(results, "abc")["a"] == [("x", "a", 0), ("x", "a", 1), ("y", "a", 0), ("y", "a", 1),
                                               ("z", "a", 0), ("z", "a", 1)]


def test_acceptance_by_step_reads_each_step_of_a_block():
    """Block by block, the proposals' keep probabilities at their step; a step no block reached is None."""
    positions = [dict(block=0, accept_prob=0.2), dict(block=0, accept_prob=0.4), dict(block=1, accept_prob=0.6),
                 dict(block=2, accept_prob=None)]
    trace = types.SimpleNamespace(positions=positions)
    assert acceptance_by_step([trace]) == [0.4, 0.4]
    assert acceptance_by_step([trace], 3) == [0.4, 0.4, None]


def test_the_prompts_are_the_files_in_assets():
    """Every set a benchmark measures on comes from assets/prompts/ (bench.json and kinds.json), and every_prompt
    holds them all, the page's single prompts among them."""
    assert len(prompts("speedup")) == 3 and set(prompts("speedup")) < set(prompts("drafts"))
    kinds = prompt_kinds()
    assert {"explanation", "code", "long answer"} <= set(kinds)
    everything = every_prompt()
    assert set(prompts("load")) | set(prompts("greedy")) | set(prompts("page").values()) <= everything
    assert {p for ps in kinds.values() for p in ps} <= everything


def test_the_engine_benchmark_names_the_measured_routes():
    """The routes other than F.linear over the count itself, in row order; a pair without measured kernels: none."""
    from bench.engine_bench import kernel_routes
    pair = types.SimpleNamespace(kernels={"routes": {3: ("thin", 3), 1: ("thin", 2), 2: ("linear", 2)}})
    assert kernel_routes(pair) == "1 thin over 2, 3 thin"
    assert kernel_routes(types.SimpleNamespace(kernels=None)) == "none"


def test_speedup_bench_reads_runs_whose_every_token_is_the_targets_own(tmp_path):
    """At 4 tokens on the tiny pair gamma "auto"'s floor has the target sample every token of some runs (on this
    project's machines; it depends on the measured prices): such a run has no acceptance and no engine time per
    block, and the benchmark reports it instead of failing."""
    from bench import speedup_bench

    out = tmp_path / "bench.md"
    summary = speedup_bench.main(["--pair", "tiny", "--rounds", "1", "--max-new-tokens", "4", "--out", str(out)])
    assert "## Speed-up over target-only at the app's settings: tiny pair" in out.read_text()
    assert [r["name"] for r in summary["rows"]] == [speedup_bench.label(*m) for m in speedup_bench.METHODS]


def test_every_living_benchmark_answers_help(capsys):
    """Each benchmark make or the docs run is a module of bench/ that imports and whose command line parses
    (--help: nothing runs)."""
    for name in ("speedup_bench", "kinds_bench", "engine_bench", "drafts_bench", "precision_bench", "app_bench",
                 "tabs_bench", "load_test", "seed_pair", "sweep_speed", "screenshots"):
        with pytest.raises(SystemExit) as exit_:
            importlib.import_module(f"bench.{name}").main(["--help"])
        assert exit_.value.code == 0 and capsys.readouterr().out.startswith("usage:"), name


def test_the_explorer_benchmarks_in_process_parts_call_the_handlers_as_the_page_does():
    """On the tiny pair, once each: the alpha drag's handler, the Sandbox's, Compare's four rows (run to "Done", not
    refused), the Trade-off's frontier with and without shared prefixes, and the Strategies' lanes."""
    from app.pairs import PairCache
    from bench import app_bench, tabs_bench

    assert all(0 < median for median, _ in app_bench.bench_recolour(1).values())
    assert tabs_bench.bench_sandbox_server(1)[0] > 0
    pairs = PairCache()
    pairs.get("tiny")
    first, total = tabs_bench.bench_compare(pairs, "tiny", 1)
    assert 0 < first < total
    frontier = tabs_bench.bench_frontier(pairs, "tiny", 4)
    assert frontier[True][1] == frontier[False][1] > 0 and frontier[True][3] <= frontier[False][3]
    assert {"speculative decoding", "speculative cascade"} <= set(tabs_bench.bench_strategies(pairs, "tiny", "head", 1))


def test_the_bench_imports_neither_the_tests_nor_distill_and_edits_no_path():
    """Imports run one way: tests and distill may import the harness, the benchmarks import neither, and each runs as
    ``python -m bench.NAME`` with no sys.path edit."""
    from test_structure import imports

    for path in (ROOT / "bench").glob("*.py"):
        assert not {m for m in imports(path) if m.split(".")[0] in ("tests", "distill")}, path.name
        assert "sys.path" not in path.read_text(), path.name
