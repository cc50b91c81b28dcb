"""The ``I`` namespace of the script language: ``from mlc_lab.script import ir as I``."""
from __future__ import annotations

from ..ir.module import GlobalVar, IRModule
from ..tir.function import PrimFunc


def ir_module(cls) -> IRModule:
    """Class decorator: an IRModule of the class's ``@T.prim_func`` methods, keyed by method name."""
    if not isinstance(cls, type):
        raise TypeError(f"@I.ir_module decorates a class, got {type(cls).__name__}")
    functions = {name: value for name, value in vars(cls).items() if isinstance(value, PrimFunc)}
    return IRModule(functions)


__all__ = ["GlobalVar", "IRModule", "ir_module"]
