# FoldConstant: evaluate R.call_tir calls and high-level op calls whose tensor arguments are all
# constants, at compile time, and replace them by the resulting Constant. Expects relax functions.
"""``relax.transform.FoldConstant()``: compute what does not depend on the inputs.

Before (``c0``, ``c1`` are constants)::

    lv = R.call_tir(cls.add, (c0, c1), out_sinfo=R.Tensor((2, 2), "float32"))
    gv = R.call_tir(cls.relu, (lv, x), out_sinfo=...)

After::

    lv = R.const(...)                                # the sum, computed now
    gv = R.call_tir(cls.relu, (R.const(...), x), out_sinfo=...)

A PrimFunc runs on the reference interpreter (``mlc_lab.build(prim, target="python")``); a
high-level op (``R.add`` ...) is legalized on the side and run the same way. Uses of a variable
bound to a constant are replaced by the constant, so folding goes on down the chain; the binding
itself stays until DeadCodeElimination removes it. Outputs of symbolic shape are not folded.
"""
from __future__ import annotations

import numpy as np

from ...driver import build
from ...ir.transform import Pass, PassInfo
from ...tir.function import PrimFunc
from ..analysis import is_call_tir
from ..block_builder import BlockBuilder
from ..expr import Call, Constant, Function, Op, PrimValue, ShapeExpr, Tuple, VarBinding
from ..functor import ExprMutator
from ..op.legalize import legalize_rule
from ..struct_info import TensorStructInfo


def _all_constant(args) -> bool:
    items = args.elements if isinstance(args, Tuple) else args
    return all(isinstance(a, Constant) or (isinstance(a, Tuple) and _all_constant(a))
               or isinstance(a, (ShapeExpr, PrimValue)) for a in items) and any(
        isinstance(a, (Constant, Tuple)) for a in items)


def run_prim_func(prim: PrimFunc, inputs: list, out_sinfo: tuple) -> list:
    """Run ``prim`` on the reference interpreter; returns the output arrays."""
    outs = [np.zeros(s.static_shape, dtype=s.dtype) for s in out_sinfo]
    build(prim, target="python")(*inputs, *outs)
    return outs


class _Folder(ExprMutator):
    def __init__(self, mod):
        super().__init__(mod)
        self.mod = mod

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self.visit_expr(binding.value)
        self.re_emit_binding(binding, value)
        if isinstance(value, Constant):
            self.var_remap_[binding.var] = value

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if not isinstance(call.op, Op):
            return call
        if is_call_tir(call):
            return self._fold_call_tir(self.mod, call)
        rule = legalize_rule(call.op)
        if rule is None or not _all_constant(call.args):
            return call
        side = BlockBuilder()
        lowered = rule(side, call)
        return self._fold_call_tir(side.get(), lowered) if is_call_tir(lowered) else call

    @staticmethod
    def _fold_call_tir(mod, call: Call):
        gv, args = call.args[0], call.args[1]
        if len(call.args) > 2 or not _all_constant(args) or gv not in mod:
            return call
        if not all(isinstance(s, TensorStructInfo) and s.static_shape is not None for s in call.sinfo_args):
            return call
        outs = run_prim_func(mod[gv], [a.data for a in args.elements], call.sinfo_args)
        consts = [Constant(o) for o in outs]
        return consts[0] if len(consts) == 1 else Tuple(consts)


class FoldConstant(Pass):
    def __init__(self):
        self.info = PassInfo(0, "FoldConstant")

    def transform_module(self, mod, ctx):
        folder = _Folder(mod)
        out = type(mod)(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                out[gv] = folder.visit_expr(func)
        return out
