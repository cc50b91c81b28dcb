"""Normalizations (``relax.op.nn.layer_norm``, ``relax.op.nn.rms_norm``) and the transformer
activations (``relax.op.nn.gelu``, ``gelu_tanh``, ``silu``).

    >>> from mlc_lab import relax, tir
    >>> from mlc_lab.relax.op import nn
    >>> n = tir.Var("n", "int64")
    >>> x = relax.Var("x", relax.TensorStructInfo((1, n, 64), "float32"))
    >>> g = relax.Var("g", relax.TensorStructInfo((64,), "float32"))
    >>> nn.layer_norm(x, g, g, axes=-1).struct_info
    R.Tensor((1, n, 64), dtype="float32")
    >>> nn.rms_norm(x, relax.Var("w", relax.TensorStructInfo((32,), "float32")), axes=-1)
    Traceback (most recent call last):
    ...
    ValueError: relax.op.nn.rms_norm: weight must have the sizes of data on axes [2], i.e. (64,), got (32,)
"""
from __future__ import annotations

from ..expr import Call
from ..struct_info import TensorStructInfo, shape_text
from .infer import (check_arity, dims_differ, normalize_axes, require_float, tensor_arg,
                    user_name)
from .registry import make_call, register_op
from .unary import infer_float_unary


def _infer_norm(call: Call, names: tuple) -> TensorStructInfo:
    """data is a float tensor; each parameter has data's dtype and, on the normalized axes,
    data's sizes (one dimension per axis)."""
    check_arity(call, names)
    data = tensor_arg(call, 0, "data")
    require_float(call, "data", data)
    raw_axes = call.attrs.axes
    axes = normalize_axes(call, raw_axes, data.ndim, "data") if data.ndim >= 0 else None
    for index, name in enumerate(names[1:], 1):
        param = tensor_arg(call, index, name)
        if param.dtype != data.dtype:
            raise TypeError(f"{user_name(call)}: {name} is {param.dtype} but data is {data.dtype}; "
                            "they must share one dtype")
        if param.ndim >= 0 and param.ndim != len(raw_axes):
            raise ValueError(f"{user_name(call)}: {name} must have one dimension per normalized "
                             f"axis ({len(raw_axes)}, axes {list(raw_axes)}), got "
                             f"{shape_text(param.shape)}")
        if axes is None or data.shape is None or param.shape is None:
            continue
        expected = tuple(data.shape[a] for a in axes)
        if any(dims_differ(p, e) for p, e in zip(param.shape, expected)):
            raise ValueError(f"{user_name(call)}: {name} must have the sizes of data on axes "
                             f"{list(axes)}, i.e. {shape_text(expected)}, got "
                             f"{shape_text(param.shape)}")
    return data


register_op("relax.nn.layer_norm", lambda call: _infer_norm(call, ("data", "gamma", "beta")))
register_op("relax.nn.rms_norm", lambda call: _infer_norm(call, ("data", "weight")))


def _axes(axes) -> tuple:
    return (axes,) if isinstance(axes, int) else tuple(axes)


def layer_norm(data, gamma, beta, axes, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> Call:
    """``(data - mean) / sqrt(var + epsilon) * gamma + beta``, the statistics taken over
    ``axes`` (an int or a list); ``gamma`` and ``beta`` have data's sizes on those axes.
    ``center=False`` leaves out ``beta``, ``scale=False`` leaves out ``gamma``."""
    attrs = {"axes": _axes(axes), "epsilon": float(epsilon), "center": bool(center),
             "scale": bool(scale)}
    return make_call("relax.nn.layer_norm", (data, gamma, beta), attrs)


def rms_norm(data, weight, axes=-1, epsilon: float = 1e-5) -> Call:
    """``data / sqrt(mean(data ** 2) + epsilon) * weight``, the mean taken over ``axes``;
    ``weight`` has data's sizes on those axes."""
    attrs = {"axes": _axes(axes), "epsilon": float(epsilon)}
    return make_call("relax.nn.rms_norm", (data, weight), attrs)


for _name in ("gelu", "gelu_tanh", "silu"):
    register_op(f"relax.nn.{_name}", infer_float_unary)


def gelu(data) -> Call:
    """GELU, erf form: ``0.5 * x * (1 + erf(x / sqrt(2)))`` elementwise (float tensors)."""
    return make_call("relax.nn.gelu", (data,))


def gelu_tanh(data) -> Call:
    """GELU, tanh approximation: ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x**3)))``."""
    return make_call("relax.nn.gelu_tanh", (data,))


def silu(data) -> Call:
    """SiLU (swish): ``x * sigmoid(x)`` elementwise (float tensors)."""
    return make_call("relax.nn.silu", (data,))


__all__ = ["gelu", "gelu_tanh", "layer_norm", "rms_norm", "silu"]
