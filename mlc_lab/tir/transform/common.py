# Helpers shared by the lowering passes: running a PrimFunc rewrite over a module, loop ranges.
# Expects loop-IR PrimFuncs (or IRModules of them); other functions in a module pass through.
from __future__ import annotations

import functools

from ...arith import simplify
from ...ir.module import IRModule
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc


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


def loop_range(loop: S.For) -> S.Range:
    return S.Range(loop.min, loop.extent)


def is_const(e, value=None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


def simplify_in(e, ranges: dict):
    """``arith.simplify`` that leaves non-expressions alone."""
    return simplify(e, ranges) if isinstance(e, E.PrimExpr) else e
