"""Schedule errors: one class per broken rule, under the family class of each primitive that
raises it. The rules not already triggered by the test file of their primitive are triggered here;
each check also proves the schedule is unchanged and the failure is not traced."""
import inspect
import pathlib
import re

import mlc_lab
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import errors
from mlc_lab.tir.schedule.rv import BlockRV
from schedule_checks import unchanged_after

from corpus import matmul_symbolic, mm_relu

FAMILIES = (errors.FactorError, errors.NotAdjacentError, errors.LoopsNotChainError,
            errors.WrongLoopKindError, errors.ComputeAtError, errors.InlineError, errors.CacheError,
            errors.LayoutError, errors.RFactorError, errors.BlockizeError, errors.ReindexError,
            errors.BufferAttrError, errors.MergeError, errors.RollingBufferError,
            errors.DecomposePaddingError, errors.PadEinsumError, errors.ReadWriteAtError)
RULES = [cls for cls in vars(errors).values() if inspect.isclass(cls)
         and issubclass(cls, errors.ScheduleError) and cls not in FAMILIES + (errors.ScheduleError,)]


def test_every_rule_is_raised_somewhere_and_exported():
    source = "\n".join(p.read_text() for p in
                       pathlib.Path(mlc_lab.__file__).parent.joinpath("tir", "schedule").rglob("*.py"))
    raised = set(re.findall(r"errors\.(\w+)\(", source))
    raised |= set(re.findall(r"fail\(errors\.(\w+)", source))
    raised |= set(re.findall(r"return errors\.(\w+), \(", source))
    for cls in RULES:
        assert cls.__name__ in raised, f"{cls.__name__} is never raised"
        assert cls.__name__ in tir.schedule.__all__ and cls.__name__ in errors.__all__
        assert getattr(tir.schedule, cls.__name__) is cls


def test_rules_keep_their_family_classes():
    assert issubclass(errors.OutputBlockError, errors.InlineError)
    assert issubclass(errors.OutputBlockError, errors.ComputeAtError)
    assert issubclass(errors.NotSingleWriterError, errors.CacheError)
    assert issubclass(errors.NotOnlyChildError, errors.NotAdjacentError)
    assert issubclass(errors.NotOnlyChildError, errors.LoopsNotChainError)
    assert issubclass(errors.SymbolicExtentError, errors.FactorError)
    assert issubclass(errors.SymbolicExtentError, errors.WrongLoopKindError)
    assert issubclass(errors.NotDivisibleError, errors.BlockizeError)
    assert issubclass(errors.BufferIndexOutOfRangeError, errors.LayoutError)


# -- loops ---------------------------------------------------------------------------------------

def test_symbolic_extent():
    sch = tir.Schedule(matmul_symbolic)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.sample_perfect_tile(i, 2), errors.SymbolicExtentError, "loop i")
    unchanged_after(sch, lambda: sch.vectorize(i), errors.SymbolicExtentError, "loop i")


@T.prim_func
def offset_loop(A: T.Buffer((10, 4), "float32")):
    for i in range(2, 10):
        for j in range(4):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(0)


def test_fuse_of_a_loop_not_starting_at_zero():
    sch = tir.Schedule(offset_loop)
    i, j = sch.get_loops(sch.get_block("A"))
    unchanged_after(sch, lambda: sch.fuse(i, j), errors.LoopNotStartingAtZeroError, "loop i", "2")


@T.prim_func
def two_children(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for i in range(8):
        for j in range(4):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(0)
        for j in range(4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.float32(1)


def test_reorder_through_a_loop_with_two_children():
    sch = tir.Schedule(two_children)
    i, j = sch.get_loops(sch.get_block("A"))
    unchanged_after(sch, lambda: sch.reorder(j, i), errors.NotOnlyChildError, "loop i")
    unchanged_after(sch, lambda: sch.fuse(i, j), errors.NotOnlyChildError, "loop i", "loop j")


@T.prim_func
def triangle(A: T.Buffer((4, 4), "float32")):
    for i in range(4):
        for j in range(i + 1):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = T.float32(1)


def test_reorder_of_a_dependent_loop():
    sch = tir.Schedule(triangle)
    i, j = sch.get_loops(sch.get_block("A"))
    unchanged_after(sch, lambda: sch.reorder(j, i), errors.DependentLoopError, "loop j")


def test_thread_bound_loop():
    sch = tir.Schedule(mm_relu)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    unchanged_after(sch, lambda: sch.parallel(i), errors.ThreadBoundLoopError, "loop i", "blockIdx.x")
    unchanged_after(sch, lambda: sch.fuse(i, j), errors.ThreadBoundLoopError, "loop i", "blockIdx.x")


def test_unannotate_of_a_missing_key():
    sch = tir.Schedule(mm_relu)
    i, _ = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.unannotate(i, "pragma_auto_unroll_max_step"),
                    errors.AnnotationNotFoundError, "'pragma_auto_unroll_max_step'")


# -- compute_at and inlining --------------------------------------------------------------------

def test_root_block_cannot_move_or_inline():
    sch = tir.Schedule(mm_relu)
    root = BlockRV("root", "main")
    i, _ = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.compute_at(root, i), errors.RootBlockError, '"root"')
    unchanged_after(sch, lambda: sch.compute_inline(root), errors.RootBlockError, '"root"')


