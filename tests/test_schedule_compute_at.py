"""compute_at / reverse_compute_at: expected IR, numerics, trace replay, and every failure."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.tir.schedule import errors
from mlc_lab.script import from_source, tir as T
from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after
from corpus import symbolic_add
from mlc_lab.testing.fuzz.programs import symbolic_vector


# ----------------------------------------------------------------------------------------------
# Helpers


def block_names(sch):
    return [b.name_hint for b in _blocks(sch.mod["main"].body) if b.name_hint != "root"]


def _realizes(stmt):
    if isinstance(stmt, tir.BlockRealize):
        yield stmt
        yield from _realizes(stmt.block.body)
    elif isinstance(stmt, tir.For):
        yield from _realizes(stmt.body)
    elif isinstance(stmt, tir.SeqStmt):
        for s in stmt.seq:
            yield from _realizes(s)


def _blocks(stmt):
    return (realize.block for realize in _realizes(stmt))


# ----------------------------------------------------------------------------------------------
# Programs
@T.prim_func
def window_sum(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
    A_shared = T.alloc_buffer((130,), scope="shared")
    for i in range(130):
        with T.block("A_shared"):
            v = T.axis.spatial(130, i)
            A_shared[v] = A[v]
    for i in range(128):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]


@T.prim_func
def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
            C: T.Buffer((128, 128), "float32")):
    Y = T.alloc_buffer((128, 128))
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@T.prim_func
def upsample(A: T.Buffer((32,), "float32"), C: T.Buffer((64,), "float32")):
    B = T.alloc_buffer((32,))
    for i in range(32):
        with T.block("B"):
            vi = T.axis.spatial(32, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(64):
        with T.block("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = B[vi // 2]


@T.prim_func
def two_consumers(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32"),
                  D: T.Buffer((64,), "float32")):
    B = T.alloc_buffer((64,))
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(64):
        with T.block("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = B[vi] * T.float32(2)
    for i in range(64):
        with T.block("D"):
            vi = T.axis.spatial(64, i)
            D[vi] = B[vi] * T.float32(3)


# ----------------------------------------------------------------------------------------------
# compute_at
def test_window_sum_compute_at_outer_tile_loop():
    @T.prim_func
    def expected(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        A_shared = T.alloc_buffer((130,), scope="shared")
        for i_0 in range(4):
            for ax0 in range(34):
                with T.block("A_shared"):
                    v = T.axis.spatial(130, i_0 * 32 + ax0)
                    A_shared[v] = A[v]
            for i_1 in range(32):
                with T.block("B"):
                    vi = T.axis.spatial(128, i_0 * 32 + i_1)
                    B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]

    sch = tir.Schedule(window_sum, check_numerics=True)
    i0, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 32])
    sch.compute_at(sch.get_block("A_shared"), i0)
    assert_schedule_ok(sch, window_sum, expected)


def test_window_sum_compute_at_inner_loop_reads_three():
    @T.prim_func
    def expected(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        A_shared = T.alloc_buffer((130,), scope="shared")
        for i_0, i_1 in T.grid(4, 32):
            for ax0 in range(3):
                with T.block("A_shared"):
                    v = T.axis.spatial(130, i_0 * 32 + i_1 + ax0)
                    A_shared[v] = A[v]
            with T.block("B"):
                vi = T.axis.spatial(128, i_0 * 32 + i_1)
                B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]

    sch = tir.Schedule(window_sum)
    _, i1 = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 32])
    sch.compute_at(sch.get_block("A_shared"), i1)
    assert_schedule_ok(sch, window_sum, expected)


def test_window_sum_thread_tile_reads_130():
    @T.prim_func
    def expected(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        A_shared = T.alloc_buffer((130,), scope="shared")
        for i_0 in T.thread_binding(1, thread="blockIdx.x"):
            for ax0 in range(130):
                with T.block("A_shared"):
                    v = T.axis.spatial(130, ax0)   # i_0 has one value, 0
                    A_shared[v] = A[v]
            for i_1 in T.thread_binding(128, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(128, i_0 * 128 + i_1)
                    B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]

    sch = tir.Schedule(window_sum)
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(sch.get_block("A_shared"), bx)
    assert_schedule_ok(sch, window_sum, expected)


@T.prim_func
def window_sum_256(A: T.Buffer((258,), "float32"), B: T.Buffer((256,), "float32")):
    A_shared = T.alloc_buffer((258,), scope="shared")
    for i in range(258):
        with T.block("A_shared"):
            v = T.axis.spatial(258, i)
            A_shared[v] = A[v]
    for i in range(256):
        with T.block("B"):
            vi = T.axis.spatial(256, i)
            B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]


def test_shared_buffer_at_a_thread_loop_covers_every_thread_of_the_block():
    @T.prim_func
    def expected(A: T.Buffer((258,), "float32"), B: T.Buffer((256,), "float32")):
        A_shared = T.alloc_buffer((258,), scope="shared")
        for i_0 in T.thread_binding(2, thread="blockIdx.x"):
            for i_1 in T.thread_binding(128, thread="threadIdx.x"):
                for ax0_0 in range(2):
                    for ax0_1 in T.thread_binding(128, thread="threadIdx.x"):
                        with T.block("A_shared"):
                            v = T.axis.spatial(258, i_0 * 128 + ax0_0 * 128 + ax0_1)
                            T.where(ax0_0 * 128 + ax0_1 < 130)
                            A_shared[v] = A[v]
                with T.block("B"):
                    vi = T.axis.spatial(256, i_0 * 128 + i_1)
                    B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]

    sch = tir.Schedule(window_sum_256, check_numerics=True)
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(sch.get_block("A_shared"), tx)
    (ax0,) = sch.get_loops(sch.get_block("A_shared"))[2:]
    assert sch.mod["main"].body.block.body.body.body.seq[0].extent.value == 130
    _, ax0_1 = sch.split(ax0, factors=[None, 128])
    sch.bind(ax0_1, "threadIdx.x")
    assert_schedule_ok(sch, window_sum_256, expected)


def test_local_buffer_at_a_thread_loop_covers_one_thread():
    @T.prim_func
    def local_copy(A: T.Buffer((258,), "float32"), B: T.Buffer((256,), "float32")):
        A_local = T.alloc_buffer((258,), scope="local")
        for i in range(258):
            with T.block("A_local"):
                v = T.axis.spatial(258, i)
                A_local[v] = A[v]
        for i in range(256):
            with T.block("B"):
                vi = T.axis.spatial(256, i)
                B[vi] = A_local[vi] + A_local[vi + 1] + A_local[vi + 2]

    sch = tir.Schedule(local_copy)
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 128])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.compute_at(sch.get_block("A_local"), tx)
    copy_loop = sch.mod["main"].body.block.body.body.body.seq[0]
    assert copy_loop.extent.value == 3
    assert_schedule_ok(sch, local_copy)


def test_overhanging_tile_gets_a_predicate():
    @T.prim_func
    def expected(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        A_shared = T.alloc_buffer((130,), scope="shared")
        for i_0 in range(3):
            for ax0 in range(50):
                with T.block("A_shared"):
                    v = T.axis.spatial(130, i_0 * 48 + ax0)
                    T.where(i_0 * 48 + ax0 < 130)
                    A_shared[v] = A[v]
            for i_1 in range(48):
                with T.block("B"):
                    vi = T.axis.spatial(128, i_0 * 48 + i_1)
                    T.where(i_0 * 48 + i_1 < 128)
                    B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]

    sch = tir.Schedule(window_sum, check_numerics=True)
    i0, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 48])
    sch.compute_at(sch.get_block("A_shared"), i0)
    assert_schedule_ok(sch, window_sum, expected)


def test_compute_at_twice_moves_deeper():
    sch = tir.Schedule(window_sum)
    i0, i1 = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 32])
    copy = sch.get_block("A_shared")
    sch.compute_at(copy, i0)
    sch.compute_at(copy, i1)
    expected = tir.Schedule(window_sum)
    _, j1 = expected.split(expected.get_loops(expected.get_block("B"))[0], factors=[4, 32])
    expected.compute_at(expected.get_block("A_shared"), j1)
    assert_schedule_ok(sch, window_sum, expected.mod["main"])


def test_reduction_block_recreates_reduce_loop():
    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                 C: T.Buffer((128, 128), "float32")):
        Y = T.alloc_buffer((128, 128))
        for i, j in T.grid(128, 128):
            for ax0 in range(128):
                with T.block("Y"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j)
                    vk = T.axis.reduce(128, ax0)
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    sch = tir.Schedule(mm_relu)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("Y"), j)
    assert_schedule_ok(sch, mm_relu, expected)


def test_preserve_unit_loops():
    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                 C: T.Buffer((128, 128), "float32")):
        Y = T.alloc_buffer((128, 128))
        for i, j in T.grid(128, 128):
            for ax0, ax1, ax2 in T.grid(1, 1, 128):
                with T.block("Y"):
                    vi = T.axis.spatial(128, i + ax0)
                    vj = T.axis.spatial(128, j + ax1)
                    vk = T.axis.reduce(128, ax2)
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    sch = tir.Schedule(mm_relu)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("Y"), j, preserve_unit_loops=True)
    assert_schedule_ok(sch, mm_relu, expected)


def test_floordiv_consumer_needs_half_the_tile():
    @T.prim_func
    def expected(A: T.Buffer((32,), "float32"), C: T.Buffer((64,), "float32")):
        B = T.alloc_buffer((32,))
        for i_0 in range(8):
            for ax0 in range(4):
                with T.block("B"):
                    vi = T.axis.spatial(32, i_0 * 4 + ax0)
                    B[vi] = A[vi] * T.float32(2)
            for i_1 in range(8):
                with T.block("C"):
                    vi = T.axis.spatial(64, i_0 * 8 + i_1)
                    C[vi] = B[vi // 2]

    sch = tir.Schedule(upsample)
    i0, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[8, 8])
    sch.compute_at(sch.get_block("B"), i0)
    assert_schedule_ok(sch, upsample, expected)


def test_two_consumers_under_one_loop_cover_both():
    @T.prim_func
    def fused_consumers(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
        B = T.alloc_buffer((64,))
        for i in range(64):
            with T.block("B"):
                vi = T.axis.spatial(64, i)
                B[vi] = A[vi] + T.float32(1)
        for i0 in range(8):
            for i1 in range(8):
                with T.block("C"):
                    vi = T.axis.spatial(64, i0 * 8 + i1)
                    C[vi] = B[vi] * T.float32(2)
            for i1 in range(8):
                with T.block("D"):
                    vi = T.axis.spatial(64, i0 * 8 + i1)
                    C[vi] = C[vi] + B[vi]

    @T.prim_func
    def expected(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
        B = T.alloc_buffer((64,))
        for i0 in range(8):
            for ax0 in range(8):
                with T.block("B"):
                    vi = T.axis.spatial(64, i0 * 8 + ax0)
                    B[vi] = A[vi] + T.float32(1)
            for i1 in range(8):
                with T.block("C"):
                    vi = T.axis.spatial(64, i0 * 8 + i1)
                    C[vi] = B[vi] * T.float32(2)
            for i1 in range(8):
                with T.block("D"):
                    vi = T.axis.spatial(64, i0 * 8 + i1)
                    C[vi] = C[vi] + B[vi]

    sch = tir.Schedule(fused_consumers)
    i0 = sch.get_loops(sch.get_block("C"))[0]
    sch.compute_at(sch.get_block("B"), i0)
    assert_schedule_ok(sch, fused_consumers, expected)


def test_softmax_chain_of_compute_at():
    @T.prim_func
    def softmax(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
        maxelem = T.alloc_buffer((8,))
        expsum = T.alloc_buffer((8,))
        expval = T.alloc_buffer((8, 16))
        for i, k in T.grid(8, 16):
            with T.block("maxelem"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    maxelem[vi] = T.float32(-1e30)
                maxelem[vi] = T.max(maxelem[vi], A[vi, vk])
        for i, j in T.grid(8, 16):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                expval[vi, vj] = T.exp(A[vi, vj] - maxelem[vi])
        for i, k in T.grid(8, 16):
            with T.block("expsum"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    expsum[vi] = T.float32(0)
                expsum[vi] = expsum[vi] + expval[vi, vk]
        for i, j in T.grid(8, 16):
            with T.block("norm"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = expval[vi, vj] / expsum[vi]

    sch = tir.Schedule(softmax, check_numerics=True)
    i = sch.get_loops(sch.get_block("norm"))[0]
    for name in ("expsum", "exp", "maxelem"):
        sch.compute_at(sch.get_block(name), i)
    root = sch.mod["main"].body.block.body
    assert isinstance(root, tir.For) and len(root.body.seq) == 4
    assert_schedule_ok(sch, softmax)


def test_index_minus_two_places_right_after_producers():
    sch = tir.Schedule(window_sum)
    i0, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 32])
    sch.compute_at(sch.get_block("A_shared"), i0, index=-2)
    body = sch.mod["main"].body.block.body.body
    assert body.seq[0].body.block.name_hint == "A_shared"
    assert_schedule_ok(sch, window_sum)


# ----------------------------------------------------------------------------------------------
# reverse_compute_at
def test_mm_relu_course_sequence():
    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                 C: T.Buffer((128, 128), "float32")):
        Y = T.alloc_buffer((128, 128))
        for i, j_0 in T.grid(128, 32):
            for k, j_1 in T.grid(128, 4):
                with T.block("Y"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + j_1)
                    vk = T.axis.reduce(128, k)
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            for ax0 in range(4):
                with T.block("C"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + ax0)
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    sch = tir.Schedule(mm_relu, check_numerics=True)
    block_Y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    assert_schedule_ok(sch, mm_relu, expected)
    assert "sch.reverse_compute_at(" in str(sch.trace)


def test_reverse_compute_at_outer_loop_and_unit_loops():
    @T.prim_func
    def expected(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                 C: T.Buffer((128, 128), "float32")):
        Y = T.alloc_buffer((128, 128))
        for i in range(128):
            for j, k in T.grid(128, 128):
                with T.block("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            for ax0, ax1 in T.grid(1, 128):
                with T.block("C"):
                    vi = T.axis.spatial(128, i + ax0)
                    vj = T.axis.spatial(128, ax1)
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    sch = tir.Schedule(mm_relu)
    i = sch.get_loops(sch.get_block("Y"))[0]
    sch.reverse_compute_at(sch.get_block("C"), i, preserve_unit_loops=True)
    assert_schedule_ok(sch, mm_relu, expected)


def test_reverse_compute_at_overhanging_tile_gets_a_predicate():
    @T.prim_func
    def copy_head(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        A_shared = T.alloc_buffer((130,), scope="shared")
        for i in range(130):
            with T.block("A_shared"):
                v = T.axis.spatial(130, i)
                A_shared[v] = A[v]
        for i in range(128):
            with T.block("B"):
                vi = T.axis.spatial(128, i)
                B[vi] = A_shared[vi] * T.float32(2)

    @T.prim_func
    def expected(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        A_shared = T.alloc_buffer((130,), scope="shared")
        for i_0 in range(10):
            for i_1 in range(13):
                with T.block("A_shared"):
                    v = T.axis.spatial(130, i_0 * 13 + i_1)
                    A_shared[v] = A[v]
            for ax0 in range(13):
                with T.block("B"):
                    vi = T.axis.spatial(128, i_0 * 13 + ax0)
                    T.where(i_0 * 13 + ax0 < 128)
                    B[vi] = A_shared[vi] * T.float32(2)

    sch = tir.Schedule(copy_head, check_numerics=True)
    i0, _ = sch.split(sch.get_loops(sch.get_block("A_shared"))[0], factors=[10, 13])
    sch.reverse_compute_at(sch.get_block("B"), i0)
    assert_schedule_ok(sch, copy_head, expected)


# ----------------------------------------------------------------------------------------------
# Failures
def test_loop_not_enclosing_every_consumer():
    sch = tir.Schedule(two_consumers)
    i = sch.get_loops(sch.get_block("C"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    error = unchanged_after(sch, lambda: sch.compute_at(blocks["B"], i), tir.schedule.NotAllRequiredBlocksVisitedError, 'block "D"', "loop i")
    assert "^^^" in str(error)


def test_output_block_cannot_be_computed_at():
    sch = tir.Schedule(mm_relu)
    i = sch.get_loops(sch.get_block("Y"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["C"], i), tir.schedule.OutputBlockError, 'block "C"')


def test_loop_already_enclosing_the_block():
    sch = tir.Schedule(mm_relu)
    _, j, _ = sch.get_loops(sch.get_block("Y"))
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["Y"], j), tir.schedule.LoopEnclosesBlockError, "loop j", 'block "Y"')


def test_reverse_compute_at_loop_missing_a_producer():
    @T.prim_func
    def two_producers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        B0 = T.alloc_buffer((16,))
        B1 = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B0"):
                vi = T.axis.spatial(16, i)
                B0[vi] = A[vi]
        for i in range(16):
            with T.block("B1"):
                vi = T.axis.spatial(16, i)
                B1[vi] = A[vi] * T.float32(2)
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = B0[vi] + B1[vi]

    sch = tir.Schedule(two_producers)
    i = sch.get_loops(sch.get_block("B1"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.reverse_compute_at(blocks["C"], i), tir.schedule.NotAllRequiredBlocksVisitedError, 'block "B0"', "loop i")


def test_reverse_compute_at_window_consumer_is_refused():
    sch = tir.Schedule(window_sum)
    i0, _ = sch.split(sch.get_loops(sch.get_block("A_shared"))[0], factors=[10, 13])
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.reverse_compute_at(blocks["B"], i0), tir.schedule.RegionNotCoverableError, 'block "B"', "A_shared")


def test_reverse_compute_at_inside_the_reduction_is_refused():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.reverse_compute_at(blocks["C"], j1), tir.schedule.ReductionNotFinishedError, 'block "Y"', "loop j_1")


def test_not_a_complete_block():
    @T.prim_func
    def two_writers(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B0"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]
        for i in range(16):
            with T.block("B1"):
                vi = T.axis.spatial(16, i)
                B[vi] = B[vi] + T.float32(1)
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = B[vi]

    sch = tir.Schedule(two_writers)
    i = sch.get_loops(sch.get_block("C"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["B0"], i), tir.schedule.NotSingleWriterError, 'block "B0"', '"B1"')


def test_producer_after_consumer_under_the_loop():
    @T.prim_func
    def misordered(A: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((16,))
        C = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("D"):
                vi = T.axis.spatial(16, i)
                D[vi] = C[vi]
            with T.block("P"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]
        for i in range(16):
            with T.block("X"):
                vi = T.axis.spatial(16, i)
                C[vi] = B[vi] + T.float32(1)

    sch = tir.Schedule(misordered)
    i = sch.get_loops(sch.get_block("D"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["X"], i), tir.schedule.ProducerAfterConsumerError, "loop i", 'block "P"', 'block "D"')


def test_bad_index():
    sch = tir.Schedule(window_sum)
    i0, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 32])
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["A_shared"], i0, index=5), tir.schedule.InvalidIndexError, "index 5")


def test_argument_types_are_checked():
    sch = tir.Schedule(window_sum)
    i = sch.get_loops(sch.get_block("B"))[0]
    with pytest.raises(TypeError, match="LoopRV"):
        sch.compute_at(sch.get_block("A_shared"), sch.get_block("B"))
    with pytest.raises(TypeError, match="BlockRV"):
        sch.reverse_compute_at(i, i)


def test_reverse_compute_at_keeps_consumers_after_the_new_place():
    """Found by the schedule fuzzer: moving softmax's maxelem under the expsum loop would run it
    after exp, which reads maxelem."""
    from corpus import softmax
    sch = tir.Schedule(softmax)
    expsum_loop = sch.get_loops(sch.get_block("expsum"))[0]
    before = sch.mod
    with pytest.raises(tir.schedule.ConsumerBeforeLoopError, match='block "exp".*block "maxelem".*loop i'):
        sch.reverse_compute_at(sch.get_block("maxelem"), expsum_loop)
    assert sch.mod is before



# ----------------------------------------------------------------------------------------------
# Regions that must be exact: found by the schedule fuzzer. Each scheduled program runs on the
# interpreter, llvm, and llvm with bounds checks (an out-of-bounds access raises IndexError), with
# outputs pre-filled with NaN so elements it fails to write show.
@T.prim_func
def one_row(A: T.Buffer((1, 8), "float32"), C: T.Buffer((1, 8), "float32")):
    B = T.alloc_buffer((1, 8))
    for n, j in T.grid(1, 8):
        with T.block("B"):
            vn, vj = T.axis.remap("SS", [n, j])
            B[vn, vj] = A[vn, vj] * T.float32(2)
    for n, j in T.grid(1, 8):
        with T.block("C"):
            vn, vj = T.axis.remap("SS", [n, j])
            C[vn, vj] = B[vn, vj] + T.float32(1)


def test_region_side_not_provably_inside_the_domain_is_guarded():
    """Split of an extent-1 loop into [2, 1]: the producer's row is n_0, clipped to Min(n_0, 0),
    which folds to 0 although n_0 = 1 overhangs; the guard must come from a proof, not from a
    Min left in the bound."""
    sch = tir.Schedule(one_row)
    n0, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[2, None])
    sch.compute_at(sch.get_block("B"), n0)
    realize = next(r for r in _realizes(sch.mod["main"].body) if r.block.name_hint == "B")
    assert str(realize.predicate) == "n_0 < 1"
    assert_schedule_ok(sch, one_row)
    assert_runs_like(one_row, sch, outputs=[1])


@T.prim_func
def row_sum(A: T.Buffer((4, 10), "float32"), S: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 10):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


def test_moved_block_keeps_its_own_predicate():
    """rfactor of a non-divisible split leaves S_rf under T.where(k_0 * 3 + k_1 < 10); moved under
    the write-back's loop it must skip the same iterations (else it reads A[i, 10:12])."""
    sch = tir.Schedule(row_sum)
    _, ki = sch.split(sch.get_loops(sch.get_block("S"))[1], factors=[None, 3])
    rf = sch.rfactor(ki, factor_axis=0)
    sch.compute_at(rf, sch.get_loops(sch.get_block("S"))[0])
    realize = next(r for r in _realizes(sch.mod["main"].body) if r.block.name_hint == "S_rf")
    assert str(realize.predicate) == "ax1 * 3 + ax0 < 10"
    assert_schedule_ok(sch, row_sum)
    assert_runs_like(row_sum, sch, outputs=[1])


