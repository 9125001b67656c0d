"""Links that restore a view: query parameters named like the API's fields (``tab``, ``prompt``, ``draft``, ``rule``,
``alpha``, ``gamma``, ``temperature``, ``seed``, ``max_new_tokens``; ``step`` for a lesson; and each tab's own:
Explore's ``reproducible``, Compare's ``rows``, the Trade-off's ``rules`` and ``alphas``, the Strategies'
``threshold``, the Sandbox's ``tokens``, ``q`` and ``p``) set a tab and its controls, ``run=1`` runs it, and the
"copy link" control writes the link of the view on screen. A bad value gets one sentence naming it and leaves that
control at its default; the rest of the link still applies."""
import itertools
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlencode

import gradio as gr

from cascade_core.decoding.run_settings import whole_number
from cascade_core.messages import shown

from .controls import rule_changed
from .options import INSTANT
from .settings import RUN_FIELDS, field_value, link_text, number
from .viz.format import markdown_text

TABS = ("explore", "compare", "tradeoff", "sandbox", "strategies", "learn")
FIELDS = RUN_FIELDS + ("step",)
MAX_ERRORS = 5  # sentences a link's message holds; the rest are counted


@dataclass
class Linked:
    """What a link can set on one tab: its fields' defaults by name, the button run=1 presses, the rules its rule
    control offers, whether its gamma takes "auto" (0), a lesson path's length; and where a restored view goes:
    into the controls themselves for a tab drawn with the page (``fields``, and ``rule_text``, the text that follows
    the rule), or into the state a tab drawn later is drawn from (``view``: app.lazy_tabs)."""

    tab: str
    defaults: dict
    run_button: str | None = None  # an element id, formatted with the view's values (a lesson's: "lesson-{step}-run")
    rules: tuple = ()
    auto_gamma: bool = False
    steps: int = 0  # a lesson path's length (the learn tab's ``step``)
    fields: dict | None = None
    rule_text: object = None
    view: object = None
    parsers: dict = field(default_factory=dict)  # the tab's own fields: name -> (link text -> value, or ValueError)
    folded: object = None  # a closed accordion holding some of ``fields``, opened by a link that sets one of them
    folded_names: tuple = ()

    def default(self, name):
        return self.defaults[name]


@dataclass
class LinkField:
    """A link field held by several controls (Compare's rows, the Sandbox's q): ``text`` makes the link's value
    from their values, in order."""

    components: list
    text: Callable


def listed(text, name, size=None):
    """A link's comma-separated list, or a ValueError naming it (``size``: the number of items it must have)."""
    items = [item.strip() for item in text.split(",")] if text.strip() else []
    if size is not None and len(items) != size:
        raise ValueError(f"{name} must list {size} values separated by commas, got {len(items)}")
    return items


def fraction(text, name):
    """A number from 0 to 1 (a probability slider's value)."""
    value = number(text, name)
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number from 0 to 1, got {shown(text)}")
    return value


def flag(text, name, meaning):
    """A link's on/off setting: 1 or 0 (a copied link writes 1 and leaves an off flag out)."""
    if text not in ("0", "1"):
        raise ValueError(f"{name} must be 1 ({meaning}) or 0, got {shown(text)}")
    return text == "1"


def checked(name, text, linked, values):
    """One link value as its control takes it, or a ValueError naming it (the run fields: app/settings.py)."""
    if name in linked.parsers:
        return linked.parsers[name](text)
    if name == "step":
        return whole_number(number(text, name), name, 1, linked.steps)
    return field_value(name, text, values.get("rule", linked.defaults.get("rule")), linked.rules, linked.auto_gamma)


def read_link(params, linked_by_tab):
    """(the tab's Linked, {field: value}, whether to run, [one sentence per bad value]) from query parameters.
    Fields the tab has no control for are ignored; unknown names and bad values are reported."""
    params, errors = dict(params), []
    parsed = tuple(name for each in linked_by_tab.values() for name in each.parsers)
    known = tuple(dict.fromkeys(("tab", "run") + FIELDS + parsed))
    for name in [n for n in params if n not in known]:
        errors.append(f"the link's {shown(name)} is not a setting; a link may set {', '.join(known)}")
        params.pop(name)
    tab = params.pop("tab", "explore")
    if tab not in TABS:
        errors.append(f"tab must be one of {', '.join(TABS)}, got {shown(tab)}")
        tab = "explore"
    run = params.pop("run", "0")
    if run not in ("0", "1"):
        errors.append(f"run must be 1 (run the view) or 0, got {shown(run)}")
    linked, values = linked_by_tab[tab], {}
    # rule before alpha: alpha is checked against the link's rule
    for name in dict.fromkeys(FIELDS + tuple(linked.parsers)):
        if name in params and name in linked.defaults:
            try:
                values[name] = checked(name, params[name], linked, values)
            except ValueError as error:
                errors.append(str(error))
    return linked, values, run == "1" and linked.run_button is not None, errors


