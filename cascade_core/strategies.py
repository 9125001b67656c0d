"""Four ways to spend a draft and a target on one prompt, each run for real and timed call by call:

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
from .engine import mapped, stream
from .running import OTHER_ROWS

STRATEGIES = ("cascade", "speculative decoding", "speculative cascade", "sequential cascade")
NEEDS_THE_DRAFT_ALONE = {
    "cascade": "the cascade lets the draft answer alone, and this pair's draft is {described}",
    "sequential cascade": "the sequential cascade calls the target only where the rule defers, and this pair's "
                          "draft is {described} at every position",
}


def lane(name, traces, extra=None):
    """One strategy's calls on a shared clock (later traces start where earlier ones ended), its text and totals."""
    calls, offset = [], 0.0
    for trace in traces:
        calls += [[role, start + offset, end + offset] for role, start, end in trace.counters.get("timeline", [])]
        offset += trace.counters["wall_seconds"]  # prefill included
    final = traces[-1]
    totals = dict(seconds=offset, tokens=len(final.positions),
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

    alone = pair.drafting.runs_alone
    if alone:
        drafted = yield from run("cascade", rule="draft", alpha=0.0)
        confidence = sum(pos["max_q"] for pos in drafted.positions) / max(1, len(drafted.positions))
        cascade = [drafted] + ([(yield from run("cascade", rule="target", alpha=0.0))] if confidence < threshold else [])
        lanes.append(lane("cascade", cascade, dict(confidence=confidence, threshold=threshold,
                                                   deferred=len(cascade) > 1)))
    else:
        lanes.append(skipped("cascade", pair.drafting))
    lanes.append(lane("speculative decoding", [(yield from run("speculative decoding", rule="lossless", alpha=0.0))]))
    lanes.append(lane("speculative cascade", [(yield from run("speculative cascade", rule=rule, alpha=alpha))]))
    lanes.append(lane("sequential cascade", [(yield from run("sequential cascade", rule=rule, alpha=alpha,
                                                              sequential=True))]) if alone else
                 skipped("sequential cascade", pair.drafting))
    return lanes
