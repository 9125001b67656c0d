"""A block replayed (cascade_core/decoding/replay.py, the app's /block) is the run's own block: its kept proposals and
correction are the run's tokens of that block, each keep test is uniform < min(1, pi / q) with the position's own
uniform, and at temperature 1 its q and p are the trace's numbers. For every rule, both drafts, gamma 1 to 8 and
auto, temperature 0 and 1. A block gamma "auto"'s floor took replays too, as the target's own token, so the blocks of
a run, concatenated, are its tokens."""
import json

import pytest

from cascade_core import generate
from cascade_core.decoding.replay import FLOOR_REASON, replay_block
from cascade_core.method.rules import RULES
from cascade_core.method.sampling import ACCEPT, DRAFT, RESIDUAL, position_uniforms
from cascade_core.strict_json import dumps
from test_floor import dear
from test_head import head_folder, head_pair  # noqa: F401 (fixtures)

from rule_alphas import ALPHA as EVERY_ALPHA
ALPHA = {rule: a for rule, a in EVERY_ALPHA.items() if rule not in ("target", "draft")}
GAMMAS = [1, 2, 3, 4, 5, 6, 7, 8, "auto"]
N = 20


def run_blocks(trace):
    """The run's tokens and sources of each block, by block index."""
    blocks = {}
    for pos in trace.positions:
        tokens, sources = blocks.setdefault(pos["block"], ([], []))
        tokens.append(pos["token"])
        sources.append(pos["source"])
    return blocks


def check_replay(replayed, trace, settings):
    """Everything the issue says a replay is, against the run's own trace."""
    tokens, sources = run_blocks(trace)[replayed["block"]]
    start, positions = replayed["start"], replayed["positions"]
    assert (replayed["emitted"], replayed["sources"]) == (tokens, sources)
    assert trace.positions[start]["block"] == replayed["block"] and (start == 0 or trace.positions[start - 1]["block"]
                                                                     != replayed["block"])
    if sources == ["target"]:
        return check_target_alone(replayed, trace, settings)
    assert replayed["target_alone"] is None
    kept = [pos["token"] for pos in positions if pos["kept"]]
    correction = replayed["correction"]
    assert kept + ([correction["token"]] if correction else []) == tokens
    uniforms = position_uniforms(settings["seed"], range(start, start + len(positions)))
    lenience = settings["alpha"] if settings["rule"] == "lossy" else 0.0
    for j, pos in enumerate(positions):
        assert pos["uniform"] == float(uniforms[j, ACCEPT])
        assert pos["kept"] == (pos["uniform"] < pos["keep_probability"])
        if RULES[settings["rule"]].keep is not None:  # no pi: SGLang's min(1, p(x) / t), the others keep or reject
            assert pos["pi"] is None and pos["keep_probability"] == pytest.approx(
                min(1.0, pos["p"] / (1 - settings["alpha"])) if settings["rule"] == "sglang" else
                float(pos["keep_probability"] == 1.0), rel=1e-6)
        else:
            assert pos["keep_probability"] == pytest.approx(
                min(1.0, pos["pi"] / ((1 - lenience) * max(pos["q"], 1e-10))), rel=1e-12, abs=1e-15)
        assert pos["token"] == trace.positions[start + j]["proposal"]
        if settings["rule"] == "lossless":
            assert pos["pi"] == pos["p"]
        if settings["temperature"] == 1.0:  # the tempered numbers are the trace's temperature-1 ones
            assert (pos["q"], pos["p"]) == (trace.positions[start + j]["q_x"], trace.positions[start + j]["p_x"])
    assert all(pos["kept"] for pos in positions[:-1]) and positions[-1]["kept"] == (correction is None)
    assert len(positions) + len(replayed["discarded"]) == replayed["caches"]["read"]
    assert replayed["caches"]["kept"] == len(tokens) and replayed["caches"]["next_input"] == tokens[-1]
    if correction:
        assert correction["residual"] > 0 and correction["token"] == tokens[-1]
        assert replayed["residual_uniform"] == float(uniforms[-1, RESIDUAL])
        assert replayed["residual_top"][0]["probability"] >= correction["residual"]
        assert sum(t["probability"] for t in replayed["residual_top"]) <= 1 + 1e-9
    else:
        assert replayed["discarded"] == [] and replayed["residual_top"] == []
    assert json.loads(dumps(replayed))["emitted"] == tokens  # strict JSON


