"""The quality/cost frontier of rules over a prompt set: every (prompt, rule, alpha, seed), in-process or on Ray."""
from typing import NamedTuple

from cascade_core import MAX_BATCH_ROWS, RULES, finish, get_rule, mapped, stream_lanes
from cascade_core.decoding.generation import one_run
from cascade_core.decoding.run_settings import MAX_GAMMA, MAX_NEW_TOKENS, temperature_value, whole_number
from cascade_core.formats.loading import parse_pair
from cascade_core.speed.prices import measure_prices

from .alphas import alphas_per_rule, check_alphas, needs_pilot, parse_alphas
from .chain import chain_lane, load_named_pair
from .packages import check_packages
from .store import SweepFolder

PILOT_RULE = "lossless"  # the pilot run whose a* (of every rule) places the auto alphas
LANES = 8  # chains decoded side by side, at most, in one batch (see docs/lab/2026-12-01-batches.md)


def chain_key(row):
    return row["prompt_id"], row["rule"], row["seed"]


def pilot_steps(pair, prompts, gamma, temperature, max_new_tokens, lanes=MAX_BATCH_ROWS, batches=None):
    """Positions of one lossless run per prompt (seed 0; ``lanes`` of them side by side), each holding a* of every
    rule; yields the running Traces after every block."""
    runs = [one_run(dict(prompt=item["prompt"], rule=PILOT_RULE, alpha=0.0, temperature=temperature, seed=0,
                         max_new_tokens=max_new_tokens)) for item in prompts]
    traces = yield from stream_lanes(pair, runs, gamma=gamma, width=lanes, batches=batches)
    return [pos for trace in traces for pos in trace.positions]


def pilot_positions(pair, prompts, gamma, temperature, max_new_tokens):
    """pilot_steps' positions at once."""
    return finish(pilot_steps(pair, prompts, gamma, temperature, max_new_tokens))


def check(rules, seeds, gamma, temperature, max_new_tokens):
    for rule in rules:
        get_rule(rule)
    if not rules:
        raise ValueError(f"rules: name at least one of {', '.join(RULES)}")
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    for seed in seeds:
        whole_number(seed, "seed", 0, 2**63 - 1)
    whole_number(gamma, "gamma", 1, MAX_GAMMA)
    temperature_value(temperature)
    whole_number(max_new_tokens, "max_new_tokens", 1, MAX_NEW_TOKENS)


class Progress(NamedTuple):
    """A sweep's step: the pilot runs or the chains (``done`` of ``total`` chains finished), the Traces running and
    the rows of the chains finished (a frontier drawn as it comes)."""

    stage: str
    done: int
    total: int
    traces: list
    rows: tuple = ()

    @property
    def tokens(self):
        """Tokens so far of the runs going on."""
        return sum(len(trace.positions) for trace in self.traces)


def reporting(lane, finished):
    """The lane, calling finished(rows) with its rows as it ends."""
    rows = yield from lane
    finished(rows)
    return rows


def sweep(pair_spec, prompts, rules, alphas="auto:6", seeds=(0,), **options):
    """Rows, one per (prompt, rule, alpha, seed) (see chain.row for the keys); the arguments are sweep_steps'."""
    return finish(sweep_steps(pair_spec, prompts, rules, alphas, seeds, **options))


def checked(pair_spec, rules, alphas, seeds, gamma, temperature, max_new_tokens, lanes):
    """A sweep's settings, each checked before any model loads: (rules, seeds, alphas, lanes) as it runs them."""
    rules, seeds = list(rules), list(seeds)
    check(rules, seeds, gamma, temperature, max_new_tokens)
    alphas = parse_alphas(alphas)
    check_alphas(rules, alphas)
    parse_pair(pair_spec)
    return rules, seeds, alphas, whole_number(lanes, "lanes", 1, MAX_BATCH_ROWS)


