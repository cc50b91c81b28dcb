"""``mlc_lab.build``: turn PrimFuncs into a runtime Module for a target.

The target (a string such as ``"llvm -num-cores=2"``, a dict, or a ``mlc_lab.target.Target``)
picks the backend registered for its kind (``mlc_lab.target.get_backend``), which lowers,
compiles and loads the functions.
"""
from __future__ import annotations

from .ir import IRModule
from .runtime.module import Module
from .target import Target, get_backend
from .target import backends as _backends  # noqa: F401  (each backend registers itself on import)
from .tir.function import PrimFunc


def build(mod_or_func, target="python", name: str | None = None) -> Module:
    """Compile an IRModule of PrimFuncs, or a single PrimFunc, for ``target``.

    A lone PrimFunc is named by ``name``, else its "global_symbol" attribute, else "main".
    Returns a runtime Module: ``lib["name"](*arrays)`` (or ``lib(*arrays)`` with one function)
    writes the outputs into the arrays passed."""
    target = Target("python" if target is None else target)
    backend = get_backend(target.kind.name)
    if isinstance(mod_or_func, PrimFunc):
        functions = {name or mod_or_func.attr_dict.get("global_symbol") or "main": mod_or_func}
    elif isinstance(mod_or_func, IRModule):
        functions = {}
        for gv, func in mod_or_func.functions.items():
            if not isinstance(func, PrimFunc):
                raise TypeError(f"mlc_lab.build compiles PrimFuncs, but function {gv.name_hint!r} "
                                f"is a {type(func).__name__}; build graph-level modules with "
                                "relax.build")
            functions[gv.name_hint] = func
    else:
        raise TypeError(f"mlc_lab.build expects an IRModule or a PrimFunc, got "
                        f"{type(mod_or_func).__name__}")
    return backend.build(functions, target)
