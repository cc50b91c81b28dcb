"""The homework in exercises/: each student version is what ``mlc-lab assign`` makes of its
instructor source, and the real grader gives the source (every solution in place) full marks and
the student version (every solution a stub) zero, without a crash. Partial credit: one
half-right answer per homework loses exactly the tests its text says it does."""
import ast
import re
from pathlib import Path

import nbformat
import pytest

from autograder import notebook
from autograder.batch import grade_many

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "exercises" / "instructor").glob("hw*.ipynb"))
pytestmark = pytest.mark.notebook


def _solution(stem: str, grade_id: str) -> str:
    """The code between the solution markers of answer cell ``grade_id`` of a source."""
    nb = notebook.read(REPO / "exercises" / "instructor" / f"{stem}.ipynb")
    text = nb.cells[notebook.cells_by_grade_id(nb)[grade_id]].source
    return text.split(notebook.BEGIN_SOLUTION + "\n", 1)[1].split(notebook.END_SOLUTION, 1)[0]


def _edited(stem: str, grade_id: str, old: str, new: str) -> str:
    """The source's answer in ``grade_id`` with the one occurrence of ``old`` replaced by ``new``
    ("" where the answer no longer holds ``old`` once; a test below then says so)."""
    text = _solution(stem, grade_id)
    return text.replace(old, new) if text.count(old) == 1 else ""


# -- half-right answers, each in place of one answer cell of the source --------------------------
# hw02 task 4: `unroll` after `decompose_reduction` reaches Y_update's loops, not Y_init's.
HW02_UNROLL_AFTER_DECOMPOSE = '''
sch = tir.Schedule(ORIGINAL)
block_y = sch.get_block("Y")
i, j, k = sch.get_loops(block_y)
i0, i1 = sch.split(i, factors=[None, 4])
j0, j1 = sch.split(j, factors=[None, 8])
sch.reorder(i0, j0, k, i1, j1)
block_c = sch.get_block("C")
sch.reverse_compute_at(block_c, j0)
sch.parallel(i0)
sch.vectorize(j1)
sch.vectorize(sch.get_loops(block_c)[-1])
sch.decompose_reduction(block_y, k)
sch.unroll(i1)
'''

# hw03 task 4: a softmax that does not subtract the row maximum (exp overflows on large scores).
HW03_UNSTABLE_SOFTMAX = _edited("hw03_end_to_end", "task4-answer",
                                "T.exp(S[vi, vj] - M[vi])", "T.exp(S[vi, vj])")

# hw04 task 4: the model's best-scored candidates, measured ones and repeats not left out.
HW04_NO_DEDUPLICATION = '''
def choose_batch(measured, seconds, candidates, k: int) -> list:
    model = ms.GBDTModel(seed=0)
    model.update(list(measured), [math.inf if s is None else float(s) for s in seconds])
    scores = model.predict(list(candidates))
    return sorted(range(len(candidates)), key=lambda i: -scores[i])[:k]
'''

# hw05 task 5: a frontend that knows linear and ReLU layers only.
HW05_RELU_ONLY = '''
def from_description(layers: list, input_shape: list):
    x = tensor_var("x", tuple(input_shape))
    params = []
    for n, layer in enumerate(layers):
        if layer["op"] == "linear":
            params += [tensor_var(f"w{n}", (layer["out"], layer["in"])),
                       tensor_var(f"b{n}", (layer["out"],))]
    bb = relax.BlockBuilder()
    with bb.function("main", [x] + params):
        with bb.dataflow():
            value, weights = x, iter(params)
            for n, layer in enumerate(layers):
                if layer["op"] == "linear":
                    value = bb.emit_te(topi.dense, value, next(weights), next(weights),
                                       primfunc_name_hint=f"linear{n}")
                elif layer["op"] == "relu":
                    value = bb.emit_te(topi.relu, value, primfunc_name_hint=f"relu{n}")
                else:
                    raise NotImplementedError(f"layer {layer['op']!r}")
            gv = bb.emit_output(value)
        bb.emit_func_output(gv)
    return bb.get()
'''

# hw06 task 4: the transpose through a shared tile, coalesced both ways, but without padding.
HW06_NO_PADDING = '''
def transpose_tiled(mod, tile=32):
    sch = tir.Schedule(mod)
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, j0)
    rows, cols = sch.get_loops(shared)[-2:]
    sch.bind(rows, "threadIdx.y")
    sch.bind(cols, "threadIdx.x")
    return sch.mod
'''

