"""The homework format and what crosses from a student's kernel: ``release`` (the student
version), its errors on malformed sources, ``mlc-lab assign`` and ``mlc-lab gradescope``,
artifacts (data only, IR read back in safe mode), and ``checks`` messages that never show an
expected value."""
import io
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import autograder_homework as hw
from autograder import artifacts, checks, notebook
from autograder.submission import LocalSubmission


def test_release_stubs_solutions_and_drops_hidden_tests():
    source = hw.source()
    source.cells[2].outputs = [{"output_type": "stream", "name": "stdout", "text": "saved output"}]
    student = notebook.release(source)
    text = json.dumps(student)
    assert "BEGIN SOLUTION" not in text and "HIDDEN" not in text and str(hw.SECRET) not in text
    assert "checks.by_ratio" not in text and "saved output" not in text
    answers = [c for c in student.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(answers) == 4 and all(c.source == notebook.STUB for c in answers)
    tests = notebook.tasks(student)
    assert [(t.grade_id, t.points, t.title) for t in tests] == [
        ("t1", 2.0, "Task 1: element-wise add"), ("t2", 1.0, "Task 2: double an array"),
        ("t3", 1.0, "Task 3: the number only the hidden test knows"), ("t4", 1.0, "Task 4: a faster matmul")]
    assert 'checks.numerics(submission.ir("add"), lambda a, b: a + b)' in tests[0].source   # visible part kept


def test_stub_keeps_the_indentation_of_its_markers():
    nb = hw.source({"double": "def double(x):\n    ### BEGIN SOLUTION\n    return x * 2\n    ### END SOLUTION"})
    nb.cells[4].source = nb.cells[4].source.replace("### BEGIN SOLUTION\n", "", 1).rsplit("\n", 1)[0]
    student = notebook.release(nb)
    assert student.cells[4].source == "def double(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"


@pytest.mark.parametrize("edit,message", [
    (lambda nb: nb.cells[3].metadata["nbgrader"].pop("points"), "cell 3 (t1): a graded cell needs numeric points"),
    (lambda nb: nb.cells[5].metadata["nbgrader"].update(grade_id="t1"), "cell 5: a graded cell needs a unique grade_id"),
    (lambda nb: setattr(nb.cells[2], "source", nb.cells[2].source.replace("### END SOLUTION", "")),
     "cell 2: ### BEGIN SOLUTION without ### END SOLUTION"),
    (lambda nb: setattr(nb.cells[1], "source", "### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS"),
     "cell 1: hidden tests in a cell that is not graded"),
    (lambda nb: nb.cells[2].metadata["nbgrader"].update(solution=False),
     "cell 2: solution markers in a cell not marked as a solution cell"),
])
def test_malformed_sources_are_named_by_cell(edit, message):
    nb = hw.source()
    edit(nb)
    with pytest.raises(notebook.FormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        notebook.release(nb)


def test_assign_and_gradescope_commands(tmp_path):
    source = tmp_path / "hw.ipynb"
    hw.write(hw.source(), source)
    cli = [sys.executable, "-m", "autograder.cli"]
    run = subprocess.run(cli + ["assign", str(source), "--out", str(tmp_path / "release")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assigned = notebook.read(tmp_path / "release" / "hw.ipynb")
    assert assigned.cells == notebook.release(notebook.read(source)).cells
    run = subprocess.run(cli + ["gradescope", str(source), "--out", str(tmp_path / "ag.zip")],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with zipfile.ZipFile(tmp_path / "ag.zip") as z:
        assert sorted(z.namelist()) == ["homework/hw.ipynb", "run_autograder", "setup.sh"]
        assert (z.getinfo("run_autograder").external_attr >> 16) & 0o111
        run_script = z.read("run_autograder").decode()
        assert "mlc-lab grade /autograder/source/homework/hw.ipynb" in run_script
        assert "/autograder/results/results.json" in run_script
        assert 'pip install --quiet "mlc_lab[grade]==' in z.read("setup.sh").decode()
    broken = hw.source()
    broken.cells[3].metadata["nbgrader"].pop("points")
    hw.write(broken, tmp_path / "broken.ipynb")
    run = subprocess.run(cli + ["assign", str(tmp_path / "broken.ipynb"), "--out", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "graded cell needs numeric points" in run.stderr


def test_values_cross_as_data(tmp_path):
    from mlc_lab import relax, topi
    from mlc_lab.ir import assert_structural_equal
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4, 32), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_te(lambda a, b: topi.matmul(a, b), x, relax.const(np.ones((32, 8), "float32")))
            out = bb.emit_output(bb.emit(relax.op.add(y, relax.const(np.arange(32.0, dtype="float32").reshape(4, 8)))))
        bb.emit_func_output(out)
    mod = bb.get()
    desc = artifacts.write(mod, tmp_path / "mod")
    assert desc["kind"] == "ir" and len(desc["constants"]) == 2       # too large to print: .npy files
    assert_structural_equal(artifacts.read(tmp_path / "mod"), mod)
    for value, back in [([np.float64(0.5), 2, {"k": "v"}], [0.5, 2, {"k": "v"}]), ((np.ones(3), 4), None)]:
        artifacts.write(value, tmp_path / "v")
        got = artifacts.read(tmp_path / "v")
        if back is not None:
            assert got == back
        else:
            assert isinstance(got, tuple) and np.array_equal(got[0], np.ones(3)) and got[1] == 4


def test_artifacts_refuse_pickles_and_code(tmp_path):
    folder = tmp_path / "evil"
    folder.mkdir()
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    (folder / "value.npy").write_bytes(buffer.getvalue())
    (folder / "value.json").write_text(json.dumps({"kind": "array", "file": "value.npy"}))
    with pytest.raises(artifacts.ArtifactError, match="without unpickling"):
        artifacts.read(folder)
    (folder / "value.json").write_text(json.dumps({"kind": "array", "file": "../value.npy"}))
    with pytest.raises(artifacts.ArtifactError, match="bad artifact file name"):
        artifacts.read(folder)
    (folder / "value.py").write_text("__import__('os').getpid()\n@T.prim_func\ndef f():\n    T.evaluate(0)")
    (folder / "value.json").write_text(json.dumps({"kind": "ir", "file": "value.py"}))
    from mlc_lab.script.errors import ScriptError
    (folder / "value.py").write_text('@T.prim_func\ndef f(A: T.Buffer((1,), "float32")):\n'
                                     "    A[0] = T.float32(len(open('/etc/hostname').read()))")
    with pytest.raises(ScriptError, match="name 'open' is not defined"):
        artifacts.read(folder)
    with pytest.raises(artifacts.ArtifactError, match="cannot be handed in"):
        artifacts.write(object(), tmp_path / "obj")


def test_local_submission_reads_the_notebooks_variables(monkeypatch):
    import __main__
    monkeypatch.setattr(__main__, "double", lambda x: x * 2, raising=False)
    monkeypatch.setattr(__main__, "answer", 3, raising=False)
    sub = LocalSubmission()
    assert np.array_equal(sub.call("double", np.arange(3)), [0, 2, 4])
    assert sub.value("answer") == 3
    with pytest.raises(checks.GradingFailure, match="`answer` is an int; this task wants an IRModule"):
        sub.ir("answer")
    with pytest.raises(checks.GradingFailure, match="the notebook defines no `missing`"):
        sub.value("missing")
    with pytest.raises(checks.GradingFailure, match="calling `double` raised TypeError"):
        sub.call("double", None)


def test_check_messages_locate_without_showing_expected_values():
    from mlc_lab.script.parser import from_source
    func = from_source(hw.ADD)
    checks.numerics(func, lambda a, b: a + b)
    with pytest.raises(checks.GradingFailure) as failure:
        checks.numerics(func, lambda a, b: a * 1000 + 12345.678)
    message = str(failure.value)
    assert message.startswith("output C of add differs from the reference at 64 of 64 elements")
    assert "12345" not in message
    with pytest.raises(checks.GradingFailure, match=r"has shape \(8, 8\); it should be \(8,\)"):
        checks.compare(np.zeros((8, 8)), np.zeros(8), "x")
    with pytest.raises(checks.PartialCredit) as partial:
        checks.by_ratio(1.5, full=2.0, partial=1.0)
    assert partial.value.fraction == pytest.approx(0.75)
    with pytest.raises(checks.GradingFailure, match="below the 1x"):
        checks.by_ratio(0.5, full=2.0, partial=1.0)
    assert checks.loops(func, "C") == [(8, "serial"), (8, "serial")]


def test_gradescope_run_script_writes_results_where_gradescope_reads_them(tmp_path):
    """run_autograder from the zip, its /autograder paths moved under tmp_path and mlc-lab run
    from this environment: one submitted notebook in, results.json out."""
    from autograder.gradescope import RUN
    root = tmp_path / "autograder"
    (root / "source" / "homework").mkdir(parents=True)
    (root / "submission").mkdir()
    hw.write(hw.source(), root / "source" / "homework" / "hw.ipynb")
    hw.write(hw.student(blank=("t4",)), root / "submission" / "mine.ipynb")
    script = RUN.format(source="hw.ipynb", timeout=300).replace("/tmp/", f"{tmp_path}/").replace(
        "/autograder", str(root)).replace("/opt/mlc-lab/bin/mlc-lab", f"{sys.executable} -m autograder.cli")
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads((root / "results" / "results.json").read_text())
    assert result["score"] == hw.MAX_SCORE - 1 and len(result["tests"]) == 4
