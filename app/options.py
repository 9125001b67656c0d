"""What every tab shares: where the assets are, how events queue, the example prompts and the help text."""
import json
from pathlib import Path

from cascade_core.rules import rules_table

ASSETS = Path(__file__).resolve().parent.parent / "assets"
QUIET = dict(api_visibility="undocumented")
# Model work, from the page and the API alike, runs in one of GENERATION_SLOTS slots; the calls in them share the
# engine thread block by block (app/worker.py: stride scheduling), so a long call does not hold back a short one for
# its whole length. Its status lines report progress (Gradio's own overlay would draw streamed
# tokens at 20% opacity). Instant events run outside the queue.
GENERATION_SLOTS = 4
GENERATING = dict(QUIET, concurrency_id="generate", concurrency_limit=GENERATION_SLOTS, show_progress="hidden")
INSTANT = dict(QUIET, concurrency_limit=None, queue=False)
# Quick events that set a gr.State others listen to: a State's change fires only for events that went through the queue.
QUEUED_INSTANT = dict(QUIET, concurrency_limit=None, show_progress="hidden")


def example_prompts():
    return json.loads((ASSETS / "examples.json").read_text())


def how_to_read():
    """The "How to read this" panel, its rules table read from the rules' records."""
    return (ASSETS / "how_to_read.md").read_text().replace("{rules_table}", rules_table())
