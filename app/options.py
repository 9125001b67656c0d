"""What every tab shares: where the assets are, how events queue, the example prompts and the help text."""
import json
from pathlib import Path

from cascade_core.method.rules import rules_table

ASSETS = Path(__file__).resolve().parent.parent / "assets"
QUIET = dict(api_visibility="undocumented")
# Model work, from the page and the API alike, runs in one of GENERATION_SLOTS slots; the calls in them decode in
# one running batch per pair and size class (app/worker.py, cascade_core/decoding/running_batches.py), their rows
# joining it between blocks (past its width of cascade_core's MAX_BATCH_ROWS rows they wait for room inside it), so a
# call starts at the next block instead of waiting for a slot behind long ones. As many slots as a batch has rows: fewer
# left short calls waiting in the queue for a long one to end, more made a full queue slow to refuse the next call
# (docs/app-benchmarks.md, "Short calls beside long ones"). Each slot holds one of Gradio's worker threads while its
# call runs (WORKER_THREADS: the slots and room for the instant events). Its status lines report progress (Gradio's
# own overlay would draw streamed tokens at 20% opacity). Instant events run outside the queue.
GENERATION_SLOTS = 32
WORKER_THREADS = GENERATION_SLOTS + 16
GENERATING = dict(QUIET, concurrency_id="generate", concurrency_limit=GENERATION_SLOTS, show_progress="hidden")
INSTANT = dict(QUIET, concurrency_limit=None, queue=False)
# Quick events that set a gr.State others listen to: a State's change fires only for events that went through the queue.
QUEUED_INSTANT = dict(QUIET, concurrency_limit=None, show_progress="hidden")


def example_prompts():
    return json.loads((ASSETS / "examples.json").read_text())


def how_to_read():
    """The "How to read this" panel, its rules table read from the rules' records."""
    return (ASSETS / "how_to_read.md").read_text().replace("{rules_table}", rules_table())
