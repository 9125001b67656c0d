"""What fourteen short /run calls sent together cost with nothing else in their way, each share apart: Gradio's
(a stand-in app launched as ``python app.py`` launches the explorer, whose /run does no engine work and answers a
real 16-token trace), the engine's (the fourteen decoding in one RunningBatches in this process, all joining at the
first block: a server's best case) and the explorer's own server, which does both; and, as an experiment, the
stand-in handing each call to an engine in a process of its own (what taking the engine out of the server's
process would buy).

    HF_HUB_OFFLINE=1 python bench/short_calls_floor.py [--bursts 7]
    HF_HUB_OFFLINE=1 python bench/short_calls_floor.py --models-share --pair bundled [--bursts 3]

``--models-share``: the fourteen's and one call's time in the models' forwards alone, in this process: what no
server can take off the fourteen's p50 on this machine (where a 14-row forward costs several 1-row ones, as on 2
CPU cores with the bundled pair, the forwards alone come near 3x one call's whole time).

Why: issue 47 asks the fourteen's p50 within 3x of one call alone. The server's event loop and its engine thread
share one interpreter lock, and the tiny pair's forwards are Python and dispatch, so on 2 cores the two shares
add up: their sum over one call alone is about the least the explorer's server can reach. The calls are
load_test.py's short ones (plain HTTP callers, each connected before the clock starts). The report goes to
docs/app-benchmarks.md.
"""
import argparse
import itertools
import json
import multiprocessing
import os
import queue
import statistics
import tempfile
import threading
import sys
import time
from concurrent.futures import Future
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bench.load_test import callers, request, sent_together  # noqa: E402
from bench.markdown import write_section  # noqa: E402
from bench.measure import timed  # noqa: E402
from bench.server import served  # noqa: E402
from cascade_core import load_pair  # noqa: E402
from cascade_core.engine import generate, stream  # noqa: E402
from cascade_core.kernels import cpu_description  # noqa: E402
from cascade_core.running import RunningBatches  # noqa: E402
from cascade_core.settings import MAX_BATCH_ROWS  # noqa: E402

CALLS, TOKENS = 14, 16


def run_args(i):
    """load_test's i-th short call as cascade_core's keywords."""
    args = request(i, TOKENS)
    return args.pop("prompt"), args


def trace_text(trace):
    """A trace as /run's last message carries it."""
    from app.streaming import dumps
    return dumps(trace.to_dict())


def serve_run(port, answer):
    """Serve a /run of the explorer's signature, queue, slots and launch settings whose answer is
    ``answer(prompt, the run's keywords)``."""
    import gradio as gr

    from app.api_calls import accept_raw_calls
    from app.layout import API, launch

    def run(prompt: str, rule: str = "v3", alpha: float = 0.3, gamma: int | str = "auto", temperature: float = 1.0,
            max_new_tokens: int = TOKENS, seed: int = 0, draft: str = "", reproducible: bool = False) -> str:
        yield answer(prompt, dict(rule=rule, alpha=alpha, gamma=gamma, temperature=temperature,
                                  max_new_tokens=max_new_tokens, seed=seed))

    with gr.Blocks() as demo:
        gr.api(run, api_name="run", **API)
    accept_raw_calls(demo)
    launch(demo, port=port, quiet=True)


def stand_in(port):
    """Serve the stand-in: a 16-token trace of the tiny pair (computed once, before serving) for every call, without
    running the engine."""
    prompt, args = run_args(0)
    text = trace_text(generate(load_pair("tiny"), prompt, **args))
    serve_run(port, lambda prompt, settings: text)


def engine_process(port):
    """An experiment, not the explorer: the stand-in's /run hands each call to an engine in a process of its own
    (``engine_loop``), so that Gradio's event loop and the engine no longer take turns on one interpreter lock."""
    context = multiprocessing.get_context("spawn")
    requests, results = context.Queue(), context.Queue()
    context.Process(target=engine_loop, args=(requests, results), daemon=True).start()
    results.get()  # the engine has its pair
    waiting, keys = {}, itertools.count()

    def dispatch():
        while True:
            key, text = results.get()
            waiting.pop(key).set_result(text)
    threading.Thread(target=dispatch, daemon=True).start()

    def answer(prompt, settings):
        key, future = next(keys), Future()
        waiting[key] = future
        requests.put((key, prompt, settings))
        return future.result()
    serve_run(port, answer)


