"""Views of what changed in printed IR: one diff (``IRDiff``) and a pass pipeline (``PipelineView``).

    IRDiff(before, after, "sch.reorder(j0, k, j1)")    # displays in Jupyter; str() is the text diff
    pipeline(mod, [RT.LegalizeOps(), RT.FuseOps()])     # runs the passes; one section per pass
    with PassContext(instruments=[PrintDiff()]):        # the same view for relax.build / lower
        ex = relax.build(mod, "llvm")

An IRDiff fits the width it is given. Its HTML holds a unified layout and a side-by-side one;
a CSS container query shows the side-by-side one only where both columns fit the longest
changed line (up to ``WRAP_AT`` characters). Lines that do not fit wrap inside their column,
never widening the page. Unchanged runs longer than ``2 * context`` lines fold into a
``<details>`` that opens on a click (no JavaScript). Changed lines carry a ``-``/``+`` marker
as well as a translucent tint, and tokens are highlighted with the theme's colours (see
``viz.html``). Without CSS (a sanitizing viewer) the unified layout alone shows; without HTML,
``str()`` is the text diff.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import sys

from ..ir.diff import diff as text_diff
from ..ir import hooks
from ..ir.diff import printed
from . import html as H

LAYOUTS = ("auto", "split", "unified")
WRAP_AT = 100                     # a longer line wraps in the split layout rather than ruling it out
MIN_FOLD = 2                      # folding fewer unchanged lines than this hides nothing worth hiding
FIT_WIDTHS = range(40, 241, 10)   # container widths (ch) from which the split layout may show
# Per-diff sizes go in classes, not inline custom properties, which JupyterLab's HTML sanitizer drops:
NUMBER_WIDTHS = 7                 # line numbers up to 10**7 get their own column width (.mlc-nw-N)
INDENTS = 64                      # wrapped lines continue right of indents up to this (.mlc-ind-K)
OPEN_LINES = 150                  # a pipeline view opens sections while their shown lines fit this

CSS = """
.mlc-view .mlc-diff {
  container-type: inline-size; --mlc-lh: 1.4;
  font-family: var(--mlc-code-font); font-size: var(--mlc-code-size); line-height: var(--mlc-lh);
  border: 1px solid var(--mlc-border); border-radius: 4px; margin: 0.25em 0 0.5em;
  max-width: 100%; overflow-x: auto;
}
.mlc-view .mlc-diff-head {
  display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.2em 2ch; padding: 0.2em 1ch;
  background: var(--mlc-faint-bg); border-bottom: 1px solid var(--mlc-border);
}
.mlc-view .mlc-diff-title { font-weight: 600; overflow-wrap: anywhere; }
.mlc-view .mlc-stat { color: var(--mlc-muted); white-space: nowrap; font-family: var(--mlc-code-font); }
.mlc-view .mlc-stat-add, .mlc-view .mlc-stat-del {
  color: var(--mlc-fg); padding: 0 0.5ch; border-radius: 3px;
}
.mlc-view .mlc-stat-add { background: var(--mlc-add-bg); }
.mlc-view .mlc-stat-del { background: var(--mlc-del-bg); }
.mlc-view .mlc-row { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); }
.mlc-view .mlc-side, .mlc-view .mlc-uline {
  display: grid; min-width: 0; min-height: calc(var(--mlc-lh) * 1em);
}
.mlc-view .mlc-side { grid-template-columns: var(--mlc-no-w, 4ch) 2ch minmax(0, 1fr); }
.mlc-view .mlc-side + .mlc-side { border-left: 1px solid var(--mlc-border); }
.mlc-view .mlc-uline { grid-template-columns: var(--mlc-no-w, 4ch) var(--mlc-no-w, 4ch) 2ch minmax(0, 1fr); }
.mlc-view .mlc-colhead {
  font-family: var(--mlc-ui-font); font-size: 0.9em; color: var(--mlc-muted);
  border-bottom: 1px solid var(--mlc-border);
}
.mlc-view .mlc-colhead > div { padding: 0.1em 1ch; }
.mlc-view .mlc-no { color: var(--mlc-muted); text-align: right; padding-right: 1ch; user-select: none; }
.mlc-view .mlc-mark { text-align: center; font-weight: 700; user-select: none; }
.mlc-view .mlc-code {
  /* a <pre>, so that whitespace survives exporters that re-serialize HTML (nbconvert's does),
     reset from JupyterLab's output styles (its break-all splits words anywhere) */
  margin: 0; border: 0; background: transparent; color: inherit; font: inherit; line-height: inherit;
  overflow: visible; word-break: normal;
  min-width: 0; white-space: pre-wrap; overflow-wrap: anywhere; padding-right: 1ch;
  /* a wrapped line continues 4 characters right of its own indentation */
  padding-left: calc(var(--mlc-indent, 0ch) + 4ch);
  text-indent: calc(-1 * (var(--mlc-indent, 0ch) + 4ch));
}
.mlc-view .mlc-del { background: var(--mlc-del-bg); --mlc-tok-strength: 55%; }
.mlc-view .mlc-add { background: var(--mlc-add-bg); --mlc-tok-strength: 55%; }
.mlc-view .mlc-del > .mlc-no, .mlc-view .mlc-add > .mlc-no { color: var(--mlc-fg); }
.mlc-view .mlc-del > .mlc-mark { background: var(--mlc-del-mark-bg); }
.mlc-view .mlc-add > .mlc-mark { background: var(--mlc-add-mark-bg); }
.mlc-view .mlc-empty { background: var(--mlc-faint-bg); }
.mlc-view .mlc-fold > summary {
  font-family: var(--mlc-ui-font); font-size: 0.9em; color: var(--mlc-muted);
  background: var(--mlc-faint-bg); padding: 0 1ch;
}
.mlc-view .mlc-fold[open] > summary { border-bottom: 1px dashed var(--mlc-border); }
.mlc-view .mlc-note { padding: 0.2em 1ch; color: var(--mlc-muted); font-family: var(--mlc-ui-font); }
@media (forced-colors: active) {
  .mlc-view .mlc-del, .mlc-view .mlc-add { outline: 1px solid CanvasText; outline-offset: -1px; }
}
""" + "".join(f".mlc-view .mlc-nw-{n} {{ --mlc-no-w: {n}ch; }}\n" for n in range(2, NUMBER_WIDTHS + 2)) \
  + "".join(f".mlc-view .mlc-ind-{k} {{ --mlc-indent: {k}ch; }}\n" for k in range(1, INDENTS + 1)) \
  + "".join(f"""@container (min-width: {width}ch) {{
  .mlc-view .mlc-fit-{width} > .mlc-split {{ display: block; }}
  .mlc-view .mlc-fit-{width} > .mlc-unified {{ display: none; }}
}}
""" for width in FIT_WIDTHS)

PIPELINE_CSS = """
.mlc-view .mlc-pipeline-head { font-weight: 600; margin: 0.2em 0; }
.mlc-view .mlc-pass { border: 1px solid var(--mlc-border); border-radius: 4px; margin: 0.3em 0; }
.mlc-view .mlc-pass > summary {
  padding: 0.15em 1ch; background: var(--mlc-faint-bg);
  display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.2em 2ch;
}
.mlc-view .mlc-pass > summary::before { content: "\\25B8"; }
.mlc-view .mlc-pass[open] > summary::before { content: "\\25BE"; }
.mlc-view .mlc-pass-name { font-family: var(--mlc-code-font); font-weight: 600; overflow-wrap: anywhere; }
.mlc-view .mlc-pass-time { color: var(--mlc-muted); white-space: nowrap; }
.mlc-view .mlc-unchanged { border-style: dashed; }
.mlc-view .mlc-unchanged > summary { background: transparent; color: var(--mlc-muted); }
.mlc-view .mlc-unchanged .mlc-pass-name { font-weight: 400; }
.mlc-view .mlc-pass > .mlc-diff {
  margin: 0; border: 0; border-top: 1px solid var(--mlc-border); border-radius: 0;
}
"""


class IRDiff:
    """What changed between two printed modules/functions (or strings of script text).

    ``layout``: "auto" (side by side where it fits, else unified), "split" or "unified".
    ``context``: unchanged lines kept around each change. In Jupyter it renders as HTML; ``str()``
    and ``repr()`` give ``title`` and the unified text diff, or "(no change)"."""

    def __init__(self, before, after, title: str = "", context: int = 3, layout: str = "auto"):
        if layout not in LAYOUTS:
            raise ValueError(f"IRDiff: layout must be one of {LAYOUTS}, got {layout!r}")
        self.before, self.after = printed(before), printed(after)
        self.title, self.context, self.layout = title, context, layout
        self._a, self._b = self.before.splitlines(), self.after.splitlines()
        matcher = difflib.SequenceMatcher(None, self._a, self._b, autojunk=False)
        self._opcodes = matcher.get_opcodes()

    @property
    def removed(self) -> int:
        return sum(i2 - i1 for tag, i1, i2, _, _ in self._opcodes if tag != "equal")

    @property
    def added(self) -> int:
        return sum(j2 - j1 for tag, _, _, j1, j2 in self._opcodes if tag != "equal")

    @property
    def changed(self) -> bool:
        return any(tag != "equal" for tag, *_ in self._opcodes)

    def text(self) -> str:
        """The unified text diff ('' when nothing changed)."""
        return text_diff(self.before, self.after, self.context)

    def __str__(self) -> str:
        body = self.text() or "(no change)"
        return f"{self.title}\n{body}" if self.title else body

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return H.page(self.html(), CSS, "mlc-irdiff")

    def show(self) -> None:
        """Display in Jupyter; print the text diff elsewhere."""
        H.show(self)

    @property
    def shown_lines(self) -> int:
        """Lines the unified layout shows at first (a fold counts as one)."""
        return sum(1 if tag == "fold" else (i2 - i1 if tag == "equal" else i2 - i1 + j2 - j1)
                   for tag, i1, i2, j1, j2 in self._segments())

    def stat_html(self) -> str:
        """"+3 -1 lines" (or "no change") as HTML, the counts on the tints of their lines."""
        if not self.changed:
            return '<span class="mlc-stat">no change</span>'
        return (f'<span class="mlc-stat"><span class="mlc-stat-add">+{self.added}</span> '
                f'<span class="mlc-stat-del">-{self.removed}</span> lines</span>')

    def html(self, head: bool = True) -> str:
        """The diff's HTML without the stylesheet (a view holding several diffs adds it once)."""
        segments = self._segments()
        digits = len(str(max(len(self._a), len(self._b), 1)))
        parts = []
        if head:
            title = f'<span class="mlc-diff-title">{H.escape(self.title)}</span>' if self.title else ""
            parts.append(f'<div class="mlc-diff-head">{title}{self.stat_html()}</div>')
        if not segments:
            parts.append('<div class="mlc-note">(both sides are empty)</div>')
        elif self.layout == "unified" or not self.changed:
            parts.append(self._unified(segments))
        elif self.layout == "split":
            parts.append(self._split(segments))
        else:
            width = self._fit_width(digits)
            parts.append(f'<div class="mlc-fit mlc-fit-{width}">{self._unified(segments)}'
                         f"{self._split(segments, hidden=True)}</div>")
        return f'<div class="mlc-diff mlc-nw-{min(digits + 1, NUMBER_WIDTHS + 1)}">{"".join(parts)}</div>'

    # -- layout -------------------------------------------------------------------------------
    def _segments(self) -> list:
        """The opcodes with long unchanged runs cut out as ("fold", i1, i2, j1, j2): ``context``
        lines stay next to each change."""
        out, last = [], len(self._opcodes) - 1
        for index, (tag, i1, i2, j1, j2) in enumerate(self._opcodes):
            if tag != "equal":
                out.append((tag, i1, i2, j1, j2))
                continue
            head = self.context if index > 0 else 0
            tail = self.context if index < last else 0
            if (i2 - i1) - head - tail < MIN_FOLD:
                out.append((tag, i1, i2, j1, j2))
                continue
            if head:
                out.append(("equal", i1, i1 + head, j1, j1 + head))
            out.append(("fold", i1 + head, i2 - tail, j1 + head, j2 - tail))
            if tail:
                out.append(("equal", i2 - tail, i2, j2 - tail, j2))
        return out

    def _fit_width(self, digits: int) -> int:
        """The narrowest container width (ch) in FIT_WIDTHS at which both columns of the split
        layout show the longest changed line (capped at WRAP_AT) unwrapped; context may wrap."""
        changed = [len(line) for tag, i1, i2, j1, j2 in self._opcodes if tag != "equal"
                   for line in self._a[i1:i2] + self._b[j1:j2]]
        column = min(max(changed, default=0), WRAP_AT) + (digits + 1) + 2 + 2   # number, marker, padding
        return next((w for w in FIT_WIDTHS if w >= 2 * column), FIT_WIDTHS[-1])

    def _unified(self, segments) -> str:
        rows = []
        for tag, i1, i2, j1, j2 in segments:
            if tag in ("equal", "fold"):
                lines = "".join(_uline(i + 1, j + 1, " ", self._a[i], "")
                                for i, j in zip(range(i1, i2), range(j1, j2)))
                rows.append(_fold(lines, i1, i2) if tag == "fold" else lines)
                continue
            rows += [_uline(i + 1, "", "-", self._a[i], _DEL) for i in range(i1, i2)]
            rows += [_uline("", j + 1, "+", self._b[j], _ADD) for j in range(j1, j2)]
        return f'<div class="mlc-unified">{"".join(rows)}</div>'

    def _split(self, segments, hidden: bool = False) -> str:
        rows = ['<div class="mlc-row mlc-colhead"><div>before</div><div>after</div></div>']
        for tag, i1, i2, j1, j2 in segments:
            if tag in ("equal", "fold"):
                lines = "".join(_row(_side(i + 1, " ", self._a[i], ""), _side(j + 1, " ", self._b[j], ""))
                                for i, j in zip(range(i1, i2), range(j1, j2)))
                rows.append(_fold(lines, i1, i2) if tag == "fold" else lines)
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                left = _side(i1 + k + 1, "-", self._a[i1 + k], _DEL) if i1 + k < i2 else _EMPTY
                right = _side(j1 + k + 1, "+", self._b[j1 + k], _ADD) if j1 + k < j2 else _EMPTY
                rows.append(_row(left, right))
        attribute = " hidden" if hidden else ""
        return f'<div class="mlc-split"{attribute}>{"".join(rows)}</div>'


