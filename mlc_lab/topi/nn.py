"""Neural-network operators: dense, matmul, softmax, log_softmax.

Convolution and pooling live in conv.py and pool.py; they, ``pad``, ``flatten`` and ``relu`` are
re-exported here too, so ``topi.nn.conv2d_nchw``, ``topi.nn.flatten`` and ``topi.nn.relu`` work as in TVM.
"""
from __future__ import annotations

from typing import Optional

from .. import te
from .conv import conv2d, conv2d_nchw
from .elemwise import broadcast_indices, broadcast_shape, is_one, relu
from .manipulate import flatten, pad
from .activation import gelu, gelu_tanh, silu
from .norm import layer_norm, rms_norm
from .pool import avg_pool2d, max_pool2d, pool2d
from .utils import (check_float, check_operands, check_tensor, compute, normalize_axis, same_dim,
                    shape_text)


def dense(x: te.Tensor, weight: te.Tensor, bias: Optional[te.Tensor] = None,
          out_dtype: Optional[str] = None) -> te.Tensor:
    """``x @ weight.T (+ bias)``: x is (batch, in_dim), weight (units, in_dim), bias (units,).
    Stages "T_matmul_NT", then "T_add" when there is a bias."""
    check_operands("dense", x, "data", "batch, in_dim", weight, "weight", "units, in_dim", "in_dim",
                   f" (expected (units, {x.shape[1]}))")
    out_dtype = out_dtype or x.dtype
    k = te.reduce_axis(x.shape[1], name="k")
    out = te.compute((x.shape[0], weight.shape[0]), lambda i, j: te.sum(
        x[i, k].astype(out_dtype) * weight[j, k].astype(out_dtype), axis=k), name="T_matmul_NT")
    if bias is None:
        return out
    check_tensor(bias, "dense", "bias")
    if bias.ndim != 1 or not same_dim(bias.shape[0], weight.shape[0]):
        raise ValueError(f"topi.dense: bias {bias.name} must have shape ({weight.shape[0]},) to "
                         f"match weight {weight.name} of shape {shape_text(weight.shape)}, got "
                         f"{shape_text(bias.shape)}")
    if bias.dtype != out_dtype:
        raise TypeError(f"topi.dense: bias {bias.name} is {bias.dtype} but the output is {out_dtype}")
    return te.compute(out.shape, lambda i, j: out[i, j] + bias[j], name="T_add")


def matmul(a: te.Tensor, b: te.Tensor, out_dtype: Optional[str] = None) -> te.Tensor:
    """numpy's ``a @ b`` (stage "T_matmul"): (..., m, k) @ (..., k, n) -> (..., m, n), with the
    leading (batch) dimensions broadcast; a 1-D operand is a vector and its dimension is dropped."""
    check_tensor(a, "matmul", "a")
    check_tensor(b, "matmul", "b")
    for t, label in ((a, "a"), (b, "b")):
        if t.ndim < 1:
            raise ValueError(f"topi.matmul: {label} {t.name} must have at least one dimension")
    if a.dtype != b.dtype:
        raise TypeError(f"topi.matmul: a {a.name} is {a.dtype} with shape {shape_text(a.shape)} "
                        f"but b {b.name} is {b.dtype} with shape {shape_text(b.shape)}")
    a_k, b_k = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
    if not same_dim(a_k, b_k):
        raise ValueError(f"topi.matmul: the contracted dimensions differ: a {a.name} has shape "
                         f"{shape_text(a.shape)} (k={a_k}) and b {b.name} has shape "
                         f"{shape_text(b.shape)} (k={b_k})")
    a_batch, b_batch = a.shape[:-2], b.shape[:-2]
    batch = broadcast_shape(a_batch, b_batch, "matmul")
    rows = [a.shape[-2]] if a.ndim > 1 else []
    cols = [b.shape[-1]] if b.ndim > 1 else []
    out_dtype = out_dtype or a.dtype
    k = te.reduce_axis(a_k, name="k")

    def element(*indices):
        batch_idx, rest = indices[:len(batch)], list(indices[len(batch):])
        i = [rest.pop(0)] if rows else []
        j = [rest.pop(0)] if cols else []
        a_idx = _batch_indices(a_batch, batch, batch_idx) + tuple(i) + (k,)
        b_idx = _batch_indices(b_batch, batch, batch_idx) + (k,) + tuple(j)
        return te.sum(a[a_idx].astype(out_dtype) * b[b_idx].astype(out_dtype), axis=k)

    return compute(tuple(batch) + tuple(rows) + tuple(cols), element, "T_matmul")


