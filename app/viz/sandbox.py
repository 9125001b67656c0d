"""The sandbox's pictures of one decision: q, p, pi and the verified output as bars with the rule's threshold, a* per
token against alpha, and the table of every number."""
import html

import numpy as np
import plotly.graph_objects as go
import torch

from cascade_core import RULES
from cascade_core.method.distributions import total_variation

from .format import clip, number, plot_label
from .tokens import COLOURS

REST = "the rest"  # of the vocabulary: app.sandbox's last token when a position of a run is loaded

BARS = (("q", "draft q", COLOURS["accepted"]), ("p", "target p", COLOURS["replaced"]),
        ("pi", "pi (verified against)", "#009E73"), ("output", "P(verified token)", "#555555"))
# a keep-set rule has no pi: its bar is the probability of keeping each token (cascade_core/method/keep_sets.py)
KEEP_BARS = BARS[:2] + (("accept_prob", "a(v): kept with", "#009E73"), BARS[3])

SUBTITLE = dict(xref="paper", yref="paper", y=1.02, yanchor="bottom", xanchor="left", showarrow=False,
                font=dict(size=13))


def threshold_line(rule, numbers, alpha):
    """(value, label) of the rule's threshold on the probability axis, or None where it is not a probability. The
    maxima are the tokens' (the rest of a vocabulary, with no a*, is never one)."""
    record = RULES[rule]
    if record.threshold is None or record.statistic[0] not in ("max q", "q(x)", "p(x)"):
        return None
    tokens = [i for i, a in enumerate(numbers["a_star"]) if a is not None]
    pos = dict(max_q=max(numbers["q"][i] for i in tokens), max_p=max(numbers["p"][i] for i in tokens),
               tv=numbers["tv"])
    return record.threshold[1](pos, alpha), f"{record.threshold[0]} = {record.threshold[1](pos, alpha):.3f}"


def sandbox_figure(labels, numbers, rule, alpha, axis_range):
    """Bars on the left axes, a* on the right. Axes are laid out by hand and the template is plotly's process-wide
    default: make_subplots and a per-figure template cost ~50 ms of a slider move's 50 ms budget."""
    # escaped (plotly reads a subset of HTML in labels); a trailing space keeps numbers categorical
    names = np.array([f"{plot_label(label)} " for label in labels], dtype=object)
    fig = go.Figure()
    for key, name, colour in (BARS if numbers["pi"] is not None else KEEP_BARS):
        fig.add_trace(go.Bar(x=names, y=np.array(numbers[key]), name=name, marker_color=colour,
                             hovertemplate="%{x}: %{y:.3f}<extra>" + name + "</extra>"))
    lines = [(alpha, f"alpha = {alpha:.2f}", "2")]
    line = threshold_line(rule, numbers, alpha)
    if line is not None and 0 <= line[0] <= 1:
        lines.append((*line, ""))
    lo, hi = axis_range
    has = [a is not None for a in numbers["a_star"]]  # the rest of a vocabulary has no a* of its own
    stars = [a for a in numbers["a_star"] if a is not None]
    a_star = np.array([clip(a, lo, hi) for a in stars])
    fig.add_trace(go.Scatter(x=names[np.array(has)], y=a_star, mode="markers", name="a*", showlegend=False,
                             xaxis="x2", yaxis="y2",
                             marker=dict(size=12, color=["#D55E00" if d else "#0072B2"
                                                         for d, h in zip(numbers["defers"], has) if h],
                                         symbol=["triangle-up" if a > hi else "triangle-down" if a < lo else "circle"
                                                 for a in stars]),
                             customdata=np.array([number(a) for a in stars], dtype=object),
                             hovertemplate="%{x}: a* = %{customdata}<extra></extra>"))
    fig.update_layout(
        barmode="group", height=380, margin=dict(l=50, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.15),
        xaxis=dict(domain=[0, 0.58]), yaxis=dict(range=[0, 1.02], title="probability"),
        xaxis2=dict(domain=[0.68, 1], anchor="y2"),
        yaxis2=dict(anchor="x2", range=[lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)], title="a*"),
        shapes=[dict(type="line", xref=f"x{axis} domain", x0=0, x1=1, yref=f"y{axis}", y0=y, y1=y,
                     line=dict(color="#000", dash="dash")) for y, _, axis in lines],
        annotations=[*(dict(text=label, xref=f"x{axis} domain", x=1, xanchor="right", yref=f"y{axis}", y=y,
                            yanchor="bottom", showarrow=False) for y, label, axis in lines),
                     # short: the two titles share one line, which a phone's 420 px cut into each other
                     dict(text=f"q, p, {'pi' if numbers['pi'] is not None else 'a(v)'}, P(output)", x=0, **SUBTITLE),
                     dict(text="a*, alpha", x=0.68, **SUBTITLE)])
    return fig


def defers_text(value):
    return "yes" if value else "no" if value is not None else "some"


