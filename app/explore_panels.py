"""What follows Explore's run on screen: the inspector and its block's step-through, cleared when a new run starts
and re-targeted to the same position of the new run when it ends (a panel never explains a run no longer shown),
and the mark above the tokens that says which settings the run shown was not made with."""
import html

import gradio as gr

from cascade_core import RULES
from cascade_core.formats.loading import parse_pair, with_draft

from .block_steps import closed
from .settings import auto_or_fixed_gamma, draft_of
from .viz import figures
from .viz.tokens import explain, inspector_html

BLOCK = ("block_opened", "block_step", "block_view", "block_buttons")  # View's fields of the step-through


def inspector_view(run, rule, alpha, index, note=""):
    """(inspector text, its plot, the index) for token #index of the run shown under the page's (rule, alpha); a
    token that would change under them is explained under the run's own setting, and says so."""
    pos = run.trace.positions[index]
    _, first_changed = run.trace.recolour(rule, alpha)
    if first_changed is not None and index >= first_changed:
        rule, alpha = run.trace.settings["rule"], run.trace.settings["alpha"]
        note = " ".join(filter(None, [note, f"This token will change; shown under the run's own setting {rule}, "
                                            f"alpha = {alpha:.2f}."]))
    text = inspector_html(index, pos, explain(rule, pos, alpha), note, rule)
    return text, gr.update(value=figures.inspector_figure(pos, rule, alpha), visible=True), index


def cleared(index):
    """The inspector and the step-through as a new run starts streaming: neither explains the run before."""
    words = ("Click a token to inspect it." if index is None else
             f"A new run: token #{index} is inspected again, in this run, when it ends (or click one of its tokens).")
    block = closed('Click a token, then "Step through its block" to watch the block that produced it, one stage a '
                   "press." if index is None else "A new run: the block shown was the run before's.")
    # the position stays chosen (``inspected``): a run that replaces this one before it ends re-targets it too
    return dict(inspector_text=inspector_html(note=words), inspector_plot=gr.update(visible=False),
                **dict(zip(BLOCK, block)))


def retargeted(run, index):
    """The inspector on token #index of the run that has just ended (or stopped), explained under its own
    setting, and the step-through closed on it; where the run is shorter, how to inspect one of its tokens."""
    if index is None:
        return {}
    if not 0 <= index < len(run.trace.positions):
        return dict(inspector_text=inspector_html(note=f"This run has no token #{index}: click one of its tokens."))
    s = run.trace.settings
    text, plot, index = inspector_view(run, s["rule"], s["alpha"], index,
                                       note="Re-inspected: the same position in the run now shown.")
    block = closed("Step through its block replays the inspected token's block in the run now shown.")
    return dict(inspector_text=text, inspector_plot=plot, inspected=index, **dict(zip(BLOCK, block)))


def differences(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                reproducible=False):
    """What the controls say that the run shown was not made with: (the setting's name, a phrase saying both values,
    "alpha 0.50 (now 0.80)") for each."""
    s = run.trace.settings
    try:
        spec = with_draft(pair_spec, draft)
    except ValueError:  # said when it runs
        spec = f"{pair_spec} with draft {draft}"
    try:
        gamma = auto_or_fixed_gamma(gamma)
    except ValueError:
        pass
    said = []
    if prompt != run.trace.prompt:
        said.append(("prompt", "another prompt (Shift+Enter or Run runs the one in the box)"))
    for name, was, now in (pair_change(run.pair_spec, spec), ("chat template", s["chat"], bool(chat)),
                           ("rule", s["rule"], rule), ("gamma", s["gamma"], gamma),
                           ("temperature", s["temperature"], temperature),
                           ("max new tokens", s["max_new_tokens"], max_new_tokens), ("seed", s["seed"], seed),
                           ("reproducible", s.get("reproducible", False), bool(reproducible))):
        if was != now:
            said.append((name, f"{name} {_said(was)} (now {_said(now)})"))
    if rule == s["rule"] and RULES[rule].alpha_used and alpha != s["alpha"]:
        said.append(("alpha", f"alpha {s['alpha']:.2f} (now {alpha:.2f})"))
    return said


def pair_change(was, now):
    """(name, was, now) for the pair specs of the run and of the controls: the draft alone where the target is the
    same ("draft model (now head)")."""
    try:
        if target_of(was) == target_of(now) and draft_of(was) != draft_of(now):
            return "draft", draft_of(was), draft_of(now)
    except ValueError:  # a spec not understood: said when it runs
        pass
    return "pair", was, now


def target_of(spec):
    ids = parse_pair(spec)
    return ids.get("name") or ids["target"]


def _said(value):
    """A setting's value in the mark's words: on/off, a number as short as it reads."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def settings_note(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                  cost_ratio=None, reproducible=False):
    """The mark above the tokens (Explore's run inputs, in order): empty while the controls match the run shown,
    else which settings it was not made with and what applies them."""
    if run is None:
        return ""
    said = differences(run, prompt, pair_spec, draft, chat, rule, alpha, gamma, temperature, max_new_tokens, seed,
                       reproducible)
    if not said:
        return ""
    return (f'<div class="run-note"><strong>Not these settings.</strong> The run shown was made with '
            f'{html.escape("; ".join(phrase for _, phrase in said))}. Letting go of a control regenerates the run; '
            'Run starts afresh.</div>')
