"""Plotly figures of a trace: per-step statistics with the rule's threshold, the critical-alpha chart,
and the inspector's top-10 bars. Every point carries its position and token text for the hover."""
import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cascade_core.method.explain import threshold
from cascade_core.method.rules import RULES

from .format import clip, number, plot_text
from .tokens import COLOURS, shown_source

# Statistics on the probability scale get the top panel's axis from 0 to 1; BiLD's cross-entropy and lossy's p/q
# ratio a scale of their own there.
PROBABILITY_LABELS = {"max q", "q(x)", "p(x)"}
# Marker shapes repeat the provenance colours, so the chart reads without colour vision too.
SYMBOLS = {"accepted": "circle", "deferred": "square", "replaced": "diamond", "will-change": "circle-open",
           "target-only": "x", "draft-only": "star"}
# Past this many positions the per-step chart gets a range slider to zoom into a stretch of the run.
READABLE_STEPS = 64
# The per-step figure's panels, as fractions of its height: the rule's statistic, then max q, max p and TV in a row
# each (one line to a row stays readable at 256 positions, three lines in one panel do not)
STEP_PANELS = {"y": [0.5, 1.0], "y3": [0.34, 0.44], "y4": [0.17, 0.27], "y5": [0.0, 0.1]}
CONTEXT_LINES = (("max_q", "max q", COLOURS["accepted"], "y3"), ("max_p", "max p", COLOURS["replaced"], "y4"),
                 ("tv", "TV(p, q)", "#009E73", "y5"))
LEGEND_ROW = 20  # px: one row of a legend at font size 12
LAYOUT = dict(margin=dict(l=50, r=20, t=50, b=40), height=320,
              legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0), font=dict(size=12))


# Figures are rebuilt on every alpha drag: numpy arrays keep plotly's validation per trace, not per point
# (lists of 512 values cost tens of milliseconds each).
def _numbers(values):
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _strings(values):
    return np.array(values, dtype=object)


def _hover_tokens(positions):
    return _strings([plot_text(pos["text"]) for pos in positions])


def shown_sources(sources, rule, first_changed):
    """The label each position is drawn under: "will-change" from ``first_changed`` on, else the token view's."""
    return [shown_source(rule, "will-change" if first_changed is not None and i >= first_changed else source)
            for i, source in enumerate(sources)]


def _first_changed_line(fig, first_changed):
    if first_changed is not None:
        fig.add_vline(x=first_changed - 0.5, line=dict(color="#555", dash="dot"),
                      annotation_text=f"may change from #{first_changed}", annotation_position="top left")


def step_figure(positions, sources, rule, alpha, first_changed=None):
    """Aligned panels over the token positions. Above, the rule's statistic per position as markers in the
    provenance colours, with its threshold as a tick per position (the rule defers where the statistic is below it;
    a divergence rule where above). Below, the design's per-step plot: max q, max p and TV(p, q), a row each
    (STEP_PANELS). Without a threshold (baselines) the lines share the one panel. Past READABLE_STEPS positions a
    range slider zooms in."""
    x = np.arange(len(positions))
    hover = _hover_tokens(positions)
    template = "#%{x} %{customdata}<br>%{fullData.name} = %{y:.3f}<extra></extra>"
    forms = [threshold(rule, pos, alpha) for pos in positions]
    has_threshold = any(form is not None for form in forms)  # none at the floor's tokens: nothing was proposed
    fig = go.Figure()
    layout = {}
    for key, name, colour, row in CONTEXT_LINES:
        values = _numbers(pos[key] for pos in positions)
        if np.isnan(values).all():
            continue
        row = row if has_threshold else "y"
        fig.add_trace(go.Scatter(x=x, y=values, name=name, mode="lines", line=dict(color=colour, width=1.5),
                                 yaxis=row, customdata=hover, hovertemplate=template))
        if row != "y":
            layout[f"yaxis{row[1:]}"] = dict(title=dict(text=name, font=dict(size=11)), range=[0, 1.02],
                                             domain=STEP_PANELS[row], anchor="x", tickvals=[0, 0.5, 1])
    title = _threshold_traces(fig, layout, forms, sources, rule, first_changed, x, hover, template)
    _first_changed_line(fig, first_changed)
    # the title's two lines at the top, then the legend above the plot, two entries a row at any width (on a
    # phone's, entries of their own widths took a row each and ran into the title)
    legend = dict(LAYOUT["legend"], entrywidth=0.5, entrywidthmode="fraction")
    top = 60 + LEGEND_ROW * math.ceil(sum(trace.showlegend is not False for trace in fig.data) / 2)
    fig.update_layout(**{**LAYOUT, "height": 640 if has_threshold else 460, "margin": dict(LAYOUT["margin"], t=top),
                         "legend": legend},
                      title=dict(text=title, font=dict(size=13), yref="container", y=0.98, yanchor="top", x=0.5,
                                 xanchor="center", pad=dict(t=6)),
                      hovermode="x unified", hoversubplots="axis",
                      xaxis=dict(title="token position", anchor="y5" if has_threshold else "y",
                                 rangeslider=dict(visible=len(positions) > READABLE_STEPS, thickness=0.06)),
                      **{"yaxis": dict(title="probability", range=[0, 1.02]), **layout})
    return fig