def test_reverse_computed_block_keeps_its_own_predicate():
    @T.prim_func
    def head(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                T.where(i < 12)
                C[vi] = B[vi] + T.float32(1)

    sch = tir.Schedule(head)
    i0, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 4])
    sch.reverse_compute_at(sch.get_block("C"), i0)
    assert_schedule_ok(sch, head)
    assert_runs_like(head, sch, outputs=[1])


def test_predicate_not_expressible_in_iterators_is_refused():
    @T.prim_func
    def fused(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
        B = T.alloc_buffer((4, 4))
        for f in range(16):
            with T.block("B"):
                vi = T.axis.spatial(4, f // 4)
                vj = T.axis.spatial(4, f % 4)
                T.where(f < 12)
                B[vi, vj] = A[vi, vj]
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj]

    sch = tir.Schedule(fused)
    i = sch.get_loops(sch.get_block("C"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["B"], i),
                    tir.schedule.PredicateNotInIteratorsError, 'block "B"', "T.where", "loop i")


@T.prim_func
def pad_then_add(X: T.Buffer((4, 4), "float32"), Y: T.Buffer((6, 6), "float32")):
    Xp = T.alloc_buffer((6, 6))
    for h, w in T.grid(6, 6):
        with T.block("pad"):
            vh, vw = T.axis.remap("SS", [h, w])
            Xp[vh, vw] = T.if_then_else(1 <= vh and vh < 5 and 1 <= vw and vw < 5,
                                        X[vh - 1, vw - 1], T.float32(0))
    for h, w in T.grid(6, 6):
        with T.block("Y"):
            vh, vw = T.axis.remap("SS", [h, w])
            Y[vh, vw] = Xp[vh, vw] + T.float32(1)


def test_reverse_compute_at_must_run_every_iteration_of_the_block():
    """Under the loop of a copy of X the padding stage would only run where it reads X: its
    border would never be written."""
    sch = tir.Schedule(pad_then_add)
    copy = sch.cache_read(sch.get_block("pad"), 0, "local")
    loop = sch.get_loops(copy)[0]
    pad = sch.get_block("pad")
    unchanged_after(sch, lambda: sch.reverse_compute_at(pad, loop, preserve_unit_loops=True),
                    tir.schedule.UncoveredIterationsError, 'block "pad"', "loop ax0", "vh",
                    "never run")


def test_reverse_compute_at_needs_a_producer_under_the_loop():
    """Y produces for C: under C's loop nothing would limit Y to a part of its domain, so Y would
    be recomputed in full for every (i, j)."""
    sch = tir.Schedule(mm_relu)
    j = sch.get_loops(sch.get_block("C"))[1]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.reverse_compute_at(blocks["Y"], j),
                    tir.schedule.NoDependenceUnderLoopError, 'block "Y"', "no producer", "loop j")


