"""Elementwise operators: binary arithmetic with numpy broadcasting, and unary activations.

Binary operators take two tensors, or a tensor and a Python number (which takes the tensor's
dtype); both tensors must share one dtype. Shapes broadcast as in numpy: dimensions line up from
the right, and a dimension of 1 stretches to match the other side.
"""
from __future__ import annotations

from itertools import zip_longest
from typing import Callable

from .. import te
from ..tir import dtype as dt
from ..tir.expr import Div, PrimExpr, call_intrin, const
from .utils import check_float, check_tensor, compute, is_one, same_dim, shape_text


def broadcast_shape(lhs_shape, rhs_shape, op: str = "broadcast") -> tuple:
    """The numpy broadcast of two shapes; a symbolic dimension only meets itself or 1."""
    out = []
    for a, b in zip_longest(reversed(tuple(lhs_shape)), reversed(tuple(rhs_shape))):
        if a is None or (b is not None and is_one(a)):
            out.append(b)
        elif b is None or is_one(b) or same_dim(a, b):
            out.append(a)
        else:
            raise ValueError(f"topi.{op}: shapes {shape_text(lhs_shape)} and {shape_text(rhs_shape)} "
                             f"do not broadcast: dimension {a} meets {b} (they must be equal, or "
                             "one of them 1)")
    return tuple(reversed(out))


def broadcast_indices(shape, out_indices) -> tuple:
    """Indices into a tensor of ``shape`` broadcast to the output indexed by ``out_indices``."""
    offset = len(out_indices) - len(shape)
    return tuple(const(0, s.dtype) if is_one(s) else out_indices[offset + d]
                 for d, s in enumerate(shape))


def _binary(op: str, fcombine: Callable, lhs, rhs) -> te.Tensor:
    name = f"T_{op}"
    lhs_is_tensor, rhs_is_tensor = isinstance(lhs, te.Tensor), isinstance(rhs, te.Tensor)
    if not (lhs_is_tensor or rhs_is_tensor):
        raise TypeError(f"topi.{op}: at least one operand must be a te.Tensor, got "
                        f"{type(lhs).__name__} and {type(rhs).__name__}")
    if lhs_is_tensor and rhs_is_tensor:
        if lhs.dtype != rhs.dtype:
            raise TypeError(f"topi.{op}: operand dtypes differ: {lhs.name} is {lhs.dtype} with shape "
                            f"{shape_text(lhs.shape)}, {rhs.name} is {rhs.dtype} with shape "
                            f"{shape_text(rhs.shape)}; cast one of them first")
        shape = broadcast_shape(lhs.shape, rhs.shape, op)
        return compute(shape, lambda *i: fcombine(lhs[broadcast_indices(lhs.shape, i)],
                                                  rhs[broadcast_indices(rhs.shape, i)]), name)
    tensor = lhs if lhs_is_tensor else rhs
    scalar = _scalar(rhs if lhs_is_tensor else lhs, tensor.dtype, op)
    if lhs_is_tensor:
        return compute(tensor.shape, lambda *i: fcombine(tensor[i], scalar), name)
    return compute(tensor.shape, lambda *i: fcombine(scalar, tensor[i]), name)


def _scalar(value, dtype: str, op: str) -> PrimExpr:
    if isinstance(value, PrimExpr):
        if value.dtype != dtype:
            raise TypeError(f"topi.{op}: the scalar {value} is {value.dtype} but the tensor is {dtype}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"topi.{op}: operands must be te Tensors or numbers, got "
                        f"{type(value).__name__}: {value!r}")
    try:
        return const(value, dtype)
    except TypeError as err:
        raise TypeError(f"topi.{op}: cannot use {value!r} with a {dtype} tensor: {err}") from None


def add(lhs, rhs) -> te.Tensor:
    """``lhs + rhs`` with broadcasting (stage "T_add")."""
    return _binary("add", lambda a, b: a + b, lhs, rhs)


def subtract(lhs, rhs) -> te.Tensor:
    """``lhs - rhs`` with broadcasting (stage "T_subtract")."""
    return _binary("subtract", lambda a, b: a - b, lhs, rhs)


