"""What a block costs on this machine, measured on the loaded pair.

The cost model (costs.py) prices a block by three calls, each as the engine makes it (a cached forward after a
64-token context, median of 7 after a warm-up): a one-token target call (what target-only decoding pays per
token), a one-token draft call, and the target's verification of a block's n tokens. In units of the first,
c = draft / target and v(n) = verification(n) / target; the paper assumes v = 1, but a small CPU pays more
for n rows than for one. Each price is measured the first time it is asked for and kept on the pair.
"""
import statistics
import time
from dataclasses import dataclass

import torch

from .cached import CachedModel

CONTEXT = 64  # tokens already in the cache when a price is measured: a short answer's length


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def call_seconds(model, vocab, n_tokens=1, repeats=7, compiled=None):
    """Median seconds of one cached forward over n_tokens new tokens, as the engine calls it (``compiled``: the
    static-cache path; its first call, which compiles, is not timed)."""
    times = []
    with torch.inference_mode():
        call = CachedModel(model, "model", vocab, [{"model_calls": 0, "model_seconds": 0.0}], compiled, 2 * CONTEXT,
                           n_tokens)
        call.prefill([list(range(1, CONTEXT + 1))])
        for i in range(repeats + 1):
            _synchronize(model.device)
            start = time.perf_counter()
            call([[5] * n_tokens])
            _synchronize(model.device)
            times += [time.perf_counter() - start] * (i > 0)
            call.forget(0, n_tokens)
            call.settle()
    return statistics.median(times)


@dataclass(frozen=True)
class Prices:
    """Seconds of a one-token target call, a draft call and the verification of a block of ``block`` tokens."""

    target: float
    draft: float
    verify: float
    block: int

    @property
    def c(self):
        return self.draft / self.target

    @property
    def verify_ratio(self):
        return self.verify / self.target

    def to_dict(self):
        return dict(target_ms=1000 * self.target, draft_ms=1000 * self.draft, verify_ms=1000 * self.verify,
                    block=self.block, c=self.c, verify_in_target_tokens=self.verify_ratio)


def measured_prices(pair, gamma):
    """The pair's prices for blocks of gamma + 1 tokens on this machine (measured once per pair and block length)."""
    compiled = pair.compiled or {}

    def price(role, n):
        key = (role, n)
        if key not in pair.prices:
            model = pair.target if role == "target" else pair.draft
            pair.prices[key] = call_seconds(model, pair.vocab_size, n, compiled=compiled.get(role))
        return pair.prices[key]

    return Prices(price("target", 1), price("draft", 1), price("target", gamma + 1), gamma + 1)


def missing_prices(pair, gammas):
    """Whether any price for blocks of these gammas is still to be measured."""
    return any(key not in pair.prices for g in gammas for key in (("target", 1), ("draft", 1), ("target", g + 1)))


def measure_prices(pair, gammas):
    """Measure every price blocks of these gammas need (those not measured yet)."""
    for gamma in gammas:
        measured_prices(pair, gamma)


def block_prices(pair, overhead=0.0):
    """gamma -> (target, draft, verification, overhead) seconds, as costs.best_gamma reads them; ``overhead``: the
    engine's own seconds per block, as the run measures them."""
    def price(gamma):
        p = measured_prices(pair, gamma)
        return p.target, p.draft, p.verify, overhead
    return price
