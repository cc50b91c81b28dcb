"""Index and layout operators for transformer graphs: split, concatenate, take, strided_slice,
expand_dims, squeeze, broadcast_to; and tensor creation: full, trilu, arange.

Symbolic sizes are welcome wherever the result's shape can be written as an expression of them
(``split`` of a (1, n, 192) tensor into 3 along the last axis, ``take`` of n token ids).

    >>> from mlc_lab import te, topi, tir
    >>> n = tir.Var("n", "int64")
    >>> qkv = te.placeholder((1, n, 192), name="qkv")
    >>> [int(p.shape[2]) for p in topi.split(qkv, 3, axis=2)]
    [64, 64, 64]
    >>> str(topi.concatenate([qkv, qkv], axis=1).shape[1])
    'n * T.int64(2)'
"""
from __future__ import annotations

from typing import Sequence

from .. import te
from ..arith import can_prove, simplify
from ..tir import dtype as dt
from ..tir.expr import FloorMod, IntImm, Max, Min, PrimExpr, Select, const, convert
from .utils import (check_tensor, compute, normalize_axes, normalize_axis, same_dim, shape_text,
                    static_value)


def _int64(value) -> PrimExpr:
    value = convert(value)
    return value if value.dtype == "int64" else value.astype("int64")


def split_extents(op: str, dim, indices_or_sections) -> list:
    """(start, extent) of each piece when a dimension of size ``dim`` is split. An int asks for
    that many pieces of ``ceil(dim / sections)`` (the last one smaller); a list gives the
    (non-negative, non-decreasing) indices where new pieces start."""
    dim = _int64(dim)
    if isinstance(indices_or_sections, (int, IntImm)) and not isinstance(indices_or_sections, bool):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{op}: the number of sections must be positive, got {k}")
        size = simplify((dim + (k - 1)) // k)
        if static_value(dim) is None and not can_prove(FloorMod(dim, convert(k).astype("int64")) == 0):
            raise ValueError(f"{op}: cannot split the symbolic size {dim} into {k} equal sections "
                             f"(it is not provably a multiple of {k}); split by indices, or make "
                             f"the size a multiple of {k}")
        if static_value(dim) is not None and static_value(size) * (k - 1) > static_value(dim):
            raise ValueError(f"{op}: cannot split a size of {static_value(dim)} into {k} sections "
                             f"of {static_value(size)}: the last one would be empty or negative")
        starts = [simplify(size * j) for j in range(k)]
        return [(s, size if j < k - 1 else simplify(dim - s)) for j, s in enumerate(starts)]
    indices = [static_value(i) for i in indices_or_sections]
    if any(i is None or i < 0 for i in indices) or indices != sorted(indices):
        raise ValueError(f"{op}: split indices must be non-negative, non-decreasing ints, got "
                         f"{list(indices_or_sections)!r}")
    bounds = [IntImm("int64", 0)] + [simplify(Min(IntImm("int64", i), dim)) for i in indices] + [dim]
    return [(lo, simplify(hi - lo)) for lo, hi in zip(bounds, bounds[1:])]


def split(x: te.Tensor, indices_or_sections, axis: int = 0) -> list:
    """Pieces of ``x`` along ``axis`` (see :func:`split_extents`), stages "T_split"."""
    check_tensor(x, "split")
    axis = normalize_axis(axis, x.ndim, "split", x.shape)
    outs = []
    for start, extent in split_extents("topi.split", x.shape[axis], indices_or_sections):
        shape = list(x.shape)
        shape[axis] = extent

        def element(*i, start=start):
            return x[i[:axis] + (i[axis] + start,) + i[axis + 1:]]

        outs.append(compute(shape, element, "T_split"))
    return outs


def concatenate(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """The tensors joined along ``axis``; the other dimensions must agree (stage "T_concat")."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("topi.concatenate: needs at least one tensor")
    first = check_tensor(tensors[0], "concatenate", "tensors[0]")
    axis = normalize_axis(axis, first.ndim, "concatenate", first.shape)
    for j, t in enumerate(tensors[1:], 1):
        check_tensor(t, "concatenate", f"tensors[{j}]")
        if t.dtype != first.dtype or t.ndim != first.ndim or not all(
                same_dim(a, b) for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"topi.concatenate: tensors[{j}] {t.name} {t.dtype}{shape_text(t.shape)} "
                             f"does not match tensors[0] {first.dtype}{shape_text(first.shape)} "
                             f"outside axis {axis}")
    offsets = [IntImm("int64", 0)]
    for t in tensors:
        offsets.append(simplify(offsets[-1] + _int64(t.shape[axis])))
    shape = list(first.shape)
    shape[axis] = offsets[-1]

    def element(*i):
        value = None
        for t, lo, hi in reversed(list(zip(tensors, offsets, offsets[1:]))):
            load = t[i[:axis] + (simplify(i[axis] - lo) if static_value(lo) != 0 else i[axis],)
                     + i[axis + 1:]]
            value = load if value is None else te.if_then_else(i[axis] < hi, load, value)
        return value

    return compute(shape, element, "T_concat")


def take(x: te.Tensor, indices: te.Tensor, axis=None, mode: str = "fast") -> te.Tensor:
    """``x`` gathered at ``indices`` along ``axis`` (an embedding lookup for axis 0); the result
    has ``indices``' shape in place of that axis. ``mode``: "fast" (indices are trusted),
    "clip" (clamped into range) or "wrap" (taken modulo the size). Stage "T_take"."""
    check_tensor(x, "take")
    check_tensor(indices, "take", "indices")
    if not (dt.is_int(indices.dtype) or dt.element_of(indices.dtype).startswith("uint")):
        raise TypeError(f"topi.take: indices {indices.name} must have an integer dtype, got "
                        f"{indices.dtype}")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"topi.take: without an axis, data {x.name} must be 1-D, got "
                             f"{shape_text(x.shape)}")
        axis = 0
    axis = normalize_axis(axis, x.ndim, "take", x.shape)
    if mode not in ("fast", "clip", "wrap"):
        raise ValueError(f"topi.take: mode must be 'fast', 'clip' or 'wrap', got {mode!r}")
    dim = _int64(x.shape[axis])
    shape = list(x.shape[:axis]) + list(indices.shape) + list(x.shape[axis + 1:])

    def element(*i):
        idx = indices[i[axis:axis + indices.ndim]].astype("int64")
        if mode == "clip":
            idx = Min(Max(idx, IntImm("int64", 0)), simplify(dim - 1))
        elif mode == "wrap":
            idx = FloorMod(idx, dim)
        return x[i[:axis] + (idx,) + i[axis + indices.ndim:]]

    return compute(shape, element, "T_take")


def slice_range(op: str, begin, end, stride, dim, assume_inbound: bool = False) -> tuple:
    """(start, extent, stride) of ``x[begin:end:stride]`` along a dimension of size ``dim``.
    Static values follow Python's slicing (negative indices count from the end, out-of-range
    ones are clipped). Symbolic ones are non-negative positions, clipped to ``dim`` unless
    ``assume_inbound``; symbolic slicing needs a positive static stride."""
    values = [static_value(v) for v in (begin, end, stride, dim)]
    if values[2] == 0:
        raise ValueError(f"{op}: a slice stride cannot be 0")
    if None not in values:
        b, e, s, d = values
        start, stop, step = slice(b, e, s).indices(d)
        return IntImm("int64", start), IntImm("int64", len(range(start, stop, step))), step
    if values[2] is None or values[2] < 0:
        raise ValueError(f"{op}: slicing with symbolic bounds or sizes needs a positive constant "
                         f"stride, got {stride}")
    dim, step = _int64(dim), values[2]
    b, e = _int64(begin), _int64(end)
    if assume_inbound:   # 0 <= begin <= end <= dim is promised
        length = simplify(e - b)
    else:
        zero = IntImm("int64", 0)
        b, e = (simplify(Min(Max(v, zero), dim)) for v in (b, e))
        length = simplify(Max(e - b, zero))
    if step != 1:
        length = simplify((length + (step - 1)) // step)
    return simplify(b), length, step


def strided_slice(x: te.Tensor, begin, end, strides=None, axes=None,
                  assume_inbound: bool = False) -> te.Tensor:
    """``x[begin:end:strides]`` on the given ``axes`` (all leading axes by default); see
    :func:`slice_range` for the rules. Stage "T_strided_slice"."""
    check_tensor(x, "strided_slice")
    axes = list(range(len(begin))) if axes is None else list(axes)
    strides = [1] * len(axes) if strides is None else list(strides)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise ValueError(f"topi.strided_slice: axes {axes}, begin {list(begin)}, end {list(end)} "
                         f"and strides {strides} must have one entry per sliced axis")
    norm = [normalize_axis(a, x.ndim, "strided_slice", x.shape) for a in axes]
    ranges = {a: slice_range("topi.strided_slice", b, e, s, x.shape[a], assume_inbound)
              for a, b, e, s in zip(norm, begin, end, strides)}
    shape = [ranges[d][1] if d in ranges else x.shape[d] for d in range(x.ndim)]

    def element(*i):
        source = []
        for d, index in enumerate(i):
            if d in ranges:
                start, _, step = ranges[d]
                index = simplify(start + index * step) if (static_value(start), step) != (0, 1) \
                    else index
            source.append(index)
        return x[tuple(source)]

    return compute(shape, element, "T_strided_slice")


def expand_dims(x: te.Tensor, axis) -> te.Tensor:
    """``x`` with new axes of size 1 at the given positions of the result (stage
    "T_expand_dims")."""
    check_tensor(x, "expand_dims")
    axes = [axis] if isinstance(axis, int) else list(axis)
    out_ndim = x.ndim + len(axes)
    new = normalize_axes(axes, out_ndim, "expand_dims", x.shape)
    shape, it = [], iter(x.shape)
    for d in range(out_ndim):
        shape.append(IntImm("int64", 1) if d in new else next(it))
    return compute(shape, lambda *i: x[tuple(v for d, v in enumerate(i) if d not in new)],
                   "T_expand_dims")


def squeeze(x: te.Tensor, axis=None) -> te.Tensor:
    """``x`` without the given axes of size 1 (every static size-1 axis by default), stage
    "T_squeeze"."""
    check_tensor(x, "squeeze")
    if axis is None:
        gone = [d for d, s in enumerate(x.shape) if static_value(s) == 1]
    else:
        gone = normalize_axes(axis, x.ndim, "squeeze", x.shape)
        for d in gone:
            if static_value(x.shape[d]) != 1:
                raise ValueError(f"topi.squeeze: axis {d} of {x.name} {shape_text(x.shape)} has "
                                 f"size {x.shape[d]}, not 1")
    shape = [s for d, s in enumerate(x.shape) if d not in gone]

    def element(*i):
        it = iter(i)
        return x[tuple(IntImm("int64", 0) if d in gone else next(it) for d in range(x.ndim))]

    return compute(shape, element, "T_squeeze")


def broadcast_to(x: te.Tensor, shape) -> te.Tensor:
    """``x`` broadcast (numpy's rules) to ``shape`` (stage "T_broadcast_to")."""
    from .elemwise import broadcast_indices, broadcast_shape
    check_tensor(x, "broadcast_to")
    shape = [convert(s) for s in shape]
    result = broadcast_shape(x.shape, shape, "broadcast_to")
    if len(result) != len(shape) or not all(same_dim(a, b) for a, b in zip(result, shape)):
        raise ValueError(f"topi.broadcast_to: cannot broadcast {x.name} {shape_text(x.shape)} to "
                         f"{shape_text(shape)}")
    return compute(shape, lambda *i: x[broadcast_indices(x.shape, i)], "T_broadcast_to")


def full(shape, dtype: str, fill_value) -> te.Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (a number, or a 0-d tensor), stage
    "T_full"."""
    dtype = dt.check_dtype(dtype)
    if isinstance(fill_value, te.Tensor):
        value = fill_value[()].astype(dtype)
    else:
        value = const(fill_value if not dt.is_int(dtype) else int(fill_value), dtype)
    return compute([convert(s) for s in shape], lambda *i: value, "T_full")


def trilu(x: te.Tensor, k=0, upper: bool = True) -> te.Tensor:
    """The upper (``upper``) or lower triangle of the last two axes of ``x`` from diagonal
    ``k`` on (k > 0 above the main diagonal), zeros elsewhere (stage "T_trilu")."""
    check_tensor(x, "trilu")
    if x.ndim < 2:
        raise ValueError(f"topi.trilu: data {x.name} must have at least 2 dimensions, got "
                         f"{shape_text(x.shape)}")
    k = _int64(k)
    zero = const(0, x.dtype) if not dt.is_bool(x.dtype) else const(False)

    def element(*i):
        col_minus_row = _int64(i[-1]) - _int64(i[-2])
        keep = col_minus_row >= k if upper else col_minus_row <= k
        return Select(keep, x[i], zero)

    return compute(x.shape, element, "T_trilu")


def arange_length(op: str, start, stop, step):
    """The number of values of ``range(start, stop, step)``; with symbolic bounds, the
    expression ``ceil((stop - start) / step)`` (the bounds are taken to be in order)."""
    values = [static_value(v) for v in (start, stop, step)]
    if values[2] == 0:
        raise ValueError(f"{op}: step cannot be 0")
    if None not in values:
        return IntImm("int64", len(range(*values)))
    if values[2] is None or values[2] < 0:
        raise ValueError(f"{op}: with symbolic bounds the step must be a positive constant")
    span = simplify(_int64(stop) - _int64(start))   # symbolic bounds are taken as ordered
    return span if values[2] == 1 else simplify((span + (values[2] - 1)) // values[2])


def arange(start, stop, step=1, dtype: str = "int64") -> te.Tensor:
    """``[start, start + step, ...)`` up to ``stop`` as a 1-D tensor (stage "T_arange")."""
    length = arange_length("topi.arange", start, stop, step)
    dtype = dt.check_dtype(dtype)
    begin, stride = _int64(start), _int64(step)
    return compute([length], lambda i: (begin + _int64(i) * stride).astype(dtype), "T_arange")


__all__ = ["arange", "arange_length", "broadcast_to", "concatenate", "expand_dims", "full",
           "slice_range", "split", "split_extents", "squeeze", "strided_slice", "take", "trilu"]
