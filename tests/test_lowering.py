"""Lowering (mlc_lab.tir.transform): each pass on a small program against the expected IR, and
every corpus program and course sequence lowered and run by the interpreter, which must give
the same results as the unlowered function."""
import numpy as np
import pytest

from mlc_lab import tir
from mlc_lab.ir import IRModule, assert_structural_equal
from mlc_lab.runtime.interpreter import run
from mlc_lab.script import tir as T
from mlc_lab.script.parser import from_source
from mlc_lab.tir import stmt as S
from mlc_lab.tir import transform
from mlc_lab.tir.schedule import numerics
from mlc_lab.tir.transform import (PASSES, LoweringError, flatten_buffer, lower, lower_blocks,
                                   lower_init_block, plan_and_compact_allocations, simplify,
                                   unroll_loop, vectorize_loop, verify_lowered, verify_memory)

from corpus import CORPUS, mm_relu
from test_course_sequences import matmul, vector_add, window_sum


def lowered(func):
    return lower(func)[func.name or "main"]


def assert_same_numerics(func):
    """Run ``func`` and its lowered form on the same random inputs: every buffer must agree."""
    low = lowered(func)
    args = numerics.random_arguments(func)
    want = numerics.run(func, args)
    flat = [a.copy().reshape(-1) if isinstance(a, np.ndarray) else a for a in args]
    # Flat parameters no longer carry symbolic dimensions: pass them as extra scalars.
    sizes = {}
    for p, a in zip(func.params, args):
        for dim, n in zip(getattr(p, "shape", ()), np.shape(a)):
            if isinstance(dim, tir.Var):
                sizes[dim] = n
    run(low.replace(params=low.params + tuple(sizes)), flat + list(sizes.values()))
    for p, w, h in zip(func.params, want, flat):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(h, w.reshape(-1), rtol=1e-4, atol=1e-4, err_msg=p.name)
    return low


def assert_same_ir(got, expected):
    """Structural equality of two PrimFuncs whatever their names (the parser names a function
    after its Python name)."""
    assert_structural_equal(got.replace(attrs=()), expected.replace(attrs=()))


def nodes(func, cls):
    found = []

    class Collect(tir.StmtExprVisitor):
        def visit(self, node):
            if isinstance(node, cls):
                found.append(node)
            return super().visit(node)
    Collect().visit(func.body)
    return found


# ----------------------------------------------------------------------------------------------
# The pipeline
def test_passes_in_order():
    assert [p.__name__ for p in PASSES] == [
        "lower_init_block", "plan_and_compact_allocations", "lower_blocks", "flatten_buffer",
        "simplify", "unroll_loop", "partition_tail", "vectorize_loop", "simplify"]


def test_lower_takes_a_module_and_keeps_names():
    mod = lower(IRModule({"f": mm_relu}))
    assert [gv.name_hint for gv in mod.functions] == ["f"]
    assert mod["f"].attr_dict["tir.lowered"] is True
    with pytest.raises(TypeError, match="IRModule or a PrimFunc"):
        lower("mm_relu")


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_lowered_matches_interpreter(name):
    low = assert_same_numerics(CORPUS[name].func)
    verify_lowered(low)
    assert not nodes(low, (S.Block, S.BlockRealize))


def test_mm_relu_lowered_prints_and_round_trips():
    low = lowered(mm_relu)
    expected = '''
@T.prim_func
def mm_relu(A: T.Buffer((16384,), "float32"), B: T.Buffer((16384,), "float32"), C: T.Buffer((16384,), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.lowered": True, "tir.noalias": True})
    Y = T.allocate((16384,), "float32", "global")
    for i, j, k in T.grid(128, 128, 128):
        if k == 0:
            Y[i * 128 + j] = T.float32(0)
        Y[i * 128 + j] = Y[i * 128 + j] + A[i * 128 + k] * B[k * 128 + j]
    for i, j in T.grid(128, 128):
        C[i * 128 + j] = T.max(Y[i * 128 + j], T.float32(0))'''
    assert low.script() == expected.strip("\n")
    assert_structural_equal(from_source(low.script()), low)


