"""cache_read, cache_write and set_scope: expected IR, numerics, trace replay, errors."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule.func_index import child_blocks
from schedule_checks import assert_schedule_ok, unchanged_after

from corpus import mm_relu, softmax, symbolic_add


# -- cache_read -------------------------------------------------------------------------------------
@T.prim_func
def mm_relu_A_shared(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                     C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128))
    A_shared = T.alloc_buffer((128, 128), scope="shared")
    for ax0, ax1 in T.grid(128, 128):
        with T.block("A_shared"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            A_shared[v0, v1] = A[v0, v1]
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A_shared[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def test_cache_read_parameter():
    sch = tir.Schedule(mm_relu)
    cached = sch.cache_read(sch.get_block("Y"), 0, "shared")
    assert cached.name == "A_shared"
    assert_schedule_ok(sch, mm_relu, mm_relu_A_shared)
    assert sch.trace.as_python()[-1] == \
        'b1 = sch.cache_read(block=b0, read_buffer_index=0, storage_scope="shared")'


@T.prim_func
def mm_relu_Y_local(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                    C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128))
    Y_local = T.alloc_buffer((128, 128), scope="local")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for ax0, ax1 in T.grid(128, 128):
        with T.block("Y_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            Y_local[v0, v1] = Y[v0, v1]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y_local[vi, vj], T.float32(0))


def test_cache_read_intermediate_goes_between_producer_and_consumer():
    sch = tir.Schedule(mm_relu)
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert_schedule_ok(sch, mm_relu, mm_relu_Y_local)


def test_cache_read_redirects_only_the_given_consumer():
    sch = tir.Schedule(softmax)
    sch.cache_read(sch.get_block("exp"), 0, "shared")
    func = sch.mod["main"]
    blocks = child_blocks(func.body)
    assert [r.block.name_hint for r in blocks] == ["maxelem", "A_shared", "exp", "expsum", "norm"]
    assert blocks[0].block.reads[0].buffer.name == "A"
    assert [r.buffer.name for r in blocks[2].block.reads] == ["A_shared", "maxelem"]
    assert_schedule_ok(sch, softmax)


def test_cache_read_chains_and_unique_names():
    sch = tir.Schedule(mm_relu)
    first = sch.cache_read(sch.get_block("Y"), 0, "shared")
    second = sch.cache_read(sch.get_block("A_shared"), 0, "local")
    third = sch.cache_read(sch.get_block("Y"), 1, "shared")
    assert (first.name, second.name, third.name) == ("A_shared", "A_local", "B_shared")
    assert_schedule_ok(sch, mm_relu)
    sch = tir.Schedule(softmax)
    assert sch.cache_read(sch.get_block("maxelem"), 0, "shared").name == "A_shared"
    assert sch.cache_read(sch.get_block("exp"), 0, "shared").name == "A_shared_1"
    assert_schedule_ok(sch, softmax)


@T.prim_func
def fused_rows(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((8, 16))
    for i in range(8):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for j in range(16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] * T.float32(2)


@T.prim_func
def fused_rows_cache_read(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((8, 16))
    B_shared = T.alloc_buffer((8, 16), scope="shared")
    for i in range(8):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)
        for ax0, ax1 in T.grid(1, 16):
            with T.block("B_shared"):
                v0 = T.axis.spatial(8, i + ax0)
                v1 = T.axis.spatial(16, ax1)
                B_shared[v0, v1] = B[v0, v1]
        for j in range(16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B_shared[vi, vj] * T.float32(2)


def test_cache_read_inside_a_shared_loop_copies_the_region_read():
    sch = tir.Schedule(fused_rows)
    sch.cache_read(sch.get_block("C"), 0, "shared")
    assert_schedule_ok(sch, fused_rows, fused_rows_cache_read)


@pytest.mark.skipif(not hasattr(tir.Schedule, "compute_at"), reason="compute_at not available")
def test_cache_read_then_compute_at():
    sch = tir.Schedule(mm_relu)
    block_Y = sch.get_block("Y")
    A_shared = sch.cache_read(block_Y, 0, "shared")
    i, j, k = sch.get_loops(block_Y)
    sch.compute_at(A_shared, i)
    assert_schedule_ok(sch, mm_relu)


# -- cache_write --------------------------------------------------------------------------------------
@T.prim_func
def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
           C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def matmul_C_local(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                   C: T.Buffer((64, 64), "float32")):
    C_local = T.alloc_buffer((64, 64), scope="local")
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C_local[vi, vj] = T.float32(0)
            C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
    for ax0, ax1 in T.grid(64, 64):
        with T.block("C_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            C[v0, v1] = C_local[v0, v1]


def test_cache_write_parameter():
    sch = tir.Schedule(matmul)
    C_local = sch.cache_write(sch.get_block("C"), 0, "local")
    assert C_local.name == "C_local"
    assert_schedule_ok(sch, matmul, matmul_C_local)


@T.prim_func
def matmul_C_local_tiled(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                         C: T.Buffer((64, 64), "float32")):
    C_local = T.alloc_buffer((64, 64), scope="local")
    for i_0, j_0, i_1, j_1, k in T.grid(8, 8, 8, 8, 64):
        with T.block("C"):
            vi = T.axis.spatial(64, i_0 * 8 + i_1)
            vj = T.axis.spatial(64, j_0 * 8 + j_1)
            vk = T.axis.reduce(64, k)
            with T.init():
                C_local[vi, vj] = T.float32(0)
            C_local[vi, vj] = C_local[vi, vj] + A[vi, vk] * B[vk, vj]
    for ax0, ax1 in T.grid(64, 64):
        with T.block("C_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            C[v0, v1] = C_local[v0, v1]


def test_course_cache_write_and_tiling():
    sch = tir.Schedule(matmul)
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block_C)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1, k)
    assert_schedule_ok(sch, matmul, matmul_C_local_tiled)
    if not hasattr(sch, "reverse_compute_at"):
        return
    sch.reverse_compute_at(C_local, j0)
    sch.decompose_reduction(block_C, i1)
    loop_j0 = sch.mod["main"].body.block.body.body
    assert [r.block.name_hint for r in child_blocks(loop_j0)] == ["C_init", "C_update", "C_local"]
    assert_schedule_ok(sch, matmul)


def test_cache_write_of_intermediate_then_read():
    sch = tir.Schedule(mm_relu)
    Y_local = sch.cache_write(sch.get_block("Y"), 0, "local")
    assert Y_local.name == "Y_local"
    sch.cache_read(sch.get_block("C"), 0, "shared")
    names = [r.block.name_hint for r in child_blocks(sch.mod["main"].body)]
    assert names == ["Y", "Y_local", "Y_shared", "C"]
    assert_schedule_ok(sch, mm_relu)


@T.prim_func
def fused_rows_cache_write(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
    B = T.alloc_buffer((8, 16))
    B_local = T.alloc_buffer((8, 16), scope="local")
    for i in range(8):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B_local[vi, vj] = A[vi, vj] + T.float32(1)
        for ax0, ax1 in T.grid(1, 16):
            with T.block("B_local"):
                v0 = T.axis.spatial(8, i + ax0)
                v1 = T.axis.spatial(16, ax1)
                B[v0, v1] = B_local[v0, v1]
        for j in range(16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] * T.float32(2)


def test_cache_write_inside_a_shared_loop_writes_back_before_the_consumer():
    sch = tir.Schedule(fused_rows)
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert_schedule_ok(sch, fused_rows, fused_rows_cache_write)


# -- set_scope ------------------------------------------------------------------------------------------
def test_set_scope():
    sch = tir.Schedule(mm_relu)
    sch.set_scope(sch.get_block("Y"), 0, "shared")
    (Y,) = sch.mod["main"].body.block.alloc_buffers
    assert Y.scope == "shared"
    assert sch.mod["main"].body.block.body.seq[1].body.body.block.reads[0].buffer is Y
    assert_schedule_ok(sch, mm_relu)


# -- errors ---------------------------------------------------------------------------------------------


def test_unknown_scope():
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("Y")
    for call in (lambda: sch.cache_read(block, 0, "texture"),
                 lambda: sch.cache_write(block, 0, "texture"),
                 lambda: sch.set_scope(block, 0, "texture")):
        unchanged_after(sch, call, tir.schedule.UnknownStorageScopeError, "'texture'", "shared")


def test_buffer_index_out_of_range():
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("Y")
    unchanged_after(sch, lambda: sch.cache_read(block, 2, "shared"),
                    tir.schedule.BufferIndexOutOfRangeError, '"Y"', "A, B")
    unchanged_after(sch, lambda: sch.cache_write(block, 1, "local"),
                    tir.schedule.BufferIndexOutOfRangeError, '"Y"')


def test_set_scope_of_parameter():
    sch = tir.Schedule(mm_relu)
    err = unchanged_after(sch, lambda: sch.set_scope(sch.get_block("C"), 0, "shared"),
                           tir.schedule.ParameterBufferError, "buffer C")
    assert "^" in str(err)


def test_cache_write_needs_the_only_writer():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.decompose_reduction(sch.get_block("Y"), k)
    unchanged_after(sch, lambda: sch.cache_write(sch.get_block("Y_update"), 0, "local"),
                     tir.schedule.NotSingleWriterError, '"Y_update"', "Y_init")


@T.prim_func
def in_place(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("A"):
            vi = T.axis.spatial(8, i)
            A[vi] = A[vi] + T.float32(1)


def test_cache_of_a_buffer_read_and_written():
    sch = tir.Schedule(in_place)
    unchanged_after(sch, lambda: sch.cache_write(sch.get_block("A"), 0, "local"),
                     tir.schedule.NotCompleteOrReductionBlockError, '"A"', "buffer A")
    unchanged_after(sch, lambda: sch.cache_read(sch.get_block("A"), 0, "local"),
                     tir.schedule.BufferWrittenByBlockError, '"A"', "buffer A")


def test_wrong_argument_types():
    sch = tir.Schedule(mm_relu)
    (i, *_) = sch.get_loops(sch.get_block("Y"))
    with pytest.raises(TypeError, match="BlockRV"):
        sch.cache_read(i, 0, "shared")
    with pytest.raises(TypeError, match="int"):
        sch.cache_write(sch.get_block("Y"), "0", "local")
    with pytest.raises(TypeError, match="storage_scope"):
        sch.cache_read(sch.get_block("Y"), 0, 3)


# -- the copy stage covers what the block touches under its site, never more than the buffer -------
@pytest.mark.parametrize("target", ["python", "llvm", "llvm -bounds-check"])
@pytest.mark.parametrize("primitive", ["cache_read", "cache_write"])
def test_cache_copy_stays_inside_a_symbolic_buffer(primitive, target):
    sch = tir.Schedule(symbolic_add)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[None, 8])
    getattr(sch, primitive)(sch.get_block("C"), 0, "global")
    assert_schedule_ok(sch, symbolic_add, check_numerics=False)
    lib = mlc_lab.build(sch.mod, target=target)
    for n in (1, 7, 8, 17):
        a, c = np.arange(n, dtype="float32"), np.full(n, np.nan, "float32")
        lib["main"](a, c)
        np.testing.assert_array_equal(c, a + 1)


@T.prim_func
def transpose_add(A: T.Buffer((16, 24), "float32"), b: T.Buffer((16,), "float32"),
                  C: T.Buffer((24, 16), "float32")):
    At = T.alloc_buffer((24, 16))
    for i, j in T.grid(24, 16):
        with T.block("At"):
            vi, vj = T.axis.remap("SS", [i, j])
            At[vi, vj] = A[vj, vi]
    for i, j in T.grid(24, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = At[vi, vj] + b[vj]


@pytest.mark.parametrize("target", ["python", "llvm", "llvm -bounds-check"])
def test_cache_copy_under_a_guarded_tile_stays_inside_the_buffer(target):
    sch = tir.Schedule(transpose_add)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("At"), j)
    sch.split(sch.get_loops(sch.get_block("C"))[1], factors=[None, 10])
    sch.cache_write(sch.get_block("At"), 0, "local")
    assert_schedule_ok(sch, transpose_add)
    a, bias = np.random.rand(16, 24).astype("float32"), np.random.rand(16).astype("float32")
    c = np.full((24, 16), np.nan, "float32")
    mlc_lab.build(sch.mod, target=target)["main"](a, bias, c)
    np.testing.assert_allclose(c, a.T + bias, rtol=1e-6)


def test_cache_read_inside_the_consumer_loop_copies_only_what_one_iteration_reads():
    sch = tir.Schedule(mm_relu)
    c = sch.get_block("C")
    _, j = sch.get_loops(c)
    sch.compute_at(sch.get_block("Y"), j)
    copy = sch.cache_read(c, 0, "local")
    assert_schedule_ok(sch, mm_relu)
    # one element per (i, j) iteration: a 1 x 1 nest under i, j, not the whole 128 x 128 buffer
    assert len(sch.get_loops(copy)) == 4
    assert "for ax0, ax1 in T.grid(1, 1):" in sch.mod.script()
    assert sch.mod.script().count("T.grid(128, 128)") == 1


@T.prim_func
def scale_rows(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    Y = T.alloc_buffer((4, 8))
    for i, j in T.grid(4, 8):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = Y[vi, vj] + T.float32(1)


def test_cache_write_copy_back_skips_iterations_the_writer_skips():
    # After the split, iterations with j_1 * 3 + j_2 >= 2 write nothing; copying their (never
    # written) cache elements back would read uninitialised memory.
    sch = tir.Schedule(scale_rows)
    i, j = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[4, None])
    sch.split(j1, factors=[None, 4, 3])
    sch.cache_write(sch.get_block("Y"), 0, "local")
    a = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    for target in ("python", "llvm"):
        c = np.full((4, 8), np.nan, "float32")
        mlc_lab.build(sch.mod, target=target)["main"](a, c)
        np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


@T.prim_func
def partial_row_sum(A: T.Buffer((6, 12), "float32"), S: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 12):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k < 7)
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


def test_cache_copies_only_the_columns_a_guarded_block_touches():
    # S reads columns 0..6 only, so A_global holds those; the cache_write of A_global's writer
    # (split so that its loops overhang the 12 columns) must copy back those 7 columns alone, not
    # the 12 of the loop nest, five of which nothing ever wrote.
    sch = tir.Schedule(partial_row_sum)
    sch.cache_read(sch.get_block("S"), 0, "global")
    sch.compute_at(sch.get_block("A_global"), sch.get_loops(sch.get_block("S"))[0],
                   preserve_unit_loops=False)
    sch.split(sch.get_loops(sch.get_block("A_global"))[1], factors=[3, 2, 3])
    sch.cache_write(sch.get_block("A_global"), 0, "global")
    copy_loops = sch.get_loops(sch.get_block("A_global_global"))
    assert sch.get(copy_loops[-1]).extent.value == 7
    a = np.random.default_rng(1).standard_normal((6, 12)).astype("float32")
    for target in ("python", "llvm"):
        s = np.zeros(6, "float32")
        mlc_lab.build(sch.mod, target=target)["main"](a, s)
        np.testing.assert_allclose(s, a[:, :7].sum(1), rtol=1e-5)
    assert_schedule_ok(sch, partial_row_sum)


@T.prim_func
def int_row_sum(A: T.Buffer((4, 18), "int32"), S: T.Buffer((4,), "int32")):
    for i, k in T.grid(4, 18):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = 0
            S[vi] = S[vi] + A[vi, vk]


def test_cache_read_of_an_rfactor_buffer_copies_only_the_slots_written():
    # k = k_0 * 8 + k_1 over 7 * 8 iterations: only k_0 < 3 reaches k < 18, so the rf buffer's
    # slots 3..6 are never written, and the final sum's T.where (k_0 * 8 < 18) reads slots 0..2.
    # The copy must use that guard, divided by its coefficient (k_0 <= 2), to skip the rest.
    sch = tir.Schedule(int_row_sum)
    sch.split(sch.get_loops(sch.get_block("S"))[1], factors=[7, 8])
    sch.rfactor(sch.get_loops(sch.get_block("S"))[1], factor_axis=1)
    sch.cache_read(sch.get_block("S"), 0, "shared")
    copy_loops = sch.get_loops(sch.get_block("S_rf_shared"))
    assert [sch.get(lp).extent.value for lp in copy_loops] == [4, 3]
    a = np.random.default_rng(3).integers(-50, 50, (4, 18)).astype("int32")
    for target in ("python", "llvm"):
        s = np.zeros(4, "int32")
        mlc_lab.build(sch.mod, target=target)["main"](a, s)
        np.testing.assert_array_equal(s, a.sum(1))
    assert_schedule_ok(sch, int_row_sum)


@T.prim_func
def short_row_sum(A: T.Buffer((4, 5), "float32"), S: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 5):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


def test_cache_write_of_an_rfactor_block_copies_back_only_the_slots_it_writes():
    # k = k_0 * 24 + k_1 * 8 + k_2 over 1 * 3 * 8 iterations, guarded by that sum < 5: only rf
    # slot k_1 = 0 is written. The guard bounds k_1 by 0 although k_1 is one term of a sum, so
    # the copy back covers that slot alone.
    sch = tir.Schedule(short_row_sum)
    sch.split(sch.get_loops(sch.get_block("S"))[1], factors=[None, 3, 8])
    sch.rfactor(sch.get_loops(sch.get_block("S"))[2], factor_axis=1)
    sch.cache_write(sch.get_block("S_rf"), 0, "shared")
    copy_loops = sch.get_loops(sch.get_block("S_rf_shared"))
    assert [sch.get(lp).extent.value for lp in copy_loops] == [4, 1]
    a = np.random.default_rng(5).standard_normal((4, 5)).astype("float32")
    for target in ("python", "llvm"):
        s = np.zeros(4, "float32")
        mlc_lab.build(sch.mod, target=target)["main"](a, s)
        np.testing.assert_allclose(s, a.sum(1), rtol=1e-5)
    assert_schedule_ok(sch, short_row_sum)


@T.prim_func
def tile_scope(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for i0, j0 in T.grid(4, 4):
        with T.block("tile"):
            i, j = T.axis.remap("SS", [i0, j0])
            T.reads(A[i * 16:i * 16 + 16, j * 16:j * 16 + 16])
            T.writes(B[i * 16:i * 16 + 16, j * 16:j * 16 + 16])
            for x, y in T.grid(16, 16):
                with T.block("B"):
                    vi = T.axis.spatial(64, i * 16 + x)
                    vj = T.axis.spatial(64, j * 16 + y)
                    B[vi, vj] = A[vi, vj] + T.float32(1)


def test_cache_read_straight_into_a_block_holds_only_its_tile():
    """The copy goes into the tile block's body (no loop of that block around it), so the local
    buffer is the 16x16 tile, read at the index minus the tile's start."""
    sch = tir.Schedule(tile_scope)
    copy = sch.cache_read(sch.get_block("B"), 0, "local")
    text = sch.mod["main"].script()
    assert 'A_local = T.alloc_buffer((16, 16), scope="local")' in text
    assert "A_local[v0, v1] = A[i * 16 + v0, j * 16 + v1]" in text
    assert "B[vi, vj] = A_local[vi - i * 16, vj - j * 16] + T.float32(1)" in text
    assert [int(sch.get(lp).extent) for lp in sch.get_loops(copy)] == [16, 16]   # inside the block
    assert_schedule_ok(sch, tile_scope)


