"""The speculative-cascade loop over a batch of rows: the draft proposes, the target verifies in one pass, each
row's rule decides. A solo run is a batch of one.

Invariant: for every row, both KV caches hold every token of its sequence except the last one, ``last``, which is
the next input of both models. A block feeds ``[last, x_0 .. x_{n-2}]`` through the draft (one token at a time,
sampling x_0 .. x_{n-1}) and through the target (one pass), so both see the same inputs, and after a rejection
at position j both caches forget the row's slots back to ``[.., last, x_0 .. x_{j-1}]``. All rows' draft steps
are one forward per step and all rows' verifications one forward per block (cached.py keeps rows of different
lengths apart); every number a row uses is its own, so its tokens are its solo run's.
"""
import statistics
import threading
import time

import torch

from .cached import CachedModel, finite, sliding_window
from .costs import best_gamma
from .head import HeadDraft, check_alone, reads_target
from .prices import CONTEXT, block_prices, measure_prices
from .rules import RULES, Distributions, get_rule
from .sampling import DRAFT, position_uniforms, sample_inverse_cdf, untempered_and_tempered, verify
from .settings import AUTO, AUTO_GAMMAS, MAX_BATCH_ROWS, check_prompt, check_rows, check_settings, check_stopping
from .trace import Block, Detokenizer, Trace, source_under

PRIOR_ACCEPTANCE, PRIOR_WEIGHT = 0.5, 4  # gamma "auto"'s acceptance estimate before a row has verified anything
# A thread whose ``batches`` is set (running.shared_batches) decodes every generation in the running batch of its
# pair and size class, which the thread's other generations share; elsewhere each generation has a batch of its own.
SHARING = threading.local()
OVERHEAD = ("engine", 1)  # the key of the engine's own seconds per block among a pair's prices


def encode_prompt(tokenizer, prompt, chat=True):
    """Token ids for a prompt, through the chat template when the tokenizer has one and chat is on."""
    check_prompt(prompt)
    if chat and getattr(tokenizer, "chat_template", None):
        # enable_thinking=False keeps Qwen3's answers short; templates without the variable ignore it.
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            tokenize=True, enable_thinking=False, return_dict=False)
        return list(ids)
    return tokenizer(prompt, add_special_tokens=True)["input_ids"]


class Row:
    """One generation's settings (its gamma: a number, or "auto"), its trace being built and its last token."""

    def __init__(self, pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos, sequential,
                 eos_token_ids=None, min_new_tokens=0, stop=None):
        self.trace, self.rule, self.alpha, self.gamma, self.sequential = trace, rule, alpha, gamma, sequential
        self.temperature, self.seed, self.max_new_tokens = temperature, seed, max_new_tokens
        self.eos = set(pair.eos_token_ids if eos_token_ids is None else eos_token_ids) if stop_at_eos else set()
        self.min_new_tokens, self.stop = min_new_tokens, stop
        self.accepted = [0.0, 0]  # the sum and count of its proposals' acceptance probabilities (gamma "auto")
        self.trace.counters.update(target_calls=0, draft_calls=0, target_seconds=0.0, draft_seconds=0.0,
                                   prefill_seconds=0.0, wall_seconds=0.0)
        sequence = trace.prompt_ids + trace.tokens
        self.last, self.history = sequence[-1], sequence[:-1]

    @property
    def uses_draft(self):
        return self.rule != "target"

    @property
    def uses_target(self):
        return self.rule != "draft"

    @property
    def counters(self):
        return self.trace.counters

    def block_length(self, gamma):
        """gamma + 1 positions (fewer at the end); one for baselines and sequential cascades."""
        if RULES[self.rule].kind == "baseline" or self.sequential:
            return 1
        return min(gamma + 1, self.max_new_tokens - len(self.trace.positions))

    def allowed(self, logits, start):
        """logits ``[n, V]`` for positions start .. start + n - 1, with end-of-text at -inf before min_new_tokens
        (as transformers' min-length processors do): both models' distributions lose it there, so pi, built
        from them, cannot emit it, and the rules and the verification stay exact for what is left."""
        early, eos = self.min_new_tokens - start, sorted(i for i in self.eos if i < logits.shape[-1])
        if early <= 0 or not eos:
            return logits
        logits = logits.clone()
        logits[:early, eos] = float("-inf")
        return logits

    def fail(self, error):
        self.trace.error, self.trace.finished, self.trace.stop_reason = str(error), True, "error"


