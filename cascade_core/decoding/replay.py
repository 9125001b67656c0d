"""One block of a run replayed with the engine's own numbers: what the step-through and the app's /block show.

A run is a function of its settings alone (position-keyed uniforms; gamma "auto" choosing from the row's own
acceptance and the pair's prices, measured once), so decoding it again takes every block as the first run did. The
replay decodes the run to the block asked for, has the block loop record that block in full (decision.py's
``block_in_full``, fed the very proposal, target logits and uniforms the verdict reads) and stops there. The
result is strict JSON's material: per proposal up to the first rejection its q, p and pi (tempered), the keep
probability min(1, pi / q) (lossy: its lenient form) and the uniform compared with it; the correction and its
residual's top tokens; the proposals discarded unseen; what both caches keep; and the tokens the run emitted
from the block (the kept proposals and the correction, cut where the run ended: end-of-text, a stop).

Every block replays, so the blocks of a run, concatenated, are its tokens. A block gamma "auto"'s floor took
(source "target": cascade_core/decoding/batch_block.py's ``floored``) proposed nothing: its replay has no positions, and
its ``target_alone`` holds the target's own token, its tempered p, its bin's lower edge in p's CDF (``below``), the
draft uniform the draw read, and the reason in one sentence (``target_alone`` is None in every other block).
"""
from itertools import groupby
from operator import itemgetter

from cascade_core.decoding.generation import decode, finish
from cascade_core.decoding.row import start_row
from cascade_core.decoding.run_settings import AUTO, AUTO_GAMMAS, RunSettings, whole_number
from cascade_core.method.rules import RULES

FLOOR_REASON = ("gamma \"auto\"'s floor had the target sample this token alone: at the acceptance estimated so far "
                "(a prior, updated by the run's own proposals), every block length was priced slower than the target "
                "alone, and lossless's pi is p, so the target's own sample is exact.")


def check_replayable(settings, block, position):
    """The block or position asked for as a whole number, or one sentence saying what is wrong."""
    if (block is None) == (position is None):
        raise ValueError("a replay takes either block (its index in the run, from 0) or position (an output "
                         "token's index), not both nor neither")
    index = whole_number(block if position is None else position, "block" if position is None else "position", 0,
                         settings.max_new_tokens - 1)
    if RULES[settings.rule].kind == "baseline":
        raise ValueError(f"rule {settings.rule!r} is a baseline: it samples each token from one model and verifies "
                         "nothing, so it has no block to replay; pick a cascade rule or lossless")
    if settings.sequential:
        raise ValueError("a sequential cascade decides one position at a time, with no block to replay; "
                         "set sequential=False")
    return index


def watching(block, position):
    """The test the block loop asks of every block: (positions before it, the Block) -> record it in full."""
    if block is not None:
        return lambda start, taken: taken.index == block
    return lambda start, taken: start <= position < start + len(taken.tokens)


def replay_steps(pair, prompt=None, *, settings=None, block=None, position=None, prompt_ids=None, batches=None,
                 run=None, **keywords):
    """Decode the run of ``settings`` (or ``stream``'s keywords) to its block ``block`` (or the block that emitted
    output ``position``), yielding the growing Trace after every block; returns the block in full (see the module
    docstring). One sentence for a block or position the run never reaches. ``run``: that run's trace where the
    caller holds it (decoded from its start; finished, or holding ``position``): the replay then decodes the one
    block alone (``resumed_row``) instead of the run up to it."""
    settings = RunSettings.of(settings, **{**keywords, "reproducible": True})  # alone: its solo run, whoever decodes
    index = check_replayable(settings, block, position)
    block, position = (index, None) if position is None else (None, index)
    if run is None:
        row = start_row(pair, settings, prompt, prompt_ids=prompt_ids)
    else:
        row, block, position = *resumed_row(pair, settings, run, block, position), None
    row.watch = watching(block, position)
    steps = decode(pair, [row], batches=batches)
    for _ in steps:
        if row.trace.error:
            raise ValueError(row.trace.error)
        if row.watched is not None:
            steps.close()  # the row leaves its batch; nothing after the block is decoded
            return replayed(pair, row)
        yield row.trace
    raise out_of_range(block, position, row.blocks, len(row.trace.positions))


def replay_length(settings, run=None):
    """The most tokens a replay decodes, what a server schedules it by: the run up to its block, or one block where
    it starts from the run's trace (``resumed_row``)."""
    if run is None:
        return settings.max_new_tokens
    return (max(AUTO_GAMMAS) if settings.gamma == AUTO else settings.gamma) + 1


def out_of_range(block, position, blocks, tokens):
    asked = f"block={block}" if block is not None else f"position={position}"
    return ValueError(f"{asked} is out of range: this run has {blocks} blocks (0 to {blocks - 1}) and {tokens} tokens")


def resumed_row(pair, settings, run, block=None, position=None):
    """(the row that replays one block of ``run``, that block's index). The row starts from the run's tokens before
    the block, read in one prefill instead of decoded again, with the blocks the run took and the acceptance it
    showed before it (what gamma "auto" chooses from: Row.accepted), so the block it decodes is the run's: the same
    uniforms (keyed by position), and numbers equal up to rounding, as a prefill rounds differently from the blocks
    it stands for (in the last float32 bits; by a bfloat16 step where the pair computes in bfloat16 or int8:
    precision.py), so that only a decision that near its threshold can go the other way. A block or position past
    the run's end is refused at once."""
    positions = run.positions
    if position is not None:
        block = positions[position]["block"] if position < len(positions) else None
    start = next((i for i, pos in enumerate(positions) if pos["block"] == block), None)
    if start is None:
        raise out_of_range(None if position is not None else block, position,
                           positions[-1]["block"] + 1 if positions else 0, len(positions))
    row = start_row(pair, settings, resume=(run, start))
    row.blocks = block  # the blocks the run took before it: the next is the run's block
    row.accepted = acceptance(positions[:start])
    return row, block


def acceptance(positions):
    """[sum, count] of the acceptance probabilities of the proposals kept at ``positions``, block by block as the
    block loop adds them (a floor block's target-alone token has none)."""
    total, count = 0.0, 0
    for _, block in groupby(positions, key=itemgetter("block")):
        probabilities = [pos["accept_prob"] for pos in block]
        if probabilities[0] is not None:
            total, count = total + sum(probabilities), count + len(probabilities)
    return [total, count]


def replayed(pair, row):
    """The recorded block with where it sits in the run, what the run emitted from it and what the caches keep."""
    full, trace = dict(row.watched), row.trace
    index = trace.positions[-1]["block"]
    emitted = [i for i, pos in enumerate(trace.positions) if pos["block"] == index]
    read, kept = len(full["positions"]) + len(full["discarded"]), len(full["positions"])
    if full["target_alone"] is not None:  # the floor: the target read [last] alone and keeps it
        full["target_alone"] = dict(full["target_alone"], reason=FLOOR_REASON)
        read, kept = 1, 1
    full.update(block=index, start=emitted[0],
                emitted=[trace.positions[i]["token"] for i in emitted],
                emitted_text=[trace.positions[i]["text"] for i in emitted],
                sources=[trace.positions[i]["source"] for i in emitted],
                caches=dict(read=read, kept=kept, forgotten=read - kept, next_input=trace.positions[-1]["token"]),
                draft=pair.drafting.name, settings=trace.settings)
    return full


def replay_block(pair, prompt=None, **kwargs):
    """``replay_steps`` run to its end: the block in full."""
    return finish(replay_steps(pair, prompt, **kwargs))
