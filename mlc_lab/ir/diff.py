"""Diffs of printed IR: the unified text diff lives here; the views that show it (side by side
or unified HTML in Jupyter, text elsewhere) are ``mlc_lab.viz.ir_diff``, which the wrappers
below call."""
from __future__ import annotations

import difflib

from . import hooks


def printed(x) -> str:
    """The printed form of a module/function (``x.script()``); a string is taken as printed."""
    return x if isinstance(x, str) else x.script()


def diff(before, after, context: int = 3) -> str:
    """A unified diff of the printed forms of two modules/functions ('' when identical)."""
    a, b = printed(before).splitlines(), printed(after).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "before", "after", n=context, lineterm=""))


def side_by_side_html(before, after, title: str = "") -> str:
    """HTML of the two side by side, changed lines marked (``mlc_lab.viz.IRDiff``, split layout)."""
    return hooks.need("viz.ir_diff").IRDiff(before, after, title, layout="split")._repr_html_()


def show_diff(before, after, title: str = "") -> None:
    """Show what changed: an ``mlc_lab.viz.IRDiff`` in Jupyter, ``title`` and the text diff (or
    ``(no change)``) elsewhere."""
    hooks.need("viz.ir_diff").IRDiff(before, after, title).show()


__all__ = ["diff", "printed", "show_diff", "side_by_side_html"]
