"""One chain of a sweep: a (prompt, rule, seed) run at each of its alphas in order, and the rows they make."""
from cascade_core import RULES, finish, load_pair, stream_lanes
from cascade_core.costs import fresh_run_calls, priced_speedup
from cascade_core.models import parse_pair
from cascade_core.prices import measure_prices, measured_prices

from .quality import exact_match, rouge_l, target_nll, target_probabilities

TIMING_FIELDS = ("wall_seconds", "cost_ratio", "projected_speedup")


def load_named_pair(pair_spec):
    """The pair a spec names; any failure to load it is one sentence."""
    try:
        return load_pair(**parse_pair(pair_spec), progress=lambda m: None)
    except ValueError:
        raise
    except Exception as error:  # a broken download, a missing file: say which pair and why
        raise ValueError(f"the pair {pair_spec!r} could not be loaded: {type(error).__name__}: {error}") from None


def chain_lane(pair, item, rule, alphas, seed, temperature, max_new_tokens, share_prefix=True):
    """Rows for one (prompt, rule, seed), alphas in increasing order, as a lane of ``stream_lanes``: yields each run
    (a batch row), is sent its finished Trace, and returns the rows. With ``share_prefix`` each run after the first
    resumes from the first token whose decision flips under its alpha (Trace.recolour); position-keyed randomness
    makes that exact, so its row equals a fresh run's (costs included: see fresh_run_calls)."""
    rows, previous = [], None
    settings = dict(temperature=temperature, seed=seed, max_new_tokens=max_new_tokens, details=False)
    for alpha in alphas:
        value = 0.0 if alpha is None else alpha
        if share_prefix and previous is not None:
            _, k = previous.recolour(rule, value)
            trace = yield dict(rule=rule, alpha=value, **settings,
                               resume=(previous, len(previous.positions) if k is None else k))
        else:
            trace = yield dict(prompt=item["prompt"], rule=rule, alpha=value, **settings)
        if trace.error:
            raise ValueError(f"{rule} alpha {value:g} on prompt {item['prompt_id']}: {trace.error}")
        rows.append(row(pair, item, trace, alpha))
        previous = trace
    return rows


def run_chain(pair, item, rule, alphas, seed, gamma=4, **settings):
    """One chain's rows at once."""
    measure_prices(pair, [gamma])  # before any run's clock starts
    return finish(stream_lanes(pair, [chain_lane(pair, item, rule, alphas, seed, **settings)], gamma=gamma))[0]


def projected_speedup(pair, trace, acceptance, gamma):
    """Explore's projection: the cost model priced with the pair's calls as measured on this machine (once per pair
    and gamma) and the run's own engine time per block, against target-only decoding; None for a pair that is not
    priced (the compiled path)."""
    prices = measured_prices(pair, gamma)
    if prices is None:
        return None
    overhead = trace.stats["overhead_seconds_per_block"] or 0.0
    return priced_speedup(acceptance, gamma, prices.target, prices.draft, prices.verify, overhead)


def row(pair, item, trace, alpha):
    """A sweep row: what was asked, what came out, what it cost and how good it is."""
    s = trace.settings
    rule, gamma, n = s["rule"], s["gamma"], len(trace.positions)
    target_calls, draft_calls = fresh_run_calls(trace.sources, rule, gamma, s["max_new_tokens"])
    if rule == "draft":  # the target never ran: score the text with one target pass
        p_tokens, top1 = target_probabilities(pair, trace.prompt_ids, trace.tokens)
    else:
        p_tokens = [pos["p_token"] for pos in trace.positions]
        top1 = [pos["p_token"] >= pos["max_p"] for pos in trace.positions]
    cascade = RULES[rule].kind != "baseline"
    acceptance = sum(src in ("accepted", "deferred") for src in trace.sources) / n if cascade and n else None
    return dict(prompt_id=item["prompt_id"], category=item["category"], draft=pair.draft_kind, rule=rule,
                alpha=alpha, seed=s["seed"], gamma=gamma, temperature=s["temperature"], tokens=n, text=trace.text,
                target_calls=target_calls,
                draft_calls=draft_calls, acceptance_rate=acceptance, deferral_rate=trace.stats["deferral_rate"],
                wall_seconds=trace.counters["wall_seconds"], cost_ratio=trace.stats["cost_ratio"],
                projected_speedup=projected_speedup(pair, trace, acceptance, gamma) if cascade and n else None,
                target_nll=target_nll(p_tokens), target_top1=sum(top1) / n if n else None,
                rouge_l=rouge_l(trace.text, item["reference"]), exact_match=exact_match(trace.text, item["answer"]),
                generated_tokens=trace.stats["new_tokens"])
