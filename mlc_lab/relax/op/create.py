"""Tensor creation: full / zeros / ones (and their ``_like`` forms), tril / triu (a causal mask
keeps the lower triangle) and arange. Shapes may hold symbolic sizes.

    >>> from mlc_lab import relax, tir
    >>> from mlc_lab.relax import op
    >>> n = tir.Var("n", "int64")
    >>> op.full((n, n), relax.const(-1e9, "float32")).struct_info
    R.Tensor((n, n), dtype="float32")
    >>> op.triu(op.zeros((n, n), "float32"), k=1).struct_info
    R.Tensor((n, n), dtype="float32")
    >>> op.arange(0, n).struct_info
    R.Tensor((n,), dtype="int64")
"""
from __future__ import annotations

from typing import Optional

from ...tir import dtype as dt
from ...tir.expr import IntImm, PrimExpr
from ...topi.transform import arange_length
from ..expr import Call, Expr, PrimValue, ShapeExpr, const
from ..struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, shape_text, to_shape
from .infer import check_arity, tensor_arg, user_name
from .registry import make_call, register_op


def _shape_arg(call: Call, index: int = 0) -> ShapeStructInfo:
    sinfo = call.args[index].struct_info
    if not isinstance(sinfo, ShapeStructInfo):
        raise TypeError(f"{user_name(call)}: shape must be a shape (a tuple of sizes or "
                        f"R.shape([...])), got {sinfo.script() if sinfo is not None else '?'}")
    return sinfo


def _infer_full(call: Call) -> TensorStructInfo:
    check_arity(call, ("shape", "fill_value"))
    shape = _shape_arg(call)
    fill = tensor_arg(call, 1, "fill_value")
    if fill.ndim not in (-1, 0):
        raise ValueError(f"{user_name(call)}: fill_value must be a scalar (0-d) tensor, got "
                         f"{shape_text(fill.shape)}")
    dtype = call.attrs.get("dtype") or fill.dtype
    return TensorStructInfo(shape.values, dtype, shape.ndim)


def _infer_full_like(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "fill_value"))
    x = tensor_arg(call, 0, "x")
    fill = tensor_arg(call, 1, "fill_value")
    if fill.ndim not in (-1, 0):
        raise ValueError(f"{user_name(call)}: fill_value must be a scalar (0-d) tensor, got "
                         f"{shape_text(fill.shape)}")
    return TensorStructInfo(x.shape, call.attrs.get("dtype") or x.dtype, x.ndim)


def _infer_constant(call: Call) -> TensorStructInfo:
    check_arity(call, ("shape",))
    shape = _shape_arg(call)
    return TensorStructInfo(shape.values, call.attrs.dtype, shape.ndim)


def _infer_constant_like(call: Call) -> TensorStructInfo:
    check_arity(call, ("x",))
    x = tensor_arg(call, 0, "x")
    return TensorStructInfo(x.shape, call.attrs.get("dtype") or x.dtype, x.ndim)


def _infer_trilu(call: Call) -> TensorStructInfo:
    check_arity(call, ("x", "k"))
    x = tensor_arg(call, 0, "x")
    if 0 <= x.ndim < 2:
        raise ValueError(f"{user_name(call)}: x must have at least 2 dimensions (the triangle is "
                         f"taken over the last two), got {shape_text(x.shape)}")
    k = call.args[1].struct_info
    if not isinstance(k, PrimStructInfo) or not dt.is_int(k.dtype):
        raise TypeError(f"{user_name(call)}: k must be an integer (a diagonal offset), got "
                        f"{k.script() if k is not None else '?'}")
    return x


def _infer_arange(call: Call) -> TensorStructInfo:
    check_arity(call, ("start", "end", "step"))
    values = []
    for index, name in enumerate(("start", "end", "step")):
        arg = call.args[index]
        if not isinstance(arg, PrimValue):
            raise TypeError(f"{user_name(call)}: {name} must be a number or a size expression")
        values.append(arg.value)
    length = arange_length(user_name(call), *values)
    return TensorStructInfo((length,), call.attrs.dtype)


