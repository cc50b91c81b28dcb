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
HW04_NO_LIMIT = _edited("hw04_auto_optimization", "task3-answer",
                        "        if limit and limit > 0 and tiles[-1] > limit:\n            continue\n", "")

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

# hw08 task 2: the tiles staged in the accelerator's memories, but never tensorized: loops compute them.
HW08_NOT_TENSORIZED = _edited("hw08_hardware_specialization", "task2-answer",
                              "    sch.tensorize(tile, ACCEL_MMA)\n", "")

# hw09 task 2: the quantizer rounds with np.round, halves to even (2.5 -> 2), not up.
HW09_ROUND_HALF_EVEN = _edited("hw09_todays_workloads", "task2-answer",
                               "np.floor(ratio + 0.5)", "np.round(ratio)")

# homework stem -> (the answer cell replaced, the half-right code put there, {test cell: the share
# of its points it earns}); every test cell not named earns all of its points.
HALF_RIGHT = {
    "hw02_tensor_programs": ("task4-answer", HW02_UNROLL_AFTER_DECOMPOSE, {"task4-structure": 0.5}),
    "hw03_end_to_end": ("task4-answer", HW03_UNSTABLE_SOFTMAX, {"task4-stable": 0}),
    "hw04_auto_optimization": ("task3-answer", HW04_NO_LIMIT, {"task3": 0}),
    "hw05_framework_integration": ("task5-answer", HW05_RELU_ONLY, {"task5-activations": 0}),
    "hw06_gpu": ("task4-answer", HW06_NO_PADDING, {"task4-banks": 0}),
    "hw07_graph_optimization": ("task2-answer", HW07_CHAINS_ONLY, {"task2-tail": 0}),
    "hw08_hardware_specialization": ("task2-answer", HW08_NOT_TENSORIZED, {"task2-intrin": 0}),
    "hw09_todays_workloads": ("task2-answer", HW09_ROUND_HALF_EVEN, {"task2-rounding": 0}),
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
# hw02 task 3: the kernel's window read transposed (K[f, c, j, i] for K[f, c, i, j]).
HW02_KERNEL_TRANSPOSED = _edited("hw02_tensor_programs", "task3-answer", "K[vf, vc, vi, vj]", "K[vf, vc, vj, vi]")
# hw02 task 5: the loops put in the textbook order i, j, k: right, but slower than MM_BASE's i, k, j.
HW02_TEXTBOOK_ORDER = """
sch_mm = tir.Schedule(MM_BASE)
i, k, j = sch_mm.get_loops(sch_mm.get_block("C"))
sch_mm.reorder(i, j, k)
fast_mm = sch_mm.mod
"""
# hw03 task 1: the bias added inside the sum, so it is counted once per k.
HW03_BIAS_IN_SUM = _edited("hw03_end_to_end", "task1-answer", "Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vk, vj]",
                           "Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vk, vj] + B[vj]")
# hw03 task 2: the right calls, but outside a dataflow block.
HW03_NO_DATAFLOW = _edited("hw03_end_to_end", "task2-answer", """        with R.dataflow():
            hidden = R.call_tir(cls.linear_relu, (x, w0, b0), out_sinfo=R.Tensor((BATCH, 32), "float32"))
            scores = R.call_tir(cls.linear1, (hidden, w1, b1), out_sinfo=R.Tensor((BATCH, 10), "float32"))
            R.output(scores)
""", """        hidden = R.call_tir(cls.linear_relu, (x, w0, b0), out_sinfo=R.Tensor((BATCH, 32), "float32"))
        scores = R.call_tir(cls.linear1, (hidden, w1, b1), out_sinfo=R.Tensor((BATCH, 10), "float32"))
""")
# hw03 task 3: the batch of the trained model's test images, whatever batch was asked for.
HW03_FIXED_BATCH = _edited("hw03_end_to_end", "task3-answer", "    n_in, n_hidden = w0.shape\n",
                           "    n_in, n_hidden = w0.shape\n    batch = BATCH\n")
# hw05 task 1: the sample variance (divided by n - 1), as np.var(ddof=1) gives.
HW05_SAMPLE_VARIANCE = _edited("hw05_framework_integration", "task1-answer", "square_sum[i] / cols + EPS",
                               "square_sum[i] / (cols - 1) + EPS")
# hw05 task 2: the branch returned without the residual connection.
HW05_NO_RESIDUAL = _edited("hw05_framework_integration", "task2-answer", "gv = bb.emit_output(out)",
                           "gv = bb.emit_output(branch)")
# hw05 task 3: the example's input size written in, not read from the weights.
HW05_FIXED_INPUTS = _edited("hw05_framework_integration", "task3-answer", '(batch, w0.shape[1])', "(batch, 3)")
# hw05 task 4: the normalization written with te: right numbers, but not the library's function.
HW05_OWN_NORMALIZE = _edited("hw05_framework_integration", "task4-answer", """            out = bb.emit(relax.op.call_dps_packed(
                "hw05.l2_normalize", [y], relax.TensorStructInfo((batch, dim), "float32")))""",
"""            def normalize(t):
                k = te.reduce_axis((0, dim), name="k")
                squares = te.compute((batch,), lambda i: te.sum(t[i, k] * t[i, k], axis=k), name="squares")
                return te.compute((batch, dim), lambda i, j: t[i, j] / te.sqrt(squares[i]), name="normalize")
            out = bb.emit_te(normalize, y)""")
# hw07 task 1: every transposed operand rewritten, whatever its rank and axes.
HW07_ANY_TRANSPOSE = _edited("hw07_graph_optimization", "task1-answer",
                             "weight.struct_info.ndim != 2 or producer.attrs.axes not in (None, (1, 0))", "False")
# hw07 task 3: the fusion passes alone, without task 1's rewrite.
HW07_NO_REWRITE = _edited("hw07_graph_optimization", "task3-answer", "mod = rewrite(mod)", "mod = mod")
# hw07 task 4: products fused without counting their uses.
HW07_UNCOUNTED = _edited("hw07_graph_optimization", "task4-answer",
                         "            if self.uses.get(product, 0) != 1:\n                continue\n", "")
# hw04 task 1: the j tiling written by hand; the i tiling sampled, so seeds still differ.
HW04_HAND_TILED_J = _edited("hw04_auto_optimization", "task1-answer",
                            "sch.split(j, factors=sch.sample_perfect_tile(j, n=2, max_innermost_factor=32))",
                            "sch.split(j, factors=[None, 32])")
# hw04 task 2: the three candidates tried while experimenting, whatever n_trials asks for.
HW04_THREE_TRIALS = _edited("hw04_auto_optimization", "task2-answer", "for t in range(n_trials)]", "for t in range(3)]")
# hw04 task 3: always the first tile step mutated (each child is a right one-factor move).
HW04_FIRST_STEP_ONLY = _edited("hw04_auto_optimization", "task3-answer",
                               "step = steps[int(rng.integers(len(steps)))]", "step = steps[0]")
# hw04 task 4: Pearson's correlation of the values themselves, not of their ranks.
HW04_PEARSON = _edited("hw04_auto_optimization", "task4-answer", "rx, ry = ranks(x), ranks(y)",
                       "rx, ry = np.asarray(x, dtype=float), np.asarray(y, dtype=float)")
# hw06 task 3: 8 x 8 tiles, so every element of A and B is read from global memory twice as often.
HW06_SMALL_TILES = _edited("hw06_gpu", "task3-answer", "def tile_matmul(mod, tile=16):",
                           "def tile_matmul(mod, tile=8):")
# hw06 task 1: 128 threads per block, not the 256 the task asks for.
HW06_128_THREADS = _edited("hw06_gpu", "task1-answer", "sch.split(i, [None, VEC_THREADS])",
                           "sch.split(i, [None, 128])")
# hw06 task 2: threadIdx.x given to the row index, so a warp's accesses span 8 rows.
HW06_ROWS_ON_X = _edited("hw06_gpu", "task2-answer",
                         '    sch.bind(i_thread, "threadIdx.y")\n    sch.bind(j_thread, "threadIdx.x")',
                         '    sch.bind(i_thread, "threadIdx.x")\n    sch.bind(j_thread, "threadIdx.y")')
# hw06 task 4: bound directly, no shared tile: the reads of A are strided.
HW06_NO_SHARED_TILE = '''
def transpose_tiled(mod, tile=32):
    sch = tir.Schedule(mod)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch.mod
'''
# hw06 task 5: the 4 x 4 tile per thread, but accumulated in C in global memory (no cache_write).
HW06_ACCUMULATE_IN_C = '''
def register_tile(mod, threads=16, tile=REG_TILE):
    sch = tir.Schedule(mod)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [None, threads, tile])
    j0, j1, j2 = sch.split(j, [None, threads, tile])
    sch.reorder(i0, j0, i1, j1, k, i2, j2)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch.mod
'''
# hw08 task 1: the right arithmetic, but on buffers in main memory, not in the accelerator's scopes.
HW08_DESC_WITHOUT_SCOPES = '''
@T.prim_func
def accel_mma_bt_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (8, 4), "float32", offset_factor=1)
    B = T.match_buffer(b, (8, 4), "float32", offset_factor=1)
    C = T.match_buffer(c, (8, 8), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:8, 0:8], A[0:8, 0:4], B[0:8, 0:4])
        T.writes(C[0:8, 0:8])
        for i, j, k in T.grid(8, 8, 4):
            with T.block(""):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''
# hw08 task 3: right numbers from one thread per element of C: the CUDA cores do all the work.
HW08_CUDA_CORES = '''
def wmma_matmul(mod):
    sch = tir.Schedule(mod)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1, k)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch.mod
