"""Analyses of graph-level functions under the course's names: ``relax.analysis.remove_all_unused``.

    updated = EwiseFMARewriter().visit_expr(mod["main"])
    relax.analysis.remove_all_unused(updated).show()    # the multiply folded into ewise_fma is gone
"""
from __future__ import annotations

from .expr import Function
from .transform.dead_code_elimination import remove_unused_bindings


def remove_all_unused(func: Function) -> Function:
    """``func`` without the bindings of its dataflow blocks whose variables nothing uses
    (repeatedly, so whole dead chains go); bindings outside dataflow blocks may have effects
    and stay. The pass form over a module is ``relax.transform.DeadCodeElimination()``."""
    if not isinstance(func, Function):
        raise TypeError(f"relax.analysis.remove_all_unused takes a relax.Function, got "
                        f"{type(func).__name__}")
    return remove_unused_bindings(func)


__all__ = ["remove_all_unused"]
