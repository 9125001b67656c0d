"""One block over a batch of rows: the draft proposes, the target verifies in one pass, each row's rule decides.

Invariant: for every row, both KV caches hold every token of its sequence except the last one, ``last``, which is
the next input of both models. A block feeds ``[last, x_0 .. x_{n-2}]`` through the draft (one token at a time,
sampling x_0 .. x_{n-1}) and through the target (one pass), so both see the same inputs, and after a rejection
at position j both caches forget the row's slots back to ``[.., last, x_0 .. x_{j-1}]``. All rows' draft steps
are one forward per step and all rows' verifications one forward per block (cached_model.py keeps rows of different
lengths apart); every number a row uses is its own, so its tokens are its solo run's. The block, and how it
differs from the paper's Algorithm 4: docs/spec.md.
"""
import statistics
import time

import torch

from cascade_core.decoding.cached_model import CachedModel
from cascade_core.decoding.row import start_row
from cascade_core.decoding.run_settings import AUTO, AUTO_GAMMAS, TARGET_ALONE, RunSettings
from cascade_core.method.costs import best_gamma, priced_speedup
from cascade_core.method.decision import block_in_full, decide, needs_target
from cascade_core.method.rules import RULES
from cascade_core.method.sampling import finite, position_uniforms
from cascade_core.speed.prices import AutoPrices, context_ids, measure_prices, measured_prices

PRIOR_ACCEPTANCE, PRIOR_WEIGHT = 0.5, 4  # gamma "auto"'s acceptance estimate before a row has verified anything
PROBE_EVERY = 8  # after this many target-alone blocks in a row, a lossless row drafts one block to see its acceptance


