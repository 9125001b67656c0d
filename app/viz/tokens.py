"""The answer as HTML: one span per emitted token, coloured by provenance, with a hover card and its
position for click-to-inspect. Token text is always escaped; whitespace is kept and made visible."""
import html
import math

from cascade_core.decoding.batch_block import PROBE_EVERY
from cascade_core.method.explain import deferred, threshold
from cascade_core.method.rules import RULES
from cascade_core.method.sampling import NEAR_TIE

from .format import number, token_repr

# Okabe-Ito: safe for the common colour-vision deficiencies; each source also has its own underline style.
COLOURS = {"accepted": "#0072B2", "deferred": "#E69F00", "replaced": "#D55E00", "will-change": "#999999",
           "target-only": "#CC79A7", "draft-only": "#56B4E9"}
LEGEND = {
    "accepted": "the rule did not defer: the draft's token, verified and kept with probability 1",
    "deferred": "the target checked the draft's token and kept it",
    "replaced": "the target's correction",
    "will-change": "may change: regenerated when you let go of the control (from the first grey token on)",
    "decided-otherwise": "the rule's own test goes the other way here at the new setting (alpha crossed a*)",
}
# A baseline's tokens come from one model alone: the engine records them as always (target) or never (draft)
# deferred, but nothing was checked or kept, so they are shown under a label of their own.
BASELINE_SOURCES = {"target": "target-only", "draft": "draft-only"}
BASELINE_LEGEND = {"target-only": "sampled from the target alone (a baseline, or gamma auto's floor)",
                   "draft-only": "sampled from the draft alone (a baseline)"}
NEWLINE_MARK = '<span class="nl">↵</span>\n'
TAB_MARK = '<span class="ws">→</span>\t'


def legend_html(rules=(), regenerates=True, sources=()):
    """The provenance legend: the cascade's labels, a baseline's own for the baselines among ``rules`` (and
    target-only where ``sources`` hold gamma "auto"'s floor), and "will change" and "decided otherwise" where alpha's
    slider can grey and outline tokens (``regenerates``)."""
    entries = {name: text for name, text in LEGEND.items()
               if regenerates or name not in ("will-change", "decided-otherwise")}
    shown = {BASELINE_SOURCES[r] for r in rules if r in BASELINE_SOURCES} | {shown_source(None, s) for s in sources}
    entries.update({name: text for name, text in BASELINE_LEGEND.items() if name in shown})
    items = "".join(f'<span class="legend-item"><span class="tok {name}">{name.replace("-", " ")}</span> '
                    f"{html.escape(text)}</span>" for name, text in entries.items())
    return f'<div class="legend">{items}</div>'


def shown_source(rule, source):
    """The label a token is shown under: a baseline's own, "target-only" for the target's own token in a lossless
    run (gamma "auto"'s floor), else its provenance."""
    if source == "target":
        return BASELINE_SOURCES["target"]
    return BASELINE_SOURCES.get(rule, source) if source != "will-change" else source


def _visible_edges(segment):
    """Escaped segment whose leading and trailing spaces carry a dot, so they can be seen (still real
    spaces: lines wrap and copying works)."""
    stripped = segment.strip(" ")
    if not stripped:
        return '<span class="sp"> </span>' * len(segment)
    lead = len(segment) - len(segment.lstrip(" "))
    trail = len(segment) - len(segment.rstrip(" "))
    return '<span class="sp"> </span>' * lead + html.escape(stripped) + '<span class="sp"> </span>' * trail


def token_text_html(text):
    """A token's text as HTML: escaped, newlines as ↵ plus a real line break, tabs as →, edge spaces dotted."""
    if text == "":
        return '<span class="empty"></span>'  # a byte of a character completed by a later token
    lines = [TAB_MARK.join(_visible_edges(part) for part in line.split("\t")) for line in text.split("\n")]
    return NEWLINE_MARK.join(lines)


def tooltip(index, pos, source, rule):
    """The hover card: what the draft proposed, both models' numbers, and a* for the rule."""
    a_star = (pos.get("a_star") or {}).get(rule)
    if rule in BASELINE_SOURCES or pos["source"] == "target":
        model, prob = ("draft", "q(x) = " + number(pos["q_x"])) if rule == "draft" else \
            ("target", "p(x) = " + number(pos["p_x"]))
        why = "" if rule in BASELINE_SOURCES else " (gamma auto's floor: no block paid here; exact, as pi = p)"
        return f"#{index} {token_repr(pos['text'])}  ({source})\nsampled from the {model} alone{why}   {prob}"
    lines = [
        f"#{index} {token_repr(pos['text'])}  ({source})",
        f"draft proposed {token_repr(pos['proposal_text'])}   q(x) = {number(pos['q_x'])}   p(x) = {number(pos['p_x'])}"
        "   (T = 1)",
        f"max q = {number(pos['max_q'])}   max p = {number(pos['max_p'])}   (T = 1)   TV = {number(pos['tv'])}"
        "   (the run's T)",
        f"acceptance prob = {number(pos['accept_prob'])}   (the run's T)   a*({rule}) = {number(a_star)}",
    ]
    if pos.get("near_tie"):
        lines.append(f"near-tie ({', '.join(pos['near_tie'])}): decided within {NEAR_TIE:g} of going the other way; "
                     "beside other calls' rows it can (Reproducible decodes alone)")
    return "\n".join(lines)


