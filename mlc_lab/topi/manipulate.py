"""Layout operators: reshape, flatten, transpose and pad. They move elements, never change them."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .. import te
from ..arith import can_prove, simplify
from ..tir.expr import PrimExpr, const, convert
from .utils import (check_tensor, compute, normalize_axis, product, same_dim, shape_text,
                    simplify_index, static_value)


def reshape(x: te.Tensor, newshape: Sequence) -> te.Tensor:
    """The elements of ``x`` in row-major order, laid out as ``newshape`` (stage "T_reshape").

    One entry of ``newshape`` may be -1: it is inferred from the others. Entries may be symbolic
    when their product provably equals the number of elements of ``x``."""
    check_tensor(x, "reshape")
    shape = _new_shape(x, newshape)
    if len(shape) == x.ndim and all(same_dim(a, b) for a, b in zip(shape, x.shape)):
        return compute(shape, lambda *i: x[i], "T_reshape")

    # Leading dimensions the two shapes share (a symbolic length n kept in front) are indexed as
    # they are; only the rest is flattened and laid out again, so no index divides by n.
    same = 0
    while same < min(len(shape), x.ndim) - 1 and same_dim(shape[same], x.shape[same]):
        same += 1

    def element(*indices):
        flat = const(0, "int32")
        for index, dim in zip(indices[same:], shape[same:]):
            flat = flat * dim + index
        source = list(indices[:same])
        for d, dim in enumerate(x.shape[same:], start=same):
            stride = product(x.shape[d + 1:])
            index = flat // stride if d == same else flat // stride % dim
            source.append(simplify_index(index, indices))
        return x[tuple(source)]

    return compute(shape, element, "T_reshape")


def _new_shape(x: te.Tensor, newshape) -> tuple:
    if isinstance(newshape, (int, np.integer, PrimExpr)):
        newshape = (newshape,)
    if not isinstance(newshape, (tuple, list)):
        raise TypeError(f"topi.reshape: newshape must be a tuple of ints or PrimExprs, got {newshape!r}")
    entries = []
    for s in newshape:
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            if s < -1:
                raise ValueError(f"topi.reshape: newshape {tuple(newshape)!r} has the negative entry "
                                 f"{s}; only -1 (infer this dimension) is allowed")
            entries.append(int(s))
        elif isinstance(s, PrimExpr):
            entries.append(s)
        else:
            raise TypeError(f"topi.reshape: newshape entries must be ints or PrimExprs, got {s!r}")
    known = [s for s in entries if not (isinstance(s, int) and s == -1)]
    total, known_total = product(x.shape), product(known)
    if len(known) < len(entries) - 1:
        raise ValueError(f"topi.reshape: newshape {_text(entries)} has more than one -1")
    if len(known) == len(entries) - 1:
        if static_value(known_total) == 0:
            raise ValueError(f"topi.reshape: cannot infer the -1 in {_text(entries)} next to a "
                             "dimension of 0")
        inferred = simplify(total // known_total)
        if not can_prove(convert(inferred * known_total) == total):
            raise ValueError(f"topi.reshape: cannot infer the -1 in {_text(entries)}: "
                             f"{shape_text(x.shape)} has {total} elements, which is not a multiple "
                             f"of {known_total}")
        entries = [inferred if isinstance(s, int) and s == -1 else s for s in entries]
    elif not can_prove(convert(known_total) == total):
        raise ValueError(f"topi.reshape: cannot reshape {x.name} of shape {shape_text(x.shape)} "
                         f"({total} elements) to {_text(entries)} ({known_total} elements)")
    return tuple(convert(s) for s in entries)


def _text(entries) -> str:
    return shape_text([convert(s) for s in entries])


def flatten(x: te.Tensor) -> te.Tensor:
    """Keep axis 0 and flatten the others into one: (N, C, H, W) -> (N, C*H*W) (stage "T_reshape")."""
    check_tensor(x, "flatten")
    if x.ndim < 1:
        raise ValueError(f"topi.flatten: data {x.name} must have at least one dimension, got a 0-D "
                         "tensor")
    return reshape(x, (x.shape[0], product(x.shape[1:])))


def transpose(x: te.Tensor, axes: Optional[Sequence[int]] = None) -> te.Tensor:
    """Permute the dimensions: output dimension d is input dimension ``axes[d]``; by default the
    order is reversed (stage "T_transpose")."""
    check_tensor(x, "transpose")
    if axes is None:
        axes = list(range(x.ndim))[::-1]
    if not isinstance(axes, (tuple, list)):
        raise TypeError(f"topi.transpose: axes must be a sequence of ints, got {axes!r}")
    if len(axes) != x.ndim:
        raise ValueError(f"topi.transpose: axes {tuple(axes)!r} must list each of the {x.ndim} "
                         f"dimensions of {x.name} (shape {shape_text(x.shape)}) once")
    perm = [normalize_axis(a, x.ndim, "transpose", x.shape) for a in axes]
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"topi.transpose: axes {tuple(axes)!r} is not a permutation of the "
                         f"{x.ndim} dimensions of {x.name} (shape {shape_text(x.shape)})")

    def element(*indices):
        source = [None] * x.ndim
        for out_dim, in_dim in enumerate(perm):
            source[in_dim] = indices[out_dim]
        return x[tuple(source)]

    return compute([x.shape[a] for a in perm], element, "T_transpose")


def permute_dims(x: te.Tensor, axes: Optional[Sequence[int]] = None) -> te.Tensor:
    """The array-API name of :func:`transpose`."""
    return transpose(x, axes)


def pad(x: te.Tensor, pad_before: Sequence[int], pad_after: Optional[Sequence[int]] = None,
        pad_value=0, name: str = "PadInput") -> te.Tensor:
    """``x`` surrounded by ``pad_value``: dimension d gets ``pad_before[d]`` elements in front and
    ``pad_after[d]`` (default: ``pad_before[d]``) behind."""
    check_tensor(x, "pad")
    pad_after = pad_before if pad_after is None else pad_after
    before, after = (_pad_widths(p, x, label) for p, label in
                     ((pad_before, "pad_before"), (pad_after, "pad_after")))
    fill = pad_value if isinstance(pad_value, PrimExpr) else const(pad_value, x.dtype)
    shape = [simplify(dim + b + a) for dim, b, a in zip(x.shape, before, after)]

    def element(*indices):
        inside = None
        source = []
        for index, dim, b, a in zip(indices, x.shape, before, after):
            source.append(simplify_index(index - b, indices) if b else index)
            conditions = ([index >= b] if b else []) + ([index < simplify(dim + b)] if a else [])
            for cond in conditions:
                inside = cond if inside is None else inside & cond
        if inside is None:
            return x[tuple(source)]
        return te.if_then_else(inside, x[tuple(source)], fill)

    return compute(shape, element, name, axis_prefix="i")


def _pad_widths(widths, x: te.Tensor, label: str) -> list:
    if not isinstance(widths, (tuple, list)) or len(widths) != x.ndim or not all(
            isinstance(w, (int, np.integer)) and w >= 0 for w in widths):
        raise ValueError(f"topi.pad: {label} must give a non-negative int for each of the "
                         f"{x.ndim} dimensions of {x.name} (shape {shape_text(x.shape)}), got "
                         f"{widths!r}")
    return [int(w) for w in widths]


__all__ = ["flatten", "pad", "permute_dims", "reshape", "transpose"]
