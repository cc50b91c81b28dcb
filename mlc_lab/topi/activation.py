"""Transformer activations written as one elementwise stage each: gelu (erf form), gelu_tanh
(the tanh approximation) and silu. float16 inputs compute in float32 and round once.

    >>> from mlc_lab import te, topi
    >>> x = te.placeholder((4, 8), name="x")
    >>> [topi.gelu(x).name, topi.gelu_tanh(x).name, topi.silu(x).name]
    ['T_gelu', 'T_gelu_tanh', 'T_silu']
"""
from __future__ import annotations

import math

from .. import te
from ..tir import dtype as dt
from ..tir.expr import call_intrin, const
from .utils import check_float, check_tensor, compute


def _activation(op: str, x: te.Tensor, formula) -> te.Tensor:
    check_tensor(x, op)
    check_float(x, op)
    acc = x.dtype if dt.bits(x.dtype) >= 32 else "float32"

    def element(*i):
        return formula(x[i].astype(acc), acc).astype(x.dtype)

    return compute(x.shape, element, f"T_{op}")


def gelu(x: te.Tensor) -> te.Tensor:
    """``0.5 * x * (1 + erf(x / sqrt(2)))`` elementwise (stage "T_gelu")."""
    return _activation("gelu", x, lambda v, t: v * (const(0.5, t) + call_intrin(
        "erf", v * const(math.sqrt(0.5), t)) * const(0.5, t)))


def gelu_tanh(x: te.Tensor) -> te.Tensor:
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` elementwise (stage
    "T_gelu_tanh")."""
    def formula(v, t):
        inner = const(math.sqrt(2.0 / math.pi), t) * (v + const(0.044715, t) * v * v * v)
        return const(0.5, t) * v * (const(1.0, t) + call_intrin("tanh", inner))
    return _activation("gelu_tanh", x, formula)


def silu(x: te.Tensor) -> te.Tensor:
    """``x * sigmoid(x)`` elementwise (stage "T_silu")."""
    return _activation("silu", x, lambda v, t: v * call_intrin("sigmoid", v))


__all__ = ["gelu", "gelu_tanh", "silu"]
