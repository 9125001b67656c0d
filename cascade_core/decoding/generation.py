"""Generating with a speculative cascade: the library's calls. Each starts its rows (checked before any model call,
cascade_core/decoding/row.py) and takes blocks through the one block loop (cascade_core/decoding/running_batches.py): a
solo run is a running batch with one caller. ``batches``: the RunningBatches to decode in (a server's, shared by its
calls); by default each call has its own. The block itself: cascade_core/decoding/batch_block.py; the algorithm:
docs/spec.md.
"""
from cascade_core.decoding.batch_block import priced
from cascade_core.decoding.row import row_of, start_row
from cascade_core.decoding.run_settings import MAX_BATCH_ROWS, RunSettings, check_rows
from cascade_core.decoding.running_batches import RunningBatches


def decode(pair, rows, successor=lambda row: None, batches=None):
    """The block loop over started rows, in ``batches`` (or a RunningBatches of its own): RunningBatches.decode.
    gamma "auto"'s prices are measured here, before a row of it joins (a successor's too), never in the loop."""
    if pair.compiled and len(rows) > 1:
        raise ValueError(f"the compiled static-cache path decodes one row at a time, not {len(rows)}; "
                         "load the pair without compile for batches")
    rows, next_row = [priced(pair, row) for row in rows], lambda row: priced(pair, successor(row))
    return (RunningBatches() if batches is None else batches).decode(pair, rows, next_row)


def stream_batch(pair, rows, *, gamma=4, batches=None):
    """Generate many rows in one batch, yielding the list of their growing Traces (in row order) after every
    block. A row is a dict of ``stream``'s keyword arguments (``prompt`` or ``prompt_ids``, ``rule``, ``alpha``,
    ``gamma``, ``temperature``, ``seed``, ``max_new_tokens``, ``resume``, ``details``, ...); ``gamma`` is the rows'
    that set none.
    Every row is checked before any model call (a bad one is refused naming its index). Rows finish on their own
    (EOS, length) and leave the batch; a row whose model fails (NaN logits) ends with ``trace.error`` while the
    others go on. Each row's tokens, sources and counts are its solo run's (position-keyed randomness)."""
    check_rows(rows)
    started = []
    for index, row in enumerate(rows):
        try:
            started.append(row_of(pair, row, gamma=gamma))
        except ValueError as error:
            raise ValueError(f"row {index}: {error}") from None
    traces = [row.trace for row in started]
    yield from mapped(decode(pair, started, batches=batches), lambda rows: traces)
    return traces

def stream_lanes(pair, lanes, *, gamma=4, width=MAX_BATCH_ROWS, batches=None):
    """Lanes of runs that depend on each other, decoded side by side in one batch of at most ``width`` rows. A lane
    is a generator that yields a row (a dict, as in ``stream_batch``), is sent that row's finished Trace, and yields
    its next row or returns its result (a sweep's chain: the next alpha resumes from the previous trace). A lane
    that ends makes room for the next one waiting. Yields the running Traces after every block; returns the
    lanes' results in order."""
    lanes, results = list(lanes), {}
    waiting, lane_of = iter(range(len(lanes))), {}  # a started row -> the lane it runs for

    def advance(lane, trace):
        """The lane's next row, or (when it has ended) the first row of the next lane that has one."""
        while lane is not None:
            try:
                row = row_of(pair, lanes[lane].send(trace) if trace else next(lanes[lane]), gamma=gamma)
                lane_of[row] = lane
                return row
            except StopIteration as end:
                results[lane], lane, trace = end.value, next(waiting, None), None
        return None

    first = [row for row in (advance(next(waiting, None), None) for _ in range(min(width, len(lanes)))) if row]
    if not first:  # every lane ended before its first row (a resumed sweep with nothing left to run)
        return [results[lane] for lane in range(len(lanes))]
    yield from mapped(decode(pair, first, lambda row: advance(lane_of.pop(row), row.trace), batches),
                      lambda rows: [row.trace for row in rows])
    return [results[lane] for lane in range(len(lanes))]


def one_run(row):
    """A lane of ``stream_lanes`` with one run: more rows than a batch holds, each starting as another finishes."""
    return (yield row)


def solo(trace):
    """A solo run's trace, or its error raised (a batch records it and goes on)."""
    if trace.error:
        raise ValueError(trace.error)
    return trace


def stream(pair, prompt=None, *, settings=None, prompt_ids=None, resume=None, batches=None, **keywords):
    """Generate with a speculative cascade, yielding the growing Trace after every block.

    ``settings``: a RunSettings (cascade_core/decoding/run_settings.py), changed by any keywords; or the keywords alone
    (defaults): rule ("v3"), alpha (0.3), gamma (4), temperature (1.0), seed (0), max_new_tokens (64),
    chat (True: the chat template), prompt_ids (instead of the prompt), resume, stop_at_eos (True), details
    (True), sequential (False); how a run stops: eos_token_ids (the pair's), min_new_tokens (0: end-of-text is
    impossible before it) and stop (a predicate on the generated token ids, asked after every token: True ends
    the run there, stop_reason "stop").
    ``resume=(trace, k)`` continues an earlier trace's prompt from its first k tokens (the app's re-runs after
    an alpha change): with position-keyed randomness the result equals a fresh run whenever those k tokens
    are what the new setting would emit, which ``Trace.recolour`` establishes. ``details=False`` skips the
    per-position records only the explorer reads (a* of every rule, top-10 lists, proposal texts).
    ``sequential=True`` runs the token-level sequential cascade instead (one position at a time, the target only
    where the rule needs it): the same tokens, another cost. A solo run is a running batch with one caller."""
    row = start_row(pair, RunSettings.of(settings, **keywords), prompt, prompt_ids=prompt_ids, resume=resume)
    yield from mapped(decode(pair, [row], batches=batches), lambda rows: solo(row.trace))
    return solo(row.trace)


def finish(steps):
    """Run a generator of steps (``stream``, a sweep's, the strategies') to its end and return what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def mapped(steps, fn):
    """A generator of steps with every value passed through fn; returns what steps returns."""
    while True:
        try:
            value = next(steps)
        except StopIteration as end:
            return end.value
        yield fn(value)


def generate(pair, prompt=None, **kwargs):
    """Run the cascade to the end and return its Trace (see ``stream`` for the arguments)."""
    return finish(stream(pair, prompt, **kwargs))


def generate_batch(pair, rows, *, gamma=4, batches=None):
    """Run a batch to its end and return one Trace per row, in row order (see ``stream_batch``)."""
    return finish(stream_batch(pair, rows, gamma=gamma, batches=batches))