@pytest.mark.parametrize("rule", list(ALPHA))
@pytest.mark.parametrize("draft", ["model", "head"])
def test_a_replayed_block_is_the_runs_block(tiny64, head_pair, rule, draft):  # noqa: F811
    pair = tiny64 if draft == "model" else head_pair
    for i, gamma in enumerate(GAMMAS):
        temperature = (0.0, 1.0)[(i + (draft == "head")) % 2]  # each gamma at both temperatures over the two drafts
        settings = dict(rule=rule, alpha=ALPHA[rule], gamma=gamma, temperature=temperature, seed=i,
                        max_new_tokens=N, stop_at_eos=False)
        trace = generate(pair, "The cascade", **settings)
        blocks = sorted(b for b, (_, sources) in run_blocks(trace).items() if sources != ["target"])  # drafted ones
        # (the floor's blocks: test_the_blocks_of_a_run_with_floor_positions_concatenated_are_its_tokens)
        rejected = sorted({pos["block"] for pos in trace.positions if pos["source"] == "replaced"}) or blocks
        for block in {blocks[-1], rejected[i % len(rejected)]}:
            check_replay(replay_block(pair, "The cascade", block=block, **settings), trace, trace.settings)


def test_a_position_opens_the_block_that_emitted_it(tiny64):
    settings = dict(rule="v3", alpha=0.6, gamma=3, temperature=1.0, seed=4, max_new_tokens=N, stop_at_eos=False)
    trace = generate(tiny64, "The cascade", **settings)
    for i in (0, 7, N - 1):
        replayed = replay_block(tiny64, "The cascade", position=i, **settings)
        assert replayed["block"] == trace.positions[i]["block"]
        assert replayed["start"] <= i < replayed["start"] + len(replayed["emitted"])


def test_a_block_that_ends_in_a_rejection_shows_its_residual(tiny64):
    """At alpha 0 v3 defers every token but the target's best: many rejections, each with its residual."""
    settings = dict(rule="v3", alpha=0.0, gamma=4, temperature=1.0, seed=2, max_new_tokens=N, stop_at_eos=False)
    trace = generate(tiny64, "The cascade", **settings)
    replaced = [pos["block"] for pos in trace.positions if pos["source"] == "replaced"]
    replayed = replay_block(tiny64, "The cascade", block=replaced[0], **settings)
    assert replayed["correction"] and not replayed["positions"][-1]["kept"]
    assert replayed["correction"]["token"] in [t["token"] for t in replayed["residual_top"]] or \
        replayed["correction"]["residual"] <= replayed["residual_top"][-1]["probability"]


@pytest.mark.parametrize("kwargs, says", [
    (dict(block=11), "block=11 is out of range: this run has"),
    (dict(position=500), "position must be a whole number from 0 to 11, got 500"),
    (dict(block=-1), "block must be a whole number from 0 to 11, got -1"),
    (dict(block=2.5), "block must be a whole number from 0 to 11, got 2.5"),
    (dict(block=1, position=1), "either block"),
    (dict(block=0, rule="target"), "rule 'target' is a baseline"),
    (dict(block=0, rule="draft"), "rule 'draft' is a baseline"),
    (dict(block=0, sequential=True), "sequential cascade"),
])
def test_a_replay_refuses_in_one_sentence(tiny64, kwargs, says):
    settings = dict(rule="v3", alpha=0.6, gamma=3, seed=4, max_new_tokens=12, stop_at_eos=False)
    with pytest.raises(ValueError, match=says):
        replay_block(tiny64, "The cascade", **{**settings, **kwargs})


def test_every_rule_has_a_replay_or_a_refusal():
    """The rules the test above covers are every rule that verifies a block."""
    assert set(ALPHA) == {name for name, rule in RULES.items() if rule.kind != "baseline"}


