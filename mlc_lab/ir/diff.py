"""Diffs of printed IR: unified text in a terminal, side by side with highlights in Jupyter."""
from __future__ import annotations

import difflib
import html

from .._env import in_notebook


def _text(x) -> str:
    return x if isinstance(x, str) else x.script()


def diff(before, after, context: int = 3) -> str:
    """A unified diff of the printed forms of two modules/functions ('' when identical)."""
    a, b = _text(before).splitlines(), _text(after).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "before", "after", n=context, lineterm=""))


def side_by_side_html(before, after, title: str = "") -> str:
    """An HTML table: before on the left, after on the right, changed lines highlighted."""
    a, b = _text(before).splitlines(), _text(after).splitlines()
    rows = []
    cell = ('<td style="font-family:monospace;white-space:pre;padding:0 8px;'
            'text-align:left;background:{bg}">{text}</td>')
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            lt = left[k] if k < len(left) else ""
            rt = right[k] if k < len(right) else ""
            lbg = "#ffeef0" if tag in ("replace", "delete") and k < len(left) else "transparent"
            rbg = "#e6ffed" if tag in ("replace", "insert") and k < len(right) else "transparent"
            rows.append("<tr>" + cell.format(bg=lbg, text=html.escape(lt))
                        + cell.format(bg=rbg, text=html.escape(rt)) + "</tr>")
    head = f"<div style='font-family:monospace;font-weight:bold'>{html.escape(title)}</div>" if title else ""
    return (head + '<table style="border-collapse:collapse;font-size:12px"><tr>'
            '<th style="text-align:left">before</th><th style="text-align:left">after</th></tr>'
            + "".join(rows) + "</table>")


def show_diff(before, after, title: str = "") -> None:
    if in_notebook():
        from IPython.display import HTML, display
        display(HTML(side_by_side_html(before, after, title)))
    else:
        if title:
            print(title)
        print(diff(before, after) or "(no change)")
