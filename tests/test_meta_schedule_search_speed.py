"""The shortcuts that make producing a candidate cheap give exactly what the general code gives:
the linear index arithmetic against the simplifier, the remembered answers of the IR walkers
against fresh walks, a replay that re-draws the design's own decision against a full replay,
and the trace's record of a call however the call was written."""
import random

import numpy as np
import pytest

from mlc_lab import tir
from mlc_lab.arith import can_prove, linear_form, simplify
from mlc_lab.ir import structural_equal
from mlc_lab.meta_schedule.search_strategy import SAMPLING_KINDS
from mlc_lab.meta_schedule.space_generator import PostOrderApply, SpaceRejectedError
from mlc_lab.testing import matmul_schedules as mm
from mlc_lab.tir import expr as E
from mlc_lab.tir import intervals
from mlc_lab.tir import linear_index as L
from mlc_lab.tir import stmt as S
from mlc_lab.tir.schedule.func_index import FuncIndex, replace_stmts
from mlc_lab.tir.schedule.trace import Trace
from mlc_lab.tir.stmt_functor import uses_var


def _const(value):
    return E.const(value, "int32")


def _range(lo, extent):
    return S.Range(_const(lo), _const(extent))


class _Sums:
    """Random integer expressions over a few variables: sums, differences, products by
    constants (sometimes by another sum), with cancellations and sign changes."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.vars = [tir.Var(name, "int32") for name in ("a", "b", "c", "d")]

    def leaf(self):
        return self.rng.choice(self.vars) if self.rng.random() < 0.6 else _const(self.rng.randint(-4, 8))

    def expr(self, depth):
        if depth == 0 or self.rng.random() < 0.25:
            return self.leaf()
        op = self.rng.choice([E.Add, E.Sub, E.Mul, E.Add, E.Sub])
        if op is E.Mul:
            a = self.expr(depth - 1)
            b = _const(self.rng.randint(-3, 4)) if self.rng.random() < 0.8 else self.expr(depth - 1)
            return E.Mul(a, b) if self.rng.random() < 0.5 else E.Mul(b, a)
        return op(self.expr(depth - 1), self.expr(depth - 1))


def _same(x, y):
    return structural_equal(x, y) and x.dtype == y.dtype


@pytest.mark.parametrize("seed", [0, 1])
def test_linear_index_agrees_with_the_simplifier(seed):
    sums = _Sums(seed)
    a, b = sums.vars[:2]
    known = {a: _range(0, 8), b: _range(0, 4)}
    for _ in range(600):
        e = sums.expr(sums.rng.randint(1, 5))
        assert _same(L.simplify(e, known), simplify(e, known)), e
        lin, ref = L.linear_form(e), linear_form(e)
        assert list(lin.terms.items()) == list(ref.terms.items()) and lin.const == ref.const, e
        other = sums.expr(2)
        for op in (E.Min, E.Max):
            assert _same(L.simplify(op(e, other), known), simplify(op(e, other), known)), (e, other)
        for op in (E.LT, E.LE, E.GT, E.GE):
            assert L.can_prove(op(e, other), known) == can_prove(op(e, other), known), (e, other)


def test_linear_index_keeps_the_simplifiers_term_order():
    x, y = tir.Var("x"), tir.Var("y")
    # a sign that flips after the terms were first ordered, and the "constant minus terms" form
    for e, text in ((x * -1 + y + x * 2, "y + x"), (3 - x - y + x * 2, "x - y + 3"),
                    ((x - y) * -1, "y - x"), (-x + 9, "9 - x"), (x * 0 + 5, "5")):
        assert str(L.simplify(e)) == text == str(simplify(e))


@pytest.mark.parametrize("seed", [0, 1])
def test_relaxing_a_linear_index_agrees_with_the_general_relax(seed):
    sums = _Sums(seed)
    a, b, c, d = sums.vars
    known = {a: _range(0, 8), b: _range(0, 4)}
    fast_paths = 0
    for _ in range(400):
        e = sums.expr(sums.rng.randint(1, 5))
        relaxed = {c: _range(sums.rng.randint(-2, 3), sums.rng.randint(1, 6)), d: _range(0, 5)}
        fast = L.relax(e, relaxed, known)
        if fast is None:
            continue
        fast_paths += 1
        bounds = intervals._relax(simplify(e), relaxed, known)
        assert bounds is not None
        assert _same(fast[0], simplify(bounds[0], known)) and _same(fast[1], simplify(bounds[1], known)), e
    assert fast_paths > 100


def test_relax_leaves_what_is_not_linear_to_the_general_path():
    i, j = tir.Var("i"), tir.Var("j")
    n = tir.Var("n")
    assert L.relax(i // 4 + j, {i: _range(0, 16)}) is None         # a division
    assert L.relax(i * j, {i: _range(0, 16)}) is None              # a product of variables
    assert L.relax(i + j, {i: S.Range(_const(0), n)}) is None      # a symbolic range
    interval = intervals.relax(i // 4 + j, {i: _range(0, 16)})
    assert str(interval.lo) == "j" and str(interval.hi) == "j + 3"


def test_remembered_variable_uses_answer_like_a_fresh_walk():
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    e = i * 4 + j
    for _ in range(2):   # asked twice: the second answer comes from what was kept
        assert uses_var(e, i) and uses_var(e, [k, j]) and uses_var(e, {j: None})
        assert not uses_var(e, k) and not uses_var(e, [])
    A = tir.decl_buffer((8,), name="A")
    load = E.BufferLoad(A, (k,))
    assert uses_var(load + i, k) and not uses_var(load, j)


def _tiled_matmul():
    sch = tir.Schedule(mm.naive(64))
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[4, 16])
    sch.split(j, factors=[8, 8])
    return sch


def test_replacing_along_the_index_equals_the_full_walk():
    sch = _tiled_matmul()
    func = sch.mod["main"]
    index = FuncIndex(func)
    for loop in [n for n in index.order if isinstance(n, S.For)]:
        new = loop.replace(annotations=(("note", 1),))
        pruned = replace_stmts(func, {id(loop): new}, index)
        full = replace_stmts(func, {id(loop): new})
        assert structural_equal(pruned, full)
        assert any(n is new for n in FuncIndex(pruned).order)


def test_a_call_is_recorded_the_same_however_it_is_written():
    sch = _tiled_matmul()
    loops = sch.get_loops(sch.get_block("C"))
    sch.annotate(loops[0], "a", 1)
    sch.annotate(loops[0], ann_key="b", ann_val=2)
    sch.annotate(block_or_loop=loops[0], ann_val=3, ann_key="c")
    recorded = [inst.kwargs for inst in sch.trace.insts[-3:]]
    assert [list(kw) for kw in recorded] == [["block_or_loop", "ann_key", "ann_val"]] * 3
    with pytest.raises(TypeError):
        sch.annotate(loops[0], "d")                  # a missing argument
    with pytest.raises(TypeError):
        sch.annotate(loops[0], "d", 1, ann_key="e")  # an argument given twice
    text = sch.trace.as_python()
    assert 'sch.annotate(block_or_loop=l' in text[-1] and 'ann_key="c"' in text[-1]


def test_a_replay_redrawing_the_designs_own_decision_gives_the_candidate_made_before():
    mod = mm.naive(128)
    space = PostOrderApply(num_cores=2)
    rng = np.random.default_rng(5)
    population = []
    while len(population) < 4:
        try:
            population.append(space.sample(mod, int(rng.integers(2**31))))
        except SpaceRejectedError:
            pass
    reused = 0
    for _ in range(40):
        parent = population[int(rng.integers(len(population)))]
        sites = [k for k, kind in enumerate(Trace.json_kinds(parent.design)) if kind in SAMPLING_KINDS]
        site, seed = sites[int(rng.integers(len(sites)))], int(rng.integers(2**31))
        try:
            child = space.replay(mod, parent.design, seed, decisions={site: None})
        except SpaceRejectedError:
            continue
        # the same replay on a space that remembers nothing
        fresh = PostOrderApply(num_cores=2).replay(mod, parent.design, seed, decisions={site: None})
        assert child.design == fresh.design
        assert structural_equal(child.sch.mod, fresh.sch.mod)
        assert child.sch.trace.as_json() == fresh.sch.trace.as_json()
        if child is parent:
            reused += 1
            assert fresh.design == parent.design
        population.append(child)
    assert reused > 0   # categorical decisions come out the same often enough


def test_taken_buffer_names_finds_what_a_full_visit_finds():
    from mlc_lab.tir.buffer import Buffer
    from mlc_lab.tir.schedule.primitives.cache import taken_buffer_names
    from mlc_lab.tir.stmt_functor import post_order_visit
    sch = _tiled_matmul()
    sch.cache_write(sch.get_block("C"), 0, "local")
    for func in (mm.naive(32)["main"], sch.mod["main"], mm.best_schedule(64).mod["main"]):
        visited = set()
        post_order_visit((func.params, func.body),
                         lambda n: visited.add(n.name) if isinstance(n, Buffer) else None)
        assert taken_buffer_names(func) == visited
