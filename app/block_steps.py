""""Step through its block": a replayed block (cascade_core/decoding/replay.py) shown one stage a press
(app/viz/block.py), the same in Explore's inspector and in the speculative-decoding lesson. Opening replays the run (a
model call, on the engine thread); Back and Next only redraw the replay held in the page's state."""
import time

import gradio as gr

from cascade_core import replay_steps
from cascade_core.decoding.replay import replay_length

from .options import GENERATING, INSTANT
from .viz.block import block_html, stages
from .worker import ENGINE

DIVERGED = ("This replay parts from the run on the page in this block: a decision there sat so near its threshold "
            "that a shared batch, or the replay's one read of the tokens before the block, rounds it the other way "
            "(a near-tie).")


def build_block_steps(prefix, label="Step through its block", note=""):
    """The open button, the view (``note``: what it says before a block is open), Back and Next (shown once a block
    is open) and the page's state of them."""
    c = dict(open=gr.Button(label, size="sm", elem_id=f"{prefix}-open"),
             view=gr.HTML(block_html(note=note), elem_id=f"{prefix}-steps"))
    with gr.Row(visible=False) as c["buttons"]:
        c["back"] = gr.Button("← Back", size="sm", elem_id=f"{prefix}-back", min_width=80)
        c["next"] = gr.Button("Next step →", size="sm", variant="primary", elem_id=f"{prefix}-next", min_width=80)
    c.update(opened=gr.State(None), step=gr.State(1))
    return c


def outputs(c):
    """What opening a block sets: the opened replay, its stage, the view, the stepping buttons."""
    return [c["opened"], c["step"], c["view"], c["buttons"]]


def wire_block_steps(c, open_block, inputs):
    c["open"].click(open_block, inputs, outputs(c), **GENERATING)
    for button, move in ((c["back"], -1), (c["next"], 1)):
        button.click(lambda shown, step, move=move: step_block(shown, step, move), [c["opened"], c["step"]],
                     [c["step"], c["view"]], **INSTANT)


def step_block(shown, step, move):
    """Next (move 1) or Back (-1) through the opened block's stages. Outputs: the stage, the view."""
    if shown is None:
        return 1, block_html()
    step = max(1, min(len(stages(shown[0])), step + move))
    return step, block_html(shown[0], step, shown[1])


def replay_progress(pair, s, **where):
    """A replay of the run of ``s`` (AppSettings) to a block (``where``: block= or position=, and the run's trace
    as run= where the caller holds it, as replay_steps takes them) on the engine thread, scheduled by the tokens it
    decodes (replay_length), yielding its progress at most once a second; returns the replay."""
    steps = ENGINE.iterate(replay_steps(pair, s.prompt, settings=s.for_pair(pair), batches=ENGINE.batches, **where),
                           replay_length(s, where.get("run")))
    shown = time.perf_counter()
    while True:
        try:
            trace = next(steps)
        except StopIteration as done:
            return done.value
        if time.perf_counter() - shown > 1.0:
            shown = time.perf_counter()
            yield replaying(f"Replaying the run: token {len(trace.positions)} of at most {s.max_new_tokens}…")


def replaying(message):
    """While the replay runs: its progress in the view, the rest as it is."""
    return gr.skip(), gr.skip(), block_html(note=message), gr.skip()


def closed(message):
    return None, 1, block_html(note=message), gr.update(visible=False)


def opened(replay, tokens, special=frozenset()):
    """A replay at its first stage; ``tokens``: the run on the page, which the replay's block is checked against;
    ``special``: the pair's special token ids, which the view shows as a mark (kept in the page's replay)."""
    replay, start = dict(replay, special=frozenset(special)), replay["start"]
    note = "" if tokens[start: start + len(replay["emitted"])] == replay["emitted"] else DIVERGED
    return (replay, note), 1, block_html(replay, 1, note), gr.update(visible=True)
