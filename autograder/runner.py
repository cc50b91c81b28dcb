"""Grading one submission, in a worker process of its own (``python -m autograder.runner``):
run the student's notebook in a sandboxed kernel (``autograder.sandbox``), and at each graded
test cell run the source's test, in this process, against that kernel.

The student's code runs only in the kernel (``autograder.kernel``). This process holds the hidden
tests and the expected values; it asks the kernel for values through files it reads as data
(``autograder.submission``), and has the student's IR built and run by a sandboxed executor
that holds no expected value (``autograder.executor``). A worker of its own per submission means
a crash or hang costs this submission only. Results are appended to ``progress.jsonl`` as each task is graded, so whatever
was graded before a crash or a timeout counts.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from . import artifacts, executor, notebook, scoring
from .checks import GradingFailure
from .kernel import NOBODY, SandboxedKernel
from .submission import Submission, grading, reset


@dataclass
class Limits:
    """What a submission may use. The kernel and the executor get the first four
    (``autograder.sandbox``); ``sandbox=False`` (``--no-sandbox``) runs them without the sandbox."""
    cpu_seconds: int = 600
    memory_bytes: int = 6 << 30
    max_processes: int = 64
    max_file_bytes: int = 64 << 20
    cell_timeout: float = 120.0          # wall-clock seconds per cell
    notebook_timeout: float = 900.0      # wall-clock seconds for the whole notebook
    max_output_bytes: int = 1 << 20      # outputs kept from the student's cells
    sandbox: bool = True


@dataclass
class TaskResult:
    grade_id: str
    name: str
    score: float
    max_score: float
    output: str
    student_ir: list = field(default_factory=list)


class KernelGone(Exception):
    """The student's kernel died or stopped answering."""


class RemoteSubmission(Submission):
    """The student's values, asked of their kernel: a request folder in the sandbox, a line of
    code the kernel runs to answer it (``submission.serve``), the answer read back as data.

    Request folders sit in a folder the kernel cannot change (owned by NOBODY), and each is
    NOBODY's while the grader writes the request, then handed to the kernel's user for the
    answer; every answer file is opened without following links (``artifacts.open_plain``)."""

    def __init__(self, kernel: SandboxedKernel):
        self.kernel = kernel
        self.fetched_ir: list = []

    def scratch(self) -> str:
        return str(self.kernel.requests)

    def prepare(self, folder: Path) -> None:
        if self.kernel.owner is not None:
            os.chown(folder, NOBODY, NOBODY)

    def fetch(self, folder: Path) -> None:
        if self.kernel.owner is not None:
            os.chown(folder, self.kernel.owner, self.kernel.owner)
        code = f"__import__('importlib').import_module('autograder.submission').serve({str(folder)!r})"
        cell = nbformat.from_dict({"cell_type": "code", "source": code, "metadata": {}, "outputs": [],
                                   "execution_count": None, "id": "autograder-request"})
        cells = self.kernel.client.nb.cells
        cells.append(cell)
        try:
            outcome = self.kernel.run_cell(cell, len(cells) - 1, self.kernel.limits.cell_timeout)
        finally:
            cells.pop()
        if outcome in ("dead", "killed"):
            raise KernelGone("the notebook's kernel died while answering the grader" if outcome == "dead" else
                             f"the notebook did not answer within {self.kernel.limits.cell_timeout:g} s")
        if outcome == "timeout":
            raise GradingFailure(f"the notebook did not answer within {self.kernel.limits.cell_timeout:g} s")
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors and not (folder / "answer.json").exists():
            raise GradingFailure(f"the notebook could not hand in its answer ({errors[0].get('ename', 'error')}: "
                                 f"{str(errors[0].get('evalue', ''))[:200]})")
        try:
            text = artifacts.open_plain(folder / "result.py", max_bytes=1 << 20)
            self.fetched_ir.append(text.decode("utf-8", errors="replace")[:20000])
        except artifacts.ArtifactError:
            pass


