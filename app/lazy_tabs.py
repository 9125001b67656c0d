"""Tabs drawn when first opened. The page's first load carries the header and Explore only: every component and
event Gradio's front end sets up costs page-load time even in a tab not on screen (each component is matched
against every event), so the five other tabs are each a ``gr.render`` drawn from a view state: set when the tab is
first selected (the defaults), or by a link or a lesson (their fields, drawn again for each such view)."""
import gradio as gr
from gradio.components.base import FormComponent

from .links import copy_link_button, view_class
from .options import QUEUED_INSTANT

FIRST_VIEW = dict(values={}, nonce=0)


def first_view(view):
    """A tab selected: drawn in its defaults the first time, as it is afterwards."""
    return FIRST_VIEW if view is None else gr.skip()


def controls_in(block):
    """The form controls (and file inputs) under a block."""
    for child in getattr(block, "children", []):
        if isinstance(child, (FormComponent, gr.File)):
            yield child
        yield from controls_in(child)


def add_view_states(all_linked):
    """The view state of each tab drawn later (Linked.view), made outside the Tabs: a State inside a tab fires its
    change when the tab is first shown, so a tab opened by a link was drawn twice, and the link's Run, pressed in
    the first drawing, named an event the second had removed (gradio's ``KeyError`` in ``get_fn``, an "Error")."""
    for linked in all_linked:
        linked.view = gr.State(None)
    return all_linked


def lazy_tab(label, linked, build, runs, link):
    """A tab (``linked``: its Linked, with its view state from ``add_view_states``) drawn by ``build(values)``,
    which lays out its components from the link's values over its defaults and returns its fields by name; with
    its copy-link event."""
    with gr.Tab(label, id=linked.tab, elem_id=f"tab-{linked.tab}") as tab:
        # drawn into a column: a render whose container is the Tab itself adds a second tab button and draws nothing
        with gr.Column():
            @gr.render(inputs=linked.view, triggers=[linked.view.change])
            def draw(view):
                if view is None:
                    return
                with gr.Column(elem_classes=[view_class(view)]) as body:
                    fields = build(dict(linked.defaults, **view["values"]))
                # Gradio's front end makes a control interactive when an event reads it, but only for the events
                # it had at page load: a drawn tab's controls would stay disabled.
                for control in controls_in(body):
                    if control.interactive is None:
                        control.interactive = True
                copy_link_button(linked, fields, runs, link)
    tab.select(first_view, linked.view, linked.view, **QUEUED_INSTANT)
    return tab
