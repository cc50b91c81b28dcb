# Moves each reduction block's init into its body as `if <reduce iterators at their minimum>: init`,
# and gives each T.allocate_const its initial values the same way: an Allocate whose body first
# stores them. Expects block-form PrimFuncs; blocks without init are left as they are.
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator
from .prim_func_pass import prim_func_pass


class _LowerInit(StmtExprMutator):
    def visit_PrimExpr(self, e):
        return e   # no block or constant allocation inside an expression

    def visit_Block(self, block: S.Block):
        block = self.generic_visit(block)
        if block.init is None:
            return block
        condition = None
        for iv in block.iter_vars:
            if iv.iter_type == "reduce":
                first = E.EQ(iv.var, iv.dom.min)
                condition = first if condition is None else E.And(condition, first)
        init = block.init if condition is None else S.IfThenElse(condition, block.init)
        return block.replace(init=None, body=S.seq(init, block.body))

    def visit_AllocateConst(self, alloc: S.AllocateConst):
        body = self.visit(alloc.body)
        buffer = alloc.buffer
        strides = [1] * len(buffer.shape)
        for d in range(len(buffer.shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * buffer.shape[d + 1].value
        stores = [S.BufferStore(buffer, E.const(v, buffer.dtype),
                                tuple(E.const(n // s % dim.value, dim.dtype)
                                      for s, dim in zip(strides, buffer.shape)))
                  for n, v in enumerate(alloc.data)]
        return S.Allocate(buffer, S.seq(*stores, body))


@prim_func_pass
def lower_init_block(func: PrimFunc) -> PrimFunc:
    """``with T.init(): Y[vi] = 0`` in a block reducing over ``vk`` becomes
    ``if vk == 0: Y[vi] = 0`` followed by the block's update; ``c = T.allocate_const([0.5, 1.5],
    "float32", [2])`` becomes ``c = T.allocate((2,), "float32", "global")`` followed by
    ``c[0] = 0.5; c[1] = 1.5``."""
    return func.replace(body=_LowerInit().visit(func.body))
