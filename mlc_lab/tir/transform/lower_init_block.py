# Moves each reduction block's init into its body as `if <reduce iterators at their minimum>: init`.
# Expects block-form PrimFuncs; blocks without init are left as they are.
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator
from .prim_func_pass import prim_func_pass


class _LowerInit(StmtExprMutator):
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


@prim_func_pass
def lower_init_block(func: PrimFunc) -> PrimFunc:
    """``with T.init(): Y[vi] = 0`` in a block reducing over ``vk`` becomes
    ``if vk == 0: Y[vi] = 0`` followed by the block's update."""
    return func.replace(body=_LowerInit().visit(func.body))
