"""Number and text formatting shared by the token cards, the stats panel, the figures and the docs."""
import html
import math
import re


def milliseconds(seconds):
    """A measured time for people: whole milliseconds from 10 ms, two significant figures below (a tiny model's
    0.4 ms call is not "0 ms")."""
    ms = 1000 * seconds
    return f"{ms:.{0 if ms >= 9.95 else 1 if ms >= 0.995 else 2}f} ms"


def plural(n, noun):
    """'1 row', '2 rows': a count with its noun."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def number(value, digits=3):
    """A probability, a* or statistic for people: '–' when unknown, '∞' for infinities."""
    if value is None:
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return f"{value:.{digits}f}"


def token_repr(text):
    """A token's exact text, quoted, with whitespace spelled out (for hover cards and plot hovers)."""
    return repr(text)


def plot_label(text):
    """Text for a plotly label, which reads a subset of HTML: <, > and & escaped, so '<b>' shows as '<b>'. Quotes
    stay as they are: plotly decodes no &quot;, and a token "'s" showed as &quot;'s&quot;."""
    return html.escape(str(text), quote=False)


def plot_text(text):
    """token_repr for plotly (``plot_label``)."""
    return plot_label(token_repr(text))


MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def html_text(message):
    """A message for an HTML surface (a toast, an HTML block) that shows a quoted value as text, never as markup."""
    return html.escape(str(message), quote=False)


def markdown_text(message):
    """A message for a Markdown component, shown as text: HTML escaped, and Markdown's punctuation backslashed, so
    '**bold**', '[link](x)' and '<img>' in a quoted value read as typed."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", html_text(message))


def clip(value, lo, hi):
    """value clamped into [lo, hi] (used to draw infinite a* at the edge of a finite axis)."""
    return min(max(value, lo), hi)