class Batch:
    """The state of a batch of rows: both cached models over the rows still running. Each row has its own gamma (a
    number, or "auto": block by block, chosen by the cost model from the measured prices and the row's acceptance so
    far); a block drafts as far as the longest row's, the others sitting the last steps out (one batch for rows of
    every gamma measured faster than a batch per gamma: docs/app-benchmarks.md)."""

    def __init__(self, pair, rows):
        self.pair, self.rows = pair, rows
        self.overhead = None  # the engine's own seconds in the last block beyond the model calls
        compiled = pair.compiled or {}
        longest = max(max(AUTO_GAMMAS) if r.gamma == AUTO else r.gamma for r in rows)
        self.price(rows)
        length = max(len(r.trace.prompt_ids) + r.max_new_tokens for r in rows) + longest + 1
        verifies_blocks = any(r.rule != "target" and not r.sequential for r in rows)
        counters = [r.counters for r in rows]
        self.target = CachedModel(pair.target, "target", pair.vocab_size, counters, compiled.get("target"), length,
                                  block=longest + 1 if verifies_blocks else 1,
                                  feature_layers=getattr(pair.draft, "aux_layers", ()))
        # Both kinds of draft propose one token a call and catch up after each verification (``catch_up``); a
        # head reads the target's features from the target's calls.
        self.draft = (HeadDraft(pair.draft, self.target, pair.vocab_size, counters) if reads_target(pair.draft) else
                      CachedModel(pair.draft, "draft", pair.vocab_size, counters, compiled.get("draft"), length))

    def price(self, rows):
        """gamma "auto"'s prices, measured before its first row reads anything, so that no row's clock counts them."""
        if any(row.gamma == AUTO for row in rows):
            measure_auto_prices(self.pair)

    def prefill(self):
        """Both models read every row's history; returns the rows whose prefill failed (they leave the batch)."""
        return self._read(self.rows, lambda model, histories: model.prefill(histories))

    def join(self, rows):
        """Rows that join the batch between blocks (a lane's next run); returns those whose prefill failed."""
        self.price(rows)
        self.rows = self.rows + rows
        counters = [row.counters for row in rows]
        return self._read(rows, lambda model, histories: model.join(histories, counters))

    def _read(self, rows, read):
        start = time.perf_counter()
        for model, uses in ((self.target, "uses_target"), (self.draft, "uses_draft")):
            for row, error in zip(rows, read(model, [row.history if getattr(row, uses) else [] for row in rows])):
                if error is not None:
                    row.fail(error)
        for row in rows:
            row.counters["prefill_seconds"] = time.perf_counter() - start
            row.started = start
        return self.drop_finished()

    def step(self):
        """One block for every row (the spec's "One block", over rows):

        1. the draft proposes each row's n tokens x_0 .. x_{n-1}, one at a time, from q (all rows in one forward
           per step);
        2. one target pass over every row's [last, x_0 .. x_{n-2}] scores them: p_0 .. p_{n-1};
        3. each row verifies in order against its pi = rule(q, p, alpha): keep x_j with probability
           min(1, pi_j(x_j) / q_j(x_j)); the first rejection is replaced by a sample of norm(max(0, pi_j - q_j))
           and ends the row's block;
        4. both caches forget each row's rejected slots;
        5. each row hands its block to its trace.

        Returns the rows that finished (they have left the batch)."""
        rows = self.rows
        gammas = [self.block_gamma(r) for r in rows]
        started, in_calls = time.perf_counter(), self.target.seconds + self.draft.seconds
        uniforms = [position_uniforms(r.seed, range(len(r.trace.positions), len(r.trace.positions) +
                                                    r.block_length(gamma))) for r, gamma in zip(rows, gammas)]
        drafted = propose(self.draft, rows, [len(u) if r.uses_draft else 0 for r, u in zip(rows, uniforms)],
                          uniforms)  # 1
        needs = [needs_target(r, d) for r, d in zip(rows, drafted)]
        for i, row in enumerate(rows):
            if row.sequential and row.uses_target and not needs[i] and not row.trace.finished:
                self.target.pending[i].append(row.last)  # the target reads this position when it is next called
        scored = self.target([[r.last] + (d[0][:-1] if d and not r.sequential else []) if need else []
                              for r, d, need in zip(rows, drafted, needs)])  # 2
        for i, row in enumerate(rows):
            if row.trace.finished:  # failed while drafting
                continue
            try:
                p_logits = (None if scored[i] is None else
                            row.allowed(finite(scored[i], self.target.model), len(row.trace.positions)))
                block, forgotten = decide(row, drafted[i], p_logits, uniforms[i])  # 3
            except ValueError as error:
                row.fail(error)
                continue
            self.target.forget(i, forgotten)  # 4
            self.draft.catch_up(i, len(drafted[i][0]) if drafted[i] else 0, block.tokens)
            row.trace.add_block(block, row.eos, row.max_new_tokens, row.stop)  # 5
            row.last = row.trace.tokens[-1]
            if block.accept_prob is not None and not row.sequential:
                row.accepted = [row.accepted[0] + float(block.accept_prob.sum()), row.accepted[1] + len(block.tokens)]
                row.counters.setdefault("gammas", []).append(gammas[i])
            row.counters["wall_seconds"] = time.perf_counter() - row.started
        self.overhead = time.perf_counter() - started - (self.target.seconds + self.draft.seconds - in_calls)
        return self.drop_finished()

    def block_gamma(self, row):
        """A row's gamma for this block: the fixed one, or (gamma "auto") the one of the highest priced speed-up at
        the acceptance the row has shown so far (the mean acceptance probability of its proposals, from a prior of
        PRIOR_ACCEPTANCE), its blocks priced with the pair's measured calls and engine time per block. These are
        measured once per pair, so a row's choices depend on its own tokens alone, not on the rows beside it nor on
        the clock: a draft model's tokens do not depend on gamma (randomness is keyed by position), but a head's q
        does (its first step of a block reads the target's features), and the same run must give the same text on
        a busy server."""
        if row.gamma != AUTO:
            return row.gamma
        acceptance = (PRIOR_ACCEPTANCE * PRIOR_WEIGHT + row.accepted[0]) / (PRIOR_WEIGHT + row.accepted[1])
        return best_gamma(acceptance, block_prices(self.pair, self.pair.prices[OVERHEAD]), AUTO_GAMMAS)

    def drop_finished(self):
        """Rows that finished leave both caches; returns them."""
        finished = [row for row in self.rows if row.trace.finished]
        self.leave(finished)
        return finished

    def leave(self, rows):
        """These rows leave both caches (finished, or their caller gone)."""
        going = [i for i, row in enumerate(self.rows) if row not in rows]
        for model in (self.target, self.draft):
            model.keep_rows(going)
            model.settle()
        self.rows = [self.rows[i] for i in going]


