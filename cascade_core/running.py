"""Continuous batching: the generations of one thread share a running batch per pair and size class.

A server that decodes for many callers on one thread (the app's engine thread) runs them inside ``shared_batches()``
there. Meanwhile ``engine.decode`` on that thread does not make a batch of its own: its rows join the running batch
of their pair and size class (``size_class``; whatever gamma each asks) between two blocks (waiting while the batch
holds ``width`` rows), take every block the batch takes, and leave it when they finish or when their caller closes
its generator (Stop, a client gone). Pairs whose rows cannot share a batch (the compiled path, sliding-window
attention) keep a batch per generation.
A caller's decode, when advanced, makes the batch take its next block unless the batch already took one since the
caller last looked, so the batch takes one block per round of its callers, and a caller who reads slowly finds its
rows further on. Every number a row uses is its own (the batched engine's invariant, gamma "auto" chosen per row),
so a row's tokens, sources and counts are its solo run's whoever else is decoding.
"""
from collections import Counter
from contextlib import contextmanager

import torch

from .engine import SHARING, Batch
from .settings import MAX_BATCH_ROWS

OTHER_ROWS = "rows_of_other_calls"  # a row's counter: the most rows of other calls that took a block beside it


@contextmanager
def shared_batches(width=MAX_BATCH_ROWS):
    """Within it, this thread's generations share running batches of at most ``width`` rows (RunningBatches)."""
    before = getattr(SHARING, "batches", None)
    SHARING.batches = RunningBatches(width)
    try:
        yield SHARING.batches
    finally:
        SHARING.batches = before


def size_class(rows):
    """Calls asking for tokens of one order of magnitude (in powers of 4: up to 16, 64, 256, 1024, ...) share a
    batch. A short call beside long ones then gets a batch of its own, which its caller's steps move as often as
    the engine thread's stride scheduling gives them (a 16-token call 64 steps for each of a 1024-token call's),
    instead of moving at the pace of a batch of many long rows: a 16-token /run took 2.85 s beside four Compare
    calls of 6 x 1024 tokens in their batch, against 0.65 s alone (docs/app-benchmarks.md)."""
    tokens = max(row.max_new_tokens for row in rows)
    return ((tokens - 1).bit_length() + 1) // 2  # the smallest k with 4 ** k >= tokens


class RunningBatches:
    """The running batch of each pair and size class that has rows; a batch with none left is dropped (and its
    caches with it)."""

    def __init__(self, width):
        self.width, self.running = width, {}

    def decode(self, pair, rows, successor):
        key = (id(pair), size_class(rows))
        if key not in self.running:
            self.running[key] = RunningBatch(pair, self.width)
        batch = self.running[key]
        try:
            return (yield from batch.decode(rows, successor))
        finally:
            if batch.empty and self.running.get(key) is batch:
                del self.running[key]

    def rows(self):
        """How many rows are decoding and waiting, in all running batches."""
        return sum(len(batch.rows) + len(batch.waiting) for batch in self.running.values())


class Caller:
    """One decode's share of a running batch: its successor (what a finished row hands over to)."""

    def __init__(self, successor):
        self.successor = successor


class RunningBatch:
    """A batch that rows join and leave between blocks; ``blocks`` counts the blocks it has taken."""

    def __init__(self, pair, width):
        self.pair, self.width = pair, width
        self.batch = None  # engine.Batch over the rows decoding now
        self.waiting = []  # started rows waiting for room
        self.callers = {}  # row (decoding or waiting) -> its Caller
        self.stepped = []  # (row, its Caller) of the rows that took the last block
        self.blocks = 0

    @property
    def rows(self):
        return self.batch.rows if self.batch is not None else []

    @property
    def empty(self):
        return not self.callers

    def decode(self, rows, successor):
        """engine.decode's contract for one caller's rows: yields the caller's rows that took each block, after
        it; returns when none is left. Rows that arrive while the batch runs wait for its next block, which every
        row that arrived meanwhile joins at once (concurrent callers arrive one step apart: joining one by one,
        each at once, cost a join and a block with a row fewer for each caller)."""
        caller = Caller(successor)
        try:
            self._hand_over(caller, rows)
            if not self._holds(caller):
                yield []
                return
            last = self.blocks
            if self.rows:  # running: joins at its next block
                yield []
            while self._holds(caller):
                if last == self.blocks:  # nobody moved the batch since this caller looked: its next block
                    self._step()
                last = self.blocks
                yield [row for row, owner in self.stepped if owner is caller]
        finally:  # finished, or closed by its caller: its rows leave (a finished row has left already)
            gone = [row for row, owner in self.callers.items() if owner is caller]
            if gone:
                self.waiting = [row for row in self.waiting if row not in gone]
                if self.batch is not None:
                    self.batch.leave(gone)
                for row in gone:
                    del self.callers[row]

    def _holds(self, caller):
        """Whether any row of ``caller`` is decoding or waiting."""
        return any(owner is caller for owner in self.callers.values())

    def _hand_over(self, caller, rows):
        """Rows of ``caller`` wait to join; a finished one hands over to its successor's next row."""
        for row in rows:
            while row is not None and row.trace.finished:
                row = caller.successor(row)
            if row is not None:
                self.callers[row] = caller
                self.waiting.append(row)

    def _finished(self, rows):
        for row in rows:
            caller = self.callers.pop(row)
            self._hand_over(caller, [caller.successor(row)])

    def _fill(self):
        """Waiting rows join while the batch has room (a fresh batch when it has no rows); rows whose prefill
        failed hand over to their successors, who wait in turn."""
        while self.waiting and len(self.rows) < self.width:
            room = self.width - len(self.rows)
            joining, self.waiting = self.waiting[:room], self.waiting[room:]
            with torch.inference_mode():  # around each model call, never across a yield (engine.decode says why)
                if not self.rows:
                    self.batch = Batch(self.pair, joining)
                    failed = self.batch.prefill()
                else:
                    failed = self.batch.join(joining)
            self._finished(failed)

    def _step(self):
        """Waiting rows join (rows that arrived, successors of finished ones), then one block for every row in the
        batch; finished rows leave and their successors wait to join."""
        self._fill()
        self.stepped = [(row, self.callers[row]) for row in self.rows]
        per_caller = Counter(caller for _, caller in self.stepped)
        for row, caller in self.stepped:  # what its timings include: other calls' rows in the same forwards
            others = len(self.stepped) - per_caller[caller]
            row.counters[OTHER_ROWS] = max(row.counters.get(OTHER_ROWS, 0), others)
        if self.rows:
            with torch.inference_mode():
                finished = self.batch.step()
            self._finished(finished)
        self.blocks += 1
