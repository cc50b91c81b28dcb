"""Matrix products: ``matmul`` (numpy's rules, with batch broadcasting and 1-D operands) and
``linear`` (x @ w.T + b, built from permute_dims, matmul and add as in TVM)."""
from __future__ import annotations

from typing import Optional

from ...tir import dtype as dt
from ..expr import Call
from ..struct_info import TensorStructInfo, dims_equal, dim_value, shape_text
from .infer import (broadcast_shapes, check_arity, same_dtype, tensor_arg, unknown_tensor,
                     user_name)
from .registry import make_call, register_op


def _infer_matmul(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "y"))
    a, b = tensor_arg(call, 0, "x"), tensor_arg(call, 1, "y")
    dtype = same_dtype(call, [("x", a), ("y", b)])
    dtype = call.attrs.get("out_dtype") or dtype
    for name, sinfo in (("x", a), ("y", b)):
        if sinfo.ndim == 0:
            raise ValueError(f"{user_name(call)}: {name} is a scalar (shape ()); matmul needs at "
                             "least one dimension on each side")
    if a.ndim < 0 or b.ndim < 0:
        return unknown_tensor(dtype)
    out_ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return unknown_tensor(dtype, out_ndim)
    a2 = a.shape if a.ndim > 1 else (None,) + a.shape
    b2 = b.shape if b.ndim > 1 else b.shape + (None,)
    inner_equal = dims_equal(a2[-1], b2[-2])
    if inner_equal is False:
        raise ValueError(f"{user_name(call)}: the inner dimensions differ: x is {shape_text(a.shape)}, "
                         f"y is {shape_text(b.shape)} ({dim_value(a2[-1])} != {dim_value(b2[-2])})")
    batch = broadcast_shapes(call, "the batch dimensions of x", a2[:-2],
                             "the batch dimensions of y", b2[:-2])
    if batch is None:
        return unknown_tensor(dtype, out_ndim)
    out = batch + tuple(d for d in (a2[-2], b2[-1]) if d is not None)
    return TensorStructInfo(out, dtype)


register_op("relax.matmul", _infer_matmul)


def matmul(x, y, out_dtype: Optional[str] = None) -> Call:
    """The matrix product ``x @ y`` with numpy's rules: the last axis of ``x`` meets the
    second-to-last of ``y``; leading (batch) axes broadcast; a 1-D ``x`` is a row vector and a
    1-D ``y`` a column vector, whose added axis is dropped from the result."""
    attrs = {"out_dtype": dt.check_dtype(out_dtype)} if out_dtype else {}
    return make_call("relax.matmul", (x, y), attrs)


def _infer_dense(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "w"))
    x, w = tensor_arg(call, 0, "x"), tensor_arg(call, 1, "w")
    dtype = same_dtype(call, [("x", x), ("w", w)])
    if w.ndim not in (-1, 2):
        raise ValueError(f"{user_name(call)}: the weight w must be 2-D (units, in_features), got "
                         f"{shape_text(w.shape)}")
    if x.shape is None or w.shape is None:
        return unknown_tensor(dtype, x.ndim)
    if x.ndim < 1:
        raise ValueError(f"{user_name(call)}: x must have at least one dimension")
    if dims_equal(x.shape[-1], w.shape[1]) is False:
        raise ValueError(f"{user_name(call)}: the inner dimensions differ: x is {shape_text(x.shape)}, "
                         f"w is {shape_text(w.shape)} ({dim_value(x.shape[-1])} != "
                         f"{dim_value(w.shape[1])})")
    return TensorStructInfo(x.shape[:-1] + (w.shape[0],), dtype)


register_op("relax.nn.dense", _infer_dense)


def dense(x, w) -> Call:
    """``x @ w.T`` with ``w`` of shape (units, in_features) (the course-era ``nn.dense`` op)."""
    return make_call("relax.nn.dense", (x, w))


def linear(x, w, b=None) -> Call:
    """``x @ w.T + b`` (``b`` optional), built from ``permute_dims``, ``matmul`` and ``add``."""
    from .binary import add
    from .manipulate import permute_dims
    out = matmul(x, permute_dims(w))
    return out if b is None else add(out, b)
