"""Showing code: plain text in a terminal, syntax-highlighted HTML inside Jupyter."""
from __future__ import annotations

import html
import re

from .._env import in_notebook

_TOKEN = re.compile(r"""(?P<comment>\#[^\n]*)|(?P<string>"[^"\n]*"|'[^'\n]*')|(?P<deco>@[\w.]+)
    |(?P<keyword>\b(?:def|class|for|in|with|if|else|elif|return|and|or|not|True|False|None)\b)
    |(?P<ns>\b[TIR]\.[\w.]+)|(?P<number>\b\d+(?:\.\d*)?(?:e[+-]?\d+)?\b)""", re.VERBOSE)
_COLORS = {"comment": "#6a737d", "string": "#032f62", "deco": "#6f42c1", "keyword": "#d73a49",
           "ns": "#005cc5", "number": "#e36209"}


def to_html(code: str) -> str:
    """Highlighted HTML for script text (caret lines under culprits are drawn in red)."""
    lines = []
    for line in code.split("\n"):
        if line.strip() and set(line.strip()) == {"^"}:
            lines.append(f'<span style="color:#d00;font-weight:bold">{html.escape(line)}</span>')
            continue
        out, pos = [], 0
        for m in _TOKEN.finditer(line):
            out.append(html.escape(line[pos:m.start()]))
            out.append(f'<span style="color:{_COLORS[m.lastgroup]}">{html.escape(m.group())}</span>')
            pos = m.end()
        out.append(html.escape(line[pos:]))
        lines.append("".join(out))
    body = "\n".join(lines)
    return f'<pre style="font-size:12px;line-height:1.35;margin:0">{body}</pre>'


def display_code(code: str) -> None:
    if in_notebook():
        from IPython.display import HTML, display
        display(HTML(to_html(code)))
    else:
        print(code)