def test_debug_mode_names_the_pass_that_broke_the_ir(monkeypatch):
    @transform.prim_func_pass
    def drop_allocations(func):
        class Drop(tir.StmtExprMutator):
            def visit_Allocate(self, alloc):
                return self.visit(alloc.body)
        return func.replace(body=Drop().visit(func.body))
    broken = PASSES[:3] + [drop_allocations] + PASSES[3:]
    monkeypatch.setattr(transform.pipeline, "PASSES", broken)
    with pytest.raises(LoweringError, match="lowering pass drop_allocations broke the IR.*buffer Y") as info:
        lower(mm_relu, debug=True)
    assert info.value.pass_name == "drop_allocations"
    monkeypatch.setenv("MLC_LAB_DEBUG", "1")
    with pytest.raises(LoweringError, match="drop_allocations"):
        lower(mm_relu)


def test_verify_lowered_rejects_blocks_and_multi_dim_buffers():
    with pytest.raises(tir.VerifyError, match="tir.lowered"):
        verify_lowered(mm_relu)
    with pytest.raises(tir.VerifyError, match="block \"root\" is left"):
        verify_lowered(mm_relu.with_attr("tir.lowered", True), "no_blocks")
    unflattened = lower_blocks(mm_relu)
    with pytest.raises(tir.VerifyError, match="flat: one dimension"):
        verify_lowered(unflattened)
    verify_lowered(unflattened, "no_blocks")