def loaded_html(loaded, labels, numbers, rule, alpha):
    """What a position loaded from Explore's run shows, and what it cannot: the rest of the vocabulary is many
    tokens, and the run's temperature may not be the Sandbox's 1."""
    rest, defers = loaded["rest"], numbers["defers"][-1]
    split = {True: "every token in it defers", False: "none of its tokens defers",
             None: "it splits: some of its tokens defer and some do not, which the listed numbers cannot show, so "
                   "pi and the keep probabilities take none of them as deferred"}[defers]
    parts = [f"Loaded from Explore's run, token #{loaded['index']} (the run: {loaded['rule']}, alpha = "
             f"{loaded['alpha']:.2f}, T = {loaded['temperature']:g}; the draft proposed {loaded['proposal']!r}, "
             f"{loaded['source']}). '{REST}' holds the rest of the vocabulary, every token not listed (each with "
             f"q ≤ {rest['q_bound']:.3f} and p ≤ {rest['p_bound']:.3f}): never a rule's max, no a* of its own; at "
             f"this alpha {split}. TV and the position rules' a* are the engine's, over the whole vocabulary."]
    engine_a_star = rest["a_star"].get(rule)
    if engine_a_star is not None:
        parts.append(f"The engine's a* for {rule} at this token: {number(engine_a_star)}.")
    if (rule, alpha) == (loaded["rule"], loaded["alpha"]) or not RULES[rule].alpha_used and rule == loaded["rule"]:
        kept = numbers["accept_prob"][0]
        parts.append(f"The engine kept the proposal with probability {number(loaded['accept_prob'])}; here "
                     f"{'a(x)' if RULES[rule].keep is not None else 'min(1, pi/q)'} = {number(kept)}.")
    if loaded["temperature"] != 1:
        parts.append(f"The run sampled at T = {loaded['temperature']:g} and the Sandbox computes at T = 1. Which "
                     "tokens defer is still the run's for every rule but lossy: the position rules' a* here are the "
                     "engine's at the run's T (opt's reads TV of the tempered q and p, and BiLD* takes its greedy "
                     "form at T = 0, so theirs change with T), and v1, v2 and v3 threshold temperature-1 "
                     "probabilities, as the engine does. pi, the keep probabilities and the residual here are T = 1's "
                     "for every rule (the run verified against the tempered q and p); lossy's a* is T = 1's too.")
    return f'<p class="loaded">{html.escape(" ".join(parts))}</p>'


def cost_html(rule, cost):
    """The rule's rejection probability beside lossless's TV (``cost``: both as cascade_core.method.costs.Rejection): a
    position rule's is Lemma 3's r TV, a token rule's two terms (Eq. 11's pi put into Lemma 3's sum, which the paper
    does not write out), which can exceed lossless's TV."""
    ours, lossless = cost
    than = "above" if ours.total > lossless.total else "below" if ours.total < lossless.total else "equal to"
    beside = f"{than} lossless's TV(p, q) = {lossless.total:.4f}"
    if RULES[rule].keep is not None:
        text = (f"{rule} has no pi, so Lemma 3 does not apply: it rejects the draft's token with probability "
                f"Σ_v q(v) (1 − a(v)) = {ours.total:.4f}, {beside}; the draft's mass outside the tokens it keeps "
                f"outright is {ours.eta:.3f}.")
    elif RULES[rule].mix:
        text = (f"Lemma 3 with a fractional r = alpha: pi = alpha p + (1 − alpha) q rejects the draft's token with "
                f"probability alpha TV(p, q) = {ours.eta:g} × {lossless.total:.4f} = {ours.total:.4f}, {beside}.")
    elif not RULES[rule].per_token:
        text = (f"Lemma 3: a position rule's pi is q or p, so {rule} rejects the draft's token with probability "
                f"r TV(p, q) = {ours.eta:g} × {lossless.total:.4f} = {ours.total:.4f}, {beside}.")
    else:
        text = (f"Eq. 11's pi in Lemma 3's sum: {rule} rejects the draft's token with probability eta Σ_(v in A) p(v) "
                f"+ Σ_(v not in A) max(0, eta p(v) − q(v)) = {ours.kept:.4f} + {ours.deferred:.4f} = "
                f"{ours.total:.4f} (eta = {ours.eta:.3f}), {beside}. Not r TV (Lemma 3 is a position rule's): a "
                "proposal outside A passes only with min(1, eta p(v) / q(v)), so a token rule can reject more often "
                "than lossless, and need not reject less as alpha grows.")
    return f'<p class="cost" id="sandbox-cost">{html.escape(text)}</p>'


def output_tv(numbers):
    """TV between dissect's output distribution and p: how far from the target a rule's verified token lies."""
    return float(total_variation(torch.tensor(numbers["output"]), torch.tensor(numbers["p"])))


