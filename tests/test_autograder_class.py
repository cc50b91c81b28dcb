"""``mlc-lab grade`` over a class of 32: generated submissions, each task right, wrong or left
blank (the last one half right too), and hostile ones, each trying one known attack. Every
submission gets exactly the scores its honest answers earn: an attack earns nothing, costs the other tasks nothing, and never stops
the batch. The class is graded once (the command line, 2 jobs); each test checks a part."""
import csv
import itertools
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import autograder_homework as hw
from autograder import sandbox

ROOT = Path(__file__).resolve().parents[1]

TASKS = {"add": ("t1", 2), "double": ("t2", 1), "answer": ("t3", 1), "schedule": ("t4", 1), "powers": ("t5", 2)}
WRONG = {"add": hw.ADD.replace("A[vi, vj] + B[vi, vj]", "A[vi, vj] - B[vi, vj]"),
         "double": "def double(x):\n    return x * 3",
         "answer": "answer = 7",
         "schedule": "sch = tir.Schedule(naive_mm)",
         "powers": hw.POWERS.replace("x ** 2", "x * 2").replace("x ** 3", "x * 3")}
HALF = {"powers": (hw.POWERS_HALF, 1)}     # task -> (answer, points it earns)
ALL = {grade_id: points for grade_id, points in TASKS.values()}
CELL_TIMEOUT = 20
PWNED = Path("/tmp/mlc-lab-test-pwned")      # a pickle payload would create this in the grader