def measure_auto_prices(pair):
    """What gamma "auto" prices blocks with: the pair's calls and the engine's own time per block, measured once per
    pair (a server measures them before it serves: the bundled pair's took 4.7 s, which the first call of gamma
    "auto" would otherwise spend while every other call waits)."""
    measure_prices(pair, AUTO_GAMMAS)
    measure_overhead(pair)


def measure_overhead(pair, blocks=8, gamma=4):
    """The engine's own seconds per block beyond the model calls (the draws, the rule, the trace), measured once per
    pair on a solo run of ``blocks`` blocks (a 64-token context, as prices.py's calls) and kept with its prices."""
    if OVERHEAD in pair.prices:
        return
    row = start_row(pair, gamma, prompt_ids=list(range(1, CONTEXT + 1)), max_new_tokens=blocks * (gamma + 1),
                    stop_at_eos=False)
    with torch.inference_mode():
        batch = Batch(pair, [row])
        batch.prefill()
        seconds = []
        for _ in range(blocks):
            batch.step()
            seconds.append(batch.overhead)
    pair.prices[OVERHEAD] = statistics.median(seconds[1:])


def propose(draft, rows, lengths, uniforms):
    """Every row's draft samples x_0 .. x_{n-1} autoregressively, x_j from q_j with position j's draft uniform;
    rows step together, one forward per position. Returns per row (x, q_j untempered, q_j tempered stacked
    ``[n, V]``), or None for rows that draw nothing."""
    x, untempered, tempered = [[] for _ in rows], [[] for _ in rows], [[] for _ in rows]
    for j in range(max(lengths, default=0)):
        feeding = [j < n and not row.trace.finished for row, n in zip(rows, lengths)]
        logits = draft([[x[r][-1] if x[r] else row.last] if feeding[r] else [] for r, row in enumerate(rows)])
        for r, row in enumerate(rows):
            if not feeding[r]:
                continue
            try:
                q_logits = row.allowed(finite(logits[r], draft.model), len(row.trace.positions) + j)
                q_untempered, q = untempered_and_tempered(q_logits, row.temperature)
            except ValueError as error:
                row.fail(error)
                continue
            x[r].append(int(sample_inverse_cdf(q, uniforms[r][j : j + 1, DRAFT])[0]))
            untempered[r].append(q_untempered)
            tempered[r].append(q)
    return [(x[r], torch.cat(untempered[r]), torch.cat(tempered[r])) if x[r] else None for r in range(len(rows))]