def keep_set_html(labels, numbers, rule):
    """A keep-set rule's decision: which tokens it keeps outright, what a rejection samples from, how far its output
    lies from p (no pi to verify against: cascade_core/method/keep_sets.py), and the table without pi and residual."""
    kept = [repr(label) for label, defers in zip(labels, numbers["defers"]) if not defers]  # alpha >= a*
    one_hot = [label for label, b in zip(labels, numbers["base"]) if b == 1]  # the target's argmax, or p itself
    base = f"the target's argmax {one_hot[0]!r}" if one_hot else "p with the rejected token taken out, renormalised"
    off = output_tv(numbers)
    outright = f"keeps {{{', '.join(kept)}}} outright (a(v) = 1), every other proposal" if kept else \
        "keeps no token outright: every proposal is kept"
    text = (f"{rule} {outright} with a(v) < 1, and a "
            f"rejection emits {base}. There is no pi: the verified token follows the P(output) column, at TV "
            f"{off:.4f} from p. The draft's token is rejected with probability {numbers['rejection_prob']:.3f}.")
    rows = "".join(f"<tr><td>{html.escape(repr(label))}</td>" + "".join(
        f"<td>{numbers[k][i]:.3f}</td>" for k in ("q", "p", "accept_prob", "output")) +
        f"<td>{number(numbers['a_star'][i])}</td><td>{defers_text(not numbers['defers'][i])}</td></tr>"
        for i, label in enumerate(labels))
    return (f"<p>{html.escape(text)} TV(p, q) = {numbers['tv']:.3f}.</p><table><tr><th>token</th><th>q</th>"
            "<th>p</th><th>keep prob a(v)</th><th>P(output)</th><th>a*</th><th>kept outright</th></tr>"
            f"{rows}</table>")


def sandbox_html(labels, numbers, rule, alpha, loaded=None, cost=None):
    """What the rule decides, in words, and the per-token table (``loaded``: a position of Explore's run;
    ``cost``: the rule's and lossless's cascade_core.method.costs.Rejection, for ``cost_html``)."""
    record = RULES[rule]
    if record.keep is not None:
        note = loaded_html(loaded, labels, numbers, rule, alpha) if loaded else ""
        return (f'<div class="sandbox">{note}{keep_set_html(labels, numbers, rule)}'
                f'{cost_html(rule, cost) if cost else ""}</div>')
    tokens = [(label, d) for label, d, a in zip(labels, numbers["defers"], numbers["a_star"]) if a is not None]
    deferred = [label for label, d in tokens if d]
    if not record.alpha_used:
        decision = record.summary
    elif record.mix:
        decision = (f"{rule} decides nothing: every proposal is verified against the mix pi = {alpha:.2f} p + "
                    f"{1 - alpha:.2f} q (alpha is the target's weight).")
    elif record.per_token:
        kept = [label for label, d in tokens if not d]
        decision = (f"{rule} keeps the accepted set A = {{{', '.join(map(repr, kept))}}} (a proposal from A is kept "
                    f"with probability 1) and defers {{{', '.join(map(repr, deferred))}}} (alpha = {alpha:.2f} < a*).")
    else:
        decision = (f"{rule} {'defers' if deferred else 'does not defer'} at this position: a* = "
                    f"{number(numbers['a_star'][0])} {'>' if deferred else '<='} alpha = {alpha:.2f}, so pi = "
                    f"{'p' if deferred else 'q'}.")
    rows = "".join(
        f"<tr><td>{html.escape(repr(label))}</td>" + "".join(f"<td>{numbers[k][i]:.3f}</td>" for k in
                                                            ("q", "p", "pi", "accept_prob", "residual", "output"))
        + f"<td>{number(numbers['a_star'][i])}</td><td>{defers_text(numbers['defers'][i])}</td></tr>"
        for i, label in enumerate(labels))
    agree = max(abs(a - b) for a, b in zip(numbers["output"], numbers["pi"]))
    check = ("Enumerating the draft's proposals gives exactly pi (largest difference "
             f"{agree:.1e})." if record.kind != "speculative" or not record.lenience else
             "Lossy decoding's acceptance is not min(1, pi / q): its output differs from p, by design.")
    rejection = (f"The draft's token is rejected with probability {numbers['rejection_prob']:.3f}; a rejection "
                 "samples the residual." if any(numbers["residual"]) else
                 "pi = q: max(0, pi - q) is zero for every token, so every proposal is kept and no rejection can "
                 "happen; the residual is never sampled.")
    note = loaded_html(loaded, labels, numbers, rule, alpha) if loaded else ""
    return (f'<div class="sandbox">{note}<p>{html.escape(decision)} TV(p, q) = {numbers["tv"]:.3f}. '
            f'{html.escape(check)} {html.escape(rejection)}</p>{cost_html(rule, cost) if cost else ""}'
            "<table><tr><th>token</th><th>q</th><th>p</th><th>pi</th><th>keep prob min(1, pi/q)</th>"
            "<th>residual norm(max(0, pi - q))</th><th>P(output)</th><th>a*</th><th>defers</th></tr>"
            f"{rows}</table></div>")

