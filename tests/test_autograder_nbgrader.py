"""The same submission earns the same points per task from ``nbgrader autograde`` and from
``mlc-lab grade``: the sources are nbgrader notebooks, and a test cell's score follows nbgrader's
rule (an error is 0, a number the cell ends with is the points, else all of them) in both.

The submission is half right in ways that do not depend on timing: one task right, one wrong,
one only the hidden test decides, a schedule that is no faster, and two functions of which one
is right (partial credit from ``checks.partial``). nbgrader runs the notebook in a kernel of this
Python, installed as the kernelspec python3 of a Jupyter data folder of the test's own, so no
other kernel or configuration on the machine is used and nothing is downloaded."""
import os
import subprocess
import sys

import nbformat
import pytest

import autograder_homework as hw

pytest.importorskip("nbgrader")
ANSWERS = {"double": "def double(x):\n    return x * 3", "schedule": "sch = tir.Schedule(naive_mm)",
           "powers": hw.POWERS_HALF}
EXPECTED = {"t1": 2.0, "t2": 0.0, "t3": 1.0, "t4": 0.0, "t5": 1.0}


def _nbgrader(course, env, *args) -> None:
    run = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


def _student_notebook(released: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """nbgrader's student version with ANSWERS in its solution cells (the rest as solved)."""
    mine = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in hw.student(ANSWERS).cells}
    for cell in released.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = mine[meta["grade_id"]]
    return released


def test_nbgrader_and_mlc_lab_grade_give_the_same_points(tmp_path):
    from nbgrader.api import Gradebook
    from autograder.batch import grade_many
    course = tmp_path / "course"
    (course / "source" / "ps1").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text('c = get_config()\nc.CourseDirectory.course_id = "mlc"\n'
                                                "c.ExecutePreprocessor.timeout = 300\n")
    hw.write(hw.source(), course / "source" / "ps1" / "ps1.ipynb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    env.update(PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"))
    install = subprocess.run([sys.executable, "-m", "ipykernel", "install", "--user", "--name", "python3"],
                             env=env, capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stderr

    _nbgrader(course, env, "generate_assignment", "ps1")
    submitted = course / "submitted" / "alice" / "ps1" / "ps1.ipynb"
    submitted.parent.mkdir(parents=True)
    nbformat.write(_student_notebook(nbformat.read(course / "release" / "ps1" / "ps1.ipynb", as_version=4)),
                   str(submitted))
    _nbgrader(course, env, "autograde", "ps1", "--force")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        graded = gradebook.find_submission_notebook("ps1", "ps1", "alice")
        by_nbgrader = {grade.name: float(grade.score) for grade in graded.grades}

    (result,) = grade_many(course / "source" / "ps1" / "ps1.ipynb", [submitted], tmp_path / "grades", jobs=1,
                           progress_bar=False)
    by_mlc_lab = {t["grade_id"]: t["score"] for t in result["tests"]}
    assert by_nbgrader == by_mlc_lab == EXPECTED, (by_nbgrader, {t["grade_id"]: t["output"] for t in result["tests"]})
