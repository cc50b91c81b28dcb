# CanonicalizeBindings: remove trivial bindings of one variable to another (lv1 = lv0) by using the
# original variable instead. Expects relax functions.
"""``relax.transform.CanonicalizeBindings()``: no variable is just another name for one.

Before::

    with R.dataflow():
        lv = R.call_tir(cls.relu, (x,), ...)
        lv1 = lv
        gv = lv1
        R.output(gv)
    return gv

After::

    with R.dataflow():
        gv = R.call_tir(cls.relu, (x,), ...)
        R.output(gv)
    return gv

A dataflow variable cannot be used after its block, so when an output variable is bound to one
(``gv = lv``), ``lv``'s own binding is made to define ``gv`` instead.
"""
from __future__ import annotations

from ...ir.transform import Pass, PassInfo
from ..expr import DataflowBlock, DataflowVar, Function, Var, VarBinding
from ..functor import ExprMutator


def _output_renames(func: Function) -> dict:
    """{dataflow var: the output var bound to it} for the ``gv = lv`` bindings of each block."""
    renames: dict = {}
    for block in func.body.blocks:
        if not isinstance(block, DataflowBlock):
            continue
        defined = {b.var for b in block.bindings}
        origin: dict = {}
        for b in block.bindings:
            if not isinstance(b.value, Var):
                continue
            source = origin[b.var] = origin.get(b.value, b.value)
            if (not isinstance(b.var, DataflowVar) and isinstance(source, DataflowVar)
                    and source in defined and source not in renames):
                renames[source] = b.var
    return renames


class _Canonicalizer(ExprMutator):
    def __init__(self, renames: dict):
        super().__init__()
        self.renames = renames
        self.var_remap_.update(renames)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self.visit_expr(binding.value)
        if isinstance(value, Var):
            if value is not binding.var:
                self.var_remap_[binding.var] = value
            return
        if binding.var in self.renames:
            self.builder_.emit_normalized(VarBinding(self.renames[binding.var], value))
            return
        self.re_emit_binding(binding, value)


class CanonicalizeBindings(Pass):
    def __init__(self):
        self.info = PassInfo(0, "CanonicalizeBindings")

    def transform_module(self, mod, ctx):
        out = type(mod)(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                out[gv] = _Canonicalizer(_output_renames(func)).visit_expr(func)
        return out
