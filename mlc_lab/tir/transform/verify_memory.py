# Checks memory safety of lowered code for the buffers a function allocates itself (caches and
# compacted intermediates): every access is provably inside the allocation, or guarded by an `if`
# (or T.if_then_else) whose condition keeps it inside. Expects flat, lowered PrimFuncs.
from __future__ import annotations

from ...arith import can_prove, simplify
from ...arith.bound import int_bound
from ...ir.module import IRModule
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..intervals import guarded_bounds, relax
from ..functor import StmtExprVisitor
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
        lows = [low] + guarded_bounds(index, self.guards, self.ranges, upper=False)
        highs = [high] + guarded_bounds(index, self.guards, self.ranges, upper=True)
        return (any(b is not None and self.at_least_zero(b) for b in lows)
                and any(b is not None and self.below(b, size) for b in highs))

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


__all__ = ["verify_memory"]
