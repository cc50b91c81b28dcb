"""What keeps compilation cheap must not change what is compiled: the code generator emits a
repeated pure expression once (and only where the value is available), the simplifier's memo
gives the answers a fresh simplifier gives, and the visitors' shortcuts see every node they
must. Every compiled result is compared with numpy or the interpreter."""
import re

import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.arith import simplify
from mlc_lab.arith.simplify_memo import SimplifyMemo, current_memo, shared_memo
from mlc_lab.codegen import render
from mlc_lab.ir.node import field_names, field_values
from mlc_lab.ir.structural import structural_equal
from mlc_lab.runtime import interpreter
from mlc_lab.runtime.llvm_runtime import build_llvm
from mlc_lab.script import tir as T
from mlc_lab.tir import expr as E
from mlc_lab.tir import stmt as S
from mlc_lab.tir.functor import StmtExprMutator, StmtExprVisitor
from mlc_lab.tir.transform import lower
from mlc_lab.tir.transform.verify_lowered import verify_lowered
from mlc_lab.tir.verify import VerifyError

RNG = np.random.default_rng(7)


def _attrs(attrs: dict) -> tuple:
    return tuple(sorted(attrs.items()))


def run_compiled_and_interpreted(func, arrays, **options):
    (compiled,) = build_llvm({"main": func}, {"kind": "llvm", **options}).values()
    got = [a.copy() for a in arrays]
    want = [a.copy() for a in arrays]
    compiled(*got)
    interpreter.run(func, want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


# -- the code generator emits a repeated index once -------------------------------------------
@T.prim_func
def strided_rows(A: T.Buffer((4096,), "float32"), B: T.Buffer((1024,), "float32")):
    T.func_attr({"global_symbol": "strided_rows", "tir.noalias": True})
    for t in range(64):
        B[t // 4 * 64 + t % 4 * 16 + 0] = A[t // 4 * 256 + t % 4 * 16 + 0]
        B[t // 4 * 64 + t % 4 * 16 + 1] = A[t // 4 * 256 + t % 4 * 16 + 1]
        B[t // 4 * 64 + t % 4 * 16 + 2] = A[t // 4 * 256 + t % 4 * 16 + 2]
        B[t // 4 * 64 + t % 4 * 16 + 3] = A[t // 4 * 256 + t % 4 * 16 + 3]


def test_a_repeated_floor_division_is_emitted_once():
    text = render(strided_rows)
    # t // 4 and t % 4 appear in all eight indices; each takes one sdiv and one srem, so
    # emitting them per index would make 16 of each
    assert len(re.findall(r"= sdiv ", text)) == 2
    assert len(re.findall(r"= srem ", text)) == 2
    a, b = RNG.standard_normal(4096).astype("float32"), np.zeros(1024, "float32")
    _, b = run_compiled_and_interpreted(strided_rows, [a, b])
    t = np.arange(64)
    for k in range(4):
        np.testing.assert_array_equal(b[t // 4 * 64 + t % 4 * 16 + k], a[t // 4 * 256 + t % 4 * 16 + k])


def test_loads_are_never_shared():
    # the same load twice, a store to its buffer between: the second load must see the store
    A = tir.decl_buffer((4,), "float32", name="A")
    i = tir.Var("i", "int32")
    first = S.BufferStore(A, E.BufferLoad(A, (E.const(0),)) + E.const(1.0, "float32"), (E.const(1),))
    second = S.BufferStore(A, E.BufferLoad(A, (E.const(1),)) * E.const(2.0, "float32"), (E.const(2),))
    again = S.BufferStore(A, E.BufferLoad(A, (E.const(1),)) * E.const(2.0, "float32"), (E.const(3),))
    body = S.For(i, E.const(0), E.const(1), "serial", S.seq(first, second, again))
    func = tir.PrimFunc([A], body, attrs=_attrs({"global_symbol": "main", "tir.noalias": True,
                                          "tir.lowered": True}))
    (a,) = run_compiled_and_interpreted(func, [np.array([1, 0, 0, 0], "float32")])
    np.testing.assert_array_equal(a, [1, 2, 4, 4])


def test_sibling_loops_over_one_variable_each_get_their_own_values():
    # two loops bind the same Var object; an index of it computed in the first loop must not be
    # reused in the second (its value there is a different phi, in a block that does not dominate)
    A = tir.decl_buffer((64,), "float32", name="A")
    i = tir.Var("i", "int32")
    index = i // 2 * 8 + i % 2
    loop_a = S.For(i, E.const(0), E.const(8), "serial",
                   S.BufferStore(A, E.const(1.0, "float32"), (index,)))
    loop_b = S.For(i, E.const(0), E.const(8), "serial",
                   S.BufferStore(A, E.BufferLoad(A, (index,)) + E.const(2.0, "float32"), (index + 4,)))
    func = tir.PrimFunc([A], S.seq(loop_a, loop_b),
                        attrs=_attrs({"global_symbol": "main", "tir.noalias": True, "tir.lowered": True}))
    (a,) = run_compiled_and_interpreted(func, [np.zeros(64, "float32")])
    k = np.arange(8)
    assert (a[k // 2 * 8 + k % 2] == 1).all() and (a[k // 2 * 8 + k % 2 + 4] == 3).all()


def test_a_value_computed_in_a_branch_is_not_used_after_it():
    A = tir.decl_buffer((32,), "float32", name="A")
    i = tir.Var("i", "int32")
    index = i * 3 // 2
    branch = S.IfThenElse(i < 5, S.BufferStore(A, E.const(7.0, "float32"), (index,)))
    after = S.BufferStore(A, E.BufferLoad(A, (index,)) + E.const(1.0, "float32"), (index + 16,))
    body = S.For(i, E.const(0), E.const(10), "serial", S.seq(branch, after))
    func = tir.PrimFunc([A], body, attrs=_attrs({"global_symbol": "main", "tir.noalias": True,
                                          "tir.lowered": True}))
    (a,) = run_compiled_and_interpreted(func, [np.zeros(32, "float32")])
    k = np.arange(10)
    np.testing.assert_array_equal(a[k * 3 // 2 + 16], np.where(k < 5, 8, 1))


@T.prim_func
def gather_checked(A: T.Buffer((40,), "float32"), B: T.Buffer((20,), "float32"), n: T.int32):
    T.func_attr({"global_symbol": "gather_checked", "tir.noalias": True})
    for i in range(20):
        B[i] = A[(i * n) // 3] + A[(i * n) // 3 + 1]


def test_bounds_checks_share_values_with_the_code_after_them():
    # the out-of-bounds path computes the buffer's size in its own block
    a, b = RNG.standard_normal(40).astype("float32"), np.zeros(20, "float32")
    (compiled,) = build_llvm({"main": gather_checked}, "llvm -bounds-check").values()
    compiled(a, b, np.int32(5))
    i = np.arange(20)
    np.testing.assert_allclose(b, a[i * 5 // 3] + a[i * 5 // 3 + 1], rtol=1e-6)
    with pytest.raises(IndexError):
        compiled(a, b, np.int32(7))


def test_an_unrolled_and_vectorized_schedule_computes_the_same():
    from mlc_lab.testing import matmul_schedules
    sch = matmul_schedules.best_schedule(64)
    a, b = RNG.standard_normal((64, 64)).astype("float32"), RNG.standard_normal((64, 64)).astype("float32")
    c = np.zeros((64, 64), "float32")
    mlc_lab.build(sch.mod, "llvm")["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


# -- the simplifier's memo ---------------------------------------------------------------------
def test_a_memo_gives_what_a_fresh_simplifier_gives():
    i, j = tir.Var("i"), tir.Var("j")
    exprs = [(i * 8 + j) // 8, (i * 8 + j) % 8, E.Min(i * 4 + j, i * 4 + 3), (i * 2 + 1) // 2 * 2]
    ranges = {i: tir.Range.from_min_extent(0, 16), j: tir.Range.from_min_extent(0, 4)}
    memo = SimplifyMemo()
    for e in exprs * 2:
        assert structural_equal(simplify(e, ranges, memo), simplify(e, ranges))


def test_other_ranges_are_not_answered_from_the_memo():
    i = tir.Var("i")
    memo, e = SimplifyMemo(), i // 8
    assert structural_equal(simplify(e, {i: tir.Range.from_min_extent(0, 8)}, memo), E.const(0))
    assert structural_equal(simplify(e, {}, memo), e)
    assert structural_equal(simplify(e, {i: tir.Range.from_min_extent(8, 8)}, memo), E.const(1))


def test_shared_memo_is_one_memo_for_nested_withs():
    assert current_memo() is None
    with shared_memo() as outer:
        assert current_memo() is outer
        with shared_memo() as inner:
            assert inner is outer
        assert current_memo() is outer
    assert current_memo() is None


def test_lowering_under_a_shared_memo_matches_pass_by_pass_lowering():
    from mlc_lab.testing import matmul_schedules
    from mlc_lab.tir.transform.pipeline import PASSES
    mod = matmul_schedules.best_schedule(64).mod
    lowered = lower(mod)
    one_by_one = mod
    for lowering_pass in PASSES:   # each pass alone, every simplify with its own memo
        one_by_one = lowering_pass(one_by_one)
    assert structural_equal(lowered["main"], one_by_one["main"])


# -- visitors ------------------------------------------------------------------------------------
def test_field_values_follow_field_names():
    i = tir.Var("i")
    for node in (i + 1, E.Ramp(i, E.const(1), 4), E.Broadcast(E.const(1.0, "float32"), 4), i):
        assert field_values(node) == tuple(getattr(node, name) for name in field_names(type(node)))
        assert node.fields() == list(zip(field_names(type(node)), field_values(node)))


def test_visit_methods_of_every_kind_are_called():
    class Counter(StmtExprVisitor):
        def __init__(self):
            self.vars, self.adds = 0, 0

        def visit_Var(self, var):
            self.vars += 1

        @staticmethod
        def visit_IntImm(imm):
            pass

        def visit_Add(self, e):
            self.adds += 1
            self.generic_visit(e)

    counter = Counter()
    i = tir.Var("i")
    counter.visit(i + i * 2 + 1)
    assert (counter.vars, counter.adds) == (2, 2)

    class Rename(StmtExprMutator):
        def visit_Var(self, var):
            return j

    j = tir.Var("j")
    assert structural_equal(Rename().visit(i * 2 + 1), j * 2 + 1)


def test_verify_lowered_reports_a_shared_bad_expression():
    A = tir.decl_buffer((8,), "float32", name="A")
    i = tir.Var("i", "int32")
    bad = E.Ramp(i, E.const(1, "int64"), 4)   # base and stride of different dtypes
    body = S.seq(S.BufferStore(A, E.Broadcast(E.const(0.0, "float32"), 4), (bad,)),
                 S.BufferStore(A, E.Broadcast(E.const(1.0, "float32"), 4), (bad,)))
    func = tir.PrimFunc([A], S.For(i, E.const(0), E.const(1), "serial", body),
                        attrs=_attrs({"global_symbol": "main", "tir.lowered": True}))
    with pytest.raises(VerifyError, match="Ramp"):
        verify_lowered(func)


# -- the garbage collector pause -------------------------------------------------------------------
def test_the_collector_is_paused_during_a_build_and_restored_after():
    import gc
    from mlc_lab import _gc
    seen = []
    with _gc.paused():
        with _gc.paused():   # nested: still off, and on again only after the outer one
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
    assert seen == [False, False] and gc.isenabled()

    gc.disable()   # a caller that turned it off keeps it off
    try:
        with _gc.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()

    a, b = RNG.standard_normal(4096).astype("float32"), np.zeros(1024, "float32")
    mlc_lab.build(strided_rows, "llvm")["strided_rows"](a, b)
    assert gc.isenabled()


# -- what was compiled before in the process is not compiled again (tir.transform.func_memo) -----
def _small_mlp():
    from mlc_lab.frontend import nn
    return nn.Sequential(nn.Linear(16, 8, seed=0), nn.ReLU(), nn.Linear(8, 4, seed=1))


def _run(ex, x):
    from mlc_lab import relax
    return relax.VirtualMachine(ex, mlc_lab.cpu())["main"](mlc_lab.nd.array(x)).numpy()


def test_a_model_built_again_shares_its_compiled_kernels():
    import importlib
    from mlc_lab import relax
    relax_build = importlib.import_module("mlc_lab.relax.build")
    model, x = _small_mlp(), RNG.standard_normal((2, 16)).astype("float32")
    mod = model.to_relax((2, 16))
    first, again = relax.build(mod, "llvm"), relax.build(mod, "llvm")
    assert again.lib is first.lib and relax_build._BUILT.hits == 1
    assert structural_equal(again.mod, first.mod)
    for ex in (first, again):
        np.testing.assert_allclose(_run(ex, x), model.forward_numpy(x), rtol=1e-5, atol=1e-5)
    # another target is another build
    assert relax.build(mod, "llvm -num-cores=1").lib is not first.lib


def test_watched_passes_and_the_switch_turn_the_memos_off(monkeypatch):
    from mlc_lab import relax
    from mlc_lab.ir.transform import PassContext, PassTimingInstrument
    mod = _small_mlp().to_relax((1, 16))
    first = relax.build(mod, "llvm")
    timing = PassTimingInstrument()
    with PassContext(instruments=[timing]):
        watched = relax.build(mod, "llvm")
    assert watched.lib is not first.lib   # every pass ran again, under the instrument's eyes
    ran = {name for name, _, _ in timing.timings}
    assert {"DefaultSchedule", "plan_and_compact_allocations", "vectorize_loop"} <= ran
    monkeypatch.setenv("MLC_LAB_COMPILE_MEMO", "0")
    assert relax.build(mod, "llvm").lib is not relax.build(mod, "llvm").lib


@T.prim_func
def scale_rows(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    T.func_attr({"global_symbol": "scale_rows", "tir.noalias": True})
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


@T.prim_func
def scale_rows_renamed(A: T.Buffer((8, 16), "float32"), Out: T.Buffer((8, 16), "float32")):
    T.func_attr({"global_symbol": "scale_rows", "tir.noalias": True})
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = A[vi, vj] * T.float32(2)


def test_lowering_reuses_known_functions_lowers_new_ones_and_keeps_the_order():
    from mlc_lab.ir import IRModule
    once = lower(IRModule({"a": strided_rows}))
    both = lower(IRModule({"b": scale_rows, "a": strided_rows}))
    assert [gv.name_hint for gv in both.functions] == ["b", "a"]
    assert both["a"] is once["a"]
    from mlc_lab.tir.transform.func_memo import clear_memos
    clear_memos()
    assert structural_equal(both["b"], lower(IRModule({"b": scale_rows}))["b"])
    # a function that prints differently (one buffer renamed) is lowered on its own, so the
    # code generated for it names its own buffers
    renamed = lower(IRModule({"b": scale_rows_renamed}))["b"]
    assert renamed is not both["b"] and "Out" in render(renamed) and "Out" not in render(both["b"])


def test_default_schedule_reuses_a_kernel_scheduled_for_the_same_machine():
    from mlc_lab import relax
    from mlc_lab.relax.transform import DefaultSchedule
    legal = relax.transform.LegalizeOps()(_small_mlp().to_relax((4, 16)))
    kernels = sorted(gv.name_hint for gv, f in legal.functions.items() if isinstance(f, tir.PrimFunc))
    one, two = DefaultSchedule("llvm -num-cores=2")(legal), DefaultSchedule("llvm -num-cores=2")(legal)
    assert all(one[name] is two[name] for name in kernels)
    other = DefaultSchedule("llvm -num-cores=1")(legal)
    assert all(other[name] is not one[name] for name in kernels)


# -- shortcuts of the lowering passes and the code generator see everything they must --------------
@T.prim_func
def guard_below_a_branch(a: T.handle, b: T.handle):
    T.func_attr({"global_symbol": "guard_below_a_branch", "tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for o in range((n + T.int64(7)) // T.int64(8)):
        if n > T.int64(2):   # a statement between the loop and its guarded vector loop
            for v in T.vectorized(T.int64(8)):
                if o * T.int64(8) + v < n:
                    B[o * T.int64(8) + v] = A[o * T.int64(8) + v] * T.float32(2)


def test_partition_tail_finds_a_guarded_vector_loop_below_other_statements():
    from mlc_lab.tir.transform.partition_tail import partition_tail
    whole, tail = partition_tail(guard_below_a_branch).body.seq
    assert not isinstance(whole.body.then_case.body, S.IfThenElse)   # the whole vectors: no guard
    assert isinstance(tail.body.then_case.body, S.IfThenElse)
    built = mlc_lab.build(guard_below_a_branch, target="llvm")
    for n in (0, 3, 8, 13, 64):
        a, b = RNG.standard_normal(n).astype("float32"), np.zeros(n, "float32")
        built(a, b)
        np.testing.assert_allclose(b, a * 2, rtol=1e-6)


@T.prim_func
def accumulated_tiles(A: T.Buffer((16, 32), "float32"), C: T.Buffer((16,), "float32")):
    T.func_attr({"global_symbol": "accumulated_tiles", "tir.noalias": True})
    acc = T.alloc_buffer((16,), "float32", scope="local")
    for i_0, i_1, k in T.grid(4, 4, 32):
        with T.block("acc"):
            vi = T.axis.spatial(16, i_0 * 4 + i_1)
            vk = T.axis.reduce(32, k)
            with T.init():
                acc[vi] = T.float32(0)
            acc[vi] = acc[vi] + A[vi, vk]
    for i_0, i_1 in T.grid(4, 4):
        with T.block("C"):
            vi = T.axis.spatial(16, i_0 * 4 + i_1)
            C[vi] = acc[vi] * T.float32(0.5)


def test_compaction_counts_a_repeated_access_once_and_keeps_the_box():
    # acc is stored, loaded and declared at the same index many times: the box is one element
    # per i_1 (4 floats), whichever of the identical accesses it is read from
    low = lower(accumulated_tiles)["accumulated_tiles"]
    sizes = []
    post_order = StmtExprVisitor()
    post_order.visit_Allocate = lambda alloc: (sizes.append(alloc.buffer.shape[0].value),
                                               post_order.generic_visit(alloc))
    post_order.visit(low.body)
    assert sizes == [16]   # used by two loop nests, it lives above both
    a, c = RNG.standard_normal((16, 32)).astype("float32"), np.zeros(16, "float32")
    mlc_lab.build(accumulated_tiles, target="llvm")(a, c)
    np.testing.assert_allclose(c, a.sum(axis=1) * 0.5, rtol=1e-5)


def _lowered(body, *params):
    return tir.PrimFunc(list(params), body, attrs=_attrs({"global_symbol": "main", "tir.lowered": True}))


def test_verify_lowered_checks_expressions_at_any_depth():
    A = tir.decl_buffer((16,), "float32", name="A")
    L = tir.decl_buffer((16,), "float32", name="L", scope="local")
    i = tir.Var("i", "int32")
    float_index = E.BufferLoad(L, (E.Cast("float32", i),))   # deep inside the stored value
    store = S.BufferStore(A, (float_index + E.const(1.0, "float32")) * E.const(2.0, "float32"), (i,))
    func = _lowered(S.Allocate(L, S.For(i, E.const(0), E.const(16), "serial", store)), A)
    with pytest.raises(VerifyError, match="buffer L is indexed by a float32"):
        verify_lowered(func)
    ramp = E.Ramp(E.const(0), E.const(1), 4)
    nested = E.Broadcast(ramp, 2)   # a Broadcast of a vector, inside a Select's branch
    value = E.Select(E.const(1, "bool"), E.const(0.0, "float32x8"),
                     E.Cast("float32x8", nested))
    func = _lowered(S.BufferStore(A, value, (E.Ramp(E.const(0), E.const(1), 8),)), A)
    with pytest.raises(VerifyError, match="Broadcast of a vector"):
        verify_lowered(func)


@T.prim_func
def masked_scale(A: T.Buffer((8, 16), "float32"), M: T.Buffer((8, 16), "float32"),
                 B: T.Buffer((8, 16), "float32"), s: T.float32):
    T.func_attr({"global_symbol": "masked_scale", "tir.noalias": True})
    for i in T.parallel(8):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                # s and M are used only deep inside expressions of the parallel loop's body
                B[vi, vj] = T.if_then_else(vj < 8, A[vi, vj] * (s + M[vi, vj] * T.float32(0)),
                                           T.float32(-1))


def test_a_parallel_loop_captures_values_used_only_inside_expressions():
    a, m = RNG.standard_normal((8, 16)).astype("float32"), RNG.standard_normal((8, 16)).astype("float32")
    b = np.zeros((8, 16), "float32")
    mlc_lab.build(masked_scale, target="llvm -num-cores=2")(a, m, b, np.float32(3.0))
    want = np.where(np.arange(16) < 8, a * 3.0, -1.0)
    np.testing.assert_allclose(b, want, rtol=1e-6)


@T.prim_func
def every_other_column(x: T.Buffer((4, 4), "float32"), out: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            out[vi, vj // 2 * 2] = x[vi, vj // 2 * 2]


def test_a_copy_that_matches_ranks_but_misses_elements_is_no_reshape():
    from mlc_lab.relax.transform.rewrite_dataflow_reshape import is_reshape
    # each element goes to the position of its own rank, but the odd columns are never written
    assert not is_reshape(every_other_column)