def grade(source_path: Path, submission_path: Path, limits: Limits, progress: Path) -> None:
    """Grade one submission; each task's result becomes a line of ``progress`` as it is decided,
    and a last line ``{"done": ...}`` says how the notebook's run ended."""
    source = notebook.read(source_path)
    tasks = {t.grade_id: t for t in notebook.tasks(source)}
    log = progress.open("a", encoding="utf-8")

    def emit(record: dict) -> None:
        log.write(json.dumps(record) + "\n")
        log.flush()

    try:
        student = notebook.read(submission_path)
    except Exception as exc:
        emit({"done": f"the submission is not a readable notebook ({type(exc).__name__})", "cells_failed": []})
        return
    for cell in student.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    for answer in notebook.answers(student, source):     # written questions, for the TA
        emit({"answer": answer["grade_id"], "text": answer["text"]})

    setup = notebook.setup_code(source)
    kernel = SandboxedKernel(student, limits, setup=setup)
    sub = RemoteSubmission(kernel)
    namespace = executor.run_setup(setup)
    graded, notes, failed_cells = set(), [], []
    deadline = time.monotonic() + limits.notebook_timeout
    token = executor.use(kernel.executor)
    dead = False
    try:
        with kernel:
            for index, cell in enumerate(student.cells):
                if cell.cell_type != "code":
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    notes.append(f"the notebook ran out of its {limits.notebook_timeout:g} s at cell {index}")
                    break
                outcome = kernel.run_cell(cell, index, min(limits.cell_timeout, left))
                if outcome:
                    failed_cells.append(index)
                    out_of_budget = deadline - time.monotonic() <= 0
                    if outcome == "dead":
                        notes.append(f"the kernel died in cell {index} (the code exited, crashed or ran out "
                                     "of memory or CPU time); tasks after it earn nothing")
                    elif outcome == "killed":
                        notes.append(f"cell {index} ignored the interrupt after its time ran out and its "
                                     "kernel was stopped; tasks after it earn nothing")
                    elif outcome == "timeout":
                        notes.append(f"cell {index} ran longer than {limits.cell_timeout:g} s and was interrupted"
                                     if not out_of_budget else
                                     f"the notebook ran out of its {limits.notebook_timeout:g} s in cell {index}")
                    if outcome in ("dead", "killed"):
                        dead = True
                        break
                    if out_of_budget:
                        break
                grade_id = notebook.meta(cell).get("grade_id")
                if grade_id in tasks and grade_id not in graded:
                    emit(asdict(_grade_task(tasks[grade_id], namespace, sub)))
                    graded.add(grade_id)
            for grade_id, task in tasks.items():     # test cells the student deleted, in source order
                if grade_id not in graded and not dead and deadline > time.monotonic():
                    emit(asdict(_grade_task(task, namespace, sub)))
                    graded.add(grade_id)
    except Exception as exc:
        notes.append(f"the notebook could not be run: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        executor._CURRENT.reset(token)
        if kernel.client.truncated:
            notes.append(f"the notebook printed more than {limits.max_output_bytes >> 10} KiB; the rest was dropped")
        emit({"done": "; ".join(notes) or "ok", "cells_failed": failed_cells})
        log.close()


def _grade_task(task, namespace: dict, sub: RemoteSubmission) -> TaskResult:
    sub.fetched_ir = []
    token = grading(sub)
    hidden = _hidden_lines(task.source)
    try:     # nbgrader's rule (autograder/scoring.py): a number the cell ends with is its points
        value = scoring.run_cell(task.source, f"<task {task.grade_id}>", dict(namespace))
        score, message = scoring.earned(value, task.points)
    except scoring.BadScore as exc:
        print(f"task {task.grade_id}: {exc}", file=sys.stderr)     # the worker's log, for the instructor
        score, message = 0.0, "the test could not decide a score (a fault of the test, not of your answer)"
    except KernelGone as exc:
        score, message = 0.0, str(exc)
    except GradingFailure as exc:
        score, message = 0.0, str(exc) or "a check failed"
    except AssertionError as exc:
        line = _failing_line(exc, task.grade_id)
        shown = str(exc) if (str(exc) and line not in hidden) else ""
        score, message = 0.0, shown or ("a hidden test failed" if line in hidden else f"the test failed (line {line})")
    except Exception as exc:
        traceback.print_exc()     # to the worker's log, for the instructor; the student sees one line
        line = _failing_line(exc, task.grade_id)
        where = "a hidden test" if line in hidden else f"the test (line {line})"
        score, message = 0.0, f"{where} could not check the answer: {type(exc).__name__}"
    finally:
        reset(token)
    return TaskResult(task.grade_id, task.title, score, task.points, message, list(sub.fetched_ir))


def _hidden_lines(source: str) -> set:
    lines, inside, out = source.splitlines(), False, set()
    for number, line in enumerate(lines, 1):
        if line.strip() == notebook.BEGIN_HIDDEN:
            inside = True
        elif line.strip() == notebook.END_HIDDEN:
            inside = False
        if inside:
            out.add(number)
    return out


def _failing_line(exc: BaseException, grade_id: str) -> int:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == f"<task {grade_id}>"]
    return frames[-1].lineno if frames else 0


def _not_dumpable() -> None:
    """No other process of this user may trace this one or read its memory (/proc/PID/mem): a
    kernel left running as the same user must not reach the hidden tests held here."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)     # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def main(argv=None) -> None:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m autograder.runner")
    parser.add_argument("source")
    parser.add_argument("submission")
    parser.add_argument("progress")
    parser.add_argument("--limits", default="{}")
    args = parser.parse_args(argv)
    _not_dumpable()
    grade(Path(args.source), Path(args.submission), Limits(**json.loads(args.limits)), Path(args.progress))


if __name__ == "__main__":
    main()
