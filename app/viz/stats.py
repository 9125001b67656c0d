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
    ("engine_seconds", "the engine's own time (its calls and work, not the page's streaming)", "{:.2f} s"),
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


def speedup_markdown(stats, gamma, prices=None, priced=None, block_gamma=None, cost_ratio=None, at_c=None):
    """The speed-up over the target alone priced with the calls measured on this machine (costs.speedup_over_target,
    once the run has finished: ``priced`` with ``prices``), and, only where the user set c (``at_c`` at
    ``cost_ratio``), Leviathan et al.'s (2023) estimate at that c, marked as a hypothetical."""
    if stats is None:
        return "**Speed-up over the target alone:** – (run the cascade: its acceptance rate prices it)"
    hypothetical = "" if at_c is None else (
        f" At c = {cost_ratio:.2f}, set by you (a hypothetical draft, not this one: Leviathan et al.'s (2023) "
        f"estimate, a verification priced as one target token, no engine work): {at_c:.2f}×.")
    if priced is None:
        return ("**Speed-up over the target alone:** – (not priced: no measured calls for this pair or run)."
                + hypothetical)
    if prices is None or stats.get("acceptance_rate") is None:  # a baseline: the target alone, or the draft alone
        return (f"**Speed-up over the target alone on this machine: {priced:.2f}×** (a baseline: no blocks)."
                + hypothetical)
    g = block_gamma if block_gamma is not None else gamma
    chosen = f"gamma auto (mostly {g})" if gamma == "auto" else f"gamma {g}"
    if stats.get("target"):
        chosen += f", {stats['target_alone_share']:.0%} of the tokens the target's own at one target call each"
    return (f"**Speed-up over the target alone on this machine: {priced:.2f}×** (acceptance "
            f"{number(stats['acceptance_rate'], 2)}, {chosen}: a block is {g + 1} draft calls at this draft's measured "
            f"c = {prices.c:.2f}, one verification of {prices.block} tokens costing {prices.verify_ratio:.2f} target "
            f"tokens and {milliseconds(prices.overhead)} of the engine's own work; measured on this pair: a target "
            f"token {milliseconds(prices.target)}, a draft call {milliseconds(prices.draft)}, the verification "
            f"{milliseconds(prices.verify)}); Compare, the Trade-off and Strategies price a text the same way)."
            + hypothetical)
