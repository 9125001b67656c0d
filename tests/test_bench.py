"""The benchmark runs end to end (tiny pair, few tokens) and writes its markdown section."""
import subprocess
import sys
from pathlib import Path

from bench.markdown import write_section


def test_bench_smoke(tmp_path):
    out = tmp_path / "bench.md"
    r = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "bench" / "engine_bench.py"), "--pair", "tiny",
                        "--runs", "2", "--max-new-tokens", "6", "--no-compile", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "## Engine benchmark on cpu: tiny pair" in text
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


def test_short_calls_profile_reads_py_spys_samples_by_thread(tmp_path):
    """py-spy's collapsed stacks (thread;frame;...;frame count) read as each thread's share of the wall time, the
    innermost of this repository's frames and the leaf frames; AnyIO's workers pooled, line numbers dropped."""
    from bench.short_calls_profile import RATE, thread_shares

    raw = tmp_path / "server.txt"
    raw.write_text("\n".join([
        "thread (1): MainThread;main (app.py:77);step (cascade_core/batch.py:110);forward (cascade_core/cached.py:39);"
        "Linear.forward (torch/nn/modules/linear.py:125) 60",
        "thread (1): MainThread;main (app.py:77);step (cascade_core/batch.py:120);"
        "untempered_and_tempered (cascade_core/sampling.py:87) 20",
        "thread (2): Thread-1 (run);Server.run (uvicorn/server.py:69);EpollSelector.select (selectors.py:468) 30",
        "thread (3): AnyIO worker thread;api_run (app/explore.py:272);dumps (cascade_core/strict_json.py:20) 5",
        "thread (4): AnyIO worker thread;WorkerThread.run (anyio/_backends/_asyncio.py:1113);"
        "Condition.wait (threading.py:327) 5"]) + "\n")
    shares = thread_shares(raw, seconds=100 / RATE)
    assert list(shares) == ["MainThread", "Thread-1 (run)", "AnyIO workers"]
    running, ours, leaves = shares["MainThread"]
    assert running == 0.8
    assert ours == [("forward (cascade_core/cached.py)", 0.6),
                    ("untempered_and_tempered (cascade_core/sampling.py)", 0.2)]
    assert leaves == [("Linear.forward (linear.py)", 0.6), ("untempered_and_tempered (sampling.py)", 0.2)]
    assert shares["Thread-1 (run)"] == (0.3, [], [("EpollSelector.select (selectors.py)", 0.3)])
    assert shares["AnyIO workers"][0] == 0.1
    assert shares["AnyIO workers"][1] == [("dumps (cascade_core/strict_json.py)", 0.05)]


def test_the_engine_benchmark_names_the_measured_routes():
    """The routes other than F.linear over the count itself, in row order; a pair without measured kernels: none."""
    import types
    from bench.engine_bench import kernel_routes
    pair = types.SimpleNamespace(kernels={"routes": {3: ("thin", 3), 1: ("thin", 2), 2: ("linear", 2)}})
    assert kernel_routes(pair) == "1 thin over 2, 3 thin"
    assert kernel_routes(types.SimpleNamespace(kernels=None)) == "none"


def test_headroom_prices_each_term_apart(tmp_path):
    """The headroom table writes its section, and each term moves the projection the way the cost model says: less
    engine time or a cheaper draft call never slows it, more acceptance speeds it up."""
    from bench.headroom import grid, main
    out = tmp_path / "bench.md"
    text = main(["--pair", "tiny", "--max-new-tokens", "4", "--out", str(out)])
    assert out.read_text().startswith("# Benchmarks") and "## What holds the default's speed-up back: tiny pair" in text
    from cascade_core import load_pair
    pair = load_pair("tiny")
    rows, columns, cells = grid(pair, 0.3, 2e-3)
    speed = {key: s for key, (s, _) in cells.items()}
    measured, faster, free, cheaper_draft = (c for c, _, _ in columns)
    for r, _ in rows:
        assert speed[r, faster] > speed[r, measured] and speed[r, free] > speed[r, faster]
        assert speed[r, cheaper_draft] > speed[r, measured]
    assert [speed[r, measured] for r, _ in rows] == sorted(speed[r, measured] for r, _ in rows)
    assert len(rows) == 5  # 0.3 as measured, then 0.55 .. 0.70


def test_short_calls_floor_engine_share_shares_one_batch_and_decodes_each_run_as_alone():
    """The floor benchmark's engine share (the runs in one RunningBatches, advanced in turn as the engine thread
    advances its callers) takes every block beside the other runs and gives each its solo tokens and sources."""
    from bench.short_calls_floor import engine_share, run_args
    from cascade_core import generate, load_pair
    from cascade_core.running import OTHER_ROWS

    pair = load_pair("tiny", progress=lambda m: None)
    seconds, traces = engine_share(pair, 3)
    assert seconds > 0
    for i, trace in enumerate(traces):
        prompt, args = run_args(i)
        solo = generate(pair, prompt, **args)
        assert (trace.tokens, trace.sources) == (solo.tokens, solo.sources)
        assert trace.counters[OTHER_ROWS] == 2 and OTHER_ROWS not in solo.counters


def test_short_calls_floor_models_share_clocks_every_forward_inside_the_runs_wall_time():
    """--models-share: the seconds in the models' forwards are clocked per forward (a model that sleeps 20 ms a
    call reads 20 ms a call) and, for one run and the fourteen, lie inside the runs' wall time."""
    import re
    import time

    import torch
    from bench.short_calls_floor import CALLS, ForwardClock, models_share

    class Sleeper(torch.nn.Module):
        def forward(self, x):
            time.sleep(0.02)
            return x

    sleeper = Sleeper()
    clock = ForwardClock([sleeper])
    for _ in range(3):
        sleeper(torch.zeros(1))
    assert 0.06 <= clock.seconds < 0.1
    text = models_share("tiny", 1)
    for label in ("one alone", f"{CALLS} together"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
        wall, target, draft, models, rest = (float(x) for x in re.findall(r"([0-9.]+) s\b", row))
        assert 0 < target and 0 < draft and abs(target + draft - models) < 2e-3 and models < wall
        assert abs(wall - models - rest) < 2e-3


def test_speedup_bench_reads_runs_whose_every_token_is_the_targets_own(tmp_path):
    """At 4 tokens on the tiny pair gamma "auto"'s floor has the target sample every token of some runs (on this
    project's machines; it depends on the measured prices): such a run has no acceptance and no engine time per
    block, and the benchmark reports it ("-") instead of failing."""
    from bench import speedup_bench

    out = tmp_path / "bench.md"
    summary = speedup_bench.main(["--pair", "tiny", "--rounds", "1", "--max-new-tokens", "4", "--out", str(out)])
    assert "## Speed-up over target-only at the app's settings: tiny pair" in out.read_text()
    assert len(summary["rows"]) == len(speedup_bench.METHODS)  # one row per method, the floor's runs among them
