"""All of the app's model work on one long-lived thread, with one core left to the server.

torch's CPU thread pool (OpenMP) belongs to the thread that calls it, and Gradio runs each handler on whichever
worker thread is free: advancing every generation on one thread keeps one pool. And an OpenMP team as wide as
the machine stalls at every barrier whenever the server's own threads (its event loop, streaming, JSON,
figures) take one of its cores: measured on a 2-core machine, the /run API took 1.8x the engine's in-process
time with two engine threads and 1.14x with one (docs/app-benchmarks.md). Decoding is memory-bound, so the
engine loses little with one core fewer, and the server gets one.
"""
import os
from concurrent.futures import ThreadPoolExecutor

import torch


def engine_threads():
    """Every core this process may use but one, which the server keeps."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


class EngineThread:
    def __init__(self):
        self._pool, self._pid = None, None

    def _executor(self):
        if self._pid != os.getpid():  # a forked worker (a ZeroGPU Space) starts its own thread
            torch.set_num_threads(engine_threads())
            self._pool, self._pid = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine"), os.getpid()
        return self._pool

    def iterate(self, generator):
        """The generator's values, each step computed on the engine thread; returns what the generator returns.
        Steps of generators iterated at the same time queue on the one thread in turn: concurrent runs take turns
        block by block, so a long one delays a short one by one block per step, not by its whole length."""
        try:
            while True:
                finished, value = self._executor().submit(advance, generator).result()
                if finished:
                    return value
                yield value
        finally:  # a handler stopped early (Stop, a client gone): close the generation on its own thread too
            self._executor().submit(generator.close).result()

    def call(self, fn, *args, **kwargs):
        return self.submit(fn, *args, **kwargs).result()

    def submit(self, fn, *args, **kwargs):
        """fn's future, run on the engine thread."""
        return self._executor().submit(fn, *args, **kwargs)


def advance(generator):
    """(False, its next value) or (True, what it returned)."""
    try:
        return False, next(generator)
    except StopIteration as end:
        return True, end.value


ENGINE = EngineThread()
