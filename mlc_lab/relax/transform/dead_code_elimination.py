# DeadCodeElimination: remove bindings of dataflow blocks whose values are never used, and functions
# no entry function reaches. Expects relax functions; entries are "main" and those with a global_symbol.
"""``relax.transform.DeadCodeElimination(entry_functions=None)``: drop what nothing uses.

Bindings: inside dataflow blocks (which are pure) a binding whose variable is used by no later
binding, no later block and not by the function's result is removed, repeatedly, so whole dead
chains go. Bindings outside dataflow blocks may have side effects and are kept. Empty dataflow
blocks are dropped.

Functions: the entries are the names in ``entry_functions``, plus "main" and every relax function
with a ``global_symbol``; a function that no entry reaches through calls (``R.call_tir(cls.f ...)``,
``cls.f(...)``) is removed. A module without relax functions is left whole.
"""
from __future__ import annotations

from typing import Optional

from ...ir.module import IRModule
from ...ir.transform import Pass, PassInfo
from ..expr import DataflowBlock, Function, SeqExpr
from ..functor import ExprVisitor


class _Uses(ExprVisitor):
    def __init__(self):
        self.vars: set = set()
        self.gvars: set = set()

    def visit_var_(self, op):
        self.vars.add(op)

    def visit_dataflow_var_(self, op):
        self.vars.add(op)

    def visit_global_var_(self, op):
        self.gvars.add(op)


def used_vars(*exprs) -> set:
    uses = _Uses()
    for e in exprs:
        uses.visit_expr(e)
    return uses.vars


def remove_unused_bindings(func: Function) -> Function:
    """``func`` without the dead bindings of its dataflow blocks."""
    blocks = list(func.body.blocks)
    changed = True
    while changed:
        changed = False
        live = used_vars(func.body.body)
        for block in blocks:
            for b in block.bindings:
                live |= used_vars(b.value)
        new_blocks = []
        for block in blocks:
            if isinstance(block, DataflowBlock):
                kept = [b for b in block.bindings if b.var in live]
                if len(kept) != len(block.bindings):
                    changed = True
                    block = DataflowBlock(kept)
            if block.bindings:
                new_blocks.append(block)
            else:
                changed = changed or isinstance(block, DataflowBlock)
        blocks = new_blocks
    if len(blocks) == len(func.body.blocks) and all(a is b for a, b in zip(blocks, func.body.blocks)):
        return func
    return func.replace(body=SeqExpr(blocks, func.body.body), struct_info=None)


def remove_unused_functions(mod: IRModule, entry_functions=()) -> IRModule:
    funcs = mod.functions
    if not any(isinstance(f, Function) for f in funcs.values()):
        return mod
    work = [gv for gv, f in funcs.items() if gv.name_hint in entry_functions or gv.name_hint == "main"
            or (isinstance(f, Function) and "global_symbol" in f.attrs)]
    reached = set(work)
    while work:
        func = funcs[work.pop()]
        if not isinstance(func, Function):
            continue
        uses = _Uses()
        uses.visit_expr(func)
        for gv in uses.gvars:
            if gv in funcs and gv not in reached:
                reached.add(gv)
                work.append(gv)
    return IRModule({gv: f for gv, f in funcs.items() if gv in reached}, mod.attrs)


class DeadCodeElimination(Pass):
    def __init__(self, entry_functions: Optional[list] = None):
        self.entry_functions = tuple(entry_functions or ())
        self.info = PassInfo(0, "DeadCodeElimination")

    def transform_module(self, mod, ctx):
        out = IRModule(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                out[gv] = remove_unused_bindings(func)
        return remove_unused_functions(out, self.entry_functions)


__all__ = ["DeadCodeElimination", "remove_unused_bindings", "remove_unused_functions", "used_vars"]
