# QuantizeWeights: weight-only group quantization of a model's matmuls whose weights are constants
# (after BindParams). Expects relax functions with R.matmul(x, W) where W is a bound float32 constant.
"""``relax.transform.QuantizeWeights(bits=4, group_size=32)``: int4 / int8 weight-only matmuls.

Every ``R.matmul(x, W)`` whose weight is a 2-D float32 constant (after ``BindParams``), or the
transpose ``R.permute_dims`` of one (a ``Linear`` layer's ``x @ W.T``), becomes a call of one
kernel, ``topi.quantize.quantized_matmul``, on ``x`` and two new constants: the packed integers
and the group scales (the format is documented in ``mlc_lab.topi.quantize``). The float weight
is dropped; the kernel decodes the weights as it multiplies, so no float copy is ever stored.
MLC-LLM, which runs this scheme on TVM, calls it group quantization (``q4f32_1``/``q4f16_1``);
it is weight-only: activations stay float32.

Before (weights bound)::

    lv = R.matmul(x, metadata["relax.expr.Constant"][0])          # (64, 256) float32: 64 KiB

After (``bits=4``: 8 KiB of words and 2 KiB of scales)::

    lv = R.call_tir(cls.quantized_matmul_int4, (x, metadata["relax.expr.Constant"][1],
                    metadata["relax.expr.Constant"][2]), out_sinfo=R.Tensor((1, 256), "float32"))

Accuracy: each weight is off by at most half its group's step, ``s / 2`` with
``s = max|W[group, j]| / 7`` (int4) or ``/ 127`` (int8). An output ``y_j`` is therefore off by
at most ``sum_k |x_k| s_{g(k), j} / 2`` (``output_error_bound``); with rounding errors that
are independent, the typical error is about ``sqrt(k) * rms(x) * s / sqrt(12)``, i.e. for
Gaussian weights a relative error of roughly 8% (int4) and 0.5% (int8) of the output's size.

Options: ``bits`` 4 or 8; ``group_size`` rows of W per scale (dividing k; a multiple of 8 for
int4); ``scale_dtype`` "float32" or "float16" (half the scale bytes); ``min_elements``: smaller
weights stay float. A weight whose shape does not fit raises QuantizeError naming the binding and
the rule; ``skip`` (names of the matmul bindings to keep float) works around it.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...ir.transform import Pass, PassInfo
from ...topi.quantize import QuantizeError, quantize, quantized_matmul
from ..expr import Call, Constant, Function, Op
from ..functor import ExprMutator
from ..struct_info import TensorStructInfo
from .dead_code_elimination import DeadCodeElimination

__all__ = ["QuantizeError", "QuantizeWeights", "output_error_bound"]


class _Quantizer(ExprMutator):
    def __init__(self, mod, options: "QuantizeWeights", func_name: str):
        super().__init__(mod)
        self.options, self.func_name = options, func_name
        self.binding_name = "?"
        self.count = 0

    def visit_var_binding_(self, binding):
        self.binding_name = binding.var.name_hint
        return super().visit_var_binding_(binding)

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if not isinstance(call.op, Op) or call.op.name != "relax.matmul" or len(call.args) != 2:
            return call
        x, weight = call.args[0], self._constant_weight(call.args[1])
        sinfo = x.struct_info
        if weight is None or not isinstance(sinfo, TensorStructInfo) or sinfo.dtype != "float32" \
                or sinfo.ndim < 1 or weight.ndim != 2 or weight.dtype != np.float32:
            return call
        options = self.options
        if self.binding_name in options.skip or weight.size < options.min_elements:
            return call
        name = f"the weight of {self.binding_name} = R.matmul(...) in {self.func_name}"
        packed, scale = quantize(weight, options.bits, options.group_size, options.scale_dtype, name)
        self.count += 1
        return self.builder_.call_te(quantized_matmul, x, Constant(packed), Constant(scale),
                                     options.bits, primfunc_name_hint=f"quantized_matmul_int{options.bits}")

    def _constant_weight(self, expr) -> Optional[np.ndarray]:
        """The weight's array when ``expr`` is a constant, or the transpose of one (directly or
        through a binding); else None."""
        value = self.lookup_binding(expr) if not isinstance(expr, (Constant, Call)) else expr
        if isinstance(value, Constant):
            return value.data
        if isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == "relax.permute_dims":
            inner = value.args[0]
            inner = self.lookup_binding(inner) if not isinstance(inner, Constant) else inner
            axes = value.attrs.get("axes") if hasattr(value.attrs, "get") else None
            if isinstance(inner, Constant) and inner.data.ndim == 2 and axes in (None, (1, 0), [1, 0]):
                return np.ascontiguousarray(inner.data.T)
        return None


class QuantizeWeights(Pass):
    """See the module docstring. After the pass, ``quantized`` holds how many matmuls it
    rewrote."""

    def __init__(self, bits: int = 4, group_size: int = 32, scale_dtype: str = "float32",
                 min_elements: int = 0, skip=()):
        if bits not in (4, 8):
            raise QuantizeError(f"QuantizeWeights: bits must be 4 or 8, got {bits!r}")
        if scale_dtype not in ("float32", "float16"):
            raise QuantizeError(f"QuantizeWeights: scale_dtype must be float32 or float16, got "
                                f"{scale_dtype!r}")
        self.bits, self.group_size, self.scale_dtype = bits, group_size, scale_dtype
        self.min_elements, self.skip = min_elements, frozenset(skip)
        self.quantized = 0
        self.info = PassInfo(0, "QuantizeWeights")

    def transform_module(self, mod, ctx):
        out, self.quantized = mod, 0
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                mutator = _Quantizer(out, self, gv.name_hint)
                mutator.builder_.update_func(gv, mutator.visit_expr(func))
                out, self.quantized = mutator.builder_.get(), self.quantized + mutator.count
        return DeadCodeElimination()(out) if self.quantized else out


def output_error_bound(x: np.ndarray, scale: np.ndarray, group_size: int) -> np.ndarray:
    """The largest possible ``|x @ W - x @ dequantize(W)|`` per output (shape of ``x @ W``): each
    weight is off by at most half a step, ``s / 2``."""
    steps = np.repeat(scale.astype("float64"), group_size, axis=0) / 2
    return np.abs(x.astype("float64")) @ steps
