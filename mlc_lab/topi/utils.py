"""Helpers shared by the operator families: argument checks, shape arithmetic, named computes."""
from __future__ import annotations

import inspect
from typing import Callable, Optional, Sequence

import numpy as np

from .. import te
from ..arith import can_prove, simplify
from ..tir import dtype as dt
from ..tir.expr import IntImm, PrimExpr, const, convert


def check_tensor(x, op: str, arg: str = "data") -> te.Tensor:
    if not isinstance(x, te.Tensor):
        raise TypeError(f"topi.{op}: {arg} must be a te.Tensor, got {type(x).__name__}: {x!r}")
    return x


def check_float(x: te.Tensor, op: str, arg: str = "data") -> None:
    if not dt.is_float(x.dtype):
        raise TypeError(f"topi.{op}: {arg} {x.name} must have a float dtype, got {x.dtype}")


def check_ndim(x: te.Tensor, ndim: int, op: str, arg: str, layout: str = "") -> None:
    if x.ndim != ndim:
        layout = f" ({layout})" if layout else ""
        raise ValueError(f"topi.{op}: {arg} {x.name} must be {ndim}-D{layout}, got shape "
                         f"{shape_text(x.shape)}")


def check_operands(op: str, a: te.Tensor, a_arg: str, a_layout: str, b: te.Tensor, b_arg: str,
                   b_layout: str, shared: str, expected: str) -> None:
    """Checks two 2-D or 4-D operands that share their dimension 1 (a matmul's ``in_dim``, a
    convolution's ``in_channel``): both tensors, of the rank their layouts name, of one dtype,
    and the shared dimension equal. ``expected`` ends the message when it differs."""
    check_tensor(a, op, a_arg)
    check_tensor(b, op, b_arg)
    check_ndim(a, a_layout.count(",") + 1, op, a_arg, a_layout)
    check_ndim(b, b_layout.count(",") + 1, op, b_arg, b_layout)
    if a.dtype != b.dtype:
        raise TypeError(f"topi.{op}: {a_arg} {a.name} is {a.dtype} but {b_arg} {b.name} is {b.dtype}")
    if not same_dim(a.shape[1], b.shape[1]):
        raise ValueError(f"topi.{op}: {shared} differs: {a_arg} {a.name} has shape "
                         f"{shape_text(a.shape)}, {b_arg} {b.name} has shape "
                         f"{shape_text(b.shape)}{expected}")


def shape_text(shape: Sequence) -> str:
    items = [str(s.value) if isinstance(s, IntImm) else str(s) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def static_value(e) -> Optional[int]:
    """The value of a constant dimension, or None for a symbolic one."""
    if isinstance(e, (int, np.integer)):
        return int(e)
    return e.value if isinstance(e, IntImm) else None


def is_one(e) -> bool:
    return static_value(e) == 1


def same_dim(a, b) -> bool:
    """True when the two dimensions are provably equal."""
    va, vb = static_value(a), static_value(b)
    if va is not None and vb is not None:
        return va == vb
    return a is b or can_prove(convert(a) == convert(b))


def product(dims: Sequence) -> PrimExpr:
    result: PrimExpr = const(1)
    for d in dims:
        result = simplify(result * d)
    return result


def normalize_axis(axis, ndim: int, op: str, shape: Sequence) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"topi.{op}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"topi.{op}: axis {axis} is out of range for a {ndim}-D tensor of shape "
                         f"{shape_text(shape)}")
    return int(axis) % ndim


def normalize_axes(axis, ndim: int, op: str, shape: Sequence) -> list[int]:
    """``None`` (every axis), an int, or a sequence of distinct ints -> sorted axes."""
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    result = sorted(normalize_axis(a, ndim, op, shape) for a in axes)
    if len(set(result)) != len(result):
        raise ValueError(f"topi.{op}: axis {axis!r} repeats an axis")
    return result


def int_tuple(value, n: int, op: str, name: str, minimum: int = 1) -> tuple:
    """An int, or a sequence of ``n`` ints, as an ``n``-tuple of ints >= ``minimum``."""
    items = [value] * n if isinstance(value, (int, np.integer)) else list(value) \
        if isinstance(value, (tuple, list)) else None
    if items is None or len(items) != n or \
            not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
        raise TypeError(f"topi.{op}: {name} must be an int or {n} ints, got {value!r}")
    if any(v < minimum for v in items):
        raise ValueError(f"topi.{op}: every entry of {name} must be >= {minimum}, got {value!r}")
    return tuple(int(v) for v in items)


def padding_2d(padding, op: str) -> tuple:
    """TVM's padding forms: p, (p_h, p_w) or (top, left, bottom, right) -> (top, left, bottom, right)."""
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        return int_tuple(padding, 4, op, "padding", minimum=0)
    pad_h, pad_w = int_tuple(padding, 2, op, "padding", minimum=0)
    return pad_h, pad_w, pad_h, pad_w


def lowest_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (the most negative finite value for floats)."""
    info = np.finfo(dt.to_numpy(dtype)) if dt.is_float(dtype) else np.iinfo(dt.to_numpy(dtype))
    return const(info.min.item(), dtype)


def compute(shape: Sequence, fcompute: Callable, name: str, axis_prefix: str = "ax") -> te.Tensor:
    """``te.compute`` with axes named ``ax0, ax1, ...`` (as TVM's operator library names them)
    and every index expression simplified against the axes' ranges."""
    names = [f"{axis_prefix}{d}" for d in range(len(shape))]

    def body(*axes):
        return fcompute(*axes)

    body.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return te.compute(tuple(shape), body, name=name)


def simplify_index(e, axes) -> PrimExpr:
    """Simplify ``e`` knowing the ranges of the compute ``axes`` it uses."""
    ranges = {a: a.dom for a in axes if getattr(a, "dom", None) is not None}
    return simplify(convert(e), ranges)