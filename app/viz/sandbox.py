"""The sandbox's pictures of one decision: q, p, pi and the verified output as bars with the rule's threshold, a* per
token against alpha, and the table of every number."""
import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cascade_core import RULES

from .format import clip, number
from .tokens import COLOURS

BARS = (("q", "draft q", COLOURS["accepted"]), ("p", "target p", COLOURS["replaced"]),
        ("pi", "pi (verified against)", "#009E73"), ("output", "P(verified token)", "#555555"))


def threshold_line(rule, numbers, alpha):
    """(value, label) of the rule's threshold on the probability axis, or None where it is not a probability."""
    record = RULES[rule]
    if record.threshold is None or record.statistic[0] not in ("max q", "q(x)", "p(x)"):
        return None
    pos = dict(max_q=max(numbers["q"]), max_p=max(numbers["p"]), tv=numbers["tv"])
    return record.threshold[1](pos, alpha), f"{record.threshold[0]} = {record.threshold[1](pos, alpha):.3f}"


def sandbox_figure(labels, numbers, rule, alpha, axis_range):
    names = [f"{label} " for label in labels]  # a trailing space keeps numeric labels categorical
    fig = make_subplots(rows=1, cols=2, column_widths=[0.64, 0.36], horizontal_spacing=0.1,
                        subplot_titles=("q, p, pi and the verified token's distribution", "a* per token and alpha"))
    for key, name, colour in BARS:
        fig.add_trace(go.Bar(x=names, y=numbers[key], name=name, marker_color=colour,
                             hovertemplate="%{x}: %{y:.3f}<extra>" + name + "</extra>"), row=1, col=1)
    line = threshold_line(rule, numbers, alpha)
    if line is not None and 0 <= line[0] <= 1:
        fig.add_hline(y=line[0], line=dict(color="#000", dash="dash"), annotation_text=line[1], row=1, col=1)
    lo, hi = axis_range
    a_star = [clip(a, lo, hi) for a in numbers["a_star"]]
    fig.add_trace(go.Scatter(x=names, y=a_star, mode="markers", name="a*", showlegend=False,
                             marker=dict(size=12, color=["#D55E00" if d else "#0072B2" for d in numbers["defers"]],
                                         symbol=["triangle-up" if a > hi else "triangle-down" if a < lo else "circle"
                                                 for a in numbers["a_star"]]),
                             customdata=[number(a) for a in numbers["a_star"]],
                             hovertemplate="%{x}: a* = %{customdata}<extra></extra>"), row=1, col=2)
    fig.add_hline(y=alpha, line=dict(color="#000", dash="dash"), annotation_text=f"alpha = {alpha:.2f}", row=1, col=2)
    fig.update_yaxes(range=[0, 1.02], title="probability", row=1, col=1)
    fig.update_yaxes(range=[lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)], title="a*", row=1, col=2)
    fig.update_layout(template="plotly_white", barmode="group", height=380, margin=dict(l=50, r=20, t=50, b=40),
                      legend=dict(orientation="h", y=-0.15))
    return fig


def sandbox_html(labels, numbers, rule, alpha):
    """What the rule decides, in words, and the per-token table."""
    record = RULES[rule]
    deferred = [label for label, d in zip(labels, numbers["defers"]) if d]
    if not record.alpha_used:
        decision = record.summary
    elif record.per_token:
        kept = [label for label, d in zip(labels, numbers["defers"]) if not d]
        decision = (f"{rule} keeps the accepted set A = {{{', '.join(map(repr, kept))}}} without the target and defers "
                    f"{{{', '.join(map(repr, deferred))}}} (alpha = {alpha:.2f} < a*).")
    else:
        decision = (f"{rule} {'defers' if deferred else 'does not defer'} at this position: a* = "
                    f"{number(numbers['a_star'][0])} {'>' if deferred else '<='} alpha = {alpha:.2f}, so pi = "
                    f"{'p' if deferred else 'q'}.")
    rows = "".join(
        f"<tr><td>{html.escape(repr(label))}</td>" + "".join(f"<td>{numbers[k][i]:.3f}</td>" for k in
                                                            ("q", "p", "pi", "accept_prob", "residual", "output"))
        + f"<td>{number(numbers['a_star'][i])}</td><td>{'yes' if numbers['defers'][i] else 'no'}</td></tr>"
        for i, label in enumerate(labels))
    agree = max(abs(a - b) for a, b in zip(numbers["output"], numbers["pi"]))
    check = ("Enumerating the draft's proposals gives exactly pi (largest difference "
             f"{agree:.1e})." if record.kind != "speculative" or not record.lenience else
             "Lossy decoding's acceptance is not min(1, pi / q): its output differs from p, by design.")
    return (f'<div class="sandbox"><p>{html.escape(decision)} TV(p, q) = {numbers["tv"]:.3f}. {html.escape(check)}</p>'
            "<table><tr><th>token</th><th>q</th><th>p</th><th>pi</th><th>keep prob min(1, pi/q)</th>"
            "<th>residual norm(max(0, pi - q))</th><th>P(output)</th><th>a*</th><th>defers</th></tr>"
            f"{rows}</table></div>")

