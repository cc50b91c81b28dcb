"""Count a program's floating-point operations, for GFLOPS: each block's arithmetic on floats
(a multiply-add counts 2, an exp or sqrt 1) times how many iterations the block has. Init
statements and index arithmetic are not counted."""
from __future__ import annotations

from ....ir.module import IRModule
from ... import expr as E
from ...function import PrimFunc
from ...functor import StmtExprVisitor
from ..primitives.scope import const_int

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max, E.FloorDiv, E.Mod, E.FloorMod)


TYPICAL_LENGTH = 128   # a symbolic size, where a decision needs one: to run in parallel, to measure


def estimate_flops(mod_or_func, assume: int | None = None) -> float:
    """Floating-point operations of every PrimFunc in a module (or of one PrimFunc); a block
    with a symbolic iteration domain counts 0, or, with ``assume``, as if every symbolic size
    were ``assume`` (a representative length, for decisions that need a size)."""
    if isinstance(mod_or_func, PrimFunc):
        funcs = [mod_or_func]
    elif isinstance(mod_or_func, IRModule):
        funcs = [f for f in mod_or_func.functions.values() if isinstance(f, PrimFunc)]
    else:
        raise TypeError(f"estimate_flops expects an IRModule or a PrimFunc, got "
                        f"{type(mod_or_func).__name__}")
    counter = _BlockFlops(assume)
    for func in funcs:
        counter.visit(func.body)
    return float(counter.total)


class _BlockFlops(StmtExprVisitor):
    def __init__(self, assume: int | None = None):
        self.total, self.assume = 0, assume

    def visit_Block(self, block):
        iterations = 1
        for iv in block.iter_vars:
            extent = const_int(iv.dom.extent)
            if extent is None and self.assume is not None:
                extent = _evaluate(iv.dom.extent, self.assume)
            if extent is None:
                return
            iterations *= extent
        ops = _FloatOps()
        ops.visit(block.body)
        self.total += iterations * ops.count if block.iter_vars else 0
        self.visit(block.body)


class _FloatOps(StmtExprVisitor):
    """Float arithmetic in one block's body (nested blocks are counted on their own)."""

    def __init__(self):
        self.count = 0

    def visit_Block(self, block):
        return

    def visit_PrimExpr(self, node):
        if isinstance(node, _ARITH) and "float" in node.dtype:
            self.count += 1
        elif isinstance(node, E.Call) and "float" in node.dtype:
            self.count += 1
        self.generic_visit(node)


def _evaluate(expr, value: int) -> int | None:
    """``expr`` with every variable set to ``value``, when that makes it a constant."""
    from ....arith import simplify
    from ...stmt_functor import substitute, free_vars
    try:
        return const_int(simplify(substitute(expr, {v: E.const(value, v.dtype) for v in free_vars(expr)})))
    except (TypeError, ValueError):
        return None