def needs_target(row, drafted):
    """Whether the target reads this block: every rule but draft-only does, except a sequential cascade whose
    rule decides on q alone and keeps the draft's token (the target reads that position on its next call)."""
    if not row.uses_target or row.trace.finished:
        return False
    if not row.sequential:
        return True
    rule = RULES[row.rule]
    _, q_untempered, q = drafted
    return not rule.decides_on_q or bool(rule.defers(Distributions(q, None, q_untempered), row.alpha))


def cascade_block(row, drafted, p_logits, uniforms):
    """Steps 2 (the tempering) to 5 of one row's block; returns the block and how many slots to forget."""
    x, q_untempered, q = drafted
    p_untempered, p = untempered_and_tempered(p_logits.to(q.dtype), row.temperature)
    d = Distributions(q, p, q_untempered, p_untempered, greedy=row.temperature == 0)
    verdict = verify(row.rule, d, torch.tensor(x, device=q.device), row.alpha, uniforms)  # 3
    m = verdict.emitted
    tokens = x[: verdict.kept] + ([verdict.correction] if verdict.correction is not None else [])
    block = Block(row.counters["target_calls"] - 1, x[:m], tokens, verdict.sources(), d.first(m),  # 5
                  verdict.accept_prob[:m])
    return block, len(x) - m  # 4: both processed [last, x_0 .. x_{n-2}]; keep [last, x_0 .. x_{m-2}]


def sequential_block(row, drafted, p_logits, uniforms):
    """One position of a token-level sequential cascade, the way a cascade runs without speculation: the draft
    proposes x from q; the target is called for this one position only where the rule needs it (where it defers,
    and, for every rule that reads p, to decide at all). Its randomness is cascade_block's, so its tokens are
    the speculative cascade's; only the cost differs."""
    x, q_untempered, q = drafted
    if p_logits is None:
        return Block(row.counters["draft_calls"] - 1, x, x, ["accepted"], Distributions(q, None, q_untempered)), 0
    p_untempered, p = untempered_and_tempered(p_logits.to(q.dtype), row.temperature)
    d = Distributions(q, p, q_untempered, p_untempered, greedy=row.temperature == 0)
    verdict = verify(row.rule, d, torch.tensor(x, device=q.device), row.alpha, uniforms[:1])
    token = x if verdict.kept else [verdict.correction]
    return Block(row.counters["target_calls"] - 1, x, token, verdict.sources(), d, verdict.accept_prob), 0


