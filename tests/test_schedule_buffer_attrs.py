"""storage_align, set_axis_separator, unsafe_set_dtype and add_unit_loop: the IR they make, how
lowering honours them, numerics on the interpreter and LLVM, trace replay, and refusals."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import tir as T
from mlc_lab.tir import stmt as S
from mlc_lab.tir.schedule import errors
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip
from mlc_lab.tir.stmt_functor import post_order_visit
from schedule_checks import assert_runs_like, assert_schedule_ok, unchanged_after


@T.prim_func
def scale_shift(A: T.Buffer((32, 24), "float32"), C: T.Buffer((32, 24), "float32")):
    B = T.alloc_buffer((32, 24))
    for i, j in T.grid(32, 24):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(3)
    for i, j in T.grid(32, 24):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] - T.float32(1)


@T.prim_func
def row_sums(A: T.Buffer((16, 12), "float32"), C: T.Buffer((16,), "float32")):
    S_ = T.alloc_buffer((16,))
    for i, k in T.grid(16, 12):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S_[vi] = T.float32(0)
            S_[vi] = S_[vi] + A[vi, vk]
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = S_[vi] * T.float32(0.5)


@T.prim_func
def through_views(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bv = T.match_buffer(B[vi, vj], ())
            Bv[()] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            Bw = T.match_buffer(B[vi, vj], ())
            C[vi, vj] = Bw[()] * T.float32(2)


def lowered(mod):
    return mlc_lab.lower(mod)["main"]


def allocations(func) -> dict:
    found = {}
    post_order_visit(func.body, lambda n: found.__setitem__(n.buffer.name, n.buffer)
                     if isinstance(n, S.Allocate) else None)
    return found


def run_both(sch, original):
    """The scheduled program on the interpreter and LLVM (bounds-checked too) computes what the
    original computes on the interpreter."""
    assert_runs_like(original, sch, outputs=[1])


# -- storage_align -------------------------------------------------------------------------------
def test_storage_align_records_the_request_and_pads_the_rows():
    sch = tir.Schedule(scale_shift)
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=16, offset=3)
    assert sch.get(sch.get_block("B")).annotations["buffer_dim_align"] == [[0, 0, 16, 3]]
    assert_schedule_ok(sch, scale_shift)
    flat = lowered(sch.mod)
    (b,) = [buf for name, buf in allocations(flat).items() if name == "B"]
    # rows of 24 padded to 35 (35 % 16 == 3): 31 full rows and a last one of 24
    assert b.shape[0].value == 31 * 35 + 24
    assert "B[i * 35 + j]" in flat.script()
    run_both(sch, scale_shift)


def test_storage_align_again_replaces_the_request_and_negative_axes_count_from_the_end():
    sch = tir.Schedule(scale_shift)
    block = sch.get_block("B")
    sch.storage_align(block, 0, axis=-2, factor=8, offset=0)
    sch.storage_align(block, 0, axis=0, factor=32, offset=1)
    sch.storage_align(block, 0, axis=1, factor=4, offset=2)
    assert sch.get(block).annotations["buffer_dim_align"] == [[0, 0, 32, 1], [0, 1, 4, 2]]
    # the innermost stride becomes 2, rows 24 * 2 = 48 padded to 65
    assert "B[i * 65 + j * 2]" in lowered(sch.mod).script()
    run_both(sch, scale_shift)
    verify_trace_roundtrip(sch, scale_shift)


def test_storage_align_applies_to_the_compacted_buffer():
    sch = tir.Schedule(scale_shift)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=5)
    flat = lowered(sch.mod)
    # one row of 24 is left after compaction; its single row still gets the aligned layout
    assert allocations(flat)["B"].shape[0].value == 24
    run_both(sch, scale_shift)


def test_storage_align_on_a_one_dimensional_reduction_buffer():
    sch = tir.Schedule(row_sums)
    sch.storage_align(sch.get_block("S"), 0, axis=0, factor=4, offset=3)
    # a 1-D buffer: its only stride is padded from 1 to 3
    assert allocations(lowered(sch.mod))["S_"].shape[0].value == 15 * 3 + 1
    run_both(sch, row_sums)


@T.prim_func
def transpose_double(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vj, vi] * T.float32(2)


def test_storage_align_pads_a_shared_memory_tile_on_the_gpu_simulator():
    sch = tir.Schedule(transpose_double)
    i, j = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4])
    sch.bind(i0, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    tile = sch.cache_read(sch.get_block("C"), 0, "shared")
    sch.compute_at(tile, i0)
    sch.bind(sch.get_loops(tile)[-2], "threadIdx.x")
    sch.storage_align(tile, 0, axis=0, factor=32, offset=1)
    lib = mlc_lab.build(sch.mod, target="cuda-sim")
    # the 32 x 4 tile, rows 33 apart (33 % 32 == 1): threads of a warp hit distinct banks
    source = lib.get_source("cuda")
    assert "__shared__ float A_shared[1027];" in source
    assert "A_shared[(int)threadIdx.x * 33 + ax1]" in source
    a = np.random.default_rng(2).random((32, 32)).astype("float32")
    c = mlc_lab.nd.empty((32, 32), "float32")
    lib["main"](mlc_lab.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a.T * 2)


def test_storage_align_refusals_leave_the_schedule_as_it_was():
    sch = tir.Schedule(scale_shift)
    b = sch.get_block("B")
    unchanged_after(sch, lambda: sch.storage_align(b, 0, 0, 0, 0), errors.StorageAlignFactorError, "factor")
    unchanged_after(sch, lambda: sch.storage_align(b, 0, 0, -4, 0), errors.StorageAlignFactorError)
    unchanged_after(sch, lambda: sch.storage_align(b, 0, 0, 8, 8), errors.StorageAlignOffsetError, "0 .. 7")
    unchanged_after(sch, lambda: sch.storage_align(b, 0, 2, 8, 1), errors.StorageAlignAxisError, "[-2, 2)")
    unchanged_after(sch, lambda: sch.storage_align(b, 1, 0, 8, 1), errors.BufferIndexOutOfRangeError)
    unchanged_after(sch, lambda: sch.storage_align(sch.get_block("C"), 0, 0, 8, 1),
                    errors.NotAllocatedBufferError, "parameter", "storage_align")
    with pytest.raises(TypeError):
        sch.storage_align(b, 0, 0, 8.0, 1)


def test_storage_align_refuses_a_malformed_annotation_and_explicit_strides():
    sch = tir.Schedule(scale_shift)
    sch.annotate(sch.get_block("B"), "buffer_dim_align", [0, 1])
    unchanged_after(sch, lambda: sch.storage_align(sch.get_block("B"), 0, 0, 8, 1),
                    errors.StorageAlignAnnotationError, "quadruples")

    @T.prim_func
    def strided(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
        B = T.alloc_buffer((4, 4), strides=(8, 1))
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj]
    sch = tir.Schedule(strided)
    unchanged_after(sch, lambda: sch.storage_align(sch.get_block("B"), 0, 0, 8, 1),
                    errors.StridedBufferError, "strides")


def test_a_stale_alignment_request_is_ignored_by_lowering():
    sch = tir.Schedule(scale_shift)
    sch.annotate(sch.get_block("B"), "buffer_dim_align", [[3, 0, 8, 1], [0, 5, 8, 1]])
    assert "B[i * 24 + j]" in lowered(sch.mod).script()


# -- set_axis_separator --------------------------------------------------------------------------
def test_set_axis_separator_on_an_allocated_buffer():
    sch = tir.Schedule(scale_shift)
    sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
    func = sch.mod["main"]
    (b,) = [n for n in func.body.block.alloc_buffers]
    assert b.axis_separators == (1,)
    assert "axis_separators=[1]" in func.script()
    assert_schedule_ok(sch, scale_shift)
    run_both(sch, scale_shift)


def test_set_axis_separator_on_a_parameter_by_name_and_removing_it():
    sch = tir.Schedule(scale_shift)
    sch.set_axis_separator("B", "A", [1])
    assert sch.mod["main"].params[0].axis_separators == (1,)
    run_both(sch, scale_shift)
    sch.set_axis_separator("B", ("read", 0), None)
    assert sch.mod["main"].params[0].axis_separators == ()
    verify_trace_roundtrip(sch, scale_shift)


def test_set_axis_separator_reaches_the_views():
    sch = tir.Schedule(through_views)
    sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
    views = []
    post_order_visit(sch.mod["main"].body, lambda n: views.append(n.buffer)
                     if isinstance(n, S.MatchBufferRegion) else None)
    assert [v.axis_separators for v in views] == [(1,), (1,)]
    run_both(sch, through_views)
    verify_trace_roundtrip(sch, through_views)


def test_set_axis_separator_refusals():
    sch = tir.Schedule(scale_shift)
    b = sch.get_block("B")
    message = unchanged_after(sch, lambda: sch.set_axis_separator(b, ("write", 1), [1]),
                              errors.AccessIndexOutOfRangeError, "write index 1")
    assert message
    with pytest.raises(AssertionError):
        sch.set_axis_separator(b, ("read", -1), [1])
    unchanged_after(sch, lambda: sch.set_axis_separator(b, ("write", 0), [2]),
                    errors.AxisSeparatorsError, "1 .. 1")
    unchanged_after(sch, lambda: sch.set_axis_separator(b, "Q", [1]), errors.BufferNotAccessedError)
    with pytest.raises(TypeError):
        sch.set_axis_separator(b, ("write", 0), ["1"])


# -- unsafe_set_dtype ----------------------------------------------------------------------------
@T.prim_func
def scale_shift_f16(A: T.Buffer((32, 24), "float32"), C: T.Buffer((32, 24), "float32")):
    B = T.alloc_buffer((32, 24), "float16")
    for i, j in T.grid(32, 24):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.Cast("float16", A[vi, vj] * T.float32(3))
    for i, j in T.grid(32, 24):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.Cast("float32", B[vi, vj]) - T.float32(1)


def run_against(func, want_fn, shape):
    a = np.random.default_rng(0).uniform(-4, 4, size=(32, 24) if shape is None else shape).astype("float32")
    for target in ("python", "llvm"):
        out = np.full(want_fn(a).shape, np.nan, "float32")
        mlc_lab.build(func, target=target)["main"](a, out)
        np.testing.assert_allclose(out, want_fn(a), rtol=1e-6, atol=1e-6, err_msg=target)


def test_unsafe_set_dtype_converts_at_every_store_and_load():
    sch = tir.Schedule(scale_shift)
    sch.unsafe_set_dtype(sch.get_block("B"), 0, "float16")
    assert_structural_equal(sch.mod["main"], scale_shift_f16.with_attr("global_symbol", "scale_shift"))
    run_against(sch.mod, lambda a: (a * 3).astype("float16").astype("float32") - 1, None)
    verify_trace_roundtrip(sch, scale_shift)


def test_unsafe_set_dtype_to_an_integer_type_in_a_reduction():
    sch = tir.Schedule(row_sums)
    sch.unsafe_set_dtype("S", "S_", "int32")
    text = sch.mod["main"].script()
    assert 'T.alloc_buffer((16,), "int32")' in text

    def want(a):
        acc = np.zeros(16, "int32")
        for k in range(12):   # each partial sum is truncated to an int as it is stored
            acc = (acc.astype("float32") + a[:, k]).astype("int32")
        return acc.astype("float32") * np.float32(0.5)
    run_against(sch.mod, want, (16, 12))
    verify_trace_roundtrip(sch, row_sums)


def test_unsafe_set_dtype_changes_the_views_too():
    sch = tir.Schedule(through_views)
    sch.unsafe_set_dtype(sch.get_block("B"), 0, "float16")
    views = []
    post_order_visit(sch.mod["main"].body, lambda n: views.append(n.buffer)
                     if isinstance(n, S.MatchBufferRegion) else None)
    assert [v.dtype for v in views] == ["float16", "float16"]
    a = np.random.default_rng(1).uniform(-4, 4, size=(8, 8)).astype("float32")
    for target in ("python", "llvm"):
        out = np.zeros((8, 8), "float32")
        mlc_lab.build(sch.mod, target=target)["main"](a, out)
        np.testing.assert_allclose(out, (a + 1).astype("float16").astype("float32") * 2, err_msg=target)


def test_unsafe_set_dtype_to_the_same_dtype_changes_nothing():
    sch = tir.Schedule(scale_shift)
    before = sch.mod
    sch.unsafe_set_dtype(sch.get_block("B"), 0, "float32")
    assert sch.mod is before


def test_unsafe_set_dtype_refusals():
    sch = tir.Schedule(scale_shift)
    unchanged_after(sch, lambda: sch.unsafe_set_dtype(sch.get_block("C"), 0, "float16"),
                    errors.NotAllocatedBufferError, "parameter")
    unchanged_after(sch, lambda: sch.unsafe_set_dtype(sch.get_block("B"), 1, "float16"),
                    errors.BufferIndexOutOfRangeError)
    unchanged_after(sch, lambda: sch.unsafe_set_dtype(sch.get_block("B"), 0, "float17"),
                    errors.InvalidDTypeError, "float17")
    unchanged_after(sch, lambda: sch.unsafe_set_dtype(sch.get_block("B"), 0, "float32x4"),
                    errors.InvalidDTypeError)

    @T.prim_func
    def handed_out(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        B = T.alloc_buffer((4,))
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]
        with T.block("C"):
            T.reads(B[0:4])
            T.writes(C[0:4])
            T.evaluate(T.call_extern("int32", "consume", B.data, C.data))
    sch = tir.Schedule(handed_out)
    unchanged_after(sch, lambda: sch.unsafe_set_dtype(sch.get_block("B"), 0, "float16"),
                    errors.OpaqueBufferUseError, "B.data")


# -- add_unit_loop -------------------------------------------------------------------------------
@T.prim_func
def scalar_add(A: T.Buffer((), "float32"), C: T.Buffer((), "float32")):
    with T.block("C"):
        vi = T.axis.spatial(1, 0)
        C[()] = A[()] + T.float32(1)


def test_add_unit_loop_above_a_block_and_above_a_loop():
    sch = tir.Schedule(scalar_add)
    u = sch.add_unit_loop(sch.get_block("C"))
    assert sch.get(u).extent.value == 1
    assert len(sch.get_loops(sch.get_block("C"))) == 1
    outer = sch.add_unit_loop(u)
    loops = sch.get_loops(sch.get_block("C"))
    assert [sch.get(l) for l in loops][0] is sch.get(outer)
    assert len(loops) == 2
    verify_trace_roundtrip(sch, scalar_add)
    out = np.zeros((), "float32")
    mlc_lab.build(sch.mod, target="llvm")["main"](np.array(2.0, "float32"), out)
    assert out == 3.0


def test_add_unit_loop_gives_a_loop_other_primitives_use():
    sch = tir.Schedule(scale_shift)
    i, _ = sch.get_loops(sch.get_block("C"))
    u = sch.add_unit_loop(i)
    sch.fuse(u, i)
    assert_schedule_ok(sch, scale_shift)


def test_add_unit_loop_refuses_the_root_block():
    sch = tir.Schedule(scalar_add)
    unchanged_after(sch, lambda: sch.add_unit_loop(sch.get_block("root")),
                    errors.UnitLoopAboveRootError, "root")


def test_storage_align_and_axis_separators_together():
    sch = tir.Schedule(scale_shift)
    sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=16, offset=3)
    assert "B[i * 35 + j]" in lowered(sch.mod).script()
    run_both(sch, scale_shift)


def test_unsafe_set_dtype_leaves_the_elem_offset_marker_unconverted():
    @T.prim_func
    def with_offset(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "int32")):
        B = T.alloc_buffer((4,))
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] * T.float32(4)
        for i in range(4):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                C[vi] = T.Cast("int32", B[vi]) + B.elem_offset
    sch = tir.Schedule(with_offset)
    sch.unsafe_set_dtype("B", 0, "float16")
    assert "+ B.elem_offset" in sch.mod["main"].script()
    a = np.array([0.5, 1.0, 2.25, 3.0], "float32")
    out = np.zeros(4, "int32")
    mlc_lab.build(sch.mod, target="llvm")["main"](a, out)
    np.testing.assert_array_equal(out, (a * 4).astype("int32"))
