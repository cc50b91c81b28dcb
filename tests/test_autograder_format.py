"""The homework format and what crosses from a student's kernel: ``release`` (the student
version), its errors on malformed sources, ``mlc-lab assign`` and ``mlc-lab gradescope``,
artifacts (data only, IR read back in safe mode), and ``checks`` messages that never show an
expected value."""
import io
import json
import os
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
    assert len(answers) == 5 and all(c.source == notebook.STUB for c in answers)
    tests = notebook.tasks(student)
    assert [(t.grade_id, t.points, t.title) for t in tests] == [
        ("t1", 2.0, "Task 1: element-wise add"), ("t2", 1.0, "Task 2: double an array"),
        ("t3", 1.0, "Task 3: the number only the hidden test knows"), ("t4", 1.0, "Task 4: a faster matmul"),
        ("t5", 2.0, "Task 5: square and cube, a point each")]
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
        assert "-m autograder.gradescope /autograder/source/homework/hw.ipynb" in run_script
        assert "/autograder/results/results.json" in run_script and "--no-sandbox" not in run_script
        setup = z.read("setup.sh").decode()
        assert 'pip install --quiet "mlc_lab[grade]==' in setup and "bubblewrap" in setup
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
    earned = checks.by_ratio(1.5, full=2.0, partial=1.0, points=2)
    assert earned == pytest.approx(1.5) and repr(earned) == "1.5" and "1.50x" in earned.message
    assert checks.by_ratio(2.5, full=2.0, points=2) == 2
    assert checks.by_ratio(2.5, full=2.0, points=2).message == "speedup 2.50x: full points from 2x"
    with pytest.raises(checks.GradingFailure, match="below the 1x"):
        checks.by_ratio(0.5, full=2.0, partial=1.0, points=2)
    assert checks.loops(func, "C") == [(8, "serial"), (8, "serial")]


def _run_gradescope(tmp_path, submit) -> tuple:
    """run_autograder from the zip, its /autograder paths moved under tmp_path and mlc_lab taken
    from this environment; ``submit(folder)`` fills the submission folder. (process, results)."""
    from autograder.gradescope import RUN
    root = tmp_path / "autograder"
    (root / "source" / "homework").mkdir(parents=True)
    (root / "submission").mkdir()
    hw.write(hw.source(), root / "source" / "homework" / "hw.ipynb")
    submit(root / "submission", root / "source" / "homework" / "hw.ipynb")
    script = RUN.format(source="hw.ipynb", timeout=300, flags="").replace(
        "/autograder", str(root)).replace("/opt/mlc-lab/bin/python", sys.executable)
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return run, json.loads((root / "results" / "results.json").read_text())


def test_gradescope_run_script_writes_results_where_gradescope_reads_them(tmp_path):
    _, result = _run_gradescope(tmp_path, lambda folder, _: hw.write(hw.student(blank=("t4",)), folder / "mine.ipynb"))
    assert result["score"] == hw.MAX_SCORE - 1 and len(result["tests"]) == 5


@pytest.mark.parametrize("attack", ["symlink", "hardlink", "fifo", "two"])
def test_gradescope_refuses_a_submission_that_is_not_one_plain_notebook(tmp_path, attack):
    """A submission that is a link to the instructor's source (which would be graded as the
    source: full marks), a hard link, a FIFO (which would hang the reader) or two notebooks
    scores 0 and says why; results.json is written all the same."""
    def submit(folder, source):
        if attack == "symlink":
            (folder / "mine.ipynb").symlink_to(source)
        elif attack == "hardlink":
            os.link(source, folder / "mine.ipynb")
        elif attack == "fifo":
            os.mkfifo(folder / "mine.ipynb")
        else:
            hw.write(hw.student(), folder / "a.ipynb")
            hw.write(hw.student(), folder / "b.ipynb")
    _, result = _run_gradescope(tmp_path, submit)
    assert result["score"] == 0 and all(t["score"] == 0 for t in result["tests"])
    why = {"symlink": "symbolic link", "hardlink": "hard links", "fifo": "not a plain file",
           "two": "exactly one"}[attack]
    assert why in result["output"], result["output"]


def test_a_test_cells_last_number_is_its_score_as_under_nbgrader():
    from autograder import scoring
    run = lambda code: scoring.run_cell(code, "<cell>", {"checks": checks})   # noqa: E731
    assert scoring.earned(run("x = 1\nx + 1"), 3) == (2.0, "earned 2 of 3 points")
    assert scoring.earned(run("checks.partial(0.5, 2, 'half')  # comment"), 2) == (1.0, "half")
    for silent in ("x = 1", "1 + 1;", "True", "'1.5'", "if True:\n    0"):     # not a displayed number
        assert scoring.earned(run(silent), 2) == (2.0, "passed"), silent
    for bad in ("-1", "2.5", "float('nan')"):
        with pytest.raises(scoring.BadScore):
            scoring.earned(run(bad), 2)
    with pytest.raises(checks.GradingFailure):
        run("checks.fail('no')\n1")


