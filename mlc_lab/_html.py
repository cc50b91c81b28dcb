"""The plain HTML every view is built from: escaping, and a page with a stylesheet that takes its
colours and fonts from JupyterLab's theme. Imports nothing from mlc_lab, so the script printer
and the runtime's reports use it as the views in ``mlc_lab.viz`` (``viz.html``) do.

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

# the token kinds: the groups of the printer's tokenizer, mlc_lab.script.highlight.TOKEN
TOKEN_KINDS = ("keyword", "ns", "number", "string", "comment", "deco")
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


def page(body: str, css: str, classes: str = "") -> str:
    """A view: ``body`` inside ``<div class="mlc-view CLASSES">`` with the base stylesheet and
    ``css``. Every view carries its stylesheet, so a saved page or a single output stands alone."""
    return (f'<div class="mlc-view {classes}">'
            f"<style>{BASE_CSS}{css}</style>{body}</div>")


__all__ = ["BASE_CSS", "TOKEN_KINDS", "escape", "page"]
