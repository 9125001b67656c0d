"""The stats panel and the projected speed-up, as Markdown."""
from .format import markdown_text, milliseconds, number

ROWS = (
    ("tokens", "tokens", "{:d}"),
    ("target_calls", "target calls", "{:d}"),
    ("draft_calls", "draft calls", "{:d}"),
    ("acceptance_rate", "acceptance rate", "{:.1%}"),
    ("tokens_per_target_call", "mean tokens per target call", "{:.2f}"),
    ("deferral_rate", "deferral rate", "{:.1%}"),
    ("cost_ratio", "draft call / target call in this run (a target call verifies a block)", "{:.2f}"),
    ("wall_seconds", "wall time", "{:.2f} s"),
    ("tokens_per_second", "tokens / s", "{:.1f}"),
)


def _cell(value, pattern):
    return "–" if value is None else pattern.format(value)


def stats_markdown(stats, caption="", pair="", target_alone=None):
    """The headline (tokens/s, tokens per target call, and ``target_alone``: the target alone's tokens/s on this
    machine, from its measured token), a two-column table of the engine's stats, the provenance counts of the whole
    text, the pair that ran (its draft said) and a caption saying what the numbers cover."""
    if stats is None:
        return "*No run yet.*"
    rows = [f"| {label} | {_cell(stats.get(key), pattern)} |" for key, label, pattern in ROWS]
    counts = " · ".join(f"{stats[s]} {s}" for s in ("accepted", "deferred", "replaced"))
    if stats.get("target"):
        counts += f" · {stats['target']} the target's own (gamma auto's floor: no block paid there)"
    headline = (f"**{_cell(stats.get('tokens_per_second'), '{:.1f}')} tokens/s** · "
                f"{_cell(stats.get('tokens_per_target_call'), '{:.2f}')} tokens per target call · the target alone "
                f"here: at most {'–' if target_alone is None else f'{target_alone:.1f}'} tokens/s (its measured "
                "one-token call, the engine's work aside)")
    lines = [headline, "", "| measured | |", "|:---|---:|", *rows, "", f"**Whole text:** {counts}"]
    if pair:
        lines += ["", f"**Ran on:** {markdown_text(pair)}"]
    if caption:
        lines += ["", f"*{caption}*"]
    return "\n".join(lines)


def speedup_markdown(stats, gamma, cost_ratio, at_c, prices=None, priced=None, block_gamma=None):
    """The cost model's speed-up priced with the calls measured on this machine (once the run has finished), and at
    the slider's c with a verification priced as one target token (Leviathan et al.'s (2023) estimate, with this
    engine's g + 1 draft calls per block)."""
    if stats is None:
        return "**Projected speed-up:** – (run the cascade: its acceptance rate prices it)"
    if at_c is None:
        return "**Projected speed-up:** – (a baseline run has no acceptance rate)"
    g = block_gamma if block_gamma is not None else gamma
    overhead = stats.get("overhead_seconds_per_block") or 0.0
    chosen = f"gamma auto (mostly {g})" if gamma == "auto" else f"gamma {g}"
    if stats.get("target"):
        chosen += f", {stats['target_alone_share']:.0%} of the tokens the target's own at one target call each"
    acceptance = number(stats["acceptance_rate"], 2)
    at_slider = (f"the slider's c = {cost_ratio:.2f}, a verification priced as one target token (Leviathan et al.'s "
                 f"(2023) estimate, {g + 1} draft calls per block): {at_c:.2f}×")
    if priced is None:
        return (f"**Projected speed-up over target-only decoding: {at_c:.2f}×** (acceptance {acceptance}, {chosen}, "
                f"at {at_slider})")
    return (f"**Projected speed-up over target-only on this machine: {priced:.2f}×** (acceptance {acceptance}, "
            f"{chosen}: a block is {g + 1} draft calls at c = {prices.c:.2f}, one verification of {prices.block} "
            f"tokens costing {prices.verify_ratio:.2f} target tokens and {milliseconds(overhead)} of the engine's own "
            f"work; measured on this pair: a target token {milliseconds(prices.target)}, a draft call "
            f"{milliseconds(prices.draft)}, the verification {milliseconds(prices.verify)}; the engine's work in this "
            f"run). At {at_slider}.")
