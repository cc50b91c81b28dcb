"""sch.decompose_padding / can_decompose_padding (a padding block split into a constant fill and
an in-bound copy) and sch.pad_einsum (an einsum's iteration space padded to multiples)."""
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import errors
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip

from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after


@T.prim_func
def pad_then_sum(X: T.Buffer((10, 10), "float32"), Y: T.Buffer((10, 10), "float32")):
    P = T.alloc_buffer((14, 14), "float32")
    for i, j in T.grid(14, 14):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            P[vi, vj] = T.if_then_else(2 <= vi and vi < 12 and 2 <= vj and vj < 12,
                                       X[vi - 2, vj - 2], T.float32(0))
    for i, j, di, dj in T.grid(10, 10, 5, 5):
        with T.block("Y"):
            vi, vj, ri, rj = T.axis.remap("SSRR", [i, j, di, dj])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + P[vi + ri, vj + rj]


def test_decompose_at_the_outer_loop():
    sch = tir.Schedule(pad_then_sum)
    pad = sch.get_block("P")
    fill = sch.decompose_padding(pad, sch.get_loops(pad)[0])
    assert sch.get(fill).name_hint == "P_pad_const"
    copy = sch.get(sch.get_block("P"))
    assert [int(iv.dom.extent) for iv in copy.iter_vars] == [10, 10]
    assert [int(lp.extent) for lp in sch.get_loops(sch.get_block("P")) for lp in [sch.get(lp)]] == [10, 10]
    assert_schedule_ok(sch, pad_then_sum)
    assert_runs_like(pad_then_sum, sch, outputs=[1])
    verify_trace_roundtrip(sch, pad_then_sum)


def test_decompose_after_compute_at_keeps_a_guard():
    sch = tir.Schedule(pad_then_sum)
    y = sch.get_block("Y")
    i, j, di, dj = sch.get_loops(y)
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, j, ii)
    sch.compute_at(sch.get_block("P"), io)
    pad = sch.get_block("P")
    sch.decompose_padding(pad, sch.get_loops(pad)[1])
    assert "T.where" in sch.mod["main"].script()
    assert_schedule_ok(sch, pad_then_sum)
    assert_runs_like(pad_then_sum, sch, outputs=[1])


def test_fill_lifted_above_the_consumer_loop():
    sch = tir.Schedule(pad_then_sum)
    y = sch.get_block("Y")
    io, ii = sch.split(sch.get_loops(y)[0], [None, 5])
    sch.compute_at(sch.get_block("P"), io)
    pad = sch.get_block("P")
    sch.decompose_padding(pad, sch.get_loops(pad)[0])   # the fill runs once, before io
    assert_schedule_ok(sch, pad_then_sum)


def test_refuses_a_fill_seen_by_a_consumer_inside_the_loop():
    sch = tir.Schedule(pad_then_sum)
    y = sch.get_block("Y")
    i0, i1, _ = sch.split(sch.get_loops(y)[0], [None, 2, 5])
    sch.compute_at(sch.get_block("P"), i1)
    pad = sch.get_block("P")
    outer, inner, rows = sch.get_loops(pad)[:3]
    unchanged_after(sch, lambda: sch.decompose_padding(pad, inner), errors.PaddingObservedError,
                    '"Y"')
    assert not sch.can_decompose_padding(pad, inner)
    assert sch.can_decompose_padding(pad, rows) and sch.can_decompose_padding(pad, outer)
    sch.decompose_padding(pad, rows)
    assert_schedule_ok(sch, pad_then_sum)