def _batch_indices(shape, batch, batch_idx) -> tuple:
    """An operand's batch indices: index 0 only where its dimension of 1 is broadcast (the
    output's is larger), so a batch of one is read at its iterator, as the other dimensions are
    (a schedule then sees every operand read at plain iterators, and can pad them)."""
    picked = broadcast_indices(shape, batch_idx)
    offset = len(batch) - len(shape)
    return tuple(batch_idx[offset + d] if is_one(batch[offset + d]) else index
                 for d, index in enumerate(picked))


def _reduced_stage(x: te.Tensor, axis: int, name: str, fbody) -> te.Tensor:
    """A stage over ``x``'s shape without ``axis``; ``fbody(source_indices_with(k), k)``."""
    shape = [s for d, s in enumerate(x.shape) if d != axis]
    k = te.reduce_axis(x.shape[axis], name="k")

    def element(*indices):
        return fbody(indices[:axis] + (k,) + indices[axis:], k)

    return compute(shape, element, name)


def _without(indices: tuple, axis: int) -> tuple:
    return indices[:axis] + indices[axis + 1:]


def softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``, in the stages "T_softmax_maxelem",
    "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"."""
    axis = _softmax_axis(x, axis, "softmax")
    max_elem = _reduced_stage(x, axis, "T_softmax_maxelem", lambda i, k: te.max(x[i], axis=k))
    exp = compute(x.shape, lambda *i: te.exp(x[i] - max_elem[_without(i, axis)]), "T_softmax_exp")
    expsum = _reduced_stage(exp, axis, "T_softmax_expsum", lambda i, k: te.sum(exp[i], axis=k))
    return compute(x.shape, lambda *i: exp[i] / expsum[_without(i, axis)], "T_softmax_norm")


def log_softmax(x: te.Tensor, axis: int = -1) -> te.Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``, in the stages "T_softmax_maxelem",
    "T_softmax_expsum", "T_log_softmax_norm"."""
    axis = _softmax_axis(x, axis, "log_softmax")
    max_elem = _reduced_stage(x, axis, "T_softmax_maxelem", lambda i, k: te.max(x[i], axis=k))
    expsum = _reduced_stage(x, axis, "T_softmax_expsum", lambda i, k: te.sum(
        te.exp(x[i] - max_elem[_without(i, axis)]), axis=k))
    return compute(x.shape, lambda *i: x[i] - max_elem[_without(i, axis)] - te.log(
        expsum[_without(i, axis)]), "T_log_softmax_norm")


def _softmax_axis(x: te.Tensor, axis: int, op: str) -> int:
    """Check the input of softmax/log_softmax and return ``axis`` as a non-negative index."""
    check_tensor(x, op)
    check_float(x, op)
    if x.ndim < 1:
        raise ValueError(f"topi.{op}: data {x.name} must have at least one dimension")
    return normalize_axis(axis, x.ndim, op, x.shape)


__all__ = ["avg_pool2d", "conv2d", "conv2d_nchw", "dense", "flatten", "gelu", "gelu_tanh",
           "layer_norm", "log_softmax", "matmul", "max_pool2d", "pad", "pool2d", "relu", "rms_norm",
           "silu", "softmax"]
