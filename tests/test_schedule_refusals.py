"""Schedules the reference compiler refuses, refused here too: each test is named after its rule,
checks the error class, that the message names the culprit, and that the function is unchanged."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import errors
from schedule_checks import unchanged_after


@T.prim_func
def squares_sum(A: T.Buffer((16,), "float32"), B: T.Buffer((1,), "float32")):
    for k in range(5):
        with T.block("B"):
            vk = T.axis.reduce(16, T.floordiv(k * k, 2))
            with T.init():
                B[0] = T.float32(0)
            B[0] = B[0] + A[vk]


@T.prim_func
def squares_row_sum(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 5):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(16, T.floordiv(k * k, 2))
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def strided(A: T.Buffer((8, 128), "float32"), B: T.Buffer((8, 128), "float32")):
    for i, l in T.grid(8, 8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            vl = T.axis.spatial(128, l * 16)
            B[vi, vl] = A[vi, vl]


@T.prim_func
def masked(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for i, j in T.grid(8, 16):
        with T.block("B"):
            T.where(i * 16 + j < 100)
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]


@T.prim_func
def copy(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]


@T.prim_func
def triangle(A: T.Buffer((8, 8), "float32")):
    for i in range(8):
        for j in range(i + 1):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(1)


def test_rfactor_needs_quasi_affine_bindings():
    """vk = (k * k) // 2 visits vk = 0 twice: regrouping by k would change the sum."""
    sch = tir.Schedule(squares_sum)
    (k,) = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: sch.rfactor(k, 0), errors.NotAffineBindingError,
                    "vk = k * k // 2 is not quasi-affine")
    assert issubclass(errors.NotAffineBindingError, errors.RFactorError)


@pytest.mark.parametrize("kind", ["parallel", "vectorize"])
def test_loops_over_a_reduction_need_affine_bindings(kind):
    """Loop i feeds only the spatial vi, but the block reduces over vk = (k * k) // 2: not a
    reduction block in the reference compiler's sense, so i is not parallelised."""
    sch = tir.Schedule(squares_row_sum)
    i, _ = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: getattr(sch, kind)(i), errors.NotAffineBindingError,
                    'reduction block "B" under loop i', "vk = k * k // 2 is not quasi-affine")


@T.prim_func
def parallel_row_sum(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in T.parallel(16):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]


def test_rfactor_needs_serial_reduction_loops():
    sch = tir.Schedule(parallel_row_sum)
    _, k = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: sch.rfactor(k, 0), errors.NotSerialLoopError, "loop k", "is parallel, not serial")


@pytest.mark.parametrize("loops, why", [(("l", "i"), "vl = l * 16 skips values"),
                                        (("j", "i"), "bounds none of its bindings")])
def test_reorder_needs_affine_bindings(loops, why):
    func = strided if loops[0] == "l" else masked
    sch = tir.Schedule(func)
    named = dict(zip(("i", loops[0]), sch.get_loops(sch.get_block("B"))))
    unchanged_after(sch, lambda: sch.reorder(named[loops[0]], named["i"]), errors.NotAffineBindingError, why)


def test_parallel_accepts_split_and_fused_bindings():
    """(i_j_fused // 16, i_j_fused % 16) is quasi-affine: parallel keeps working after fuse."""
    sch = tir.Schedule(copy)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    outer, _ = sch.split(fused, [None, 8])
    sch.parallel(outer)
    assert "T.parallel(16)" in sch.mod["main"].script()


def test_split_refuses_a_thread_bound_loop():
    sch = tir.Schedule(copy)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "threadIdx.x")
    unchanged_after(sch, lambda: sch.split(i, [2, 4]), errors.ThreadBoundLoopError,
                    "bound to threadIdx.x; split loops before")


@pytest.mark.parametrize("primitive", ["split", "fuse"])
def test_split_and_fuse_refuse_an_annotated_loop(primitive):
    sch = tir.Schedule(copy)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    action = (lambda: sch.split(i, [2, 4])) if primitive == "split" else (lambda: sch.fuse(i, j))
    unchanged_after(sch, action, errors.AnnotatedLoopError, "'pragma_auto_unroll_max_step'")
    sch.unannotate(i, "pragma_auto_unroll_max_step")
    sch.fuse(i, j)


def test_fuse_refuses_loops_whose_extents_depend_on_each_other():
    sch = tir.Schedule(triangle)
    i, j = sch.get_loops(sch.get_block("A"))
    unchanged_after(sch, lambda: sch.fuse(i, j), errors.DependentLoopError,
                    "extent i + 1 of loop j depends on loop i")