def test_refusals_of_the_pattern():
    @T.prim_func
    def shapes(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32"),
               Z: T.Buffer((8,), "float32"), W: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("plain"):
                vi = T.axis.spatial(8, i)
                Y[vi] = X[vi]
        for i in range(8):
            with T.block("trivial"):
                vi = T.axis.spatial(8, i)
                Z[vi] = T.if_then_else(vi < 8, X[vi], T.float32(0))
        for i in range(8):
            with T.block("mixed"):
                vi = T.axis.spatial(8, i)
                W[vi] = T.if_then_else(vi * vi < 20, X[vi], T.float32(0))

    sch = tir.Schedule(shapes)
    for name, error in [("plain", errors.PaddingPatternError), ("trivial", errors.PaddingTrivialError),
                        ("mixed", errors.PaddingConditionError)]:
        block = sch.get_block(name)
        unchanged_after(sch, lambda: sch.decompose_padding(block, sch.get_loops(block)[0]), error,
                        "decompose_padding")
    other = sch.get_loops(sch.get_block("plain"))[0]
    block = sch.get_block("trivial")
    unchanged_after(sch, lambda: sch.decompose_padding(block, other),
                    errors.PaddingLoopNotAncestorError, "ancestor")


# -- pad_einsum ---------------------------------------------------------------------------------
@T.prim_func
def matmul(A: T.Buffer((30, 20), "float32"), B: T.Buffer((20, 25), "float32"),
           C: T.Buffer((30, 25), "float32")):
    for i, j, k in T.grid(30, 25, 20):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@pytest.mark.parametrize("padding", [[16, 16, 16], [1, 8, 1], [32, 1, 3]])
def test_pad_einsum_computes_the_same(padding):
    sch = tir.Schedule(matmul)
    sch.pad_einsum(sch.get_block("C"), padding)
    assert_schedule_ok(sch, matmul)
    assert_runs_like(matmul, sch, outputs=[2])
    verify_trace_roundtrip(sch, matmul)


def test_pad_einsum_shapes():
    sch = tir.Schedule(matmul)
    sch.pad_einsum(sch.get_block("C"), [16, 16, 16])
    allocs = {b.name: [int(s) for s in b.shape] for b in sch.mod["main"].body.block.alloc_buffers}
    assert allocs == {"A_pad": [32, 32], "B_pad": [32, 32], "C_pad": [32, 32]}
    assert [b.name_hint for b in map(sch.get, [sch.get_block(n) for n in ("A_pad", "B_pad")])]


def test_pad_einsum_refusals():
    @T.prim_func
    def row_max(A: T.Buffer((6, 10), "float32"), M: T.Buffer((6,), "float32")):
        for i, k in T.grid(6, 10):
            with T.block("M"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    M[vi] = T.float32(-1e30)
                M[vi] = T.max(M[vi], A[vi, vk])

    sch = tir.Schedule(row_max)
    m = sch.get_block("M")
    unchanged_after(sch, lambda: sch.pad_einsum(m, [4, 4]), errors.PadEinsumReductionError, "k")
    unchanged_after(sch, lambda: sch.pad_einsum(m, [3, 5]), errors.PadEinsumNothingError, "padding")
    unchanged_after(sch, lambda: sch.pad_einsum(m, [4]), errors.PadEinsumFactorError, "one positive")
    sch.pad_einsum(m, [4, 1])    # padding the spatial iterator only is fine for any reduction
    assert_schedule_ok(sch, row_max)


def test_pad_einsum_refuses_shifted_accesses():
    @T.prim_func
    def shifted(A: T.Buffer((9,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi + 1]

    sch = tir.Schedule(shifted)
    unchanged_after(sch, lambda: sch.pad_einsum(sch.get_block("B"), [16]),
                    errors.PadEinsumNotEinsumError, "plain iterators")


def test_pad_einsum_refuses_an_output_written_in_part():
    @T.prim_func
    def part(A: T.Buffer((6,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(6):
            with T.block("B"):
                vi = T.axis.spatial(6, i)
                B[vi] = A[vi] * T.float32(2)

    sch = tir.Schedule(part)
    unchanged_after(sch, lambda: sch.pad_einsum(sch.get_block("B"), [4]),
                    errors.PadEinsumNotEinsumError, "buffer B")
