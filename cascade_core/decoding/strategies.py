"""Four ways to spend a draft and a target on one prompt, beside the target alone, each run for real and timed call
by call on the engine's own clock (its calls and its work, not a reader's time between blocks):

0. the target alone, what every speed-up is against;
1. a sequential cascade, this app's variant of the paper's SeqCascade [Chow] (Eq. 1, which defers the whole
   response iff the draft's sequence probability is below 1 - alpha): the draft answers in full; if its confidence,
   here the mean max q over its tokens (a length-free measure, where a sequence probability shrinks with every
   token), is below a threshold, the target answers again from scratch;
2. speculative decoding (lossless): the target's exact distribution, verified in blocks;
3. the speculative cascade with a rule and alpha;
4. the token-level sequential cascade with the same rule: one position at a time, the target only where the rule
   needs it. Its tokens are (3)'s; only the cost differs.

(1) and (4) need a draft that runs alone: with an EAGLE-3 head (which reads the target's hidden states) they are
skipped, each with the sentence that says why.
"""
import statistics

from cascade_core.decoding.batch_block import run_prices
from cascade_core.decoding.generation import mapped, stream
from cascade_core.decoding.running_batches import OTHER_ROWS
from cascade_core.method.costs import speedup_over_target

STRATEGIES = ("target alone", "cascade", "speculative decoding", "speculative cascade", "sequential cascade")
REPEATS = 3  # a timed comparison runs each of its runs this many times and reports the spread (a 2-core machine's
# speed changes by a third within minutes, so one timing can put either run first)
NEEDS_THE_DRAFT_ALONE = {
    "cascade": "the cascade lets the draft answer alone, and this pair's draft is {described}",
    "sequential cascade": "the sequential cascade calls the target only where the rule defers, and this pair's "
                          "draft is {described} at every position",
}


def lane(name, traces, extra=None, pair=None):
    """One strategy's calls on a shared clock (later traces start where earlier ones ended), its text and totals:
    ``seconds`` on that clock (the wall, where the calls lie), ``engine_seconds`` on the engine's own (its calls and
    work, not a reader's time between blocks: what lanes are compared by), and for a single run of blocks (or the
    target alone) its speed-up over the target alone priced with the pair's measured calls
    (costs.speedup_over_target, every tab's number)."""
    calls, offset, seconds = [], 0.0, 0.0
    for trace in traces:
        calls += [[role, start + offset, end + offset] for role, start, end in trace.counters.get("timeline", [])]
        # prefill included; the calls' clock starts when the batch's cache was made, which can be a little before the
        # row's own (batch_block.py's started), so a lane spans whichever ends later
        offset += max([trace.counters["wall_seconds"]] + [end for _, _, end in trace.counters.get("timeline", [])])
        seconds += trace.stats["engine_seconds"] or 0.0
    final = traces[-1]
    rule = final.settings["rule"]
    priced = pair is not None and len(traces) == 1 and not final.settings.get("sequential") and rule != "draft"
    totals = dict(seconds=offset, engine_seconds=seconds, tokens=len(final.positions),
                  speedup=speedup_over_target(final.sources, rule, final.gamma, run_prices(pair, final.gamma))
                  if priced else None,
                  target_calls=sum(t.stats["target_calls"] for t in traces),
                  draft_calls=sum(t.stats["draft_calls"] for t in traces),
                  **{OTHER_ROWS: max(t.counters.get(OTHER_ROWS, 0) for t in traces)}, **(extra or {}))
    return dict(name=name, calls=calls, text=final.text, positions=final.positions, sources=final.sources,
                totals=totals)


def skipped(name, drafting):
    """A strategy this pair's draft cannot run: no calls, no text, and why."""
    return dict(name=name, calls=[], text="", positions=[], sources=[], totals=None,
                skipped=NEEDS_THE_DRAFT_ALONE[name].format(described=drafting.described))


def strategy_steps(pair, prompt, settings, threshold, batches=None):
    """The four lanes (see the module's docstring) for one prompt, block by block: yields (strategy, the growing
    Trace, the list of lanes finished so far, which grows as they finish) after every block and returns the lanes;
    ``settings``: the speculative cascade's RunSettings (the other lanes change its rule); ``batches``: as for
    stream."""
    lanes, rule, alpha = [], settings.rule, settings.alpha

    def run(strategy, **kwargs):
        return mapped(stream(pair, prompt, settings=settings, batches=batches, **kwargs),
                      lambda trace: (strategy, trace, lanes))

    lanes.append(lane("target alone", [(yield from run("target alone", rule="target", alpha=0.0))], pair=pair))
    alone = pair.drafting.runs_alone
    if alone:
        drafted = yield from run("cascade", rule="draft", alpha=0.0)
        confidence = sum(pos["max_q"] for pos in drafted.positions) / max(1, len(drafted.positions))
        deferred = [(yield from run("cascade", rule="target", alpha=0.0))] if confidence < threshold else []
        cascade = [drafted] + deferred
        lanes.append(lane("cascade", cascade, dict(confidence=confidence, threshold=threshold,
                                                   deferred=len(cascade) > 1)))
    else:
        lanes.append(skipped("cascade", pair.drafting))
    lanes.append(lane("speculative decoding", [(yield from run("speculative decoding", rule="lossless", alpha=0.0))],
                      pair=pair))
    lanes.append(lane("speculative cascade", [(yield from run("speculative cascade", rule=rule, alpha=alpha))],
                      pair=pair))
    lanes.append(lane("sequential cascade", [(yield from run("sequential cascade", rule=rule, alpha=alpha,
                                                              sequential=True))]) if alone else
                 skipped("sequential cascade", pair.drafting))
    return lanes


def engine_rate(trace):
    """Tokens per second of the engine's own clock (its calls and its work, prefill included: batch_block.py), not the
    wall, which also counts the time a reader, such as the page's streaming and redraw, holds the stream."""
    seconds = trace.stats["engine_seconds"]
    return trace.stats["new_tokens"] / seconds if seconds else None


def spread(values):
    """(least, median, most) of a run's repeated timings."""
    return min(values), statistics.median(values), max(values)


def fastest(repeats):
    """Which run wrote its tokens fastest on the engine's clock: (its index by the median rate over the repeats, the
    fastest's index in each repeat). ``repeats``: per repeat, the same runs' traces in the same order; where the
    repeats name different runs the timing does not decide, and a verdict built on it must say so."""
    rates = [[engine_rate(trace) for trace in traces] for traces in repeats]
    medians = [statistics.median(rate[i] for rate in rates) for i in range(len(rates[0]))]
    return max(range(len(medians)), key=medians.__getitem__), [max(range(len(r)), key=r.__getitem__) for r in rates]


def faster_than(repeats, run, baseline):
    """Whether run ``run`` wrote its tokens faster than run ``baseline`` (indices into each repeat's traces) by the
    median over the repeats, and whether every repeat agreed."""
    wins = [engine_rate(traces[run]) > engine_rate(traces[baseline]) for traces in repeats]
    return 2 * sum(wins) > len(wins), len(set(wins)) == 1


def measured_speedup(repeats, run, baseline=0):
    """Run ``run``'s speed against run ``baseline`` on the engine's clock: the median over the repeats of each
    repeat's ratio of their rates (a repeat's runs ran one after another, on the machine as it was then)."""
    return statistics.median(engine_rate(traces[run]) / engine_rate(traces[baseline]) for traces in repeats)