class Batch:
    """The state of a batch of rows: the target's cached model and the draft (cascade_core/decoding/draft_protocol.py)
    over the rows still running. Each row has its own gamma (a number, or "auto": block by block, chosen by the cost
    model from the measured prices and the row's acceptance so far); a block drafts as far as the longest row's, the
    others sitting the last steps out (one batch for rows of every gamma measured faster than a batch per gamma:
    docs/lab/2026-12-03-serving.md)."""

    def __init__(self, pair, rows):
        self.pair, self.rows = pair, rows
        self.overhead = None  # the engine's own seconds in the last block beyond the model calls
        self.prices = None  # gamma "auto"'s (AutoPrices), read off the pair once a row of it is here
        longest = max(max(AUTO_GAMMAS) if r.settings.gamma == AUTO else r.settings.gamma for r in rows)
        self.read_prices(rows)
        length = max(len(r.trace.prompt_ids) + r.settings.max_new_tokens for r in rows) + longest + 1
        verifies_blocks = any(r.settings.rule != "target" and not r.settings.sequential for r in rows)
        counters = [r.counters for r in rows]
        self.target = CachedModel(pair.target, "target", pair.vocab_size, counters, (pair.compiled or {}).get("target"),
                                  length, block=longest + 1 if verifies_blocks else 1,
                                  feature_layers=pair.drafting.feature_layers(pair.draft))
        self.draft = pair.drafting(pair, counters, length)

    def read_prices(self, rows):
        """gamma "auto"'s prices, read (never measured: the caller measured them, ``priced``) once a row of it is
        here."""
        if self.prices is None and any(row.settings.gamma == AUTO for row in rows):
            self.prices = AutoPrices.of(self.pair, AUTO_GAMMAS)

    def prefill(self):
        """Both models read every row's history; returns the rows whose prefill failed (they leave the batch)."""
        return self._read(self.rows, self.target.prefill, self.draft.prefill)

    def join(self, rows):
        """Rows that join the batch between blocks (a lane's next run); returns those whose prefill failed."""
        self.read_prices(rows)
        self.rows = self.rows + rows
        counters = [row.counters for row in rows]
        return self._read(rows, lambda histories: self.target.join(histories, counters),
                          lambda histories, features: self.draft.join(histories, counters, features))

    def _read(self, rows, target_read, draft_read):
        """The target reads first: what it hands over (a head's features) is the draft's input."""
        start = time.perf_counter()
        for row, error in zip(rows, target_read([row.history if row.uses_target else [] for row in rows])):
            if error is not None:
                row.fail(error)
        for row, error in zip(rows, draft_read([row.history if row.uses_draft else [] for row in rows],
                                               self.target.features)):
            if error is not None:
                row.fail(error)
        for row in rows:
            row.counters.prefilled(time.perf_counter() - start)
            row.started = start
        return self.drop_finished()

    def step(self):
        """One block for every row (docs/spec.md, "One block", over rows):

        1. the draft proposes each row's n tokens x_0 .. x_{n-1} from q (all rows in one forward per step);
        2. one target pass over what each proposal asks it to read ([last, x_0 .. x_{n-2}]) scores them: p_0 ..
           p_{n-1};
        3. each row verifies in order against its pi = rule(q, p, alpha): keep x_j with probability
           min(1, pi_j(x_j) / q_j(x_j)); the first rejection is replaced by a sample of norm(max(0, pi_j - q_j))
           and ends the row's block;
        4. both models forget each row's rejected slots (the draft catches up on the kept tokens);
        5. each row hands its block to its trace.

        Returns the rows that finished (they have left the batch)."""
        rows = self.rows
        gammas = [self.block_gamma(r) for r in rows]
        started, in_calls = time.perf_counter(), self.target.seconds + self.draft.seconds
        uniforms = [position_uniforms(r.settings.seed, range(len(r.trace.positions), len(r.trace.positions) +
                                                    r.block_length(gamma))) for r, gamma in zip(rows, gammas)]
        drafted = [len(u) if r.uses_draft and g != TARGET_ALONE else 0 for r, u, g in zip(rows, uniforms, gammas)]
        proposals = self.draft.propose(rows, drafted, uniforms)  # 1
        needs = [needs_target(r, d) for r, d in zip(rows, proposals)]
        for i, row in enumerate(rows):
            if row.settings.sequential and row.uses_target and not needs[i] and not row.trace.finished:
                self.target.pending[i].append(row.last)  # the target reads this position when it is next called
        scored = self.target([(d.target_inputs(r.last) if d and not r.settings.sequential else [r.last]) if need else []
                              for r, d, need in zip(rows, proposals, needs)])  # 2
        for i, row in enumerate(rows):
            if not row.trace.finished:  # else it failed while drafting
                self.settle_row(i, row, proposals[i], scored[i], uniforms[i], gammas[i])  # 3 to 5
        block_seconds = time.perf_counter() - started
        for row in rows:  # the engine's own clock: its calls and work, not the time a reader holds the stream
            row.counters.stepped(block_seconds)
        self.overhead = block_seconds - (self.target.seconds + self.draft.seconds - in_calls)
        return self.drop_finished()

    def settle_row(self, i, row, proposal, p_logits, uniforms, gamma):
        """Steps 3 to 5 for row i: its block decided, both models caught up, its trace extended."""
        try:
            if p_logits is not None:
                p_logits = row.allowed(p_logits, len(row.trace.positions))
            block, forgotten = decide(row, proposal, p_logits, uniforms)  # 3
            if row.watch is not None and row.watch(len(row.trace.positions), block):
                row.watched = block_in_full(row, proposal, p_logits, uniforms)
        except ValueError as error:  # the tempering found a distribution not finite: the target's, if its logits are
            row.fail(self.named(error, p_logits))
            return
        self.target.forget(i, forgotten)  # 4
        if gamma == TARGET_ALONE:
            self.draft.pass_over(i, row.last, self.target.features[i])
        else:
            self.draft.catch_up(i, proposal, block.tokens, self.target.features[i])
        row.trace.add_block(block, row.eos, row.settings.max_new_tokens, row.settings.stop)  # 5
        row.last, row.blocks = row.trace.tokens[-1], row.blocks + 1
        if block.accept_prob is not None and not row.settings.sequential:
            row.accepted = [row.accepted[0] + float(block.accept_prob.sum()), row.accepted[1] + len(block.tokens)]
            row.counters.verified(gamma, len(proposal.tokens))
        row.counters.settled(time.perf_counter() - row.started)

    def named(self, error, p_logits):
        """The error, or the one naming the target where its logits are broken (checked here, after the fact: the
        tempering's one reduction already tells whether anything is wrong, and a check before it cost time in every
        block: docs/design.md, "Measured choices")."""
        try:
            if p_logits is not None:
                finite(p_logits, self.target.model)
        except ValueError as named:
            return named
        return error

    def block_gamma(self, row):
        """A row's gamma for this block: the fixed one, or (gamma "auto") the one of the highest priced speed-up at
        the acceptance the row has shown so far (the mean acceptance probability of its proposals, from a prior of
        PRIOR_ACCEPTANCE), its blocks priced with the pair's measured calls and engine time per block. These are
        measured once per pair, so a row's choices depend on its own tokens alone, not on the rows beside it nor on
        the clock: a draft model's tokens do not depend on gamma (randomness is keyed by position), but a head's q
        does (its first step of a block reads the target's features), and the same run must give the same text on
        a busy server."""
        if row.settings.gamma != AUTO:
            return row.settings.gamma
        acceptance = (PRIOR_ACCEPTANCE * PRIOR_WEIGHT + row.accepted[0]) / (PRIOR_WEIGHT + row.accepted[1])
        gamma = best_gamma(acceptance, self.prices, AUTO_GAMMAS)
        if floored(row, priced_speedup(acceptance, gamma, *self.prices(gamma))):
            return TARGET_ALONE
        return gamma

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

    def checkpoint(self):
        """Everything a block changes, kept by reference (caches grow by new tensors, never in place), so that a
        block that fails part-way can be undone exactly: ``restore(checkpoint)``."""
        return list(self.rows), [row.checkpoint() for row in self.rows], self.target.state(), self.draft.state()

    def restore(self, checkpoint):
        rows, row_states, target, draft = checkpoint
        self.rows = list(rows)
        for row, state in zip(rows, row_states):
            row.restore(state)
        self.target.restore(target)
        self.draft.restore(draft)