_EMPTY = '<div class="mlc-side mlc-empty"></div>'
_DEL, _ADD = " mlc-del", " mlc-add"   # the class a changed line adds to its row


def _code(text: str) -> str:
    indent = min(len(text) - len(text.lstrip(" ")), INDENTS)
    return f'<pre class="mlc-code{f" mlc-ind-{indent}" if indent else ""}">{H.highlight(text)}</pre>'


def _uline(old_no, new_no, mark: str, text: str, kind: str) -> str:
    return (f'<div class="mlc-uline{kind}"><span class="mlc-no">{old_no}</span>'
            f'<span class="mlc-no">{new_no}</span><span class="mlc-mark">{mark}</span>{_code(text)}</div>')


def _side(number: int, mark: str, text: str, kind: str) -> str:
    return (f'<div class="mlc-side{kind}"><span class="mlc-no">{number}</span>'
            f'<span class="mlc-mark">{mark}</span>{_code(text)}</div>')


def _row(left: str, right: str) -> str:
    return f'<div class="mlc-row">{left}{right}</div>'


def _fold(rows: str, i1: int, i2: int) -> str:
    return (f'<details class="mlc-fold"><summary>{i2 - i1} unchanged lines ({i1 + 1}-{i2})</summary>'
            f"{rows}</details>")


