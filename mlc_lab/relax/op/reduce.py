"""Reductions over axes: sum, mean, max, min (``axis=None`` reduces every axis)."""
from __future__ import annotations

from ...tir.expr import IntImm
from ..expr import Call
from ..struct_info import TensorStructInfo
from .infer import check_arity, normalize_axes, tensor_arg, unknown_tensor
from .registry import make_call, register_op


def _infer_reduce(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    axis, keepdims = call.attrs.axis, call.attrs.keepdims
    if x.ndim < 0:
        return unknown_tensor(x.dtype)
    axes = normalize_axes(call, axis, x.ndim)
    out_ndim = x.ndim if keepdims else x.ndim - len(axes)
    if x.shape is None:
        return unknown_tensor(x.dtype, out_ndim)
    if keepdims:
        shape = tuple(IntImm("int64", 1) if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return TensorStructInfo(shape, x.dtype)


for _name in ("sum", "mean", "max", "min"):
    register_op(f"relax.{_name}", _infer_reduce)


def _reduce(name: str, x, axis, keepdims: bool) -> Call:
    if isinstance(axis, int):
        axis = (axis,)
    attrs = {"axis": tuple(axis) if axis is not None else None, "keepdims": bool(keepdims)}
    return make_call(f"relax.{name}", (x,), attrs)


def sum(x, axis=None, keepdims: bool = False) -> Call:  # noqa: A001 - the course-era name
    """The sum of ``x`` over ``axis`` (an int, a list of ints, or None for all axes)."""
    return _reduce("sum", x, axis, keepdims)


def mean(x, axis=None, keepdims: bool = False) -> Call:
    """The mean of ``x`` over ``axis`` (an int, a list of ints, or None for all axes)."""
    return _reduce("mean", x, axis, keepdims)


def max(x, axis=None, keepdims: bool = False) -> Call:  # noqa: A001
    """The maximum of ``x`` over ``axis``."""
    return _reduce("max", x, axis, keepdims)


def min(x, axis=None, keepdims: bool = False) -> Call:  # noqa: A001
    """The minimum of ``x`` over ``axis``."""
    return _reduce("min", x, axis, keepdims)
