"""The homework in exercises/: each student version is what ``mlc-lab assign`` makes of its
instructor source, and the real grader gives the source (every solution in place) full marks and
the student version (every solution a stub) zero, without a crash. Partial credit: one
half-right answer per homework loses exactly the tests its text says it does."""
from pathlib import Path

import pytest

from autograder import notebook
from autograder.batch import grade_many

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "exercises" / "instructor").glob("hw*.ipynb"))
pytestmark = pytest.mark.notebook


def test_every_chapter_from_02_has_homework():
    assert [p.name[2:4] for p in SOURCES] == ["02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_student_version_is_the_released_source(source):
    student = REPO / "exercises" / source.name
    assert student.exists(), f"{student} is missing: run `make exercises`"
    released = notebook.release(notebook.read(source))
    assert [(c.cell_type, c.source) for c in notebook.read(student).cells] == \
        [(c.cell_type, c.source) for c in released.cells], f"{student.name} is stale: run `make exercises`"
    tasks = notebook.tasks(released)
    assert 3 <= len({t.grade_id.split("-")[0] for t in tasks}) <= 6, [t.grade_id for t in tasks]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_grader_gives_solutions_full_marks_and_stubs_zero(source, tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    solved, blank = folder / "solved.ipynb", folder / "blank.ipynb"
    solved.write_bytes(source.read_bytes())
    blank.write_bytes((REPO / "exercises" / source.name).read_bytes())
    results = {r["name"]: r for r in grade_many(source, [solved, blank], tmp_path / "out", jobs=2,
                                                progress_bar=False)}
    full = results["solved"]
    failed = [(t["name"], t["output"]) for t in full["tests"] if t["score"] < t["max_score"]]
    assert not failed and full["score"] == full["max_score"] > 0, failed
    zero = results["blank"]
    assert zero["score"] == 0 and zero["output"] == "the notebook ran to the end", zero["output"]
    assert all(t["output"] != "passed" for t in zero["tests"])
