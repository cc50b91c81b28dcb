"""Strip outputs from Jupyter notebooks, so that the repository stores them without outputs.

    python -m mlc_lab.testing.strip_notebooks chapters/*.ipynb   # strip these files in place
    python -m mlc_lab.testing.strip_notebooks < a.ipynb > b.ipynb  # a filter: stdin to stdout

The second form is git's "clean" filter for notebooks (``.gitattributes``; ``make lab`` and
``make test`` register it): a notebook saved with outputs in JupyterLab keeps them on disk, and
git stores it without them. ``make strip`` runs the first form on every notebook.

Stripped: code cells' outputs and execution counts, the cell metadata JupyterLab adds while a
notebook runs (timings, collapsed or scrolled outputs), saved widget state, and the kernel's
details in ``language_info`` beyond its name. Everything else (sources, cell ids, nbgrader
metadata) is kept, and a notebook with nothing to strip is written back byte for byte.

Only the standard library is used, so git can run this file directly (without importing
mlc_lab, which takes half a second) and ``make strip`` works before anything is installed.
"""
from __future__ import annotations

import json
import sys

RUN_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")


def cells_with_outputs(nb: dict) -> list[int]:
    """Indices of the code cells that hold outputs or an execution count."""
    return [index for index, cell in enumerate(nb.get("cells", []))
            if cell.get("cell_type") == "code"
            and (cell.get("outputs") or cell.get("execution_count") is not None)]


def strip(nb: dict) -> bool:
    """Remove what running and saving the notebook ``nb`` (its JSON as a dict) added, in place.
    Returns whether anything changed."""
    before = json.dumps(nb, sort_keys=True)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        metadata = cell.get("metadata", {})
        for key in RUN_CELL_METADATA:
            metadata.pop(key, None)
    metadata = nb.get("metadata", {})
    metadata.pop("widgets", None)
    language = metadata.get("language_info")
    if isinstance(language, dict) and "name" in language:
        metadata["language_info"] = {"name": language["name"]}
    return json.dumps(nb, sort_keys=True) != before


def strip_text(text: str) -> str:
    """A notebook's file contents with its outputs stripped, written as Jupyter writes notebooks
    (indent 1, sorted keys, a final newline); ``text`` itself when there is nothing to strip or
    it is not JSON (a file with merge conflict markers, say), so git never loses content."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    if not isinstance(nb, dict) or not strip(nb):
        return text
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(paths: list[str]) -> int:
    if not paths and sys.stdin.isatty():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    if not paths:   # git's filter: bytes in, bytes out, UTF-8 whatever the locale says
        text = sys.stdin.buffer.read().decode("utf-8", errors="surrogateescape")
        sys.stdout.buffer.write(strip_text(text).encode("utf-8", errors="surrogateescape"))
        return 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        stripped = strip_text(text)
        if stripped != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(stripped)
            print(f"stripped {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