'''
# hw09 task 1: the right numbers, but S + M and the exponentials stored as n x n buffers: not fused.
HW09_UNFUSED_SOFTMAX = '''
@T.prim_func
def masked_softmax(s: T.handle, m: T.handle, p: T.handle):
    T.func_attr({"global_symbol": "masked_softmax", "tir.noalias": True})
    n = T.int64()
    S = T.match_buffer(s, (n, n), "float32")
    M = T.match_buffer(m, (n, n), "float32")
    P = T.match_buffer(p, (n, n), "float32")
    X = T.alloc_buffer((n, n), "float32")
    E = T.alloc_buffer((n, n), "float32")
    row_max = T.alloc_buffer((n,), "float32")
    row_sum = T.alloc_buffer((n,), "float32")
    for i, j in T.grid(n, n):
        with T.block("add_mask"):
            vi, vj = T.axis.remap("SS", [i, j])
            X[vi, vj] = S[vi, vj] + M[vi, vj]
    for i, j in T.grid(n, n):
        with T.block("row_max"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                row_max[vi] = T.float32(-3.4e38)
            row_max[vi] = T.max(row_max[vi], X[vi, vj])
    for i, j in T.grid(n, n):
        with T.block("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            E[vi, vj] = T.exp(X[vi, vj] - row_max[vi])
    for i, j in T.grid(n, n):
        with T.block("row_sum"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                row_sum[vi] = T.float32(0)
            row_sum[vi] = row_sum[vi] + E[vi, vj]
    for i, j in T.grid(n, n):
        with T.block("normalize"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = E[vi, vj] / row_sum[vi]
'''
# hw09 task 3: the caches are appended, but the new query attends to its own value only.
HW09_FORGETS_CACHE = _edited("hw09_todays_workloads", "task3-answer",
                             "logits = (x + weights @ v_cache) @ HEAD[\"w_out\"]",
                             "logits = (x + v) @ HEAD[\"w_out\"]")
# -- answers that try to pass without doing the task: each must lose the tests named --------------
# hw09 task 2: the library's symmetric quantizer, its q shifted into 0..255 (so q * scale + low is right).
HW09_LIBRARY_QUANTIZER = '''
from mlc_lab.topi.quantize import quantize


def quantize_asym(w, group_size):
    q, scale = quantize(w, bits=8, group_size=group_size)
    return (q.astype("int16") + 127).astype("uint8"), scale, (-127 * scale).astype("float32")


def dequantize_asym(q, scale, low):
    group_size = q.shape[0] // scale.shape[0]
    return (q.astype("float32") * np.repeat(scale, group_size, axis=0)
            + np.repeat(low, group_size, axis=0)).astype("float32")
'''
# hw09 task 3: the text read back from the caches (the token whose key matches each row), then every
# position recomputed with the setup's logits_without_cache: right on real caches, blind to others.
HW09_RECOMPUTES_TEXT = '''
def decode_step(token, position, k_cache, v_cache):
    text = [min(range(VOCAB), key=lambda t: float(np.abs(key_value(t, j)[0] - k_cache[j]).sum()))
            for j in range(position)]
    k, v = key_value(token, position)
    return (logits_without_cache(text + [token])[-1], np.vstack([k_cache, k]).astype("float32"),
            np.vstack([v_cache, v]).astype("float32"))
'''
GAMED = {"hw09_todays_workloads": {"task2-answer": (HW09_LIBRARY_QUANTIZER, ["task2", "task2-rounding"]),
                                   "task3-answer": (HW09_RECOMPUTES_TEXT, ["task3"])}}

# homework stem -> {answer cell: (the wrong code put there, the test cells that then earn 0)}; the
# answers of one homework are replaced together, and the other tests of those tasks earn all
# their points (the answer is wrong in that one way only).
WRONG = {
    "hw02_tensor_programs": {"task1-answer": (HW02_NO_BLOCK, ["task1"]),
                             "task2-answer": (HW02_NO_INTERMEDIATE, ["task2"]),
                             "task3-answer": (HW02_KERNEL_TRANSPOSED, ["task3"]),
                             "task5-answer": (HW02_TEXTBOOK_ORDER, ["task5-speed"])},
    "hw03_end_to_end": {"task1-answer": (HW03_BIAS_IN_SUM, ["task1"]),
                        "task2-answer": (HW03_NO_DATAFLOW, ["task2-calls"]),
                        "task3-answer": (HW03_FIXED_BATCH, ["task3"])},
    "hw05_framework_integration": {"task1-answer": (HW05_SAMPLE_VARIANCE, ["task1"]),
                                   "task2-answer": (HW05_NO_RESIDUAL, ["task2"]),
                                   "task3-answer": (HW05_FIXED_INPUTS, ["task3-shapes"]),
                                   "task4-answer": (HW05_OWN_NORMALIZE, ["task4-library"])},
    "hw07_graph_optimization": {"task1-answer": (HW07_ANY_TRANSPOSE, ["task1-rules"]),
                                "task3-answer": (HW07_NO_REWRITE, ["task3-dense"]),
                                "task4-answer": (HW07_UNCOUNTED, ["task4-rules"])},
    "hw04_auto_optimization": {"task1-answer": (HW04_HAND_TILED_J, ["task1"]),
                               "task2-answer": (HW04_THREE_TRIALS, ["task2"]),
                               "task3-answer": (HW04_FIRST_STEP_ONLY, ["task3-spread"]),
                               "task4-answer": (HW04_PEARSON, ["task4"])},
    "hw08_hardware_specialization": {"task1-answer": (HW08_DESC_WITHOUT_SCOPES, ["task1"]),
                                     "task3-answer": (HW08_CUDA_CORES, ["task3-tensor"])},
    "hw09_todays_workloads": {"task1-answer": (HW09_UNFUSED_SOFTMAX, ["task1-fused"]),
                              "task3-answer": (HW09_FORGETS_CACHE, ["task3"])},
    "hw06_gpu": {"task1-answer": (HW06_128_THREADS, ["task1"]),
                 "task2-answer": (HW06_ROWS_ON_X, ["task2-coalesced"]),
                 "task3-answer": (HW06_SMALL_TILES, ["task3", "task3-banks"]),
                 "task4-answer": (HW06_NO_SHARED_TILE, ["task4", "task4-banks"]),
                 "task5-answer": (HW06_ACCUMULATE_IN_C, ["task5", "task5-reuse"])},
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
    assert [p.name[2:4] for p in SOURCES] == ["02", "03", "04", "05", "06", "07", "08", "09"]
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
def test_every_task_has_a_documented_wrong_answer(source):
    """One plausible wrong answer per task (WRONG, or the half-right case), each an edit that still
    applies to the source's answer and names tests the source has."""
    nb = notebook.read(source)
    tests = {t.grade_id for t in notebook.tasks(nb)}
    wrong = WRONG.get(source.stem, {})
    covered = {answer.split("-")[0] for answer in [*wrong, HALF_RIGHT[source.stem][0]]}
    assert covered == {test.split("-")[0] for test in tests}
    for answer, (code, losing) in [*wrong.items(), *GAMED.get(source.stem, {}).items()]:
        assert code.strip() and code.strip() != _solution(source.stem, answer).strip(), \
            f"the wrong answer for {answer} no longer applies to the source"
        assert losing and set(losing) <= tests and {t.split("-")[0] for t in losing} == {answer.split("-")[0]}


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
    wrong, gamed = WRONG.get(source.stem, {}), GAMED.get(source.stem, {})
    for name, answers in (("wrong", wrong), ("gamed", gamed)):
        if answers:
            nbformat.write(replaced(source, {g: code for g, (code, _) in answers.items()}), str(folder / f"{name}.ipynb"))
    results = {r["name"]: r for r in grade_many(source, sorted(folder.glob("*.ipynb")), tmp_path / "out", jobs=2,
                                                progress_bar=False)}
    full = results["solved"]
    failed = [(t["name"], t["output"]) for t in full["tests"] if t["score"] < t["max_score"]]
    assert not failed and full["score"] == full["max_score"] > 0, failed
    zero = results["blank"]
    assert zero["score"] == 0 and zero["output"] == "the notebook ran to the end", zero["output"]
    questions = notebook.questions(notebook.read(source))      # written answers reach the TA
    assert [q["grade_id"] for q in full["questions"]] == [q.grade_id for q in questions]
    assert all(q["answer"].strip() and "YOUR ANSWER HERE" not in q["answer"] for q in full["questions"])
    assert all(q["answer"].strip() == "YOUR ANSWER HERE" for q in zero["questions"])
    assert all(t["output"] != "passed" for t in zero["tests"])

    partly = results["half_right"]
    assert partly["output"] == "the notebook ran to the end", partly["output"]
    shares = HALF_RIGHT[source.stem][2]
    got = {t["grade_id"]: t["score"] for t in partly["tests"]}
    want = {t["grade_id"]: t["max_score"] * shares.get(t["grade_id"], 1) for t in partly["tests"]}
    outputs = {t["grade_id"]: t["output"] for t in partly["tests"] if got[t["grade_id"]] != want[t["grade_id"]]}
    assert got == pytest.approx(want), outputs
    for name, answers in (("wrong", wrong), ("gamed", gamed)):
        if answers:     # each answer loses its tests, and only those of its task
            _assert_loses_only(results[name], answers, source)


def _assert_loses_only(result: dict, answers: dict, source: Path) -> None:
    """The graded ``result`` of the source with ``answers`` (grade_id -> (code, losing tests)) in
    place: the tests named earn 0, the other tests of those tasks all their points."""
    losing = {test for _, tests in answers.values() for test in tests}
    tasks = {answer.split("-")[0] for answer in answers}
    # a timed test's share follows the machine's load (the solved notebook earns it in full)
    timed = {t.grade_id for t in notebook.tasks(notebook.read(source)) if "checks.speedup(" in t.source}
    tests = [t for t in result["tests"] if t["grade_id"].split("-")[0] in tasks
             and (t["grade_id"] in losing or t["grade_id"] not in timed)]
    got = {t["grade_id"]: t["score"] for t in tests}
    want = {t["grade_id"]: 0 if t["grade_id"] in losing else t["max_score"] for t in tests}
    assert got == want, {t["grade_id"]: t["output"] for t in tests}
