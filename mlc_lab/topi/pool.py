"""2-D pooling in NCHW layout: max ("pool_max") and average ("pool_sum", then "pool_avg").

Padding is a "pad_temp" stage: filled with the dtype's lowest value for max pooling, so padding
never wins, and with zeros for average pooling.
"""
from __future__ import annotations

from .. import te
from ..arith import simplify
from ..tir import dtype as dt
from ..tir.expr import Cast, const
from .manipulate import pad
from .utils import (check_ndim, check_tensor, int_tuple, lowest_value, padding_2d, shape_text,
                    simplify_index, static_value)


def pool2d(data: te.Tensor, kernel, stride, dilation, padding, pool_type: str,
           ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True) -> te.Tensor:
    """Pool ``data`` (batch, channel, height, width) over ``kernel``-sized windows.

    ``kernel``, ``stride`` and ``dilation`` are an int or (h, w); ``padding`` is an int,
    (pad_h, pad_w), or (top, left, bottom, right). ``pool_type`` is "max" or "avg". With
    ``ceil_mode`` the output size rounds up (a window may hang over the bottom/right edge, but
    always starts inside the input or its top/left padding). ``count_include_pad`` decides
    whether average pooling divides by the window size or by the taps inside the input.
    """
    op = {"max": "max_pool2d", "avg": "avg_pool2d"}.get(pool_type)
    if op is None:
        raise ValueError(f"topi.pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if layout != "NCHW":
        raise ValueError(f"topi.{op}: layout {layout!r} is not supported; use 'NCHW'")
    check_tensor(data, op)
    check_ndim(data, 4, op, "data", "batch, channel, height, width")
    if dt.is_bool(data.dtype):
        raise TypeError(f"topi.{op}: data {data.name} must be numeric, got bool")
    if pool_type == "avg" and not dt.is_float(data.dtype):
        raise TypeError(f"topi.{op}: data {data.name} must have a float dtype, got {data.dtype}")
    kernel_hw = int_tuple(kernel, 2, op, "pool_size")
    stride_hw = int_tuple(stride, 2, op, "strides")
    dilation_hw = int_tuple(dilation, 2, op, "dilation")
    top, left, bottom, right = padding_2d(padding, op)
    if top >= kernel_hw[0] or bottom >= kernel_hw[0] or left >= kernel_hw[1] or right >= kernel_hw[1]:
        raise ValueError(f"topi.{op}: padding {(top, left, bottom, right)} must be smaller than the "
                         f"pool size {kernel_hw}, or some windows would hold only padding")
    batch, channel, height, width = data.shape
    out_h, extra_bottom = _out_size(height, top, bottom, kernel_hw[0], stride_hw[0],
                                    dilation_hw[0], ceil_mode, op, data)
    out_w, extra_right = _out_size(width, left, right, kernel_hw[1], stride_hw[1],
                                   dilation_hw[1], ceil_mode, op, data)
    fill = lowest_value(data.dtype) if pool_type == "max" else const(0, data.dtype)
    pads = (top, left, bottom + extra_bottom, right + extra_right)
    padded = data if not any(pads) else pad(data, (0, 0, top, left),
                                            (0, 0, pads[2], pads[3]), fill, name="pad_temp")
    rv0 = te.reduce_axis(kernel_hw[0], name="rv0")
    rv1 = te.reduce_axis(kernel_hw[1], name="rv1")

    def window(n, c, h, w):
        return padded[n, c, simplify(h * stride_hw[0] + rv0 * dilation_hw[0]),
                      simplify(w * stride_hw[1] + rv1 * dilation_hw[1])]

    shape = (batch, channel, out_h, out_w)
    if pool_type == "max":
        return te.compute(shape, lambda n, c, h, w: te.max(window(n, c, h, w), axis=[rv0, rv1]),
                          name="pool_max")
    pool_sum = te.compute(shape, lambda n, c, h, w: te.sum(window(n, c, h, w), axis=[rv0, rv1]),
                          name="pool_sum")
    if count_include_pad:
        bounds = ((0, height + top + bottom), (0, width + left + right))
    else:
        bounds = ((top, height + top), (left, width + left))
    if count_include_pad and not (extra_bottom or extra_right):
        size = const(kernel_hw[0] * kernel_hw[1], data.dtype)
        return te.compute(shape, lambda n, c, h, w: pool_sum[n, c, h, w] / size, name="pool_avg")

    def average(n, c, h, w):
        taps_h = _taps(h * stride_hw[0], kernel_hw[0], dilation_hw[0], *bounds[0])
        taps_w = _taps(w * stride_hw[1], kernel_hw[1], dilation_hw[1], *bounds[1])
        count = simplify_index(te.max(taps_h * taps_w, 1), (h, w))
        return pool_sum[n, c, h, w] / Cast(data.dtype, count)

    return te.compute(shape, average, name="pool_avg")


def _out_size(size, pad_before, pad_after, kernel, stride, dilation, ceil_mode, op, data):
    """The output extent along one axis, and the extra padding after that ceil mode needs."""
    span = dilation * (kernel - 1) + 1
    padded = size + pad_before + pad_after
    static = static_value(size)
    if static is not None and static + pad_before + pad_after < span:
        raise ValueError(f"topi.{op}: the window (span {span}) does not fit data of shape "
                         f"{shape_text(data.shape)} padded by ({pad_before}, {pad_after})")
    if not ceil_mode:
        return simplify((padded - span) // stride + 1), 0
    if static is None:
        raise ValueError(f"topi.{op}: ceil_mode needs static height and width, got shape "
                         f"{shape_text(data.shape)}")
    out = -(-(static + pad_before + pad_after - span) // stride) + 1
    if (out - 1) * stride >= static + pad_before:
        out -= 1
    extra = max(0, (out - 1) * stride + span - (static + pad_before + pad_after))
    return const(out, size.dtype), extra


def _taps(start, kernel: int, dilation: int, lo, hi):
    """How many of the taps ``start + k * dilation`` (0 <= k < kernel) fall in [lo, hi)."""
    first = te.max((lo - start + dilation - 1) // dilation, 0)
    last = te.min((hi - 1 - start) // dilation, kernel - 1)
    return te.max(last - first + 1, 0)


def max_pool2d(data: te.Tensor, pool_size, strides=1, padding=0, dilation=1,
               ceil_mode: bool = False, layout: str = "NCHW") -> te.Tensor:
    """Maximum over each window (stages "pad_temp" when padded, then "pool_max")."""
    return pool2d(data, pool_size, strides, dilation, padding, "max", ceil_mode, layout)


def avg_pool2d(data: te.Tensor, pool_size, strides=1, padding=0, dilation=1,
               ceil_mode: bool = False, layout: str = "NCHW",
               count_include_pad: bool = True) -> te.Tensor:
    """Mean over each window (stages "pad_temp" when padded, "pool_sum", "pool_avg")."""
    return pool2d(data, pool_size, strides, dilation, padding, "avg", ceil_mode, layout,
                  count_include_pad)


__all__ = ["avg_pool2d", "max_pool2d", "pool2d"]