def _threshold_traces(fig, layout, forms, sources, rule, first_changed, x, hover, template):
    """The upper panel: the rule's statistic per position in the provenance colours and its threshold as a tick
    per position (its axis into ``layout``); returns the figure's title."""
    known = next((form for form in forms if form is not None), None)
    if known is None:
        return f"Per step: {rule} has no threshold"
    label, formula = known[0], known[3]
    statistic, limit = (_numbers(form and form[k] for form in forms) for k in (1, 2))
    shown = shown_sources(sources, rule, first_changed)
    infinite = np.isinf(statistic)
    top = None
    if infinite.any():  # the KL judge's confidence mask: a* inf, drawn as triangles above the finite numbers
        top = np.nanmax(np.concatenate([statistic[~infinite], limit[np.isfinite(limit)], [1.0]])) * 1.1
        fig.add_trace(go.Scatter(x=x[infinite], y=np.full(int(infinite.sum()), top), mode="markers", yaxis="y",
                                 name=f"{label} = inf", hoverinfo="skip",
                                 marker=dict(symbol="triangle-up", size=10, color="#333")))
    # the markers are drawn a trace per provenance (each its legend entry) and say nothing on hover: a hover over
    # all positions says it (``_statistic_hover``), so that one x's hover reads one position's numbers
    for source in dict.fromkeys(shown):
        at = np.array([s == source for s in shown]) & ~np.isnan(statistic)  # NaN: no statistic (the floor's)
        if not at.any():
            continue
        fig.add_trace(go.Scatter(x=x[at], y=statistic[at], name=f"{label}, {source.replace('-', ' ')}",
                                 mode="markers", yaxis="y", hoverinfo="skip",
                                 marker=dict(color=COLOURS[source], symbol=SYMBOLS[source], size=7,
                                             line=dict(color="#333", width=0.5))))
    fig.add_trace(_statistic_hover(x, statistic, top, label, shown, hover))
    # the threshold as a tick per position: the rule defers where the marker sits below its tick
    fig.add_trace(go.Scatter(x=x, y=limit, name=f"threshold: {formula}", yaxis="y", mode="markers",
                             marker=dict(symbol="line-ew", size=10, line=dict(color="#000", width=2)),
                             customdata=hover, hovertemplate=template))
    scale = dict(title="probability", range=[0, 1.02]) if label in PROBABILITY_LABELS else dict(title=label)
    layout["yaxis"] = dict(scale, domain=STEP_PANELS["y"])
    verb = "above" if RULES[rule].defers_above else "below"
    return f"Per step: {rule} defers where {label}<br>is {verb} its threshold {formula}"


