"""One block of a run replayed with the engine's own numbers: what the step-through and the app's /block show.

A run is a function of its settings alone (position-keyed uniforms; gamma "auto" choosing from the row's own
acceptance and the pair's prices, measured once), so decoding it again takes every block as the first run did. The
replay decodes the run to the block asked for, has the block loop record that block in full (blocks.py's
``block_in_full``, fed the very proposal, target logits and uniforms the verdict reads) and stops there. The
result is strict JSON's material: per proposal up to the first rejection its q, p and pi (tempered), the keep
probability min(1, pi / q) (lossy: its lenient form) and the uniform compared with it; the correction and its
residual's top tokens; the proposals discarded unseen; what both caches keep; and the tokens the run emitted
from the block (the kept proposals and the correction, cut where the run ended: end-of-text, a stop).

Every block replays, so the blocks of a run, concatenated, are its tokens. A block gamma "auto"'s floor took
(source "target": cascade_core/batch.py's ``floored``) proposed nothing: its replay has no positions, and its
``target_alone`` holds the target's own token, its tempered p, its bin's lower edge in p's CDF (``below``), the
draft uniform the draw read, and the reason in one sentence (``target_alone`` is None in every other block).
"""
from .engine import decode, finish
from .rows import start_row
from .rules import RULES
from .settings import RunSettings, whole_number

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
                 **keywords):
    """Decode the run of ``settings`` (or ``stream``'s keywords) to its block ``block`` (or the block that emitted
    output ``position``), yielding the growing Trace after every block; returns the block in full (see the module
    docstring). One sentence for a block or position the run never reaches."""
    settings = RunSettings.of(settings, **{**keywords, "reproducible": True})  # alone: its solo run, whoever decodes
    index = check_replayable(settings, block, position)
    block, position = (index, None) if position is None else (None, index)
    row = start_row(pair, settings, prompt, prompt_ids=prompt_ids)
    row.watch = watching(block, position)
    steps = decode(pair, [row], batches=batches)
    for _ in steps:
        if row.trace.error:
            raise ValueError(row.trace.error)
        if row.watched is not None:
            steps.close()  # the row leaves its batch; nothing after the block is decoded
            return replayed(pair, row)
        yield row.trace
    blocks = row.counters["target_calls"]
    asked = f"block={block}" if block is not None else f"position={position}"
    raise ValueError(f"{asked} is out of range: this run has {blocks} blocks (0 to {blocks - 1}) and "
                     f"{len(row.trace.positions)} tokens")


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