def test_loop_of_another_function():
    sch = tir.Schedule(mlc_lab.IRModule({"main": mm_relu, "other": two_children}))
    other_loop = sch.get_loops(sch.get_block("A", func_name="other"))[0]
    unchanged_after(sch, lambda: sch.compute_at(sch.get_block("Y"), other_loop),
                    errors.NotInSameScopeError, '"Y"', "other")


@T.prim_func
def nested(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
           C: T.Buffer((4, 4), "float32")):
    for i in range(4):
        with T.block("outer"):
            vi = T.axis.spatial(4, i)
            for j in range(4):
                with T.block("inner"):
                    vj = T.axis.spatial(4, j)
                    B[vi, vj] = A[vi, vj]
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj]


def test_compute_at_under_its_own_loop():
    sch = tir.Schedule(nested)
    (j,) = sch.get_loops(sch.get_block("inner"))
    unchanged_after(sch, lambda: sch.compute_at(sch.get_block("outer"), j),
                    errors.LoopInsideBlockError, "loop j", '"outer"')


@T.prim_func
def sum_without_init(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i, k in T.grid(8, 4):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            B[vi] = B[vi] + A[vi, vk]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi]


def test_compute_at_of_a_reduction_without_init():
    sch = tir.Schedule(sum_without_init)
    (i,) = sch.get_loops(sch.get_block("C"))
    unchanged_after(sch, lambda: sch.compute_at(sch.get_block("B"), i),
                    errors.NotCompleteOrReductionBlockError, '"B"')


@T.prim_func
def declared_reader(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
                    D: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi]
    for i in range(8):
        with T.block("D"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi], B[vi])
            T.writes(D[vi])
            D[vi] = A[vi]


def test_compute_inline_with_a_declared_region_left():
    sch = tir.Schedule(declared_reader)
    unchanged_after(sch, lambda: sch.compute_inline(sch.get_block("B")), errors.OpaqueAccessError,
                    '"D"', "B")


@T.prim_func
def add_then_double(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] * T.float32(2)


def test_reverse_compute_inline_of_a_predicated_consumer():
    sch = tir.Schedule(add_then_double)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [3, 6])
    unchanged_after(sch, lambda: sch.reverse_compute_inline(sch.get_block("C")),
                    errors.NonTrivialPredicateError, '"C"')


# -- layout --------------------------------------------------------------------------------------

@T.prim_func
def strided(A: T.Buffer((4, 4), "float32", strides=(8, 1)), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]


def test_transform_layout_of_a_strided_buffer():
    sch = tir.Schedule(strided)
    unchanged_after(sch, lambda: sch.transform_layout(sch.get_block("B"), "A", lambda i, j: (j, i)),
                    errors.NonCompactBufferError, "buffer A")



def test_transform_layout_that_cannot_be_bounded():
    sch = tir.Schedule(matmul_symbolic)
    unchanged_after(sch, lambda: sch.transform_layout(sch.get_block("C"), "A", lambda i, j: (j, i * i)),
                    errors.UnboundedIndexError, "buffer A")


@T.prim_func
def row_view(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i in range(4):
        with T.block("row"):
            vi = T.axis.spatial(4, i)
            row = T.match_buffer(A[vi, 0:8], (8,))
            for j in range(8):
                B[vi, j] = row[j]
    for i, j in T.grid(4, 8):
        with T.block("A"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = T.float32(0)


def test_transform_layout_of_a_view_and_of_its_source():
    sch = tir.Schedule(row_view)
    unchanged_after(sch, lambda: sch.transform_layout(sch.get_block("row"), "row", lambda j: (j,)),
                    errors.NotParamOrAllocError, "buffer row")
    unchanged_after(sch, lambda: sch.transform_layout(sch.get_block("A"), "A", lambda i, j: (j, i)),
                    errors.BufferHasViewsError, "buffer A")
