"""The stats panel and the projected speed-up, as Markdown."""
from .format import number

ROWS = (
    ("tokens", "tokens", "{:d}"),
    ("target_calls", "target calls", "{:d}"),
    ("draft_calls", "draft calls", "{:d}"),
    ("acceptance_rate", "acceptance rate", "{:.1%}"),
    ("tokens_per_target_call", "mean tokens per target call", "{:.2f}"),
    ("deferral_rate", "deferral rate", "{:.1%}"),
    ("cost_ratio", "measured cost ratio c (draft call / target call)", "{:.2f}"),
    ("wall_seconds", "wall time", "{:.2f} s"),
    ("tokens_per_second", "tokens / s", "{:.1f}"),
)


def _cell(value, pattern):
    return "–" if value is None else pattern.format(value)


def stats_markdown(stats, caption=""):
    """A two-column table of the engine's stats, the provenance counts of the whole text, and a caption
    saying what the numbers cover."""
    if stats is None:
        return "*No run yet.*"
    rows = [f"| {label} | {_cell(stats.get(key), pattern)} |" for key, label, pattern in ROWS]
    counts = " · ".join(f"{stats[s]} {s}" for s in ("accepted", "deferred", "replaced"))
    lines = ["| measured | |", "|:---|---:|", *rows, "", f"**Whole text:** {counts}"]
    if caption:
        lines += ["", f"*{caption}*"]
    return "\n".join(lines)


def speedup_markdown(stats, gamma, cost_ratio, speedup, measured_speedup):
    """The cost model's speed-up at the user's cost ratio, and at the ratio this run measured."""
    if speedup is None:
        return "**Projected speed-up:** – (a baseline run has no acceptance rate)"
    text = (f"**Projected speed-up over target-only decoding: {speedup:.2f}×** "
            f"(acceptance {number(stats['acceptance_rate'], 2)}, gamma {gamma}, draft/target cost ratio "
            f"{cost_ratio:.2f}, gamma + 1 draft calls per block)")
    if measured_speedup is not None:
        text += f"; at this machine's measured ratio {stats['cost_ratio']:.2f}: {measured_speedup:.2f}×"
    return text