def test_compute_at_needs_a_consumer_under_the_loop():
    @T.prim_func
    def unread(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi]
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = A[vi]

    sch = tir.Schedule(unread)
    i = sch.get_loops(sch.get_block("C"))[0]
    blocks = {name: sch.get_block(name) for name in block_names(sch)}
    unchanged_after(sch, lambda: sch.compute_at(blocks["B"], i),
                    tir.schedule.NoDependenceUnderLoopError, 'block "B"', "no consumer", "loop i")


@T.prim_func
def two_stage_18(A: T.Buffer((2, 18), "float32"), C: T.Buffer((2, 18), "float32")):
    B = T.alloc_buffer((2, 18))
    for i, j in T.grid(2, 18):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(2, 18):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


def test_reverse_compute_at_consumes_only_what_the_guarded_producer_wrote():
    # The producer's second split overhangs ([5, 1, 2] over 3): its T.where limits each j_0
    # iteration to 9 elements, so the consumer placed there must not read the next 9.
    sch = tir.Schedule(two_stage_18)
    sch.split(sch.get_loops(sch.get_block("B"))[1], factors=[None, 9])
    sch.split(sch.get_loops(sch.get_block("B"))[2], factors=[None, 3])
    sch.split(sch.get_loops(sch.get_block("B"))[2], factors=[5, None, 2])
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[1])
    assert_runs_like(two_stage_18, sch, outputs=[1])


