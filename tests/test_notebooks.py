"""Every lecture and exercise notebook runs top to bottom in a fresh kernel and is stored without outputs.

The run uses a copy in memory, stripped of any saved outputs first; the file is never written, so
running the suite leaves a student's notebooks as they were. Saved outputs are the student's
business while they work: only CI (the CI environment variable set, as .ci/run does) fails on
them, elsewhere the check skips and says how to strip them.

The chapters run with the inline matplotlib backend, as in JupyterLab, and are kept executed (with
their widgets' state) in the session's temporary folder: tests/test_book.py builds the site from them.
"""
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError
from traitlets.config import Config

from mlc_lab.testing.strip_notebooks import cells_with_outputs, strip, strip_text

REPO = Path(__file__).resolve().parents[1]
# The homework runs as its instructor source; a student version stops at its first stub, by design.
NOTEBOOKS = (sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("exercises/instructor/*.ipynb"))
             + sorted(REPO.glob("demos/*.ipynb")))
CELL_TIMEOUT_S = 300
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"   # JupyterLab's; conftest.py sets Agg
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def notebook_id(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


@pytest.fixture(scope="session")
def kernel_config(tmp_path_factory) -> Config:
    """Kernel search path holding one `python3` kernelspec that launches this interpreter.

    A `python3` kernelspec elsewhere (e.g. in ~/.local/share/jupyter) could point to another
    Python that lacks mlc_lab; searching only this directory rules that out.
    """
    kernels = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(kernels / "python3")
    config = Config()
    config.KernelSpecManager.kernel_dirs = [str(kernels)]
    config.KernelSpecManager.ensure_native_kernel = False
    return config


def executed_chapters(tmp_path_factory) -> Path:
    """The folder of this session's executed chapters, which tests/test_book.py builds the site from."""
    folder = tmp_path_factory.getbasetemp() / "executed_chapters"
    folder.mkdir(exist_ok=True)
    return folder


def execute(nb, workdir: Path, config: Config, name: str, inline_figures: bool = False) -> None:
    """Run every code cell in order (``inline_figures``: with JupyterLab's matplotlib backend), then
    save the widgets' state in the notebook; on failure, fail naming the notebook and the cell's source."""
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        config=config,
    )
    failure = None
    env = {**os.environ, "MPLBACKEND": INLINE_BACKEND} if inline_figures else dict(os.environ)
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            try:
                client.execute_cell(cell, index)
            except (CellExecutionError, DeadKernelError, TimeoutError) as error:
                failure = index, cell.source, error_report(cell, error)
                break
    client.set_widgets_metadata()
    if failure is not None:
        index, source, report = failure
        pytest.fail(
            f"{name}: cell {index} failed\n----- cell source -----\n{source}\n----- error -----\n{report}",
            pytrace=False,
        )


def error_report(cell, error: Exception) -> str:
    """The kernel's traceback without terminal colours, or the client's message (timeout, dead kernel)."""
    tracebacks = ["\n".join(out["traceback"]) for out in cell.get("outputs", []) if out.output_type == "error"]
    return ANSI_ESCAPE.sub("", "\n".join(tracebacks)) or f"{type(error).__name__}: {error}"


def test_chapters_folder_has_notebooks():
    assert any(REPO.glob("chapters/*.ipynb")), "chapters/ holds no notebooks, so none were executed"


def test_kernel_runs_this_interpreter(kernel_config, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")])
    execute(nb, tmp_path, kernel_config, "kernel check")
    kernel_python = nb.cells[0].outputs[0]["text"].strip()
    assert Path(kernel_python).resolve() == Path(sys.executable).resolve()


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=notebook_id)
def test_notebook_runs_top_to_bottom(path: Path, kernel_config, tmp_path_factory):
    nb = nbformat.read(path, as_version=4)
    strip(nb)
    chapter = path.parent == REPO / "chapters"
    execute(nb, path.parent, kernel_config, notebook_id(path), inline_figures=chapter)
    if chapter:
        nbformat.write(nb, executed_chapters(tmp_path_factory) / path.name)


def test_notebooks_are_stored_without_outputs():
    check_stored_without_outputs(NOTEBOOKS)


def check_stored_without_outputs(paths) -> None:
    """Fail under CI, else skip, naming the notebooks among ``paths`` saved with outputs."""
    offenders = {}
    for path in paths:
        cells = cells_with_outputs(nbformat.read(path, as_version=4))
        if cells:
            offenders[notebook_id(path)] = cells
    if not offenders:
        return
    listing = "; ".join(f"{name} (cells {', '.join(map(str, cells))})" for name, cells in offenders.items())
    if os.environ.get("CI"):
        pytest.fail(f"notebooks must be committed without outputs: {listing}. Strip them with "
                    "`make strip` (or `python -m mlc_lab.testing.strip_notebooks NOTEBOOK...`) "
                    "and commit again; `make test` registers a git filter that does it on `git add`.",
                    pytrace=False)
    pytest.skip(f"saved outputs in {listing}: fine while you work, and git's filter (registered by "
                "`make lab` / `make test`) leaves them out of commits; `make strip` clears the "
                "files. CI fails on this.")


def test_saved_outputs_fail_only_under_ci(tmp_path, monkeypatch):
    clean = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title \u2014 one"),
                                            nbformat.v4.new_code_cell("print('hello')")])
    clean.metadata.language_info = {"name": "python"}
    as_committed = nbformat.writes(clean) + "\n"
    saved = nbformat.reads(as_committed, as_version=4)
    saved.cells[1].outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    saved.cells[1].execution_count = 1
    saved.metadata.language_info.version = "3.12.0"     # JupyterLab fills in the kernel's details
    copy = tmp_path / "saved.ipynb"
    nbformat.write(saved, copy)

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"saved outputs in saved.ipynb \(cells 1\).*make strip"):
        check_stored_without_outputs([copy])
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must be committed without outputs.*make strip"):
        check_stored_without_outputs([copy])

    stripped = strip_text(copy.read_text(encoding="utf-8"))
    assert stripped == as_committed                     # what git stores: the notebook as it was
    assert strip_text(stripped) == stripped
    copy.write_text(stripped, encoding="utf-8")
    check_stored_without_outputs([copy])
