"""transform_layout: expected IR, numerics (also for parameters, whose layout the caller
changes), index maps given as lambdas, IndexMaps or strings, padding with pad_value, trace
replay, errors; transform_block_layout."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import numerics
from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after

from corpus import mm_relu


@T.prim_func
def two_stage(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8))
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] * T.float32(2)


@T.prim_func
def two_stage_packed(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((2, 4, 4))
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vj // 4, vi, vj % 4] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vj // 4, vi, vj % 4] * T.float32(2)


SOURCE = "lambda i, j: (j // 4, i, j % 4)"


@pytest.mark.parametrize("buffer", [("write", 0), "B"])
@pytest.mark.parametrize("index_map", [lambda i, j: (j // 4, i, j % 4), SOURCE])
def test_transform_alloc_buffer(buffer, index_map):
    sch = tir.Schedule(two_stage)
    sch.transform_layout(sch.get_block("B"), buffer, index_map)
    assert_schedule_ok(sch, two_stage, two_stage_packed)
    assert sch.trace.as_python()[-1].endswith(f'index_map="{SOURCE}")')


def test_transform_through_the_reader():
    sch = tir.Schedule(two_stage)
    sch.transform_layout(sch.get_block("C"), ("read", 0), SOURCE)
    assert_schedule_ok(sch, two_stage, two_stage_packed)


def test_lambda_source_is_cut_out_of_a_multi_line_call():
    sch = tir.Schedule(two_stage)
    sch.transform_layout(
        sch.get_block("B"),
        ("write", 0),
        lambda i, j: (j // 4,
                      i, j % 4))
    assert sch.trace.insts[-1].kwargs["index_map"] == "lambda i, j: (j // 4,\n                      i, j % 4)"
    assert_schedule_ok(sch, two_stage, two_stage_packed)


def test_index_map_from_a_def_is_recorded_as_a_lambda():
    def swap(i, j):
        return j, i
    sch = tir.Schedule(two_stage)
    sch.transform_layout(sch.get_block("B"), "B", swap)
    assert sch.trace.insts[-1].kwargs["index_map"] == "lambda i, j: (j, i)"
    assert sch.mod["main"].body.block.alloc_buffers[0].shape[0].value == 8
    assert_schedule_ok(sch, two_stage)


@T.prim_func
def rowsum(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def rowsum_packed(A: T.Buffer((16, 8, 4), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vk // 4, vi, vk % 4]


def test_transform_parameter_changes_the_signature():
    sch = tir.Schedule(rowsum)
    sch.transform_layout(sch.get_block("B"), ("read", 0), lambda i, k: (k // 4, i, k % 4))
    assert_schedule_ok(sch, rowsum, rowsum_packed, check_numerics=False)
    a, b = numerics.random_arguments(rowsum)
    (_, want) = numerics.run(rowsum, [a, b])
    packed = np.ascontiguousarray(a.reshape(8, 16, 4).transpose(1, 0, 2))
    (_, got) = numerics.run(sch.mod["main"], [packed, b])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_transform_cache_buffer_of_the_course_matmul():
    sch = tir.Schedule(mm_relu)
    sch.cache_read(sch.get_block("Y"), 1, "shared")
    sch.transform_layout(sch.get_block("B_shared"), ("write", 0), lambda k, j: (j // 16, k, j % 16))
    (_, cache) = sch.mod["main"].body.block.alloc_buffers
    assert [d.value for d in cache.shape] == [8, 128, 16]
    assert_schedule_ok(sch, mm_relu)


def test_region_of_a_whole_row_is_mapped():
    @T.prim_func
    def row_copy(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
        B = T.alloc_buffer((4, 8))
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                T.reads(A[vi, 0:8])
                T.writes(B[vi, 0:8])
                for j in range(8):
                    B[vi, j] = A[vi, j]
        for i, j in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj]
    sch = tir.Schedule(row_copy)
    sch.transform_layout(sch.get_block("B"), "B", SOURCE)
    write = sch.get_block("B")
    region = sch.mod["main"].body.block.body.seq[0].body.block.writes[0]
    assert [str(r.extent) for r in region.region] == ["2", "1", "4"]
    assert write.name == "B"
    assert_schedule_ok(sch, row_copy)


# -- errors ---------------------------------------------------------------------------------------------


def test_layout_errors():
    sch = tir.Schedule(two_stage)
    block = sch.get_block("B")
    unchanged_after(sch, lambda: sch.transform_layout(block, ("write", 0), lambda i: (i,)),
                    tir.schedule.IndexMapArityError, "buffer B")
    unchanged_after(sch, lambda: sch.transform_layout(block, ("write", 0), lambda i, j: (i,)),
                    tir.schedule.NotInjectiveError, "buffer B")
    unchanged_after(sch, lambda: sch.transform_layout(block, ("write", 0), lambda i, j: (i - 1, j)),
                    tir.schedule.NegativeIndexError, "buffer B")
    unchanged_after(sch, lambda: sch.transform_layout(block, "D", SOURCE),
                    tir.schedule.BufferNotAccessedError, "'D'", '"B"')
    unchanged_after(sch, lambda: sch.transform_layout(block, ("read", 3), SOURCE),
                    tir.schedule.BufferIndexOutOfRangeError, "read index 3")
    with pytest.raises(TypeError, match="buffer"):
        sch.transform_layout(block, 0, SOURCE)
    with pytest.raises(TypeError, match="index_map"):
        sch.transform_layout(block, "B", "i, j: (j, i)")
    with pytest.raises(TypeError, match="index_map"):
        sch.transform_layout(block, "B", 3)
    assert len(sch.trace.insts) == 1


# -- padding --------------------------------------------------------------------------------------------


@T.prim_func
def scale14(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,))
    for i in range(14):
        with T.block("B"):
            vi = T.axis.spatial(14, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(14):
        with T.block("C"):
            vi = T.axis.spatial(14, i)
            C[vi] = B[vi] + T.float32(1)


@T.prim_func
def scale14_padded(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((4, 4))
    for a, b in T.grid(4, 4):
        with T.block("B"):
            va, vb = T.axis.remap("SS", [a, b])
            B[va, vb] = T.if_then_else(va == 3 and vb >= 2, T.float32(-1), A[va * 4 + vb] * T.float32(2))
    for i in range(14):
        with T.block("C"):
            vi = T.axis.spatial(14, i)
            C[vi] = B[vi // 4, vi % 4] + T.float32(1)


def split4(i):
    return i // 4, i % 4


@pytest.mark.parametrize("index_map", [split4, "lambda i: (i // 4, i % 4)",
                                       tir.IndexMap.from_func(split4, index_dtype="int32")])
@pytest.mark.parametrize("pad_value", [-1.0, lambda a, b: T.float32(-1), "lambda a, b: T.float32(-1)"])
def test_row_major_writer_fills_the_padding(index_map, pad_value):
    sch = tir.Schedule(scale14)
    sch.transform_layout("B", "B", index_map, pad_value=pad_value)
    assert_schedule_ok(sch, scale14, scale14_padded)
    assert "pad_value=" in sch.trace.as_python()[-1]


def test_padding_of_an_output_parameter_is_written():
    sch = tir.Schedule(scale14)
    sch.transform_layout(sch.get_block("C"), ("write", 0), split4, pad_value=lambda a, b: T.Cast("float32", a * 4 + b))
    assert_schedule_ok(sch, scale14, check_numerics=False)
    args = numerics.random_arguments(scale14)
    (_, want) = numerics.run(scale14, args)
    for target in ("python", "llvm -bounds-check"):
        got = np.zeros((4, 4), "float32")
        mlc_lab.build(sch.mod, target=target)["main"](args[0], got)
        np.testing.assert_allclose(got.ravel()[:14], want, rtol=1e-6)
        assert list(got.ravel()[14:]) == [14.0, 15.0]


def test_padding_of_an_input_parameter_is_assumed():
    sch = tir.Schedule(scale14)
    sch.transform_layout(sch.get_block("B"), ("read", 0), split4, pad_value=0.0)
    script = sch.mod["main"].script()
    assert 'T.block("buffer_A_assumption")' in script and "T.assume(" in script
    assert_schedule_ok(sch, scale14, check_numerics=False)
    args = numerics.random_arguments(scale14)
    (_, want) = numerics.run(scale14, args)
    packed = np.zeros(16, "float32")
    packed[:14] = args[0]
    got = np.zeros(14, "float32")
    mlc_lab.build(sch.mod, target="llvm")["main"](packed.reshape(4, 4), got)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@T.prim_func
def two_outputs(A: T.Buffer((14,), "float32"), D: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,))
    C = T.alloc_buffer((14,))
    for i in range(14):
        with T.block("BC"):
            vi = T.axis.spatial(14, i)
            B[vi] = A[vi]
            C[vi] = A[vi] * T.float32(3)
    for i in range(14):
        with T.block("D"):
            vi = T.axis.spatial(14, i)
            D[vi] = B[vi] + C[vi]


def test_a_writer_with_other_stores_gets_a_padding_block_after_it():
    sch = tir.Schedule(two_outputs)
    sch.transform_layout("BC", "B", split4, pad_value=0.0)
    func = sch.mod["main"]
    assert 'T.block("buffer_B_padding")' in func.script()
    assert "T.where(axis0 == 3 and axis1 >= 2)" in func.script()
    assert_schedule_ok(sch, two_outputs)


@T.prim_func
def rowsum14(A: T.Buffer((14, 8), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,))
    for i, k in T.grid(14, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
    for i in range(14):
        with T.block("C"):
            vi = T.axis.spatial(14, i)
            C[vi] = B[vi]


def test_reduction_writer_over_the_padded_shape():
    sch = tir.Schedule(rowsum14)
    sch.transform_layout("B", "B", split4, pad_value=0.0)
    realize = sch.get(sch.get_block("B"))
    assert [iv.iter_type for iv in realize.iter_vars] == ["spatial", "spatial", "reduce"]
    assert_schedule_ok(sch, rowsum14)


def test_padding_rules():
    sch = tir.Schedule(scale14)
    unchanged_after(sch, lambda: sch.transform_layout("C", "C", split4),
                    tir.schedule.TransformationPaddingError, "parameter C", "pad_value")
    unchanged_after(sch, lambda: sch.transform_layout("B", "B", split4, pad_value=0),
                    tir.schedule.PadValueTypeError, "float32", "int32")
    unchanged_after(sch, lambda: sch.transform_layout("B", "B", split4, pad_value=lambda a, b: (a, b)),
                    tir.schedule.PadValueArityError, "buffer B")
    other = tir.decl_buffer((1,), "float32", name="other")
    unchanged_after(sch, lambda: sch.transform_layout("B", "B", split4, pad_value=lambda a, b: other[0]),
                    tir.schedule.PadValueLoadError, "other")
    # the caller may accept unused places of a parameter it lays out itself
    sch.transform_layout("C", "C", split4, assume_injective_transform=True)
    assert [d.value for d in sch.mod["main"].buffer_map[sch.mod["main"].params[1]].shape] == [4, 4]


def test_axis_separator_and_var_args_maps():
    sch = tir.Schedule(two_stage)
    sch.transform_layout("B", "B", lambda *ij: (ij[0], tir.IndexMap.AXIS_SEPARATOR, ij[1] // 4, ij[1] % 4))
    (cache,) = sch.mod["main"].body.block.alloc_buffers
    assert cache.axis_separators == (1,) and [d.value for d in cache.shape] == [4, 2, 4]
    assert_schedule_ok(sch, two_stage)


def test_a_map_using_a_scalar_parameter_replays():
    @T.prim_func
    def func(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), n: T.int32):
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = A[vi] + T.float32(1)
    n = func.params[2]
    sch = tir.Schedule(func)
    sch.transform_layout("C", "C", lambda i: (i // n, i % n), assume_injective_transform=True)
    assert sch.trace.as_python()[-1].count("n") >= 2
    replayed = tir.Trace.from_json(sch.trace.as_json()).apply_to_schedule(tir.Schedule(func))
    assert mlc_lab.ir.structural_equal(replayed.mod, sch.mod)


# -- transform_block_layout ------------------------------------------------------------------------------


@T.prim_func
def matmul(A: T.Buffer((4, 6), "float32"), B: T.Buffer((6, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for i, j, k in T.grid(4, 8, 6):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def matmul_fused(A: T.Buffer((4, 6), "float32"), B: T.Buffer((6, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    for a, b in T.grid(32, 6):
        with T.block("C"):
            v0, v1 = T.axis.remap("SR", [a, b])
            with T.init():
                C[v0 // 8, v0 % 8] = T.float32(0)
            C[v0 // 8, v0 % 8] = C[v0 // 8, v0 % 8] + A[v0 // 8, v1] * B[v1, v0 % 8]


@pytest.mark.parametrize("block", ["C", None])
def test_block_layout_fuses_iterators(block):
    sch = tir.Schedule(matmul)
    sch.transform_block_layout(block or sch.get_block("C"), lambda i, j, k: (i * 8 + j, k))
    assert_schedule_ok(sch, matmul, matmul_fused)


def test_block_layout_splits_and_reorders():
    sch = tir.Schedule(matmul)
    sch.transform_block_layout("C", lambda i, j, k: (j // 4, i, k, j % 4))
    kinds = [iv.iter_type for iv in sch.get(sch.get_block("C")).iter_vars]
    assert kinds == ["spatial", "spatial", "reduce", "spatial"]
    assert_schedule_ok(sch, matmul)


def test_block_layout_errors():
    sch = tir.Schedule(matmul)
    unchanged_after(sch, lambda: sch.transform_block_layout("C", lambda i, j, k: (i + j, k)),
                    tir.schedule.NotBijectiveAffineMapError, '"C"')
    unchanged_after(sch, lambda: sch.transform_block_layout("C", lambda i, j, k: (i * 8 + j, k // 2)),
                    tir.schedule.NotBijectiveAffineMapError, '"C"')
    unchanged_after(sch, lambda: sch.transform_block_layout("C", lambda i, j, k: (i, j * 6 + k)),
                    tir.schedule.MixedIterTypeError, "reduce and spatial")
    unchanged_after(sch, lambda: sch.transform_block_layout("C", lambda i, j: (i, j)),
                    tir.schedule.BlockLayoutArityError, "3 iterators")
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [2, 2])
    unchanged_after(sch, lambda: sch.transform_block_layout("C", lambda i, j, k: (i, j, k)),
                    tir.schedule.BlockLayoutLoopsError, "one to one")


def test_foreign_names_in_a_map_are_refused():
    m = tir.Var("m")
    sch = tir.Schedule(two_stage)
    unchanged_after(sch, lambda: sch.transform_layout("B", "B", lambda i, j: (i // m, j)),
                    tir.schedule.IndexMapNameError, "m")
    unchanged_after(sch, lambda: sch.transform_block_layout("B", lambda i, j: (i * m + j,)),
                    tir.schedule.IndexMapNameError, "m")


def test_an_allocated_buffer_may_keep_unused_places():
    # one spare column per row: the shared-memory trick against bank conflicts
    sch = tir.Schedule(two_stage)
    sch.transform_layout("B", "B", lambda i, j: (i * 9 + j,))
    (cache,) = sch.mod["main"].body.block.alloc_buffers
    assert [d.value for d in cache.shape] == [35]
    assert_schedule_ok(sch, two_stage)


@T.prim_func
def running_sum(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32")):
    B = T.alloc_buffer((14,))
    for i in range(14):
        B[i] = A[i] + T.if_then_else(i > 0, B[i - 1], T.float32(0))
    for i in range(14):
        with T.block("C"):
            vi = T.axis.spatial(14, i)
            C[vi] = B[vi]


def test_a_writer_reading_other_elements_keeps_its_loop():
    # the writer's order matters (B[i] reads B[i - 1]): the padding gets a block of its own
    sch = tir.Schedule(running_sum)
    sch.transform_layout("C", "B", lambda i: (i % 4, i // 4), pad_value=0.0)
    script = sch.mod["main"].script()
    assert "for i in range(14)" in script and 'T.block("buffer_B_padding")' in script
    assert_schedule_ok(sch, running_sum)


# A writer whose nest is not its own keeps its loops; a block after it fills the padding.


def _block_names(sch):
    names = []
    mlc_lab.tir.stmt_functor.post_order_visit(
        sch.mod["main"].body, lambda n: names.append(n.name_hint) if isinstance(n, tir.Block) else None)
    return names


@T.prim_func
def rowsum5(A: T.Buffer((5, 7), "float32"), C: T.Buffer((5,), "float32")):
    Y = T.alloc_buffer((5,))
    for i, k in T.grid(5, 7):
        with T.block("Y"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                Y[vi] = T.float32(0)
            Y[vi] = Y[vi] + A[vi, vk]
    for i in range(5):
        with T.block("C"):
            vi = T.axis.spatial(5, i)
            C[vi] = Y[vi]


def test_padding_a_blockized_reductions_init_block():
    # the init block's loop i also holds the outer block (bound to i) and the update
    sch = tir.Schedule(rowsum5)
    sch.blockize(sch.get_loops(sch.get_block("Y"))[1])
    sch.transform_layout(sch.get_block("Y_init"), ("write", 0), "lambda x: (x // 3, x % 3)", pad_value=0.0)
    assert {"Y_o", "Y_init", "Y", "buffer_Y_padding"} <= set(_block_names(sch))
    assert sch.mod["main"].script().count("for i in range(5)") == 2
    assert_schedule_ok(sch, rowsum5)
    assert_runs_like(rowsum5, sch, [1])


@T.prim_func
def transpose_bias(A: T.Buffer((7, 11), "float32"), b: T.Buffer((7,), "float32"),
                   C: T.Buffer((11, 7), "float32")):
    At = T.alloc_buffer((11, 7))
    for i, j in T.grid(11, 7):
        with T.block("At"):
            vi, vj = T.axis.remap("SS", [i, j])
            At[vi, vj] = A[vj, vi]
    for i, j in T.grid(11, 7):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = At[vi, vj] + b[vj]


def test_padding_a_writer_that_shares_its_outer_loop_with_the_consumer():
    # after reverse_compute_at, loop i holds the writer's loop j and the consumer: rebuilding
    # loop i over the padded shape would lose the consumer
    sch = tir.Schedule(transpose_bias)
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("At"))[0])
    sch.transform_layout(sch.get_block("C"), ("read", 0), "lambda x, y: (x // 7, x % 7, y)", pad_value=0.0)
    assert {"At", "C", "buffer_At_padding"} <= set(_block_names(sch))
    assert_schedule_ok(sch, transpose_bias)
    assert_runs_like(transpose_bias, sch, [2])


@T.prim_func
def double8x4(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for i, j in T.grid(8, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def test_padding_a_read_at_copy():
    # the copy stores under a loop of its own block, next to the consumer under loop i
    sch = tir.Schedule(double8x4)
    sch.read_at(sch.get_loops("B")[0], sch.get_block("B"), 0, "global")
    sch.transform_layout(sch.get_block("A_global"), ("write", 0), "lambda x, y: (x // 3, x % 3, y)",
                         pad_value=0.0)
    assert {"A_global", "B", "buffer_A_global_padding"} <= set(_block_names(sch))
    assert_schedule_ok(sch, double8x4)
    assert_runs_like(double8x4, sch, [1])


@T.prim_func
def copy_first12(A: T.Buffer((14,), "float32"), B: T.Buffer((14,), "float32")):
    for i in range(14):
        with T.block("B"):
            vi = T.axis.spatial(14, i)
            T.where(i < 12)
            B[vi] = A[vi]


def test_padding_twice_names_the_second_padding_block_apart():
    sch = tir.Schedule(two_outputs)
    sch.transform_layout("BC", "B", split4, pad_value=0.0)
    sch.transform_layout("buffer_B_padding", "B", lambda a, b: (a, b // 3, b % 3), pad_value=-1.0)
    assert {"buffer_B_padding", "buffer_B_padding_1"} <= set(_block_names(sch))
    assert_schedule_ok(sch, two_outputs)
    assert_runs_like(two_outputs, sch, [1])


def test_padding_a_writer_with_a_predicate():
    # rebuilt over the padded shape, T.where(i < 12) would skip the padding too
    sch = tir.Schedule(copy_first12)
    sch.transform_layout("B", "B", split4, pad_value=-1.0)
    assert "buffer_B_padding" in _block_names(sch)
    assert_schedule_ok(sch, copy_first12, check_numerics=False)
    a = np.arange(14, dtype="float32")
    for target in ("python", "llvm -bounds-check"):
        got = np.full((4, 4), np.nan, "float32")
        mlc_lab.build(sch.mod, target=target)["main"](a, got)
        np.testing.assert_array_equal(got.ravel()[:12], a[:12], err_msg=target)
        assert list(got.ravel()[14:]) == [-1.0, -1.0], target


@T.prim_func
def copy_by_n(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32"), n: T.int32):
    B = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi]


def test_split_by_a_scalar_parameter_with_padding():
    n = copy_by_n.params[2]
    sch = tir.Schedule(copy_by_n)
    sch.transform_layout("B", "B", lambda i: (i // n, i % n), pad_value=0.0)
    (cache,) = sch.mod["main"].body.block.alloc_buffers
    assert str(cache.shape[1]) == "n"
    a = np.arange(16, dtype="float32")
    for extent in (3, 4, 5, 16):
        for target in ("python", "llvm -bounds-check"):
            c = np.zeros(16, "float32")
            mlc_lab.build(sch.mod, target=target)["main"](a, c, extent)
            np.testing.assert_allclose(c, a * 2, err_msg=f"{target}, n={extent}")


def test_padding_a_reduction_gives_its_init_and_update_loops_of_their_own():
    """After decompose_reduction both the init and the update writer are rewritten over the padded
    shape: each gets its own loop variables (one variable defined twice does not parse back)."""
    @T.prim_func
    def row_max(A: T.Buffer((7, 20), "float32"), M: T.Buffer((7,), "float32")):
        mx = T.alloc_buffer((7,))
        for i, k in T.grid(7, 20):
            with T.block("mx"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    mx[vi] = T.float32(-3.4e38)
                mx[vi] = T.max(mx[vi], A[vi, vk])
        for i in range(7):
            with T.block("M"):
                vi = T.axis.spatial(7, i)
                M[vi] = mx[vi]

    sch = tir.Schedule(row_max)
    sch.decompose_reduction(sch.get_block("mx"), sch.get_loops(sch.get_block("mx"))[0])
    sch.transform_layout(sch.get_block("M"), ("read", 0), lambda i: (i // 4, i % 4), pad_value=0.0)
    assert_schedule_ok(sch, row_max)