def restored(params, all_linked):
    """The outputs of a page load for these query parameters, in ``restore_outputs``' order: the tab, the message,
    each tab's controls (or the view a tab drawn later is drawn in) and the Run button to press (a selector)."""
    linked, values, run, errors = read_link(params, {linked.tab: linked for linked in all_linked})
    more = [f"… and {len(errors) - MAX_ERRORS} more problems of the same kind."] * (len(errors) > MAX_ERRORS)
    message = "  \n".join([f"⚠️ {markdown_text(error)}." for error in errors[:MAX_ERRORS]] + more +
                           ["The rest of the link is used; those controls keep their defaults."] * bool(errors))
    view = dict(values=values, nonce=next(VIEWS))
    out = [gr.Tabs(selected=linked.tab) if params else gr.skip(), message]
    for other in all_linked:
        if other.view is not None:
            out.append(view if other is linked else gr.skip())
            continue
        mine = dict(values) if other is linked else {}
        rule_text = gr.skip()
        if "rule" in other.fields and ("rule" in mine or "alpha" in mine):
            # the alpha slider follows the rule (its range), holding the link's alpha or its own
            rule = mine.get("rule", other.default("rule"))
            mine["alpha"], rule_text = rule_changed(rule, mine.get("alpha", other.default("alpha")))
        out += [mine.get(name, gr.skip()) for name in other.fields]
        out += [rule_text] if other.rule_text is not None else []
        if other.folded is not None:  # what the link sets is in view
            out.append(gr.update(open=True) if any(name in mine for name in other.folded_names) else gr.skip())
    if not run:
        return out + [""]
    # a tab drawn later: its button once drawn in this view (an earlier drawing's button may still be on screen)
    button = linked.run_button.format(**values)
    return out + [f".{view_class(view)} #{button}" if linked.view is not None else f"#{button}"]


def restore_outputs(all_linked, tabs, status, press):
    """The components ``restored`` sets, in its order."""
    out = [tabs, status]
    for linked in all_linked:
        if linked.view is not None:
            out.append(linked.view)
        else:
            out += list(linked.fields.values()) + ([linked.rule_text] if linked.rule_text is not None else [])
            out += [linked.folded] if linked.folded is not None else []
    return out + [press]


VIEWS = itertools.count(1)  # each restored view's number: a view asked for twice still draws its tab again


def view_class(view):
    """The class of a tab drawn in this view (a link's Run waits for it)."""
    return f"view-{view['nonce']}"


def link_to(base, linked, run, *values):
    """The link of a tab's view: the page's address and its fields as they are now, in ``linked.defaults``' order
    (run=1 when asked and the tab has a Run)."""
    params = {"tab": linked.tab}
    params.update({name: link_text(value) for name, value in zip(linked.defaults, values)
                   if value is not None and value != "" and value is not False})  # an off flag is the default
    if run and linked.run_button:
        params["run"] = 1
    return f"{base}?{urlencode(params)}"


def copy_link_button(linked, fields, runs, link):
    """A tab's own copy-link event, on a hidden button the page's "copy link" presses for the tab on screen: the
    link of its fields as they are now, written to ``link`` and the clipboard."""
    button = gr.Button("copy this tab's link", elem_id=f"copy-link-{linked.tab}", elem_classes=["offscreen"])
    parts = [fields[name] for name in linked.defaults]

    def texts(base, run, *values):
        values = iter(values)
        return link_to(base, linked, run, *(part.text(*(next(values) for _ in part.components))
                                            if isinstance(part, LinkField) else next(values) for part in parts))

    inputs = [c for part in parts for c in (part.components if isinstance(part, LinkField) else [part])]
    button.click(texts, [link, runs, *inputs], link, js=PAGE_ADDRESS_JS, **INSTANT).then(None, link, link, js=COPY_JS)


# The page's address without its query (replacing the link box's old text, the first input).
PAGE_ADDRESS_JS = "(link, ...rest) => [window.location.origin + window.location.pathname, ...rest]"
# The page's "copy link" presses the hidden copy button of the tab on screen.
# (Its button's id is the tab's elem_id, "tab-<name>", and "-button".)
COPY_TAB_ON_SCREEN_JS = """() => {
  const selected = document.querySelector('#tabs [role="tab"][aria-selected="true"]');
  const tab = selected?.id.match(/^tab-(.+)-button$/)?.[1] || 'explore';
  document.querySelector('#copy-link-' + tab)?.click();
}"""
COPY_JS = "(link) => { navigator.clipboard?.writeText(link).catch(() => {}); return link; }"
# run=1: press the restored tab's Run button (a selector) once its controls hold the link's values (a tab drawn
# later is drawn by a call of its own: wait for its button, up to 10 s).
PRESS_JS = """(button) => {
  let tries = 0;
  const press = () => {
    const found = button && document.querySelector(button);
    if (found) found.click();
    else if (button && tries++ < 100) setTimeout(press, 100);
  };
  press();
  return button;
}"""
