"""Comparisons (bool results), selection and casts: the pieces of masks.

    >>> from mlc_lab import te, topi
    >>> x = te.placeholder((2, 3), name="x"); y = te.placeholder((3,), name="y")
    >>> mask = topi.less(x, y)
    >>> mask.dtype, [int(d) for d in mask.shape]
    ('bool', [2, 3])
    >>> topi.where(mask, x, y).dtype
    'float32'
"""
from __future__ import annotations

from .. import te
from ..tir import dtype as dt
from ..tir.expr import EQ, GE, GT, LE, LT, NE, Select
from .elemwise import _binary, broadcast_indices, broadcast_shape
from .utils import check_tensor, compute


def _compare(op: str, node):
    def compare(lhs, rhs) -> te.Tensor:
        return _binary(op, node, lhs, rhs)
    compare.__name__ = op
    compare.__doc__ = f"Elementwise ``{op}`` with broadcasting; a bool tensor (stage \"T_{op}\")."
    return compare


equal = _compare("equal", EQ)
not_equal = _compare("not_equal", NE)
less = _compare("less", LT)
less_equal = _compare("less_equal", LE)
greater = _compare("greater", GT)
greater_equal = _compare("greater_equal", GE)


def where(condition: te.Tensor, x: te.Tensor, y: te.Tensor) -> te.Tensor:
    """``x`` where ``condition`` holds, else ``y``; the three shapes broadcast (stage "T_where")."""
    for t, label in ((condition, "condition"), (x, "x"), (y, "y")):
        check_tensor(t, "where", label)
    if not dt.is_bool(condition.dtype):
        raise TypeError(f"topi.where: condition {condition.name} must be bool, got "
                        f"{condition.dtype}")
    if x.dtype != y.dtype:
        raise TypeError(f"topi.where: x {x.name} is {x.dtype} but y {y.name} is {y.dtype}")
    shape = broadcast_shape(broadcast_shape(condition.shape, x.shape, "where"), y.shape, "where")

    def element(*i):
        return Select(condition[broadcast_indices(condition.shape, i)],
                      x[broadcast_indices(x.shape, i)], y[broadcast_indices(y.shape, i)])

    return compute(shape, element, "T_where")


def cast(x: te.Tensor, dtype: str) -> te.Tensor:
    """``x`` converted elementwise to ``dtype`` (stage "T_cast")."""
    check_tensor(x, "cast")
    dtype = dt.check_dtype(dtype)
    return compute(x.shape, lambda *i: x[i].astype(dtype), "T_cast")


__all__ = ["cast", "equal", "greater", "greater_equal", "less", "less_equal", "not_equal", "where"]
