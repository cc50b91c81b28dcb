"""Weight-only group quantization: the packed format, its numpy reference, and the matmul kernel
that dequantizes as it multiplies.

A float weight ``W`` of shape (k, n), used as ``x @ W``, is cut along its reduction axis into
groups of ``group_size`` rows (default 32). Each group of each column gets one scale
``s = max|W[group, j]| / qmax`` (symmetric, no zero point), and each weight becomes the integer
``q = clip(round(W / s), -qmax, qmax)``; ``dequantize`` gives back ``q * s``, so every weight is off
by at most ``s / 2`` (half a quantization step).

=======  ====  =======================================================================
scheme   qmax  storage
=======  ====  =======================================================================
int8     127   ``q`` as int8, shape (k, n): one byte per weight
int4     7     ``q + 7`` (0..14) as a 4-bit field, eight per uint32 word, shape (k / 8, n):
               word ``[w, j]`` holds rows ``8w .. 8w+7`` of column ``j``, row ``8w + c`` in
               bits ``4c .. 4c+3`` (the first row in the lowest bits)
=======  ====  =======================================================================

Scales have shape (k / group_size, n), float32 or float16. This is the layout of the group
quantization that MLC-LLM uses for its q4f32/q4f16 models (values packed along the reduction
axis, one scale per group of 32); here the weight keeps the (k, n) orientation of ``x @ W`` so
that neighbouring output columns read neighbouring words.

>>> import numpy as np
>>> w = np.array([[0.7], [-0.1], [0.2], [0.0], [0.4], [-0.7], [0.1], [0.6]], "float32")
>>> packed, scale = quantize(w, bits=4, group_size=8)
>>> scale                                            # 0.7 / 7
array([[0.1]], dtype=float32)
>>> hex(int(packed[0, 0]))                           # rows 7 .. 0 as hex digits: q + 7
'0xd80b796e'
>>> dequantize(packed, scale, bits=4).ravel().round(3)
array([ 0.7, -0.1,  0.2,  0. ,  0.4, -0.7,  0.1,  0.6], dtype=float32)
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import te
from ..tir import dtype as dt
from .utils import check_tensor, shape_text, static_value

SCHEMES = {8: ("int8", 127, 1), 4: ("uint32", 7, 8)}   # bits: (storage dtype, qmax, values a word)


class QuantizeError(ValueError):
    """A weight that the scheme cannot quantize (the message names the weight and the rule)."""


def check_scheme(shape, bits: int, group_size: int, name: str = "weight") -> None:
    """Raise QuantizeError unless a (k, n) weight ``name`` fits the scheme: ``bits`` 4 or 8,
    ``group_size`` dividing k (and, for int4, a multiple of the 8 values of a word)."""
    if bits not in SCHEMES:
        raise QuantizeError(f"quantize {name}: bits must be 4 or 8, got {bits!r}")
    if not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise QuantizeError(f"quantize {name}: group_size must be a positive int, got {group_size!r}")
    if len(shape) != 2:
        raise QuantizeError(f"quantize {name}: the weight must be 2-D (k, n), got shape {tuple(shape)}")
    per_word = SCHEMES[bits][2]
    if group_size % per_word:
        raise QuantizeError(f"quantize {name}: int{bits} packs {per_word} values a word along k, so "
                            f"group_size must be a multiple of {per_word}, got {group_size}")
    if shape[0] % group_size:
        raise QuantizeError(f"quantize {name}: group_size {group_size} does not divide the reduction "
                            f"dimension k={shape[0]} of its shape {tuple(shape)}; every group of rows "
                            "along k needs its own full set of values")


def quantize(weight, bits: int = 4, group_size: int = 32, scale_dtype: str = "float32",
             name: str = "weight") -> tuple[np.ndarray, np.ndarray]:
    """(packed values, scales) of the float (k, n) ``weight``; see the module docstring for the
    layout. The integers are rounded against the scale as stored (a float16 scale rounds first),
    half away from zero."""
    weight = np.asarray(weight)
    check_scheme(weight.shape, bits, group_size, name)
    if scale_dtype not in ("float32", "float16"):
        raise QuantizeError(f"quantize {name}: scale_dtype must be float32 or float16, got {scale_dtype!r}")
    storage, qmax, per_word = SCHEMES[bits]
    k, n = weight.shape
    groups = weight.astype("float64").reshape(k // group_size, group_size, n)
    scale = (np.abs(groups).max(axis=1) / qmax).astype(scale_dtype)
    step = scale.astype("float64")[:, None, :]
    safe = np.where(step > 0, step, 1.0)
    q = np.clip(np.sign(groups) * np.floor(np.abs(groups) / safe + 0.5), -qmax, qmax)
    q = q.reshape(k, n).astype("int64")
    if bits == 8:
        return q.astype(storage), scale
    fields = (q + qmax).astype("uint32").reshape(k // per_word, per_word, n)
    shifts = (4 * np.arange(per_word, dtype="uint32"))[None, :, None]
    return np.bitwise_or.reduce(fields << shifts, axis=1).astype(storage), scale


def unpack(packed: np.ndarray, bits: int) -> np.ndarray:
    """The signed integers ``q`` (int64, shape (k, n)) of a packed array."""
    _, qmax, per_word = SCHEMES[bits]
    if bits == 8:
        return packed.astype("int64")
    words, n = packed.shape
    shifts = (4 * np.arange(per_word, dtype="uint32"))[None, :, None]
    fields = (packed.astype("uint32")[:, None, :] >> shifts) & np.uint32(15)
    return fields.reshape(words * per_word, n).astype("int64") - qmax


def dequantize(packed: np.ndarray, scale: np.ndarray, bits: int = 4) -> np.ndarray:
    """The float32 (k, n) weight that ``packed`` and ``scale`` stand for: ``q * s``."""
    q = unpack(packed, bits)
    group_size = q.shape[0] // scale.shape[0]
    return (q * np.repeat(scale.astype("float32"), group_size, axis=0)).astype("float32")


def error_bound(scale: np.ndarray, group_size: int) -> np.ndarray:
    """The largest error ``|W - dequantize(...)|`` allowed per weight: half a step, ``s / 2``,
    (k, n) like the weight."""
    return np.repeat(scale.astype("float64"), group_size, axis=0) / 2


# -- the kernel -----------------------------------------------------------------------------------

def _field(word, c: int):
    """The ``c``-th 4-bit field of a uint32 word, by a constant division and remainder (a shift
    and a mask once compiled)."""
    field = word // (1 << (4 * c)) if c else word
    return (field if c == 7 else field % 16).astype("int32")   # 0..15: a signed int converts faster


def quantized_matmul(x: te.Tensor, packed: te.Tensor, scale: te.Tensor, bits: int = 4,
                     name: str = "quantized_matmul") -> te.Tensor:
    """``x @ dequantize(packed, scale)`` in one reduction (stage ``name``): x is (..., k) float32,
    packed and scale as ``quantize`` writes them; the result is (..., n) float32. The float
    weight is never stored: each step of the reduction reads one packed word (int4: eight
    weights of one column, multiplied with eight values of x and summed before the group's
    scale is applied) or one int8 weight."""
    for t, arg in ((x, "x"), (packed, "packed"), (scale, "scale")):
        check_tensor(t, "quantized_matmul", arg)
    if bits not in SCHEMES:
        raise ValueError(f"topi.quantized_matmul: bits must be 4 or 8, got {bits!r}")
    storage, qmax, per_word = SCHEMES[bits]
    if x.dtype != "float32" or packed.dtype != storage or scale.dtype not in ("float32", "float16"):
        raise TypeError(f"topi.quantized_matmul: int{bits} wants float32 x, {storage} packed and a "
                        f"float32/float16 scale, got {x.dtype}, {packed.dtype}, {scale.dtype}")
    if x.ndim < 1 or packed.ndim != 2 or scale.ndim != 2:
        raise ValueError("topi.quantized_matmul: x must be (..., k), packed and scale 2-D; got "
                         f"{shape_text(x.shape)}, {shape_text(packed.shape)}, {shape_text(scale.shape)}")
    words, n = (static_value(d) for d in packed.shape)
    k, groups = static_value(x.shape[-1]), static_value(scale.shape[0])
    if None in (words, n, k, groups) or k != words * per_word or k % groups \
            or static_value(scale.shape[1]) != n or (k // groups) % per_word:
        raise ValueError(f"topi.quantized_matmul: shapes do not fit int{bits}: x "
                         f"{shape_text(x.shape)}, packed {shape_text(packed.shape)}, scale "
                         f"{shape_text(scale.shape)} (want k = {per_word} x packed rows, a "
                         "static n, and groups dividing k)")
    words_per_group = k // groups // per_word
    w = te.reduce_axis(words, name="k")

    def element(*indices):
        rows, j = indices[:-1], indices[-1]
        s = scale[w // words_per_group, j] if words_per_group > 1 else scale[w, j]
        s = s if scale.dtype == "float32" else s.astype("float32")
        if bits == 8:
            return te.sum(x[rows + (w,)] * packed[w, j].astype("float32") * s, axis=w)
        word, xs = packed[w, j], [x[rows + (w * per_word + c,)] for c in range(per_word)]
        # sum_c x_c (field_c - qmax) = sum_c x_c field_c - qmax sum_c x_c: the second sum does
        # not depend on the column, so it is computed once for all columns
        dot, total = xs[0] * _field(word, 0).astype("float32"), xs[0]
        for c in range(1, per_word):
            dot, total = dot + xs[c] * _field(word, c).astype("float32"), total + xs[c]
        return te.sum((dot - total * te.const(float(qmax), "float32")) * s, axis=w)

    return te.compute(tuple(x.shape[:-1]) + (packed.shape[1],), element, name=name)


def packed_shapes(k: int, n: int, bits: int, group_size: int) -> tuple[tuple, tuple]:
    """The shapes of (packed values, scales) of a (k, n) weight."""
    return (k // SCHEMES[bits][2], n), (k // group_size, n)


def storage_dtype(bits: int) -> str:
    return SCHEMES[bits][0]


def weight_bytes(k: int, n: int, bits: int, group_size: int, scale_dtype: Optional[str] = "float32") -> int:
    """Bytes a quantized (k, n) weight occupies (values and scales)."""
    return k * n * bits // 8 + (k // group_size) * n * dt.bits(scale_dtype) // 8