# name -> (answers, extra cells, blank tasks, expected scores by grade_id, words the summary has)
HOSTILE = {
    "eq_always_true": ({"double": "class Yes:\n    def __eq__(self, other): return True\n"
                                  "    def __array__(self, *a, **k): raise TypeError('no')\n"
                                  "def double(x):\n    return Yes()",
                        "answer": "class Yes:\n    def __eq__(self, other): return True\nanswer = Yes()"},
                       {}, (), {"t2": 0, "t3": 0}, ""),
    "patched_numpy_and_checks": ({"double": WRONG["double"]}, {"start": """
import numpy, numpy.testing, autograder.checks
numpy.allclose = lambda *a, **k: True
numpy.testing.assert_allclose = lambda *a, **k: None
autograder.checks.compare = lambda *a, **k: None
autograder.checks.numerics = lambda *a, **k: None"""}, (), {"t2": 0}, ""),
    "hidden_tracebacks": ({"add": WRONG["add"]},
                          {"start": "get_ipython().showtraceback = lambda *a, **k: None"}, (), {"t1": 0}, ""),
    "fake_results": ({"answer": WRONG["answer"]}, {"end": """
import json, pathlib
fake = {"score": 100, "tests": []}
for folder in [pathlib.Path.cwd(), pathlib.Path(OUT_DIR), pathlib.Path(OUT_DIR) / "fake_results"]:
    try:
        (folder / "results.json").write_text(json.dumps(fake))
    except OSError as exc:
        print("could not write", folder, exc)
print("All tests passed! Score: 100/100")"""}, (), {"t3": 0}, ""),
    "reads_hidden_tests": ({"answer": """
import re
answer = 0
for path in [SOURCE_PATH, OTHER_SUBMISSION]:
    try:
        text = open(path).read()
        found = re.search(r"== (\\d{6,})", text)
        if found:
            answer = int(found.group(1))
    except OSError as exc:
        print("could not read", path, exc)
for path in [SOURCE_PATH, OTHER_SUBMISSION]:
    try:
        import os; os.remove(path)
    except OSError as exc:
        print("could not delete", path, exc)"""}, {}, (), {"t3": 0}, ""),
    "hard_coded_outputs": ({"double": "import numpy as np\ndef double(x):\n    return np.arange(5.0) * 2"},
                           {}, (), {"t2": 0}, ""),
    "busy_kernel_skews_timing": ({"schedule": WRONG["schedule"]}, {"end": """
import threading, time
def spin():
    while True:
        time.sleep(0.0005)
        sum(range(2000))
threading.Thread(target=spin, daemon=True).start()"""}, (), {"t4": 0}, ""),
    "os_exit": ({}, {"before:answer": "import os\nos._exit(3)"}, (), {"t3": 0, "t4": 0, "t5": 0}, "kernel died"),
    "sys_exit": ({}, {"before:double": "import sys\nsys.exit('bye')"}, (), {}, ""),
    "fork_bomb": ({}, {"end": """
import os, time
children = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
except OSError as exc:
    print(f"forked {children} before {type(exc).__name__}")"""}, (), {}, ""),
    "memory_bomb": ({}, {"before:double": """
hog = []
try:
    while True:
        hog.append(bytearray(100 << 20))
except MemoryError:
    hog = None
    print("MemoryError")"""}, (), {}, ""),
    "infinite_loop": ({}, {"before:answer": "while True:\n    pass"}, (), {}, "interrupted"),
    "pickle_payload": ({}, {"start": f"""
import numpy as np, json, os, pathlib, importlib
sub = importlib.import_module("autograder.submission")    # the module (the package's `submission` is the proxy)
class Payload:
    def __reduce__(self):
        return (os.system, ("touch {PWNED}",))
def serve(folder, namespace=None):
    folder = pathlib.Path(folder)
    np.save(folder / "result.npy", np.array([Payload()], dtype=object), allow_pickle=True)
    (folder / "result.json").write_text(json.dumps({{"kind": "array", "file": "result.npy"}}))
    (folder / "answer.json").write_text(json.dumps({{"ok": True}}))
sub.serve = serve"""}, (), ALL | {}, ""),
    "script_injection": ({}, {"start": """
import mlc_lab.script.printer as printer
printer.script = lambda node, **kw: "__import__('os').system('touch /tmp/mlc-lab-test-pwned')"
"""}, (), {"t1": 0, "t4": 0}, ""),
    "prints_megabytes": ({}, {"start": "print('x' * (4 << 20))"}, (), {}, "printed more than"),
    # The attacks below each beat the grader once; each is now a submission of the class.
    "oob_read_steals_answer": ({"add": hw.ADD.replace("A[vi, vj] + B[vi, vj]", "A[vi, vj + 64] + B[vi, vj + 64]")},
                               {}, (), {"t1": 0}, ""),
    "oob_write": ({"add": hw.ADD.replace("C[vi, vj] =", "C[vi, vj + 100000000] =")}, {}, (), {"t1": 0}, ""),
    "rewrites_grader": ({}, {"start": f"""
import os, sys, sysconfig
targets = [{str(ROOT / 'autograder' / 'runner.py')!r}, {str(ROOT / 'autograder' / 'checks.py')!r},
           os.path.join(sysconfig.get_paths()["purelib"], "zz_pwned.pth"), "/etc/mlc-lab-pwned",
           "/root/mlc-lab-pwned", "/autograder/results/results.json"]
for path in targets:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write("\\nimport os; os.system('touch {PWNED}')\\n")
    except OSError as exc:
        print("could not write", path, type(exc).__name__)"""}, (), {}, ""),
    "int80_fork": ({}, {"end": """
import ctypes, mmap
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(b"\\xb8\\x02\\x00\\x00\\x00\\xcd\\x80\\xc3")       # i386 fork through int 0x80
ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()"""}, (), {}, "kernel died"),
    "ignores_interrupt": ({}, {"before:answer": """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass"""}, (), {"t3": 0, "t4": 0, "t5": 0}, "ignored the interrupt"),
    "markup_in_messages": ({"double": "def double(x):\n    raise ValueError('\\x1b[31m<b>full marks</b>\\x1b[0m\\x00')"},
                           {}, (), {"t2": 0}, ""),
    "kernel_dies_mid_task": ({"double": "import os\ndef double(x):\n    os._exit(1)"}, {}, (),
                             {"t2": 0, "t3": 0, "t4": 0, "t5": 0}, ""),
}
HOSTILE["pickle_payload"] = (HOSTILE["pickle_payload"][0], HOSTILE["pickle_payload"][1], (),
                             {g: 0 for g in ALL}, "")


