"""Showing code: plain text in a terminal, syntax-highlighted HTML inside Jupyter.

``TOKEN`` is the one notion of a script token (its group names are the token kinds); the HTML
takes its colours from the page's theme through ``mlc_lab._html``, so printed IR stays readable
in JupyterLab's light, dark and high-contrast themes."""
from __future__ import annotations

import re

from .._env import in_notebook
from .._html import escape, page
from ..ir import hooks

TOKEN = re.compile(r"""(?P<comment>\#[^\n]*)|(?P<string>"[^"\n]*"|'[^'\n]*')|(?P<deco>@[\w.]+)
    |(?P<keyword>\b(?:def|class|for|in|with|if|else|elif|return|and|or|not|True|False|None)\b)
    |(?P<ns>\b[TIR]\.[\w.]+)|(?P<number>\b\d+(?:\.\d*)?(?:e[+-]?\d+)?\b)""", re.VERBOSE)
CODE_CSS = """
.mlc-code pre { margin: 0; font-family: var(--mlc-code-font); font-size: var(--mlc-code-size);
  line-height: 1.35; color: var(--mlc-fg); background: transparent; overflow-x: auto; }
.mlc-code .mlc-caret { color: var(--mlc-error); font-weight: bold; }
"""


def highlight(line: str) -> str:
    """One line of script text as escaped HTML, its tokens in ``<span class="mlc-tok-KIND">``
    (KIND: keyword, ns, number, string, comment, deco)."""
    out, pos = [], 0
    for match in TOKEN.finditer(line):
        out.append(escape(line[pos:match.start()]))
        out.append(f'<span class="mlc-tok-{match.lastgroup}">{escape(match.group())}</span>')
        pos = match.end()
    out.append(escape(line[pos:]))
    return "".join(out)


def to_html(code: str) -> str:
    """Highlighted HTML for script text, a view that scrolls sideways inside itself when a line
    is too long; caret lines under culprits are drawn in the theme's error colour."""
    lines = []
    for line in code.split("\n"):
        if line.strip() and set(line.strip()) == {"^"}:
            lines.append(f'<span class="mlc-caret">{escape(line)}</span>')
        else:
            lines.append(highlight(line))
    return page("<pre>" + "\n".join(lines) + "</pre>", CODE_CSS, "mlc-code")


def display_code(code: str) -> None:
    if in_notebook():
        from IPython.display import HTML, display
        display(HTML(to_html(code)))
    else:
        print(code)


hooks.provide("script.display_code", display_code)
