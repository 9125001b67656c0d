"""gamma "auto"'s floor: a lossless row whose best block the cost model prices slower than the target alone takes the
target's own token (source "target"), exact because lossless's pi is p; every PROBE_EVERY-th block drafts again.
Pinned against the naive reference loops (draft model and head), a chi-square and batch == solo (its replay:
tests/test_replay.py)."""
from dataclasses import replace

import pytest
import torch

from cascade_core import generate, generate_batch
from cascade_core.decoding.batch_block import PROBE_EVERY, floored
from cascade_core.decoding.row import start_row
from cascade_core.decoding.run_settings import TARGET_ALONE, RunSettings
from cascade_core.formats.loading import tiny_pair
from cascade_core.method.costs import fresh_run_calls
from cascade_core.reference import reference_generate
from test_auto_gamma import priced
from test_distribution import chi_square_p_value
from test_head import head_pair, head_folder, prompt_ids, reference_head, reference_head_generate  # noqa: F401

PROMPT = [5, 6, 7]


def dear(pair):
    """Prices at which no block pays at any acceptance (a draft call as dear as a target call), and no end-of-text,
    so that every run is as long as asked."""
    return priced(replace(pair, eos_token_ids=[]), 1.0, 1.0, 0.3)


def schedule(trace):
    """Per block, in order: TARGET_ALONE where its token is the target's own, else the gamma the run chose."""
    gammas, blocks = iter(trace.counters.get("gammas", [])), {}
    for pos in trace.positions:
        blocks.setdefault(pos["block"], pos["source"])
    return [TARGET_ALONE if source == "target" else next(gammas) for source in blocks.values()]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_floor_equals_the_reference_loop(tiny64, temperature):
    trace = generate(dear(tiny64), prompt_ids=PROMPT, rule="lossless", gamma="auto", temperature=temperature,
                     seed=4, max_new_tokens=40)
    alone = [i for i, s in enumerate(trace.sources) if s == "target"]
    drafted = len(trace.counters["gammas"])
    assert len(alone) >= 30 and drafted >= 3  # mostly the target's own, and the probes drafted
    assert trace.tokens == reference_generate(dear(tiny64), PROMPT, "lossless", 0.0, temperature, 4, 40,
                                              target_alone=set(alone))
    assert (trace.counters["target_calls"], trace.counters["draft_calls"]) == (len(alone) + drafted, 2 * drafted)
    assert fresh_run_calls(trace.sources, "lossless", 1, 40) == (trace.counters["target_calls"],
                                                               trace.counters["draft_calls"])
    if temperature == 0:  # lossless greedy is target greedy, floor or not
        target = generate(dear(tiny64), prompt_ids=PROMPT, rule="target", temperature=0.0, max_new_tokens=40)
        assert trace.tokens == target.tokens


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_floor_with_a_head_equals_the_reference_loop(head_pair, reference_head, prompt_ids, temperature):  # noqa: F811
    """The head catches up on the positions it skipped (their ids and the target's features) before it drafts."""
    pair = dear(head_pair)
    trace = generate(pair, prompt_ids=prompt_ids, rule="lossless", gamma="auto", temperature=temperature, seed=7,
                     max_new_tokens=30)
    blocks = schedule(trace)
    assert blocks.count(TARGET_ALONE) >= 20 and len(blocks) - blocks.count(TARGET_ALONE) >= 2
    assert trace.tokens == reference_head_generate(pair, reference_head, prompt_ids, "lossless", 0.0, temperature, 7,
                                                   30, blocks)


def test_a_probe_drafts_from_the_state_a_fresh_run_has(head_pair, prompt_ids):  # noqa: F811
    """After target-alone blocks the head's q at a probe is the one a run resumed there computes from scratch."""
    pair = dear(head_pair)
    trace = generate(pair, prompt_ids=prompt_ids, rule="lossless", gamma="auto", temperature=1.0, seed=7,
                     max_new_tokens=30)
    probe = next(i for i, s in enumerate(trace.sources) if s != "target")
    resumed = generate(pair, resume=(trace, probe), rule="lossless", gamma=1, temperature=1.0, seed=7,
                       max_new_tokens=probe + 2)
    got, want = resumed.positions[probe], trace.positions[probe]
    assert got["proposal"] == want["proposal"] and abs(got["q_x"] - want["q_x"]) < 1e-6


def test_the_floors_first_token_follows_p():
    pair = dear(tiny_pair(dtype=torch.float64, vocab_size=8))
    with torch.no_grad():
        p = torch.softmax(pair.target(torch.tensor([PROMPT])).logits[0, -1, :8], -1)
    n, counts = 1504, torch.zeros(8, dtype=torch.float64)
    for start in range(0, n, 32):  # rows are their solo runs (test_a_floored_row_in_a_batch_is_its_solo_run)
        rows = [dict(prompt_ids=PROMPT, rule="lossless", gamma="auto", seed=seed, max_new_tokens=1)
                for seed in range(start, start + 32)]
        for trace in generate_batch(pair, rows):
            assert trace.sources == ["target"]
            counts[trace.tokens[0]] += 1
    assert chi_square_p_value(counts, p, n) > 1e-3


def test_only_lossless_rows_priced_below_the_target_alone_are_floored(tiny64):
    pair = dear(tiny64)
    for rule, alpha in (("v3", 0.5), ("chow", 0.5), ("lossy", 0.5), ("opt", 0.1)):  # pi reads q: they draft
        trace = generate(pair, prompt_ids=PROMPT, rule=rule, alpha=alpha, gamma="auto", seed=4, max_new_tokens=20)
        assert "target" not in trace.sources, rule
    cheap = generate(priced(tiny64, 1.0, 0.01, 0.0), prompt_ids=PROMPT, rule="lossless", gamma="auto", seed=4,
                     max_new_tokens=20)
    fixed = generate(pair, prompt_ids=PROMPT, rule="lossless", gamma=1, seed=4, max_new_tokens=20)
    assert "target" not in cheap.sources + fixed.sources


