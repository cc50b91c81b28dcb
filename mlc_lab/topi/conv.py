"""2-D convolution in NCHW layout: a "pad_temp" stage (when there is padding), then "conv2d_nchw"."""
from __future__ import annotations

from typing import Optional

from .. import te
from ..arith import simplify
from .manipulate import pad
from .utils import (check_operands, int_tuple, padding_2d, shape_text,
                    static_value)


def conv2d_nchw(data: te.Tensor, kernel: te.Tensor, stride=1, padding=0, dilation=1,
                out_dtype: Optional[str] = None) -> te.Tensor:
    """Convolve ``data`` (batch, in_channel, height, width) with ``kernel`` (out_channel,
    in_channel, kernel_h, kernel_w).

    ``stride`` and ``dilation`` are an int or (h, w); ``padding`` is an int, (pad_h, pad_w), or
    (top, left, bottom, right), filled with zeros. Output height is
    ``(height + top + bottom - dilation_h * (kernel_h - 1) - 1) // stride_h + 1``, likewise width.
    """
    check_operands("conv2d_nchw", data, "data", "batch, in_channel, height, width", kernel, "kernel",
                   "out_channel, in_channel, kernel_h, kernel_w", "in_channel",
                   "; data's dimension 1 must equal kernel's dimension 1")
    stride_h, stride_w = int_tuple(stride, 2, "conv2d_nchw", "stride")
    dil_h, dil_w = int_tuple(dilation, 2, "conv2d_nchw", "dilation")
    top, left, bottom, right = padding_2d(padding, "conv2d_nchw")
    batch, in_channel, height, width = data.shape
    out_channel, _, kernel_h, kernel_w = kernel.shape
    out_h = simplify((height + top + bottom - (kernel_h - 1) * dil_h - 1) // stride_h + 1)
    out_w = simplify((width + left + right - (kernel_w - 1) * dil_w - 1) // stride_w + 1)
    for extent, axis in ((out_h, "height"), (out_w, "width")):
        if static_value(extent) is not None and static_value(extent) < 1:
            raise ValueError(f"topi.conv2d_nchw: the output {axis} would be {extent}: the dilated "
                             f"kernel of shape {shape_text(kernel.shape)} does not fit data of shape "
                             f"{shape_text(data.shape)} padded by {(top, left, bottom, right)}")
    padded = data if not any((top, left, bottom, right)) else pad(
        data, (0, 0, top, left), (0, 0, bottom, right), name="pad_temp")
    out_dtype = out_dtype or data.dtype
    rc = te.reduce_axis(in_channel, name="rc")
    ry = te.reduce_axis(kernel_h, name="ry")
    rx = te.reduce_axis(kernel_w, name="rx")
    def element(nn, ff, yy, xx):
        row = simplify(yy * stride_h + ry * dil_h)
        col = simplify(xx * stride_w + rx * dil_w)
        return te.sum(padded[nn, rc, row, col].astype(out_dtype)
                      * kernel[ff, rc, ry, rx].astype(out_dtype), axis=[rc, ry, rx])

    return te.compute((batch, out_channel, out_h, out_w), element, name="conv2d_nchw")


def conv2d(data: te.Tensor, kernel: te.Tensor, stride=1, padding=0, dilation=1,
           layout: str = "NCHW", out_dtype: Optional[str] = None) -> te.Tensor:
    """:func:`conv2d_nchw`; ``layout`` must be "NCHW"."""
    if layout != "NCHW":
        raise ValueError(f"topi.conv2d: layout {layout!r} is not supported; use 'NCHW'")
    return conv2d_nchw(data, kernel, stride, padding, dilation, out_dtype)


__all__ = ["conv2d", "conv2d_nchw"]