def plain_block(row, drafted, p_logits, uniforms):
    """A baseline: one token sampled from the target (target-only) or the draft (draft-only: the draft's first
    proposal) alone, with the position's draft uniform."""
    if not row.uses_target:
        x, q_untempered, q = drafted
        return Block(row.counters["draft_calls"] - 1, x, x, ["accepted"], Distributions(q, None, q_untempered)), 0
    untempered, tempered = untempered_and_tempered(p_logits, row.temperature)
    token = int(sample_inverse_cdf(tempered, uniforms[:, DRAFT])[0])
    return Block(row.counters["target_calls"] - 1, [token], [token], ["deferred"],
                 Distributions(None, tempered, None, untempered)), 0


def decide(row, drafted, p_logits, uniforms):
    """Steps 3 to 5 for one row: its block, and how many of its slots both caches forget."""
    if RULES[row.rule].kind == "baseline":
        return plain_block(row, drafted, p_logits, uniforms)
    return (sequential_block if row.sequential else cascade_block)(row, drafted, p_logits, uniforms)


def start_row(pair, gamma, prompt=None, *, rule="v3", alpha=0.3, temperature=1.0, seed=0, max_new_tokens=64,
              chat=True, prompt_ids=None, resume=None, stop_at_eos=True, details=True, sequential=False,
              eos_token_ids=None, min_new_tokens=0, stop=None):
    """A row's checked settings and its empty (or resumed) trace, before any model call."""
    get_rule(rule)
    check_alone(pair.draft, rule, sequential)
    if resume is not None:
        old, k = resume
        if reads_target(pair.draft):
            k = block_start(old, k)
        prompt, prompt_ids = old.prompt, list(old.prompt_ids)
        prefix = [dict(pos) for pos in old.positions[:k]]
        for pos in prefix:
            pos["source"] = source_under(pos, rule, alpha)
    else:
        prefix = []
        if prompt_ids is None:
            prompt_ids = encode_prompt(pair.tokenizer, prompt, chat)
        prompt_ids = list(prompt_ids)
    gamma, temperature, seed, max_new_tokens = check_settings(pair, prompt_ids, rule, alpha, gamma, temperature, seed,
                                                              max_new_tokens)
    eos_token_ids, min_new_tokens = check_stopping(eos_token_ids, min_new_tokens, stop, max_new_tokens)
    settings = dict(rule=rule, alpha=alpha, gamma=gamma, temperature=temperature, seed=seed, details=details,
                    sequential=sequential, max_new_tokens=max_new_tokens, chat=chat, pair=pair.name,
                    alpha_range=RULES[rule].alpha_range)
    if min_new_tokens:
        settings["min_new_tokens"] = min_new_tokens
    trace = Trace(prompt_ids=prompt_ids, settings=settings, prompt=prompt, positions=prefix, resumed_from=len(prefix),
                  detokenizer=Detokenizer(pair.tokenizer))
    row = Row(pair, trace, rule, alpha, gamma, temperature, seed, max_new_tokens, stop_at_eos, sequential,
              eos_token_ids, min_new_tokens, stop)
    if prefix and (prefix[-1]["token"] in row.eos or len(prefix) >= max_new_tokens):
        trace.finished, trace.stop_reason = True, "eos" if prefix[-1]["token"] in row.eos else "max_new_tokens"
    return row


def block_start(trace, k):
    """Where the block holding position k began. A head's q depends on its step within a block (its first step
    reads the target's features, the others its own outputs), so a resumed head run restarts that block: its
    tokens before k come out again as they were, and it equals a fresh run at a fixed gamma."""
    positions, start = trace.positions, min(k, len(trace.positions))
    if start == len(positions) or start == 0:
        return start
    while start > 0 and start != trace.resumed_from and positions[start - 1]["block"] == positions[start]["block"]:
        start -= 1
    return start


def stream_batch(pair, rows, *, gamma=4):
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
            started.append(start_row(pair, **{"gamma": gamma, **row}))
        except ValueError as error:
            raise ValueError(f"row {index}: {error}") from None
    traces = [row.trace for row in started]
    yield from mapped(decode(pair, started), lambda rows: traces)
    return traces


