"""Elementwise binary ops with numpy broadcasting: add, subtract, multiply, divide, power,
maximum, minimum; comparisons (equal, not_equal, less, less_equal, greater, greater_equal) whose
results are bool tensors; and ``ewise_fma`` (x1 * x2 + x3 on equal shapes), the target of the
course's fusion rewrite."""
from __future__ import annotations

from ..expr import Call
from ..struct_info import TensorStructInfo, dims_equal, shape_text
from .infer import (broadcast_shapes, check_arity, require_float, same_dtype, tensor_arg,
                    unknown_tensor, user_name)
from .registry import make_call, register_op


def _infer_broadcast(call: Call) -> TensorStructInfo:
    check_arity(call, ("x1", "x2"))
    a, b = tensor_arg(call, 0, "x1"), tensor_arg(call, 1, "x2")
    dtype = same_dtype(call, [("x1", a), ("x2", b)])
    if a.shape is None or b.shape is None:
        ndim = max(a.ndim, b.ndim) if a.ndim >= 0 and b.ndim >= 0 else -1
        return unknown_tensor(dtype, ndim)
    shape = broadcast_shapes(call, "x1", a.shape, "x2", b.shape)
    return TensorStructInfo(shape, dtype, max(a.ndim, b.ndim))


_ARITHMETIC = ("add", "subtract", "multiply", "divide", "power", "maximum", "minimum")
_COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def _infer_compare(call: Call) -> TensorStructInfo:
    sinfo = _infer_broadcast(call)
    return TensorStructInfo(sinfo.shape, "bool", sinfo.ndim)


def _infer_power(call: Call) -> TensorStructInfo:
    sinfo = _infer_broadcast(call)
    require_float(call, "x1", sinfo)
    return sinfo


for _name in _ARITHMETIC:
    register_op(f"relax.{_name}", _infer_power if _name == "power" else _infer_broadcast)
for _name in _COMPARISONS:
    register_op(f"relax.{_name}", _infer_compare)


def add(x1, x2) -> Call:
    """``x1 + x2`` elementwise, with numpy broadcasting."""
    return make_call("relax.add", (x1, x2))


def subtract(x1, x2) -> Call:
    """``x1 - x2`` elementwise, with numpy broadcasting."""
    return make_call("relax.subtract", (x1, x2))


def multiply(x1, x2) -> Call:
    """``x1 * x2`` elementwise, with numpy broadcasting."""
    return make_call("relax.multiply", (x1, x2))


def divide(x1, x2) -> Call:
    """``x1 / x2`` elementwise, with numpy broadcasting."""
    return make_call("relax.divide", (x1, x2))


def power(x1, x2) -> Call:
    """``x1 ** x2`` elementwise (float tensors), with numpy broadcasting."""
    return make_call("relax.power", (x1, x2))


def maximum(x1, x2) -> Call:
    """The larger of ``x1`` and ``x2`` elementwise, with numpy broadcasting."""
    return make_call("relax.maximum", (x1, x2))


def minimum(x1, x2) -> Call:
    """The smaller of ``x1`` and ``x2`` elementwise, with numpy broadcasting."""
    return make_call("relax.minimum", (x1, x2))


def equal(x1, x2) -> Call:
    """``x1 == x2`` elementwise (a bool tensor), with numpy broadcasting."""
    return make_call("relax.equal", (x1, x2))


def not_equal(x1, x2) -> Call:
    """``x1 != x2`` elementwise (a bool tensor), with numpy broadcasting."""
    return make_call("relax.not_equal", (x1, x2))


def less(x1, x2) -> Call:
    """``x1 < x2`` elementwise (a bool tensor), with numpy broadcasting."""
    return make_call("relax.less", (x1, x2))


def less_equal(x1, x2) -> Call:
    """``x1 <= x2`` elementwise (a bool tensor), with numpy broadcasting."""
    return make_call("relax.less_equal", (x1, x2))


def greater(x1, x2) -> Call:
    """``x1 > x2`` elementwise (a bool tensor), with numpy broadcasting."""
    return make_call("relax.greater", (x1, x2))


def greater_equal(x1, x2) -> Call:
    """``x1 >= x2`` elementwise (a bool tensor), with numpy broadcasting."""
    return make_call("relax.greater_equal", (x1, x2))


def _infer_fma(call: Call) -> TensorStructInfo:
    names = ("x1", "x2", "x3")
    check_arity(call, names)
    infos = [tensor_arg(call, i, n) for i, n in enumerate(names)]
    dtype = same_dtype(call, list(zip(names, infos)))
    first = infos[0]
    for name, sinfo in zip(names[1:], infos[1:]):
        if first.ndim >= 0 and sinfo.ndim >= 0 and first.ndim != sinfo.ndim:
            raise ValueError(f"{user_name(call)}: x1 {shape_text(first.shape)} and {name} "
                             f"{shape_text(sinfo.shape)} have different ranks (no broadcasting)")
        if first.shape is not None and sinfo.shape is not None:
            for axis, (d1, d2) in enumerate(zip(first.shape, sinfo.shape)):
                if dims_equal(d1, d2) is False:
                    raise ValueError(f"{user_name(call)}: x1 {shape_text(first.shape)} and {name} "
                                     f"{shape_text(sinfo.shape)} differ at axis {axis} "
                                     "(ewise_fma needs equal shapes)")
    return TensorStructInfo(first.shape, dtype, first.ndim)


register_op("relax.ewise_fma", _infer_fma)


def ewise_fma(x1, x2, x3) -> Call:
    """``x1 * x2 + x3`` elementwise on tensors of one shape."""
    return make_call("relax.ewise_fma", (x1, x2, x3))
