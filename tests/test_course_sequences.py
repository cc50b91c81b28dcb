"""The step sequences the course teaches, end to end: every step keeps numerics (the schedule's
own guard checks that after each primitive) and the trace replays to the same module."""
import numpy as np

from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import tir as T
from schedule_checks import assert_replays

from corpus import mm_relu


@T.prim_func
def mm_relu_course_result(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                          C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128))
    for i, j_0 in T.grid(128, 32):
        for j_1_init in range(4):
            with T.block("Y_init"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1_init)
                Y[vi, vj] = T.float32(0)
        for k, j_1 in T.grid(128, 4):
            with T.block("Y_update"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + j_1)
                vk = T.axis.reduce(128, k)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for ax0 in range(4):
            with T.block("C"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j_0 * 4 + ax0)
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def test_mm_relu_split_reorder_reverse_compute_at_decompose():
    sch = tir.Schedule(mm_relu, check_numerics=True)
    block_Y = sch.get_block("Y", func_name="main")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "main"), j0)
    sch.decompose_reduction(block_Y, k)
    assert_structural_equal(sch.mod["main"], mm_relu_course_result)
    assert_replays(sch, mm_relu)


@T.prim_func
def vector_add(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32"),
               C: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] + B[vi]


def test_vector_add_split_bind():
    sch = tir.Schedule(vector_add, check_numerics=True)
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    text = sch.mod.script()
    assert 'T.thread_binding(8, thread="blockIdx.x")' in text
    assert 'T.thread_binding(128, thread="threadIdx.x")' in text
    assert_replays(sch, vector_add)


@T.prim_func
def window_sum(A: T.Buffer((1026,), "float32"), B: T.Buffer((1024,), "float32")):
    for i in range(1024):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + A[vi + 1] + A[vi + 2]


def test_window_sum_shared_memory_cooperative_fetch():
    sch = tir.Schedule(window_sum, check_numerics=True)
    block_B = sch.get_block("B")
    (i,) = sch.get_loops(block_B)
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    A_shared = sch.cache_read(block_B, 0, "shared")
    sch.compute_at(A_shared, i1)
    # Each block of 128 threads needs 130 elements of A: the copy loop covers exactly those.
    (fetch,) = sch.get_loops(A_shared)[-1:]
    copy_loop = [loop for loop in _loops(sch.mod["main"]) if loop.loop_var is fetch.var][0]
    assert copy_loop.extent.value == 130
    # Cooperative fetch: the 128 threads split the 130-element copy between them.
    ax_outer, ax_inner = sch.split(fetch, [None, 128])
    sch.bind(ax_inner, "threadIdx.x")
    assert_replays(sch, window_sum)
    assert 'A_shared = T.alloc_buffer((1026,), scope="shared")' in sch.mod.script()


def _loops(func):
    out = []

    class Collect(tir.StmtExprVisitor):
        def visit_For(self, loop):
            out.append(loop)
            self.generic_visit(loop)
    Collect().visit(func.body)
    return out


@T.prim_func
def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
           C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_matmul_cache_write_local_with_tiling():
    sch = tir.Schedule(matmul, check_numerics=True)
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block_C)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(C_local, j0)
    sch.decompose_reduction(block_C, k)
    text = sch.mod.script()
    assert 'C_local = T.alloc_buffer((64, 64), scope="local")' in text
    write_back = sch.get_loops(C_local)
    assert len(write_back) == 4   # i_0, j_0, then the 8x8 tile copied back
    assert_replays(sch, matmul)
    from mlc_lab.tir.schedule import numerics
    args = numerics.random_arguments(matmul)
    np.testing.assert_allclose(numerics.run(sch.mod["main"], args)[2], args[0] @ args[1], rtol=1e-4, atol=1e-4)