# -- pass pipelines ---------------------------------------------------------------------------
@dataclasses.dataclass
class PassDiff:
    """What one pass did: its name, the seconds it took, the printed module before and after,
    and how many (non-Sequential) passes it ran inside."""
    name: str
    seconds: float
    before: str
    after: str
    depth: int = 0

    @functools.cached_property
    def diff(self) -> IRDiff:
        return IRDiff(self.before, self.after, self.name)


class PipelineView:
    """The passes of a pipeline in the order they started, one section each (name, time, lines
    changed, and the diff). Sections of passes that changed something start open, in order, as
    long as their diffs together show at most ``open_lines`` lines (a big pipeline stays short
    until a section is clicked); passes that changed nothing are listed closed and greyed.
    ``mod`` is the module the pipeline produced, where known. ``str()`` is the text of every diff."""

    def __init__(self, records, mod=None, title: str = "pass pipeline", open_lines: int = OPEN_LINES):
        self.records, self.mod, self.title, self.open_lines = list(records), mod, title, open_lines

    @property
    def seconds(self) -> float:
        return sum(record.seconds for record in self.records if record.depth == 0)

    def summary(self) -> str:
        changed = sum(record.diff.changed for record in self.records)
        return (f"{self.title}: {len(self.records)} passes, {changed} changed the module, "
                f"{_duration(self.seconds)} in all")

    def __str__(self) -> str:
        lines = [self.summary()]
        for record in self.records:
            diff = record.diff
            stat = f"+{diff.added} -{diff.removed} lines" if diff.changed else "no change"
            lines += [f"# {record.name}  ({_duration(record.seconds)}, {stat})", diff.text() or "(no change)"]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        sections, budget = [], self.open_lines
        for record in self.records:
            opened = record.diff.changed and record.diff.shown_lines <= budget
            budget -= record.diff.shown_lines if opened else 0
            sections.append(_section(record, opened))
        head = f'<div class="mlc-pipeline-head">{H.escape(self.summary())}</div>'
        return H.page(head + "".join(sections), CSS + PIPELINE_CSS, "mlc-pipeline")

    def show(self) -> None:
        """Display in Jupyter; print the text of every diff elsewhere."""
        H.show(self)


