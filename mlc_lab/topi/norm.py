"""Normalizations over a set of axes: layer_norm and rms_norm.

Statistics accumulate in float32 at least (float16/bfloat16 inputs are widened) and the
variance is a second pass over ``(x - mean)**2``, never ``E[x**2] - E[x]**2``, which cancels
catastrophically when the mean is large next to the spread.

    >>> from mlc_lab import te, topi, tir
    >>> n = tir.Var("n", "int64")
    >>> x = te.placeholder((n, 64), name="x")
    >>> g = te.placeholder((64,), name="g"); b = te.placeholder((64,), name="b")
    >>> y = topi.layer_norm(x, g, b, axis=[-1])
    >>> y.name, y.shape[0] is n
    ('T_layer_norm', True)
"""
from __future__ import annotations

from typing import Optional

from .. import te
from ..tir import dtype as dt
from ..tir.expr import Cast, call_intrin, const
from .utils import (check_float, check_tensor, compute, normalize_axes, product, same_dim,
                    shape_text, static_value)


def _accumulator(dtype: str) -> str:
    return dtype if dt.bits(dtype) >= 32 else "float32"


def _check_param(op: str, data: te.Tensor, axes: list, param: Optional[te.Tensor], label: str):
    if param is None:
        return
    check_tensor(param, op, label)
    expected = [data.shape[a] for a in axes]
    if param.ndim != len(axes) or not all(same_dim(p, e) for p, e in zip(param.shape, expected)):
        raise ValueError(f"topi.{op}: {label} {param.name} must have shape {shape_text(expected)} "
                         f"(the sizes of data {shape_text(data.shape)} on axes {axes}), got "
                         f"{shape_text(param.shape)}")
    if param.dtype != data.dtype:
        raise TypeError(f"topi.{op}: {label} {param.name} is {param.dtype} but data {data.name} is "
                        f"{data.dtype}")


class _Axes:
    """Index bookkeeping for a reduction over ``axes`` of ``data``."""

    def __init__(self, data: te.Tensor, axes: list, acc: str):
        self.data, self.axes = data, axes
        self.kept = [d for d in range(data.ndim) if d not in axes]
        self.kept_shape = [data.shape[d] for d in self.kept]
        count = product([data.shape[a] for a in axes])
        value = static_value(count)
        self.count = const(float(value), acc) if value is not None else Cast(acc, count)

    def reduce_axes(self, tag: str) -> list:
        return [te.reduce_axis(self.data.shape[a], name=f"{tag}{j}") for j, a in enumerate(self.axes)]

    def merge(self, kept_idx, red_idx) -> tuple:
        kept, red = iter(kept_idx), iter(red_idx)
        return tuple(next(red) if d in self.axes else next(kept) for d in range(self.data.ndim))

    def kept_of(self, full_idx) -> tuple:
        return tuple(full_idx[d] for d in self.kept)

    def param_of(self, full_idx) -> tuple:
        return tuple(full_idx[a] for a in self.axes)


def _prepare(op: str, data: te.Tensor, axis) -> tuple:
    check_tensor(data, op)
    check_float(data, op)
    axes = normalize_axes(axis, data.ndim, op, data.shape)
    if not axes:
        raise ValueError(f"topi.{op}: axis {axis!r} names no axis to normalize over")
    acc = _accumulator(data.dtype)
    return axes, acc, _Axes(data, axes, acc)


def layer_norm(data: te.Tensor, gamma: Optional[te.Tensor], beta: Optional[te.Tensor], axis,
               epsilon: float = 1e-5) -> te.Tensor:
    """``(data - mean) / sqrt(var + epsilon) * gamma + beta`` with the statistics over ``axis``
    (an int or a list of ints); ``gamma``/``beta`` have the shape of ``data`` on those axes and
    may be None (no scale / no offset). Stages "T_layer_norm_sum" (the sum), "T_layer_norm_var"
    (the sum of squared deviations from the mean) and "T_layer_norm"."""
    axes, acc, ix = _prepare("layer_norm", data, axis)
    _check_param("layer_norm", data, axes, gamma, "gamma")
    _check_param("layer_norm", data, axes, beta, "beta")
    ks = ix.reduce_axes("k")
    total = compute(ix.kept_shape, lambda *i: te.sum(data[ix.merge(i, ks)].astype(acc), axis=ks),
                    "T_layer_norm_sum")
    rs = ix.reduce_axes("r")

    def deviation(i, r):
        centred = data[ix.merge(i, r)].astype(acc) - total[i] / ix.count
        return centred * centred

    var = compute(ix.kept_shape, lambda *i: te.sum(deviation(i, rs), axis=rs), "T_layer_norm_var")
    eps = const(float(epsilon), acc)

    def element(*i):
        kept = ix.kept_of(i)
        value = (data[i].astype(acc) - total[kept] / ix.count) * call_intrin(
            "rsqrt", var[kept] / ix.count + eps)
        if gamma is not None:
            value = value * gamma[ix.param_of(i)].astype(acc)
        if beta is not None:
            value = value + beta[ix.param_of(i)].astype(acc)
        return value.astype(data.dtype)

    return compute(data.shape, element, "T_layer_norm")


def rms_norm(data: te.Tensor, weight: Optional[te.Tensor], axis, epsilon: float = 1e-5) -> te.Tensor:
    """``data / sqrt(mean(data**2) + epsilon) * weight`` with the mean over ``axis``; ``weight``
    has the shape of ``data`` on those axes. Stages "T_rms_norm_sqsum" and "T_rms_norm"."""
    axes, acc, ix = _prepare("rms_norm", data, axis)
    _check_param("rms_norm", data, axes, weight, "weight")
    ks = ix.reduce_axes("k")

    def square(i, k):
        value = data[ix.merge(i, k)].astype(acc)
        return value * value

    sqsum = compute(ix.kept_shape, lambda *i: te.sum(square(i, ks), axis=ks), "T_rms_norm_sqsum")
    eps = const(float(epsilon), acc)

    def element(*i):
        value = data[i].astype(acc) * call_intrin("rsqrt", sqsum[ix.kept_of(i)] / ix.count + eps)
        if weight is not None:
            value = value * weight[ix.param_of(i)].astype(acc)
        return value.astype(data.dtype)

    return compute(data.shape, element, "T_rms_norm")


__all__ = ["layer_norm", "rms_norm"]
