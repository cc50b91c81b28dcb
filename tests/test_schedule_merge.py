"""sch.merge: loop nests of the same shape side by side become one nest running their bodies in
turn; refused where interleaving their iterations could change what is computed."""
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import errors
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip

from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after


@T.prim_func
def two_outputs(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32"),
                C: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * T.float32(3)


@T.prim_func
def chained(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[15 - vi]


def loops_of(sch, name):
    return sch.get_loops(sch.get_block(name))


@pytest.mark.parametrize("depth", [0, 1])
def test_merge_outer_or_both_levels(depth):
    sch = tir.Schedule(two_outputs)
    merged = sch.merge(loops_of(sch, "B")[depth], loops_of(sch, "C")[depth])
    assert sch.get(merged).loop_var.name == ("i_m", "j_m")[depth]
    assert_schedule_ok(sch, two_outputs)
    assert_runs_like(two_outputs, sch, outputs=[1, 2])
    verify_trace_roundtrip(sch, two_outputs)
    assert len(sch.get_loops(sch.get_block("B"))) == 2


def test_merged_nest_takes_the_last_loops_place():
    sch = tir.Schedule(two_outputs)
    sch.merge(loops_of(sch, "C")[0], loops_of(sch, "B")[0])
    body = sch.mod["main"].body.block.body
    assert isinstance(body, tir.For) and body.loop_var.name == "i_m"
    assert [b.name_hint for b in [s.body.block for s in body.body.seq]] == ["C", "B"]
    assert_schedule_ok(sch, two_outputs)


def test_refuses_nests_with_a_dependence():
    sch = tir.Schedule(chained)
    unchanged_after(sch, lambda: sch.merge(loops_of(sch, "B")[0], loops_of(sch, "C")[0]),
                    errors.MergeDependenceError, "merge", "B")


def test_refuses_moving_a_nest_past_a_statement_it_depends_on():
    @T.prim_func
    def three(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
              D: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[7 - vi]
        for i in range(8):
            with T.block("D"):
                vi = T.axis.spatial(8, i)
                D[vi] = A[vi] * T.float32(2)

    sch = tir.Schedule(three)
    unchanged_after(sch, lambda: sch.merge(loops_of(sch, "B")[0], loops_of(sch, "D")[0]),
                    errors.MergeDependenceError, "between the nests")


def test_refuses_different_extents_and_depths():
    @T.prim_func
    def uneven(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 8), "float32"),
               C: T.Buffer((16, 8), "float32")):
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for i, j in T.grid(16, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj]

    sch = tir.Schedule(uneven)
    unchanged_after(sch, lambda: sch.merge(loops_of(sch, "B")[0], loops_of(sch, "C")[0]),
                    errors.MergeExtentMismatchError, "extent")
    unchanged_after(sch, lambda: sch.merge(loops_of(sch, "B")[0], loops_of(sch, "C")[1]),
                    errors.MergeDepthMismatchError, "loop(s)")


def test_refuses_a_loop_not_starting_at_zero_and_a_single_loop():
    @T.prim_func
    def shifted(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
                C: T.Buffer((8,), "float32")):
        for i in range(1, 8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
        for i in range(7):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = A[vi]

    sch = tir.Schedule(shifted)
    b, c = loops_of(sch, "B")[0], loops_of(sch, "C")[0]
    unchanged_after(sch, lambda: sch.merge(b, c), errors.MergeLoopNotStartingAtZeroError, "starts at")
    unchanged_after(sch, lambda: sch.merge(c, c), errors.MergeTooFewLoopsError, "two distinct")


def test_refuses_loops_of_different_scopes():
    @T.prim_func
    def scoped(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
               C: T.Buffer((8,), "float32")):
        with T.block("outer"):
            for i in range(8):
                with T.block("B"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = A[vi]

    sch = tir.Schedule(scoped)
    unchanged_after(sch, lambda: sch.merge(loops_of(sch, "B")[0], loops_of(sch, "C")[0]),
                    errors.MergeDifferentScopeError, "same block")


def test_merge_under_a_common_loop():
    @T.prim_func
    def rows(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32"),
             C: T.Buffer((4, 8), "float32")):
        for i in range(4):
            for j in range(8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vi, vj] + T.float32(1)
            for j in range(8):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj] - T.float32(1)

    sch = tir.Schedule(rows)
    sch.merge(loops_of(sch, "B")[1], loops_of(sch, "C")[1])
    assert [sch.get(lp).loop_var.name for lp in loops_of(sch, "C")] == ["i", "j_m"]
    assert_schedule_ok(sch, rows)