register_op("relax.full", _infer_full)
register_op("relax.full_like", _infer_full_like)
for _name in ("zeros", "ones"):
    register_op(f"relax.{_name}", _infer_constant)
    register_op(f"relax.{_name}_like", _infer_constant_like)
register_op("relax.tril", _infer_trilu)
register_op("relax.triu", _infer_trilu)
register_op("relax.arange", _infer_arange)


def _shape(shape) -> Expr:
    return shape if isinstance(shape, Expr) else ShapeExpr(to_shape(shape, "shape"))


def _dtype_attr(dtype) -> dict:
    return {"dtype": dt.check_dtype(dtype) if dtype is not None else None}


def _fill(value, dtype):
    return value if isinstance(value, Expr) else const(value, dtype)


def full(shape, fill_value, dtype: Optional[str] = None) -> Call:
    """A tensor of ``shape`` filled with ``fill_value`` (a scalar tensor or a number); its dtype
    is ``dtype``, or fill_value's."""
    return make_call("relax.full", (_shape(shape), _fill(fill_value, dtype)), _dtype_attr(dtype))


def full_like(x, fill_value, dtype: Optional[str] = None) -> Call:
    """A tensor shaped like ``x`` filled with ``fill_value``; dtype ``dtype`` or x's."""
    return make_call("relax.full_like", (x, _fill(fill_value, dtype)), _dtype_attr(dtype))


def zeros(shape, dtype: str) -> Call:
    """A tensor of ``shape`` and ``dtype`` filled with zeros."""
    return make_call("relax.zeros", (_shape(shape),), {"dtype": dt.check_dtype(dtype)})


def ones(shape, dtype: str) -> Call:
    """A tensor of ``shape`` and ``dtype`` filled with ones."""
    return make_call("relax.ones", (_shape(shape),), {"dtype": dt.check_dtype(dtype)})


def zeros_like(x, dtype: Optional[str] = None) -> Call:
    """Zeros shaped like ``x`` (dtype ``dtype`` or x's)."""
    return make_call("relax.zeros_like", (x,), _dtype_attr(dtype))


def ones_like(x, dtype: Optional[str] = None) -> Call:
    """Ones shaped like ``x`` (dtype ``dtype`` or x's)."""
    return make_call("relax.ones_like", (x,), _dtype_attr(dtype))


def _prim(value, name: str) -> PrimValue:
    if isinstance(value, PrimValue):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, PrimExpr)):
        raise TypeError(f"{name} must be an int or a size expression, got {value!r}")
    return PrimValue(IntImm("int64", value) if isinstance(value, int) else value)


def tril(x, k=0) -> Call:
    """``x`` with the elements above diagonal ``k`` of its last two axes set to zero."""
    return make_call("relax.tril", (x, _prim(k, "relax.op.tril: k")))


def triu(x, k=0) -> Call:
    """``x`` with the elements below diagonal ``k`` of its last two axes set to zero; ``k=1``
    keeps only what lies strictly above the diagonal (the future positions of a causal mask)."""
    return make_call("relax.triu", (x, _prim(k, "relax.op.triu: k")))


def arange(start, end=None, step=1, dtype: Optional[str] = None) -> Call:
    """``[start, start + step, ...)`` below ``end`` (``arange(n)`` counts from 0); the bounds may
    be size expressions such as ``n``. The dtype defaults to int64."""
    if end is None:
        start, end = 0, start
    args = tuple(_prim(v, f"relax.op.arange: {name}")
                 for v, name in ((start, "start"), (end, "end"), (step, "step")))
    return make_call("relax.arange", args, {"dtype": dt.check_dtype(dtype or "int64")})


__all__ = ["arange", "full", "full_like", "ones", "ones_like", "tril", "triu", "zeros",
           "zeros_like"]
