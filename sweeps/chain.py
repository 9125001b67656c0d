"""One chain of a sweep: a (prompt, rule, seed) run at each of its alphas in order, and the rows they make."""
from cascade_core import RULES, finish, load_pair, stream_lanes
from cascade_core.decoding.batch_block import run_prices
from cascade_core.decoding.trace import pi_is_q_or_p
from cascade_core.formats.loading import parse_pair
from cascade_core.method.acceptance_metrics import KEPT, metrics
from cascade_core.method.costs import fresh_run_calls, fresh_run_steps, speedup_over_target
from cascade_core.speed.prices import measure_prices

from .quality import exact_match, rouge_l, target_nll, target_view

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
    makes that exact, so its row equals a fresh run's (costs included: see fresh_run_calls). Only where pi is q or p
    by position: a token rule's pi at a token both alphas keep moves with alpha (through eta, Eq. 11), and lossy's
    output with its lenience, so a reused position's TV to the target would be another alpha's; those run afresh."""
    share_prefix = share_prefix and pi_is_q_or_p(rule)
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


def projected_speedup(pair, trace):
    """Explore's number for this text: its speed-up over the target alone priced with the pair's calls as measured
    on this machine (costs.speedup_over_target, once per pair and gamma); None for a pair that is not priced (the
    compiled path)."""
    return speedup_over_target(trace.sources, trace.settings["rule"], trace.gamma, run_prices(pair, trace.gamma))


def row(pair, item, trace, alpha):
    """A sweep row: what was asked, what came out, what it cost and how good it is."""
    s = trace.settings
    rule, gamma, n = s["rule"], s["gamma"], len(trace.positions)
    target_calls, draft_calls = fresh_run_calls(trace.sources, rule, gamma, s["max_new_tokens"])
    p_tokens, top1, tv = target_view(pair, trace)
    cascade = RULES[rule].kind != "baseline"
    acceptance = sum(src in KEPT for src in trace.sources) / n if cascade and n else None
    return dict(prompt_id=item["prompt_id"], category=item["category"], draft=pair.draft_kind, rule=rule,
                alpha=alpha, seed=s["seed"], gamma=gamma, temperature=s["temperature"], tokens=n, text=trace.text,
                target_calls=target_calls,
                draft_calls=draft_calls, acceptance_rate=acceptance, deferral_rate=trace.stats["deferral_rate"],
                wall_seconds=trace.counters["wall_seconds"], cost_ratio=trace.stats["cost_ratio"],
                projected_speedup=projected_speedup(pair, trace),
                tv_to_target=tv, target_nll=target_nll(p_tokens), target_top1=sum(top1) / n if n else None,
                rouge_l=rouge_l(trace.text, item["reference"]), exact_match=exact_match(trace.text, item["answer"]),
                generated_tokens=trace.stats["new_tokens"],
                speculative_decoding=metrics(fresh_run_steps(trace.sources, gamma, s["max_new_tokens"]))
                if cascade else None)