def floored(row, speedup):
    """gamma "auto"'s floor: a lossless row whose best block is priced slower than the target alone (``speedup`` <
    1) takes the target's own token instead (exact: lossless's pi is p), except every PROBE_EVERY-th block, which
    drafts so the row's acceptance is seen again. A cascade rule always drafts: its pi reads q."""
    if speedup >= 1 or row.settings.sequential or not RULES[row.settings.rule].target_alone_is_exact:
        return False
    recent = row.trace.positions[-PROBE_EVERY:]
    return len(recent) < PROBE_EVERY or any(pos["source"] != "target" for pos in recent)


def priced(pair, row):
    """The row, after gamma "auto"'s prices were measured where it asks for them: the callers of the block loop
    (engine.decode) see to it before a row decodes, so the loop only reads them (Batch.read_prices)."""
    if row is not None and row.settings.gamma == AUTO:
        measure_auto_prices(pair)
    return row


def measure_auto_prices(pair):
    """What gamma "auto" prices blocks with: the pair's calls and the engine's own time per block, measured once per
    pair (a server measures them before it serves, which the first call of gamma "auto" would otherwise do while
    every other call waits: docs/lab/2026-12-03-serving.md)."""
    measure_prices(pair, AUTO_GAMMAS)
    measure_overhead(pair)


def run_prices(pair, gamma):
    """What a speed-up over the target alone is priced with (costs.speedup_over_target): the pair's calls for
    blocks of gamma + 1 tokens and the engine's own seconds per block, each measured once per pair on this machine,
    so that every view of the same text shows the same number; None on the compiled path."""
    if pair.compiled:
        return None
    measure_overhead(pair)
    return measured_prices(pair, gamma)


def measure_overhead(pair, blocks=8, gamma=4):
    """The engine's own seconds per block beyond the model calls (the draws, the rule, the trace), measured once per
    pair on a solo run of ``blocks`` blocks (a 64-token context, as prices.py's calls) and kept with its prices."""
    if pair.overhead is not None:
        return
    settings = RunSettings(gamma=gamma, max_new_tokens=blocks * (gamma + 1), stop_at_eos=False)
    row = start_row(pair, settings, prompt_ids=context_ids(pair.vocab_size))
    with torch.inference_mode():
        batch = Batch(pair, [row])
        batch.prefill()
        seconds = []
        for _ in range(blocks):
            batch.step()
            seconds.append(batch.overhead)
    pair.overhead = statistics.median(seconds[1:])