@T.prim_func
def product_row_sum(A: T.Buffer((12, 20), "int32"), B: T.Buffer((12, 20), "int32"),
                    R: T.Buffer((12,), "int32")):
    P = T.alloc_buffer((12, 20), dtype="int32")
    for i, j in T.grid(12, 20):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = A[vi, vj] * B[vi, vj]
    for i, j in T.grid(12, 20):
        with T.block("R"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                R[vi] = 0
            R[vi] = R[vi] + P[vi, vj]


def test_reverse_compute_at_keeps_reduce_iterators_off_parallel_loops():
    """The row sum moved under P's parallel column loop would update R[i] from every column at
    once (a race that gave wrong sums in most runs on two cores)."""
    sch = tir.Schedule(product_row_sum)
    i, j = sch.get_loops(sch.get_block("P"))
    sch.parallel(j)
    sch.reorder(j, i)
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("R"), j, preserve_unit_loops=True),
                    errors.WrongBlockIterTypeError, "loop j is parallel", "reduce iterator vj")
    serial = tir.Schedule(product_row_sum)          # the same move with j serial is fine
    i, j = serial.get_loops(serial.get_block("P"))
    serial.reorder(j, i)
    serial.reverse_compute_at(serial.get_block("R"), j, preserve_unit_loops=True)


def test_transform_layout_without_pad_value_may_not_pad():
    """j in [0, 16) sent to (j // 3, j % 3) reaches 16 of the 18 places of the new (6, 3) axes;
    the others would be padding that nothing writes (a cache_write after such a map copied them
    back as if they held values)."""
    sch = tir.Schedule(copy)
    unchanged_after(sch, lambda: sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i, j // 3, j % 3)),
                    errors.TransformationPaddingError, "sends the 128 elements of parameter B to 144 places",
                    "the 16 others would be padding")
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i, j // 4, j % 4))   # fills (8, 4, 4)


@T.prim_func
def two_writers(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(4):
        with T.block("B_low"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
    for i in range(4):
        with T.block("B_high"):
            vi = T.axis.spatial(8, i + 4)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.float32(1)


def test_cache_read_needs_a_single_writer():
    sch = tir.Schedule(two_writers)
    unchanged_after(sch, lambda: sch.cache_read(sch.get_block("C"), 0, "shared"), errors.NotSingleWriterError,
                    "buffer B is written by 'B_low', 'B_high'")


@T.prim_func
def half_written(A: T.Buffer((8, 8), "float32"), D: T.Buffer((16,), "float32")):
    C = T.alloc_buffer((16,))
    for i, k in T.grid(8, 8):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
    for i in range(16):
        with T.block("D"):
            vi = T.axis.spatial(16, i)
            D[vi] = C[vi]


def test_rfactor_needs_a_stage_pipeline():
    """C writes 8 of the 16 elements D reads."""
    sch = tir.Schedule(half_written)
    _, k = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.rfactor(k, 0), errors.NotStagePipelineError,
                    'block "D" reads more of buffer C than block "C" writes')


def test_an_allocated_buffer_may_be_padded():
    """P (12, 20) laid out as (12, 7, 3): one unused place per row, which nothing reads (the
    classic extra column against bank conflicts is this case)."""
    sch = tir.Schedule(product_row_sum)
    sch.transform_layout(sch.get_block("P"), "P", lambda i, j: (i, j // 3, j % 3))
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-9, 9, (12, 20)).astype("int32") for _ in range(2))
    r = np.zeros(12, "int32")
    mlc_lab.build(sch.mod, target="python")(a, b, r)
    np.testing.assert_array_equal(r, (a * b).sum(1))


def test_a_guarded_split_of_a_reduction_still_vectorizes_its_partial_sums():
    """The T.where of a split that does not divide only takes iterations away: the lanes of the
    rfactor block's partial sums stay apart, so vectorize accepts them, and the sums are right."""
    from mlc_lab import te
    n = tir.Var("n", "int64")
    A = te.placeholder((4, n), "float32", name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    sch = tir.Schedule(func)
    _, inner = sch.split(sch.get_loops(sch.get_block("B"))[-1], [None, 8])
    partial = sch.rfactor(inner, 1)
    sch.vectorize(sch.get_loops(partial)[-1])
    built, plain = mlc_lab.build(sch.mod, "llvm"), mlc_lab.build(func, "llvm")

    def run(f, a):
        out = mlc_lab.nd.array(np.full(4, 7, "float32"))
        f(mlc_lab.nd.array(a), out)
        return out.numpy()

    for length in (0, 3, 8, 29):   # n = 0: neither runs the block, B keeps what it held
        a = np.random.default_rng(length).standard_normal((4, length)).astype("float32")
        np.testing.assert_allclose(run(built, a), run(plain, a), rtol=1e-5, atol=1e-6)
        if length:
            np.testing.assert_allclose(run(built, a), a.sum(1), rtol=1e-5, atol=1e-6)
