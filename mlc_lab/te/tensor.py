"""Tensor expressions: placeholders, computes described by index lambdas, and reductions.

A Tensor owns the Buffer it will become in a PrimFunc; indexing a Tensor gives a BufferLoad of
that buffer, so compute bodies are ordinary loop-IR expressions. ``create_prim_func`` turns a
graph of Tensors into one PrimFunc with a block per compute.
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Optional

import numpy as np

from ..arith import simplify
from ..ir.node import node
from ..tir import dtype as dt
from ..tir.buffer import Buffer, decl_buffer
from ..tir.expr import BufferLoad, Max, Min, PrimExpr, Var, call_intrin, convert, unify_operands
from ..tir.expr import const as _const
from ..tir.functor import StmtExprVisitor
from ..tir.stmt_functor import loads_in
from ..tir.stmt import Range

_AXIS_NAMES = "ijklmnopqrstuvwxyz"


@node
class IterAxis(Var):
    """An axis of a compute: a variable with a domain, spatial (from ``te.compute``) or a
    reduction (from ``te.reduce_axis``). Usable directly in index expressions."""
    dom: Optional[Range] = None
    iter_type: str = "spatial"

    @property
    def var(self) -> "IterAxis":
        return self


@node
class Reduce(PrimExpr):
    """``combiner`` ("sum" | "max" | "min") of ``source`` over the reduction ``axis``; only valid
    as the whole body of a ``te.compute``."""
    combiner: str
    source: PrimExpr
    axis: tuple

    @property
    def dtype(self) -> str:
        return self.source.dtype

    def script(self, **kwargs) -> str:
        axes = ", ".join(a.name for a in self.axis)
        return f"te.{self.combiner}({self.source.script(**kwargs)}, axis=[{axes}])"


class PlaceholderOp:
    """An input: data that comes from outside."""

    def __init__(self, name: str):
        self.name = name
        self.input_tensors: tuple = ()


class ComputeOp:
    """``out[axis] = body`` over the spatial ``axis`` (and ``reduce_axis`` when body is a Reduce)."""

    def __init__(self, name: str, axis: tuple, body: PrimExpr, input_tensors: tuple):
        self.name = name
        self.axis = axis
        self.body = body
        self.reduce_axis = body.axis if isinstance(body, Reduce) else ()
        self.input_tensors = input_tensors


# Tensor of each live buffer, to find a compute's inputs from the loads in its body.
_TENSOR_OF_BUFFER: dict[int, weakref.ref] = {}


class Tensor:
    """A multi-dimensional value: ``.shape`` (tuple of PrimExpr), ``.dtype``, ``.name``,
    ``.ndim``, ``.op``; ``A[i, j]`` is an expression reading one element."""

    def __init__(self, shape, dtype: str, name: str, op):
        self.buffer: Buffer = decl_buffer(shape, dtype, name)
        self.op = op
        key = id(self.buffer)
        _TENSOR_OF_BUFFER[key] = weakref.ref(self, lambda _ref: _TENSOR_OF_BUFFER.pop(key, None))

    shape = property(lambda self: self.buffer.shape)
    dtype = property(lambda self: self.buffer.dtype)
    name = property(lambda self: self.buffer.name)
    ndim = property(lambda self: self.buffer.ndim)

    def __call__(self, *indices) -> BufferLoad:
        """``A(i, j)``, TVM's spelling of ``A[i, j]``."""
        return self[indices]

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(f"tensor {self.name} has {self.ndim} dimension(s) but was indexed "
                             f"with {len(indices)} index(es)")
        for i in indices:
            if isinstance(i, slice):
                raise IndexError(f"tensor {self.name}: slices are not supported in te expressions; "
                                 "index with one expression per dimension")
        return self.buffer[indices]

    def __repr__(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Tensor(name={self.name!r}, shape=({shape}), dtype={self.dtype!r})"


def tensor_of(buffer: Buffer) -> Optional[Tensor]:
    """The Tensor that owns ``buffer``, or None when it is not a te tensor's buffer."""
    ref = _TENSOR_OF_BUFFER.get(id(buffer))
    tensor = ref() if ref is not None else None
    return tensor if tensor is not None and tensor.buffer is buffer else None


# ----------------------------------------------------------------------------------------------
# Constructors
def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A symbolic scalar, e.g. a dimension: ``n = te.var("n"); te.placeholder((n, 128))``."""
    return Var(name, dt.check_dtype(dtype))


def const(value, dtype: Optional[str] = None) -> PrimExpr:
    return _const(value, dtype)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or symbolic PrimExprs) and dtype."""
    return Tensor(_shape(shape, name), dtype, name, PlaceholderOp(name))


def reduce_axis(dom, name: str = "rv") -> IterAxis:
    """A reduction axis over ``dom``: an extent, or a ``(min, max)`` pair (max exclusive)."""
    if isinstance(dom, Range):
        rng = dom
    elif isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise ValueError(f"reduce_axis {name}: dom must be (min, max), got {dom!r}")
        lo, hi = dom
        is_int = isinstance(lo, (int, np.integer)) and isinstance(hi, (int, np.integer))
        extent = int(hi) - int(lo) if is_int else simplify(convert(hi) - convert(lo))
        rng = Range.from_min_extent(lo, extent)
    else:
        rng = Range.from_min_extent(0, dom)
    return IterAxis(name, rng.extent.dtype, rng, "reduce")


def compute(shape, fcompute: Callable, name: str = "compute") -> Tensor:
    """The tensor ``out[i, j, ...] = fcompute(i, j, ...)``; its axes are named after the lambda's
    parameters. ``fcompute`` may return a reduction (``te.sum``/``te.max``/``te.min``)."""
    shape = _shape(shape, name)
    params = _param_names(fcompute, len(shape), name)
    axis = tuple(IterAxis(p, s.dtype, Range.from_min_extent(0, s), "spatial")
                 for p, s in zip(params, shape))
    body = fcompute(*axis)
    if isinstance(body, (list, tuple)):
        raise NotImplementedError(f"compute {name}: computes with several outputs are not supported")
    body = convert(body)
    _check_body(body, name)
    inputs = _input_tensors(body, name)
    return Tensor(shape, body.dtype, name, ComputeOp(name, axis, body, inputs))


def _shape(shape, name: str) -> tuple:
    if isinstance(shape, (int, np.integer, PrimExpr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"tensor {name}: shape must be a tuple of ints or PrimExprs, got {shape!r}")
    return tuple(_const(int(s)) if isinstance(s, (int, np.integer)) else convert(s) for s in shape)


def _param_names(fcompute: Callable, ndim: int, name: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.kind == p.VAR_POSITIONAL for p in params) or not params:
        return [_AXIS_NAMES[d] if d < len(_AXIS_NAMES) else f"i{d}" for d in range(ndim)]
    if len(params) != ndim:
        raise TypeError(f"compute {name}: the shape has {ndim} dimension(s) but fcompute takes "
                        f"{len(params)} argument(s) ({', '.join(p.name for p in params)})")
    return [p.name for p in params]


class _ReduceFinder(StmtExprVisitor):
    """Rejects reductions below the top of a compute body and reduce axes outside a reduction."""

    def __init__(self, name: str, allowed_axes: tuple):
        self.name = name
        self.allowed = {id(a) for a in allowed_axes}

    def visit_Reduce(self, reduce: Reduce) -> None:
        raise ValueError(f"compute {self.name}: a reduction (te.{reduce.combiner}) must be the whole "
                         "body of a compute, not part of a larger expression; compute it in its "
                         "own te.compute and use that tensor")

    def visit_IterAxis(self, axis: IterAxis) -> None:
        if axis.iter_type == "reduce" and id(axis) not in self.allowed:
            raise ValueError(f"compute {self.name}: reduce axis {axis.name} is used outside a "
                             f"reduction over it; wrap the expression in te.sum/te.max/te.min "
                             f"with axis={axis.name}")


def _check_body(body: PrimExpr, name: str) -> None:
    if isinstance(body, Reduce):
        _ReduceFinder(name, body.axis).visit(body.source)
    else:
        _ReduceFinder(name, ()).visit(body)


def _input_tensors(body: PrimExpr, name: str) -> tuple:
    buffers: list[Buffer] = []
    for load in loads_in(body):
        if all(b is not load.buffer for b in buffers):
            buffers.append(load.buffer)
    tensors = []
    for buffer in buffers:
        tensor = tensor_of(buffer)
        if tensor is None:
            raise ValueError(f"compute {name}: it reads buffer {buffer.name}, which is not a te "
                             "tensor; make it a te.placeholder")
        tensors.append(tensor)
    return tuple(tensors)


# ----------------------------------------------------------------------------------------------
# Reductions and elementwise math
def _reduction(combiner: str, expr, axis) -> Reduce:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    for a in axes:
        if not (isinstance(a, IterAxis) and a.iter_type == "reduce"):
            raise TypeError(f"te.{combiner}: axis must be a te.reduce_axis (or a list of them), "
                            f"got {a!r}")
    if not axes:
        raise ValueError(f"te.{combiner}: needs at least one reduce axis")
    source = convert(expr)
    if isinstance(source, Reduce):
        raise ValueError(f"te.{combiner}: cannot reduce a reduction directly; list all axes in "
                         "one reduction instead")
    return Reduce(combiner, source, axes)


def _is_axis_arg(x: Any) -> bool:
    if isinstance(x, (list, tuple)):
        return all(_is_axis_arg(a) for a in x)
    return isinstance(x, IterAxis) and x.iter_type == "reduce"


def sum(expr, axis) -> Reduce:  # noqa: A001 - the course-era name
    """The sum of ``expr`` over ``axis`` (a reduce axis or a list of them)."""
    return _reduction("sum", expr, axis)


def max(expr, axis=None):  # noqa: A001
    """``te.max(expr, axis=k)`` reduces over ``k``; ``te.max(a, b)`` is the elementwise maximum."""
    if axis is None or not _is_axis_arg(axis):
        if axis is None:
            raise TypeError("te.max takes an expression and a reduce axis, or two expressions")
        return Max(*unify_operands(expr, axis))
    return _reduction("max", expr, axis)


def min(expr, axis=None):  # noqa: A001
    """``te.min(expr, axis=k)`` reduces over ``k``; ``te.min(a, b)`` is the elementwise minimum."""
    if axis is None or not _is_axis_arg(axis):
        if axis is None:
            raise TypeError("te.min takes an expression and a reduce axis, or two expressions")
        return Min(*unify_operands(expr, axis))
    return _reduction("min", expr, axis)


def exp(x) -> PrimExpr: return call_intrin("exp", x)
def log(x) -> PrimExpr: return call_intrin("log", x)
def sqrt(x) -> PrimExpr: return call_intrin("sqrt", x)
def tanh(x) -> PrimExpr: return call_intrin("tanh", x)
def sigmoid(x) -> PrimExpr: return call_intrin("sigmoid", x)
def if_then_else(cond, t, f) -> PrimExpr: return call_intrin("if_then_else", cond, t, f)


def reduce_identity(combiner: str, dtype: str) -> PrimExpr:
    """The starting value of a reduction: 0 for sum, the lowest value of ``dtype`` for max, the
    highest for min (for floats, the most extreme finite values)."""
    if combiner == "sum":
        return _const(0, dtype)
    info = np.finfo(dt.to_numpy(dtype)) if dt.is_float(dtype) else np.iinfo(dt.to_numpy(dtype))
    return _const((info.min if combiner == "max" else info.max), dtype)


__all__ = ["IterAxis", "Reduce", "Tensor", "compute", "const", "exp", "if_then_else", "log", "max",
           "min", "placeholder", "reduce_axis", "reduce_identity", "sigmoid", "sqrt", "sum", "tanh",
           "tensor_of", "var"]
