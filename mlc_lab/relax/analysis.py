"""Analyses of relax functions, under the course's names (``relax.analysis.*``)."""
from __future__ import annotations

from .expr import Function
from .transform.dead_code_elimination import remove_unused_bindings


def remove_all_unused(func: Function) -> Function:
    """``func`` without the bindings of its dataflow blocks that nothing uses, repeatedly (a
    rewrite that replaces ``add(multiply(a, b), c)`` by one fused call leaves the multiply
    unused; this drops it). Bindings outside dataflow blocks may have effects and stay."""
    if not isinstance(func, Function):
        raise TypeError(f"relax.analysis.remove_all_unused expects a relax.Function, got "
                        f"{type(func).__name__}; for a whole module use "
                        "relax.transform.DeadCodeElimination()(mod)")
    return remove_unused_bindings(func)


__all__ = ["remove_all_unused"]
