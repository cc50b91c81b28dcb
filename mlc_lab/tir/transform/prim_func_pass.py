# The PrimFunc pass (a rewrite of every PrimFunc of a module, run under the PassContext like any
# other pass) and helpers shared by the lowering passes. Other functions in a module pass through.
from __future__ import annotations

import inspect
from typing import Callable, Optional

from ...arith import simplify
from ...ir.module import IRModule
from ...ir.transform import Pass, PassContext, PassInfo, pass_decorator
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc


class PrimFuncPass(Pass):
    """A pass given by ``pass_func(func) -> func``, or as in the course ``pass_func(func, mod,
    ctx) -> func``, applied to every PrimFunc of the module. Called on a lone PrimFunc it gives a
    PrimFunc back (instruments see it as a module of one function)."""

    def __init__(self, pass_func: Callable, info: PassInfo):
        self.pass_func, self.info = pass_func, info
        self.__name__, self.__doc__ = info.name, pass_func.__doc__
        self._with_module = _positional_parameters(pass_func) >= 3

    def __call__(self, mod_or_func):
        if isinstance(mod_or_func, PrimFunc):
            name = mod_or_func.name or "main"
            return super().__call__(IRModule({name: mod_or_func}))[name]
        if not isinstance(mod_or_func, IRModule):
            raise TypeError(f"{self.info.name} expects an IRModule or a PrimFunc, got "
                            f"{type(mod_or_func).__name__}")
        return super().__call__(mod_or_func)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = IRModule(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, PrimFunc):
                new = self.pass_func(func, mod, ctx) if self._with_module else self.pass_func(func)
                if not isinstance(new, PrimFunc):
                    raise TypeError(f"pass {self.info.name} turned PrimFunc {gv.name_hint!r} into "
                                    f"{type(new).__name__}, not a PrimFunc")
                out[gv] = new
        return out


def _positional_parameters(func: Callable) -> int:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def prim_func_pass(pass_func=None, opt_level: int = 0, name: Optional[str] = None, required=()):
    """Make a PrimFuncPass from ``f(func) -> func`` or ``f(func, mod, ctx) -> func``, or from a
    class with ``transform_function(self, func, mod, ctx)`` (then calling the class makes the
    pass). Use it bare (``@prim_func_pass``) or with arguments
    (``@prim_func_pass(opt_level=0)``)."""
    return pass_decorator(PrimFuncPass, pass_func, opt_level, name, required)


def loop_range(loop: S.For) -> S.Range:
    return S.Range(loop.min, loop.extent)


def is_const(e, value=None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


def simplify_in(e, ranges: dict):
    """``arith.simplify`` that leaves non-expressions alone."""
    return simplify(e, ranges) if isinstance(e, E.PrimExpr) else e
