"""sch.read_at / sch.write_at: a buffer staged through a copy in another scope at a loop, the copy
block covering what the block touches in one iteration (all threads sharing the scope)."""
import pytest
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import errors
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip

from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after


@T.prim_func
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
           C: T.Buffer((16, 16), "float32")):
    for i0, j0, k0, i1, j1, k1 in T.grid(4, 4, 4, 4, 4, 4):
        with T.block("C"):
            vi = T.axis.spatial(16, i0 * 4 + i1)
            vj = T.axis.spatial(16, j0 * 4 + j1)
            vk = T.axis.reduce(16, k0 * 4 + k1)
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_read_at_then_write_at():
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i0, j0, k0, i1, j1, k1 = sch.get_loops(block)
    a = sch.read_at(k0, block, 0, "local")     # the reads are A and B (C is the reduction's)
    b = sch.read_at(k0, block, 1, "local")
    c = sch.write_at(j0, block, 0, "local")
    names = [sch.get(x).name_hint for x in (a, b, c)]
    assert names == ["A_local", "B_local", "C_local"]
    copy_a = sch.get(a)
    assert [int(r.extent) for r in copy_a.writes[0].region] == [4, 4]
    assert copy_a.annotations["auto_copy"] == 1
    assert_schedule_ok(sch, matmul)
    assert_runs_like(matmul, sch, outputs=[2])
    verify_trace_roundtrip(sch, matmul)


def test_write_at_refuses_a_region_written_in_other_iterations():
    @T.prim_func
    def strided(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i0, i1 in T.grid(4, 4):
            with T.block("B"):
                vi = T.axis.spatial(16, i1 * 4 + i0)    # each i0 writes a strided comb
                B[vi] = A[vi] * T.float32(2)

    sch = tir.Schedule(strided)
    block = sch.get_block("B")
    i0 = sch.get_loops(block)[0]
    unchanged_after(sch, lambda: sch.write_at(i0, block, 0, "local"), errors.WriteAtCoverageError,
                    "write_at")


def test_write_at_refuses_other_readers_and_loops_not_above():
    @T.prim_func
    def two(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] * T.float32(2)

    sch = tir.Schedule(two)
    b, c = sch.get_block("B"), sch.get_block("C")
    unchanged_after(sch, lambda: sch.write_at(sch.get_loops(b)[0], b, 0, "local"),
                    errors.WriteAtOtherAccessError, '"C"')
    unchanged_after(sch, lambda: sch.read_at(sch.get_loops(b)[0], c, 0, "local"),
                    errors.ReadWriteAtLoopNotAncestorError, "ancestor")
    unchanged_after(sch, lambda: sch.read_at(sch.get_loops(c)[0], c, 0, "nowhere"),
                    errors.UnknownStorageScopeError)
    sch.compute_at(b, sch.get_loops(c)[0])
    unchanged_after(sch, lambda: sch.read_at(sch.get_loops(c)[0], c, 0, "local"),
                    errors.ReadAtWrittenUnderLoopError, '"B"')


def test_read_at_copy_whose_iterations_overlap_has_opaque_iterators():
    """Under a fused loop the copy of b[v0 % 7] is repeated every 7 iterations: its iterator is
    opaque, so the loop cannot be bound to threads that would copy one element together."""
    @T.prim_func
    def add_row(A: T.Buffer((14, 7), "float32"), b: T.Buffer((7,), "float32"),
                C: T.Buffer((14, 7), "float32")):
        for f in range(98):
            with T.block("C"):
                vi = T.axis.spatial(14, f // 7)
                vj = T.axis.spatial(7, f % 7)
                C[vi, vj] = A[vi, vj] + b[vj]

    sch = tir.Schedule(add_row)
    copy = sch.read_at(sch.get_loops(sch.get_block("C"))[0], sch.get_block("C"), 1, "shared")
    assert [iv.iter_type for iv in sch.get(copy).iter_vars] == ["opaque"]
    assert_runs_like(add_row, sch, outputs=[2])
    with pytest.raises(tir.schedule.ScheduleError):
        sch.bind(sch.get_loops(copy)[0], "threadIdx.x")


def test_read_at_under_a_skipping_block_skips_the_same_iterations():
    """The reduction reads A only where k < 5. A first copy of A at the outer loop holds those
    columns alone; a second copy under the fused loop must skip the iterations the block skips,
    or it would read the columns the first copy never wrote."""
    @T.prim_func
    def partial_sum(A: T.Buffer((6, 9), "float32"), S: T.Buffer((6,), "float32")):
        for i, k in T.grid(6, 9):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.where(k < 5)
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + A[vi, vk]

    sch = tir.Schedule(partial_sum)
    block = sch.get_block("S")
    sch.fuse(*sch.get_loops(block))
    sch.add_unit_loop(sch.get_loops(block)[0])
    sch.read_at(sch.get_loops(block)[0], block, 0, "global")
    second = sch.read_at(sch.get_loops(block)[1], block, 0, "global")
    copy = sch.mod["main"].script().split(f'T.block("{second.name}")')[1].split("T.block(")[0]
    assert "T.where(i_k_fused % 9 < 5)" in copy
    assert_runs_like(partial_sum, sch, outputs=[1])   # the interpreter refuses uninitialized reads