@T.prim_func
def two_stage_4x6(A: T.Buffer((4, 6), "float32"), D: T.Buffer((4, 6), "float32")):
    C = T.alloc_buffer((4, 6))
    for i, j in T.grid(4, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(4, 6):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi, vj] * T.float32(2)


def test_reverse_compute_at_refuses_a_producer_that_writes_part_of_the_box_read():
    # Each iteration of the fused-and-split loop writes 4 elements of C, which may straddle two
    # rows (from element 4 of a row of 6); the consumer placed there would read both rows
    # whole, elements later iterations write.
    sch = tir.Schedule(two_stage_4x6)
    i, j = sch.get_loops(sch.get_block("C"))
    f0, f1, f2 = sch.split(sch.fuse(i, j), factors=[6, 1, 4])
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("D"), f1),
                    tir.schedule.RegionNotCoverableError, "loop i_j_fused_1", "buffer C")


def test_reverse_compute_at_under_a_fused_loop_whose_pieces_stay_in_one_row():
    # Pieces of 2 elements start at even places of rows of 6, so each lies in one row: the
    # consumer runs on exactly those 2 elements (the simplifier proves the row and the extent).
    sch = tir.Schedule(two_stage_4x6)
    i, j = sch.get_loops(sch.get_block("C"))
    f0, f1, f2 = sch.split(sch.fuse(i, j), factors=[6, 2, 2])
    sch.reverse_compute_at(sch.get_block("D"), f1)
    (inner,) = sch.get_loops(sch.get_block("D"))[2:]
    assert int(sch.get(inner).extent) == 2
    assert_runs_like(two_stage_4x6, sch, outputs=[1])


