"""The decision map: every position of a run as a point (TV(p, q), max p - max q), coloured by whether the rule
defers there at this alpha, with the rule's boundary in that plane. diff defers where max p - max q > alpha (Eq. 5:
a horizontal line); opt where max p - max q > alpha TV(p, q) (Eq. 10: a line through the origin of slope alpha), so
at one confidence gap opt defers where the models agree (small TV) and not where they disagree: a deferred position
is rejected with probability TV (Lemma 3), and alpha TV is the price of that rejection. The colours are the
engine's own decisions (alpha < a*), which the line separates up to rounding. Other rules do not decide on these two
numbers alone (chow reads max q; a token rule each token's own q or p), so they get the points and no line."""
import numpy as np
import plotly.graph_objects as go

from cascade_core import RULES
from cascade_core.method.explain import deferred

from .format import number, plot_text
from .tokens import COLOURS

BOUNDARIES = {"diff": ("max p − max q = alpha", lambda tv, alpha: np.full_like(tv, alpha)),
              "opt": ("max p − max q = alpha · TV", lambda tv, alpha: alpha * tv)}
GROUPS = (("deferred", "defers", COLOURS["deferred"], "square"),
          ("not deferred", "does not defer", COLOURS["accepted"], "circle"))


def verbs(rule):
    """What the two colours mean for this rule: a deferral, a keep-set rule's token not kept outright (the target's
    test decides it), or, for the ensemble, no decision at all (every position verifies against its mix)."""
    record = RULES[rule]
    if record.mix:
        return "verifies against the mix", "—"
    if record.keep is not None:
        return "does not keep outright", "keeps outright"
    return "defers", "does not defer"


def map_points(positions, rule, alpha):
    """(TV, max p - max q, whether the rule defers, hover text) per position with both models' numbers."""
    points = []
    for i, pos in enumerate(positions):
        if pos.get("tv") is None or pos.get("max_q") is None or rule not in (pos.get("a_star") or {}):
            continue
        points.append((pos["tv"], pos["max_p"] - pos["max_q"], deferred(rule, pos, alpha),
                       f"#{i} {plot_text(pos['text'])}<br>a* = {number(pos['a_star'][rule])}"))
    return points


def decision_map_figure(positions, rule, alpha, also=None):
    """The map for (rule, alpha); ``also``: another (rule, alpha) whose boundary is drawn dashed for comparison."""
    points = map_points(positions, rule, alpha)
    fig = go.Figure()
    for (name, _, colour, symbol), verb in zip(GROUPS, verbs(rule)):
        chosen = [p for p in points if p[2] == (name == "deferred")]
        if chosen:
            tv, gap, _, text = zip(*chosen)
            fig.add_trace(go.Scatter(x=np.array(tv), y=np.array(gap), mode="markers", name=f"{rule} {verb}",
                                     marker=dict(color=colour, symbol=symbol, size=8,
                                                 line=dict(color="#333", width=0.5)),
                                     customdata=np.array(text, dtype=object),
                                     hovertemplate="%{customdata}<br>TV = %{x:.3f}, max p − max q = %{y:.3f}"
                                                   "<extra></extra>"))
    tv = np.linspace(0, 1, 2)
    for shown, dash in [((rule, alpha), "solid"), (also, "dash")]:
        if shown is None or shown[0] not in BOUNDARIES:
            continue
        label, line = BOUNDARIES[shown[0]]
        fig.add_trace(go.Scatter(x=tv, y=line(tv, shown[1]), mode="lines", line=dict(color="#000", dash=dash),
                                 name=f"{shown[0]}, alpha {shown[1]:.2f}: {label}", hoverinfo="skip"))
    title = ("defers above the line" if rule in BOUNDARIES else  # on a line of its own: one ran off a phone's width
             f"no decision: every position's pi = {alpha:.2f} p + {1 - alpha:.2f} q" if RULES[rule].mix else
             f"no line: {rule} does not decide on these two alone")
    fig.update_layout(margin=dict(l=50, r=20, t=100, b=40), height=360, font=dict(size=12),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
                      title=dict(text=f"Decision map ({rule}, alpha {alpha:.2f}):<br>{title}", font=dict(size=13),
                                 yref="container", y=0.98, yanchor="top", x=0.5, xanchor="center", pad=dict(t=6)),
                      xaxis=dict(title="TV(p, q)", range=[-0.02, 1.02]),
                      yaxis=dict(title="max p − max q", range=[-1.05, 1.05], zeroline=True))
    return fig
