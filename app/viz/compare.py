"""Compare's rows as HTML: one row of tokens per (rule, alpha), aligned by position, coloured by provenance, the
first token where a row's text leaves the row above marked."""
import html

from .format import number
from .tokens import legend_html, token_span

WHY = ("Every row uses the same seed, and each position's random numbers come from (seed, position), so on a common "
       "prefix every cascade row's draft proposes the same token. Two cascade rows then write the same token there "
       "when both keep that proposal, or when both verify it against the same pi by the same test (lossy's lenient "
       "test is its own); the first token where a row leaves the row above is outlined. The baselines sample one "
       "model directly: draft-only writes the draft's proposals, and target-only samples p with the draft's number, "
       "so at T > 0 it matches lossless only by chance though both follow p (at T 0 both write the target's greedy "
       "text, up to near ties).")


def first_divergence(tokens, above):
    """The first position where tokens differ from the row above (None if they agree as far as both go)."""
    if above is None:
        return None
    return next((i for i, (a, b) in enumerate(zip(tokens, above)) if a != b),
                None if len(tokens) == len(above) else min(len(tokens), len(above)))


def compare_html(rows, special=frozenset(), opens=True):
    """rows: [(label, positions, sources)]. Token i of every row gets the width of the widest token i, so positions
    line up down the rows; a click on a row's label opens it in Explore (``opens``; a lesson's rows have no such
    link, their labels are text). ``special``: the pair's special token ids (end of turn, end of text), shown as a
    mark as Explore shows them, not as text."""
    widths = {}
    for _, positions, _ in rows:
        for i, pos in enumerate(positions):
            shown = 1 if pos["token"] in special else len(pos["text"].replace("\n", "↵"))
            widths[i] = max(widths.get(i, 1), shown)
    lines, above = [], None
    for r, (label, positions, sources) in enumerate(rows):
        tokens = [pos["token"] for pos in positions]
        split = first_divergence(tokens, above)
        cells = [token_span(i, pos, source, label.split()[0], " diverge" if i == split else "", widths[i],
                            special=pos["token"] in special)
                 for i, (pos, source) in enumerate(zip(positions, sources))]
        note = "" if split is None else f'<span class="diverge-note">leaves the row above at #{split}</span>'
        name = (f'<button class="row-label" data-row="{r}" title="open this row in Explore">'
                f'{html.escape(label)}</button>'
                if opens else f'<span class="row-label">{html.escape(label)}</span>')
        lines.append(f'<div class="compare-row" data-row="{r}">{name}{note}'
                     f'<div class="tokens aligned">{"".join(cells)}</div></div>')
        above = tokens
    legend = legend_html([label.split()[0] for label, _, _ in rows], regenerates=False,
                         sources={s for _, _, sources in rows for s in sources})
    return f'<div class="compare">{legend}<p class="why">{html.escape(WHY)}</p>{"".join(lines)}</div>'


STATS_NOTE = ("Mean TV to the target: per position, the total-variation distance between the distribution the "
              "emitted token follows (pi) and the target's p there, averaged over the text; 0 is the target's "
              "distribution (lossless, target-only). Exact, from the trace, but a distance from the target, not a "
              "quality score. Target NLL is a diagnostic: text the target finds likelier, not better text. "
              "Speed-up over the target alone: the row's acceptance priced with its own draft's calls as measured on "
              "this machine (c: one of its draft's calls over one target call, each draft's own), the number Explore "
              "shows for the same text.")


def compare_stats_markdown(stats_rows):
    """stats_rows: dicts with label, target_calls, deferral_rate, acceptance_rate, tv_to_target, target_nll, speedup,
    c."""
    # headers broken into lines by hand: the table then fits a wide page without breaking a word (a phone scrolls it)
    lines = ["| row | target<br>calls | deferral | acceptance | mean TV<br>to the target | "
             "target NLL<br>(diagnostic) | speed-up over<br>the target alone |", "|---|---:|---:|---:|---:|---:|---:|"]
    for s in stats_rows:
        rate = lambda v: "–" if v is None else f"{v:.0%}"  # noqa: E731
        speed = "–" if s["speedup"] is None else f"{s['speedup']:.2f}×" + (
            "" if s["c"] is None else f" (c = {s['c']:.2f})")
        lines.append(f"| {html.escape(s['label'])} | {s['target_calls']} | {rate(s['deferral_rate'])} | "
                     f"{rate(s['acceptance_rate'])} | {number(s['tv_to_target'])} | {number(s['target_nll'])} | "
                     f"{speed} |")
    return "\n".join(lines) + f"\n\n{STATS_NOTE}"