def test_reverse_compute_at_refuses_a_tile_it_cannot_bound():
    # Splitting a length-n loop by [4, 3, None] makes a tile of 3 * ceildiv(n, 12) elements: a
    # factor of unknown sign, so the part one iteration of i_0 writes has no bounds, and the
    # consumer placed there would read all of C_local, most of it not written yet.
    sch = tir.Schedule(symbolic_add)
    block = sch.get_block("C")
    sch.split(sch.get_loops(block)[0], factors=[4, 3, None])
    sch.cache_write(block, 0, "local")
    i0 = sch.get_loops(block)[0]
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("C_local"), i0),
                    errors.RegionNotCoverableError, "C_local", "loop i_0", "cannot be bounded")


@T.prim_func
def three_stages(A: T.Buffer((10, 9), "float32"), D: T.Buffer((10, 9), "float32")):
    B = T.alloc_buffer((10, 9))
    C = T.alloc_buffer((10, 9))
    for i, j in T.grid(10, 9):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(10, 9):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid(10, 9):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))


def test_reverse_compute_at_skips_the_iterations_its_producer_skips():
    # The second split divides a unit loop into 5 pieces, four of which C skips (its T.where
    # holds for i_2_1 == 0 only). D placed under those loops must skip them as well: there it
    # would read rows of C that a later iteration of i_1 writes.
    sch = tir.Schedule(three_stages)
    c = sch.get_block("C")
    sch.split(sch.get_loops(c)[0], factors=[2, 7, None])
    sch.split(sch.get_loops(c)[2], factors=[1, 5, None])
    sch.reverse_compute_at(sch.get_block("D"), sch.get_loops(c)[4])
    assert "i_2_0 * 5 + i_2_1 + i_2_2 < 1" in sch.mod["main"].script().split('T.block("D")')[1]
    assert_schedule_ok(sch, three_stages)
    a = np.random.default_rng(2).standard_normal((10, 9)).astype("float32")
    d = np.full((10, 9), np.nan, "float32")
    mlc_lab.build(sch.mod, target="llvm")["main"](a, d)
    np.testing.assert_allclose(d, np.maximum(a * 2 + 1, 0), rtol=1e-6)


