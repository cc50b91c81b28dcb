"""Indexing: ``take`` (gather along an axis: the embedding lookup) and ``strided_slice``; and the
dtype/selection ops ``astype`` and ``where``.

    >>> from mlc_lab import relax, tir
    >>> from mlc_lab.relax import op
    >>> n = tir.Var("n", "int64")
    >>> table = relax.Var("table", relax.TensorStructInfo((1000, 64), "float32"))
    >>> ids = relax.Var("ids", relax.TensorStructInfo((1, n), "int32"))
    >>> op.take(table, ids, axis=0).struct_info
    R.Tensor((1, n, 64), dtype="float32")
    >>> op.strided_slice(table, axes=[0], begin=[0], end=[n]).struct_info
    R.Tensor((T.min(T.max(n, 0), 1000), 64), dtype="float32")
    >>> op.strided_slice(table, axes=[0], begin=[0], end=[n], assume_inbound=True).struct_info
    R.Tensor((n, 64), dtype="float32")
"""
from __future__ import annotations

from ...tir import dtype as dt
from ...tir.expr import IntImm, PrimExpr
from ...topi.transform import slice_range
from ..expr import Call
from ..struct_info import TensorStructInfo, shape_text
from .infer import (broadcast_shapes, check_arity, normalize_axis, tensor_arg, unknown_tensor,
                    user_name)
from .registry import make_call, register_op


def _infer_take(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "indices"))
    x, indices = tensor_arg(call, 0, "x"), tensor_arg(call, 1, "indices")
    if not (dt.is_int(indices.dtype) or indices.dtype.startswith("uint")):
        raise TypeError(f"{user_name(call)}: indices must have an integer dtype, got {indices.dtype}")
    axis = call.attrs.axis
    if axis is None and x.ndim not in (-1, 1):
        raise ValueError(f"{user_name(call)}: without an axis, x must be 1-D; x is "
                         f"{shape_text(x.shape)} (pass axis=0 for an embedding lookup)")
    if x.ndim < 0 or indices.ndim < 0:
        return unknown_tensor(x.dtype)
    axis = normalize_axis(call, axis if axis is not None else 0, x.ndim, "x")
    if x.shape is None or indices.shape is None:
        return unknown_tensor(x.dtype, x.ndim - 1 + indices.ndim)
    return TensorStructInfo(x.shape[:axis] + indices.shape + x.shape[axis + 1:], x.dtype)


register_op("relax.take", _infer_take)


def take(x, indices, axis=None, mode: str = "fast") -> Call:
    """The entries of ``x`` at ``indices`` along ``axis`` (``x`` must be 1-D when ``axis`` is
    None); the result has ``indices``' shape in place of that axis. ``mode``: "fast" trusts the
    indices, "clip" clamps them, "wrap" takes them modulo the size."""
    if mode not in ("fast", "clip", "wrap"):
        raise ValueError(f"relax.op.take: mode must be 'fast', 'clip' or 'wrap', got {mode!r}")
    return make_call("relax.take", (x, indices), {"axis": axis, "mode": mode})


def _infer_strided_slice(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    a = call.attrs
    strides = a.strides if a.strides is not None else (1,) * len(a.axes)
    if not len(a.axes) == len(a.begin) == len(a.end) == len(strides):
        raise ValueError(f"{user_name(call)}: axes {list(a.axes)}, begin {list(a.begin)}, end "
                         f"{list(a.end)} and strides {list(strides)} need one entry per sliced axis")
    if x.ndim < 0:
        return x
    axes = [normalize_axis(call, ax, x.ndim, "x") for ax in a.axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{user_name(call)}: axes {list(a.axes)} repeat an axis")
    if x.shape is None:
        return x
    shape = list(x.shape)
    for ax, b, e, s in zip(axes, a.begin, a.end, strides):
        shape[ax] = slice_range(user_name(call), _dim(b), _dim(e), _dim(s), x.shape[ax],
                                a.assume_inbound)[1]
    return TensorStructInfo(tuple(shape), x.dtype)


register_op("relax.strided_slice", _infer_strided_slice)


def _dim(v):
    return IntImm("int64", v) if isinstance(v, int) else v


def _entries(values, what: str) -> tuple:
    out = []
    for v in ([values] if isinstance(values, (int, PrimExpr)) else values):
        if isinstance(v, IntImm):
            v = v.value
        if isinstance(v, bool) or not isinstance(v, (int, PrimExpr)):
            raise TypeError(f"relax.op.strided_slice: {what} must hold ints or size expressions, "
                            f"got {v!r}")
        out.append(v)
    return tuple(out)


def strided_slice(x, axes, begin, end, strides=None, assume_inbound: bool = False) -> Call:
    """``x[begin:end:strides]`` on ``axes``. Constant bounds follow Python's slicing (negative
    counts from the end, out of range clips); symbolic bounds are positions, clipped to the size
    unless ``assume_inbound``."""
    attrs = {"axes": _entries(axes, "axes"), "begin": _entries(begin, "begin"),
             "end": _entries(end, "end"),
             "strides": _entries(strides, "strides") if strides is not None else None,
             "assume_inbound": bool(assume_inbound)}
    return make_call("relax.strided_slice", (x,), attrs)


def _infer_astype(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    return TensorStructInfo(x.shape, call.attrs.dtype, x.ndim)


register_op("relax.astype", _infer_astype)


def astype(x, dtype: str) -> Call:
    """``x`` converted elementwise to ``dtype``."""
    return make_call("relax.astype", (x,), {"dtype": dt.check_dtype(dtype)})


def _infer_where(call: Call) -> TensorStructInfo:
    check_arity(call, ("condition", "x1", "x2"))
    cond = tensor_arg(call, 0, "condition")
    x1, x2 = tensor_arg(call, 1, "x1"), tensor_arg(call, 2, "x2")
    if cond.dtype != "bool":
        raise TypeError(f"{user_name(call)}: condition must be a bool tensor, got {cond.dtype}")
    if x1.dtype != x2.dtype:
        raise TypeError(f"{user_name(call)}: x1 is {x1.dtype} but x2 is {x2.dtype}; they must "
                        "share one dtype")
    infos = (("condition", cond), ("x1", x1), ("x2", x2))
    if any(s.ndim < 0 for _, s in infos):
        return unknown_tensor(x1.dtype)
    ndim = max(s.ndim for _, s in infos)
    if any(s.shape is None for _, s in infos):
        return unknown_tensor(x1.dtype, ndim)
    shape = broadcast_shapes(call, "condition", cond.shape, "x1", x1.shape)
    if shape is not None:
        shape = broadcast_shapes(call, "the broadcast of condition and x1", shape, "x2", x2.shape)
    return TensorStructInfo(shape, x1.dtype, ndim)


register_op("relax.where", _infer_where)


def where(condition, x1, x2) -> Call:
    """``x1`` where ``condition`` (a bool tensor) holds, else ``x2``; the shapes broadcast."""
    return make_call("relax.where", (condition, x1, x2))


__all__ = ["astype", "strided_slice", "take", "where"]
