"""Strategies on one clock: a lane per strategy, a bar per model call at its measured start and duration, and
each lane's text coloured by provenance with its totals."""
import html

import plotly.graph_objects as go

from .tokens import COLOURS, legend_html, tokens_html

ROLE_COLOURS = {"draft": COLOURS["accepted"], "target": COLOURS["replaced"], "draft prefill": "#9ecae1",
                "target prefill": "#fdae6b"}


def lanes_figure(lanes):
    """Horizontal bars: y = strategy, x = seconds since the prompt was sent (each call where it ran; the gaps between
    blocks include the time the page took the stream), each lane labelled with its engine's-clock seconds."""
    fig = go.Figure()
    names = [lane["name"] for lane in lanes]
    fig.add_trace(go.Scatter(x=[0] * len(names), y=names, mode="markers", marker=dict(opacity=0), showlegend=False,
                             hoverinfo="skip"))  # every lane keeps its row, a skipped one included
    for role, colour in ROLE_COLOURS.items():
        calls = [(lane["name"], start, end) for lane in lanes for kind, start, end in lane["calls"] if kind == role]
        if calls:
            fig.add_trace(go.Bar(y=[c[0] for c in calls], base=[c[1] for c in calls],
                                 x=[max(c[2] - c[1], 1e-4) for c in calls], orientation="h", name=f"{role} call",
                                 marker=dict(color=colour, line=dict(color="#fff", width=0.5)),
                                 hovertemplate="%{y}: " + role + " call from %{base:.3f} s, %{x:.3f} s<extra></extra>"))
    for lane in lanes:
        ran = lane["totals"] is not None
        fig.add_annotation(x=max((end for _, _, end in lane["calls"]), default=0), y=lane["name"], showarrow=False,
                           xanchor="left",
                           text=(f" {lane['totals']['engine_seconds']:.2f} s on the engine's clock" if ran
                                 else " not run: it needs the draft alone"),
                           font=dict(size=12, color=None if ran else "#666"))
    fig.update_layout(barmode="overlay", height=110 + 70 * len(lanes), bargap=0.35,
                      title=dict(text="Every draft and target call, on one clock", font=dict(size=14)),
                      xaxis=dict(title="seconds since the prompt was sent"),
                      yaxis=dict(categoryorder="array", categoryarray=names[::-1]),
                      margin=dict(l=150, r=60, t=50, b=40), legend=dict(orientation="h", y=-0.3))
    return fig


def lanes_html(lanes, rule, special=frozenset()):
    """Each lane's text, coloured as in Explore, under a line of its totals; ``special``: the pair's special token
    ids, a mark as in Explore, not text."""
    parts = [legend_html(regenerates=False, sources={s for lane in lanes for s in lane.get("sources") or ()})]
    for lane in lanes:
        t = lane["totals"]
        if t is None:
            parts.append(f'<div class="lane"><h4>{html.escape(lane["name"])}</h4><p class="totals">Not run: '
                         f'{html.escape(lane["skipped"])}.</p></div>')
            continue
        extra = ""
        if "confidence" in t:
            extra = (f"; mean max q {t['confidence']:.2f} {'<' if t['deferred'] else '>='} threshold "
                     f"{t['threshold']:.2f}: "
                     f"{'the target answered again' if t['deferred'] else 'the draft answer stands'}")
        speedup = "" if t.get("speedup") is None else (
            f'; speed-up over the target alone <span class="lane-speedup">{t["speedup"]:.2f}×</span> (priced with this '
            "machine's measured calls, as Explore and Compare price it)")
        parts.append(f'<div class="lane"><h4>{html.escape(lane["name"])}</h4>'
                     f'<p class="totals">{t["engine_seconds"]:.2f} s on the engine\'s clock ({t["seconds"]:.2f} s on '
                     f"the wall), {t['tokens']} tokens, {t['target_calls']} target calls, "
                     f"{t['draft_calls']} draft calls{html.escape(extra)}{speedup}</p>"
                     f"{tokens_html(lane['positions'], lane['sources'], rule, special=special)}</div>")
    return "".join(parts)
