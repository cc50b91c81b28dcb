"""Build the course's site: the chapters, executed, as HTML pages with their outputs (Sphinx + myst-nb).

    python book/build.py                      execute chapters/*.ipynb, then build _build/book/
    python book/build.py --executed DIR       build from notebooks already executed (the test
                                              suite's run of the chapters leaves them in DIR)

The chapters are stored without outputs, so they are executed here (or taken as executed),
each in a fresh kernel from the chapters/ folder, with the inline matplotlib backend as in
JupyterLab. A live widget becomes its own static HTML or that of its saved state
(static_widgets.py). Sphinx reads copies of the notebooks in _build/book-src/ and never
executes them itself.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parent
REPO = BOOK.parent
sys.path.insert(0, str(BOOK))
from static_widgets import render_widgets  # noqa: E402

CELL_TIMEOUT_S = 300
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def execute_chapters(paths, out_dir: Path) -> list[Path]:
    """Run stripped copies of the notebooks at ``paths`` top to bottom, each in a fresh kernel of
    this interpreter, and save them in ``out_dir``; a failing cell stops the build."""
    from ipykernel.kernelspec import write_kernel_spec
    from nbclient import NotebookClient
    from traitlets.config import Config

    from mlc_lab.testing.strip_notebooks import strip

    env = {**os.environ, "MPLBACKEND": INLINE_BACKEND}
    saved = []
    with tempfile.TemporaryDirectory(prefix="mlc_lab_book_kernels_") as kernels:
        # Only this interpreter's kernel: a `python3` kernelspec elsewhere could lack mlc_lab.
        write_kernel_spec(Path(kernels) / "python3")
        config = Config()
        config.KernelSpecManager.kernel_dirs = [kernels]
        config.KernelSpecManager.ensure_native_kernel = False
        for path in paths:
            print(f"executing {path.relative_to(REPO)}", flush=True)
            nb = nbformat.read(path, as_version=4)
            strip(nb)
            NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", config=config,
                           resources={"metadata": {"path": str(path.parent)}}).execute(env=env)
            saved.append(out_dir / path.name)
            nbformat.write(nb, saved[-1])
    return saved


def stage(notebooks, src: Path) -> None:
    """Lay out Sphinx's source folder: the index page and the notebooks under chapters/."""
    shutil.rmtree(src, ignore_errors=True)
    (src / "chapters").mkdir(parents=True)
    shutil.copy(BOOK / "index.md", src / "index.md")
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        render_widgets(nb)
        nbformat.write(nb, src / "chapters" / path.name)


def build(notebooks, out: Path, work: Path) -> int:
    """Sphinx's html build of ``notebooks`` into ``out``; ``work`` holds the source copies and
    Sphinx's cache. Returns Sphinx's exit status."""
    from sphinx.cmd.build import build_main
    if not notebooks:
        sys.exit("no executed notebooks to build the book from")
    stage(notebooks, work / "book-src")
    return build_main(["-b", "html", "-q", "-c", str(BOOK), "-d", str(work / "book-doctrees"),
                       str(work / "book-src"), str(out)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executed", type=Path, help="folder of executed chapter notebooks")
    parser.add_argument("--out", type=Path, default=REPO / "_build" / "book", help="the site (default: _build/book)")
    args = parser.parse_args(argv)
    work = args.out.resolve().parent
    if args.executed is not None:
        notebooks = sorted(args.executed.glob("*.ipynb"))
    else:
        executed = work / "book-executed"
        shutil.rmtree(executed, ignore_errors=True)
        executed.mkdir(parents=True)
        notebooks = execute_chapters(sorted((REPO / "chapters").glob("*.ipynb")), executed)
    return build(notebooks, args.out.resolve(), work)


if __name__ == "__main__":
    sys.exit(main())
