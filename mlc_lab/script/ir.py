"""The ``I`` namespace of the script language: ``from mlc_lab.script import ir as I``."""
from __future__ import annotations

from ..ir.module import GlobalVar, IRModule
from ..relax.expr import Function
from ..tir.function import PrimFunc
from .relax import DeferredFunction


def ir_module(cls) -> IRModule:
    """Class decorator: an IRModule of the class's ``@T.prim_func`` and ``@R.function`` methods,
    keyed by method name. R functions are parsed here, once every function of the class is
    known, so ``cls.f`` (after ``cls = Module``) and ``Module.f`` name sibling functions."""
    if not isinstance(cls, type):
        raise TypeError(f"@I.ir_module decorates a class, got {type(cls).__name__}")
    members = {name: value for name, value in vars(cls).items()
               if isinstance(value, (PrimFunc, Function, DeferredFunction))}
    if any(isinstance(value, DeferredFunction) for value in members.values()):
        from .parser.relax_module import parse_module_members
        members = parse_module_members(cls.__name__, members)
    return IRModule(members)


__all__ = ["GlobalVar", "IRModule", "ir_module"]