def _statistic_hover(x, statistic, top, label, shown, hover):
    """An invisible point at every position of the upper panel, saying its token, its statistic (inf where the
    judge's mask defers at every alpha, a dash where nothing was proposed) and its provenance: the step figure's
    hover is one x at a time ("x unified"), which takes from each trace its point nearest that x, so a trace with
    gaps (one provenance's markers) answered with a neighbour's numbers."""
    finite = np.isfinite(statistic)
    y = np.where(finite, statistic, np.where(np.isinf(statistic), top if top is not None else 1.0, 0.0))
    said = _strings([number(v) if np.isfinite(v) else "inf: defers at every alpha" if np.isinf(v) else
                     "– (nothing was proposed)" for v in statistic])
    return go.Scatter(x=x, y=y, name=label, mode="markers", yaxis="y", showlegend=False,
                      marker=dict(size=7, opacity=0), customdata=np.stack([hover, said, _strings(
                          [s.replace("-", " ") for s in shown])], axis=-1),
                      hovertemplate=f"#%{{x}} %{{customdata[0]}} (%{{customdata[2]}})<br>{label} = "
                                    "%{customdata[1]}<extra></extra>")


def critical_alpha_figure(positions, sources, rule, alpha, axis_range, first_changed=None):
    """a* of every token for the rule, and a line at alpha: tokens above the line defer, so a token
    flips when the line crosses it. Infinite a* are drawn at the axis edge as triangles. One trace per
    (provenance, marker) keeps colours and symbols scalar: per-point ones cost plotly ~20 ms per drag."""
    lo, hi = axis_range
    groups = {}
    for i, (pos, shown) in enumerate(zip(positions, shown_sources(sources, rule, first_changed))):
        a_star = (pos.get("a_star") or {}).get(rule)
        if a_star is None:
            continue
        symbol = "triangle-up" if a_star > hi else "triangle-down" if a_star < lo else SYMBOLS[shown]
        decision = "defers" if alpha < a_star else "does not defer"
        groups.setdefault((shown, symbol), []).append(
            (i, clip(a_star, lo, hi), plot_text(pos["text"]), number(a_star), decision))
    fig = go.Figure()
    named = set()
    for (shown, symbol), rows in groups.items():
        x, y, *custom = zip(*rows)
        fig.add_trace(go.Scatter(
            x=np.array(x), y=np.array(y), mode="markers", name=shown.replace("-", " "), legendgroup=shown,
            showlegend=shown not in named,
            marker=dict(color=COLOURS[shown], symbol=symbol, size=8, line=dict(color="#333", width=0.5)),
            customdata=_strings(list(zip(*custom))),
            hovertemplate=f"#%{{x}} %{{customdata[0]}}<br>a* = %{{customdata[1]}}: %{{customdata[2]}} at this alpha"
                          f"<br>{shown}<extra></extra>"))
        named.add(shown)
    fig.add_hline(y=alpha, line=dict(color="#000", dash="dash"), annotation_text=f"alpha = {alpha:.2f}",
                  annotation_position="top right")
    _first_changed_line(fig, first_changed)
    span = hi - lo
    fig.update_layout(**{**LAYOUT, "height": 360, "margin": dict(LAYOUT["margin"], t=100)},
                      title=dict(text=f"Critical alpha a* per token ({rule}):<br>defers where a* is above the line",
                                 font=dict(size=13), yref="container", y=0.98, yanchor="top", x=0.5,
                                 xanchor="center", pad=dict(t=6)),
                      xaxis=dict(title="token position"),
                      yaxis=dict(title="a*", range=[lo - 0.04 * span, hi + 0.04 * span]))
    return fig


def _bars(top, highlight):
    """Top-10 rows [id, text, prob] as a horizontal bar trace, largest on top; highlighted tokens darker."""
    rows = list(reversed(top))
    return dict(x=[r[2] for r in rows], y=[f"{plot_text(r[1])} " for r in rows],
                colours=[highlight.get(r[0], "#BBBBBB") for r in rows])


