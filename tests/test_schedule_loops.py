"""Schedule core and loop primitives: split, fuse, reorder, parallel/vectorize/unroll/bind,
annotate; handles, traces, history and errors."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab.tir.schedule import errors

from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal, structural_equal
from mlc_lab.script import tir as T
from schedule_checks import assert_replays, assert_same_numerics, unchanged_after

from corpus import mm_relu, symbolic_add


@T.prim_func
def mm_relu_split_reordered(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                            C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128))
    for i, j0, k, j1 in T.grid(128, 32, 128, 4):
        with T.block("Y"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j0 * 4 + j1)
            vk = T.axis.reduce(128, k)
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


def test_course_split_and_reorder():
    sch = tir.Schedule(mm_relu)
    block_Y = sch.get_block("Y", func_name="main")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    assert_structural_equal(sch.mod["main"], mm_relu_split_reordered)
    assert_same_numerics(mm_relu, sch.mod["main"])
    assert_replays(sch, mm_relu)
    assert sch.trace.as_python()[-2:] == ["l4, l5 = sch.split(loop=l2, factors=[None, 4])",
                                          "sch.reorder(l4, l3, l5)"]


@T.prim_func
def vector_add_300(A: T.Buffer((300,), "float32"), B: T.Buffer((300,), "float32")):
    for i in range(300):
        with T.block("B"):
            vi = T.axis.spatial(300, i)
            B[vi] = A[vi] + T.float32(1)


@T.prim_func
def vector_add_300_split(A: T.Buffer((300,), "float32"), B: T.Buffer((300,), "float32")):
    for i0, i1 in T.grid(3, 128):
        with T.block("B"):
            vi = T.axis.spatial(300, i0 * 128 + i1)
            T.where(i0 * 128 + i1 < 300)
            B[vi] = A[vi] + T.float32(1)


def test_non_dividing_split_adds_predicate():
    sch = tir.Schedule(vector_add_300)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 128])
    assert_structural_equal(sch.mod["main"].with_attr("global_symbol", "x"),
                            vector_add_300_split.with_attr("global_symbol", "x"))
    assert_same_numerics(vector_add_300, sch.mod["main"])


def test_vector_add_split_bind():
    sch = tir.Schedule(vector_add_300)
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    loop = sch.mod["main"].body.block.body
    assert (loop.kind, loop.thread_binding) == ("thread_binding", "blockIdx.x")
    assert (loop.body.kind, loop.body.thread_binding) == ("thread_binding", "threadIdx.x")
    assert_same_numerics(vector_add_300, sch.mod["main"])
    assert_replays(sch, vector_add_300)


def test_fuse_then_split_numerics_and_structure():
    sch = tir.Schedule(mm_relu)
    block_C = sch.get_block("C")
    i, j = sch.get_loops(block_C)
    fused = sch.fuse(i, j)
    outer, inner = sch.split(fused, [None, 8])
    sch.parallel(outer)
    sch.vectorize(inner)
    realize = sch.mod["main"].body.block.body.seq[1].body.body
    assert [type(v).__name__ for v in realize.iter_values] == ["FloorDiv", "FloorMod"]
    assert realize.iter_values[0].script() == "(i_j_fused_0 * 8 + i_j_fused_1) // 128"
    assert_same_numerics(mm_relu, sch.mod["main"])
    assert_replays(sch, mm_relu)


def test_unroll_and_annotate_block():
    sch = tir.Schedule(mm_relu)
    b = sch.get_block("Y")
    _, _, k = sch.get_loops(b)
    sch.unroll(k)   # allowed on a reduction loop
    sch.annotate(b, "meta_schedule.tiling_structure", "SSRSRS")
    block = sch.get_child_blocks(sch.get_loops(b)[0])
    assert [bb.name for bb in block] == ["Y"]
    text = sch.mod.script()
    assert 'T.block_attr({"meta_schedule.tiling_structure": "SSRSRS"})' in text
    sch.unannotate(b, "meta_schedule.tiling_structure")
    assert "block_attr" not in sch.mod.script()
    assert_replays(sch, mm_relu)


def test_producers_and_consumers():
    sch = tir.Schedule(mm_relu)
    assert [b.name for b in sch.get_consumers(sch.get_block("Y"))] == ["C"]
    assert [b.name for b in sch.get_producers(sch.get_block("C"))] == ["Y"]
    assert sch.get_producers(sch.get_block("Y")) == []


# -- errors ----------------------------------------------------------------------------------

def test_split_errors():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    message = unchanged_after(sch, lambda: sch.split(j, [3, 5]), tir.schedule.WrongFactorProductError,
                               "sch.split", "loop j", "128")
    assert "^^^" in message
    unchanged_after(sch, lambda: sch.split(j, [None, None]), tir.schedule.TooManyInferredFactorsError)
    unchanged_after(sch, lambda: sch.split(j, [0, None]), tir.schedule.NonPositiveFactorError, "factor 0")
    with pytest.raises(TypeError, match="parameter 'loop' expects a LoopRV"):
        sch.split(sch.get_block("Y"), [None, 4])


def test_handles_go_stale_with_clear_errors():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(j, [None, 4])
    unchanged_after(sch, lambda: sch.split(j, [None, 2]), tir.schedule.InvalidHandleError,
                     "loop j no longer exists")
    unchanged_after(sch, lambda: sch.get_block("Z"), tir.schedule.BlockNotFoundError,
                     "no block named 'Z'", "blocks: Y, C")


def test_reorder_errors():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    ci, cj = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.reorder(k, ci), tir.schedule.LoopNotAncestorError, "loops i and k")
    unchanged_after(sch, lambda: sch.reorder(k, k), tir.schedule.DuplicateLoopError)


def test_fuse_error_names_loops():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    unchanged_after(sch, lambda: sch.fuse(i, k), tir.schedule.NotOnlyChildError, "loop k", "loop i")


def test_parallel_reduction_loop_is_rejected():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    message = unchanged_after(sch, lambda: sch.parallel(k), tir.schedule.WrongBlockIterTypeError,
                               "loop k", "vk", 'block "Y"')
    assert "^" in message
    unchanged_after(sch, lambda: sch.bind(i, "threadIdx.w"), tir.schedule.ThreadBindingError,
                     "'threadIdx.w'")


@T.prim_func
def two_writers(A: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("first"):
            vi = T.axis.spatial(16, i)
            A[vi] = T.float32(1)
    for i in range(16):
        with T.block("second"):
            vi = T.axis.spatial(16, i)
            A[vi] = A[vi] + T.float32(1)


def test_vectorize_needs_compact_dataflow():
    # "second" reads the buffer it writes and shares it with "first": not a complete block
    sch = tir.Schedule(two_writers)
    (i,) = sch.get_loops(sch.get_block("second"))
    unchanged_after(sch, lambda: sch.vectorize(i), tir.schedule.NotCompactDataflowError,
                     'block "second"', "buffer A")


@T.prim_func
def two_halves(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(8):
        with T.block("low"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi + 8]
    for i in range(8):
        with T.block("high"):
            vi = T.axis.spatial(16, i + 8)
            B[vi] = A[vi - 8] * T.float32(2)


@T.prim_func
def two_halves_shifted(A: T.Buffer((16,), "float32"), B: T.Buffer((17,), "float32")):
    for i in range(8):
        with T.block("low"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi + 8]
    for i in range(8):
        with T.block("high"):
            vi = T.axis.spatial(16, i + 8)
            B[vi // 2 + 4] = A[vi - 8]


def test_each_half_of_a_shared_output_is_parallelized():
    # neither block is the only writer of B, but under its own loop each is a complete block
    # whose iterations write distinct elements
    sch = tir.Schedule(two_halves)
    (i,) = sch.get_loops(sch.get_block("low"))
    (j,) = sch.get_loops(sch.get_block("high"))
    sch.parallel(i)
    sch.vectorize(j)
    assert [sch.get(i).kind, sch.get(j).kind] == ["parallel", "vectorized"]
    assert_same_numerics(two_halves, sch.mod["main"])
    assert_replays(sch, two_halves)


def test_iterations_writing_one_element_are_not_parallelized():
    # "high" writes B[i // 2 + 8]: two iterations store to each element, in order
    sch = tir.Schedule(two_halves_shifted)
    (j,) = sch.get_loops(sch.get_block("high"))
    unchanged_after(sch, lambda: sch.parallel(j), tir.schedule.NotCompactDataflowError,
                     'block "high"', "buffer B", "loop i")


def test_rebinding_a_bound_loop_replaces_its_thread():
    sch = tir.Schedule(two_writers)
    (i,) = sch.get_loops(sch.get_block("first"))
    sch.bind(i, "blockIdx.x")
    sch.bind(i, "threadIdx.x")
    loop = sch.get(i)
    assert (loop.kind, loop.thread_binding) == ("thread_binding", "threadIdx.x")
    assert_replays(sch, two_writers)


def test_history_and_diff(capsys):
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.split(j, [None, 4])
    sch.reorder(k, i)
    assert [s.call for s in sch.history][1:] == ["l4, l5 = sch.split(loop=l2, factors=[None, 4])",
                                                 "sch.reorder(l3, l1)"]
    assert structural_equal(sch.history[0].mod, tir.Schedule(mm_relu).mod)
    sch.show_diff()
    out = capsys.readouterr().out
    assert "-        for i, j_0, j_1, k in T.grid(128, 32, 4, 128):" in out
    assert "+        for k, j_0, j_1, i in T.grid(128, 32, 4, 128):" in out


def test_copy_is_independent():
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    other = sch.copy()
    other.split(j, [None, 4])
    assert structural_equal(sch.mod, tir.Schedule(mm_relu).mod)
    assert len(other.trace.insts) == len(sch.trace.insts) + 1


@T.prim_func
def bad_reorder_target(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def test_check_numerics_accepts_legal_steps():
    sch = tir.Schedule(bad_reorder_target, check_numerics=True)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.reorder(j, i)
    sch.split(i, [2, 4])
    assert len(sch.history) == 3


def test_ir_diff_text_and_side_by_side_html():
    from mlc_lab.ir import diff
    from mlc_lab.ir.diff import side_by_side_html
    sch = tir.Schedule(mm_relu)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(k, i)
    before, after = sch.history[0].mod, sch.mod
    text = diff(before, after)
    assert text.startswith("--- before\n+++ after")
    assert "+        for k, j, i in T.grid(128, 128, 128):" in text
    assert diff(before, before) == ""
    html = side_by_side_html(before, after, title="sch.reorder(l3, l1)")
    assert "sch.reorder(l3, l1)" in html
    assert html.count('class="mlc-side mlc-del"') == 1 and html.count('class="mlc-side mlc-add"') == 1


def test_numerics_guard_names_the_step_and_keeps_the_old_module():
    from mlc_lab.tir import BufferStore, FloatImm
    from mlc_lab.tir.schedule import NumericsChangedError
    from mlc_lab.tir.schedule.func_index import replace_stmts, FuncIndex
    sch = tir.Schedule(bad_reorder_target, check_numerics=True)
    realize = FuncIndex(sch.mod["main"]).blocks["B"]
    store = realize.block.body
    wrong = realize.replace(block=realize.block.replace(
        body=BufferStore(store.buffer, store.value + FloatImm("float32", 1.0), store.indices)))
    before = sch.mod
    with pytest.raises(NumericsChangedError, match=r"in sch.broken_step: after this step function main "
                                                   r"computes different results: buffer B\["):
        sch._replace("main", {id(realize): wrong}, "broken_step")
    assert sch.mod is before


@T.prim_func
def row_sum(A: T.Buffer((4, 6), "float32"), S: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 6):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


def test_reorder_refuses_to_move_a_loop_feeding_spatial_and_reduce_iterators():
    sch = tir.Schedule(row_sum)
    i, k = sch.get_loops(sch.get_block("S"))
    x, y = sch.split(sch.fuse(i, k), factors=[6, 4])
    before = sch.mod
    with pytest.raises(errors.MixedIterTypeLoopError):
        sch.reorder(y, x)
    assert sch.mod is before


def test_reorder_keeps_moving_loops_that_feed_one_kind_of_iterator():
    sch = tir.Schedule(row_sum)
    i, k = sch.get_loops(sch.get_block("S"))
    k0, k1 = sch.split(k, factors=[2, 3])
    sch.reorder(k1, i, k0)
    a = np.arange(24, dtype="float32").reshape(4, 6)
    s = np.full(4, np.nan, "float32")
    mlc_lab.build(sch.mod, target="python")["main"](a, s)
    np.testing.assert_allclose(s, a.sum(1))


def test_split_of_a_symbolic_extent_needs_a_factor_product_that_covers_it():
    sch = tir.Schedule(symbolic_add)
    (i,) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(errors.WrongFactorProductError):
        sch.split(i, factors=[2, 4])


@pytest.mark.parametrize("factors", [[None, 4], [2, None, 4], [None, 1], [1, None]])
@pytest.mark.parametrize("target", ["python", "llvm"])
def test_split_of_a_symbolic_extent_infers_the_none_factor(factors, target):
    sch = tir.Schedule(symbolic_add)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=factors)
    lib = mlc_lab.build(sch.mod, target=target)
    for n in (1, 7, 8, 17):
        a, c = np.arange(n, dtype="float32"), np.full(n, np.nan, "float32")
        lib["main"](a, c)
        np.testing.assert_array_equal(c, a + 1)


def test_parallel_refuses_a_loop_nested_in_another_parallel_loop():
    sch = tir.Schedule(row_sum)
    i, k = sch.get_loops(sch.get_block("S"))
    i0, i1 = sch.split(i, factors=[2, 2])
    sch.parallel(i0)
    with pytest.raises(errors.NestedParallelError):
        sch.parallel(i1)


# -- split past the extent, preserve_unit_iters ------------------------------------------------------

@T.prim_func
def scale_10x4(A: T.Buffer((10, 4), "float32"), B: T.Buffer((10, 4), "float32")):
    for i, j in T.grid(10, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def test_split_factors_past_the_extent_add_a_predicate():
    @T.prim_func
    def expected(A: T.Buffer((10, 4), "float32"), B: T.Buffer((10, 4), "float32")):
        for i_0, i_1, j in T.grid(3, 4, 4):
            with T.block("B"):
                vi = T.axis.spatial(10, i_0 * 4 + i_1)
                vj = T.axis.spatial(4, j)
                T.where(i_0 * 4 + i_1 < 10)
                B[vi, vj] = A[vi, vj] * T.float32(2)

    sch = tir.Schedule(scale_10x4)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [3, 4])
    assert_structural_equal(sch.mod["main"], expected.with_attr("global_symbol", "scale_10x4"))
    assert_same_numerics(scale_10x4, sch.mod["main"])
    assert_replays(sch, scale_10x4)


def _binding_of_vj(sch):
    return sch.mod["main"].body.block.body.body.body.body.body.iter_values[1]


@pytest.mark.parametrize("preserve", [True, False])
def test_split_preserve_unit_iters(preserve):
    sch = tir.Schedule(scale_10x4)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.split(j, [1, 4, 1], preserve_unit_iters=preserve)
    assert str(_binding_of_vj(sch)) == ("j_0 * 4 + j_1 + j_2" if preserve else "j_1")
    assert_same_numerics(scale_10x4, sch.mod["main"])
    assert_replays(sch, scale_10x4)


@pytest.mark.parametrize("preserve", [True, False])
def test_fuse_preserve_unit_iters(preserve):
    sch = tir.Schedule(scale_10x4)
    _, j = sch.get_loops(sch.get_block("B"))
    _, j1 = sch.split(j, [4, 1])
    sch.fuse(j1, preserve_unit_iters=preserve)
    binding = str(sch.mod["main"].body.block.body.body.body.body.iter_values[1])
    assert binding == ("j_0 + j_1_fused" if preserve else "j_0")
    assert_same_numerics(scale_10x4, sch.mod["main"])
    assert_replays(sch, scale_10x4)


# -- debug_mask -----------------------------------------------------------------------------------

def _ill_formed_step(sch):
    """Install a block that stores to a buffer it does not declare in T.writes."""
    from mlc_lab.tir.schedule.func_index import FuncIndex
    realize = FuncIndex(sch.mod["main"]).blocks["B"]
    sch._replace("main", {id(realize): realize.replace(block=realize.block.replace(writes=()))},
                 "broken_step")


def test_debug_mask_verifies_every_step_and_names_it():
    sch = tir.Schedule(scale_10x4, debug_mask="all")
    before = sch.mod
    with pytest.raises(tir.VerifyError, match=r"sch.broken_step produced ill-formed IR: .*block \"B\""):
        _ill_formed_step(sch)
    assert sch.mod is before
    quiet = tir.Schedule(scale_10x4, debug_mask=0)
    _ill_formed_step(quiet)
    assert quiet.mod is not before


def test_debug_mask_verifies_the_initial_module_and_checks_its_type(monkeypatch):
    from mlc_lab.tir.schedule.func_index import FuncIndex, replace_stmts
    realize = FuncIndex(scale_10x4).blocks["B"]
    broken = replace_stmts(scale_10x4, {id(realize): realize.replace(
        block=realize.block.replace(writes=()))})
    with pytest.raises(tir.VerifyError):
        tir.Schedule(broken, debug_mask=1)
    monkeypatch.setenv("MLC_LAB_DEBUG", "1")
    with pytest.raises(tir.VerifyError):
        tir.Schedule(broken)
    monkeypatch.delenv("MLC_LAB_DEBUG")
    tir.Schedule(broken)
    with pytest.raises(TypeError, match="debug_mask"):
        tir.Schedule(scale_10x4, debug_mask="some")


def test_get_returns_the_ir_behind_a_handle():
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("Y")
    i, j, k = sch.get_loops(block)
    jo, ji = sch.split(j, factors=[None, 32])
    assert [sch.get(lp).extent.value for lp in (jo, ji)] == [4, 32]
    assert sch.get(block).name_hint == "Y" and sch.get("Y") is sch.get(block)
    assert [iv.iter_type for iv in sch.get(block).iter_vars] == ["spatial", "spatial", "reduce"]
    with pytest.raises(TypeError, match="sch.get: expects a BlockRV"):
        sch.get(3.5)
    with pytest.raises(errors.InvalidHandleError, match="loop j no longer exists"):
        sch.get(j)


# -- printed forms of split guards and fused bindings; reorder of overlapping tiles ---------------
@T.prim_func
def scale_3d(A: T.Buffer((4, 6, 10), "float32"), B: T.Buffer((4, 6, 10), "float32")):
    for i, j, k in T.grid(4, 6, 10):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi, vj, vk] + T.float32(1)


def test_split_guards_keep_their_nested_form_and_fused_bindings_take_the_modulo_first():
    sch = tir.Schedule(scale_3d)
    i, j, k = sch.get_loops(sch.get_block("B"))
    sch.split(k, [2, 2, 3])
    sch.split(j, [None, 4])
    text = sch.mod["main"].script()
    # each guard is the split's own nested sum; a later split leaves the earlier guard as it was
    assert "T.where((k_0 * 2 + k_1) * 3 + k_2 < 10 and j_0 * 4 + j_1 < 6)" in text
    assert_same_numerics(scale_3d, sch.mod["main"])
    assert_replays(sch, scale_3d)

    fused = tir.Schedule(scale_3d)
    fused.fuse(*fused.get_loops(fused.get_block("B")))
    text = fused.mod["main"].script()
    assert "vi = T.axis.spatial(4, i_j_k_fused // 60)" in text
    assert "vj = T.axis.spatial(6, i_j_k_fused % 60 // 10)" in text
    assert "vk = T.axis.spatial(10, i_j_k_fused % 10)" in text
    assert_same_numerics(scale_3d, fused.mod["main"])
    assert_replays(fused, scale_3d)


@T.prim_func
def overlapping_rows(A: T.Buffer((14, 4), "float32"), B: T.Buffer((14, 4), "float32")):
    for r, u, c in T.grid(6, 4, 4):
        with T.block("B"):
            vi = T.axis.spatial(14, r * 2 + u)
            vj = T.axis.spatial(4, c)
            B[vi, vj] = A[vi, vj] * T.float32(3)


@T.prim_func
def overlapping_rows_accumulated(A: T.Buffer((14, 4), "float32"), B: T.Buffer((14, 4), "float32")):
    for r, u, c in T.grid(6, 4, 4):
        with T.block("B"):
            vi = T.axis.spatial(14, r * 2 + u)
            vj = T.axis.spatial(4, c)
            B[vi, vj] = B[vi, vj] + A[vi, vj]


def test_reorder_of_overlapping_tiles_of_a_pure_block():
    # rows are written by two tiles each, with the same value: any order gives the same result
    sch = tir.Schedule(overlapping_rows)
    r, u, c = sch.get_loops(sch.get_block("B"))
    sch.reorder(c, u, r)
    assert_same_numerics(overlapping_rows, sch.mod["main"])
    assert_replays(sch, overlapping_rows)
    # a block that reads what it writes keeps needing one visit per point
    other = tir.Schedule(overlapping_rows_accumulated)
    r, u, c = other.get_loops(other.get_block("B"))
    unchanged_after(other, lambda: other.reorder(c, u, r), tir.schedule.NotAffineBindingError,
                    '"B"', "vi")


def test_split_accepts_factors_given_as_int64_constants():
    sch = tir.Schedule(scale_10x4)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [tir.IntImm("int64", 5), None])
    assert [int(sch.get(lp).extent) for lp in sch.get_loops(sch.get_block("B"))] == [5, 2, 4]
    assert_same_numerics(scale_10x4, sch.mod["main"])


def test_bind_refuses_threads_that_would_store_one_element_together():
    """Bound as vb = tx // 3, three threads run the copy of one tile: they would store the same
    element of the shared buffer at once."""
    @T.prim_func
    def tile_copy(B: T.Buffer((2, 8), "float32"), C: T.Buffer((2, 8), "float32")):
        B_shared = T.alloc_buffer((2, 8), scope="shared")
        for p, j in T.grid(6, 8):
            with T.block("B_shared"):
                vb = T.axis.spatial(2, p // 3)
                vj = T.axis.spatial(8, j)
                B_shared[vb, vj] = B[vb, vj]
        for b, j in T.grid(2, 8):
            with T.block("C"):
                vb, vj = T.axis.remap("SS", [b, j])
                C[vb, vj] = B_shared[vb, vj]

    sch = tir.Schedule(tile_copy)
    p, j = sch.get_loops(sch.get_block("B_shared"))
    unchanged_after(sch, lambda: sch.bind(p, "threadIdx.x"), tir.schedule.ThreadBindingError,
                    'loop p run block "B_shared" at the same iterator point')
    sch.bind(j, "threadIdx.x")   # its iterations store distinct elements


def test_bind_checks_a_loop_of_symbolic_extent_without_failing():
    """A loop of unknown extent that the block does not use: the check that threads store apart
    cannot enumerate it, and says nothing rather than fail."""
    @T.prim_func
    def rows(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n, 4))
        B = T.match_buffer(b, (n, 4))
        for i, j in T.grid(n, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)

    sch = tir.Schedule(rows)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(j, "threadIdx.x")
    sch.bind(i, "blockIdx.x")
    assert sch.get(j).thread_binding == "threadIdx.x"


def test_repeated_points_says_nothing_about_an_unused_loop_of_unknown_extent():
    from mlc_lab.tir.schedule.primitives.injective import repeated_points

    @T.prim_func
    def broadcast_rows(a: T.handle, B: T.Buffer((4,), "float32")):
        n = T.int32()
        A = T.match_buffer(a, (4,))
        for i, j in T.grid(n, 4):
            with T.block("B"):
                vj = T.axis.spatial(4, j)
                B[vj] = A[vj]

    sch = tir.Schedule(broadcast_rows)
    _, realize, _ = sch._resolve_block(sch.get_block("B"), "test")
    loops = [sch.get(lp) for lp in sch.get_loops(sch.get_block("B"))]
    assert repeated_points(realize, loops) is None            # n may be 1
    assert repeated_points(realize, loops[1:], loops[:1]) is False


# -- symbolic extents that are multiples of the split ----------------------------------------------
@T.prim_func
def _padded_rows(a: T.handle, b: T.handle, c: T.handle):
    n = T.int64()
    C = T.match_buffer(c, (n,), "float32")   # tells the run time n
    A = T.match_buffer(a, ((n + 15) // 16 * 16, 8), "float32")
    B = T.match_buffer(b, ((n + 15) // 16 * 16,), "float32")
    for i, k in T.grid((n + 15) // 16 * 16, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_a_symbolic_extent_that_is_a_multiple_of_the_factors_is_split_without_a_guard():
    sch = tir.Schedule(_padded_rows)
    i, k = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(i, [None, 8])
    assert str(sch.get(outer).extent) == "(n + T.int64(15)) // T.int64(16) * T.int64(2)"
    assert "T.where" not in sch.mod["main"].script()
    # n itself is not a multiple of 8: its split is guarded
    sch2 = tir.Schedule(_padded_rows)
    sch2.split(sch2.get_loops(sch2.get_block("B"))[1], [None, 3])
    assert "T.where" in sch2.mod["main"].script()
    # the split loops visit each row once, so the init can move above the tile's rows
    sch.reorder(outer, k, inner)
    sch.decompose_reduction(sch.get_block("B"), k)
    a = np.random.default_rng(0).random((32, 8), dtype="float32")
    out = np.zeros(32, "float32")
    mlc_lab.build(sch.mod, "llvm")["main"](a, out, np.zeros(20, "float32"))
    np.testing.assert_allclose(out, a.sum(1), rtol=1e-5)