DOCUMENTED_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
DOCUMENTED_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}


def test_results_json_keeps_to_gradescopes_keys_and_cleans_student_text(tmp_path):
    """Outputs a student can steer (escape sequences, markup, a NUL byte, a flood) reach
    results.json as plain text of bounded length; the files are replaced whole."""
    from autograder import report
    tasks = notebook.tasks(hw.source())
    records = [{"grade_id": "t1", "score": 2.0, "output": "passed"},
               {"grade_id": "t2", "score": 0.0, "output": "\x1b[31mred\x1b[0m \x1b]0;title\x07"},
               {"grade_id": "t3", "score": 0.0, "output": "<script>alert(1)</script>"},
               {"grade_id": "t4", "score": 0.5, "output": "nul\x00byte\r\nnext\tline\x7f" + "x" * 20000},
               {"done": "the kernel died \x1b[2J\x08", "cells_failed": []}]
    result = report.results("alice", tasks, records, "", 3.5, worker_log="log")
    folder = tmp_path / "alice"
    for _ in range(2):              # a second grading replaces every file
        report.write_submission(folder, result, tasks)
    assert sorted(p.name for p in folder.iterdir()) == [report.FEEDBACK, report.GRADER_LOG, report.RESULTS]
    written = json.loads((folder / report.RESULTS).read_text())
    assert set(written) <= DOCUMENTED_TOP and written["output_format"] == written["test_output_format"] == "text"
    assert "name" not in written and written["score"] == 2.5
    for test in written["tests"]:
        assert set(test) <= DOCUMENTED_TEST and test["extra_data"].keys() == {"grade_id"}
    assert [t["number"] for t in written["tests"]] == ["1", "2", "3", "4", "5"]
    assert [t["extra_data"]["grade_id"] for t in written["tests"]] == ["t1", "t2", "t3", "t4", "t5"]
    assert [t["status"] for t in written["tests"]] == ["passed", "failed", "failed", "failed", "failed"]
    strings = [written["output"]] + [t["output"] for t in written["tests"]] + [t["name"] for t in written["tests"]]
    for text in strings:       # no C0 or C1 control character but newline and tab
        assert not [c for c in text if (ord(c) < 32 and c not in "\n\t") or 127 <= ord(c) < 160], repr(text)
    outputs = [t["output"] for t in written["tests"]]
    assert outputs[1] == "red " and outputs[2] == "<script>alert(1)</script>"   # shown as text, not run
    assert outputs[3].startswith("nulbyte\nnext\tline") and len(outputs[3]) <= report.MAX_OUTPUT
    assert "cut here" in outputs[3] and written["output"] == "the kernel died "
    assert outputs[4].startswith("not graded")
    report.write_grades_csv(tmp_path, tasks, ["alice"])
    assert (tmp_path / report.GRADES).read_text().splitlines()[1] == "alice,2,0,0,0.5,0,2.5"
    failed = report.gradescope(report.failure("bob", tasks, "grading raised OSError", 1.0))
    assert failed["score"] == 0 and all(t["score"] == 0 and "grading raised OSError" in t["output"]
                                        for t in failed["tests"])


def test_grade_refuses_a_submission_that_is_a_link(tmp_path):
    """``mlc-lab grade`` reads each submission without following a link: a symlink to the
    instructor's source (graded as the source, it would earn full marks) scores 0 and says why,
    and the others in the same run are graded as usual."""
    from autograder.batch import grade_many
    source = tmp_path / "instructor" / "hw.ipynb"
    source.parent.mkdir()
    hw.write(hw.source(), source)
    (tmp_path / "linked.ipynb").symlink_to(source)
    os.link(source, tmp_path / "hardlinked.ipynb")
    done = grade_many(source, [tmp_path / "linked.ipynb", tmp_path / "hardlinked.ipynb"], tmp_path / "out",
                      progress_bar=False)
    assert {r["name"]: r["score"] for r in done} == {"linked": 0, "hardlinked": 0}
    for name, why in (("linked", "symbolic link"), ("hardlinked", "hard links")):
        result = json.loads((tmp_path / "out" / name / "results.json").read_text())
        assert result["score"] == 0 and why in result["output"], result["output"]


def test_no_sandbox_grades_the_same(tmp_path):
    """``--no-sandbox`` (for machines without bubblewrap) runs the notebook unconfined but grades
    it as the sandbox does: the same checks, the programs in an executor process of their own."""
    source = tmp_path / "hw.ipynb"
    hw.write(hw.source(), source)
    hw.write(hw.student({"double": "def double(x):\n    return x"}, blank=("t4",)), tmp_path / "mine.ipynb")
    run = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", str(source), str(tmp_path / "mine.ipynb"),
                          "--out", str(tmp_path / "out"), "--no-sandbox", "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads((tmp_path / "out" / "mine" / "results.json").read_text())
    scores = {t["extra_data"]["grade_id"]: t["score"] for t in result["tests"]}
    assert scores == {"t1": 2, "t2": 0, "t3": 1, "t4": 0, "t5": 2}, result


