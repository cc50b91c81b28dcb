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
from ..analysis import References, remove_unused_bindings, used_vars  # the last two re-exported
from ..expr import ExternFunc, Function


def remove_unused_functions(mod: IRModule, entry_functions=()) -> IRModule:
    """``mod`` without the functions that no entry (see above) reaches through references."""
    funcs = mod.functions
    if not any(isinstance(f, Function) for f in funcs.values()):
        return mod
    work = [gv for gv, f in funcs.items() if gv.name_hint in entry_functions or gv.name_hint == "main"
            or (isinstance(f, Function) and "global_symbol" in f.attrs)]
    reached = set(work)
    by_name = {gv.name_hint: gv for gv in funcs}
    while work:
        func = funcs[work.pop()]
        if not isinstance(func, Function):
            continue
        refs = References(func)
        # R.call_dps_packed("f", ...) runs the module's own function f when there is one.
        named = [by_name[c.args[0].global_symbol] for c in refs.calls_to("relax.call_dps_packed")
                 if isinstance(c.args[0], ExternFunc) and c.args[0].global_symbol in by_name]
        for gv in list(refs.global_vars) + named:
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
