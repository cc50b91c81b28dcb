"""Reductions over axes: sum, max, min and mean, with ``axis`` and ``keepdims`` as in numpy.

The reduction stage is named after its input, ``<data name>_red``, as in TVM's operator library.
"""
from __future__ import annotations

from .. import te
from ..tir import dtype as dt
from ..tir.expr import Cast, const
from .utils import check_float, check_tensor, compute, normalize_axes, product


def _reduce(combiner: str, x, axis, keepdims: bool, op: str) -> te.Tensor:
    check_tensor(x, op)
    if dt.is_bool(x.dtype):
        raise TypeError(f"topi.{op}: data {x.name} must be numeric, got bool")
    axes = normalize_axes(axis, x.ndim, op, x.shape)
    if not axes:
        raise ValueError(f"topi.{op}: axis {axis!r} names no axis to reduce")
    rvs = [te.reduce_axis(x.shape[a], name=f"k{n}") for n, a in enumerate(axes)]
    kept = [d for d in range(x.ndim) if d not in axes]
    shape = [const(1, x.shape[d].dtype) if d in axes else x.shape[d]
             for d in range(x.ndim) if keepdims or d not in axes]
    reducer = getattr(te, combiner)

    def element(*indices):
        outer = iter(indices if not keepdims else [indices[d] for d in kept])
        reduced = iter(rvs)
        source = tuple(next(reduced) if d in axes else next(outer) for d in range(x.ndim))
        return reducer(x[source], axis=rvs)

    return compute(shape, element, f"{x.name}_red")


def sum(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:  # noqa: A001 - numpy's name
    """The sum over ``axis`` (an int, a tuple, or None for every axis)."""
    return _reduce("sum", x, axis, keepdims, "sum")


def max(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """The maximum over ``axis`` (an int, a tuple, or None for every axis)."""
    return _reduce("max", x, axis, keepdims, "max")


def min(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:  # noqa: A001
    """The minimum over ``axis`` (an int, a tuple, or None for every axis)."""
    return _reduce("min", x, axis, keepdims, "min")


def mean(x: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """The mean over ``axis``: a sum stage, then "T_divide" by the number of elements reduced."""
    check_tensor(x, "mean")
    check_float(x, "mean")
    total = _reduce("sum", x, axis, keepdims, "mean")
    count = product([x.shape[a] for a in normalize_axes(axis, x.ndim, "mean", x.shape)])
    divisor = Cast(x.dtype, count) if not hasattr(count, "value") else const(count.value, x.dtype)
    return compute(total.shape, lambda *i: total[i] / divisor, "T_divide")


__all__ = ["max", "mean", "min", "sum"]
