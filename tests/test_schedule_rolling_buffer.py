"""sch.rolling_buffer: a tiled intermediate kept as a circular window along its outermost
overlapping tile loop, with recomputation of the overlap skipped; refused wherever the window
could hold the wrong element."""
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import errors
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip

from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after


@T.prim_func
def blur_twice(A: T.Buffer((14, 14), "float32"), C: T.Buffer((10, 10), "float32")):
    B = T.alloc_buffer((12, 12), "float32")
    for i, j, di, dj in T.grid(12, 12, 3, 3):
        with T.block("B"):
            vi, vj, ri, rj = T.axis.remap("SSRR", [i, j, di, dj])
            with T.init():
                B[vi, vj] = T.float32(0)
            B[vi, vj] = B[vi, vj] + A[vi + ri, vj + rj]
    for i, j, di, dj in T.grid(10, 10, 3, 3):
        with T.block("C"):
            vi, vj, ri, rj = T.axis.remap("SSRR", [i, j, di, dj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + B[vi + ri, vj + rj]


def tiled(rows, cols):
    """C tiled rows x cols, B computed at the innermost tile loop."""
    sch = tir.Schedule(blur_twice)
    c = sch.get_block("C")
    i, j, di, dj = sch.get_loops(c)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, cols])
    sch.reorder(io, jo, ii, ji)
    sch.compute_at(sch.get_block("B"), jo)
    return sch


@pytest.mark.parametrize("rows, cols", [(5, 10), (2, 5), (10, 5), (4, 4)])
def test_rolling_buffer_computes_the_same(rows, cols):
    sch = tiled(rows, cols)
    sch.rolling_buffer(sch.get_block("B"), 0)
    assert_schedule_ok(sch, blur_twice)
    assert_runs_like(blur_twice, sch, outputs=[1])
    verify_trace_roundtrip(sch, blur_twice)


def test_the_window_is_the_tile_and_overlap_is_skipped():
    sch = tiled(5, 10)
    sch.rolling_buffer(sch.get_block("B"), 0)
    func = sch.mod["main"]
    (B,) = func.body.block.alloc_buffers
    assert [int(s) for s in B.shape] == [7, 12]       # 5 + 2 rows, modulo 7
    text = func.script()
    assert "vi % 7" in text and "i_0 < 1 or ax0 >= 2" in text
    assert "T.axis.opaque" in text


def test_a_second_stage_after_the_first():
    @T.prim_func
    def three(A: T.Buffer((16,), "float32"), D: T.Buffer((10,), "float32")):
        B = T.alloc_buffer((14,), "float32")
        C = T.alloc_buffer((12,), "float32")
        for i in range(14):
            with T.block("B"):
                v = T.axis.spatial(14, i)
                B[v] = A[v] + A[v + 1] + A[v + 2]
        for i in range(12):
            with T.block("C"):
                v = T.axis.spatial(12, i)
                C[v] = B[v] * B[v + 2]
        for i in range(10):
            with T.block("D"):
                v = T.axis.spatial(10, i)
                D[v] = C[v] - C[v + 2]

    sch = tir.Schedule(three)
    io, _ = sch.split(sch.get_loops(sch.get_block("D"))[0], [None, 2])
    sch.compute_at(sch.get_block("C"), io)
    sch.compute_at(sch.get_block("B"), io)
    sch.rolling_buffer(sch.get_block("B"), 0)
    sch.rolling_buffer(sch.get_block("C"), 0)
    assert_schedule_ok(sch, three)
    assert_runs_like(three, sch, outputs=[1])


def test_refuses_a_block_not_computed_at_its_consumer():
    sch = tir.Schedule(blur_twice)
    unchanged_after(sch, lambda: sch.rolling_buffer(sch.get_block("B"), 0),
                    errors.RollingBufferInsertionError, "rolling_buffer", "not a loop")


def test_refuses_tiles_that_do_not_overlap():
    @T.prim_func
    def pointwise(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("B"):
                v = T.axis.spatial(8, i)
                B[v] = A[v] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                v = T.axis.spatial(8, i)
                C[v] = B[v] * T.float32(2)

    sch = tir.Schedule(pointwise)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    sch.compute_at(sch.get_block("B"), io)
    unchanged_after(sch, lambda: sch.rolling_buffer(sch.get_block("B"), 0),
                    errors.RollingBufferMatchError, "overlaps")


def test_refuses_a_parameter_buffer():
    sch = tiled(5, 10)
    unchanged_after(sch, lambda: sch.rolling_buffer(sch.get_block("C"), 0),
                    errors.RollingBufferNotAllocatedError, "C")


def test_refuses_a_parallel_tile_loop():
    @T.prim_func
    def parallel_tiles(A: T.Buffer((12,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((12,), "float32")
        for i_0 in T.parallel(2):
            for ax0 in range(6):
                with T.block("B"):
                    v = T.axis.spatial(12, i_0 * 4 + ax0)
                    B[v] = A[v] * T.float32(2)
            for i_1 in range(4):
                with T.block("C"):
                    v = T.axis.spatial(8, i_0 * 4 + i_1)
                    C[v] = B[v] + B[v + 2]

    sch = tir.Schedule(parallel_tiles)
    unchanged_after(sch, lambda: sch.rolling_buffer(sch.get_block("B"), 0),
                    errors.RollingBufferUnsafeError, "parallel")


def test_refuses_a_consumer_reading_behind_the_window():
    @T.prim_func
    def looks_back(A: T.Buffer((12,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((12,), "float32")
        for i_0 in range(2):
            for ax0 in range(6):
                with T.block("B"):
                    v = T.axis.spatial(12, i_0 * 4 + ax0)
                    B[v] = A[v] * T.float32(2)
            for i_1 in range(4):
                with T.block("C"):
                    v = T.axis.spatial(8, i_0 * 4 + i_1)
                    C[v] = B[v + 2] + B[i_1]     # B[i_1] lies in the first tile only

    sch = tir.Schedule(looks_back)
    unchanged_after(sch, lambda: sch.rolling_buffer(sch.get_block("B"), 0),
                    errors.RollingBufferUnsafeError, "outside the tile")


def test_refuses_an_input_rewritten_under_the_loop():
    @T.prim_func
    def overwrites(A: T.Buffer((12,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((12,), "float32")
        S = T.alloc_buffer((12,), "float32")
        for i_0 in range(2):
            for ax0 in range(12):
                with T.block("S"):
                    v = T.axis.spatial(12, ax0)
                    k = T.axis.spatial(2, i_0)
                    S[v] = A[v] + T.Cast("float32", k)
            for ax0 in range(6):
                with T.block("B"):
                    v = T.axis.spatial(12, i_0 * 4 + ax0)
                    B[v] = S[v] * T.float32(2)
            for i_1 in range(4):
                with T.block("C"):
                    v = T.axis.spatial(8, i_0 * 4 + i_1)
                    C[v] = B[v] + B[v + 2]

    sch = tir.Schedule(overwrites)
    with pytest.raises(errors.RollingBufferError):
        sch.rolling_buffer(sch.get_block("B"), 0)


def test_index_out_of_range():
    sch = tiled(5, 10)
    unchanged_after(sch, lambda: sch.rolling_buffer(sch.get_block("B"), 1),
                    errors.BufferIndexOutOfRangeError, "out of range")