def _with_question(nb, text="### BEGIN SOLUTION\nBecause the tiles fit in L1.\n### END SOLUTION"):
    cell = notebook.nbformat.v4.new_markdown_cell(text)
    cell.metadata["nbgrader"] = {"grade": True, "solution": True, "grade_id": "why", "points": 2,
                                 "locked": False, "schema_version": 3}
    nb.cells.append(cell)
    return nb


def test_a_written_question_is_released_as_a_prompt_and_is_no_test():
    source = _with_question(hw.source())
    student = notebook.release(source)
    assert student.cells[-1].source == "YOUR ANSWER HERE"
    assert [q.grade_id for q in notebook.questions(source)] == ["why"]
    assert "why" not in {t.grade_id for t in notebook.tasks(source)}
    code = _with_question(hw.source())
    code.cells[-1].cell_type = "code"
    with pytest.raises(notebook.FormatError, match="markdown"):
        notebook.tasks(code)


def test_a_written_answer_reaches_the_ta_cleaned_and_earns_nothing_by_itself(tmp_path):
    """The student's text is collected by grade_id, cut to MAX_ANSWER and cleaned like any output
    a student steers; results.json lists it without a score, grades.csv leaves its column empty."""
    from autograder import report
    source = _with_question(hw.source())
    student = _with_question(hw.source(), "\x1b[2JTiles fit in L1 <b>cache</b>. " + "x" * 10000)
    answers = notebook.answers(student, source)
    assert [a["grade_id"] for a in answers] == ["why"] and len(answers[0]["text"]) == notebook.MAX_ANSWER
    missing = notebook.answers(hw.source(), source)
    assert "missing" in missing[0]["text"]
    tasks, questions = notebook.tasks(source), notebook.questions(source)
    records = [{"answer": "why", "text": answers[0]["text"]}, {"grade_id": "t1", "score": 2.0, "output": "passed"},
               {"done": "ok", "cells_failed": []}]
    result = report.results("alice", tasks, records, "", 1.0, questions=questions)
    assert result["score"] == 2.0 and result["max_score"] == sum(t.points for t in tasks)
    report.write_submission(tmp_path / "alice", result, tasks)
    written = json.loads((tmp_path / "alice" / report.RESULTS).read_text())
    manual = written["tests"][-1]
    assert set(manual) <= DOCUMENTED_TEST and "score" not in manual and manual["extra_data"]["graded_by_hand"]
    assert manual["output"].startswith("Tiles fit in L1 <b>cache</b>.") and "\x1b" not in manual["output"]
    assert written["score"] == 2.0
    feedback = (tmp_path / "alice" / report.FEEDBACK).read_text()
    assert "graded by hand" in feedback and "&lt;b&gt;cache&lt;/b&gt;" in feedback
    report.write_grades_csv(tmp_path, tasks, ["alice"], questions)
    header, row = (tmp_path / report.GRADES).read_text().splitlines()
    assert header.endswith(",total,why (by hand)") and row == "alice,2,0,0,0,0,2,"


def test_calibrate_reads_thresholds_and_judges_the_solutions_ratios():
    from autograder import calibrate
    assert calibrate.thresholds("x = 1\n### BEGIN HIDDEN TESTS\nchecks.by_ratio(r, full=3, partial=1.5, points=2)\n"
                                "### END HIDDEN TESTS") == {"full": 3, "partial": 1.5}
    assert calibrate.thresholds("checks.numerics(f, ref)") is None
    assert calibrate.verdict([4.1, 3.9, 4.4], full=3) == "ok"
    assert calibrate.verdict([3.2, 3.9], full=3).startswith("tight")
    assert calibrate.verdict([2.4, 3.9], full=3).startswith("too strict") and "full <= 2.09" in calibrate.verdict([2.4], 3)
    message = checks.by_ratio(3.5, full=3, partial=1.5, points=2).message
    assert float(__import__("re").search(checks.RATIO_IN_MESSAGE, message).group(1)) == 3.5


def test_mlc_lab_calibrate_grades_the_solutions_and_prints_each_timed_test(tmp_path):
    """The command grades the source's own solutions as a submission (sandboxed where it can be)
    and prints the timed test with its threshold and the ratios measured."""
    from autograder import sandbox
    path = tmp_path / "hw.ipynb"
    hw.write(hw.source(), path)
    command = [sys.executable, "-m", "autograder.cli", "calibrate", str(path), "--runs", "2"]
    if sandbox.problem() and not os.environ.get("CI"):
        command.append("--no-sandbox")
    out = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.strip().splitlines()
    assert header.split()[:5] == ["test", "full", "partial", "slowest", "median"]
    fields = row.split()
    assert fields[0] == "t4" and fields[1] == "2x" and fields[2] == "-"
    assert float(fields[3].rstrip("x")) <= float(fields[4].rstrip("x"))
    assert row.endswith("ok") or "tight" in row or "too strict" in row
