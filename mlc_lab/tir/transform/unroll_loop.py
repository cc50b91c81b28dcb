# Expands "unrolled" loops with a constant extent of at most MAX_UNROLL into one copy of the body per
# iteration; longer ones stay unrolled loops for the code generator. Expects block-free PrimFuncs.
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator
from ..stmt_functor import substitute
from .common import is_const, prim_func_pass

MAX_UNROLL = 64


@prim_func_pass
def unroll_loop(func: PrimFunc) -> PrimFunc:
    """``for k in T.unroll(2): B[k] = A[k]`` becomes ``B[0] = A[0]`` then ``B[1] = A[1]``."""
    return func.replace(body=_Unroll().visit(func.body))


class _Unroll(StmtExprMutator):
    def visit_For(self, loop):
        loop = self.generic_visit(loop)
        if loop.kind != "unrolled" or not is_const(loop.extent) or loop.extent.value > MAX_UNROLL:
            return loop
        if not is_const(loop.min):
            copies = [substitute(loop.body, {loop.loop_var: loop.min + k}) for k in range(loop.extent.value)]
        else:
            copies = [substitute(loop.body, {loop.loop_var: E.const(loop.min.value + k, loop.loop_var.dtype)})
                      for k in range(loop.extent.value)]
        return S.seq(*copies) if copies else S.Evaluate(E.const(0))