@T.prim_func
def add_one(A: T.Buffer((2, 6), "float32"), C: T.Buffer((2, 6), "float32")):
    for i, j in T.grid(2, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + T.float32(1)


def test_reverse_compute_at_refuses_a_producer_that_skips_inside_its_tile():
    # j = j_0 * 2 + j_1 * 2 + j_2 with a unit j_1, split again into 5 * 4 * 7 pieces guarded by
    # j_1_0 * 28 + j_1_1 * 7 + j_1_2 < 1: under j_1_0 the tile spans 56 columns but C writes 2.
    sch = tir.Schedule(add_one)
    c = sch.get_block("C")
    sch.split(sch.get_loops(c)[1], factors=[3, 1, 2])
    sch.split(sch.get_loops(c)[2], factors=[5, 4, 7])
    sch.cache_write(c, 0, "shared")
    loop = sch.get_loops(c)[2]
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("C_shared"), loop),
                    errors.RegionNotCoverableError, "skips iterations by T.where", "loop j_1_0")


def test_reverse_compute_at_follows_a_nested_split_guard():
    # Splitting j_1 (4 columns) into 2 * 3 guards it with j_1_0 * 3 + j_1_1 < 4: that guard narrows
    # the tile to the 4 columns written, so the copy can go under j_0.
    sch = tir.Schedule(add_one)
    c = sch.get_block("C")
    sch.split(sch.get_loops(c)[1], factors=[None, 4])
    sch.split(sch.get_loops(c)[2], factors=[None, 3])
    sch.cache_write(c, 0, "shared")
    sch.reverse_compute_at(sch.get_block("C_shared"), sch.get_loops(c)[1])
    assert_schedule_ok(sch, add_one)
    a = np.random.default_rng(4).standard_normal((2, 6)).astype("float32")
    out = np.full((2, 6), np.nan, "float32")
    mlc_lab.build(sch.mod, target="llvm")["main"](a, out)
    np.testing.assert_allclose(out, a + 1, rtol=1e-6)


