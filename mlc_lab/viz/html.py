"""What the HTML views share: escaping, highlighting of script text, a stylesheet that takes its
colours and fonts from JupyterLab's theme, and showing a view (HTML in Jupyter, text elsewhere).

The plain parts (``escape``, ``page``, ``BASE_CSS``) live in ``mlc_lab._html``, below every layer,
and highlighting in ``mlc_lab.script.highlight`` beside the printer's tokenizer; both are
re-exported here, so a view imports everything it draws with from this module.
"""
from __future__ import annotations

import re

from .._env import in_notebook
from .._html import BASE_CSS, TOKEN_KINDS, escape, page  # noqa: F401  (re-exported)
from ..script.highlight import TOKEN as SCRIPT_TOKEN  # noqa: F401  (the printer's tokenizer: one notion of a token)
from ..script.highlight import highlight


MIN_SCALE = 0.75   # in HTML, a wide picture shrinks to this much of its size at most, then scrolls


def svg_size(svg: str, what: str = "width") -> float:
    """The width (or height) an SVG's root element asks for, in CSS pixels."""
    return float(re.search(rf'\b{what}="([\d.]+)', svg[:svg.index(">")]).group(1))


def fluid_svg(svg: str) -> str:
    """The SVG shrinking with its output area down to MIN_SCALE of its size (then the area scrolls)."""
    style = f' style="display:block;max-width:100%;height:auto;min-width:{MIN_SCALE * svg_size(svg):.0f}px"'
    return svg.replace("<svg", "<svg" + style, 1)


def pictures(svgs: list, cls: str, panel_cls: str = "mlc-panel") -> str:
    """Pictures side by side while they fit and under each other when the output area is
    narrower, each shrinking with it (``fluid_svg``); one picture alone is a single box. Never
    wider than the output area: a picture that cannot shrink enough scrolls in its own panel."""
    if len(svgs) == 1:
        return f'<div class="{cls}" style="max-width:100%;overflow-x:auto">{fluid_svg(svgs[0])}</div>'
    panels = "".join(f'<div class="{panel_cls}" style="flex:0 1 {svg_size(svg):.0f}px;max-width:100%;'
                     f'min-width:min({svg_size(svg):.0f}px,100%);overflow-x:auto">{fluid_svg(svg)}</div>'
                     for svg in svgs)
    return (f'<div class="{cls}" style="display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;'
            f'max-width:100%">{panels}</div>')


def show(view) -> None:
    """Display ``view`` as HTML inside Jupyter; elsewhere print its text (``str(view)``)."""
    if in_notebook():
        from IPython.display import display
        display(view)
    else:
        print(view)


__all__ = ["BASE_CSS", "MIN_SCALE", "escape", "fluid_svg", "highlight", "page", "pictures", "show", "svg_size"]
