# Checks memory safety of lowered code for the buffers a function allocates itself (caches and
# compacted intermediates): every access is provably inside the allocation, or guarded by an `if`
# (or T.if_then_else) whose condition keeps it inside. Expects flat, lowered PrimFuncs.
from __future__ import annotations

from ...arith import can_prove, linear_form, simplify
from ...arith.bound import int_bound
from ...ir.module import IRModule
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..schedule.primitives.region import relax
from ..functor import StmtExprVisitor
from ..stmt_functor import conjuncts
from ..verify import VerifyError


def verify_memory(func_or_mod) -> bool:
    """True when every access to an allocated buffer of every lowered PrimFunc is provably in
    bounds; otherwise a VerifyError names the buffer and the access, with the function printed
    and the access underlined. Parameter buffers are not checked here (their size comes from the
    caller: ``-bounds-check`` builds check them at run time)."""
    functions = (func_or_mod.functions.items() if isinstance(func_or_mod, IRModule)
                 else [(None, func_or_mod)])
    for gv, func in functions:
        if isinstance(func, PrimFunc):
            name = gv.name_hint if gv is not None else (func.name or "main")
            _Checker(func, name).visit(func.body)
    return True


class _Checker(StmtExprVisitor):
    def __init__(self, func: PrimFunc, name: str):
        self.func, self.name = func, name
        self.allocated: dict[int, int | None] = {}   # id(buffer) -> its size, None if symbolic
        self.ranges: dict = {}
        self.guards: list = []

    def visit_Allocate(self, alloc):
        size = simplify(alloc.buffer.shape[0]) if alloc.buffer.shape else E.const(1)
        self.allocated[id(alloc.buffer)] = size
        self.visit(alloc.body)

    def visit_For(self, loop):
        self.visit(loop.min)
        self.visit(loop.extent)
        self.ranges[loop.loop_var] = S.Range(loop.min, loop.extent)
        self.visit(loop.body)
        del self.ranges[loop.loop_var]

    def visit_LetStmt(self, let):
        self.visit(let.value)
        self.guards.append(E.EQ(let.var, let.value))
        self.visit(let.body)
        self.guards.pop()

    def visit_IfThenElse(self, stmt):
        self.visit(stmt.condition)
        self.guards.append(stmt.condition)
        self.visit(stmt.then_case)
        self.guards.pop()
        if stmt.else_case is not None:
            self.guards.append(E.Not(stmt.condition))
            self.visit(stmt.else_case)
            self.guards.pop()

    def visit_Call(self, call):
        if call.op != "if_then_else":
            return self.generic_visit(call)
        cond, then_value, else_value = call.args
        self.visit(cond)
        self.guards.append(cond)
        self.visit(then_value)
        self.guards.pop()
        self.guards.append(E.Not(cond))
        self.visit(else_value)
        self.guards.pop()

    def visit_BufferLoad(self, load):
        self.check(load.buffer, load.indices, load)
        self.generic_visit(load)

    def visit_BufferStore(self, store):
        self.check(store.buffer, store.indices, store)
        self.generic_visit(store)

    def check(self, buffer, indices, node) -> None:
        size = self.allocated.get(id(buffer))
        if size is None or len(indices) != 1:
            return
        index = indices[0]
        if isinstance(index, E.Ramp):
            first = index.base
            last = index.base + index.stride * E.const(index.lanes - 1, index.base.dtype)
            if self.within(first, size) and self.within(last, size):
                return
        elif self.within(index, size):
            return
        text = self.func.script(underline=[node], name=self.name)
        raise VerifyError(
            f"verify_memory: in function {self.name}: the access to {buffer.name} at {index.script()} "
            f"may fall outside its allocation of {size.script()} elements (accesses to allocated "
            f"buffers are provably in bounds or guarded)\n{text}", self.name, node,
            "accesses to allocated buffers stay in bounds")

    def within(self, index, size) -> bool:
        low, high = self.bounds(index)
        low = self.guarded_extreme(index, upper=False) if low is None or not self.at_least_zero(low) else low
        high = self.guarded_extreme(index, upper=True) if high is None or not self.below(high, size) else high
        return low is not None and high is not None and self.at_least_zero(low) and self.below(high, size)

    def at_least_zero(self, e) -> bool:
        return can_prove(e >= E.const(0, e.dtype), self.ranges)

    def below(self, e, size) -> bool:
        return can_prove(e < size, self.ranges)

    def bounds(self, e):
        """Symbolic (min, max) of ``e`` over the enclosing loops, None for an unknown side."""
        interval = relax(e, self.ranges)
        if interval is not None:
            return interval.lo, interval.hi
        lo, hi = int_bound(e, self.ranges)
        return (None if lo is None else E.const(lo, e.dtype)), (None if hi is None else E.const(hi, e.dtype))

    def guarded_extreme(self, index, upper: bool):
        """The largest (or smallest) value of ``index`` under the guards: each guard ``e < b``
        (or ``e >= b``) whose ``e`` appears in it scaled by c bounds that part by ``c * b``; the
        rest is bounded over the loops. A predicate ``i_0 * 7 + i_2 < 3`` and ``j < 7`` caps
        ``(i_0 * 7 + i_2) * 7 + j`` at 20."""
        rest, bound_of_parts = index, E.const(0, index.dtype)
        for e, bound, is_upper in (c for g in [c for g in self.guards for c in conjuncts(g)] for c in _comparisons(g)):
            if is_upper != upper or e.dtype != index.dtype:
                continue
            scale = _scale(rest, e)
            if scale is not None:
                c = E.const(scale, index.dtype)
                rest, bound_of_parts = simplify(rest - e * c, self.ranges), bound_of_parts + bound * c
        extreme = self.bounds(rest)[1 if upper else 0]
        return None if extreme is None else simplify(bound_of_parts + extreme, self.ranges)


def _scale(index, e) -> int | None:
    """A positive c with ``index = c * e + (terms bounded on their own)``: the ratio of the
    coefficients of e's first term in both (index 13 * i_0 * 3 + 13 * i_1 + j over e i_0 * 3 + i_1
    gives 13), or None."""
    terms_e, terms_i = linear_form(e).terms, linear_form(index).terms
    if not terms_e:
        return None
    key, (_, coef) = next(iter(terms_e.items()))
    coef_i = terms_i.get(key, (None, 0))[1]
    if coef_i == 0 or coef_i % coef or coef_i // coef <= 0:
        return None
    return coef_i // coef


def _comparisons(g):
    """(e, bound, is_upper): ``e <= bound`` (is_upper) or ``e >= bound``, from one conjunct."""
    one = lambda x: E.const(1, x.dtype)  # noqa: E731
    if isinstance(g, E.LT):
        yield g.a, g.b - one(g.b), True
        yield g.b, g.a + one(g.a), False
    elif isinstance(g, E.LE):
        yield g.a, g.b, True
        yield g.b, g.a, False
    elif isinstance(g, E.GT):
        yield g.a, g.b + one(g.b), False
        yield g.b, g.a - one(g.a), True
    elif isinstance(g, E.GE):
        yield g.a, g.b, False
        yield g.b, g.a, True
    elif isinstance(g, E.EQ):
        yield g.a, g.b, True
        yield g.a, g.b, False
    elif isinstance(g, E.Not) and isinstance(g.a, (E.LT, E.LE, E.GT, E.GE)):
        flipped = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}[type(g.a)]
        yield from _comparisons(flipped(g.a.a, g.a.b))


__all__ = ["verify_memory"]
