"""Splitting and joining along an axis (``split`` returns a tuple, ``concat`` takes one), and
adding or removing unit axes (``expand_dims``, ``squeeze``, ``broadcast_to``).

    >>> from mlc_lab import relax, tir
    >>> from mlc_lab.relax import op
    >>> n = tir.Var("n", "int64")
    >>> qkv = relax.Var("qkv", relax.TensorStructInfo((1, n, 192), "float32"))
    >>> op.split(qkv, 3, axis=-1).struct_info
    R.Tuple(R.Tensor((1, n, 64), dtype="float32"), R.Tensor((1, n, 64), dtype="float32"), R.Tensor((1, n, 64), dtype="float32"))
    >>> op.concat([qkv, qkv], axis=1).struct_info
    R.Tensor((1, n * 2, 192), dtype="float32")
"""
from __future__ import annotations

from ...arith import simplify
from ...tir.expr import IntImm
from ...topi.transform import split_extents
from ..expr import Call, Expr, ShapeExpr, Tuple
from ..struct_info import (ShapeStructInfo, TensorStructInfo, TupleStructInfo, dim_value,
                           shape_text, to_shape)
from .infer import (broadcast_shapes, check_arity, dims_differ, dims_match, normalize_axes,
                    normalize_axis, tensor_arg, unknown_tensor, user_name)
from .registry import make_call, register_op


def _infer_split(call: Call):
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    spec = call.attrs.indices_or_sections
    count = spec if isinstance(spec, int) else len(spec) + 1
    if isinstance(spec, int) and spec <= 0:
        raise ValueError(f"{user_name(call)}: the number of sections must be positive, got {spec}")
    if x.ndim >= 0:
        axis = normalize_axis(call, call.attrs.axis, x.ndim, "x")
    if count == 1:   # one piece: the input itself, as the reference compiler does
        return x
    if x.shape is None:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, x.ndim)] * count)
    pieces = []
    for _, extent in split_extents(user_name(call), x.shape[axis], spec):
        shape = list(x.shape)
        shape[axis] = extent
        pieces.append(TensorStructInfo(tuple(shape), x.dtype))
    return TupleStructInfo(pieces)


register_op("relax.split", _infer_split)


def split(x, indices_or_sections, axis: int = 0) -> Call:
    """Split ``x`` along ``axis``: an int asks for that many equal pieces (the last one smaller
    when the size does not divide; a symbolic size must provably divide); a list of ints gives
    the positions where new pieces start. The result is a tuple of tensors."""
    if isinstance(indices_or_sections, IntImm):
        indices_or_sections = indices_or_sections.value
    if not isinstance(indices_or_sections, int):
        indices_or_sections = tuple(int(i) if isinstance(i, IntImm) else i
                                    for i in indices_or_sections)
    return make_call("relax.split", (x,), {"indices_or_sections": indices_or_sections,
                                           "axis": axis})


def _infer_concat(call: Call) -> TensorStructInfo:
    check_arity(call, ("tensors",))
    tup = call.args[0].struct_info
    if not isinstance(tup, TupleStructInfo):
        raise TypeError(f"{user_name(call)}: tensors must be a tuple of tensors, got "
                        f"{tup.script() if tup is not None else '?'}")
    if not tup.elements:
        raise ValueError(f"{user_name(call)}: tensors is an empty tuple; concat needs one or more")
    infos = []
    for j, s in enumerate(tup.elements):
        if not isinstance(s, TensorStructInfo):
            raise TypeError(f"{user_name(call)}: tensors[{j}] must be a tensor, got {s.script()}")
        infos.append(s)
    first = infos[0]
    for j, s in enumerate(infos[1:], 1):
        if s.dtype != first.dtype:
            raise TypeError(f"{user_name(call)}: tensors[{j}] is {s.dtype} but tensors[0] is "
                            f"{first.dtype}")
        if s.ndim >= 0 and first.ndim >= 0 and s.ndim != first.ndim:
            raise ValueError(f"{user_name(call)}: tensors[{j}] {shape_text(s.shape)} and "
                             f"tensors[0] {shape_text(first.shape)} have different ranks")
    ndim = next((s.ndim for s in infos if s.ndim >= 0), -1)
    if ndim < 0:
        return unknown_tensor(first.dtype)
    axis = normalize_axis(call, call.attrs.axis, ndim, "tensors[0]")
    if any(s.shape is None for s in infos):
        return unknown_tensor(first.dtype, ndim)
    shape = list(first.shape)
    for j, s in enumerate(infos[1:], 1):
        for d in range(ndim):
            if d != axis and dims_differ(s.shape[d], first.shape[d]):
                raise ValueError(f"{user_name(call)}: tensors[{j}] {shape_text(s.shape)} and "
                                 f"tensors[0] {shape_text(first.shape)} differ at axis {d}; only "
                                 f"the concatenation axis {axis} may differ")
            if d != axis and not dims_match(s.shape[d], first.shape[d]):
                return unknown_tensor(first.dtype, ndim)
        shape[axis] = simplify(shape[axis] + s.shape[axis])
    return TensorStructInfo(tuple(shape), first.dtype)