def generated() -> dict:
    """Honest submissions: the first four tasks right, wrong or blank, in a spread of
    combinations; the last one right, half right, wrong or blank in turn."""
    out = {}
    choices = list(itertools.product(("right", "wrong", "blank"), repeat=len(TASKS) - 1))
    # all right, then wrong only in the first task, then a spread over the other 79 combinations
    picks = [choices[0], choices[27]] + choices[4::10]
    for n, choice in enumerate(picks):
        choice += (("right", "half", "wrong", "blank")[n % 4],)
        answers = {task: WRONG[task] if c == "wrong" else HALF[task][0]
                   for task, c in zip(TASKS, choice) if c in ("wrong", "half")}
        blank = tuple(TASKS[task][0] for task, c in zip(TASKS, choice) if c == "blank")
        scores = {TASKS[task][0]: {"right": TASKS[task][1], "half": HALF.get(task, (0, 0))[1]}.get(c, 0)
                  for task, c in zip(TASKS, choice)}
        out[f"student{n:02d}_" + "".join(c[0] for c in choice)] = (answers, {}, blank, scores, "")
    return out


CLASS = {**generated(), **{f"hostile_{k}": v for k, v in HOSTILE.items()}}
if sandbox.problem():      # CI installs bubblewrap: there a missing sandbox is a failure
    if os.environ.get("CI"):
        raise RuntimeError(f"the grader's sandbox is missing under CI: {sandbox.problem()}")
    pytest.skip(f"no sandbox here: {sandbox.problem()}", allow_module_level=True)