def engine_loop(requests, results):
    """The tiny pair's runs in one RunningBatches, advanced in turn, with one torch thread (the other core is
    Gradio's; one measured faster than two here); a finished run's trace goes back as /run's text."""
    torch.set_num_threads(1)
    pair, batches, live = load_pair("tiny", progress=lambda m: None), RunningBatches(), {}
    results.put((None, None))
    while True:
        for key, prompt, settings in arrivals(requests, wait=not live):
            live[key] = stream(pair, prompt, batches=batches, **settings)
        for key, trace in step_each(live).items():
            results.put((key, trace_text(trace)))


def arrivals(requests, wait):
    """The requests in the queue now (waiting for one where ``wait``)."""
    got = [requests.get()] if wait else []
    while True:
        try:
            got.append(requests.get_nowait())
        except queue.Empty:
            return got


def timed_explorer(port):
    """Serve the explorer (``python app.py --pair tiny``) with the engine thread's steps clocked: each step's start
    and end (wall clock) appended to the file named by SHORT_CALLS_LOG, a JSON list a line."""
    import runpy

    import app.worker

    log, advance = open(os.environ["SHORT_CALLS_LOG"], "a", buffering=1), app.worker.advance

    def clocked(generator):
        start = time.time()
        try:
            return advance(generator)
        finally:
            log.write(json.dumps([start, time.time()]) + "\n")
    app.worker.advance = clocked  # EngineThread.iterate submits the module's advance for every step
    runpy.run_path(str(ROOT / "app.py"))["main"](["--pair", "tiny", "--port", str(port)])


def over_http(url, bursts):
    """(one call alone: median seconds, the fourteen sent together: the median of the bursts' p50s, each burst's
    (start, end) on the wall clock)."""
    calls = callers(url, "plain", CALLS)
    sent_together(calls, TOKENS)  # warm: the first calls pay for imports and caches
    alone = statistics.median(calls[0](request(0, TOKENS)) for _ in range(bursts))
    p50s, spans = [], []
    for _ in range(bursts):
        start = time.time()
        p50s.append(statistics.median(sent_together(calls, TOKENS)))
        spans.append((start, time.time()))
    return alone, statistics.median(p50s), spans


def engine_busy(log, spans):
    """The median over bursts of the seconds the engine thread spent in its steps during each burst."""
    steps = [json.loads(line) for line in Path(log).read_text().splitlines()]
    return statistics.median(sum(end - start for start, end in steps if t0 <= start <= t1) for t0, t1 in spans)


def engine_share(pair, n):
    """(seconds, traces) of n short runs decoding in one RunningBatches, advanced in turn as the engine thread
    advances its callers."""
    ended = decoded_together(pair, n)
    return max(seconds for _, seconds in ended), [trace for trace, _ in ended]


def decoded_together(pair, n, width=MAX_BATCH_ROWS):
    """Per run, in order, (its trace, its seconds to its end) of n short runs decoding in one RunningBatches at most
    ``width`` rows wide (the others wait inside it for room)."""
    batches, start, ended = RunningBatches(width=width), time.perf_counter(), {}
    live = {i: short_run(pair, i, batches) for i in range(n)}
    while live:
        finished = step_each(live)
        ended.update({i: (trace, time.perf_counter() - start) for i, trace in finished.items()})
    return [ended[i] for i in range(n)]


def step_each(live):
    """Advance every generator of ``live`` ({key: generator}) once, in turn, as the engine thread advances its
    callers; the finished ones leave it: {key: what it returned}."""
    finished = {}
    for key, steps in list(live.items()):
        try:
            next(steps)
        except StopIteration as end:
            finished[key] = end.value
            del live[key]
    return finished


def short_run(pair, i, batches):
    prompt, args = run_args(i)
    return stream(pair, prompt, batches=batches, **args)


def in_process(bursts):
    """(one run alone, the fourteen together): medians of seconds."""
    pair = load_pair("tiny", progress=lambda m: None)
    engine_share(pair, CALLS)  # warm
    alone = statistics.median(engine_share(pair, 1)[0] for _ in range(bursts))
    return alone, statistics.median(engine_share(pair, CALLS)[0] for _ in range(bursts))