# hw07 task 2: the matmul -> add -> relu chains fused, the last layer's matmul -> add not.
HW07_CHAINS_ONLY = _edited("hw07_graph_optimization", "task2-answer",
                           "    mod = LinearFusor(mod, with_relu=True).transform()\n"
                           "    return LinearFusor(mod, with_relu=False).transform()",
                           "    return LinearFusor(mod, with_relu=True).transform()")

# homework stem -> (the answer cell replaced, the half-right code put there, {test cell: the share
# of its points it earns}); every test cell not named earns all of its points.
HALF_RIGHT = {
    "hw02_tensor_programs": ("task4-answer", HW02_UNROLL_AFTER_DECOMPOSE, {"task4-structure": 0.5}),
    "hw03_end_to_end": ("task4-answer", HW03_UNSTABLE_SOFTMAX, {"task4-stable": 0}),
    "hw04_auto_optimization": ("task4-answer", HW04_NO_DEDUPLICATION, {"task4-unmeasured": 0}),
    "hw05_framework_integration": ("task5-answer", HW05_RELU_ONLY, {"task5-activations": 0}),
    "hw06_gpu": ("task4-answer", HW06_NO_PADDING, {"task4-banks": 0}),
    "hw07_graph_optimization": ("task2-answer", HW07_CHAINS_ONLY, {"task2-tail": 0}),
}


# -- plausible wrong answers that earlier checks let through: each must lose its task's points -----
# hw02 task 1: the stores without a block (no axes at all, so "no reduce axis" held vacuously).
HW02_NO_BLOCK = '''
@T.prim_func
def bias_add(A: T.Buffer((2, 8, 16), "float32"), B: T.Buffer((8,), "float32"),
             C: T.Buffer((2, 8, 16), "float32")):
    T.func_attr({"global_symbol": "bias_add", "tir.noalias": True})
    for n, c, w in T.grid(2, 8, 16):
        C[n, c, w] = A[n, c, w] + B[c]
'''
# hw02 task 2: the product accumulated in C itself, the ReLU applied in place: no intermediate.
HW02_NO_INTERMEDIATE = '''
@I.ir_module
class BatchMatmulReLU:
    @T.prim_func
    def bmm_relu(A: T.Buffer((4, 16, 32), "float32"), B: T.Buffer((4, 32, 24), "float32"),
                 C: T.Buffer((4, 16, 24), "float32")):
        T.func_attr({"global_symbol": "bmm_relu", "tir.noalias": True})
        for b, i, j, k in T.grid(4, 16, 24, 32):
            with T.block("Y"):
                vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
                with T.init():
                    C[vb, vi, vj] = T.float32(0)
                C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vb, vk, vj]
        for b, i, j in T.grid(4, 16, 24):
            with T.block("C"):
                vb, vi, vj = T.axis.remap("SSS", [b, i, j])
                C[vb, vi, vj] = T.max(C[vb, vi, vj], T.float32(0))
'''
# hw04 task 1: the j tiling written by hand; the i tiling sampled, so seeds still differ.
HW04_HAND_TILED_J = _edited("hw04_auto_optimization", "task1-answer",
                            "sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=32))",
                            "sch.split(j, factors=[None, 32])")
# hw06 task 3: 8 x 8 tiles, so every element of A and B is read from global memory twice as often.
HW06_SMALL_TILES = _edited("hw06_gpu", "task3-answer", "def tile_matmul(mod, tile=16):",
                           "def tile_matmul(mod, tile=8):")
# homework stem -> {answer cell: (the wrong code put there, the test cells that then earn 0)}; the
# answers of one homework are replaced together, and the other tests of those tasks earn all
# their points (the answer is wrong in that one way only).
WRONG = {
    "hw02_tensor_programs": {"task1-answer": (HW02_NO_BLOCK, ["task1"]),
                             "task2-answer": (HW02_NO_INTERMEDIATE, ["task2"])},
    "hw04_auto_optimization": {"task1-answer": (HW04_HAND_TILED_J, ["task1"])},
    "hw06_gpu": {"task3-answer": (HW06_SMALL_TILES, ["task3", "task3-banks"])},
}


def replaced(source: Path, answers: dict) -> nbformat.NotebookNode:
    """The source with the answer cells in ``answers`` (grade_id -> code) replaced: the rest of
    the solutions in place."""
    nb = notebook.read(source)
    for grade_id, code in answers.items():
        cell = nb.cells[notebook.cells_by_grade_id(nb)[grade_id]]
        before, rest = cell.source.split(notebook.BEGIN_SOLUTION, 1)
        after = rest.split(notebook.END_SOLUTION, 1)[1]
        cell.source = f"{before}{notebook.BEGIN_SOLUTION}\n{code.strip()}\n{notebook.END_SOLUTION}{after}"
    return nb


