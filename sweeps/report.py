"""A sweep's summary (per rule and alpha: means and 95% intervals over prompts and seeds) as summary.csv, and its
frontier as a self-contained report.html."""
import csv
import html
import math
import statistics
from pathlib import Path

from .figures import category_figure, frontier_figure

METRICS = ("tv_to_target", "target_nll", "target_top1", "rouge_l", "exact_match", "target_calls_per_token",
           "acceptance_rate", "deferral_rate", "projected_speedup", "wall_seconds")


def value(row, metric):
    if metric == "target_calls_per_token":
        return row["target_calls"] / row["tokens"] if row["tokens"] else None
    v = row.get(metric)
    return float(v) if isinstance(v, (bool, int, float)) else None


def summarise(rows):
    """One dict per (rule, alpha) in order of appearance: n, and per metric its mean and the half-width of a 95%
    interval (normal approximation; None for fewer than two values)."""
    groups = {}
    for row in rows:
        groups.setdefault((row["rule"], row["alpha"]), []).append(row)
    out = []
    for (rule, alpha), group in groups.items():
        s = dict(rule=rule, alpha=alpha, gamma=group[0]["gamma"], n=len(group))
        for metric in METRICS:
            values = [v for v in (value(r, metric) for r in group) if v is not None]
            s[f"{metric}_mean"] = statistics.fmean(values) if values else None
            s[f"{metric}_ci"] = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
        out.append(s)
    return out


def write_summary(rows, path):
    summary = summarise(rows)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in s.items()} for s in summary)
    return summary


def figures(rows):
    """The report's figures, in order: the mean TV to the target against target calls per token and against
    projected speed-up, ROUGE-L and exact match where the prompts have references and answers, the target's NLL (a
    diagnostic, no front), and the per-category breakdown."""
    summary = summarise(rows)
    out = [frontier_figure(summary, "calls"), frontier_figure(summary, "speedup")]
    for quality in ("rouge_l", "exact_match"):
        if any(s[f"{quality}_mean"] is not None for s in summary):
            out.append(frontier_figure(summary, "calls", quality))
    out.append(frontier_figure(summary, "calls", "target_nll"))
    categories = sorted({r["category"] for r in rows if r["category"]})
    if len(categories) > 1:
        out.append(category_figure({cat: summarise([r for r in rows if r["category"] == cat]) for cat in categories}))
    return out


def write_report(rows, path, title):
    """report.html: every figure, plotly's script inlined once, so the file opens anywhere offline."""
    parts = [fig.to_html(full_html=False, include_plotlyjs=i == 0, div_id=f"figure-{i}")
             for i, fig in enumerate(figures(rows))]
    title = html.escape(title)
    Path(path).write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
                          f"<body style='font-family: sans-serif; max-width: 1100px; margin: auto'><h1>{title}</h1>"
                          "<p>Each line is one rule as alpha moves; points are means over prompts and seeds with 95% "
                          "intervals; the dotted line marks the Pareto front (no other point is both cheaper and "
                          "nearer the target's distribution, or cheaper and better by a reference). The target's NLL "
                          "has no front: it says how likely the target finds the text, not how good it is."
                          f"</p>{''.join(parts)}</body></html>")
