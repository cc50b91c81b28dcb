"""What the HTML views share: escaping, highlighting of script text, a stylesheet that takes its
colours and fonts from JupyterLab's theme, and showing a view (HTML in Jupyter, text elsewhere).

Colours come from JupyterLab's CSS variables (``--jp-content-font-color1``, ``--jp-layout-color1``,
``--jp-mirror-editor-*-color``, ``--jp-code-font-family``), so a view follows the light, dark and
high-contrast themes; where those are missing (a page saved with another template, another
front end) it uses its own light or dark palette, chosen by ``prefers-color-scheme``; under
forced colours (Windows high contrast) the browser replaces the colours with system ones. Every
colour a view uses is a ``--mlc-*`` variable set on ``.mlc-view``, the class of its outer element.
Highlighted tokens are mixed with the text colour (``--mlc-tok-strength``) because some theme
colours (comments and decorators in the dark theme) are too faint for a 4.5:1 contrast.
"""
from __future__ import annotations

import html
import re

from .._env import in_notebook
from ..script.highlight import TOKEN as SCRIPT_TOKEN  # the printer's tokenizer: one notion of a token

TOKEN_KINDS = ("keyword", "ns", "number", "string", "comment", "deco")   # the groups of SCRIPT_TOKEN
BASE_CSS = """
.mlc-view {
  --mlc-fallback-fg: #1f2328; --mlc-fallback-bg: #ffffff; --mlc-fallback-muted: #59636e;
  --mlc-fallback-border: #d1d9e0;
  --mlc-fallback-keyword: #116329; --mlc-fallback-ns: #0550ae; --mlc-fallback-number: #0a3069;
  --mlc-fallback-string: #a40e26; --mlc-fallback-comment: #59636e; --mlc-fallback-deco: #8250df;
  --mlc-fallback-error: #cf222e;
  --mlc-fg: var(--jp-content-font-color1, var(--mlc-fallback-fg));
  --mlc-bg: var(--jp-layout-color1, var(--mlc-fallback-bg));
  /* secondary text, a little darker than the theme's so it keeps 4.5:1 on the faint fills */
  --mlc-muted: color-mix(in srgb, var(--jp-content-font-color2, var(--mlc-fallback-muted)) 80%,
                        var(--mlc-fg));
  --mlc-border: var(--jp-border-color2, var(--mlc-fallback-border));
  --mlc-code-font: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, Consolas,
                       "DejaVu Sans Mono", monospace);
  --mlc-code-size: var(--jp-code-font-size, 13px);
  --mlc-ui-font: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", sans-serif);
  --mlc-keyword: var(--jp-mirror-editor-keyword-color, var(--mlc-fallback-keyword));
  --mlc-ns: var(--jp-mirror-editor-variable-2-color, var(--mlc-fallback-ns));
  --mlc-number: var(--jp-mirror-editor-number-color, var(--mlc-fallback-number));
  --mlc-string: var(--jp-mirror-editor-string-color, var(--mlc-fallback-string));
  --mlc-comment: var(--jp-mirror-editor-comment-color, var(--mlc-fallback-comment));
  --mlc-deco: var(--jp-mirror-editor-meta-color, var(--mlc-fallback-deco));
  /* Translucent tints: the theme's background shows through, so light and dark text both stay
     readable on them; the +/- marker column says the same thing without colour. */
  --mlc-add-bg: rgba(46, 160, 67, 0.15); --mlc-del-bg: rgba(248, 81, 73, 0.15);
  --mlc-add-mark-bg: rgba(46, 160, 67, 0.32); --mlc-del-mark-bg: rgba(248, 81, 73, 0.32);
  --mlc-faint-bg: rgba(128, 128, 128, 0.08);
  --mlc-error: var(--jp-error-color1, var(--mlc-fallback-error));
  --mlc-tok-strength: 75%;
  color: var(--mlc-fg); background: var(--mlc-bg);
  font-family: var(--mlc-ui-font); line-height: 1.4;
  word-break: normal;   /* JupyterLab's outputs inherit break-all, which splits words anywhere */
  box-sizing: border-box; max-width: 100%; min-width: 0;
}
@media (prefers-color-scheme: dark) {
  .mlc-view {
    --mlc-fallback-fg: #e6edf3; --mlc-fallback-bg: #0d1117; --mlc-fallback-muted: #9198a1;
    --mlc-fallback-border: #3d444d;
    --mlc-fallback-keyword: #7ee787; --mlc-fallback-ns: #79c0ff; --mlc-fallback-number: #a5d6ff;
    --mlc-fallback-string: #ffa198; --mlc-fallback-comment: #9198a1; --mlc-fallback-deco: #d2a8ff;
    --mlc-fallback-error: #ff7b72;
  }
}
.mlc-view *, .mlc-view *::before, .mlc-view *::after { box-sizing: border-box; }
.mlc-view summary { cursor: pointer; }
""" + "".join(f".mlc-view .mlc-tok-{kind} {{ color: color-mix(in srgb, var(--mlc-{kind}) "
              "var(--mlc-tok-strength), var(--mlc-fg)); }\n" for kind in TOKEN_KINDS)


def escape(text: str) -> str:
    """``text`` safe to put in HTML content or a quoted attribute."""
    return html.escape(str(text), quote=True)


def highlight(line: str) -> str:
    """One line of script text as escaped HTML, its tokens in ``<span class="mlc-tok-KIND">``
    (KIND: keyword, ns, number, string, comment, deco)."""
    out, pos = [], 0
    for match in SCRIPT_TOKEN.finditer(line):
        out.append(escape(line[pos:match.start()]))
        out.append(f'<span class="mlc-tok-{match.lastgroup}">{escape(match.group())}</span>')
        pos = match.end()
    out.append(escape(line[pos:]))
    return "".join(out)


def page(body: str, css: str, classes: str = "") -> str:
    """A view: ``body`` inside ``<div class="mlc-view CLASSES">`` with the base stylesheet and
    ``css``. Every view carries its stylesheet, so a saved page or a single output stands alone."""
    return (f'<div class="mlc-view {classes}">'
            f"<style>{BASE_CSS}{css}</style>{body}</div>")


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