def half_right(source: Path) -> nbformat.NotebookNode:
    """The source with the answer cell of HALF_RIGHT replaced."""
    grade_id, code, _ = HALF_RIGHT[source.stem]
    return replaced(source, {grade_id: code})


def test_every_chapter_from_02_has_homework():
    assert [p.name[2:4] for p in SOURCES] == ["02", "03", "04", "05", "06", "07"]
    assert sorted(HALF_RIGHT) == [p.stem for p in SOURCES]


RUNS_PROGRAMS = re.compile(r"\b(mlc_lab\.build|relax\.build|VirtualMachine|time_evaluator|\.simulate)\(")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_tests_run_student_programs_only_through_checks(source):
    """A test cell builds and runs the student's IR only through ``checks`` (which in the grader
    sends it to the sandboxed executor): never itself, nor through a setup function that does,
    which would run it beside the expected values."""
    nb = notebook.read(source)
    setup = "\n".join(notebook.setup_code(nb))
    runners = {node.name for node in ast.walk(ast.parse(setup)) if isinstance(node, ast.FunctionDef)
               and RUNS_PROGRAMS.search(ast.get_source_segment(setup, node) or "")}
    for task in notebook.tasks(nb):
        used = RUNS_PROGRAMS.findall(task.source) + [f for f in runners if re.search(rf"\b{f}\(", task.source)]
        assert not used, f"{task.grade_id} runs programs itself: {used}"


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
def test_half_right_case_names_an_answer_and_tests_of_the_source(source):
    grade_id, code, shares = HALF_RIGHT[source.stem]
    nb = notebook.read(source)
    assert notebook.meta(nb.cells[notebook.cells_by_grade_id(nb)[grade_id]]).get("solution"), grade_id
    assert code.strip(), f"the half-right edit of {grade_id} no longer applies to the source's answer"
    assert code.strip() != _solution(source.stem, grade_id).strip()
    assert set(shares) <= {t.grade_id for t in notebook.tasks(nb)}, shares
    assert shares and all(0 <= share < 1 for share in shares.values()), shares
    edited = half_right(source)
    changed = [i for i, (a, b) in enumerate(zip(nb.cells, edited.cells)) if a.source != b.source]
    assert changed == [notebook.cells_by_grade_id(nb)[grade_id]]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_grader_gives_solutions_full_marks_stubs_zero_and_half_right_what_the_text_says(source, tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    solved, blank, half = folder / "solved.ipynb", folder / "blank.ipynb", folder / "half_right.ipynb"
    solved.write_bytes(source.read_bytes())
    blank.write_bytes((REPO / "exercises" / source.name).read_bytes())
    nbformat.write(half_right(source), str(half))
    wrong = WRONG.get(source.stem, {})
    if wrong:
        nbformat.write(replaced(source, {g: code for g, (code, _) in wrong.items()}), str(folder / "wrong.ipynb"))
    results = {r["name"]: r for r in grade_many(source, sorted(folder.glob("*.ipynb")), tmp_path / "out", jobs=2,
                                                progress_bar=False)}
    full = results["solved"]
    failed = [(t["name"], t["output"]) for t in full["tests"] if t["score"] < t["max_score"]]
    assert not failed and full["score"] == full["max_score"] > 0, failed
    zero = results["blank"]
    assert zero["score"] == 0 and zero["output"] == "the notebook ran to the end", zero["output"]
    assert all(t["output"] != "passed" for t in zero["tests"])

    partly = results["half_right"]
    assert partly["output"] == "the notebook ran to the end", partly["output"]
    shares = HALF_RIGHT[source.stem][2]
    got = {t["grade_id"]: t["score"] for t in partly["tests"]}
    want = {t["grade_id"]: t["max_score"] * shares.get(t["grade_id"], 1) for t in partly["tests"]}
    outputs = {t["grade_id"]: t["output"] for t in partly["tests"] if got[t["grade_id"]] != want[t["grade_id"]]}
    assert got == pytest.approx(want), outputs
    if wrong:     # each wrong answer loses its tests, and only those of its task
        losing = {test for _, tests in wrong.values() for test in tests}
        tasks = {answer.split("-")[0] for answer in wrong}
        tests = [t for t in results["wrong"]["tests"] if t["grade_id"].split("-")[0] in tasks]
        got = {t["grade_id"]: t["score"] for t in tests}
        want = {t["grade_id"]: 0 if t["grade_id"] in losing else t["max_score"] for t in tests}
        assert got == want, {t["grade_id"]: t["output"] for t in tests}
