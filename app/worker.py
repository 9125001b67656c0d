"""All of the app's model work on one long-lived thread (``python app.py``'s main thread, once the server runs),
with every core; every generation on it decodes in the running batch of its pair and size, which concurrent calls
share.

torch's CPU thread pool (OpenMP) belongs to the thread that calls it, and Gradio runs each handler on whichever
worker thread is free: advancing every generation on one thread keeps one pool. Which thread matters: on the 2-core
Xeon a 1-token product ran 3x slower in a thread's team made after the main thread's (the main thread loads the
pair), so a lone 64-token /run took 1.45x the engine's in-process time with the engine on a thread of its own and one
torch thread, 1.67x on the main thread with one, and 1.22x on the main thread with two
(docs/lab/2026-12-03-serving.md; an earlier measurement that found one engine thread faster had the engine on a
thread of its own). Where the app is launched without blocking (tests, benchmarks, a ZeroGPU worker), the engine
starts a thread of its own.

A call's rows join the running batch of their pair and size class (any gamma) between two blocks and leave it when
they finish or the call goes (cascade_core.decoding.running_batches), so concurrent calls share every forward instead of
each making its own. A call's step is its next value, after at most one block of its batch. Steps are ordered by stride
scheduling over the tokens each call may generate (what orders calls in different batches: a short call's batch
beside long ones): a call's steps are placed at its start on the engine's clock, then one ``size`` (its tokens
asked) apart, and the waiting step placed earliest goes next. Calls of one size take turns; a call of 32 tokens
beside one of 1024 gets 32 steps for each of the other's, and a call that arrives late neither waits for one that
came before it nor holds it back. Where the call it just served would go strictly first with its next step, the
thread gives it GRACE seconds to ask for it (its handler sends the previous one on first), so that it is not
overtaken in that moment.
"""
import itertools
import math
import os
import threading
import time
from concurrent.futures import Future
from operator import itemgetter

import torch

from cascade_core.decoding.running_batches import RunningBatches

GRACE = 0.05


def engine_threads():
    """Every core this process may use (measured faster than leaving one to the server: see above)."""
    return len(os.sched_getaffinity(0))


def advance(generator):
    """(False, its next value) or (True, what it returned)."""
    try:
        return False, next(generator)
    except StopIteration as end:
        return True, end.value


class Step(Future):
    """A step's Future, which also says where on the clock it ran (``iterate`` places the call's next step after
    it)."""

    def __init__(self):
        super().__init__()
        self.place = None


class EngineThread:
    def __init__(self):
        self._ready, self._pid, self._order = threading.Condition(), None, itertools.count()
        self._clock = 0.0  # the place of the last step run
        self._waiting = []  # (place, order, future, fn, args, call, stride): steps asked for, not yet run
        # the running batches every call's generations decode in (handed to each: ``batches=ENGINE.batches``),
        # used on this thread only
        self.batches = RunningBatches()

    def _serving(self):
        """Start the thread in this process (again in a forked worker, as on a ZeroGPU Space)."""
        with self._ready:
            if self._pid != os.getpid():
                self._pid, self._waiting, self._clock = os.getpid(), [], 0.0
                threading.Thread(target=self._serve, name="engine", daemon=True).start()

    def serve_here(self):
        """Serve on the calling thread until interrupted (instead of a thread of its own; False at once where the
        thread already serves): the main thread of ``python app.py`` once the server runs. torch's OpenMP team
        belongs to the thread that made it, and the first team in a process is the fast one: on the 2-core Xeon a
        thread's team made after the main thread's (which loaded the pair) ran a 1-token matmul 3x slower."""
        with self._ready:
            if self._pid == os.getpid():  # a call came first and started the thread: it goes on serving
                return False
            self._pid, self._waiting, self._clock = os.getpid(), [], 0.0
        self._serve()

    def submit(self, fn, *args, call=None, place=None, stride=0):
        """fn(*args)'s Future, run on the engine thread; ``place`` on the clock (default: now) orders it."""
        self._serving()
        future = Step()
        with self._ready:
            place = self._clock if place is None else place
            self._waiting.append((place, next(self._order), future, fn, args, call, stride))
            self._ready.notify()
        return future

    def call(self, fn, *args):
        return self.submit(fn, *args).result()

    def iterate(self, generator, size=1):
        """The generator's values, each step computed on the engine thread; returns what the generator returns.
        ``size``: the tokens the call may generate, its stride."""
        call, place = object(), None
        try:
            while True:
                future = self.submit(advance, generator, call=call, place=place, stride=size)
                finished, value = future.result()
                if finished:
                    return value
                place = future.place + size
                yield value
        finally:  # a handler stopped early (Stop, a client gone): close the generation on its own thread too
            self.submit(generator.close, place=-math.inf).result()

    def _next(self, last):
        """The waiting step placed earliest (the earliest asked of equals); after a step of ``last`` (call, the
        place of its next step), wait up to GRACE for that step where it would go first."""
        deadline = time.monotonic() + GRACE
        with self._ready:
            while True:
                best = min(self._waiting, key=itemgetter(0, 1), default=None)
                # its next step would go first (one placed level with a waiting step goes after it: no wait)
                expected = last is not None and (best is None or last[1] < best[0])
                remaining = deadline - time.monotonic()
                if best is not None and not (expected and remaining > 0):
                    self._waiting.remove(best)
                    self._clock = max(self._clock, best[0])
                    return best
                self._ready.wait(remaining if expected and remaining > 0 else None)

    def _serve(self):
        torch.set_num_threads(engine_threads())
        last = None
        while True:
            place, _, future, fn, args, call, stride = self._next(last)
            if not future.set_running_or_notify_cancel():
                continue
            future.place, last = place, None
            try:
                result = fn(*args)
            except BaseException as error:  # the caller re-raises it
                future.set_exception(error)
                continue
            if call is not None and not result[0]:
                last = (call, place + stride)
            future.set_result(result)


ENGINE = EngineThread()