def check_target_alone(replayed, trace, settings):
    """A block gamma "auto"'s floor took: no proposal, the target's own token drawn by inverse CDF with the
    position's draft uniform (u in the token's bin [below, below + p)), the reason, one slot read and kept."""
    start, alone = replayed["start"], replayed["target_alone"]
    assert (replayed["positions"], replayed["discarded"], replayed["correction"]) == ([], [], None)
    assert alone["token"] == replayed["emitted"][0] == trace.positions[start]["token"]
    assert alone["uniform"] == float(position_uniforms(settings["seed"], [start])[0, DRAFT])
    assert alone["below"] <= alone["uniform"] < alone["below"] + alone["p"]
    if settings["temperature"] == 1.0:  # the tempered p is the trace's temperature-1 one
        assert alone["p"] == pytest.approx(trace.positions[start]["p_token"], rel=1e-9)
    assert alone["reason"] == FLOOR_REASON and alone["text"] == trace.positions[start]["text"]
    assert replayed["caches"] == dict(read=1, kept=1, forgotten=0, next_input=alone["token"])
    assert json.loads(dumps(replayed))["target_alone"]["token"] == alone["token"]  # strict JSON


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_blocks_of_a_run_with_floor_positions_concatenated_are_its_tokens(tiny64, temperature):
    """At prices where no block pays (test_floor.dear), lossless gamma "auto" has the target sample most tokens alone
    and drafts every PROBE_EVERY-th block: every block replays, floor or drafted, and together they are the run."""
    settings = dict(rule="lossless", alpha=0.0, gamma="auto", temperature=temperature, seed=3, max_new_tokens=40)
    pair = dear(tiny64)
    trace = generate(pair, "The cascade", **settings)
    assert trace.sources.count("target") >= 30 and len(set(trace.sources)) >= 2
    tokens, sources = [], []
    for block in range(trace.counters["target_calls"]):
        replayed = replay_block(pair, "The cascade", block=block, **settings)
        check_replay(replayed, trace, trace.settings)
        tokens += replayed["emitted"]
        sources += replayed["sources"]
    assert (tokens, sources) == (trace.tokens, trace.sources)


def test_a_floor_position_opens_its_one_token_block(tiny64, head_pair):  # noqa: F811
    """By position too, and with the EAGLE-3 head, whose q reads the target's features the floor passed over."""
    for pair in (tiny64, head_pair):
        settings = dict(rule="lossless", alpha=0.0, gamma="auto", temperature=1.0, seed=7, max_new_tokens=20)
        trace = generate(dear(pair), "The cascade", **settings)
        for i in (trace.sources.index("target"), next(i for i, s in enumerate(trace.sources) if s != "target")):
            replayed = replay_block(dear(pair), "The cascade", position=i, **settings)
            assert replayed["block"] == trace.positions[i]["block"]
            check_replay(replayed, trace, trace.settings)


def test_the_step_through_shows_a_floor_block_in_three_stages(tiny64):
    """The page's view of such a block: why nothing was proposed, the target's draw with its bin and uniform, the
    caches; Next stops at its third stage."""
    from app.block_steps import step_block
    from app.viz.block import ALONE_STAGES, block_html, stages
    from app.viz.format import number

    settings = dict(rule="lossless", alpha=0.0, gamma="auto", temperature=1.0, seed=3, max_new_tokens=12)
    replayed = replay_block(dear(tiny64), "The cascade", block=0, **settings)
    alone = replayed["target_alone"]
    assert stages(replayed) == ALONE_STAGES and len(ALONE_STAGES) == 3
    views = [block_html(replayed, step) for step in (1, 2, 3)]
    assert "stage 1 of 3" in views[0] and "no proposal" in views[0] and "had the target sample this token alone" \
        in views[0] and "p(x)" not in views[0]
    assert f"u = {number(alone['uniform'])}" in views[1] and f"p = {number(alone['p'])}" in views[1]
    assert "keeps it, forgetting none" in views[2] and "keep test" not in views[2].split("<ol>")[0]
    assert step_block((replayed, ""), 3, 1) == (3, views[2]) and step_block((replayed, ""), 1, -1)[0] == 1
