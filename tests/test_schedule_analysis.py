"""tir.schedule.analysis: the layout an access asks for, the loops of a block that line up with a
tensor intrinsic, the regrouping of a block's iterators into an intrinsic's, and output blocks."""
import itertools

import pytest

from mlc_lab import te, tir
from mlc_lab.arith import simplify
from mlc_lab.meta_schedule.testing import te_workload
from mlc_lab.script import tir as T
from mlc_lab.tir import Evaluate, For, IndexMap, Var, decl_buffer
from mlc_lab.tir.schedule.analysis import (AutoTensorizeMappingInfo, TensorizeInfo,
                                           get_auto_tensorize_mapping_info,
                                           get_tensorize_loop_mapping, has_block, is_output_block,
                                           suggest_index_map)
from mlc_lab.tir.tensor_intrin.dot_product_common import make_dot_product

from schedule_checks import assert_same_numerics, assert_schedule_ok


# -- helpers --------------------------------------------------------------------------------------
def loop_nest(**extents):
    """Vars and For nodes for loops named and sized by the keywords, in order."""
    vs = [Var(name, "int32") for name in extents]
    return vs, [For(v, 0, e, "serial", Evaluate(0)) for v, e in zip(vs, extents.values())]


def apply(imap: IndexMap, point) -> tuple:
    out = imap.map_indices([tir.const(p, imap.initial_indices[0].dtype) for p in point])
    assert all(isinstance(o, tir.IntImm) for o in out), out
    return tuple(o.value for o in out)


def assert_relayout(imap: IndexMap, shape):
    """The map is one-to-one on the buffer and its stored inverse undoes it everywhere."""
    seen = set()
    for point in itertools.product(*map(range, shape)):
        image = apply(imap, point)
        assert image not in seen
        seen.add(image)
        assert apply(imap.inverse(shape), image) == point


def mma_desc(n, dtype="float32", acc="float32"):
    """An n x n x n matmul description C[i, j] += A[i, k] * B[k, j] (products in ``acc``)."""
    @T.prim_func
    def desc(A: T.Buffer((n, n), dtype), B: T.Buffer((n, n), dtype), C: T.Buffer((n, n), acc)):
        for i, j, k in T.grid(n, n, n):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + T.Cast(acc, A[vi, vk]) * T.Cast(acc, B[vk, vj])
    return desc


def desc_loops(desc):
    body = desc.body.block.body if isinstance(desc.body, tir.BlockRealize) else desc.body
    loops = []
    while isinstance(body, tir.For):
        loops.append(body)
        body = body.body
    return loops


@T.prim_func
def matmul(A: T.Buffer((64, 32), "float32"), B: T.Buffer((32, 48), "float32"),
           C: T.Buffer((64, 48), "float32")):
    for i, j, k in T.grid(64, 48, 32):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])


