"""blockize and tensorize: expected IR, numerics against the interpreter, trace replay, errors."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import TensorIntrin
from mlc_lab.tir.verify import verify
from schedule_checks import assert_replays, assert_same_numerics, unchanged_after
from corpus import symbolic_add


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
def matmul_blockized(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                     C: T.Buffer((64, 64), "float32")):
    for i_0, j_0, k_0 in T.grid(4, 4, 4):
        with T.block("C_o"):
            vi_o, vj_o, vk_o = T.axis.remap("SSR", [i_0, j_0, k_0])
            with T.init():
                for i_1_init, j_1_init in T.grid(16, 16):
                    with T.block("C_init"):
                        vi_i_init, vj_i_init = T.axis.remap("SS", [i_1_init, j_1_init])
                        C[vi_o * 16 + vi_i_init, vj_o * 16 + vj_i_init] = T.float32(0)
            for i_1, j_1, k_1 in T.grid(16, 16, 16):
                with T.block("C"):
                    vi_i, vj_i, vk_i = T.axis.remap("SSR", [i_1, j_1, k_1])
                    C[vi_o * 16 + vi_i, vj_o * 16 + vj_i] = (
                        C[vi_o * 16 + vi_i, vj_o * 16 + vj_i]
                        + A[vi_o * 16 + vi_i, vk_o * 16 + vk_i] * B[vk_o * 16 + vk_i, vj_o * 16 + vj_i])


def tiled(func, tile=16):
    sch = tir.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, tile])
    j0, j1 = sch.split(j, [None, tile])
    k0, k1 = sch.split(k, [None, tile])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return sch, i1


def test_blockize_tiled_matmul():
    sch, i1 = tiled(matmul)
    outer = sch.blockize(i1)
    assert outer.name == "C_o"
    assert_structural_equal(sch.mod["main"], matmul_blockized.with_attr("global_symbol", "matmul"))
    assert_same_numerics(matmul, sch.mod["main"])
    assert_replays(sch, matmul)
    assert sch.trace.as_python()[-1] == "b10 = sch.blockize(target=l5)"
    # the inner block keeps its name; its loops now stop at the outer block
    assert [lp.var.name for lp in sch.get_loops(sch.get_block("C"))] == ["i_1", "j_1", "k_1"]
    assert [lp.var.name for lp in sch.get_loops(outer)] == ["i_0", "j_0", "k_0"]


def test_blockize_outer_reduction_loop_inside():
    sch, _ = tiled(matmul)
    _, _, k0, _, _, _ = sch.get_loops(sch.get_block("C"))
    sch.blockize(k0)
    outer = sch.mod["main"].body.block.body.body.body
    assert outer.block.name_hint == "C_o"
    assert [iv.iter_type for iv in outer.block.iter_vars] == ["spatial", "spatial", "reduce"]
    assert [iv.dom.extent.value for iv in outer.block.iter_vars] == [4, 4, 1]
    assert outer.block.init is not None
    assert_same_numerics(matmul, sch.mod["main"])
    assert_replays(sch, matmul)


def test_blockize_twice_nests_blocks_and_inits():
    sch, i1 = tiled(matmul)
    sch.blockize(i1)
    _, j0, _ = sch.get_loops(sch.get_block("C_o"))
    outer = sch.blockize(j0)
    assert outer.name == "C_o_o"
    text = sch.mod.script()
    assert 'T.block("C_o_init")' in text and 'T.block("C_init")' in text
    verify(sch.mod)
    assert_structural_equal(from_source(text), sch.mod)
    assert_same_numerics(matmul, sch.mod["main"])
    assert_replays(sch, matmul)


@T.prim_func
def vector_add_300(A: T.Buffer((300,), "float32"), B: T.Buffer((300,), "float32")):
    for i in range(300):
        with T.block("B"):
            vi = T.axis.spatial(300, i)
            B[vi] = A[vi] + T.float32(1)


def test_blockize_keeps_predicate_on_inner_block():
    sch = tir.Schedule(vector_add_300)
    (i,) = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.split(i, [None, 128])
    sch.blockize(i1)
    outer = sch.mod["main"].body.block.body.body
    assert outer.block.name_hint == "B_o" and outer.predicate.value == 1
    # written in the outer block's iterator, which code between the loops can see
    assert outer.block.body.body.predicate.script() == "vi_o * 128 + i_1 < 300"
    verify(sch.mod)
    assert_same_numerics(vector_add_300, sch.mod["main"])
    assert_replays(sch, vector_add_300)


@T.prim_func
def elementwise(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i, j in T.grid(128, 128):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func
def elementwise_blockize_inner(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32")):
    for i in range(128):
        with T.block("B_o"):
            vi = T.axis.spatial(128, i)
            vj_o = T.axis.spatial(1, 0)
            for j in range(128):
                with T.block("B"):
                    vj = T.axis.remap("S", [j])
                    B[vi, vj] = A[vi, vj] * T.float32(2)


def test_blockize_inner_loop_of_elementwise():
    sch = tir.Schedule(elementwise)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.blockize(j)
    assert_structural_equal(sch.mod["main"],
                            elementwise_blockize_inner.with_attr("global_symbol", "elementwise"))
    assert_same_numerics(elementwise, sch.mod["main"])
    assert_replays(sch, elementwise)


@T.prim_func
def rowsum(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32,), "float32")):
    for k, i in T.grid(32, 32):
        with T.block("B"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def rowsum_blockized(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32,), "float32")):
    with T.block("root"):
        with T.block("B_o"):
            vk_o = T.axis.reduce(1, 0)
            vi_o = T.axis.spatial(1, 0)
            with T.init():
                for i_init in range(32):
                    with T.block("B_init"):
                        vi_i_init = T.axis.spatial(32, i_init)
                        B[vi_i_init] = T.float32(0)
            for k, i in T.grid(32, 32):
                with T.block("B"):
                    vk_i, vi_i = T.axis.remap("RS", [k, i])
                    B[vi_i] = B[vi_i] + A[vi_i, vk_i]


def test_blockize_whole_reduction_moves_init():
    sch = tir.Schedule(rowsum)
    k, _ = sch.get_loops(sch.get_block("B"))
    sch.blockize(k)
    assert_structural_equal(sch.mod["main"], rowsum_blockized.with_attr("global_symbol", "rowsum"))
    assert_same_numerics(rowsum, sch.mod["main"])
    assert_replays(sch, rowsum)


@T.prim_func
def unit_outer(A: T.Buffer((16, 128), "float32"), B: T.Buffer((16, 128), "float32")):
    for i0, j0, i1, j1 in T.grid(1, 8, 16, 16):
        with T.block("B"):
            vi = T.axis.spatial(16, i0 * 16 + i1)
            vj = T.axis.spatial(128, j0 * 16 + j1)
            B[vi, vj] = A[vi, vj] + T.float32(1)


@pytest.mark.parametrize("preserve_unit_iters", [True, False])
def test_blockize_unit_loops(preserve_unit_iters):
    sch = tir.Schedule(unit_outer)
    _, _, i1, _ = sch.get_loops(sch.get_block("B"))
    sch.blockize(i1, preserve_unit_iters=preserve_unit_iters)
    outer = sch.mod["main"].body.block.body.body.body
    assert [iv.dom.extent.value for iv in outer.block.iter_vars] == [1, 8]
    first = outer.iter_values[0]
    assert (first.name == "i0") if preserve_unit_iters else (first.value == 0)
    assert_same_numerics(unit_outer, sch.mod["main"])
    assert_replays(sch, unit_outer)


@T.prim_func
def overlapping(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i0, i1 in T.grid(8, 8):
        with T.block("B"):
            vi = T.axis.spatial(64, i0 * 6 + i1)
            B[vi] = A[vi]


@T.prim_func
def two_blocks(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
        with T.block("A"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(0)


def test_blockize_errors():
    sch = tir.Schedule(overlapping)
    _, i1 = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: sch.blockize(i1), tir.schedule.NotDivisibleError, "sch.blockize",
                    "vi = i0 * 6 + i1", "i1")
    sch = tir.Schedule(two_blocks)
    (i,) = sch.get_loops(sch.get_block("B"))
    unchanged_after(sch, lambda: sch.blockize(i), tir.schedule.NotSingleBlockChainError, "loop i")


def test_blockize_type_error():
    sch = tir.Schedule(elementwise)
    with pytest.raises(TypeError, match="parameter 'target' expects a LoopRV"):
        sch.blockize(sch.get_block("B"))


# -- tensorize --------------------------------------------------------------------------------

@T.prim_func
def mma_desc(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
             C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def mma_impl(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
             C: T.Buffer((16, 16), "float32")):
    for k, i in T.grid(16, 16):
        for j in T.vectorized(16):
            with T.block("update_kij"):
                vk, vi, vj = T.axis.remap("RSS", [k, i, j])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


TensorIntrin.register("test_mma_16x16x16", mma_desc, mma_impl, override=True)


def test_tensorize_matmul_from_loop():
    sch, i1 = tiled(matmul)
    sch.tensorize(i1, "test_mma_16x16x16")
    outer = sch.mod["main"].body.block.body.body.body.body
    block = outer.block
    assert block.name_hint == "C_o"
    assert [m.buffer.shape[0].value for m in block.match_buffers] == [16, 16, 16]
    assert [m.source.buffer.name for m in block.match_buffers] == ["A", "B", "C"]
    assert block.init is not None
    assert "update_kij" in sch.mod.script()
    assert_same_numerics(matmul, sch.mod["main"])
    assert_replays(sch, matmul)


def test_tensorize_blockized_block():
    sch, i1 = tiled(matmul)
    outer = sch.blockize(i1)
    sch.tensorize(outer, "test_mma_16x16x16")
    assert_same_numerics(matmul, sch.mod["main"])
    assert_replays(sch, matmul)
    text = sch.mod.script()
    assert "T.match_buffer(A[vi_o * 16:vi_o * 16 + 16, vk_o * 16:vk_o * 16 + 16], (16, 16)" in text


@T.prim_func
def two_matmuls(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
                C: T.Buffer((32, 32), "float32"), D: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j, k in T.grid(32, 32, 32):
        with T.block("D"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                D[vi, vj] = T.float32(0)
            D[vi, vj] = D[vi, vj] + B[vi, vk] * A[vk, vj]


def test_tensorize_twice_gives_unique_block_names():
    sch = tir.Schedule(two_matmuls)
    for name in ("C", "D"):
        i, j, k = sch.get_loops(sch.get_block(name))
        i0, i1 = sch.split(i, [None, 16])
        j0, j1 = sch.split(j, [None, 16])
        k0, k1 = sch.split(k, [None, 16])
        sch.reorder(i0, j0, k0, i1, j1, k1)
        sch.tensorize(i1, "test_mma_16x16x16")
    text = sch.mod.script()
    assert 'T.block("update_kij")' in text and 'T.block("update_kij_1")' in text
    assert_same_numerics(two_matmuls, sch.mod["main"])
    assert_replays(sch, two_matmuls)


def test_tensorize_extent_mismatch():
    sch, i1 = tiled(matmul, tile=32)
    unchanged_after(sch, lambda: sch.tensorize(i1, "test_mma_16x16x16"), tir.schedule.TensorizeError,
                    "sch.tensorize", "the loop extents 32", "do not match the intrinsic's 16")


@T.prim_func
def matmul_transposed(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                      C: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


def test_tensorize_access_mismatch():
    sch, i1 = tiled(matmul_transposed)
    unchanged_after(sch, lambda: sch.tensorize(i1, "test_mma_16x16x16"), tir.schedule.TensorizeError,
                    "does not match tensor intrinsic 'test_mma_16x16x16'", "the block accesses B[")


def test_unknown_intrinsic():
    sch, i1 = tiled(matmul)
    with pytest.raises(tir.schedule.UnknownTensorIntrinError,
                       match=r"sch.tensorize: no tensor intrinsic named 'nope' is registered \(registered: .*\w"):
        sch.tensorize(i1, "nope")


def test_register_checks_buffers():
    @T.prim_func
    def small(A: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("A"):
                vi = T.axis.spatial(8, i)
                A[vi] = T.float32(0)

    with pytest.raises(ValueError, match="does not match impl buffer"):
        TensorIntrin.register("test_bad", mma_desc, mma_impl.replace(params=mma_impl.params[:2] + (small.params[0],)))
    with pytest.raises(ValueError, match="already registered"):
        TensorIntrin.register("test_mma_16x16x16", mma_desc, mma_impl)


# -- relaxed bounds of symbolic extents --------------------------------------------------------------
@pytest.mark.parametrize("target", ["python", "llvm -bounds-check"])
def test_blockize_relaxes_a_loop_of_symbolic_extent_symbolically(target):
    sch = tir.Schedule(symbolic_add)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.blockize(i)
    text = sch.mod.script()
    assert "T.reads(A[T.int64(0):n])" in text and "T.writes(C[T.int64(0):n])" in text
    verify(sch.mod)
    assert_structural_equal(from_source(text), sch.mod)
    assert_replays(sch, symbolic_add)
    lib = mlc_lab.build(sch.mod, target=target)
    for n in (1, 9):
        a, c = np.arange(n, dtype="float32"), np.full(n, np.nan, "float32")
        lib["main"](a, c)
        np.testing.assert_array_equal(c, a + 1)


# -- the inner predicate is written in what the outer block's body can see ---------------------------
@T.prim_func
def row_sum_30(A: T.Buffer((10, 30), "float32"), S: T.Buffer((10,), "float32")):
    for i, k in T.grid(10, 30):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


@pytest.mark.parametrize("target", ["python", "llvm", "llvm -bounds-check"])
def test_blockize_predicate_uses_outer_iterators_not_outer_loops(target):
    sch = tir.Schedule(row_sum_30)
    _, k = sch.get_loops(sch.get_block("S"))
    _, ki = sch.split(k, factors=[None, 8])
    outer = sch.blockize(ki)
    sch.decompose_reduction(outer, sch.get_loops(outer)[0])
    text = sch.mod.script()
    assert "T.where(vk_o * 8 + k_1 < 30)" in text
    verify(sch.mod)
    assert_structural_equal(from_source(text), sch.mod)
    assert_replays(sch, row_sum_30)
    a, s = np.random.rand(10, 30).astype("float32"), np.full(10, np.nan, "float32")
    mlc_lab.build(sch.mod, target=target)["main"](a, s)
    np.testing.assert_allclose(s, a.sum(1), rtol=1e-5)


@T.prim_func
def unpinned_predicate(A: T.Buffer((8, 8), "float32"), S: T.Buffer((8,), "float32")):
    for i0, i1, k in T.grid(2, 4, 8):
        with T.block("S"):
            vi = T.axis.spatial(8, i0 * 4 + i1)
            vk = T.axis.reduce(8, k)
            T.where(i0 * 4 + i1 + k < 12)
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


def test_blockize_predicate_on_outer_loops_no_iterator_is_bound_to():
    sch = tir.Schedule(unpinned_predicate)
    _, _, k = sch.get_loops(sch.get_block("S"))
    unchanged_after(sch, lambda: sch.blockize(k), tir.schedule.BlockizePredicateError,
                    "sch.blockize", '"S"', "i0, i1")


@T.prim_func
def add_one_5(A: T.Buffer((5, 4), "float32"), B: T.Buffer((5, 4), "float32")):
    for i, j in T.grid(5, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


def test_blockize_of_an_overhanging_split_keeps_the_outer_iterator_in_its_domain():
    # [3, 2] covers 6 rows of 5: i_0 = 2 has one real row, and for 4 rows ([2, 2]) i_0 = 2 has none.
    for rows, factors in ((5, [3, None]), (5, [None, 2])):
        sch = tir.Schedule(add_one_5)
        i, j = sch.get_loops(sch.get_block("B"))
        sch.split(i, factors=factors)
        sch.blockize(sch.get_loops(sch.get_block("B"))[1])
        tir.verify(sch.mod)
        a = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
        for target in ("python", "llvm"):
            b = np.full((5, 4), np.nan, "float32")
            mlc_lab.build(sch.mod, target=target)["main"](a, b)
            np.testing.assert_allclose(b, a + 1)


def test_blockize_outer_predicate_round_trips():
    # The outer block's T.where comes out as 0 < n; it must print as what the parser builds.
    sch = tir.Schedule(symbolic_add)
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 3])
    sch.blockize(sch.get_loops(sch.get_block("C"))[0])
    assert_structural_equal(from_source(sch.mod.script()), sch.mod)


@T.prim_func
def row_sum(A: T.Buffer((5, 8), "float32"), S: T.Buffer((5,), "float32")):
    for i, k in T.grid(5, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


@pytest.mark.parametrize("loop", [0, 1])
def test_blockize_of_a_block_rfactor_left_without_reduce_iterators(loop):
    # rfactor of the only reduce loop leaves S_rf all spatial: a plain copy without an init, as
    # the reference compiler makes it. blockize then gives an all-spatial outer block too.
    sch = tir.Schedule(row_sum)
    sch.rfactor(sch.get_loops(sch.get_block("S"))[1], factor_axis=0)
    assert sch.get(sch.get_block("S_rf")).init is None
    outer = sch.blockize(sch.get_loops(sch.get_block("S_rf"))[loop])
    block = sch.get(outer)
    assert not any(iv.iter_type == "reduce" for iv in block.iter_vars)
    assert verify(sch.mod["main"])
    assert_structural_equal(from_source(sch.mod["main"].script()), sch.mod["main"])
    assert_same_numerics(row_sum, sch.mod["main"])
    assert_replays(sch, row_sum)


@T.prim_func
def partial_row_sum(A: T.Buffer((2, 8), "float32"), S: T.Buffer((2,), "float32")):
    for i, k in T.grid(2, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k < 4)
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


def test_region_of_a_blockized_block_ignores_iterations_its_predicate_skips():
    """The outer block reads only the rows its inner block's T.where lets through, so a cache of
    that read copies exactly the elements the rfactor block wrote (the others are never written,
    and the poisoned interpreter raises on a read of any of them)."""
    sch = tir.Schedule(partial_row_sum)
    sch.rfactor(sch.get_loops(sch.get_block("S"))[1], factor_axis=0)
    outer = sch.blockize(sch.get_loops(sch.get_block("S"))[0])
    (read,) = [r for r in sch.get(outer).reads if r.buffer.name == "S_rf"]
    assert [(int(r.min), int(r.extent)) for r in read.region] == [(0, 4), (0, 2)]
    cache = sch.cache_read(outer, 0, "local")
    assert [int(sch.get(lp).extent) for lp in sch.get_loops(cache)] == [4, 2]
    assert_same_numerics(partial_row_sum, sch.mod["main"])


def test_region_under_an_if_counts_only_the_branch_that_runs():
    @T.prim_func
    def guarded(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.float32(0)
        for i_0 in range(4):
            with T.block("outer"):
                vo = T.axis.spatial(4, i_0)
                for i_1 in range(8):
                    if i_1 < 4:
                        A[vo * 4 + i_1] = B[vo * 4 + i_1]

    reads, writes = mlc_lab.tir.analysis.block_access_regions(guarded.body.block.body[1].body.block)
    assert [(str(r.min), int(r.extent)) for r in reads[0].region] == [("vo * 4", 4)]
    assert [(str(r.min), int(r.extent)) for r in writes[0].region] == [("vo * 4", 4)]


@T.prim_func
def unit_row(X: T.Buffer((3, 6), "float32"), Y: T.Buffer((3, 1, 3), "float32")):
    for c, y, r in T.grid(3, 1, 3):
        with T.block("Y"):
            vc, vy, vr = T.axis.remap("SSS", [c, y, r])
            Y[vc, vy, vr] = X[vc, vy * 3 + vr] * T.float32(2)


def test_blockize_folds_a_unit_iterator_replaced_by_zero():
    # vy has one value, so the inner block uses 0 for it; its region and load must read
    # X[vc, vr_i], not X[vc, 0 * 3 + vr_i], which printing and parsing would fold differently.
    sch = tir.Schedule(unit_row)
    sch.blockize(sch.get_loops(sch.get_block("Y"))[2])
    text = sch.mod.script()
    assert "0 * 3" not in text and "X[vc, vr_i]" in text
    assert_structural_equal(from_source(text), sch.mod)
    assert verify(sch.mod["main"])
    assert_same_numerics(unit_row, sch.mod["main"])
    assert_replays(sch, unit_row)