@T.prim_func
def tiled_producer(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    B = T.alloc_buffer((64, 64))
    for i_o, j_o in T.grid(4, 4):
        with T.block("B_tile"):
            vio, vjo = T.axis.remap("SS", [i_o, j_o])
            T.reads(A[vio * 16:vio * 16 + 16, vjo * 16:vjo * 16 + 16])
            T.writes(B[vio * 16:vio * 16 + 16, vjo * 16:vjo * 16 + 16])
            for i_i, j_i in T.grid(16, 16):
                with T.block("B"):
                    vi = T.axis.spatial(64, vio * 16 + i_i)
                    vj = T.axis.spatial(64, vjo * 16 + j_i)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


def test_compute_at_of_a_tile_block_runs_only_the_tiles_the_consumer_needs():
    """A block that writes a 16x16 tile per iteration, moved under a consumer loop over 32 rows,
    runs the two tiles of rows those 32 rows fall in (its inner block does not count as a second
    writer of B: it writes for it)."""
    sch = tir.Schedule(tiled_producer)
    i_0, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [2, 32])
    sch.compute_at(sch.get_block("B_tile"), i_0)
    loops = sch.get_loops(sch.get_block("B_tile"))
    assert [int(sch.get(lp).extent) for lp in loops] == [2, 2, 4]
    assert "T.axis.spatial(4, i_0 * 2 + ax0)" in sch.mod["main"].script()
    assert_schedule_ok(sch, tiled_producer)


def test_compute_at_errors_say_the_rule_in_the_reference_compilers_words():
    sch = tir.Schedule(tiled_producer)
    loop = sch.get_loops(sch.get_block("B_tile"))[0]
    unchanged_after(sch, lambda: sch.compute_at(sch.get_block("B_tile"), loop),
                    errors.LoopEnclosesBlockError, 'loop i_o is an ancestor of block "B_tile"')
    c_loop = sch.get_loops(sch.get_block("C"))[0]
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("C"), c_loop),
                    errors.ScheduleError, "ancestor of block")


@T.prim_func
def rows_then_flat(X: T.Buffer((16, 16), "float32"), Y: T.Buffer((256,), "float32")):
    temp = T.alloc_buffer((16, 16))
    for i, j in T.grid(16, 16):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            temp[vi, vj] = X[vj, vi] + T.float32(1)
    for i in range(256):
        with T.block("B"):
            v = T.axis.spatial(256, i)
            Y[v] = temp[v // 16, v % 16]


def test_reverse_compute_at_reads_back_split_indices():
    """Under row i of the producer the consumer runs the 16 iterations that read row i (v // 16
    is i, v % 16 any): the indices are inverted over the row just made."""
    sch = tir.Schedule(rows_then_flat)
    sch.reverse_compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("A"))[0])
    assert "T.axis.spatial(256, i * 16 + ax0)" in sch.mod["main"].script()
    assert [int(sch.get(lp).extent) for lp in sch.get_loops(sch.get_block("B"))] == [16, 16]
    assert_runs_like(rows_then_flat, sch, outputs=[1])


def test_reverse_compute_at_refuses_split_indices_whose_box_is_not_whole():
    """Read transposed (temp[v % 16, v // 16]), row i of temp is read by the iterations i,
    i + 16, i + 32, ...: a stride-16 set that no box of iterations holds."""
    @T.prim_func
    def transposed(X: T.Buffer((16, 16), "float32"), Y: T.Buffer((256,), "float32")):
        temp = T.alloc_buffer((16, 16))
        for i, j in T.grid(16, 16):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                temp[vi, vj] = X[vi, vj] + T.float32(1)
        for i in range(256):
            with T.block("B"):
                v = T.axis.spatial(256, i)
                Y[v] = temp[v % 16, v // 16]

    sch = tir.Schedule(transposed)
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("B"),
                                                        sch.get_loops(sch.get_block("A"))[0]),
                    errors.RegionNotCoverableError, 'block "B" reads')


