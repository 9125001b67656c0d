"""What a block costs on this machine, measured on the loaded pair.

The cost model (costs.py) prices a block by three calls, each as the engine makes it (a cached forward after a
64-token context, median of 7 after a warm-up, the calls asked for timed in alternation): a one-token target call
(what target-only decoding pays per token), a one-token draft call, and the target's verification of a block's n
tokens. In units of the first, c = draft / target and v(n) = verification(n) / target; Leviathan et al.'s
(2023) estimate assumes v = 1, but a small CPU pays more for n rows than for one. Each price is measured the first
time it is asked for and kept on the pair. A pair on the compiled path is not priced: each call shape is a graph of
its own to compile (a minute or more on a CPU), for shapes its decoding may never use.
"""
import statistics
import time
from dataclasses import dataclass

import torch

from cascade_core.decoding.cached_model import CachedModel, Counters

CONTEXT = 64  # tokens already in the cache when a price is measured: a short answer's length


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def context_ids(vocab):
    """The CONTEXT prompt ids prices are measured after (any ids do: a call's cost does not read them)."""
    return [1 + i % (vocab - 1) for i in range(CONTEXT)]


def _timer(model, vocab, n_tokens, compiled):
    """A function timing one cached forward over n_tokens new tokens, as the engine calls it, after a CONTEXT-token
    prefill; each call's tokens are forgotten again, so every call sees the same context."""
    call = CachedModel(model, "target", vocab, [Counters()], compiled, 2 * CONTEXT, n_tokens)  # counts unread
    call.prefill([context_ids(vocab)])

    def once():
        _synchronize(model.device)
        start = time.perf_counter()
        call([[5] * n_tokens])
        _synchronize(model.device)
        seconds = time.perf_counter() - start
        call.forget(0, n_tokens)
        call.settle()
        return seconds
    return once


def calls_seconds(calls, repeats=7, summary=statistics.median):
    """Median seconds (``summary`` of the rounds) of each call in ``calls`` ({key: (model, vocab, n_tokens,
    compiled)}; ``compiled``: the static-cache path, or None), timed in alternation, one of each per round after a
    warm-up round (which also compiles): a machine whose speed drifts while they are measured prices them all alike
    (this 2-core VM's speed changes by a third within minutes)."""
    with torch.inference_mode():
        timers = {key: _timer(*call) for key, call in calls.items()}
        times = {key: [] for key in timers}
        for round_ in range(repeats + 1):
            for key, once in timers.items():
                seconds = once()
                if round_:
                    times[key].append(seconds)
    return {key: summary(values) for key, values in times.items()}


def call_seconds(model, vocab, n_tokens=1, repeats=7, compiled=None):
    """Median seconds of one cached forward over n_tokens new tokens, as the engine calls it."""
    return calls_seconds({"call": (model, vocab, n_tokens, compiled)}, repeats)["call"]


@dataclass(frozen=True)
class Prices:
    """Seconds of a one-token target call, a draft call and the verification of a block of ``block`` tokens, and
    the engine's own seconds per block beyond the calls (``overhead``, once measured: batch.measure_overhead)."""

    target: float
    draft: float
    verify: float
    block: int
    overhead: float = 0.0

    @property
    def c(self):
        return self.draft / self.target

    @property
    def verify_ratio(self):
        return self.verify / self.target

    def to_dict(self):
        return dict(target_ms=1000 * self.target, draft_ms=1000 * self.draft, verify_ms=1000 * self.verify,
                    block=self.block, c=self.c, verify_in_target_tokens=self.verify_ratio,
                    engine_ms_per_block=1000 * self.overhead)


def measured_c(pair):
    """c = (one draft call) / (one target call) of this pair's draft (a draft model's or an EAGLE-3 head's) as
    measured on this machine, or None before its prices are measured (and on the compiled path)."""
    target, draft = (pair.prices.get((role, 1)) for role in ("target", "draft"))
    return None if target is None or draft is None else draft / target


def _calls(gamma):
    return ("target", 1), ("draft", 1), ("target", gamma + 1)


def measured_prices(pair, gamma):
    """The pair's prices for blocks of gamma + 1 tokens on this machine (measured once per pair and block length),
    with the engine's own seconds per block where they have been measured; None on the compiled path."""
    if pair.compiled:
        return None
    measure_prices(pair, [gamma])
    return _prices(pair, gamma)


def _prices(pair, gamma):
    return Prices(*(pair.prices[key] for key in _calls(gamma)), gamma + 1, pair.overhead or 0.0)


def missing_prices(pair, gammas):
    """Whether any price for blocks of these gammas is still to be measured (none is, on the compiled path)."""
    return not pair.compiled and any(key not in pair.prices for g in gammas for key in _calls(g))


def measure_prices(pair, gammas):
    """Measure every price blocks of these gammas need (those not measured yet), all in one alternation; nothing on
    the compiled path."""
    if not missing_prices(pair, gammas):
        return
    missing = {key for g in gammas for key in _calls(g) if key not in pair.prices}
    model = {"target": pair.target, "draft": pair.draft}
    pair.prices.update(calls_seconds({(role, n): (model[role], pair.vocab_size, n, None)
                                      for role, n in sorted(missing)}))


@dataclass(frozen=True)
class AutoPrices:
    """What gamma "auto" prices each block length with (``by_gamma``: gamma -> Prices, the engine's own seconds per
    block in each), as the block loop reads them: read off the pair, never measured there (the caller measured
    them before any row of gamma "auto" decodes: batch.measure_auto_prices), so no row's clock counts them."""

    by_gamma: dict

    @classmethod
    def of(cls, pair, gammas):
        if missing_prices(pair, gammas) or pair.overhead is None:
            raise ValueError('gamma "auto" reads prices measured before its rows decode (batch.measure_auto_prices), '
                             "and this pair's are not")
        return cls({gamma: _prices(pair, gamma) for gamma in gammas})

    def __call__(self, gamma):
        """(target, draft, verification, overhead) seconds of a block of gamma + 1 tokens, as costs.best_gamma reads
        them."""
        p = self.by_gamma[gamma]
        return p.target, p.draft, p.verify, p.overhead


def block_prices(pair, overhead=0.0):
    """gamma -> (target, draft, verification, overhead) seconds, as costs.best_gamma reads them; ``overhead``: the
    engine's own seconds per block, as the run measures them."""
    def price(gamma):
        p = measured_prices(pair, gamma)
        return p.target, p.draft, p.verify, overhead
    return price
