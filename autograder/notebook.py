"""The homework notebook format, nbgrader's: what an instructor source holds and the student
version made from it (``mlc-lab assign``).

Cell metadata ``nbgrader: {grade_id, points, solution, grade, locked, schema_version}``:

- a **solution** cell (``solution: true``) holds the answer between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION``; the student version has a stub there that raises NotImplementedError;
- a **test** cell (``grade: true``, with ``points``) is one graded task. Its visible part runs in
  the student's notebook as feedback; the part between ``### BEGIN HIDDEN TESTS`` and
  ``### END HIDDEN TESTS`` is removed from the student version. The grader runs the whole cell
  from the source in its own process, where ``submission`` reaches the student's kernel;
- a **written question** (``grade: true`` and ``solution: true``, usually markdown) is graded by
  hand, as nbgrader's manually graded answers are: the grader collects the student's answer for
  the TA and gives it no points itself;
- a cell with metadata ``autograder: {setup: true}`` (imports, constants, reference functions)
  runs in the student's notebook and, before any test, in the grader's process.

A test reaches the student's work only through ``submission`` (``autograder.submission``) and
decides with ``checks`` (``autograder.checks``), so the same cell grades the same way in the
student's notebook, under nbgrader, and in ``mlc-lab grade``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import nbformat

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"

class FormatError(ValueError):
    """A source notebook that breaks the format; the message names the cell."""

@dataclass
class Task:
    """One graded test cell of a source notebook."""
    grade_id: str
    points: float
    source: str          # the whole cell, hidden tests included
    index: int           # the cell's position in the source notebook
    title: str           # the first comment line of the cell, else the grade_id


@dataclass
class Question:
    """One written answer cell of a source notebook, graded by hand."""
    grade_id: str
    points: float
    index: int
    title: str           # the cell's first line, else the grade_id

def read(path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)

def meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}

def is_setup(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.get("metadata", {}).get("autograder", {}).get("setup"))

def _graded(nb) -> list:
    """``(index, cell, grade_id, points)`` of every graded cell (tests and written questions);
    FormatError for a duplicate grade_id or missing points, or a written question in code."""
    out, seen = [], set()
    for index, cell in enumerate(nb.cells):
        m = meta(cell)
        if not m.get("grade"):
            continue
        grade_id = m.get("grade_id")
        if not grade_id or grade_id in seen:
            raise FormatError(f"cell {index}: a graded cell needs a unique grade_id, got {grade_id!r}")
        if m.get("solution") and cell.cell_type != "markdown":
            raise FormatError(f"cell {index} ({grade_id}): a test cell cannot be a solution cell too "
                              "(a question graded by hand is a markdown cell)")
        try:
            points = float(m["points"])
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"cell {index} ({grade_id}): a graded cell needs numeric points") from None
        seen.add(grade_id)
        out.append((index, cell, grade_id, points))
    return out


def tasks(nb) -> list[Task]:
    """The graded test cells in order."""
    out = []
    for index, cell, grade_id, points in _graded(nb):
        if meta(cell).get("solution"):
            continue
        first = next((ln.strip("# ").strip() for ln in cell.source.splitlines() if ln.startswith("#")
                      and not ln.startswith("###")), "")
        out.append(Task(grade_id, points, cell.source, index, first or grade_id))
    return out


def questions(nb) -> list[Question]:
    """The written questions, graded by hand, in order."""
    return [Question(grade_id, points, index, next((ln.strip("#* ").strip() for ln in cell.source.splitlines()
                                                    if ln.strip()), grade_id)[:200])
            for index, cell, grade_id, points in _graded(nb) if meta(cell).get("solution")]


MAX_ANSWER = 4000     # characters of a written answer the grader keeps


def answers(student, source) -> list[dict]:
    """The student's text for each written question of ``source``, found by grade_id (first
    cell that has it), solution markers dropped, at most MAX_ANSWER characters."""
    found = {}
    for cell in student.cells:
        grade_id = meta(cell).get("grade_id")
        if isinstance(grade_id, str) and grade_id not in found and isinstance(cell.get("source"), str):
            found[grade_id] = cell.source
    out = []
    for q in questions(source):
        text = found.get(q.grade_id)
        text = "(no answer: the cell is missing)" if text is None else \
            "\n".join(ln for ln in text.splitlines() if ln.strip() not in (BEGIN_SOLUTION, END_SOLUTION))
        out.append({"grade_id": q.grade_id, "text": text[:MAX_ANSWER]})
    return out

def setup_code(nb) -> list[str]:
    return [cell.source for cell in nb.cells if is_setup(cell)]

def _replace_regions(text: str, begin: str, end: str, replacement: str | None, where: str) -> str:
    """Each ``begin``...``end`` region (marker lines included) replaced by ``replacement`` at the
    begin marker's indentation (dropped when None)."""
    lines, out, inside = text.splitlines(), [], None
    for line in lines:
        stripped = line.strip()
        if stripped == begin:
            if inside is not None:
                raise FormatError(f"{where}: {begin} inside another one")
            inside = line[:len(line) - len(line.lstrip())]
            if replacement is not None:
                out.extend(inside + r for r in replacement.splitlines())
        elif stripped == end:
            if inside is None:
                raise FormatError(f"{where}: {end} without {begin}")
            inside = None
        elif inside is None:
            out.append(line)
    if inside is not None:
        raise FormatError(f"{where}: {begin} without {end}")
    return "\n".join(out).rstrip() + ("\n" if text.endswith("\n") else "")

def release(nb) -> nbformat.NotebookNode:
    """The student version: solutions stubbed, hidden tests removed, outputs cleared."""
    _graded(nb)   # validates the graded cells
    out = copy.deepcopy(nb)
    for index, cell in enumerate(out.cells):
        where = f"cell {index}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        m = meta(cell)
        if m.get("solution"):
            if BEGIN_SOLUTION not in cell.source:
                raise FormatError(f"{where} ({m.get('grade_id')}): a solution cell needs {BEGIN_SOLUTION}")
            stub = STUB if cell.cell_type == "code" else "YOUR ANSWER HERE"
            cell.source = _replace_regions(cell.source, BEGIN_SOLUTION, END_SOLUTION, stub, where)
        elif BEGIN_SOLUTION in cell.source:
            raise FormatError(f"{where}: solution markers in a cell not marked as a solution cell")
        if BEGIN_HIDDEN in cell.source:
            if not m.get("grade"):
                raise FormatError(f"{where}: hidden tests in a cell that is not graded")
            cell.source = _replace_regions(cell.source, BEGIN_HIDDEN, END_HIDDEN, None, where)
    return out

def cells_by_grade_id(nb) -> dict:
    return {meta(cell)["grade_id"]: index for index, cell in enumerate(nb.cells) if meta(cell).get("grade_id")}


def read_bytes(data: bytes) -> nbformat.NotebookNode:
    return nbformat.reads(data.decode("utf-8"), as_version=4)
