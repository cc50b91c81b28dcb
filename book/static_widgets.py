"""Live ipywidgets as static HTML, for pages read without a kernel (the book).

A widget's output holds only a reference to its model (``application/vnd.jupyter.widget-view+json``);
what it showed lives in the notebook's saved widget state (``metadata.widgets``, which nbclient
stores after a run). A page without a kernel and without the widget JavaScript (which would come
from a CDN) would show only the model's repr, such as ``VBox(children=(HBox(...``. A view that
publishes its own static HTML beside the widget (``SideBySide`` in mlc_lab.viz.stepper) keeps that
HTML. Every other widget output becomes the HTML of the state it was saved in: an HTML widget's own HTML (the schedule
stepper's step and the tuning progress bar are made of those), a slider or a button drawn
disabled, a progress bar as ``<progress>``. Widgets of other kinds show their text form.
"""
from __future__ import annotations

import html

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CONTROLS = ("Slider", "Button", "Dropdown", "Checkbox", "Text")   # model names that take input
NOTE = ('<p class="mlc-book-widget-note"><small>An interactive widget, shown as it was saved: '
        "run the notebook in JupyterLab to use it.</small></p>")


def render_widgets(nb) -> int:
    """Replace every widget view among ``nb``'s outputs that has no HTML of its own by static
    HTML of its saved state, and drop the widget views and the state (so no page loads widget
    scripts); return how many were replaced."""
    saved = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).pop(WIDGET_VIEW, None)
            if view is None or "text/html" in output.data:
                continue
            found = _render(view["model_id"], saved)
            note = NOTE if _has_controls(view["model_id"], saved) else ""
            output.data["text/html"] = (f'<div class="mlc-book-widget">{note}{found}</div>' if found
                                        else f"<pre>{html.escape(output.data.get('text/plain', ''))}</pre>")
            replaced += 1
    return replaced


def _children(state: dict) -> list[str]:
    return [child.removeprefix("IPY_MODEL_") for child in state.get("children", [])]


def _has_controls(model_id: str, saved: dict) -> bool:
    state = saved.get(model_id, {}).get("state", {})
    return (any(kind in state.get("_model_name", "") for kind in CONTROLS)
            or any(_has_controls(child, saved) for child in _children(state)))


def _render(model_id: str, saved: dict) -> str | None:
    """The HTML of one widget and its children, or None when its state was not saved."""
    if model_id not in saved:
        return None
    state = saved[model_id]["state"]
    name = state.get("_model_name", "")
    label = html.escape(str(state.get("description", "")))
    if name in ("HTMLModel", "HTMLMathModel"):
        return state.get("value", "")
    if name == "LabelModel":
        return html.escape(str(state.get("value", "")))
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
        direction = "row" if name == "HBoxModel" else "column"
        parts = "".join(_render(child, saved) or "" for child in _children(state))
        return f'<div style="display:flex;flex-direction:{direction};gap:6px;align-items:center">{parts}</div>'
    if name.endswith("SliderModel"):
        value, low, high = (state.get(key) for key in ("value", "min", "max"))
        return (f'<label>{label} <input type="range" disabled min="{low}" max="{high}" value="{value}"> '
                f"{value} (of {low}&ndash;{high})</label>")
    if name.endswith("ProgressModel"):
        return f'<progress value="{state.get("value", 0)}" max="{state.get("max", 100)}"></progress>'
    if name == "ButtonModel":
        return f"<button disabled>{label}</button>"
    return None
