"""The block loop: every generation's rows decode in a running batch, which rows join and leave between blocks.

``RunningBatches`` holds the running batch of each pair and size class. A solo generation is a running batch with
one caller (``cc.generate`` and every library call make their own RunningBatches); a server that decodes for many
callers on one thread hands its own RunningBatches to every call (app/worker.py), so concurrent calls share every
forward. A caller's rows join between two blocks (waiting while the batch holds ``width`` rows), take every block
the batch takes, and leave when they finish or when their caller closes its generator (Stop, a client gone). Pairs
whose rows cannot share a batch (the compiled path, sliding-window attention) get a batch per generation, as do
rows set ``reproducible`` (their call's rows alone, so that a one-row call is bitwise its solo run).
A caller's decode, when advanced, makes the batch take its next block unless the batch already took one since the
caller last looked, so the batch takes one block per round of its callers, and a caller who reads slowly finds its
rows further on. Every number a row uses is its own (the batched engine's invariant, gamma "auto" chosen per row),
so a row's tokens, sources and counts are its solo run's whoever else is decoding, up to the last float32 bits of
batched kernels: a decision within sampling.NEAR_TIE of its threshold can go the other way, and the trace marks
every such decision (``near_tie``).

A block that fails (an out-of-memory, a kernel error: anything raised in a shared step) is the batch's to handle,
not its caller's who happened to drive it: the block is undone (``Batch.checkpoint``), retried, and where it fails
again, the rows are tried in halves until the rows that fail alone are found. Only those rows end, with one
sentence naming the error; every other row takes the block as if they had never been there.
"""
from collections import Counter

import torch

from cascade_core.decoding.batch_block import Batch
from cascade_core.decoding.cached_model import sliding_window
from cascade_core.decoding.run_settings import MAX_BATCH_ROWS
from cascade_core.messages import shown

OTHER_ROWS = "rows_of_other_calls"  # a row's counter: the most rows of other calls that took a block beside it


def size_class(rows):
    """Calls asking for tokens of one order of magnitude (in powers of 4: up to 16, 64, 256, 1024, ...) share a
    batch. A short call beside long ones then gets a batch of its own, which its caller's steps move as often as
    the engine thread's stride scheduling gives them, instead of moving at the pace of a batch of many long rows
    (docs/lab/2026-12-03-serving.md)."""
    tokens = max(row.settings.max_new_tokens for row in rows)
    return ((tokens - 1).bit_length() + 1) // 2  # the smallest k with 4 ** k >= tokens


def shares_batches(pair):
    """Whether rows of this pair can decode beside other calls' rows."""
    return not pair.compiled and not sliding_window(pair.target)


class RunningBatches:
    """The running batch of each pair and size class that has rows; a batch with none left is dropped (and its
    caches with it)."""

    def __init__(self, width=MAX_BATCH_ROWS):
        self.width, self.running = width, {}

    def decode(self, pair, rows, successor=lambda row: None):
        """The block loop over started rows: yields this caller's rows that took each block, after it (at least one
        value, ``[]`` when nothing was left to run). When a row finishes, ``successor(row)`` may return a started
        row that joins the batch before a later block (a lane's next run)."""
        alone = not shares_batches(pair) or any(row.settings.reproducible for row in rows)
        key = object() if alone else (id(pair), size_class(rows))
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
        self.batch = None  # batch.Batch over the rows decoding now
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
        """RunningBatches.decode for one caller's rows. Rows that arrive while the batch runs wait for its next
        block, which every row that arrived meanwhile joins at once (concurrent callers arrive one step apart:
        joining one by one, each at once, cost a join and a block with a row fewer for each caller)."""
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
            self._finished(self._guarded(self._admit, joining))

    def _admit(self, joining):
        """The rows join (a fresh batch for a batch with no rows); returns those whose prefill failed, or raises
        with the batch as it was."""
        if not self.rows:
            self.batch = Batch(self.pair, joining)
            return self.batch.prefill()
        return self.batch.join(joining)

    def _step(self):
        """Waiting rows join (rows that arrived, successors of finished ones), then one block for every row in the
        batch; finished rows leave and their successors wait to join."""
        self._fill()
        self.stepped = [(row, self.callers[row]) for row in self.rows]
        per_caller = Counter(caller for _, caller in self.stepped)
        for row, caller in self.stepped:  # what its timings include: other calls' rows in the same forwards
            others = len(self.stepped) - per_caller[caller]
            if others:  # a call alone has no such counter
                row.counters.beside(others)
        if self.rows:
            self._finished(self._guarded(self._block, list(self.rows)))
        self.blocks += 1

    def _block(self, rows):
        """One block for these rows of the batch (the others leave it: they failed alone)."""
        if len(rows) < len(self.rows):
            self.batch.leave([row for row in self.rows if row not in rows])
        return self.batch.step()

    def _guarded(self, run, rows):
        """run(rows)'s finished rows, with what a failure changed undone (``isolated``); rows that fail alone end
        with their error's sentence and leave."""
        batch = self.batch
        saved = batch.checkpoint() if batch is not None else None, [row.checkpoint() for row in rows]

        def undo():
            self.batch = batch
            if batch is not None:
                batch.restore(saved[0])
            for row, state in zip(rows, saved[1]):
                row.restore(state)

        finished, culprits = isolated(run, undo, rows)
        for row, error in culprits.items():
            row.fail(f"decoding this row failed ({type(error).__name__}: {shown(str(error))}), and only this row: "
                     "the rows beside it went on")
        if culprits and self.batch is not None:
            self.batch.leave(list(culprits))
        return finished + list(culprits)


def isolated(run, undo, rows):
    """(run(rows)'s result, {row: error} of the rows that had to be left out). A failure of any kind is undone
    (``undo``) and retried once (a passing fault); where it fails again, the rows are tried in halves until the
    rows that fail alone are found, and the rest run without them."""
    culprits = {}
    while True:
        going = [row for row in rows if row not in culprits]
        if not going:
            return [], culprits
        for _ in range(2):
            failed, outcome = attempt(run, undo, going)
            if not failed:
                return outcome, culprits
        culprits.update(failing(run, undo, going, outcome))


def attempt(run, undo, rows, trial=False):
    """(False, run(rows)'s result) or (True, the error it raised), a failure undone; a ``trial`` is undone even
    where it succeeds."""
    # Inference mode around each block, never across a yield: grad mode belongs to a thread and is restored on exit,
    # so a context held across yields would end wherever the generator is resumed from (another thread: not in it)
    # or when an interleaved generator leaves its own; and a block with autograd recording is much slower
    # (docs/design.md, "Measured choices").
    try:
        with torch.inference_mode():
            result = run(rows)
    except Exception as error:  # an out-of-memory or a kernel error as much as a ValueError: the batch's
        undo()
        return True, error
    if trial:
        undo()
    return False, result


def failing(run, undo, rows, error):
    """{row: error} of the rows that fail alone, found by halving (a group none of whose halves fails alone fails
    as a whole)."""
    if len(rows) == 1:
        return {rows[0]: error}
    culprits = {}
    for half in (rows[: len(rows) // 2], rows[len(rows) // 2 :]):
        failed, outcome = attempt(run, undo, half, trial=True)
        if failed:
            culprits.update(failing(run, undo, half, outcome))
    return culprits or dict.fromkeys(rows, error)
