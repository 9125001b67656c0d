"""The frontier as plotly figures: a measure of the text against cost, a line per rule through its alphas. The Pareto
front is marked where the measure ranks the text: the mean TV to the target (the distance of the run's output
distribution from the target's; exact, from the trace) and the reference-based ROUGE-L and exact match. The target's
NLL is drawn without one: a diagnostic of how likely the target finds the text, not a ranking (the paper measures
quality with task metrics, Table 2, Figs. 2-3). Used by the sweep's report and by the explorer's Trade-off tab."""
import math
import textwrap

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cascade_core.method.costs import expected_speedup

# Okabe-Ito and friends: one colour per rule, the same in every figure.
RULE_COLOURS = {"lossless": "#000000", "lossy": "#999999", "chow": "#E69F00", "diff": "#56B4E9", "opt": "#009E73",
                "v1": "#F0E442", "v2": "#CC79A7", "v3": "#0072B2", "bild": "#D55E00", "fuzzy": "#882255",
                "judge": "#117733", "target": "#444444", "draft": "#BBBBBB"}
X_AXES = {"calls": "target calls per token (lower is cheaper)",
          "speedup": "speed-up over the target alone (measured)",  # every tab's: costs.speedup_over_target
          "at_c": "speed-up at c, set by you (hypothetical)"}  # Leviathan et al.'s (2023) estimate at that c
QUALITY = {"tv_to_target": "mean TV to the target (0 = the target's distribution; exact, from the trace)",
           "rouge_l": "ROUGE-L F1 (higher is better)", "exact_match": "exact match (higher is better)",
           "target_nll": "target NLL (diagnostic: likelier under the target, not better text)"}
NAMES = {"tv_to_target": "mean TV to the target", "rouge_l": "ROUGE-L", "exact_match": "exact match",
         "target_nll": "target NLL (a diagnostic)"}  # in titles
WHERE = {"tv_to_target": "rows a sweep wrote before the measure was recorded lack it",
         "rouge_l": "it needs prompts with a reference: upload a sweep's rows.jsonl",
         "exact_match": "it needs prompts with an answer: upload a sweep's rows.jsonl",
         "target_nll": "rows without tokens lack it"}  # why no row has the measure
LOWER_IS_NEARER = ("tv_to_target",)  # the measures whose front takes the lowest value at each cost
FRONT = {"tv_to_target": "Pareto front (least TV at each cost)", "rouge_l": "Pareto front",
         "exact_match": "Pareto front"}  # the measures that rank the text, and their front's name


def points(summary, x, quality, c):
    """(rule, alpha, x, y, hover) per summary row that has the quality measure."""
    out = []
    for s in summary:
        y = s.get(f"{quality}_mean")
        if y is None:
            continue
        if x == "calls":
            value = s["target_calls_per_token_mean"]
        elif x == "speedup":  # the rows' own speed-ups (costs.speedup_over_target: Explore's number for each text)
            value = s.get("projected_speedup_mean")
        else:
            acceptance = s.get("acceptance_rate_mean")
            value = 1.0 if s["rule"] == "target" else None if acceptance is None else \
                expected_speedup(acceptance, s["gamma"], c, s["gamma"] + 1)  # Leviathan et al.'s estimate at c
        if value is None:
            continue
        alpha = "-" if s["alpha"] is None else f"{s['alpha']:g}"
        interval = s.get(f"{quality}_ci")
        hover = (f"{s['rule']} alpha {alpha}<br>{QUALITY[quality]}: {y:.3f}"
                 + (f" ± {interval:.3f}" if interval else "") + f"<br>{X_AXES[x]}: {value:.3f}"
                 f"<br>deferral {s.get('deferral_rate_mean', 0) or 0:.2f}, n = {s['n']}")
        out.append(dict(rule=s["rule"], alpha=s["alpha"], x=value, y=y, ci=interval, hover=hover))
    return out


def pareto(pts, x, quality):
    """The points no other point beats on both axes (cheaper or faster, and nearer the target's distribution or a
    higher score), in x order; none for a measure that ranks nothing (FRONT: the target's NLL)."""
    if quality not in FRONT:
        return []
    cheaper = (lambda a, b: a <= b) if x == "calls" else (lambda a, b: a >= b)
    better = (lambda a, b: a <= b) if quality in LOWER_IS_NEARER else (lambda a, b: a >= b)
    front = [p for p in pts if not any(cheaper(o["x"], p["x"]) and better(o["y"], p["y"]) and
                                       (o["x"], o["y"]) != (p["x"], p["y"]) for o in pts)]
    return sorted(front, key=lambda p: p["x"])


