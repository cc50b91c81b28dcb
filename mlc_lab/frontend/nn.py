"""A small model builder with numpy weights: layers that compute in numpy (``forward_numpy``, the
reference) and emit the same computation as high-level relax ops (``to_relax``).

    from mlc_lab.frontend import nn
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10, seed=1))
    mod = model.to_relax((1, 784))                    # weights are relax Constants
    mod, params = model.to_relax((1, 784), keep_params_in_input=True)
    # main(x, linear0_weight, linear0_bias, ...): params maps those names to the numpy arrays

Layouts follow PyTorch: Linear weights are (out_features, in_features), images NCHW, kernels OIHW.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from .. import relax
from ..tir import dtype as dt


class WeightBinder:
    """Turns named numpy weights into relax expressions while a function is built: Constants, or
    (``keep_params_in_input=True``) new function parameters whose arrays are kept in ``arrays``.
    Weights are cast to ``dtype``; None keeps each array's own dtype."""

    def __init__(self, dtype: Optional[str], keep_params_in_input: bool):
        self.dtype = dtype
        self.keep_params_in_input = keep_params_in_input
        self.params: list = []
        self.arrays: dict = {}

    def __call__(self, name: str, array) -> relax.Expr:
        array = np.ascontiguousarray(array, dtype=dt.to_numpy(self.dtype) if self.dtype else None)
        if not self.keep_params_in_input:
            return relax.const(array)
        if name in self.arrays:
            if not np.array_equal(self.arrays[name], array):
                raise ValueError(f"two different weights are named {name!r}; weight names must be unique")
            return next(p for p in self.params if p.name_hint == name)
        var = relax.Var(name, relax.TensorStructInfo(array.shape, array.dtype.name))
        self.params.append(var)
        self.arrays[name] = array
        return var


def build_module(name: str, inputs: list, body: Callable, dtype: Optional[str] = "float32",
                 keep_params_in_input: bool = False):
    """The module with one function ``name(*inputs[, *weights])`` returning ``body(bb, weight)``,
    where ``weight(name, array)`` gives a weight's expression. Returns the IRModule, or
    ``(mod, params)`` with ``keep_params_in_input``, params being {name: array} in parameter order."""
    weight = WeightBinder(dtype, keep_params_in_input)
    bb = relax.BlockBuilder()
    with bb.function(name):
        with bb.dataflow():
            out = bb.emit_output(body(bb, weight))
        bb.emit_func_output(out, list(inputs) + weight.params)
    mod = bb.get()
    return (mod, weight.arrays) if keep_params_in_input else mod


class Module:
    """Base of layers. A layer computes ``forward_numpy(x)`` and emits the same computation with
    ``emit(bb, x, weight, name)``; ``name`` prefixes the names of its weights."""

    def forward_numpy(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def emit(self, bb: relax.BlockBuilder, x: relax.Expr, weight: WeightBinder, name: str) -> relax.Expr:
        raise NotImplementedError

    def __call__(self, x) -> np.ndarray:
        return self.forward_numpy(np.asarray(x))

    def parameters(self) -> dict:
        """The layer's weights by name (``weight``, ``bias``; ``linear0_weight`` ... in a Sequential)."""
        return {k: v for k, v in (("weight", getattr(self, "weight", None)),
                                  ("bias", getattr(self, "bias", None))) if v is not None}

    def to_relax(self, input_shape, dtype: str = "float32", name: str = "main",
                 keep_params_in_input: bool = False):
        """An IRModule whose function ``name(x)`` runs the model on ``x`` of ``input_shape``.
        Weights are Constants, or with ``keep_params_in_input`` parameters after ``x``: then the
        result is ``(mod, params)``, params mapping each weight parameter's name to its array."""
        x = relax.Var("x", relax.TensorStructInfo(tuple(input_shape), dtype))
        return build_module(name, [x], lambda bb, weight: self.emit(bb, x, weight, self._top_name()),
                            dtype, keep_params_in_input)

    def _top_name(self) -> str:
        return type(self).__name__.lower()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self) -> str:
        return ""


def _init_uniform(shapes: tuple, fan_in: int, seed: int) -> list:
    """PyTorch's default initialisation: uniform on +-1/sqrt(fan_in), one array per shape."""
    bound, rng = 1.0 / np.sqrt(fan_in), np.random.default_rng(seed)
    return [rng.uniform(-bound, bound, shape).astype("float32") for shape in shapes]


def _given(what: str, array, shape: tuple) -> np.ndarray:
    array = np.asarray(array, dtype="float32")
    if array.shape != shape:
        raise ValueError(f"{what} must have shape {shape}, got {array.shape}")
    return array


