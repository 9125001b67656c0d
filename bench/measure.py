"""What the engine benchmarks measure besides tokens/s: peak memory, the memory's read bandwidth, weight bytes, and
the time of one cached forward as the engine calls it."""
import argparse
import os
import statistics
import threading
import time

import torch

from cascade_core import load_pair
from cascade_core.cli import add_pair_arguments
from cascade_core.prices import call_seconds


def known_median(values):
    """The median of the values that are known (not None), or None where none is: a run whose every token was the
    target's own (gamma "auto"'s floor) has no acceptance and no engine time per block."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def shown_number(value, form="{:.2f}"):
    """A table cell: the value formatted, or "-" where it is not known."""
    return "-" if value is None else form.format(value)


def bench_arguments(doc, pair="bundled"):
    """A benchmark's command line: its docstring as help, and --pair."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default=pair)
    return parser


def speed_arguments(doc, max_new_tokens, rounds=True):
    """A speed benchmark's command line: the pair as the CLI names it, --rounds, --max-new-tokens and --out."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pair_arguments(parser)
    if rounds:
        parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--out", default="docs/benchmarks.md", help="markdown file to update ('' to skip)")
    return parser


def named_pair(args, **options):
    """The pair speed_arguments' command line names: --pair, or --target (with --draft), in --precision unless
    ``options`` say otherwise (load_pair's keywords)."""
    options = {"draft": args.draft, "precision": args.precision, **options}
    return load_pair(**(dict(target=args.target) if args.target else dict(name=args.pair)), **options)


class PeakRSS:
    """Peak resident memory above the starting level while the block runs (a sampling thread; on CUDA
    the allocator's own peak)."""

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
    """Measured read bandwidth in bytes/s of the memory the weights live in (host RAM or the GPU's), over a
    buffer far larger than the caches, two ways: 'stream', the best of a vectorised sum (what the memory can
    deliver), and 'gemv', the best of a matrix-vector product (what the BLAS reaches on the operation
    decoding is made of)."""
    x = torch.ones(int(gib * 2**30 / 4), device=device)
    w, v = x.view(-1, 1024), torch.ones(1024, device=device)
    return {name: x.numel() * 4 / min(timed(fn) for _ in range(repeats))
            for name, fn in (("stream", lambda: x.sum()), ("gemv", lambda: w.mv(v)))}


def timed(fn):
    """Wall seconds of fn, GPU work included: CUDA calls return once queued, so wait for the queue on both sides."""
    _sync()
    start = time.perf_counter()
    fn()
    _sync()
    return time.perf_counter() - start


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def weight_bytes(model):
    """Bytes of weights read per decoded token: every parameter once (a tied head counts once), and the buffers (a
    layer converted to another precision keeps its weights there: cascade_core/precision.py). The input embedding
    counts only where it is the head too: a token reads one row of it, and a converted head is a copy of its own."""
    embedding = model.get_input_embeddings().weight
    read_whole = getattr(model.get_output_embeddings(), "weight", None) is embedding
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]
               if read_whole or t is not embedding)


def forward_ms(model, vocab, n_tokens=1, repeats=9, compiled=None):
    """Median milliseconds of one cached forward over n_tokens new tokens, as the engine calls it (the engine's
    own price measurement, prices.call_seconds)."""
    return 1000 * call_seconds(model, vocab, n_tokens, repeats, compiled)
