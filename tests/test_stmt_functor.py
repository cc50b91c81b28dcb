"""The shared IR helpers of mlc_lab.tir.stmt_functor and the schedule's producer/consumer lookup."""
import doctest
import importlib

import pytest

from mlc_lab import tir
from mlc_lab.ir import structural_equal
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule.func_index import FuncIndex
from mlc_lab.tir.stmt_functor import (free_buffers, free_vars, loads_in, post_order_visit, stores_in,
                                      substitute, uses_var)


@pytest.mark.parametrize("module", ["mlc_lab.tir.stmt_functor", "mlc_lab.arith.simplify"])
def test_docstring_examples(module):
    assert doctest.testmod(importlib.import_module(module)).failed == 0


def _nest():
    """for i in range(n): let t = i * 2 in B[i] = A[t] + A[j]   (j, n free; i, t bound)"""
    i, j, t, n = tir.Var("i"), tir.Var("j"), tir.Var("t"), tir.Var("n")
    A, B = tir.decl_buffer((n,), name="A"), tir.decl_buffer((n,), name="B")
    body = tir.LetStmt(t, i * 2, tir.BufferStore(B, A[t] + A[j], (i,)))
    return tir.For(i, tir.const(0), n, "serial", body), (i, j, t, n), (A, B)


def test_free_vars_leaves_out_loop_and_let_variables():
    loop, (i, j, t, n), _ = _nest()
    assert [v.name for v in free_vars(loop)] == ["n", "j"]
    assert [v.name for v in free_vars(loop.body)] == ["i", "j"]
    # buffer sizes count only when asked for
    assert [v.name for v in free_vars(loop.body, buffer_shapes=True)] == ["i", "n", "j"]


def test_free_vars_identity_not_name():
    a1, a2 = tir.Var("a"), tir.Var("a")
    found = free_vars(a1 + a2 + a1)
    assert len(found) == 2 and found[0] is a1 and found[1] is a2


def test_block_iterators_and_allocations_are_bound():
    @T.prim_func
    def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi]
    assert free_vars(f.body) == []
    assert [b.name for b in free_buffers(f.body)] == ["A", "C"]
    inner = FuncIndex(f).blocks["B"]
    # the realize binds vi from the loop variable i, which is free at this level
    assert [v.name for v in free_vars(inner)] == ["i"]


def test_uses_var_takes_one_variable_or_a_collection():
    loop, (i, j, t, n), _ = _nest()
    assert uses_var(loop, j) and uses_var(loop, n)
    assert not uses_var(loop, i)         # bound by the loop itself
    assert uses_var(loop.body, i)
    assert uses_var(loop, [i, j]) and not uses_var(loop, {i: None, t: None})


def test_loads_and_stores_in_program_order():
    loop, _, (A, B) = _nest()
    loads = loads_in(loop)
    assert [ld.buffer for ld in loads] == [A, A]
    assert [s.buffer for s in stores_in(loop)] == [B]
    idx = tir.decl_buffer((4,), "int32", name="idx")
    k = tir.Var("k")
    nested = A[idx[k]]
    assert loads_in(nested) == [nested, nested.indices[0]]


def test_substitute_by_identity_keeps_untouched_subtrees():
    loop, (i, j, t, n), (A, B) = _nest()
    out = substitute(loop, {j: tir.const(3)})
    store = out.body.body
    assert isinstance(store.value.b.indices[0], tir.IntImm) and store.value.b.indices[0].value == 3
    assert store.value.a is loop.body.body.value.a          # A[t] untouched: the same object
    assert substitute(loop, {tir.Var("j"): tir.const(3)}) is loop   # another Var named j
    assert substitute(loop, {}) is loop


def test_substitute_reaches_buffer_shapes():
    n, m = tir.Var("n"), tir.Var("m")
    A = tir.decl_buffer((n,), name="A")
    load = substitute(A[tir.const(0)], {n: m})
    assert load.buffer is not A and load.buffer.shape[0] is m


def test_post_order_visit_sees_children_first():
    i = tir.Var("i")
    A = tir.decl_buffer((4,), name="A")
    seen = []
    post_order_visit(tir.BufferStore(A, A[i] * 2.0, (i,)), lambda node: seen.append(node))
    kinds = [type(x).__name__ for x in seen]
    assert kinds[-1] == "BufferStore"
    assert kinds.index("BufferLoad") > kinds.index("Var")
    assert kinds.index("Mul") > kinds.index("BufferLoad")


def _three_stage():
    @T.prim_func
    def f(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
        B = T.alloc_buffer((8,))
        C = T.alloc_buffer((8,))
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)
        for i in range(8):
            with T.block("D"):
                vi = T.axis.spatial(8, i)
                D[vi] = B[vi] + C[vi]
    return f


def test_producers_and_consumers_on_the_block_index():
    index = FuncIndex(_three_stage())
    b, c, d = (index.blocks[name] for name in "BCD")
    assert index.producers(b) == [] and index.consumers(b) == [c, d]
    assert index.producers(c) == [b] and index.consumers(c) == [d]
    assert index.producers(d) == [b, c] and index.consumers(d) == []
    assert index.producers(index.blocks["root"]) == []


def test_schedule_neighbours_use_the_index():
    sch = tir.Schedule(_three_stage())
    assert [rv.name for rv in sch.get_producers(sch.get_block("D"))] == ["B", "C"]
    assert [rv.name for rv in sch.get_consumers(sch.get_block("B"))] == ["C", "D"]


def test_linear_form_round_trip():
    from mlc_lab.arith import Linear, from_linear, linear_form
    i, j = tir.Var("i"), tir.Var("j")
    lin = linear_form(i * 4 + j * 2 + 6)
    half = Linear({k: (a, c // 2) for k, (a, c) in lin.terms.items()}, lin.const // 2)
    assert structural_equal(from_linear(half, "int32"), i * 2 + j + 3)


def test_substitute_folds_what_it_leaves_between_two_integer_constants():
    """A unit loop replaced by 0 in ``v == 0 and w < 3`` leaves ``0 == 0``: folded, as the script
    parser folds it, so the IR prints and parses back the same."""
    from mlc_lab import tir
    v, w = tir.Var("v"), tir.Var("w")
    cond = tir.And(tir.EQ(v, tir.const(0)), w < 3)
    folded = substitute(cond, {v: tir.const(0)})
    assert isinstance(folded.a, tir.IntImm) and folded.a.value == 1 and str(folded) == "True and w < 3"
    assert str(substitute(v * 2 + w, {v: tir.const(0)})) == "0 + w"
    assert substitute(v // 0, {v: tir.const(4)}).__class__.__name__ == "FloorDiv"   # left alone
