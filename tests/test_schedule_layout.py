"""transform_layout: expected IR, numerics (also for parameters, whose layout the caller
changes), index maps given as lambdas or strings, trace replay, errors."""
import numpy as np
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import numerics
from schedule_checks import assert_schedule_ok, unchanged_after

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