def expected_scores(name: str) -> dict:
    scores = CLASS[name][3]
    return {grade_id: scores.get(grade_id, points) for grade_id, points in ALL.items()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class graded by ``mlc-lab grade``: (output folder, submissions folder, source path)."""
    root = tmp_path_factory.mktemp("class")
    source_dir, subs, out = root / "instructor", root / "submissions", root / "grades"
    for folder in (source_dir, subs):
        folder.mkdir()
    source = source_dir / "homework.ipynb"
    hw.write(hw.source(), source)
    other = subs / "student00_rrrrr.ipynb"
    names = {"SOURCE_PATH": str(source), "OTHER_SUBMISSION": str(other), "OUT_DIR": str(out)}
    for name, (answers, extra, blank, _, _) in CLASS.items():
        prelude = "".join(f"{key} = {value!r}\n" for key, value in names.items())
        extra = {**extra, "start": prelude + extra.get("start", "")}
        hw.write(hw.student(answers, extra, blank), subs / f"{name}.ipynb")
    PWNED.unlink(missing_ok=True)
    command = [sys.executable, "-m", "autograder.cli", "grade", str(source), *sorted(map(str, subs.glob("*.ipynb"))),
               "--out", str(out), "--jobs", "2", "--cell-timeout", str(CELL_TIMEOUT), "--timeout", "300",
               "--memory", "3", "--quiet"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout + run.stderr
    return out, subs, source, run.stdout


def results(out: Path, name: str) -> dict:
    return json.loads((out / name / "results.json").read_text())


@pytest.mark.parametrize("name", sorted(CLASS))
def test_each_submission_gets_what_its_honest_answers_earn(graded, name):
    out = graded[0]
    result = results(out, name)
    got = {t["extra_data"]["grade_id"]: t["score"] for t in result["tests"]}
    assert got == expected_scores(name), f"{name}: {json.dumps(result, indent=1)[:3000]}"
    assert result["score"] == sum(expected_scores(name).values())
    words = CLASS[name][4]
    if words:
        assert words in result["output"], result["output"]
    raw = (out / name / "results.json").read_text()
    assert "\\u001b" not in raw and "\\u0000" not in raw, "control characters reached results.json"
    feedback = (out / name / "feedback.html").read_text()
    assert str(hw.SECRET) not in json.dumps(result) and str(hw.SECRET) not in feedback
    assert "BEGIN HIDDEN" not in feedback and "checks.by_ratio" not in feedback


def test_results_follow_gradescopes_format(graded):
    result = results(graded[0], "student00_rrrrr")
    assert set(result) >= {"score", "execution_time", "output", "output_format", "test_output_format", "tests"}
    for test in result["tests"]:
        assert set(test) >= {"name", "number", "score", "max_score", "status", "output", "visibility"}
    assert [t["name"] for t in result["tests"]] == ["Task 1: element-wise add", "Task 2: double an array",
                                                    "Task 3: the number only the hidden test knows",
                                                    "Task 4: a faster matmul", "Task 5: square and cube, a point each"]
    assert [t["number"] for t in result["tests"]] == ["1", "2", "3", "4", "5"]
    assert result["score"] == hw.MAX_SCORE and {t["status"] for t in result["tests"]} == {"passed"}
    half = next(name for name in CLASS if name.startswith("student") and name.endswith("h"))
    powers = results(graded[0], half)["tests"][4]
    assert powers["status"] == "failed" and powers["output"] == "cube(x) is wrong", powers


def test_grades_csv_has_a_row_per_submission(graded):
    rows = list(csv.DictReader((graded[0] / "grades.csv").open()))
    assert len(rows) == len(CLASS) == 32
    for row in rows:
        assert float(row["total"]) == sum(expected_scores(row["submission"]).values())
        assert {k: float(row[k]) for k in ALL} == expected_scores(row["submission"])


def test_attacks_change_nothing_outside_their_sandbox(graded):
    out, subs, source, _ = graded
    assert source.exists() and (subs / "student00_rrrrr.ipynb").exists(), "a submission deleted a file"
    assert not (out / "results.json").exists() and not (out / "fake_results").exists()
    assert not PWNED.exists(), "a pickle payload, script text or planted file ran code in the grader"
    for planted in (Path("/etc/mlc-lab-pwned"), Path("/root/mlc-lab-pwned"), Path("/autograder/results")):
        assert not planted.exists(), f"{planted} was written from a sandbox"
    site = Path(sysconfig.get_paths()["purelib"])
    assert not (site / "zz_pwned.pth").exists()
    assert "pwned" not in (ROOT / "autograder" / "runner.py").read_text()
    leftovers = [pid for pid in os.listdir("/proc") if pid.isdigit() and _is_sandbox(pid)]
    assert not leftovers, f"processes of graded notebooks still run: {leftovers}"


def _is_sandbox(pid: str) -> bool:
    """A kernel (or its launcher) of a finished grading: its sandbox folder, named on its command
    line, was removed when its grading ended (other gradings on the machine still have theirs)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    paths = [Path(a) for a in args if "mlc-lab-sandboxes" in a and a.startswith("/")]   # bwrap's binds too
    return any(not path.exists() for path in paths)


def test_feedback_names_the_failed_check(graded):
    out = graded[0]
    wrong = next(name for name in CLASS if name.startswith("student") and name[-5:-1] == "wrrr")
    text = (out / wrong / "feedback.html").read_text()
    assert "differs from the reference" in text and "failed" in text
    assert "@T.prim_func" in text or "T.prim_func" in text      # the student's own IR is shown


def test_grading_again_skips_graded_submissions_unless_forced(graded):
    out, subs, source, _ = graded
    one = subs / "student00_rrrrr.ipynb"
    before = (out / "student00_rrrrr" / "results.json").stat().st_mtime
    run = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", str(source), str(one),
                          "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "graded 0 submission(s), 1 already graded" in run.stdout, run.stdout
    assert (out / "student00_rrrrr" / "results.json").stat().st_mtime == before


@pytest.mark.parametrize("name", ["hostile_oob_read_steals_answer", "hostile_oob_write"])
def test_out_of_bounds_programs_score_zero_naming_the_buffer(graded, name):
    """The program ran in the executor's sandbox, bounds-checked: the access is named, and the
    grading went on to the other tasks."""
    task = next(t for t in results(graded[0], name)["tests"] if t["extra_data"]["grade_id"] == "t1")
    buffer = "buffer A" if "read" in name else "buffer C"
    assert task["score"] == 0 and "out of bounds" in task["output"] and buffer in task["output"], task