def test_set_scope_moves_the_views_of_the_buffer_too():
    @T.prim_func
    def through_views(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
        B = T.alloc_buffer((8, 8))
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B_elem = T.match_buffer(B[vi, vj], ())
                B_elem[()] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(8, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                B_elem = T.match_buffer(B[vi, vj], ())
                C[vi, vj] = B_elem[()] + T.float32(1)

    sch = tir.Schedule(through_views)
    sch.set_scope(sch.get_block("B"), 0, "shared")
    text = sch.mod["main"].script()
    assert text.count('scope="shared"') == 3   # the buffer and both views
    assert_schedule_ok(sch, through_views)


@T.prim_func
def fused_masked(A: T.Buffer((6, 9), "float32"), S: T.Buffer((6,), "float32")):
    B = T.alloc_buffer((6, 9))
    for i, j in T.grid(6, 9):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(i * 9 + j < 50)
            B[vi, vj] = A[vi, vj] + T.float32(1)
        with T.block("S"):
            vi, vj = T.axis.remap("SR", [i, j])
            T.where(i * 9 + j < 50)
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + B[vi, vj]


def test_cache_read_inside_shared_loops_keeps_the_consumers_t_where():
    # The copy sits under loops i, j that it shares with the predicated producer and consumer;
    # the guard is on those loops, so it cannot narrow the copied region: the copy must carry it,
    # or it reads B where the producer never wrote (the interpreter stops on that read).
    sch = tir.Schedule(fused_masked)
    sch.cache_read("S", 0, "local")
    stage = sch.mod["main"].script().split('T.block("B_local")')[1].split("T.block")[0]
    assert "T.where(i * 9 + j < 50)" in stage
    assert_schedule_ok(sch, fused_masked)