def frontier_traces(pts, front, quality, show_legend=True):
    """A line per rule through its alphas, and the front (where the measure has one: FRONT) dotted over them. A rule
    without alpha (lossless, the models alone) is one point, drawn after the lines as a large open diamond: lossless
    sits where chow, opt and every position rule land at the alpha that defers everywhere (pi = p there), and drawn
    first it hid under their markers."""
    traces = []
    alone = lambda rule: all(p["alpha"] is None for p in pts if p["rule"] == rule)  # noqa: E731
    for rule in sorted(dict.fromkeys(p["rule"] for p in pts), key=alone):  # stable: the lines in their order first
        mine = sorted((p for p in pts if p["rule"] == rule), key=lambda p: (p["alpha"] is None, p["alpha"] or 0))
        marker = dict(size=18, symbol="diamond-open", line=dict(width=2.5)) if alone(rule) else dict(size=8)
        traces.append(go.Scatter(
            x=[p["x"] for p in mine], y=[p["y"] for p in mine], mode="lines+markers", name=rule, legendgroup=rule,
            showlegend=show_legend, line=dict(color=RULE_COLOURS.get(rule, "#333"), width=2),
            marker=marker, error_y=dict(array=[p["ci"] or 0 for p in mine], thickness=1, width=3), cliponaxis=False,
            customdata=[[rule, p["alpha"]] for p in mine], text=[p["hover"] for p in mine],
            hovertemplate="%{text}<extra></extra>"))
    if not front:
        return traces
    traces.append(go.Scatter(x=[p["x"] for p in front], y=[p["y"] for p in front], mode="lines+markers",
                             name=FRONT[quality], legendgroup="front", showlegend=show_legend,
                             line=dict(color="#D55E00", dash="dot", width=1.5),
                             marker=dict(size=16, symbol="circle-open", color="#D55E00", line=dict(width=2)),
                             cliponaxis=False,
                             hoverinfo="skip"))
    return traces


def wrapped(text, width):
    """Text broken into lines of at most ``width`` characters for a plotly title, so that a long axis title or heading
    stays whole in a narrow figure (a phone's 420 px)."""
    return "<br>".join(textwrap.wrap(text, width))


def frontier_figure(summary, x="calls", quality="tv_to_target", c=0.25, title=None):
    pts = points(summary, x, quality, c)
    fig = go.Figure(frontier_traces(pts, pareto(pts, x, quality), quality))
    if not pts:  # a sentence in place of empty axes
        fig.add_annotation(text=wrapped(f"No row here has the {NAMES[quality]}: {WHERE[quality]}.", 40),
                           showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    heading = title or f"{NAMES[quality]} against {X_AXES[x]}" + (f" (c = {c:g}, set by you)" if x == "at_c" else "")
    fig.update_layout(template="plotly_white", height=460, margin=dict(l=90, r=20, t=70, b=50),
                      title=dict(text=wrapped(heading, 48), font=dict(size=14)),
                      # every cost and measure is >= 0: a lone point's padding must not reach below it (the
                      # markers at 0, lossless's TV, are drawn whole over the axis: cliponaxis)
                      xaxis=dict(title=X_AXES[x], rangemode="nonnegative"),
                      yaxis=dict(title=dict(text=wrapped(QUALITY[quality], 34), font=dict(size=12)),
                                 rangemode="nonnegative"),
                      legend=dict(orientation="h", y=-0.18))
    return fig


def category_figure(summaries, x="calls", quality="tv_to_target", c=0.25):
    """One small frontier per category (``summaries``: {category: summary rows})."""
    names = list(summaries)
    cols = min(3, len(names)) or 1
    fig = make_subplots(rows=math.ceil(len(names) / cols) or 1, cols=cols, subplot_titles=names,
                        horizontal_spacing=0.07, vertical_spacing=0.12)
    for i, name in enumerate(names):
        pts = points(summaries[name], x, quality, c)
        for trace in frontier_traces(pts, pareto(pts, x, quality), quality, show_legend=i == 0):
            fig.add_trace(trace, row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(rangemode="nonnegative")
    fig.update_yaxes(rangemode="nonnegative")
    fig.update_layout(template="plotly_white", height=320 * math.ceil(len(names) / cols), showlegend=True,
                      title=dict(text=f"By category: {NAMES[quality]} against {X_AXES[x]}", font=dict(size=14)),
                      margin=dict(l=50, r=20, t=80, b=40))
    return fig