@T.prim_func
def dense_vnni(A: T.Buffer((32, 64), "uint8"), W: T.Buffer((8, 16, 16, 4), "int8"),
               C: T.Buffer((32, 128), "int32")):
    for i, j, k in T.grid(32, 128, 64):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] = C[vi, vj] + T.Cast("int32", A[vi, vk]) * T.Cast(
                "int32", W[vj // 16, vk // 4, vj % 16, vk % 4])


@T.prim_func
def two_stages(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(3)
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


# -- suggest_index_map ----------------------------------------------------------------------------
def test_suggest_transposed_walk_puts_the_inner_loop_last():
    (i, j), loops = loop_nest(i=4, j=8)
    imap = suggest_index_map(decl_buffer((32,)), [j * 4 + i], loops)
    # element j * 4 + i moves to (i, j): the loop order
    assert [apply(imap, (x,)) for x in (0, 1, 5, 31)] == [(0, 0), (1, 0), (1, 1), (3, 7)]
    assert_relayout(imap, (32,))


def test_suggest_tiled_access_orders_digits_by_loop():
    (i, j), loops = loop_nest(i=32, j=64)
    imap = suggest_index_map(decl_buffer((8, 256)), [i // 16 * 4 + j // 16, i % 16 * 16 + j % 16],
                             loops)
    assert len(imap) == 4
    # the access at (i, j) lands at (i // 16, i % 16, j // 16, j % 16) in the new layout
    for x, y in [(0, 0), (5, 3), (31, 63), (17, 40)]:
        old = (x // 16 * 4 + y // 16, x % 16 * 16 + y % 16)
        assert apply(imap, old) == (x // 16, x % 16, y // 16, y % 16)
    assert_relayout(imap, (8, 256))


def test_suggest_merges_neighbouring_digits_of_one_loop():
    (i,), loops = loop_nest(i=8)
    imap = suggest_index_map(decl_buffer((8,)), [i % 4 + i // 4 % 2 * 4], loops)
    assert len(imap) == 1 and all(apply(imap, (x,)) == (x,) for x in range(8))


def test_suggest_relayouts_the_whole_buffer_when_the_access_covers_part_of_it():
    (i, j), loops = loop_nest(i=2, j=3)
    imap = suggest_index_map(decl_buffer((20,)), [j * 2 + i], loops)
    assert apply(imap, (3,)) == (1, 1)
    assert_relayout(imap, (20,))      # 20 places, though the access reaches only 6


@pytest.mark.parametrize("make", [
    lambda i, j: [i * j],                       # a product of loops
    lambda i, j: [i * 8 + i % 8],               # two overlapping digits of one loop
    lambda i, j: [i * 3 + j],                   # digits that are not a mixed radix (j < 4)
    lambda i, j: [i - j + 4],                   # a negative weight
    lambda i, j: [(i * 4 + j) // 2],            # a division of a sum
    lambda i, j: [Var("n", "int32") + i],       # a variable of no loop
])
def test_suggest_declines_patterns_that_are_not_digit_sums(make):
    (i, j), loops = loop_nest(i=4, j=4)
    assert suggest_index_map(decl_buffer((64,)), make(i, j), loops) is None


def test_suggest_declines_symbolic_or_offset_loops_and_strided_buffers():
    n, i = Var("n", "int32"), Var("i", "int32")
    assert suggest_index_map(decl_buffer((16,)), [i], [For(i, 0, n, "serial", Evaluate(0))]) is None
    assert suggest_index_map(decl_buffer((16,)), [i], [For(i, 2, 8, "serial", Evaluate(0))]) is None
    padded = decl_buffer((4, 4), strides=(8, 1))
    assert suggest_index_map(padded, [i // 4, i % 4], [For(i, 0, 16, "serial", Evaluate(0))]) is None


def test_suggested_layout_applied_with_transform_layout_computes_the_same():
    @T.prim_func
    def scatter(A: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
        B = T.alloc_buffer((32,), "float32")
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vj * 4 + vi] = A[vi * 8 + vj] + T.float32(1)
        for k in range(32):
            with T.block("C"):
                vk = T.axis.remap("S", [k])
                C[vk] = B[vk] * T.float32(2)

    sch = tir.Schedule(scatter)
    block = sch.get_block("B")
    loops = [sch.get(lp) for lp in sch.get_loops(block)]
    realize = sch.mod["main"].body.block.body[0].body.body
    store = realize.block.body
    indices = [simplify(tir.stmt_functor.substitute(x, dict(zip(
        [iv.var for iv in realize.block.iter_vars], realize.iter_values)))) for x in store.indices]
    imap = suggest_index_map(store.buffer, indices, loops)
    assert imap is not None
    sch.transform_layout(block, ("write", 0), imap)
    assert_same_numerics(scatter, sch.mod["main"])


# -- get_tensorize_loop_mapping -------------------------------------------------------------------
def test_loop_mapping_pairs_each_desc_loop_with_its_block_loop():
    desc = mma_desc(16)
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    info = get_tensorize_loop_mapping(sch, block, desc)
    assert isinstance(info, TensorizeInfo) and info.block_iter_paddings is None
    by_desc = {loop: sch.get(sref) for sref, loop in info.loop_map.items()}
    di, dj, dk = desc_loops(desc)
    assert by_desc == {di: sch.get(i), dj: sch.get(j), dk: sch.get(k)}
    assert info.desc_loop_indexer == {di: 0, dj: 1, dk: 2}


def test_loop_mapping_follows_the_bindings_not_the_loop_order():
    desc = mma_desc(16)
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.reorder(k, j, i)
    info = get_tensorize_loop_mapping(sch, block, desc)
    by_desc = {loop: sch.get(sref) for sref, loop in info.loop_map.items()}
    assert [by_desc[lp] for lp in desc_loops(desc)] == [sch.get(i), sch.get(j), sch.get(k)]


def test_loop_mapping_of_a_dot_product_takes_the_innermost_iterators_of_each_kind():
    desc, _ = make_dot_product(16, 4, "uint8", "int8", "int32", "vnni")
    sch = tir.Schedule(dense_vnni)
    block = sch.get_block("C")
    _, j, k = sch.get_loops(block)
    info = get_tensorize_loop_mapping(sch, block, desc)
    by_desc = {loop: sch.get(sref) for sref, loop in info.loop_map.items()}
    assert [by_desc[lp] for lp in desc_loops(desc)] == [sch.get(j), sch.get(k)]


def test_loop_mapping_pads_only_when_allowed():
    @T.prim_func
    def odd(A: T.Buffer((30, 20), "float32"), B: T.Buffer((20, 64), "float32"),
            C: T.Buffer((30, 64), "float32")):
        for i, j, k in T.grid(30, 64, 20):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    sch = tir.Schedule(odd)
    desc = mma_desc(16)
    assert get_tensorize_loop_mapping(sch, sch.get_block("C"), desc) is None
    info = get_tensorize_loop_mapping(sch, sch.get_block("C"), desc, allow_padding=True)
    assert [p.value for p in info.block_iter_paddings] == [16, 1, 16]


def test_loop_mapping_is_none_for_blocks_that_do_not_line_up():
    desc = mma_desc(16)
    sch = tir.Schedule(two_stages)       # no reduction iterator, too few iterators
    assert get_tensorize_loop_mapping(sch, sch.get_block("C"), desc) is None
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    sch.split(i, factors=[4, 16])          # vi is bound to i_0 * 16 + i_1: no single loop
    assert get_tensorize_loop_mapping(sch, block, desc) is None
    sch = tir.Schedule(matmul)             # 48 % 32 != 0
    assert get_tensorize_loop_mapping(sch, sch.get_block("C"), mma_desc(32)) is None


def test_loop_mapping_rejects_a_description_that_is_not_one_loop_nest():
    @T.prim_func
    def two_blocks(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("x"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]
        for i in range(4):
            with T.block("y"):
                vi = T.axis.remap("S", [i])
                B[vi] = B[vi] + A[vi]

    sch = tir.Schedule(matmul)
    with pytest.raises(ValueError, match="one block"):
        get_tensorize_loop_mapping(sch, sch.get_block("C"), two_blocks)


# -- get_auto_tensorize_mapping_info --------------------------------------------------------------
def test_auto_mapping_fuses_conv2d_iterators_onto_a_matmul():
    conv = te.create_prim_func(te_workload.conv2d_nhwc(2, 4, 4, 8, 8, 3, 1, 1))
    sch = tir.Schedule(conv)
    info = get_auto_tensorize_mapping_info(sch, sch.get_block("conv2d_nhwc"), mma_desc(16))
    assert isinstance(info, AutoTensorizeMappingInfo) and len(info.mappings) == 1
    expected = IndexMap.from_func(lambda n, h, w, c, rh, rw, rc: (n * 16 + h * 4 + w, c,
                                                                  rh * 24 + rw * 8 + rc))
    assert info.mappings[0].is_equivalent_to(expected)
    assert apply(info.mappings[0], (1, 2, 3, 5, 2, 1, 7)) == (27, 5, 63)
    names = {lhs.name: rhs.name for lhs, rhs in info.lhs_buffer_map.items()}
    assert names == {"conv2d_nhwc": "C", "PadInput": "A", "weight": "B"}
    assert [iv.var.name for iv in info.rhs_iters] == ["vi", "vj", "vk"]
    # the proposal is a valid relayout of the block's iteration space
    sch.transform_block_layout(sch.get_block("conv2d_nhwc"), info.mappings[0])
    assert_same_numerics(conv, sch.mod["main"])


def test_auto_mapping_keeps_a_batch_iterator_first():
    bmm = te.create_prim_func(te_workload.batch_matmul_nkkm(2, 16, 16, 16))
    sch = tir.Schedule(bmm)
    info = get_auto_tensorize_mapping_info(sch, sch.get_block("Z"), mma_desc(16))
    assert info.mappings[0].is_equivalent_to(IndexMap.from_func(lambda b, i, j, k: (b, i, j, k)))


def test_auto_mapping_is_none_for_other_computations():
    sch = tir.Schedule(two_stages)              # not a multiply-accumulate
    assert get_auto_tensorize_mapping_info(sch, sch.get_block("C"), mma_desc(16)) is None
    sch = tir.Schedule(matmul)                  # float32 buffers against float16 ones
    assert get_auto_tensorize_mapping_info(sch, sch.get_block("C"), mma_desc(16, "float16")) is None

    @T.prim_func
    def gemv(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32"),
             C: T.Buffer((16,), "float32")):
        for i, k in T.grid(16, 16):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk])

    # the description's j indexes C and B; no iterator of the block does
    sch = tir.Schedule(gemv)
    assert get_auto_tensorize_mapping_info(sch, sch.get_block("C"), mma_desc(16)) is None


def test_auto_mapping_needs_each_buffer_read_at_one_place():
    @T.prim_func
    def twice(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
              C: T.Buffer((16, 16), "float32")):
        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vj, vi] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])

    sch = tir.Schedule(twice)
    assert get_auto_tensorize_mapping_info(sch, sch.get_block("C"), mma_desc(16)) is None


# -- output blocks ---------------------------------------------------------------------------------
def test_is_output_block_and_has_block():
    sch = tir.Schedule(two_stages)
    assert is_output_block(sch, sch.get_block("C"))
    assert not is_output_block(sch, sch.get_block("B"))
    assert has_block(sch, "B") and not has_block(sch, "D")


def test_for_accepts_min_val_and_function_module_offers_tensor_intrin():
    i = Var("i", "int32")
    loop = For(loop_var=i, min_val=0, extent=4, kind="serial", body=Evaluate(0))
    assert loop.min == 0 and loop.extent == 4
    with pytest.raises(TypeError, match="once"):
        For(i, 0, 4, "serial", Evaluate(0), min_val=0)
    from mlc_lab.tir.function import TensorIntrin
    assert TensorIntrin is tir.TensorIntrin


def test_tile_with_tensor_intrin_makes_the_loops_a_tensorize_takes():
    from mlc_lab.tir.schedule.transform import tile_with_tensor_intrin
    from mlc_lab.tir.tensor_intrin.x86 import VNNI_DOT_16x4_INTRIN

    @T.prim_func
    def dense(A: T.Buffer((8, 64), "uint8"), B: T.Buffer((32, 64), "int8"),
              C: T.Buffer((8, 32), "int32")):
        for i, j, k in T.grid(8, 32, 64):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.Cast("int32", A[vi, vk]) * T.Cast("int32", B[vj, vk])

    sch = tir.Schedule(dense)
    block = sch.get_block("C")
    loop = tile_with_tensor_intrin(sch, block, VNNI_DOT_16x4_INTRIN)
    assert [int(sch.get(lp).extent) for lp in sch.get_loops(block)] == [8, 2, 16, 16, 4]
    assert sch.get(loop).same_as(sch.get(sch.get_loops(block)[3]))
    assert_schedule_ok(sch, dense)
    sch.tensorize(loop, VNNI_DOT_16x4_INTRIN)
    assert "vpdpbusd" in sch.mod["main"].script()
