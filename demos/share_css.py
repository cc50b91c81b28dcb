"""Move the stylesheet nbconvert's lab template writes into every page (~260 KB of JupyterLab's
CSS, the same in each) into one file beside them, demos/html/lab.css, linked from each page.

    python demos/share_css.py demos/html/*.html      (``make demos-html`` runs it)

A page opened from disk still finds the stylesheet (a relative link); the scripts stay inline,
since a browser refuses module scripts from files. Stdlib only; running it twice changes nothing.
"""
import re
import sys
from pathlib import Path

SHARED = "lab.css"
LINK = f'<link rel="stylesheet" href="{SHARED}">'
HEAD_STYLE = re.compile(r"<style[^>]*>(.*?)</style>\n?", re.S)


def share(pages: list) -> None:
    css = None
    for page in map(Path, pages):
        text = page.read_text(encoding="utf-8")
        head, body = text.split("<body", 1)
        found = "".join(HEAD_STYLE.findall(head))
        if not found:
            continue                 # already linked
        if css is not None and found != css:
            sys.exit(f"{page}: its template stylesheet differs from the other pages'; export them together")
        css = found
        head = HEAD_STYLE.sub("", head.replace(HEAD_STYLE.search(head).group(0), LINK + "\n", 1))
        page.write_text(head + "<body" + body, encoding="utf-8")
    if css is not None:
        (Path(pages[0]).parent / SHARED).write_text(css, encoding="utf-8")


if __name__ == "__main__":
    share(sys.argv[1:])