class ForwardClock:
    """Seconds inside the forwards of the given models (each call timed by a pre- and a post-hook)."""

    def __init__(self, models):
        self.seconds, self.started = 0.0, None
        for model in models:
            model.register_forward_pre_hook(lambda *_: setattr(self, "started", time.perf_counter()))
            model.register_forward_hook(lambda *_: self.stop())

    def stop(self):
        self.seconds += time.perf_counter() - self.started


def timed_share(pair, n, clocks):
    """(wall seconds, {role: seconds in its forwards}) of n short runs decoding together (``engine_share``)."""
    before = {role: clock.seconds for role, clock in clocks.items()}
    wall, _ = engine_share(pair, n)
    return wall, {role: clock.seconds - before[role] for role, clock in clocks.items()}


def widths_line(pair, one, widths=(MAX_BATCH_ROWS, 8, 5)):
    """How the fourteen's p50 and mean move with the batch's width: fewer rows at once finish some calls sooner
    where a forward's cost grows with its rows."""
    cells = []
    for width in widths:
        times = sorted(seconds for _, seconds in decoded_together(pair, CALLS, width))
        p50, mean = statistics.median(times), statistics.mean(times)
        cells.append(f"{width}: p50 {p50:.3f} s ({p50 / one:.1f}x), mean {mean:.3f} s, last {times[-1]:.3f} s")
    return (f"The {CALLS} with the batch at most so many rows wide (the rest wait inside it for room; "
            f"{MAX_BATCH_ROWS} is the server's): " + "; ".join(cells) + ".")


def block_forward(model, rows, tokens=5, repeats=5):
    """The fastest of ``repeats`` forwards of ``rows`` rows of ``tokens`` ids each (a gamma-4 block's verification
    per row), without a cache: what a block's target call costs by its rows."""
    ids = torch.randint(0, model.config.vocab_size, (rows, tokens))
    with torch.inference_mode():
        model(ids)
        return min(timed(lambda: model(ids)) for _ in range(repeats))


