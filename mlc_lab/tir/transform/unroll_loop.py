# Expands "unrolled" loops into one copy of the body per iteration, as long as the copies stay small:
# a constant extent of at most MAX_UNROLL and at most MAX_UNROLLED_STMTS statements in all. Longer or
# bigger loops stay unrolled loops, which the code generator unrolls by a bounded count.
# Expects block-free PrimFuncs.
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator, StmtExprVisitor
from ...ir.node import Node, field_values
from ..stmt_functor import Substitute
from .prim_func_pass import is_const, prim_func_pass

MAX_UNROLL = 64
MAX_UNROLLED_STMTS = 4096


@prim_func_pass
def unroll_loop(func: PrimFunc) -> PrimFunc:
    """``for k in T.unroll(2): B[k] = A[k]`` becomes ``B[0] = A[0]`` then ``B[1] = A[1]``."""
    return func.replace(body=_Unroll().visit(func.body))


class _Unroll(StmtExprMutator):
    def visit_PrimExpr(self, e):
        return e   # no loop inside an expression: nothing to expand there

    def visit_For(self, loop):
        loop = self.generic_visit(loop)
        if loop.kind != "unrolled" or not fits_unroll_budget(loop):
            return loop
        uses: dict = {}   # which expressions of the body use the loop variable, for every copy
        if not is_const(loop.min):
            copies = [_Substitute(loop.loop_var, loop.min + k, uses).visit(loop.body)
                      for k in range(loop.extent.value)]
        else:
            copies = [_Substitute(loop.loop_var, E.const(loop.min.value + k, loop.loop_var.dtype),
                                  uses).visit(loop.body)
                      for k in range(loop.extent.value)]
        return S.seq(*copies) if copies else S.Evaluate(E.const(0))


class _Substitute(Substitute):
    """``substitute(body, {var: value})`` that does not walk an expression without ``var``
    (it would come back unchanged): ``uses``, shared by the copies of one body, remembers which
    expressions use it."""

    def __init__(self, var, value, uses: dict):
        super().__init__({var: value})
        self.var, self.uses = var, uses

    def visit(self, node):
        if isinstance(node, E.PrimExpr) and not _uses(node, self.var, self.uses):
            return node
        return super().visit(node)


def _uses(node, var, memo: dict) -> bool:
    """Whether ``var`` appears anywhere in ``node`` (buffer shapes included)."""
    if node is var:
        return True
    if isinstance(node, (tuple, list)):
        return any(_uses(item, var, memo) for item in node)
    if not isinstance(node, Node) or isinstance(node, E.Var):
        return False
    hit = memo.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    found = any(_uses(value, var, memo) for value in field_values(node)
                if isinstance(value, (Node, tuple, list)))
    memo[id(node)] = (node, found)   # holds the node: its id stays its own
    return found


def fits_unroll_budget(loop: S.For) -> bool:
    """Whether fully unrolling ``loop`` keeps the code small: a constant extent of at most
    MAX_UNROLL, and at most MAX_UNROLLED_STMTS statements in all the copies."""
    return (is_const(loop.extent) and loop.extent.value <= MAX_UNROLL
            and loop.extent.value * _StmtCount.of(loop.body) <= MAX_UNROLLED_STMTS)


def partial_unroll_count(loop: S.For, most: int) -> int:
    """How many copies of the body of an unrolled loop too big to expand the code generator may ask
    LLVM for: at most ``most``, and no more than keep the copies' statements, inner loops run to
    the end, within MAX_UNROLLED_STMTS (LLVM unrolls short inner loops of every copy too, so an
    outer loop's copies multiply them). 1 means: do not unroll."""
    per_copy = max(1, _StmtCount.of(loop.body))
    return max(1, min(most, MAX_UNROLLED_STMTS // per_copy))


class _StmtCount(StmtExprVisitor):
    """How many statements running a body executes (loops count their extent, when constant)."""

    @staticmethod
    def of(stmt) -> int:
        counter = _StmtCount()
        counter.visit(stmt)
        return counter.count

    def __init__(self):
        super().__init__()
        self.count = 0

    def visit_PrimExpr(self, e):
        pass   # expressions hold no statements

    def visit_BufferStore(self, store):
        self.count += 1

    def visit_Evaluate(self, stmt):
        self.count += 1

    def visit_For(self, loop):
        inner = _StmtCount.of(loop.body)
        self.count += inner * (loop.extent.value if is_const(loop.extent) else MAX_UNROLL)