def _pair(value, what: str) -> tuple:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) and v >= 0 for v in pair):
        raise ValueError(f"{what} must be an int or a pair of non-negative ints, got {value!r}")
    return pair


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features) and bias (out_features,).
    Weights not given are drawn from uniform(+-1/sqrt(in_features)) with ``seed``."""

    def __init__(self, in_features: int, out_features: int, weight=None, bias=None, seed: int = 0):
        self.in_features, self.out_features = in_features, out_features
        shape = (out_features, in_features)
        w_init, b_init = _init_uniform((shape, (out_features,)), in_features, seed)
        self.weight = w_init if weight is None else _given("Linear: weight", weight, shape)
        self.bias = b_init if bias is None else _given("Linear: bias", bias, (out_features,))

    def forward_numpy(self, x):
        return x @ self.weight.T + self.bias

    def emit(self, bb, x, weight, name):
        return relax.op.linear(x, weight(f"{name}_weight", self.weight), weight(f"{name}_bias", self.bias))

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}"


class Conv2d(Module):
    """2-D convolution of NCHW images with an OIHW kernel, plus a per-channel bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 weight=None, bias=None, seed: int = 0):
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size, "Conv2d: kernel_size")
        self.stride, self.padding = _pair(stride, "Conv2d: stride"), _pair(padding, "Conv2d: padding")
        shape = (out_channels, in_channels) + self.kernel_size
        fan_in = in_channels * self.kernel_size[0] * self.kernel_size[1]
        w_init, b_init = _init_uniform((shape, (out_channels,)), fan_in, seed)
        self.weight = w_init if weight is None else _given("Conv2d: weight", weight, shape)
        self.bias = b_init if bias is None else _given("Conv2d: bias", bias, (out_channels,))

    def forward_numpy(self, x):
        (ph, pw), (sh, sw) = self.padding, self.stride
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        windows = np.lib.stride_tricks.sliding_window_view(x, self.kernel_size, axis=(2, 3))
        windows = windows[:, :, ::sh, ::sw]
        out = np.einsum("nchwij,ocij->nohw", windows, self.weight, optimize=True)
        return (out + self.bias[:, None, None]).astype(x.dtype)

    def emit(self, bb, x, weight, name):
        out = relax.op.nn.conv2d(x, weight(f"{name}_weight", self.weight), strides=self.stride,
                                 padding=self.padding)
        bias = relax.op.reshape(weight(f"{name}_bias", self.bias), (1, self.out_channels, 1, 1))
        return relax.op.add(out, bias)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class MaxPool2d(Module):
    """The maximum over each window of NCHW images; ``stride`` defaults to ``kernel_size``."""

    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size = _pair(kernel_size, "MaxPool2d: kernel_size")
        self.stride = self.kernel_size if stride is None else _pair(stride, "MaxPool2d: stride")
        self.padding = _pair(padding, "MaxPool2d: padding")

    def forward_numpy(self, x):
        (ph, pw), (sh, sw) = self.padding, self.stride
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
        windows = np.lib.stride_tricks.sliding_window_view(x, self.kernel_size, axis=(2, 3))
        return windows[:, :, ::sh, ::sw].max(axis=(4, 5))

    def emit(self, bb, x, weight, name):
        return relax.op.nn.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class ReLU(Module):
    def forward_numpy(self, x):
        return np.maximum(x, 0).astype(x.dtype)

    def emit(self, bb, x, weight, name):
        return relax.op.nn.relu(x)


class Flatten(Module):
    """Keep the batch axis and flatten the rest: (N, C, H, W) -> (N, C*H*W)."""

    def forward_numpy(self, x):
        return x.reshape(x.shape[0], -1)

    def emit(self, bb, x, weight, name):
        return relax.op.flatten(x)


class Softmax(Module):
    def __init__(self, axis: int = -1):
        self.axis = axis

    def forward_numpy(self, x):
        e = np.exp(x - x.max(axis=self.axis, keepdims=True))
        return e / e.sum(axis=self.axis, keepdims=True)

    def emit(self, bb, x, weight, name):
        return relax.op.nn.softmax(x, axis=self.axis)

    def extra_repr(self):
        return f"axis={self.axis}"


class Sequential(Module):
    """Layers applied in order. Layer i's weights are named ``<layer kind><i>_weight/_bias``
    (e.g. ``linear0_weight``, ``conv2d3_bias``), as parameters and in ``parameters()``."""

    def __init__(self, *layers: Module):
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: layer {i} must be an nn layer (nn.Linear, nn.ReLU, ...), "
                                f"got {type(layer).__name__}")
        self.layers = tuple(layers)

    def _names(self, name: str = "") -> list:
        prefix = f"{name}_" if name else ""
        return [f"{prefix}{type(layer).__name__.lower()}{i}" for i, layer in enumerate(self.layers)]

    def _top_name(self) -> str:
        return ""

    def forward_numpy(self, x):
        for layer in self.layers:
            x = layer.forward_numpy(x)
        return x

    def emit(self, bb, x, weight, name):
        for i, (layer, layer_name) in enumerate(zip(self.layers, self._names(name))):
            out = layer.emit(bb, x, weight, layer_name)
            x = bb.emit(out) if i < len(self.layers) - 1 else out
        return x

    def parameters(self) -> dict:
        return {f"{layer_name}_{key}": value for layer, layer_name in zip(self.layers, self._names())
                for key, value in layer.parameters().items()}

    def __getitem__(self, index: int) -> Module:
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({i}): {layer!r}" for i, layer in enumerate(self.layers))
        return f"Sequential({inner}\n)"


__all__ = ["Conv2d", "Flatten", "Linear", "MaxPool2d", "Module", "ReLU", "Sequential", "Softmax",
           "WeightBinder", "build_module"]
