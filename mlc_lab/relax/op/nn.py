"""Neural-network ops (``relax.op.nn.*``): relu, softmax, log_softmax, conv2d, max_pool2d,
avg_pool2d, and the course-era dense; layer_norm, rms_norm, gelu, gelu_tanh and silu live in
norm.py. Images are NCHW and kernels OIHW."""
from __future__ import annotations

from typing import Optional

from ...arith import simplify
from ...tir import dtype as dt
from ...tir.expr import FloorDiv
from ..expr import Call
from ..struct_info import TensorStructInfo, dim_value, dims_equal, shape_text, to_dim
from .infer import (check_arity, normalize_axis, padding4, pair, require_float, same_dtype,
                     tensor_arg, unknown_tensor, user_name)
from .linear_algebra import dense
from .norm import gelu, gelu_tanh, layer_norm, rms_norm, silu
from .registry import make_call, register_op
from .unary import infer_unary


register_op("relax.nn.relu", infer_unary)


def relu(data) -> Call:
    """``max(data, 0)`` elementwise."""
    return make_call("relax.nn.relu", (data,))


def _infer_softmax(call: Call) -> TensorStructInfo:
    check_arity(call, ("data",))
    sinfo = tensor_arg(call, 0, "data")
    require_float(call, "data", sinfo)
    if sinfo.ndim >= 0:
        if sinfo.ndim == 0:
            raise ValueError(f"{user_name(call)}: data is a scalar; softmax needs an axis")
        normalize_axis(call, call.attrs.axis, sinfo.ndim, "data")
    return sinfo


register_op("relax.nn.softmax", _infer_softmax)
register_op("relax.nn.log_softmax", _infer_softmax)


def softmax(data, axis: int = -1) -> Call:
    """``exp(data) / sum(exp(data), axis)`` along ``axis``."""
    return make_call("relax.nn.softmax", (data,), {"axis": axis})


def log_softmax(data, axis: int = -1) -> Call:
    """``log(softmax(data, axis))``, computed stably."""
    return make_call("relax.nn.log_softmax", (data,), {"axis": axis})