def decode(pair, rows, successor=lambda row: None):
    """The block loop over a batch of started rows: yields the rows that took each block, after it (at least one
    value, ``[]`` when nothing was left to run). When a row finishes, ``successor(row)`` may return a started row
    that joins the batch before the next block (a lane's next run). On a thread that shares batches (SHARING), the
    rows join its running batch of this pair and size class instead (running.py)."""
    shared = getattr(SHARING, "batches", None)
    if shared is not None and not pair.compiled and not sliding_window(pair.target):
        return (yield from shared.decode(pair, rows, successor))

    def runnable(candidates):
        going = []
        for row in candidates:
            while row is not None and row.trace.finished:
                row = successor(row)
            if row is not None:
                going.append(row)
        return going

    going = runnable(rows)
    if not going:
        yield []
        return
    # Inference mode around each block, never across a yield: grad mode belongs to a thread and is restored on exit,
    # so a context held across yields would end wherever the generator is resumed from (another thread: not in it)
    # or when an interleaved generator leaves its own (the app advances up to four on one thread). A bundled
    # 4-token verification with autograd recording took 107 ms against 62 ms.
    with torch.inference_mode():
        batch = Batch(pair, going)
        finished = batch.prefill()
    while True:
        with torch.inference_mode():
            while finished:  # their successors join; a successor that fails at once makes way for its own
                joining = runnable(finished)
                finished = batch.join(joining) if joining else []
            if not batch.rows:
                return
            live = batch.rows
            finished = batch.step()
        yield live


def stream_lanes(pair, lanes, *, gamma=4, width=MAX_BATCH_ROWS):
    """Lanes of runs that depend on each other, decoded side by side in one batch of at most ``width`` rows. A lane
    is a generator that yields a row (a dict, as in ``stream_batch``), is sent that row's finished Trace, and yields
    its next row or returns its result (a sweep's chain: the next alpha resumes from the previous trace). A lane
    that ends makes room for the next one waiting. Yields the running Traces after every block; returns the
    lanes' results in order."""
    lanes, results = list(lanes), {}
    waiting = iter(range(len(lanes)))

    def advance(lane, trace):
        """The lane's next row, or (when it has ended) the first row of the next lane that has one."""
        while lane is not None:
            try:
                row = start_row(pair, gamma, **(lanes[lane].send(trace) if trace else next(lanes[lane])))
                row.lane = lane
                return row
            except StopIteration as end:
                results[lane], lane, trace = end.value, next(waiting, None), None
        return None

    first = [row for row in (advance(next(waiting, None), None) for _ in range(min(width, len(lanes)))) if row]
    yield from mapped(decode(pair, first, lambda row: advance(row.lane, row.trace)),
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


def stream(pair, prompt=None, *, gamma=4, **settings):
    """Generate with a speculative cascade, yielding the growing Trace after every block.

    Settings (defaults): rule ("v3"), alpha (0.3), gamma (4), temperature (1.0), seed (0), max_new_tokens (64),
    chat (True: the chat template), prompt_ids (instead of the prompt), resume, stop_at_eos (True), details
    (True), sequential (False); how a run stops: eos_token_ids (the pair's), min_new_tokens (0: end-of-text is
    impossible before it) and stop (a predicate on the generated token ids, asked after every token: True ends
    the run there, stop_reason "stop").
    ``resume=(trace, k)`` continues an earlier trace's prompt from its first k tokens (the app's re-runs after
    an alpha change): with position-keyed randomness the result equals a fresh run whenever those k tokens
    are what the new setting would emit, which ``Trace.recolour`` establishes. ``details=False`` skips the
    per-position records only the explorer reads (a* of every rule, top-10 lists, proposal texts).
    ``sequential=True`` runs the token-level sequential cascade instead (one position at a time, the target only
    where the rule needs it): the same tokens, another cost. A solo run is a batch of one."""
    row = start_row(pair, gamma, prompt, **settings)
    yield from mapped(decode(pair, [row]), lambda rows: solo(row.trace))
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


def generate_batch(pair, rows, *, gamma=4):
    """Run a batch to its end and return one Trace per row, in row order (see ``stream_batch``)."""
    return finish(stream_batch(pair, rows, gamma=gamma))