def resumed(folder, chains, per_rule):
    """{chain key: rows} of the chains a resumed sweep's folder holds finished at this sweep's alphas (the folder
    rewritten to them alone)."""
    done = {}
    for row in folder.finished_rows() if folder else []:
        done.setdefault(chain_key(row), []).append(row)
    done = {key: rows for key, rows in done.items() if [r["alpha"] for r in rows] == per_rule[key[1]]}
    if folder:
        folder.rewrite([r for item, rule, seed in chains for r in done.get((item["prompt_id"], rule, seed), [])])
    return done


def sweep_steps(pair_spec, prompts, rules, alphas="auto:6", seeds=(0,), *, gamma=4, temperature=1.0,
                max_new_tokens=64, share_prefix=True, ray=False, ray_address=None, out=None, progress=None, pair=None,
                lanes=LANES, batches=None):
    """A sweep block by block: yields a Progress after every block of the pilot and of each chain run here (on Ray,
    nothing until every chain is back) and returns the rows. ``prompts``: dicts as load_prompts makes them;
    ``alphas``: 'auto:N' or a list, checked against each rule's range; ``out``: a folder that keeps rows.jsonl
    (resumable) and sweep.json; ``ray``/``ray_address``: run the chains on a local Ray instance or an existing
    cluster; ``progress(done, total, rows)``: called as chains finish; ``pair``: an already loaded pair
    (in-process only); ``lanes``: how many chains (and pilot runs) decode side by side in one batch (1: one after
    another); ``batches``: the RunningBatches to decode in (a server's; by default the sweep's own)."""
    rules, seeds, alphas, lanes = checked(pair_spec, rules, alphas, seeds, gamma, temperature, max_new_tokens, lanes)
    check_packages(prompts, ray or ray_address)
    settings = dict(pair=pair_spec, rules=rules, alphas=alphas, seeds=seeds, gamma=gamma, temperature=temperature,
                    max_new_tokens=max_new_tokens, prompts=[p["prompt_id"] for p in prompts])
    folder = SweepFolder(out, settings) if out else None
    pair = pair or load_named_pair(pair_spec)
    chains = [(item, rule, seed) for item in prompts for rule in rules for seed in seeds]
    positions = []
    if needs_pilot(rules, alphas):
        pilot = pilot_steps(pair, prompts, gamma, temperature, max_new_tokens, lanes, batches)
        positions = yield from mapped(pilot, lambda traces: Progress("pilot", 0, len(chains), traces))
    per_rule = alphas_per_rule(rules, alphas, positions)
    done = resumed(folder, chains, per_rule)
    todo = [chain for chain in chains if (chain[0]["prompt_id"], chain[1], chain[2]) not in done]

    def finished(rows):
        done[chain_key(rows[0])] = rows
        if folder:
            folder.append(rows)
        if progress:
            progress(len(done), len(chains), rows)

    if ray or ray_address:
        from .distributed import run_on_ray

        run_settings = dict(gamma=gamma, temperature=temperature, max_new_tokens=max_new_tokens,
                            share_prefix=share_prefix)
        run_on_ray(pair_spec, [(item, rule, per_rule[rule], seed) for item, rule, seed in todo], run_settings,
                   ray_address, finished)
    else:
        chain_lanes = [reporting(chain_lane(pair, item, rule, per_rule[rule], seed, temperature, max_new_tokens,
                                            share_prefix), finished) for item, rule, seed in todo]
        measure_prices(pair, [gamma])  # before any run's clock starts (the rows' projected speed-ups)
        steps = stream_lanes(pair, chain_lanes, gamma=gamma, width=lanes, batches=batches)
        yield from mapped(steps, lambda traces: Progress("chain", len(done), len(chains), traces,
                                                          tuple(r for rows in done.values() for r in rows)))
    rows = [r for item, rule, seed in chains for r in done[item["prompt_id"], rule, seed]]
    if folder:
        folder.rewrite(rows)  # chains finish in any order side by side; the file keeps the sweep's order
    return rows

