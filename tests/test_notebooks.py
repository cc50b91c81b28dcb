"""Every lecture and exercise notebook runs top to bottom in a fresh kernel and is stored without outputs."""
import re
import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(REPO.glob("chapters/*.ipynb")) + sorted(REPO.glob("exercises/**/*.ipynb"))
CELL_TIMEOUT_S = 300
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def notebook_id(path: Path) -> str:
    return str(path.relative_to(REPO))


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


def execute(nb, workdir: Path, config: Config, name: str) -> None:
    """Run every code cell in order; on failure, fail naming the notebook and the cell's source."""
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
        config=config,
    )
    failure = None
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            try:
                client.execute_cell(cell, index)
            except (CellExecutionError, DeadKernelError, TimeoutError) as error:
                failure = index, cell.source, error_report(cell, error)
                break
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
def test_notebook_runs_top_to_bottom(path: Path, kernel_config):
    nb = nbformat.read(path, as_version=4)
    execute(nb, path.parent, kernel_config, notebook_id(path))


def test_notebooks_are_stored_without_outputs():
    offenders = [
        f"{notebook_id(path)} cell {index}"
        for path in NOTEBOOKS
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not offenders, "clear outputs before committing (Kernel > Restart & Clear Outputs):\n" + "\n".join(
        offenders
    )