def _section(record: PassDiff, opened: bool) -> str:
    diff = record.diff
    indent = f' style="margin-left: {2 * record.depth}ch"' if record.depth else ""
    summary = (f'<summary><span class="mlc-pass-name">{H.escape(record.name)}</span>'
               f'<span class="mlc-pass-time">{_duration(record.seconds)}</span>{diff.stat_html()}</summary>')
    if not diff.changed:
        return (f'<details class="mlc-pass mlc-unchanged"{indent}>{summary}'
                '<div class="mlc-note">The module prints the same after this pass.</div></details>')
    return (f'<details class="mlc-pass"{" open" if opened else ""}{indent}>{summary}'
            f"{diff.html(head=False)}</details>")


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.2f} ms" if seconds < 0.1 else f"{seconds * 1e3:.0f} ms"


def pipeline(mod, passes, title: str = "pass pipeline") -> PipelineView:
    """Run ``passes`` (a pass, a Sequential, or a list of them) on ``mod`` and return the view of
    what each changed; ``.mod`` is the result. The passes run in a PassContext with the current
    one's settings (opt_level, required/disabled passes, config) and only the recording
    instrument; for ``relax.build`` or ``mlc_lab.lower``, put ``PrintDiff()`` in their context."""
    from ..ir.transform import PassContext, PrintDiff
    recorder = PrintDiff(show=False)
    outer = PassContext.current()
    with PassContext(outer.opt_level, outer.required_pass, outer.disabled_pass, [recorder], outer.config):
        for pass_ in passes if isinstance(passes, (list, tuple)) else [passes]:
            mod = pass_(mod)
    return recorder.view(mod=mod, title=title)


hooks.provide("viz.ir_diff", sys.modules[__name__])   # ir.show_diff, PrintIRBeforeAfter

__all__ = ["IRDiff", "PassDiff", "PipelineView", "pipeline"]