def inspector_figure(pos, rule, alpha):
    """Top-10 of q (draft) and p (target) side by side; the proposal and the emitted token highlighted,
    and the rule's threshold drawn on the panel whose statistic it tests."""
    floor = pos["source"] == "target"  # gamma "auto"'s floor: the target's own token, nothing proposed
    highlight = {pos["token"]: COLOURS["target-only"]} if floor else {pos["proposal"]: COLOURS["accepted"]}
    if pos["token"] != pos["proposal"]:
        highlight[pos["token"]] = COLOURS["replaced"]
    tops = (pos.get("top_q"), pos.get("top_p"))
    absent = "none (floor)" if floor else "not run"  # short: the title fits half a phone's width
    titles = [f"{name}: top 10" if top else f"{name}: {absent}" for name, top in zip(("draft q", "target p"), tops)]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.2, subplot_titles=titles)
    for col, top in enumerate(tops, start=1):
        if top:
            bars = _bars(top, highlight)
            fig.add_trace(go.Bar(x=bars["x"], y=bars["y"], orientation="h", marker_color=bars["colours"],
                                 hovertemplate="%{y}: %{x:.4f}<extra></extra>", showlegend=False), row=1, col=col)
    form = threshold(rule, pos, alpha)
    if form is not None:
        label, stat, thresh, formula = form
        if label in PROBABILITY_LABELS and not math.isinf(thresh):
            col = 2 if label == "p(x)" else 1
            fig.add_vline(x=thresh, line=dict(color="#000", dash="dash"), row=1, col=col,
                          annotation_text=f"{formula} = {thresh:.3f}", annotation_position="bottom right")
    token = plot_text(pos["proposal_text"])
    title = (f"the target sampled {token} alone (pink): no draft here" if floor else
             f"draft proposed {token} (blue); target's correction in vermillion")
    fig.update_layout(**{**LAYOUT, "height": 340}, bargap=0.15, title=dict(text=title, font=dict(size=13)))
    fig.update_xaxes(range=[0, 1.0], title="probability")
    return fig


def acceptance_figure(metrics):
    """The run's acceptance by draft position in the serving engines' schema (Trace.speculative_decoding): bar j,
    the share of verify steps that kept the draft's j-th token (and so every one before it), as vLLM and llama.cpp
    report it; the title, what was kept and the tokens a verify step emitted. None (a baseline, a sequential
    cascade): a note that the run verified no block."""
    fig = go.Figure()
    if metrics is None:
        fig.update_layout(**{**LAYOUT, "height": 140}, xaxis=dict(visible=False), yaxis=dict(visible=False),
                          annotations=[dict(text="No verify steps in this run (one model alone, or a sequential "
                                                  "cascade): nothing to accept", showarrow=False, x=0.5, y=0.5,
                                            xref="paper", yref="paper")])
        return fig
    n, rates = metrics["num_spec_steps"], metrics["acceptance_rate_per_position"]
    positions = np.arange(1, len(rates) + 1)
    kept = np.round(np.array(rates) * n).astype(int)
    fig.add_trace(go.Bar(x=positions, y=np.array(rates), marker_color=COLOURS["accepted"], customdata=kept,
                         hovertemplate=f"draft token %{{x}}: kept in %{{customdata}} of {n} verify steps"
                                       "<extra></extra>", showlegend=False))
    # kept of checked is the stats' acceptance rate; of drafted, vLLM's (the drafts after a rejection count too)
    kept, checked = metrics["num_accepted_draft_tokens"], round(metrics["mean_acceptance_length"] * n)
    title = (f"Acceptance by draft position<br>kept {kept} of {checked} checked ({kept / checked:.0%}), of "
             f"{metrics['num_draft_tokens']} drafted ({metrics['draft_acceptance_rate']:.0%})<br>"
             f"{metrics['mean_acceptance_length']:.2f} tokens a verify step, {n} steps")
    fig.update_layout(**{**LAYOUT, "height": 280, "margin": dict(LAYOUT["margin"], t=80)},
                      title=dict(text=title, font=dict(size=13), x=0.5, xanchor="center"), bargap=0.25,
                      xaxis=dict(title="draft token j in its block", tickvals=positions),
                      yaxis=dict(title="steps keeping it", range=[0, 1.02], tickformat=".0%"))
    return fig
