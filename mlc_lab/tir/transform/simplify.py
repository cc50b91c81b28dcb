# Simplifies every expression with the enclosing loop ranges, drops constant-condition ifs, empty
# statements and loops, and replaces extent-1 loops by their variable's value. Expects block-free PrimFuncs.
from __future__ import annotations

from ...arith import simplify as simplify_expr
from ...arith.simplify_memo import SimplifyMemo, current_memo
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator
from ..stmt_functor import substitute
from .prim_func_pass import is_const, prim_func_pass


@prim_func_pass
def simplify(func: PrimFunc) -> PrimFunc:
    """``for k in range(1): Y[i * 4 + k // 4] = ...`` becomes ``Y[i * 4] = ...``;
    ``if 0 <= i: s`` inside ``for i in range(8)`` becomes ``s``."""
    body = _Simplify().visit(func.body)
    return func.replace(body=S.Evaluate(E.const(0)) if body is None else body)


class _Simplify(StmtExprMutator):
    """Statements come back as None when they do nothing."""

    def __init__(self):
        super().__init__()
        self.ranges: dict = {}
        # unrolled bodies repeat the same subexpressions: one memo for the whole function (the
        # lowering pipeline's, when it runs under one)
        self.memo = current_memo() or SimplifyMemo()


    def visit_Buffer(self, buffer):
        return buffer   # shapes were simplified by flatten_buffer; parameters must stay the same objects

    def visit_PrimExpr(self, e):
        return simplify_expr(e, self.ranges, self.memo)

    def visit_For(self, loop):
        low, extent = self.visit(loop.min), self.visit(loop.extent)
        if is_const(extent) and extent.value <= 0:
            return None
        if is_const(extent, 1) and loop.kind != "thread_binding":
            return self.visit(substitute(loop.body, {loop.loop_var: low}))
        self.ranges[loop.loop_var] = S.Range(low, extent)
        body = self.visit(loop.body)
        del self.ranges[loop.loop_var]
        if body is None:
            return None
        if low is loop.min and extent is loop.extent and body is loop.body:
            return loop
        return loop.replace(min=low, extent=extent, body=body)

    def visit_IfThenElse(self, s):
        condition = self.visit(s.condition)
        if is_const(condition):
            return self.visit(s.then_case if condition.value else s.else_case) \
                if condition.value or s.else_case is not None else None
        then_case = self.visit(s.then_case)
        else_case = self.visit(s.else_case) if s.else_case is not None else None
        if then_case is None and else_case is None:
            return None
        if then_case is None:
            return S.IfThenElse(E.Not(condition), else_case)
        return S.IfThenElse(condition, then_case, else_case)

    def visit_SeqStmt(self, s):
        items = [x for x in (self.visit(x) for x in s.seq) if x is not None]
        return S.seq(*items) if items else None

    def visit_LetStmt(self, s):
        body = self.visit(s.body)
        return None if body is None else S.LetStmt(s.var, self.visit(s.value), body)

    def visit_Allocate(self, s):
        body = self.visit(s.body)
        return None if body is None else s.replace(body=body)   # an AllocateConst keeps its data

    def visit_Evaluate(self, s):
        value = self.visit(s.value)
        return None if isinstance(value, (E.IntImm, E.FloatImm)) else S.Evaluate(value)

    def visit_BufferStore(self, s):
        return S.BufferStore(s.buffer, self.visit(s.value), tuple(self.visit(i) for i in s.indices))