register_op("relax.concat", _infer_concat)


def concat(tensors, axis: int = 0) -> Call:
    """Join ``tensors`` (a list, or a tuple expression) along ``axis``; the other sizes must
    agree."""
    if axis is None:
        raise NotImplementedError("relax.op.concat: axis=None (concatenating flattened tensors) is "
                                  "not supported; reshape the tensors to 1-D and use axis=0")
    if isinstance(tensors, (list, tuple)):
        tensors = Tuple(tuple(tensors))
    return make_call("relax.concat", (tensors,), {"axis": axis})


def _infer_expand_dims(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    if x.ndim < 0:
        return x
    axes = call.attrs.axis
    out_ndim = x.ndim + len(axes)
    new = normalize_axes(call, axes, out_ndim, "the result")
    if x.shape is None:
        return unknown_tensor(x.dtype, out_ndim)
    dims = iter(x.shape)
    return TensorStructInfo(tuple(IntImm("int64", 1) if d in new else next(dims)
                                  for d in range(out_ndim)), x.dtype)


def _infer_squeeze(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    if x.ndim < 0 or x.shape is None:
        if call.attrs.axis is None:
            return unknown_tensor(x.dtype)
        return unknown_tensor(x.dtype, x.ndim - len(call.attrs.axis) if x.ndim >= 0 else -1)
    if call.attrs.axis is None:
        gone = [d for d, s in enumerate(x.shape) if dim_value(s) == 1]
    else:
        gone = normalize_axes(call, call.attrs.axis, x.ndim, "x")
        for d in gone:
            if dim_value(x.shape[d]) != 1:
                raise ValueError(f"{user_name(call)}: axis {d} of x {shape_text(x.shape)} has "
                                 "size other than 1 (or an unknown size) and cannot be squeezed")
    return TensorStructInfo(tuple(s for d, s in enumerate(x.shape) if d not in gone), x.dtype)


def _infer_broadcast_to(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "shape"))
    x = tensor_arg(call, 0, "x")
    target = call.args[1].struct_info
    if not isinstance(target, ShapeStructInfo):
        raise TypeError(f"{user_name(call)}: shape must be a shape, got "
                        f"{target.script() if target is not None else '?'}")
    if target.values is None or x.shape is None:
        return unknown_tensor(x.dtype, target.ndim)
    if x.ndim > len(target.values):
        raise ValueError(f"{user_name(call)}: x {shape_text(x.shape)} has more dimensions than "
                         f"the target shape {shape_text(target.values)}")
    result = broadcast_shapes(call, "x", x.shape, "shape", target.values)
    if result is not None and any(dims_differ(r, t) for r, t in zip(result, target.values)):
        raise ValueError(f"{user_name(call)}: cannot broadcast x {shape_text(x.shape)} to "
                         f"{shape_text(target.values)}")
    return TensorStructInfo(target.values, x.dtype)


register_op("relax.expand_dims", _infer_expand_dims)
register_op("relax.squeeze", _infer_squeeze)
register_op("relax.broadcast_to", _infer_broadcast_to)


def _axis_tuple(axis) -> tuple:
    return (axis,) if isinstance(axis, int) else tuple(axis)


def expand_dims(x, axis) -> Call:
    """``x`` with new axes of size 1 at positions ``axis`` (an int or a list) of the result."""
    return make_call("relax.expand_dims", (x,), {"axis": _axis_tuple(axis)})


def squeeze(x, axis=None) -> Call:
    """``x`` without the axes ``axis`` (each of size 1); None drops every axis of static size 1."""
    return make_call("relax.squeeze", (x,), {"axis": None if axis is None else _axis_tuple(axis)})


def broadcast_to(x, shape) -> Call:
    """``x`` broadcast (numpy's rules) to ``shape``."""
    shape = shape if isinstance(shape, Expr) else ShapeExpr(to_shape(shape, "shape"))
    return make_call("relax.broadcast_to", (x, shape))


__all__ = ["broadcast_to", "concat", "expand_dims", "split", "squeeze"]
