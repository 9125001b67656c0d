"""What every tab shares: where the assets are, how events queue, the example prompts and the help text."""
import json
from pathlib import Path

from .viz.format import rules_table

ASSETS = Path(__file__).resolve().parent.parent / "assets"
QUIET = dict(api_visibility="undocumented")
# Model work waits for the one generation slot; its status lines report progress (Gradio's own overlay would draw
# streamed tokens at 20% opacity). Instant events run outside the queue.
GENERATING = dict(QUIET, concurrency_id="generate", concurrency_limit=1, show_progress="hidden")
INSTANT = dict(QUIET, concurrency_limit=None, queue=False)


def example_prompts():
    return json.loads((ASSETS / "examples.json").read_text())


def how_to_read():
    """The "How to read this" panel, its rules table read from the rules' records."""
    return (ASSETS / "how_to_read.md").read_text().replace("{rules_table}", rules_table())