def token_span(index, pos, source, rule, extra_class="", width=None, tabindex=None, special=False):
    """One token with its hover card; ``width`` (in characters) lines tokens up in columns (Compare's rows);
    ``tabindex``: focusable by keyboard (0: the token Tab reaches, -1: one the arrow keys reach); ``special``: a
    special token (end of turn, end of text), kept as a mark with its card but not as text."""
    style = "" if width is None else f' style="min-width:{width}ch"'
    source = shown_source(rule, source)
    extra_class += " near-tie" if pos.get("near_tie") else ""
    extra_class += " special" if special else ""
    focus = "" if tabindex is None else f' tabindex="{tabindex}"'
    text = "" if special else token_text_html(pos["text"])
    return (f'<span class="tok {source}{extra_class}"{style} data-pos="{index}"{focus} '
            f'data-tip="{html.escape(tooltip(index, pos, source, rule))}">{text}</span>')


def tokens_html(positions, sources, rule, first_changed=None, running=False, note="", special=frozenset(),
                selected=None, focusable=False, decides=frozenset()):
    """All tokens; from ``first_changed`` on they are greyed as 'will change' (that one also marked as
    the first flip), the positions in ``decides`` outlined (the rule's own test goes the other way there).
    ``sources`` are the provenances under the displayed (rule, alpha); ``special``: the token ids shown as a mark,
    not as text; ``selected``: the inspected position; ``focusable``: one token in the page's Tab order (the
    selected one, else the first), the others reached with the arrow keys (Explore's script)."""
    spans = []
    focused = selected if selected is not None and 0 <= selected < len(positions) else 0
    for i, (pos, source) in enumerate(zip(positions, sources)):
        extra = " selected" if i == selected else ""
        if first_changed is not None and i >= first_changed:
            source = "will-change"
            extra += (" flip" if i == first_changed else "") + (" decided-otherwise" if i in decides else "")
        tabindex = (0 if i == focused else -1) if focusable else None
        spans.append(token_span(i, pos, source, rule, extra, tabindex=tabindex, special=pos.get("token") in special))
    if not positions and not running:
        return '<div class="tokens empty-answer">Run the cascade to see its tokens here.</div>'
    if running:
        # Left open (the browser closes it; the cursor is drawn by CSS): each block's view then begins with the last
        # one's text, and Gradio streams only what was appended, not the whole answer again.
        return f'<div class="tokens running">{"".join(spans)}'
    footer = f'<div class="tokens-note">{html.escape(note)}</div>' if note else ""
    return f'<div class="tokens">{"".join(spans)}</div>{footer}'


def inspector_html(index=None, pos=None, explanation="", note="", rule=None):
    """The inspector's words for a clicked token, every piece of text escaped: a token is shown as its literal
    text, never as markup; its provenance under the label the token view shows for ``rule``. Without a token:
    ``note``, or how to inspect one."""
    if pos is None:
        return f'<div class="inspector-text"><em>{html.escape(note or "Click a token to inspect it.")}</em></div>'
    heading = (f"<strong>Token #{index}</strong> <code>{html.escape(token_repr(pos['text']))}</code>, "
               f"{html.escape(shown_source(rule, pos['source']).replace('-', ' '))}, block {pos['block']}.")
    note = f" <em>({html.escape(note)})</em>" if note else ""
    return f'<div class="inspector-text">{heading} {html.escape(explanation)}{note}</div>'


def explain(rule, pos, alpha):
    """One sentence, with the numbers, saying why the rule did what it did at this position."""
    if pos["source"] == "target":
        return (f"The target's own token: gamma \"auto\" priced every block length slower than the target alone at "
                f"this row's acceptance so far, so the target sampled {pos['text']!r} itself (exact for lossless, "
                f"whose pi is p); after {PROBE_EVERY} such tokens in a row a block drafts again to see the acceptance. "
                "No draft proposal was made here, so no rule can be evaluated at it.")
    if rule not in (pos.get("a_star") or {}):
        return (f"{rule} cannot be evaluated at this token: it comes from a baseline run that computed only one "
                "model's distribution. Run a cascade rule to compare q and p.")
    token, proposal = repr(pos["text"]), repr(pos["proposal_text"])
    if rule == "target":
        return f"Target only: {token} was sampled from p (p = {pos['p_x']:.3f})." if pos.get("p_x") is not None \
            else f"Target only: {token} was sampled from p."
    if rule == "draft":
        return f"Draft only: {token} was sampled from q."
    kept = pos["source"] != "replaced"
    outcome = (f"the target's acceptance test kept it (probability {pos['accept_prob']:.3f})" if kept else
               f"the target rejected it (keep probability {pos['accept_prob']:.3f}) and sampled {token} instead")
    if rule == "lossless":
        return f"Lossless: the draft proposed {proposal} with q = {pos['q_x']:.3f}, p = {pos['p_x']:.3f}; {outcome}."
    label, stat, thresh, formula = threshold(rule, pos, alpha)
    a_star = pos["a_star"][rule]
    a_text = "inf" if math.isinf(a_star) else f"{a_star:.3f}"
    if math.isinf(stat):  # the KL judge's confidence mask: it defers at every alpha
        compare = f"its test is {RULES[rule].defers_when}, and max p = {pos['max_p']:.3f}"
    elif RULES[rule].defers_above:  # a divergence: deferred above alpha
        compare = f"{label} = {stat:.3f} {'>' if deferred(rule, pos, alpha) else '<='} alpha = {alpha:.3f}"
    else:
        compare = f"{label} = {stat:.3f} {'<' if deferred(rule, pos, alpha) else '>='} {formula} = {thresh:.3f}"
    if not deferred(rule, pos, alpha):
        return (f"{rule} did not defer: {compare}, so the draft's {proposal} stands "
                f"(it would defer for alpha < a* = {a_text}).")
    return (f"{rule} deferred: {compare} (alpha < a* = {a_text}), so the draft's {proposal} went to the target; "
            f"{outcome}.")
