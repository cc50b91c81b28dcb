"""decompose_reduction and rfactor: expected IR, numerics, trace replay, errors, and the course's
rule about the order of decompose_reduction and parallel/vectorize."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab.tir.schedule import errors

from mlc_lab import tir
from mlc_lab.script import tir as T
from schedule_checks import assert_schedule_ok, unchanged_after

from corpus import conv2d_nchw, mm_relu, softmax


# -- decompose_reduction --------------------------------------------------------------------------
@T.prim_func
def mm_relu_decomposed(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
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
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def split_reorder(sch):
    block_Y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    return block_Y, (i, j0, k, j1)


def test_course_decompose_reduction():
    sch = tir.Schedule(mm_relu)
    block_Y, (i, j0, k, j1) = split_reorder(sch)
    init = sch.decompose_reduction(block_Y, k)
    assert init.name == "Y_init"
    assert sch.get_block("Y_update").name == "Y_update"
    assert_schedule_ok(sch, mm_relu, mm_relu_decomposed)
    assert sch.trace.as_python()[-2] == "b6 = sch.decompose_reduction(block=b0, loop=l3)"


@pytest.mark.skipif(not hasattr(tir.Schedule, "reverse_compute_at"),
                    reason="reverse_compute_at not available")
def test_course_sequence_with_reverse_compute_at():
    sch = tir.Schedule(mm_relu)
    block_Y, (i, j0, k, j1) = split_reorder(sch)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(block_Y, k)
    func = sch.mod["main"]
    loop_j0 = func.body.block.body.body
    assert [type(s).__name__ for s in loop_j0.body.seq] == ["For", "For", "For"]
    assert_schedule_ok(sch, mm_relu)


def test_decompose_at_the_outermost_loop():
    sch = tir.Schedule(mm_relu)
    block_Y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_Y)
    sch.decompose_reduction(block_Y, i)
    init_nest = sch.mod["main"].body.block.body.seq[0]
    assert (init_nest.loop_var.name, init_nest.body.loop_var.name) == ("i_init", "j_init")
    assert_schedule_ok(sch, mm_relu)


def test_decompose_conv_with_several_reduce_loops():
    sch = tir.Schedule(conv2d_nchw)
    block = sch.get_block("conv")
    loops = sch.get_loops(block)
    sch.decompose_reduction(block, loops[4])
    assert_schedule_ok(sch, conv2d_nchw)


def test_vectorize_before_decompose_carries_over_to_the_init():
    sch = tir.Schedule(mm_relu)
    block_Y, (i, j0, k, j1) = split_reorder(sch)
    sch.vectorize(j1)
    sch.parallel(i)
    sch.decompose_reduction(block_Y, k)
    init_loop = sch.mod["main"].body.block.body.seq[0].body.body.seq[0]
    assert (init_loop.loop_var.name, init_loop.kind) == ("j_1_init", "vectorized")
    assert_schedule_ok(sch, mm_relu)


def test_parallel_after_decompose_is_not_compact_dataflow():
    sch = tir.Schedule(mm_relu)
    block_Y, (i, j0, k, j1) = split_reorder(sch)
    sch.decompose_reduction(block_Y, k)
    unchanged_after(sch, lambda: sch.parallel(i), tir.schedule.NotCompactDataflowError,
                    "Y_update", "Y_init", "decompose_reduction")


def test_decompose_errors():
    sch = tir.Schedule(mm_relu)
    block_Y, (i, j0, k, j1) = split_reorder(sch)
    (ci, cj) = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.decompose_reduction(block_Y, ci),
                    tir.schedule.LoopNotAncestorError, "loop i", '"Y"')
    unchanged_after(sch, lambda: sch.decompose_reduction(sch.get_block("C"), ci),
                    tir.schedule.NotReductionBlockError, '"C"')
    unchanged_after(sch, lambda: sch.decompose_reduction(block_Y, j1),
                    tir.schedule.LoopHeightError, "j_1", "loop k")
    with pytest.raises(TypeError, match="LoopRV"):
        sch.decompose_reduction(block_Y, block_Y)


# -- rfactor ------------------------------------------------------------------------------------------
@T.prim_func
def rowsum(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def rowsum_rf(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    B_rf = T.alloc_buffer((4, 8))
    for i, k_0, k_1 in T.grid(8, 16, 4):
        with T.block("B_rf"):
            vk_1 = T.axis.spatial(4, k_1)
            vi = T.axis.spatial(8, i)
            vk_0 = T.axis.reduce(16, k_0)
            with T.init():
                B_rf[vk_1, vi] = T.float32(0)
            B_rf[vk_1, vi] = B_rf[vk_1, vi] + A[vi, vk_0 * 4 + vk_1]
    for i, k_1 in T.grid(8, 4):
        with T.block("B"):
            vk_1 = T.axis.reduce(4, k_1)
            vi = T.axis.spatial(8, i)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + B_rf[vk_1, vi]


def test_rfactor_inner_split_loop():
    sch = tir.Schedule(rowsum)
    i, k = sch.get_loops(sch.get_block("B"))
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, 0)
    assert rf.name == "B_rf"
    assert_schedule_ok(sch, rowsum, rowsum_rf)
    assert sch.trace.as_python()[-1] == "b5 = sch.rfactor(loop=l4, factor_axis=0)"


@T.prim_func
def rowsum_rf_last_axis(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    B_rf = T.alloc_buffer((8, 16))
    for i, k_0, k_1 in T.grid(8, 16, 4):
        with T.block("B_rf"):
            vk_0 = T.axis.spatial(16, k_0)
            vi = T.axis.spatial(8, i)
            vk_1 = T.axis.reduce(4, k_1)
            with T.init():
                B_rf[vi, vk_0] = T.float32(0)
            B_rf[vi, vk_0] = B_rf[vi, vk_0] + A[vi, vk_0 * 4 + vk_1]
    for i, k_0 in T.grid(8, 16):
        with T.block("B"):
            vk_0 = T.axis.reduce(16, k_0)
            vi = T.axis.spatial(8, i)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + B_rf[vi, vk_0]


def test_rfactor_outer_split_loop_on_the_last_axis():
    sch = tir.Schedule(rowsum)
    i, k = sch.get_loops(sch.get_block("B"))
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k0, -1)
    assert_schedule_ok(sch, rowsum, rowsum_rf_last_axis)


def test_rfactor_unsplit_loop_then_parallel_the_rf_loop():
    sch = tir.Schedule(rowsum)
    i, k = sch.get_loops(sch.get_block("B"))
    sch.rfactor(k, 0)
    assert sch.mod["main"].body.block.alloc_buffers[0].shape[0].value == 64
    rf_loops = sch.get_loops(sch.get_block("B_rf"))
    sch.parallel(rf_loops[1])
    assert_schedule_ok(sch, rowsum)


def test_rfactor_max_reduction_in_softmax():
    sch = tir.Schedule(softmax)
    i, k = sch.get_loops(sch.get_block("maxelem"))
    k0, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, 1)
    assert sch.mod["main"].body.block.alloc_buffers[-1].name == "maxelem_rf"
    assert_schedule_ok(sch, softmax)


def test_rfactor_then_decompose_both_stages():
    sch = tir.Schedule(mm_relu)
    block_Y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_Y)
    k0, k1 = sch.split(k, [None, 8])
    rf = sch.rfactor(k1, 2)
    rf_loops = sch.get_loops(rf)
    sch.decompose_reduction(rf, rf_loops[2])
    sch.decompose_reduction(sch.get_block("Y"), sch.get_loops(sch.get_block("Y"))[2])
    assert_schedule_ok(sch, mm_relu)


@T.prim_func
def rowsum_not_identity(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def rowsum_square(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] * B[vi] - A[vi, vk]


def test_rfactor_errors():
    sch = tir.Schedule(rowsum)
    i, k = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: sch.rfactor(i, 0), tir.schedule.NotSingleReduceIterError,
                    "loop i", "vi", '"B"')
    unchanged_after(sch, lambda: sch.rfactor(k, 3), tir.schedule.FactorAxisOutOfRangeError,
                    "factor_axis 3", "B_rf")
    with pytest.raises(TypeError, match="factor_axis"):
        sch.rfactor(k, "0")
    for func in (rowsum_not_identity, rowsum_square):
        other = tir.Schedule(func)
        (_, kk) = other.get_loops(other.get_block("B"))
        unchanged_after(other, lambda: other.rfactor(kk, 0), tir.schedule.ReducerNotRecognizedError,
                        '"B"')
    mm = tir.Schedule(mm_relu)
    ci, cj = mm.get_loops(mm.get_block("C"))
    unchanged_after(mm, lambda: mm.rfactor(cj, 0), tir.schedule.NotReductionBlockError, '"C"')


@T.prim_func
def two_blocks_one_loop(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32"),
                        C: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in range(16):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] * T.float32(2)


def test_rfactor_loop_with_two_blocks():
    sch = tir.Schedule(two_blocks_one_loop)
    i, k = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: sch.rfactor(i, 0), tir.schedule.LoopHoldsOtherBlocksError, "loop i",
                    '"B"', '"C"')
    sch.rfactor(k, 0)
    assert_schedule_ok(sch, two_blocks_one_loop)


@T.prim_func
def normalize_rows(A: T.Buffer((6, 25), "float32"), B: T.Buffer((6, 25), "float32")):
    sm = T.alloc_buffer((6,), "float32")
    for i, k in T.grid(6, 25):
        with T.block("sm"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                sm[vi] = T.float32(0)
            sm[vi] = sm[vi] + A[vi, vk]
    for i, j in T.grid(6, 25):
        with T.block("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] / sm[vi]


def _row_sum_under_fused_consumer_loop():
    sch = tir.Schedule(normalize_rows)
    i, j = sch.get_loops(sch.get_block("out"))
    fused = sch.fuse(i, j)
    sch.compute_at(sch.get_block("sm"), fused, preserve_unit_loops=True)
    return sch


def test_decompose_reduction_refuses_to_hoist_the_init_above_a_loop_that_repeats_the_reduction():
    sch = _row_sum_under_fused_consumer_loop()
    sm = sch.get_block("sm")
    before = sch.mod
    with pytest.raises(errors.RepeatedIterationError):
        sch.decompose_reduction(sm, sch.get_loops(sm)[0])
    assert sch.mod is before


def test_decompose_reduction_below_the_repeating_loop_keeps_numerics():
    sch = _row_sum_under_fused_consumer_loop()
    sm = sch.get_block("sm")
    sch.decompose_reduction(sm, sch.get_loops(sm)[-1])
    a = np.random.default_rng(0).uniform(1, 2, (6, 25)).astype("float32")
    for target in ("python", "llvm"):
        b = np.full((6, 25), np.nan, "float32")
        mlc_lab.build(sch.mod, target=target)["main"](a, b)
        np.testing.assert_allclose(b, a / a.sum(1, keepdims=True), rtol=1e-5)


@T.prim_func
def row_sum_10(A: T.Buffer((4, 10), "float32"), S: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 10):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_rfactor_of_a_non_divisible_split_writes_back_only_the_slots_it_fills(target):
    sch = tir.Schedule(row_sum_10)
    i, k = sch.get_loops(sch.get_block("S"))
    ko, ki = sch.split(k, factors=[6, None])     # 12 iterations for 10: slot ko=5 stays empty
    sch.rfactor(ko, factor_axis=0)
    write_back = sch.mod.script().split('T.block("S")')[1]
    assert "T.where(k_0 * 2 < 10)" in write_back
    a = np.random.default_rng(0).standard_normal((4, 10)).astype("float32")
    s = np.full(4, np.nan, "float32")
    mlc_lab.build(sch.mod, target=target)["main"](a, s)
    np.testing.assert_allclose(s, a.sum(1), rtol=1e-5, atol=1e-5)


def test_rfactor_refuses_a_loop_nest_that_fuses_spatial_and_reduce_loops():
    sch = tir.Schedule(row_sum_10)
    i, k = sch.get_loops(sch.get_block("S"))
    ko, ki = sch.split(k, factors=[5, 2])
    sch.reorder(ko, i, ki)
    sch.fuse(ko, i)
    before = sch.mod
    with pytest.raises(errors.MixedIterTypeLoopError):
        sch.rfactor(ki, factor_axis=0)
    assert sch.mod is before


def test_rfactor_refuses_predicates_it_cannot_carry_to_the_write_back():
    sch = tir.Schedule(row_sum_10)
    i, k = sch.get_loops(sch.get_block("S"))
    k0, k1 = sch.split(k, factors=[4, None])      # 4 x 3: k0 * 3 + k1 < 10
    k10, k11 = sch.split(k1, factors=[2, None])   # 2 x 2: k10 * 2 + k11 < 3 as well
    before = sch.mod
    with pytest.raises(errors.PredicateNotFactorableError):
        sch.rfactor(k0, factor_axis=0)
    assert sch.mod is before


@T.prim_func
def sum_two_axes(A: T.Buffer((4, 3, 3), "float32"), S: T.Buffer((4,), "float32")):
    for i, c, k in T.grid(4, 3, 3):
        with T.block("S"):
            vi, vc, vk = T.axis.remap("SRR", [i, c, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vc, vk]


def test_rfactor_write_back_drops_a_guard_every_slot_satisfies():
    # The overhanging split of k guards S with k_0 * 2 + k_1 + k_2 < 3; every rf slot (one per c)
    # has iterations that pass it (k_0 = k_1 = k_2 = 0), so the write-back needs no T.where: the
    # guard over the loops it leaves folds to true and is dropped, not kept as "0 < 3".
    sch = tir.Schedule(sum_two_axes)
    sch.split(sch.get_loops(sch.get_block("S"))[2], factors=[2, 2, None])
    sch.rfactor(sch.get_loops(sch.get_block("S"))[1], factor_axis=0)
    assert "T.where" not in sch.mod["main"].script().split('T.block("S")')[1]
    assert_schedule_ok(sch, sum_two_axes)


# -- rfactor of two-output reducers, LetStmt updates, loops feeding several iterators -------------
@T.prim_func
def row_argmax(V: T.Buffer((6, 24), "float32"), I: T.Buffer((6,), "int32"),
               M: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 24):
        with T.block("amax"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = -1
                M[vi] = T.min_value("float32")
            new_i: T.int32 = T.Select(M[vi] >= V[vi, vk], I[vi], vk)
            new_m: T.float32 = T.Select(M[vi] >= V[vi, vk], M[vi], V[vi, vk])
            I[vi] = new_i
            M[vi] = new_m


@T.prim_func
def row_argmin_ties_to_first(V: T.Buffer((6, 24), "float32"), I: T.Buffer((6,), "int32"),
                             M: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 24):
        with T.block("amin"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                M[vi] = T.max_value("float32")
                I[vi] = -1
            new_i: T.int32 = T.Select(M[vi] < V[vi, vk] or (M[vi] == V[vi, vk] and I[vi] < vk),
                                      I[vi], vk)
            new_m: T.float32 = T.Select(M[vi] < V[vi, vk], M[vi], V[vi, vk])
            M[vi] = new_m
            I[vi] = new_i


@T.prim_func
def row_argmax_stores_in_place(V: T.Buffer((6, 24), "float32"), I: T.Buffer((6,), "int32"),
                               M: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 24):
        with T.block("amax"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = -1
                M[vi] = T.min_value("float32")
            M[vi] = T.Select(M[vi] >= V[vi, vk], M[vi], V[vi, vk])
            I[vi] = T.Select(M[vi] >= V[vi, vk], I[vi], vk)


@T.prim_func
def row_argmax_ties_to_first(V: T.Buffer((6, 24), "float32"), I: T.Buffer((6,), "int32"),
                             M: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 24):
        with T.block("amax"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                I[vi] = -1
                M[vi] = T.min_value("float32")
            new_i: T.int32 = T.Select(M[vi] > V[vi, vk] or (M[vi] == V[vi, vk] and I[vi] < vk),
                                      I[vi], vk)
            new_m: T.float32 = T.Select(M[vi] > V[vi, vk], M[vi], V[vi, vk])
            I[vi] = new_i
            M[vi] = new_m


def test_rfactor_refuses_an_argmax_whose_ties_depend_on_the_order():
    """With ``>=`` the first index among equal maxima wins; partial results combined in another
    order could return another one (a row 0, 5, 5 split in two would give index 2, not 1)."""
    sch = tir.Schedule(row_argmax)
    _, k = sch.get_loops(sch.get_block("amax"))
    _, k1 = sch.split(k, [None, 4])
    unchanged_after(sch, lambda: sch.rfactor(k1, 1), tir.schedule.ReducerNotRecognizedError,
                    "keeps the index seen first among equal values", "break ties by the index")


def test_rfactor_of_an_argmax_with_ties_broken_by_index_returns_the_first_index():
    sch = tir.Schedule(row_argmax_ties_to_first)
    i, k = sch.get_loops(sch.get_block("amax"))
    sch.rfactor(sch.split(k, [None, 4])[1], 1)
    values = np.zeros((6, 24), "float32")
    values[:, [3, 9, 17]] = 1.0   # three equal maxima per row, in different rf slots
    index = mlc_lab.nd.array(np.zeros(6, "int32"))
    best = mlc_lab.nd.array(np.zeros(6, "float32"))
    mlc_lab.build(sch.mod, target="llvm")(mlc_lab.nd.array(values), index, best)
    assert index.numpy().tolist() == [3] * 6 and best.numpy().tolist() == [1.0] * 6


@pytest.mark.parametrize("func, name", [(row_argmax_ties_to_first, "amax"),
                                        (row_argmin_ties_to_first, "amin")])
def test_rfactor_of_an_argmax_pair_keeps_both_outputs(func, name):
    sch = tir.Schedule(func)
    i, k = sch.get_loops(sch.get_block(name))
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k1, 1)
    block = sch.get(rf)
    assert sorted(w.buffer.name for w in block.writes) == ["I_rf", "M_rf"]
    assert [tuple(int(s) for s in w.buffer.shape) for w in block.writes] == [(6, 4), (6, 4)]
    write_back = sch.get(sch.get_block(name))
    assert sorted(r.buffer.name for r in write_back.reads) == ["I_rf", "M_rf"]
    sch.parallel(sch.get_loops(rf)[0])
    assert_schedule_ok(sch, func)


def test_rfactor_refuses_outputs_stored_one_after_the_other():
    # the second store reads the value the first one just wrote: not a reducer pair
    sch = tir.Schedule(row_argmax_stores_in_place)
    _, k = sch.get_loops(sch.get_block("amax"))
    unchanged_after(sch, lambda: sch.rfactor(k, 0), tir.schedule.ReducerNotRecognizedError,
                    '"amax"', "LetStmt")


@T.prim_func
def rowsum_through_let(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            acc: T.float32 = B[vi] + A[vi, vk] * T.float32(3)
            B[vi] = acc


def test_rfactor_of_an_update_written_through_a_let():
    sch = tir.Schedule(rowsum_through_let)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 8])
    rf = sch.rfactor(k1, 0)
    assert isinstance(sch.get(rf).body, tir.BufferStore)   # the let is folded into the store
    assert_schedule_ok(sch, rowsum_through_let)


@T.prim_func
def window_sum(A: T.Buffer((4, 6, 6), "float32"), B: T.Buffer((4,), "float32")):
    for c, r, u in T.grid(4, 36, 1):
        with T.block("B"):
            vc = T.axis.spatial(4, c)
            rh = T.axis.reduce(6, r // 6)
            rw = T.axis.reduce(6, r % 6)
            with T.init():
                B[vc] = T.float32(0)
            B[vc] = B[vc] + A[vc, rh, rw]


def test_rfactor_of_a_loop_feeding_two_reduce_iterators_is_a_copy():
    sch = tir.Schedule(window_sum)
    _, r, _ = sch.get_loops(sch.get_block("B"))
    rf = sch.rfactor(r, 1)
    block = sch.get(rf)
    assert block.init is None and all(iv.iter_type == "spatial" for iv in block.iter_vars)
    assert_schedule_ok(sch, window_sum)


def test_rfactor_of_a_unit_loop_that_feeds_no_iterator():
    sch = tir.Schedule(window_sum)
    _, _, u = sch.get_loops(sch.get_block("B"))
    sch.rfactor(u, 0)
    assert_schedule_ok(sch, window_sum)
    other = tir.Schedule(window_sum)
    c, _, _ = other.get_loops(other.get_block("B"))
    other.reorder(other.get_loops(other.get_block("B"))[1], c)
    _, c, _ = other.get_loops(other.get_block("B"))
    unchanged_after(other, lambda: other.rfactor(c, 0), tir.schedule.NotSingleReduceIterError,
                    "loop c", "vc")


@T.prim_func
def produce_then_reduce(A: T.Buffer((8, 16), "float32"), S: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8, 16), "float32")
    for i in range(8):
        for k in range(16):
            with T.block("P"):
                vi, vk = T.axis.remap("SS", [i, k])
                B[vi, vk] = A[vi, vk] * T.float32(2)
        for k in range(16):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + B[vi, vk]


def test_rfactor_hoists_the_rf_nest_before_loops_shared_with_other_blocks():
    sch = tir.Schedule(two_blocks_one_loop)
    _, k = sch.get_loops(sch.get_block("B"))
    rf = sch.rfactor(k, 0)
    first = sch.mod["main"].body.block.body.seq[0]
    assert isinstance(first, tir.For) and first.body.body.block.name_hint == "B_rf"
    assert len(sch.get_loops(rf)) == 2
    assert_schedule_ok(sch, two_blocks_one_loop)


def test_rfactor_keeps_the_rf_nest_after_the_block_that_produces_its_input():
    # P fills B inside the same loop i: hoisting S_rf above loop i would read B too early
    sch = tir.Schedule(produce_then_reduce)
    i, k = sch.get_loops(sch.get_block("S"))
    rf = sch.rfactor(k, 0)
    assert sch.get(sch.get_loops(rf)[0]).loop_var is sch.get(i).loop_var
    assert_schedule_ok(sch, produce_then_reduce)
