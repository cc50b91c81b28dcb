"""A small homework for the autograder's tests: five tasks of the kinds the real homework uses
(IR checked numerically, a function called on unseen inputs, a value only the hidden tests know,
a schedule timed against a reference, two functions worth a point each: partial credit that does
not depend on timing), and submissions made from it by editing its cells."""
from __future__ import annotations

import nbformat as nbf

SECRET = 48151623
SETUP = """import numpy as np
from mlc_lab import tir
from mlc_lab.script import ir as I, tir as T
from autograder import checks, submission

@T.prim_func
def naive_mm(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
             C: T.Buffer((128, 128), "float32")):
    for i, j, k in T.grid(128, 128, 128):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""
ADD = """@T.prim_func
def add(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vi, vj]"""
DOUBLE = "def double(x):\n    return x * 2"
ANSWER = f"answer = {SECRET}"
SCHEDULE = """sch = tir.Schedule(naive_mm)
i, j, k = sch.get_loops(sch.get_block("C"))
sch.reorder(i, k, j)
j0, j1 = sch.split(j, factors=[None, 8])
sch.vectorize(j1)"""
POWERS = "def square(x):\n    return x ** 2\n\ndef cube(x):\n    return x ** 3"
POWERS_HALF = POWERS.replace("x ** 3", "x * 3")     # square right, cube wrong: 1 of task 5's 2 points

ANSWERS = {"add": ADD, "double": DOUBLE, "answer": ANSWER, "schedule": SCHEDULE, "powers": POWERS}
TESTS = {
    "add": ("t1", 2, """# Task 1: element-wise add
checks.numerics(submission.ir("add"), lambda a, b: a + b)
### BEGIN HIDDEN TESTS
checks.numerics(submission.ir("add"), lambda a, b: a + b, trials=3)
### END HIDDEN TESTS"""),
    "double": ("t2", 1, """# Task 2: double an array
assert np.allclose(submission.call("double", np.arange(5.0)), np.arange(5.0) * 2), "double(x) is not 2x"
### BEGIN HIDDEN TESTS
x = np.random.default_rng().standard_normal(7)
checks.compare(submission.call("double", x), 2 * x, "double(x)")
### END HIDDEN TESTS"""),
    "answer": ("t3", 1, f"""# Task 3: the number only the hidden test knows
assert isinstance(submission.value("answer"), int), "answer should be an int"
### BEGIN HIDDEN TESTS
assert submission.value("answer") == {SECRET}
### END HIDDEN TESTS"""),
    "schedule": ("t4", 1, """# Task 4: a faster matmul
fast = checks.replays(submission.schedule("sch"), naive_mm)
checks.numerics(fast, lambda a, b: a @ b, rtol=1e-3, atol=1e-3)
### BEGIN HIDDEN TESTS
checks.by_ratio(checks.speedup(fast, naive_mm), full=2.0, what="speedup over naive_mm", points=1)
### END HIDDEN TESTS"""),
    "powers": ("t5", 2, """# Task 5: square and cube, a point each
x = np.random.default_rng().standard_normal(6)
wrong = [f for f, p in (("square", 2), ("cube", 3)) if not np.allclose(submission.call(f, x), x ** p)]
if len(wrong) == 2:
    checks.fail("square(x) and cube(x) are both wrong")
checks.partial(1 - len(wrong) / 2, 2, f"{wrong[0]}(x) is wrong" if wrong else "")"""),
}
MAX_SCORE = sum(points for _, points, _ in TESTS.values())


def _meta(**extra) -> dict:
    return {"nbgrader": {"schema_version": 3, "locked": True, "solution": False, "grade": False, **extra}}


def source(answers: dict | None = None, extra: dict | None = None) -> nbf.NotebookNode:
    """The homework with ``answers`` (task -> code; the solutions by default) in the solution
    cells, and ``extra`` cells (position key -> code) inserted: "start" after the setup cell,
    "before:<task>" before a task's answer cell, "end" at the end."""
    answers = {**ANSWERS, **(answers or {})}
    extra = extra or {}
    cells = [nbf.v4.new_markdown_cell("# A small homework"),
             nbf.v4.new_code_cell(SETUP, metadata={**_meta(grade_id="setup"), "autograder": {"setup": True}})]
    if "start" in extra:
        cells.append(nbf.v4.new_code_cell(extra["start"]))
    for task, (grade_id, points, test) in TESTS.items():
        if f"before:{task}" in extra:
            cells.append(nbf.v4.new_code_cell(extra[f"before:{task}"]))
        cells.append(nbf.v4.new_code_cell(f"### BEGIN SOLUTION\n{answers[task]}\n### END SOLUTION",
                                          metadata=_meta(grade_id=f"{grade_id}-answer", solution=True,
                                                         locked=False)))
        cells.append(nbf.v4.new_code_cell(test, metadata=_meta(grade_id=grade_id, grade=True, points=points)))
    if "end" in extra:
        cells.append(nbf.v4.new_code_cell(extra["end"]))
    nb = nbf.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write(nb, path) -> None:
    nbf.write(nb, str(path))


def student(answers: dict | None = None, extra: dict | None = None, blank=()) -> nbf.NotebookNode:
    """A student's submission: the released version with ``answers`` written into its solution
    cells (the tasks in ``blank`` left as released, raising NotImplementedError)."""
    from autograder.notebook import BEGIN_SOLUTION, END_SOLUTION, release
    filled = source(answers, extra)
    released = release(filled)
    for mine, theirs in zip(released.cells, filled.cells):
        grade_id = mine.metadata.get("nbgrader", {}).get("grade_id", "")
        if mine.metadata.get("nbgrader", {}).get("solution") and grade_id[:2] not in blank:
            mine.source = "\n".join(line for line in theirs.source.splitlines()
                                    if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION))
    return released
