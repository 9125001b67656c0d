"""What every benchmark shares: the prompts (assets/prompts/), the runner that alternates methods, the clock and the
memory gauge, the command line, the markdown sections the living docs are made of, and the explorer served in a
process of its own and driven in Debian's chromium. Tests and distill may import it; it imports neither."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from cascade_core import generate, load_pair
from cascade_core.method.costs import priced_speedup, with_target_alone
from cascade_core.speed.kernels import cpu_description
from cascade_core.speed.prices import block_prices, call_seconds
from cascade_core.tools.cli import add_pair_arguments

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ROOT / "assets" / "prompts"
BENCHMARKS, APP_BENCHMARKS = ROOT / "docs" / "benchmarks.md", ROOT / "docs" / "app-benchmarks.md"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 1000}


# -- Prompts: one file each, never trained on (tests/test_distill.py checks) ---------------------------------------

def prompts(name):
    """A named set of assets/prompts/bench.json: a list, or for the page's benchmarks {use: prompt}."""
    return json.loads((PROMPTS / "bench.json").read_text(encoding="utf-8"))[name]


def prompt_kinds():
    """{kind: prompts} of assets/prompts/kinds.json: every kind the page offers and users type."""
    return json.loads((PROMPTS / "kinds.json").read_text(encoding="utf-8"))


def every_prompt():
    """Every prompt a benchmark measures on, for the check that distillation never trains on one."""
    sets = list(json.loads((PROMPTS / "bench.json").read_text(encoding="utf-8")).values())
    return {p for s in sets + list(prompt_kinds().values()) for p in (s.values() if isinstance(s, dict) else s)}


# -- The command line ------------------------------------------------------------------------------------------------

def bench_arguments(doc, pair="bundled"):
    """A benchmark's command line: its docstring as help, and --pair."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default=pair)
    return parser


def speed_arguments(doc, max_new_tokens, rounds=True, out=BENCHMARKS):
    """A speed benchmark's command line: the pair as the CLI names it, --rounds, --max-new-tokens and --out."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pair_arguments(parser)
    if rounds:
        parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--out", default=str(out), help="markdown file to update ('' to skip)")
    return parser


def named_pair(args, **options):
    """The pair speed_arguments' command line names: --pair, or --target (with --draft), in --precision unless
    ``options`` say otherwise (load_pair's keywords)."""
    options = {"draft": args.draft, "precision": args.precision, **options}
    return load_pair(**(dict(target=args.target) if args.target else dict(name=args.pair)), **options)


# -- Runs side by side ------------------------------------------------------------------------------------------------

def alternate(methods, cases, rounds, run, say=print):
    """{(case, method): [run(case, method, round), ...]} over rounds x cases, every method on every case, their order
    turned by one at each case so that none always runs first: a machine that speeds up or slows down, or a cache
    one run leaves warm, falls on each method in turn. The speed-ups compared are ratios of runs taken this way."""
    methods, results, turn = list(methods), {}, 0
    for r in range(rounds):
        for case in cases:
            k, turn = turn % len(methods), turn + 1
            for method in methods[k:] + methods[:k]:
                results.setdefault((case, method), []).append(run(case, method, r))
        say(f"round {r + 1}/{rounds} done")
    return results


def by_method(results, methods):
    """alternate's results regrouped, in the order of ``methods``: {method: its runs' values, case after case}."""
    out = {method: [] for method in methods}
    for (_, method), runs in results.items():
        out[method] += runs
    return out


def decode(pair, prompt, **settings):
    """(tokens/s, trace) of one engine run, its GPU work included in the time."""
    seconds, trace = timed(lambda: generate(pair, prompt, **settings))
    return len(trace.tokens) / seconds, trace


def projected(pair, trace):
    """The cost model's speed-up for one run: its acceptance at each gamma its blocks used, priced with the pair's
    measured calls and the run's own engine time per block (costs.priced_speedup), the tokens gamma "auto"'s floor
    had the target sample alone at the target's price (costs.with_target_alone). 1 where every token was the
    target's own."""
    s = trace.stats
    if s["acceptance_rate"] is None:
        return 1.0
    price = block_prices(pair, s["overhead_seconds_per_block"] or 0.0)
    drafted = statistics.mean(priced_speedup(s["acceptance_rate"], g, *price(g))
                              for g in trace.counters.get("gammas") or [trace.gamma])
    return with_target_alone(drafted, s["target_alone_share"])


def acceptance_by_step(traces, depth=None):
    """The mean acceptance probability of the proposals at each step of their block (0: the block's first), over
    ``depth`` steps (None where no proposal reached a step) or as many as any block reached."""
    by = {}
    for trace in traces:
        step, block = 0, None
        for pos in trace.positions:
            step = step + 1 if pos["block"] == block else 0
            block = pos["block"]
            if pos.get("accept_prob") is not None:
                by.setdefault(step, []).append(pos["accept_prob"])
    steps = range(depth) if depth else sorted(by)
    return [statistics.mean(by[k]) if by.get(k) else None for k in steps]