def _window_out(call: Call, what: str, size, kernel, stride: int, pad: int, dilation: int,
                ceil_mode: bool = False):
    """Output length of a sliding window: (size + pad - dilation*(kernel-1) - 1) // stride + 1."""
    span_extra = dilation * (dim_value(kernel) - 1) if dim_value(kernel) is not None else None
    static = dim_value(size)
    if static is not None and span_extra is not None:
        reach = static + pad - span_extra - 1
        if reach < 0:
            raise ValueError(f"{user_name(call)}: the {what} window ({dim_value(kernel)} with "
                             f"dilation {dilation}) is larger than the padded input ({static} + {pad})")
        return to_dim((reach + (stride - 1 if ceil_mode else 0)) // stride + 1)
    kernel_extent = to_dim(dilation) * (to_dim(kernel) - to_dim(1))
    reach = to_dim(size) + to_dim(pad + (stride - 1 if ceil_mode else 0)) - kernel_extent - to_dim(1)
    return simplify(FloorDiv(reach, to_dim(stride)) + to_dim(1))


def _infer_conv2d(call: Call) -> TensorStructInfo:
    check_arity(call, ("data", "weight"))
    data, weight = tensor_arg(call, 0, "data"), tensor_arg(call, 1, "weight")
    dtype = same_dtype(call, [("data", data), ("weight", weight)])
    dtype = call.attrs.get("out_dtype") or dtype
    for name, sinfo in (("data", data), ("weight", weight)):
        if sinfo.ndim not in (-1, 4):
            raise ValueError(f"{user_name(call)}: {name} must be 4-D "
                             f"({'NCHW' if name == 'data' else 'OIHW'}), got {shape_text(sinfo.shape)}")
    if data.shape is None or weight.shape is None:
        return unknown_tensor(dtype, 4)
    n, c, h, w = data.shape
    o, ci, kh, kw = weight.shape
    groups = call.attrs.groups
    c_static, o_static = dim_value(c), dim_value(o)
    if o_static is not None and o_static % groups:
        raise ValueError(f"{user_name(call)}: the {o_static} output channels of weight "
                         f"{shape_text(weight.shape)} do not divide into groups={groups}")
    if c_static is not None and c_static % groups:
        raise ValueError(f"{user_name(call)}: the {c_static} input channels of data "
                         f"{shape_text(data.shape)} do not divide into groups={groups}")
    expect = c if groups == 1 else (to_dim(c_static // groups) if c_static is not None else None)
    if expect is not None and dims_equal(expect, ci) is False:
        raise ValueError(f"{user_name(call)}: the input channels differ: data {shape_text(data.shape)} "
                         f"has {c_static} (axis 1{f', /{groups} groups' if groups > 1 else ''}) but "
                         f"weight {shape_text(weight.shape)} expects {dim_value(ci)} (axis 1)")
    (sh, sw), (dh, dw) = call.attrs.strides, call.attrs.dilation
    top, left, bottom, right = call.attrs.padding
    oh = _window_out(call, "height", h, kh, sh, top + bottom, dh)
    ow = _window_out(call, "width", w, kw, sw, left + right, dw)
    return TensorStructInfo((n, o, oh, ow), dtype)


register_op("relax.nn.conv2d", _infer_conv2d)


def conv2d(data, weight, strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups: int = 1,
           data_layout: str = "NCHW", kernel_layout: str = "OIHW",
           out_dtype: Optional[str] = None) -> Call:
    """2-D convolution of ``data`` (N, C, H, W) with ``weight`` (O, C/groups, KH, KW).
    ``padding`` is p, (p_h, p_w) or (top, left, bottom, right)."""
    name = "relax.nn.conv2d"
    if (data_layout, kernel_layout) != ("NCHW", "OIHW"):
        raise NotImplementedError(f"{user_name(name)}: only NCHW data and OIHW kernels are supported, "
                                  f"got {data_layout}/{kernel_layout}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{user_name(name)}: groups must be a positive int, got {groups!r}")
    attrs = {"strides": pair(name, strides, "strides"), "padding": padding4(name, padding),
             "dilation": pair(name, dilation, "dilation"), "groups": groups,
             "data_layout": data_layout, "kernel_layout": kernel_layout}
    if out_dtype:
        attrs["out_dtype"] = dt.check_dtype(out_dtype)
    return make_call(name, (data, weight), attrs)


def _infer_pool2d(call: Call) -> TensorStructInfo:
    check_arity(call, ("data",))
    data = tensor_arg(call, 0, "data")
    if data.ndim not in (-1, 4):
        raise ValueError(f"{user_name(call)}: data must be 4-D (NCHW), got {shape_text(data.shape)}")
    if data.shape is None:
        return unknown_tensor(data.dtype, 4)
    n, c, h, w = data.shape
    (kh, kw), (sh, sw), (dh, dw) = call.attrs.pool_size, call.attrs.strides, call.attrs.dilation
    top, left, bottom, right = call.attrs.padding
    ceil_mode = call.attrs.ceil_mode
    oh = _window_out(call, "height", h, to_dim(kh), sh, top + bottom, dh, ceil_mode)
    ow = _window_out(call, "width", w, to_dim(kw), sw, left + right, dw, ceil_mode)
    return TensorStructInfo((n, c, oh, ow), data.dtype)


register_op("relax.nn.max_pool2d", _infer_pool2d)
register_op("relax.nn.avg_pool2d", _infer_pool2d)


def _pool(name: str, data, pool_size, strides, padding, dilation, ceil_mode, layout) -> Call:
    if layout != "NCHW":
        raise NotImplementedError(f"{user_name(name)}: only the NCHW layout is supported, got {layout}")
    attrs = {"pool_size": pair(name, pool_size, "pool_size"),
             "strides": pair(name, strides if strides is not None else pool_size, "strides"),
             "padding": padding4(name, padding), "dilation": pair(name, dilation, "dilation"),
             "ceil_mode": bool(ceil_mode), "layout": layout}
    return make_call(name, (data,), attrs)


def max_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), dilation=(1, 1),
               ceil_mode: bool = False, layout: str = "NCHW") -> Call:
    """The maximum over each ``pool_size`` window of ``data`` (N, C, H, W)."""
    return _pool("relax.nn.max_pool2d", data, pool_size, strides, padding, dilation, ceil_mode, layout)


def avg_pool2d(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0), dilation=(1, 1),
               ceil_mode: bool = False, layout: str = "NCHW") -> Call:
    """The mean over each ``pool_size`` window of ``data`` (N, C, H, W)."""
    return _pool("relax.nn.avg_pool2d", data, pool_size, strides, padding, dilation, ceil_mode, layout)


__all__ = ["avg_pool2d", "conv2d", "dense", "gelu", "gelu_tanh", "layer_norm", "log_softmax",
           "max_pool2d", "relu", "rms_norm", "silu", "softmax"]