def models_share(pair_name, bursts):
    """The section for ``--models-share``: one run alone and the fourteen, each with the seconds their models'
    forwards took (medians of ``bursts``; the burst of median wall time's split)."""
    pair = load_pair(pair_name, progress=lambda m: None)
    clocks = {"target": ForwardClock([pair.target]), "draft": ForwardClock([pair.draft])}
    engine_share(pair, CALLS)  # warm
    one, many = ([timed_share(pair, n, clocks) for _ in range(bursts)] for n in (1, CALLS))
    one, many = (sorted(runs, key=lambda run: run[0])[len(runs) // 2] for runs in (one, many))
    single, rows = block_forward(pair.target, 1), block_forward(pair.target, CALLS)

    def cells(run):
        wall, seconds = run
        models = seconds["target"] + seconds["draft"]
        return (f"{wall:.3f} s ({wall / one[0]:.1f}x) | {seconds['target']:.3f} s ({seconds['target'] / one[0]:.1f}x)"
                f" | {seconds['draft']:.3f} s | {models:.3f} s ({models / one[0]:.1f}x) | {wall - models:.3f} s")
    return "\n".join([
        f"## Short calls: the models' own share ({pair_name} pair)", "",
        f"`python bench/short_calls_floor.py --models-share --pair {pair_name} --bursts {bursts}`, "
        f"{time.strftime('%Y-%m-%d')}, {cpu_description()}, {torch.get_num_threads()} torch threads: load_test's short "
        f"calls (v3 alpha 0.3, gamma 4, T 1, {TOKENS} tokens) decoding in one RunningBatches in this process, all "
        f"joining at the first block; every forward of the target and the draft clocked; the burst of median wall "
        f"time of {bursts}. Ratios are to one run alone's wall time.", "",
        "| runs | wall | the target's forwards | the draft's forwards | both models | the rest (engine) |",
        "|---|---|---|---|---|---|",
        f"| one alone | {cells(one)} |", f"| {CALLS} together | {cells(many)} |", "",
        f"One target forward over a block's 5 tokens: {1000 * single:.1f} ms for one row, {1000 * rows:.1f} ms for "
        f"{CALLS} rows ({rows / single:.1f}x). " + widths_line(pair, one[0]), ""])


def report(bursts):
    gradio = over_http_of(["bench/short_calls_floor.py", "--stand-in"], bursts)
    engine = in_process(bursts)
    with tempfile.TemporaryDirectory() as folder:
        os.environ["SHORT_CALLS_LOG"] = log = str(Path(folder) / "steps.jsonl")
        with served(["bench/short_calls_floor.py", "--timed-explorer"]) as (url, _):
            one, fourteen, spans = over_http(url, bursts)
        busy = engine_busy(log, spans)
    apart = over_http_of(["bench/short_calls_floor.py", "--engine-process"], bursts)
    ratio = lambda seconds: f"{seconds / one:.1f}x"  # noqa: E731
    return "\n".join([
        "## Short calls: each share of the fourteen apart", "",
        f"`python bench/short_calls_floor.py --bursts {bursts}`, {time.strftime('%Y-%m-%d')}, {cpu_description()}: "
        f"{CALLS} /run calls of {TOKENS} tokens sent together (load_test's short calls: v3 alpha 0.3, gamma 4, T 1, "
        "tiny pair; plain HTTP callers connected before the clock starts), medians of "
        f"{bursts} bursts' p50s; one call alone the median of {bursts}. Ratios are to one call alone on the "
        "explorer's own server.", "",
        "| what runs | one call alone | the fourteen together: p50 |", "|---|---|---|",
        f"| Gradio only: a stand-in app served as the explorer is (same queue, slots, launch), its /run answering "
        f"a 16-token trace without the engine | {gradio[0]:.3f} s | {gradio[1]:.3f} s ({ratio(gradio[1])}) |",
        f"| the engine only: the runs in one RunningBatches in this process, all joining at the first block "
        f"| {engine[0]:.3f} s | {engine[1]:.3f} s ({ratio(engine[1])}) |",
        f"| the two shares added | {gradio[0] + engine[0]:.3f} s | {gradio[1] + engine[1]:.3f} s "
        f"({ratio(gradio[1] + engine[1])}) |",
        f"| the explorer's server (`python app.py --pair tiny`, its engine thread's steps clocked) | {one:.3f} s | "
        f"{fourteen:.3f} s ({ratio(fourteen)}) |",
        f"| an experiment, not the explorer: the stand-in handing each call to an engine in a process of its own "
        f"(one torch thread; no streaming, no Stop) | {apart[0]:.3f} s | {apart[1]:.3f} s ({ratio(apart[1])}; "
        f"{apart[1] / apart[0]:.1f}x its own one call) |", "",
        f"3x one call alone is {3 * one:.3f} s. The first two rows are each share with the other absent; the "
        "explorer's server has both in one process, where the event loop and the engine thread share one "
        "interpreter lock: there the "
        f"engine thread spent {busy:.3f} s in the fourteen's steps (median over bursts), against {engine[1]:.3f} s "
        "for the same runs in this process.", ""])


def over_http_of(script, bursts):
    with served(script) as (url, _):
        return over_http(url, bursts)[:2]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bursts", type=int, default=7)
    parser.add_argument("--stand-in", action="store_true", help="serve the stand-in app (what the benchmark runs)")
    parser.add_argument("--timed-explorer", action="store_true",
                        help="serve the explorer with its engine's steps clocked (what the benchmark runs)")
    parser.add_argument("--engine-process", action="store_true",
                        help="serve the stand-in with an engine process (what the benchmark runs)")
    parser.add_argument("--models-share", action="store_true",
                        help="only the models' forwards' share of one run and of the fourteen, in this process")
    parser.add_argument("--pair", default="tiny", help="--models-share's pair")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--out", default=str(ROOT / "docs" / "app-benchmarks.md"))
    args = parser.parse_args()
    if args.stand_in:
        return stand_in(args.port)
    if args.timed_explorer:
        return timed_explorer(args.port)
    if args.engine_process:
        return engine_process(args.port)
    if args.models_share:
        text = models_share(args.pair, args.bursts)
        key = f"## Short calls: the models' own share ({args.pair} pair)"
    else:
        text, key = report(args.bursts), "## Short calls: each share of the fourteen apart"
    print(text)
    write_section(args.out, text, key)


if __name__ == "__main__":
    main()
