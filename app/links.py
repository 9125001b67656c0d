"""Links that restore a view: query parameters named like the API's fields (``tab``, ``prompt``, ``rule``,
``alpha``, ``gamma``, ``temperature``, ``seed``, ``max_new_tokens``; ``step`` for a lesson) set a tab and its
controls, ``run=1`` runs it, and the "copy link" control writes the link of the view on screen. A bad value gets
one sentence naming it and leaves that control at its default; the rest of the link still applies."""
from dataclasses import dataclass
from urllib.parse import urlencode

import gradio as gr

from cascade_core import MAX_GAMMA, get_rule
from cascade_core.settings import MAX_SEED, check_prompt, temperature_value, whole_number
from cascade_core.values import shown

from .callbacks import Handlers
from .controls import APP_MAX_NEW_TOKENS, alpha_slider_range
from .viz.format import markdown_text

TABS = ("explore", "compare", "tradeoff", "sandbox", "strategies", "learn")
FIELDS = ("prompt", "rule", "alpha", "gamma", "temperature", "seed", "max_new_tokens", "step")
MAX_TEMPERATURE = 2.0  # the sliders' end (the engine itself allows more)


@dataclass
class Linked:
    """What a link can set on one tab: its controls by field name, the button run=1 presses, the rules its rule
    control offers, the text that follows the rule, and other components a restored view redraws
    (``redraw(values)`` gives their values)."""

    tab: str
    fields: dict
    run_button: str | None = None
    rules: tuple = ()
    rule_text: object = None
    steps: int = 0  # a lesson path's length (the learn tab's ``step``)
    redrawn: tuple = ()
    redraw: object = None

    def default(self, name):
        return self.fields[name].value


def number(text, name):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {shown(text)}") from None


def checked(name, text, linked, values):
    """One link value as its control takes it, or a ValueError naming it."""
    if name == "prompt":
        return check_prompt(text)
    if name == "rule":
        if text not in linked.rules:
            raise ValueError(f"rule must be one of {', '.join(linked.rules)} on this tab, got {shown(text)}")
        return text
    if name == "alpha":
        rule = values.get("rule", linked.default("rule"))
        alpha = number(text, "alpha")
        get_rule(rule).check_alpha(alpha)
        lo, hi = alpha_slider_range(rule)
        if not lo <= alpha <= hi:
            raise ValueError(f"alpha={shown(alpha)} is outside the slider's range [{lo:g}, {hi:g}] for rule {rule!r}")
        return alpha
    if name == "temperature":
        temperature = temperature_value(number(text, "temperature"))
        if temperature > MAX_TEMPERATURE:
            raise ValueError(f"temperature must be 0 (greedy) or a number up to {MAX_TEMPERATURE:g}, got {shown(text)}")
        return temperature
    if name == "gamma" and linked.fields[name].minimum == 0:  # Explore's slider: 0 is "auto"
        return 0 if text == "auto" else whole_number(number(text, name), name, 0, MAX_GAMMA)
    limits = {"gamma": (1, MAX_GAMMA), "seed": (0, MAX_SEED), "max_new_tokens": (1, APP_MAX_NEW_TOKENS),
              "step": (1, linked.steps)}
    return whole_number(number(text, name), name, *limits[name])


def read_link(params, linked_by_tab):
    """(the tab's Linked, {field: value}, whether to run, [one sentence per bad value]) from query parameters.
    Fields the tab has no control for are ignored; unknown names and bad values are reported."""
    params, errors = dict(params), []
    for name in [n for n in params if n not in FIELDS + ("tab", "run")]:
        errors.append(f"the link's {shown(name)} is not a setting; a link may set tab, run, {', '.join(FIELDS)}")
        params.pop(name)
    tab = params.pop("tab", "explore")
    if tab not in TABS:
        errors.append(f"tab must be one of {', '.join(TABS)}, got {shown(tab)}")
        tab = "explore"
    run = params.pop("run", "0")
    if run not in ("0", "1"):
        errors.append(f"run must be 1 (run the view) or 0, got {shown(run)}")
    linked, values = linked_by_tab[tab], {}
    for name in FIELDS:  # rule before alpha: alpha is checked against the link's rule
        if name in params and name in linked.fields:
            try:
                values[name] = checked(name, params[name], linked, values)
            except ValueError as error:
                errors.append(str(error))
    return linked, values, run == "1" and linked.run_button is not None, errors


def restored(params, all_linked):
    """The outputs of a page load for these query parameters, in ``restore_outputs``' order."""
    linked, values, run, errors = read_link(params, {linked.tab: linked for linked in all_linked})
    message = "  \n".join([f"⚠️ {markdown_text(error)}." for error in errors] +
                           ["The rest of the link is used; those controls keep their defaults."] * bool(errors))
    out = [gr.Tabs(selected=linked.tab) if params else gr.skip(), message]
    for other in all_linked:
        mine = dict(values) if other is linked else {}
        rule_text = gr.skip()
        if "rule" in other.fields and ("rule" in mine or "alpha" in mine):
            # the alpha slider follows the rule (its range), holding the link's alpha or its own
            rule = mine.get("rule", other.default("rule"))
            mine["alpha"], rule_text = Handlers.rule_changed(rule, mine.get("alpha", other.default("alpha")))
        out += [mine.get(name, gr.skip()) for name in other.fields]
        out += [rule_text] if other.rule_text is not None else []
        out += list(other.redraw(values)) if mine and other.redrawn else [gr.skip()] * len(other.redrawn)
    return out + [linked.run_button if run else ""]


def restore_outputs(all_linked, tabs, status, run_button_box):
    """The components ``restored`` sets, in its order."""
    out = [tabs, status]
    for linked in all_linked:
        out += list(linked.fields.values()) + ([linked.rule_text] if linked.rule_text is not None else [])
        out += list(linked.redrawn)
    return out + [run_button_box]


def link_inputs(all_linked):
    return [component for linked in all_linked for component in linked.fields.values()]


def link_to(base, tab, run, all_linked, *values):
    """The link of a view: the page's address and the tab's fields as they are now (run=1 when asked)."""
    at, params = 0, {"tab": tab}
    for linked in all_linked:
        names = list(linked.fields)
        if linked.tab == tab:
            params.update({name: value for name, value in zip(names, values[at: at + len(names)])
                           if value is not None and value != ""})
            if run and linked.run_button:
                params["run"] = 1
        at += len(names)
    return f"{base}?{urlencode(params)}"


# The page's address without its query, and the tab on screen (the copy-link event reads both in the browser).
CURRENT_VIEW_JS = """(base, tab, ...rest) => {
  const selected = document.querySelector('#tabs [role="tab"][aria-selected="true"]');
  const ids = {'Explore': 'explore', 'Compare': 'compare', 'Trade-off': 'tradeoff', 'Sandbox': 'sandbox',
               'Strategies': 'strategies', 'Learn': 'learn'};
  return [window.location.origin + window.location.pathname, ids[selected?.innerText.trim()] || 'explore', ...rest];
}"""
COPY_JS = "(link) => { navigator.clipboard?.writeText(link).catch(() => {}); return link; }"
# run=1: press the restored tab's Run button once its controls hold the link's values (a tab not shown before is
# drawn when selected: wait for its button, up to 5 s).
PRESS_JS = """(button) => {
  let tries = 0;
  const press = () => {
    const found = button && document.querySelector('#' + button);
    if (found) found.click();
    else if (button && tries++ < 50) setTimeout(press, 100);
  };
  press();
  return button;
}"""