# ----------------------------------------------------------------------------------------------
# lower_init_block
@T.prim_func
def row_sum(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


@T.prim_func
def row_sum_init_lowered(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(B[vi])
            if vk == 0:
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_lower_init_block():
    assert_same_ir(lower_init_block(row_sum), row_sum_init_lowered)
    np.testing.assert_allclose(numerics.run(lower_init_block(row_sum), numerics.random_arguments(row_sum))[1],
                               numerics.run(row_sum, numerics.random_arguments(row_sum))[1])


# ----------------------------------------------------------------------------------------------
# plan_and_compact_allocations
def matmul_cache_write_tiled():
    sch = tir.Schedule(matmul)
    block_C = sch.get_block("C")
    C_local = sch.cache_write(block_C, 0, "local")
    i, j, k = sch.get_loops(block_C)
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.reverse_compute_at(C_local, j0)
    sch.decompose_reduction(block_C, k)
    return sch.mod["main"]


@T.prim_func
def matmul_compacted(A: T.Buffer((4096,), "float32"), B: T.Buffer((4096,), "float32"),
                     C: T.Buffer((4096,), "float32")):
    T.func_attr({"global_symbol": "matmul", "tir.lowered": True})
    for i_0, j_0 in T.grid(8, 8):
        C_local = T.allocate((64,), "float32", "local")
        for i_1_init, j_1_init in T.grid(8, 8):
            C_local[i_1_init * 8 + j_1_init] = T.float32(0)
        for k, i_1, j_1 in T.grid(64, 8, 8):
            C_local[i_1 * 8 + j_1] = C_local[i_1 * 8 + j_1] + A[i_0 * 512 + i_1 * 64 + k] * B[k * 64 + j_0 * 8 + j_1]
        for ax0, ax1 in T.grid(8, 8):
            C[i_0 * 512 + ax0 * 64 + j_0 * 8 + ax1] = C_local[ax0 * 8 + ax1]


def test_compaction_shrinks_the_local_cache_to_the_tile():
    func = matmul_cache_write_tiled()
    low = assert_same_numerics(func)
    assert_structural_equal(low, matmul_compacted)
    (alloc,) = nodes(low, S.Allocate)
    assert [d.value for d in alloc.buffer.shape] == [64] and alloc.buffer.scope == "local"
    tile_loop = nodes(low, S.For)[1]
    assert tile_loop.loop_var.name == "j_0" and tile_loop.body is alloc


def test_compaction_in_block_form_keeps_two_dimensions():
    placed = plan_and_compact_allocations(lower_init_block(matmul_cache_write_tiled()))
    (alloc,) = nodes(placed, S.Allocate)
    assert [d.value for d in alloc.buffer.shape] == [8, 8]
    assert not placed.body.block.alloc_buffers
    tir.verify(placed)


@T.prim_func
def unused_and_reduced(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    unused = T.alloc_buffer((16,))
    acc = T.alloc_buffer((4,))
    for i in range(4):
        for k in range(8):
            with T.block("acc"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    acc[vi] = T.float32(0)
                acc[vi] = acc[vi] + A[vi, vk]
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = acc[vi] * T.float32(2)


def test_compaction_drops_unused_buffers_and_keeps_reductions_outside_their_loop():
    low = assert_same_numerics(unused_and_reduced)
    (alloc,) = nodes(low, S.Allocate)
    assert alloc.buffer.name == "acc" and alloc.buffer.shape[0].value == 1
    assert nodes(low, S.For)[0].body is alloc   # inside i, outside the reduction loop k


@T.prim_func
def reduction_inside_place(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    acc = T.alloc_buffer((4,))
    for k in range(8):
        for i in range(4):
            with T.block("acc"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    acc[vi] = T.float32(0)
                acc[vi] = acc[vi] + A[vi, vk]
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = acc[vi] * T.float32(2)


def test_compaction_never_allocates_inside_a_loop_a_reduction_runs_over():
    low = assert_same_numerics(reduction_inside_place)
    (alloc,) = nodes(low, S.Allocate)
    assert low.body is alloc and alloc.buffer.shape[0].value == 4


def test_shared_buffer_lives_outside_thread_loops_and_covers_the_padded_tile():
    low = assert_same_numerics(window_sum_shared())
    (alloc,) = nodes(low, S.Allocate)
    assert alloc.buffer.scope == "shared" and alloc.buffer.shape[0].value == 130
    block_loop = nodes(low, S.For)[0]
    assert block_loop.thread_binding == "blockIdx.x" and block_loop.body is alloc


# ----------------------------------------------------------------------------------------------
# lower_blocks and flatten_buffer
@T.prim_func
def guarded_lowered(A: T.Buffer((30,), "float32"), B: T.Buffer((30,), "float32"),
                    C: T.Buffer((30,), "float32")):
    T.func_attr({"global_symbol": "where_and_branches", "tir.lowered": True, "tir.noalias": True})
    for io, ii in T.grid(8, 4):
        if io * 4 + ii < 30:
            if A[io * 4 + ii] > T.float32(0):
                B[io * 4 + ii] = A[io * 4 + ii] * T.float32(2)
            else:
                B[io * 4 + ii] = T.float32(0) - A[io * 4 + ii]
    for i in range(30):
        C[i] = T.if_then_else(i % 2 == 0, B[i], T.float32(-1))


def test_lower_blocks_turns_predicates_into_ifs():
    assert_structural_equal(lower_blocks(CORPUS["where_and_branches"].func), guarded_lowered)


@T.prim_func
def strided_copy(A: T.Buffer((4, 4), "float32", strides=(8, 1)), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]


@T.prim_func
def strided_copy_flat(A: T.Buffer((28,), "float32"), B: T.Buffer((16,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i, j in T.grid(4, 4):
        B[i * 4 + j] = A[i * 8 + j]


def test_flatten_buffer_is_row_major_and_honours_strides():
    assert_same_ir(flatten_buffer(lower_blocks(strided_copy)), strided_copy_flat)


def test_flatten_buffer_symbolic_shapes_multiply():
    low = lowered(CORPUS["matmul_symbolic"].func)
    A = low.params[0]
    assert A.ndim == 1 and A.shape[0].dtype == "int64" and "n * T.int64(64)" in low.script()


# ----------------------------------------------------------------------------------------------
# simplify and unroll_loop
@T.prim_func
def trivial_loops(A: T.Buffer((8,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i in range(8):
        for k in range(1):
            if i < 8:
                A[i + k * 4] = T.float32(1)
        for e in range(0):
            A[e] = T.float32(2)


@T.prim_func
def trivial_loops_simplified(A: T.Buffer((8,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i in range(8):
        A[i] = T.float32(1)


def test_simplify_drops_trivial_loops_and_ifs():
    assert_same_ir(simplify(trivial_loops), trivial_loops_simplified)


@T.prim_func
def unrolled(A: T.Buffer((200,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i in T.unroll(2):
        A[i * 3] = T.float32(1)
    for j in T.unroll(100):
        A[j] = A[j] + T.float32(1)


@T.prim_func
def unrolled_expanded(A: T.Buffer((200,), "float32")):
    T.func_attr({"tir.lowered": True})
    A[0] = T.float32(1)
    A[3] = T.float32(1)
    for j in T.unroll(100):
        A[j] = A[j] + T.float32(1)


def test_unroll_loop_expands_short_loops_only():
    assert_same_ir(simplify(unroll_loop(unrolled)), unrolled_expanded)


# ----------------------------------------------------------------------------------------------
# vectorize_loop
@T.prim_func
def scale_rows(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), s: T.float32):
    T.func_attr({"tir.lowered": True})
    for i in range(8):
        for j in T.vectorized(8):
            B[i * 8 + j] = A[i * 8 + j] * s + T.Cast("float32", j)


@T.prim_func
def scale_rows_vectorized(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), s: T.float32):
    T.func_attr({"tir.lowered": True})
    for i in range(8):
        B[T.Ramp(i * 8, 1, 8)] = A[T.Ramp(i * 8, 1, 8)] * T.Broadcast(s, 8) + T.Cast("float32x8", T.Ramp(0, 1, 8))


def test_vectorize_loop_makes_ramps_and_broadcasts():
    assert_same_ir(simplify(vectorize_loop(scale_rows)), scale_rows_vectorized)
    assert_same_numerics(scale_rows)


@T.prim_func
def relu_guarded(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i in range(8):
        for j in T.vectorized(8):
            if j < 6:
                B[i * 8 + j] = T.max(A[i * 8 + j], T.float32(0))


@T.prim_func
def relu_guarded_vectorized(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i in range(8):
        B[T.Ramp(i * 8, 1, 8)] = T.Select(T.Ramp(0, 1, 8) < T.Broadcast(6, 8),
                                          T.max(A[T.Ramp(i * 8, 1, 8)], T.Broadcast(T.float32(0), 8)),
                                          B[T.Ramp(i * 8, 1, 8)])


def test_vectorize_loop_turns_lane_dependent_ifs_into_selects():
    assert_same_ir(simplify(vectorize_loop(relu_guarded)), relu_guarded_vectorized)
    assert_same_numerics(relu_guarded)


@T.prim_func
def not_vectorizable(A: T.Buffer((32,), "float32"), B: T.Buffer((4,), "float32"),
                     C: T.Buffer((9,), "float32"), D: T.Buffer((30,), "float32")):
    T.func_attr({"tir.lowered": True})
    for i in range(4):
        for k in T.vectorized(8):          # every lane writes B[i]: a reduction
            B[i] = B[i] + A[i * 8 + k]
    for j in T.vectorized(8):              # lane j reads what lane j - 1 wrote
        C[j + 1] = C[j] + T.float32(1)
    for io in range(8):
        for ii in T.vectorized(4):         # the guarded load would leave D on masked lanes
            if io * 4 + ii < 30:
                D[io * 4 + ii] = D[io * 4 + ii] * T.float32(2)
    for io in range(4):
        for ii in T.vectorized(4):         # a loop inside
            for k in range(2):
                A[io * 8 + ii * 2 + k] = T.float32(0)


def test_vectorize_loop_leaves_unsafe_loops_as_loops():
    out = vectorize_loop(not_vectorizable)
    assert_structural_equal(out, not_vectorizable)
    assert [lp.kind for lp in nodes(out, S.For)].count("vectorized") == 4
    assert not nodes(out, tir.Ramp)
    assert_same_numerics(not_vectorizable)


def test_corpus_vectorized_loop_becomes_vector_code():
    low = lowered(CORPUS["loop_kinds"].func)
    kinds = [lp.kind for lp in nodes(low, S.For)]
    assert kinds == ["parallel"]               # unrolled by 16, then vectorized by 64
    assert len(nodes(low, tir.Ramp)) > 0 and len(nodes(low, tir.Broadcast)) > 0


# ----------------------------------------------------------------------------------------------
# The course sequences, lowered
def mm_relu_course():
    sch = tir.Schedule(mm_relu)
    block_Y = sch.get_block("Y", func_name="main")
    i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C", "main"), j0)
    sch.decompose_reduction(block_Y, k)
    return sch.mod["main"]


def vector_add_bound():
    sch = tir.Schedule(vector_add)
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    return sch.mod["main"]


def window_sum_shared():
    sch = tir.Schedule(window_sum)
    block_B = sch.get_block("B")
    (i,) = sch.get_loops(block_B)
    i0, i1 = sch.split(i, [None, 128])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    A_shared = sch.cache_read(block_B, 0, "shared")
    sch.compute_at(A_shared, i1)
    (fetch,) = sch.get_loops(A_shared)[-1:]
    _, inner = sch.split(fetch, [None, 128])
    sch.bind(inner, "threadIdx.x")
    return sch.mod["main"]


@pytest.mark.parametrize("make", [mm_relu_course, vector_add_bound, window_sum_shared,
                                  matmul_cache_write_tiled])
def test_course_sequences_lowered_match_interpreter(make):
    low = assert_same_numerics(make())
    assert_structural_equal(from_source(low.script()), low)


def test_mm_relu_course_keeps_a_four_element_row_per_tile():
    (alloc,) = nodes(lowered(mm_relu_course()), S.Allocate)
    assert alloc.buffer.shape[0].value == 4


@T.prim_func
def unrolled_big_body(A: T.Buffer((64, 128), "float32")):
    for i in T.unroll(64):
        for j in range(128):
            A[i, j] = T.float32(1)


def test_unroll_loop_keeps_loops_whose_copies_exceed_the_statement_budget():
    # 64 copies of a 128-iteration loop is 8192 statements, over MAX_UNROLLED_STMTS.
    assert_same_ir(unroll_loop(unrolled_big_body), unrolled_big_body)


def _flat_with_local_cache(index):
    """A lowered function whose 8-element local buffer is written at ``index(i)`` for i < 8."""
    A = tir.decl_buffer((8,), "float32", name="A")
    i = tir.Var("i", "int32")
    cache = tir.decl_buffer((8,), "float32", name="cache", scope="local")
    body = tir.For(i, tir.const(0), tir.const(8), "serial",
                   tir.BufferStore(cache, tir.BufferLoad(A, (i,)), (index(i),)))
    body = tir.Allocate(cache, tir.SeqStmt((body, tir.BufferStore(A, tir.BufferLoad(cache, (tir.const(0),)),
                                                                  (tir.const(0),)))))
    return tir.PrimFunc([A], body).with_attr("tir.lowered", True)


def test_verify_memory_proves_in_bounds_accesses_to_allocated_buffers():
    assert verify_memory(_flat_with_local_cache(lambda i: i))


def test_verify_memory_refuses_an_access_that_may_overrun_its_allocation():
    with pytest.raises(tir.VerifyError, match=r"access to cache at i \+ 1 may fall outside its allocation of 8"):
        verify_memory(_flat_with_local_cache(lambda i: i + 1))


def test_verify_memory_accepts_an_overhang_guarded_by_an_if():
    A = tir.decl_buffer((8,), "float32", name="A")
    i = tir.Var("i", "int32")
    cache = tir.decl_buffer((8,), "float32", name="cache", scope="local")
    store = tir.BufferStore(cache, tir.BufferLoad(A, (i - 1,)), (i - 1,))
    guarded = tir.IfThenElse(tir.And(i >= 1, i - 1 < 8), store)
    body = tir.Allocate(cache, tir.For(i, tir.const(0), tir.const(10), "serial", guarded))
    assert verify_memory(tir.PrimFunc([A], body).with_attr("tir.lowered", True))
