"""Elementwise unary math: exp, log, sqrt, rsqrt, sigmoid, tanh, erf, sin, cos, square, negative
(``nn.relu`` and the activations are in nn.py)."""
from __future__ import annotations

from ..expr import Call
from ..struct_info import TensorStructInfo
from .infer import check_arity, require_float, tensor_arg
from .registry import make_call, register_op


def infer_unary(call: Call) -> TensorStructInfo:
    """Same shape and dtype as the input."""
    check_arity(call, ("x",))
    return tensor_arg(call, 0, "x")


def infer_float_unary(call: Call) -> TensorStructInfo:
    """Same shape and dtype as the input, which must be a float tensor."""
    sinfo = infer_unary(call)
    require_float(call, "x", sinfo)
    return sinfo


for _name in ("exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "sin", "cos"):
    register_op(f"relax.{_name}", infer_float_unary)
register_op("relax.negative", infer_unary)
register_op("relax.square", infer_unary)


def exp(x) -> Call:
    """``e ** x`` elementwise (float tensors)."""
    return make_call("relax.exp", (x,))


def log(x) -> Call:
    """Natural logarithm elementwise (float tensors)."""
    return make_call("relax.log", (x,))


def sqrt(x) -> Call:
    """Square root elementwise (float tensors)."""
    return make_call("relax.sqrt", (x,))


def sigmoid(x) -> Call:
    """``1 / (1 + exp(-x))`` elementwise (float tensors)."""
    return make_call("relax.sigmoid", (x,))


def tanh(x) -> Call:
    """Hyperbolic tangent elementwise (float tensors)."""
    return make_call("relax.tanh", (x,))


def negative(x) -> Call:
    """``-x`` elementwise."""
    return make_call("relax.negative", (x,))


def rsqrt(x) -> Call:
    """``1 / sqrt(x)`` elementwise (float tensors)."""
    return make_call("relax.rsqrt", (x,))


def erf(x) -> Call:
    """The Gauss error function elementwise (float tensors); the heart of GELU."""
    return make_call("relax.erf", (x,))


def sin(x) -> Call:
    """Sine elementwise (float tensors)."""
    return make_call("relax.sin", (x,))


def cos(x) -> Call:
    """Cosine elementwise (float tensors)."""
    return make_call("relax.cos", (x,))


def square(x) -> Call:
    """``x * x`` elementwise."""
    return make_call("relax.square", (x,))