def multiply(lhs, rhs) -> te.Tensor:
    """``lhs * rhs`` with broadcasting (stage "T_multiply")."""
    return _binary("multiply", lambda a, b: a * b, lhs, rhs)


def divide(lhs, rhs) -> te.Tensor:
    """``lhs / rhs`` with broadcasting (stage "T_divide"); integers divide truncating, as in C."""
    return _binary("divide", Div, lhs, rhs)


def maximum(lhs, rhs) -> te.Tensor:
    """Elementwise maximum with broadcasting (stage "T_maximum")."""
    return _binary("maximum", te.max, lhs, rhs)


def minimum(lhs, rhs) -> te.Tensor:
    """Elementwise minimum with broadcasting (stage "T_minimum")."""
    return _binary("minimum", te.min, lhs, rhs)


def _unary(op: str, x, fcompute: Callable, float_only: bool = True) -> te.Tensor:
    check_tensor(x, op)
    if float_only:
        check_float(x, op)
    elif dt.is_bool(x.dtype):
        raise TypeError(f"topi.{op}: data {x.name} must be numeric, got bool")
    return compute(x.shape, lambda *i: fcompute(x[i]), f"T_{op}")


def relu(x: te.Tensor) -> te.Tensor:
    """``max(x, 0)`` elementwise (stage "T_relu"); floats or integers."""
    return _unary("relu", x, lambda v: te.max(v, const(0, x.dtype)), float_only=False)


def negative(x: te.Tensor) -> te.Tensor:
    """``-x`` elementwise (stage "T_negative")."""
    return _unary("negative", x, lambda v: -v, float_only=False)


def sigmoid(x: te.Tensor) -> te.Tensor:
    """``1 / (1 + exp(-x))`` elementwise (stage "T_sigmoid")."""
    return _unary("sigmoid", x, te.sigmoid)


def tanh(x: te.Tensor) -> te.Tensor:
    """Hyperbolic tangent elementwise (stage "T_tanh")."""
    return _unary("tanh", x, te.tanh)


def exp(x: te.Tensor) -> te.Tensor:
    """``e ** x`` elementwise (stage "T_exp")."""
    return _unary("exp", x, te.exp)


def log(x: te.Tensor) -> te.Tensor:
    """Natural logarithm elementwise (stage "T_log")."""
    return _unary("log", x, te.log)


def sqrt(x: te.Tensor) -> te.Tensor:
    """Square root elementwise (stage "T_sqrt")."""
    return _unary("sqrt", x, te.sqrt)


def erf(x: te.Tensor) -> te.Tensor:
    """The Gauss error function elementwise (stage "T_erf")."""
    return _unary("erf", x, lambda v: call_intrin("erf", v))


def rsqrt(x: te.Tensor) -> te.Tensor:
    """``1 / sqrt(x)`` elementwise (stage "T_rsqrt")."""
    return _unary("rsqrt", x, lambda v: call_intrin("rsqrt", v))


def sin(x: te.Tensor) -> te.Tensor:
    """Sine elementwise (stage "T_sin")."""
    return _unary("sin", x, lambda v: call_intrin("sin", v))


def cos(x: te.Tensor) -> te.Tensor:
    """Cosine elementwise (stage "T_cos")."""
    return _unary("cos", x, lambda v: call_intrin("cos", v))


def square(x: te.Tensor) -> te.Tensor:
    """``x * x`` elementwise (stage "T_square")."""
    return _unary("square", x, lambda v: v * v, float_only=False)


def power(lhs, rhs) -> te.Tensor:
    """``lhs ** rhs`` elementwise with broadcasting, for floats (stage "T_power")."""
    for operand in (lhs, rhs):
        if isinstance(operand, te.Tensor):
            check_float(operand, "power")
    return _binary("power", lambda a, b: call_intrin("pow", a, b), lhs, rhs)


__all__ = ["add", "broadcast_shape", "cos", "divide", "erf", "exp", "log", "maximum", "minimum",
           "multiply", "negative", "power", "relu", "rsqrt", "sigmoid", "sin", "sqrt", "square",
           "subtract", "tanh"]