def test_reverse_compute_at_refuses_a_blockized_consumer_that_reads_a_whole_row():
    """The tile block reads a whole row of At in every iteration; under the loop over the row's
    elements only one of them exists yet."""
    @T.prim_func
    def transpose_add(A: T.Buffer((13, 9), "float32"), C: T.Buffer((9, 13), "float32")):
        At = T.alloc_buffer((9, 13))
        for i, j in T.grid(9, 13):
            with T.block("At"):
                vi, vj = T.axis.remap("SS", [i, j])
                At[vi, vj] = A[vj, vi]
        for i, j in T.grid(9, 13):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = At[vi, vj] + T.float32(1)

    sch = tir.Schedule(transpose_add)
    row = sch.blockize(sch.get_loops(sch.get_block("C"))[1])
    unchanged_after(sch, lambda: sch.reverse_compute_at(row, sch.get_loops(sch.get_block("At"))[1]),
                    errors.RegionNotCoverableError, "buffer At")
    sch.reverse_compute_at(row, sch.get_loops(sch.get_block("At"))[0])   # the whole row exists
    assert_runs_like(transpose_add, sch, outputs=[1])


# -- a producer that skips whole iterations before a padding consumer --------------------------
# C = A * B + 1 over a symbolic n: the fuzzer's program that found the dropped border.
PADDED_ELEMENTWISE = symbolic_vector(np.random.default_rng(0)).source


@pytest.mark.parametrize("size", ["n", 5])
def test_reverse_compute_at_refuses_to_drop_a_padding_border(size):
    # B is padded to a multiple of 3, then read through a cache whose copy runs only where
    # ax0 < n. Moving the padding block under the copy's loop would skip the border with it.
    src = PADDED_ELEMENTWISE if size == "n" else PADDED_ELEMENTWISE.replace(
        "    n = T.int32()\n", "").replace("(n,)", "(5,)").replace("(n)", "(5)").replace("(n, i)", "(5, i)")
    sch = tir.Schedule(from_source(src))
    sch.reindex_cache_read(sch.get_block("C"), 1, "global", "lambda v0: (v0,)")
    sch.pad_einsum(sch.get_block("B_global"), [3])
    sch.cache_read(sch.get_block("B_pad"), 0, "local")
    loop = sch.get_loops(sch.get_block("B_local"))[0]
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("B_pad"), loop),
                    errors.UncoveredIterationsError, "sch.reverse_compute_at", '"B_pad"')


def pooled(rows: int, window: int, stride: int):
    """A rows x 12 stage, then a max over window x window windows at ``stride`` (a pooling)."""
    out = (rows - window) // stride + 1, (12 - window) // stride + 1

    @T.prim_func
    def pool(X: T.Buffer((rows, 12), "float32"), Y: T.Buffer(out, "float32")):
        act = T.alloc_buffer((rows, 12))
        for i, j in T.grid(rows, 12):
            with T.block("act"):
                vi, vj = T.axis.remap("SS", [i, j])
                act[vi, vj] = T.max(X[vi, vj], T.float32(0))
        for i, j, di, dj in T.grid(out[0], out[1], window, window):
            with T.block("pool"):
                vi, vj, vdi, vdj = T.axis.remap("SSRR", [i, j, di, dj])
                with T.init():
                    Y[vi, vj] = T.float32(-1e30)
                Y[vi, vj] = T.max(Y[vi, vj], act[vi * stride + vdi, vj * stride + vdj])
    return pool


def test_reverse_compute_at_runs_a_pooling_under_the_rows_that_hold_its_windows():
    """Under the outer loop of rows split by 2, iteration i makes rows 2i and 2i + 1: the pooling
    runs its output row i there, each window whole (its reduce iterators over their domain)."""
    func = pooled(16, 2, 2)
    sch = tir.Schedule(func)
    outer, _ = sch.split(sch.get_loops(sch.get_block("act"))[0], [None, 4])
    sch.reverse_compute_at(sch.get_block("pool"), outer)
    assert [int(sch.get(lp).extent) for lp in sch.get_loops(sch.get_block("pool"))] == [4, 2, 6, 2, 2]
    assert_schedule_ok(sch, func)
    assert_runs_like(func, sch, outputs=[1])


@pytest.mark.parametrize("rows, window, stride, split, why", [
    (18, 2, 2, 3, "3 rows per iteration cut the windows"),
    (16, 3, 2, 4, "overlapping windows read rows of the next iteration"),
    (16, 2, 3, 4, "windows with gaps are not side by side"),
])
def test_reverse_compute_at_refuses_a_pooling_whose_windows_the_rows_cut(rows, window, stride,
                                                                         split, why):
    func = pooled(rows, window, stride)
    sch = tir.Schedule(func)
    outer, _ = sch.split(sch.get_loops(sch.get_block("act"))[0], [None, split])
    unchanged_after(sch, lambda: sch.reverse_compute_at(sch.get_block("pool"), outer),
                    errors.RegionNotCoverableError, 'block "pool" reads')
