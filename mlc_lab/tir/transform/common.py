# Helpers shared by the lowering passes: running a PrimFunc rewrite over a module, substitution.
# Expects loop-IR PrimFuncs (or IRModules of them); other functions in a module pass through.
from __future__ import annotations

import functools

from ...arith import simplify
from ...ir.module import IRModule
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator


def prim_func_pass(rewrite):
    """Turn ``rewrite(PrimFunc) -> PrimFunc`` into a pass ``IRModule -> IRModule`` that applies it
    to every PrimFunc of the module (a lone PrimFunc gives a PrimFunc back)."""
    @functools.wraps(rewrite)
    def run(mod_or_func):
        if isinstance(mod_or_func, PrimFunc):
            return rewrite(mod_or_func)
        if not isinstance(mod_or_func, IRModule):
            raise TypeError(f"{rewrite.__name__} expects an IRModule or a PrimFunc, got "
                            f"{type(mod_or_func).__name__}")
        out = IRModule(mod_or_func.functions, mod_or_func.attrs)
        for gv, func in mod_or_func.functions.items():
            if isinstance(func, PrimFunc):
                out[gv] = rewrite(func)
        return out
    return run


class Substitute(StmtExprMutator):
    """Replace variables (by identity) with expressions."""

    def __init__(self, mapping: dict):
        super().__init__()
        self.mapping = {id(k): v for k, v in mapping.items()}

    def visit_Var(self, var):
        return self.mapping.get(id(var), var)


def substitute(node, mapping: dict):
    return Substitute(mapping).visit(node) if mapping else node


def loop_range(loop: S.For) -> S.Range:
    return S.Range(loop.min, loop.extent)


def is_const(e, value=None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


def simplify_in(e, ranges: dict):
    """``arith.simplify`` that leaves non-expressions alone."""
    return simplify(e, ranges) if isinstance(e, E.PrimExpr) else e