def known_median(values):
    """The median of the values that are known (not None), or None where none is: a run whose every token was the
    target's own (gamma "auto"'s floor) has no acceptance and no engine time per block."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def shown_number(value, form="{:.2f}"):
    """A table cell: the value formatted, or "-" where it is not known."""
    return "-" if value is None else form.format(value)


# -- The clock and the memory gauge ------------------------------------------------------------------------------------

def timed(fn):
    """(wall seconds, fn's value), GPU work included: CUDA calls return once queued, so wait for the queue on both
    sides."""
    _sync()
    start = time.perf_counter()
    value = fn()
    _sync()
    return time.perf_counter() - start, value


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def milliseconds(fn, repeats):
    """(median, worst) milliseconds of ``repeats`` calls of fn."""
    times = [1000 * timed(fn)[0] for _ in range(repeats)]
    return statistics.median(times), max(times)


def forward_ms(model, vocab, n_tokens=1, repeats=9, compiled=None):
    """Median milliseconds of one cached forward over n_tokens new tokens, as the engine calls it (the engine's
    own price measurement, prices.call_seconds)."""
    return 1000 * call_seconds(model, vocab, n_tokens, repeats, compiled)


class PeakRSS:
    """Peak resident memory above the starting level while the block runs (a sampling thread; on CUDA the
    allocator's own peak)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    @staticmethod
    def _rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        self.start = self.peak = self._rss()
        self.running = True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self

    def _poll(self):
        while self.running:
            self.peak = max(self.peak, self._rss())
            time.sleep(0.01)

    def __exit__(self, *exc):
        if self.cuda:
            self.peak = torch.cuda.max_memory_allocated()
        else:
            self.running = False
            self.thread.join()
        self.mb = (self.peak - self.start) / 2**20


def read_bandwidth(device, gib=1.0, repeats=5):
    """Measured read bandwidth in bytes/s of the memory the weights live in (host RAM or the GPU's), over a buffer
    far larger than the caches, two ways: 'stream', the best of a vectorised sum (what the memory can deliver), and
    'gemv', the best of a matrix-vector product (what the BLAS reaches on the operation decoding is made of)."""
    x = torch.ones(int(gib * 2**30 / 4), device=device)
    w, v = x.view(-1, 1024), torch.ones(1024, device=device)
    return {name: x.numel() * 4 / min(timed(fn)[0] for _ in range(repeats))
            for name, fn in (("stream", lambda: x.sum()), ("gemv", lambda: w.mv(v)))}


def weight_bytes(model):
    """Bytes of weights read per decoded token: every parameter once (a tied head counts once), and the buffers (a
    layer converted to another precision keeps its weights there: cascade_core/formats/precision.py). The input
    embedding counts only where it is the head too: a token reads one row of it, and a converted head is a copy of its
    own."""
    embedding = model.get_input_embeddings().weight
    read_whole = getattr(model.get_output_embeddings(), "weight", None) is embedding
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]
               if read_whole or t is not embedding)


# -- Sections of the living docs ---------------------------------------------------------------------------------------

def machine(device=None):
    """The device a section was measured on: the GPU's name, or the CPU with its vector units."""
    return torch.cuda.get_device_name() if device is not None and device.type == "cuda" else cpu_description()


def stamp():
    """When and with what a section was measured: the date, torch's threads and torch's version."""
    return f"{time.strftime('%Y-%m-%d')}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def write_section(path, text, key):
    """Replace the section whose title starts with key where it stands (or add it at the end), keeping the others:
    a benchmark run again rewrites its own table and nothing else."""
    path = Path(path)
    old = path.read_text() if path.exists() else "# Benchmarks\n\n"
    head, *sections = old.split("\n## ")
    mine = [i for i, sec in enumerate(sections) if ("## " + sec).startswith(key)]
    place = mine[0] if mine else len(sections)
    kept = [sec for i, sec in enumerate(sections) if i not in mine]
    kept.insert(place, text[3:])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n## ".join([head.rstrip("\n") + "\n"] + kept))


# -- The explorer in a process of its own, and chromium --------------------------------------------------------------

def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def app_process(pair, *args):
    """(URL, pid) of ``python app.py --pair <pair>`` on a free loopback port, as users run it, once it answers;
    stopped afterwards."""
    import httpx

    port = free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--pair", pair, *args, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise SystemExit(f"app.py --pair {pair} did not start within 5 minutes")
        yield url, server.pid
    finally:
        server.kill()
        server.wait()


@contextmanager
def chromium():
    """Debian's headless chromium, driven by Playwright (a page: ``browser.new_page(viewport=VIEWPORT)``); closed
    afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def set_number(page, selector, value):
    """Type a number into the control ``selector`` (a slider's box, a number field) and press Enter, as a reader
    does."""
    page.fill(f"{selector} input[type=number]", str(value))
    page.press(f"{selector} input[type=number]", "Enter")


def set_alpha(page, value, event):
    """Move the alpha slider's range input as a drag does ('input'), or let go of it ('pointerup')."""
    page.eval_on_selector("#alpha input[type=range]", """(el, [value, event]) => {
        el.value = value; el.dispatchEvent(new Event('input', {bubbles: true}));
        if (event === 'pointerup') el.dispatchEvent(new PointerEvent('pointerup', {bubbles: true}));
    }""", [str(value), event])