def test_a_probe_every_probe_every_blocks(tiny64):
    row = start_row(tiny64, RunSettings(rule="lossless", gamma="auto"), prompt_ids=PROMPT)
    assert floored(row, 0.9) and not floored(row, 1.0)
    row.trace.positions = [{"source": "target"}] * PROBE_EVERY
    assert not floored(row, 0.5)  # the probe
    row.trace.positions = [{"source": "target"}] * (PROBE_EVERY - 1) + [{"source": "replaced"}]
    assert floored(row, 0.5)


def test_a_floored_row_in_a_batch_is_its_solo_run(tiny64):
    pair = dear(tiny64)
    rows = [dict(prompt_ids=PROMPT, rule="lossless", gamma="auto", seed=4, temperature=1.0, max_new_tokens=30),
            dict(prompt_ids=[9, 3], rule="v3", alpha=0.5, gamma=3, seed=1, max_new_tokens=25),
            dict(prompt_ids=[2], rule="lossless", gamma="auto", seed=2, max_new_tokens=20),
            dict(prompt_ids=[4, 4, 4], rule="target", seed=3, max_new_tokens=12)]
    batched = generate_batch(pair, rows)
    for fields, trace in zip(rows, batched):
        solo = generate(pair, **fields)
        assert (trace.tokens, trace.sources) == (solo.tokens, solo.sources)
        for key in ("target_calls", "draft_calls", "gammas"):
            assert trace.counters.get(key) == solo.counters.get(key)
    assert "target" in batched[0].sources and "target" in batched[2].sources


def test_the_floor_is_shown_and_priced_as_the_target_alone(tiny64):
    from app.viz.stats import speedup_markdown, stats_markdown
    from cascade_core.speed.prices import Prices
    from app.viz.tokens import explain, inspector_html, legend_html, tokens_html, tooltip
    from cascade_core.method.costs import with_target_alone

    trace = generate(dear(tiny64), prompt_ids=PROMPT, rule="lossless", gamma="auto", seed=4, max_new_tokens=20)
    i = trace.sources.index("target")
    s = trace.stats
    drafted = len(trace.positions) - s["target"]
    assert s["acceptance_rate"] == (s["accepted"] + s["deferred"]) / drafted  # over the positions the draft proposed
    assert s["target_alone_share"] == s["target"] / len(trace.positions)
    assert f'class="tok target-only" data-pos="{i}"' in tokens_html(trace.positions, trace.sources, "lossless")
    assert "sampled from the target alone (gamma auto's floor" in tooltip(i, trace.positions[i], "target-only",
                                                                          "lossless")
    for rule in ("lossless", "v3"):  # whatever rule the page shows, nothing was proposed there
        assert explain(rule, trace.positions[i], 0.5).startswith("The target's own token: gamma \"auto\" priced")
    assert f"{s['target']} the target's own" in stats_markdown(s)
    assert "gamma auto&#x27;s floor" in legend_html(regenerates=False, sources=set(trace.sources))
    assert "target-only" not in legend_html(regenerates=False, sources={"accepted", "replaced"})
    assert "target only, block" in inspector_html(i, trace.positions[i], "", "", "lossless")
    speedup = speedup_markdown(s, "auto", Prices(0.04, 0.01, 0.05, 2), 1.0, block_gamma=1)
    assert f"{s['target_alone_share']:.0%} of the tokens the target's own" in speedup
    assert with_target_alone(2.0, 0.0) == 2.0 and with_target_alone(2.0, 1.0) == 1.0
    assert abs(with_target_alone(2.0, 0.5) - 1 / (0.5 + 0.25)) < 1e-12


def test_the_floor_draws_no_a_star_and_regenerates_under_another_rule(tiny64):
    """Nothing was proposed at a floor token, so it has no a* to draw or to place an alpha with, and under another
    rule (which would have drafted there) it is regenerated."""
    from app.viz.figures import critical_alpha_figure, inspector_figure, step_figure
    from sweeps.alphas import proposed_a_stars

    trace = generate(dear(tiny64), prompt_ids=PROMPT, rule="lossless", gamma="auto", seed=4, max_new_tokens=20)
    floor = [i for i, s in enumerate(trace.sources) if s == "target"]
    assert floor and all(trace.positions[i]["a_star"] == {} for i in floor)
    assert len(proposed_a_stars("v3", trace.positions)) == len(trace.positions) - len(floor)
    for rule in ("lossless", "v3"):
        sources, first_changed = trace.recolour(rule, 0.5)
        assert first_changed is None if rule == "lossless" else first_changed <= floor[0]
        points = critical_alpha_figure(trace.positions, sources, rule, 0.5, (0.0, 1.0), first_changed).data
        assert sum(len(t.x) for t in points) == len(trace.positions) - len(floor)
        names = {t.name for t in step_figure(trace.positions, sources, rule, 0.5, first_changed).data}
        assert not any(name.endswith(", target") for name in names)  # drawn as "target only" where drawn at all
        assert (rule == "v3") == any(name.startswith("threshold: ") for name in names)  # lossless has none
    inspector = inspector_figure(trace.positions[floor[0]], "v3", 0.5)
    assert inspector.layout.annotations[0].text == "draft q: none (floor)" and len(inspector.data) == 1
    assert "alone" in inspector.layout.title.text
