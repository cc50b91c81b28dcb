"""Evaluating loop-IR expressions with numpy, for the reference interpreter.

A value is a numpy scalar or array in the expression's own dtype (float32 math stays float32,
int32 stays int32). While the interpreter steps loops one iteration at a time every value is a
scalar; while it runs a loop nest at once, each loop variable is an ``arange`` laid along its own
axis and values are arrays broadcast over that grid. Vector values (``float32x4``) keep their
lanes on one extra, trailing axis.

``mask`` (True, or a bool array over the grid) marks the points that really execute: loads at
the other points are neither bounds-checked nor performed, which is what makes
``T.if_then_else(0 <= h, A[h], 0)`` (padding) safe to evaluate on both sides.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ...ir import hooks
from ...tir import dtype as dt
from ...tir import expr as E
from ...tir.buffer import UninitializedReadError  # noqa: F401  (defined at the tir level; re-exported)
from ...tir.extern import require_extern_math


class Storage:
    """Where a buffer's elements live: a flat numpy array, plus the element offset and strides
    with which the buffer views it (a plain buffer has offset 0 and row-major strides).

    ``written`` (a flat bool array beside ``flat``, or None) tracks which elements of an
    intermediate buffer have been stored to; parameters come from the caller and have none."""
    __slots__ = ("name", "flat", "shape", "strides", "offset", "written")

    def __init__(self, name: str, flat: np.ndarray, shape: tuple, strides: tuple, offset: int = 0,
                 written: np.ndarray | None = None):
        self.name, self.flat, self.shape = name, flat, shape
        self.strides, self.offset, self.written = strides, offset, written

    @staticmethod
    def of_array(name: str, array: np.ndarray) -> "Storage":
        """A Storage over a C-contiguous array; writes go to ``array`` itself."""
        strides = tuple(s // array.itemsize for s in array.strides) if array.ndim else ()
        return Storage(name, array.reshape(-1), tuple(array.shape), strides)

    @staticmethod
    def uninitialized(name: str, shape: tuple, dtype: str) -> "Storage":
        """Storage for an intermediate buffer: NaN (floats) or a poison value (ints) in every
        element, none of them marked written."""
        np_type = np_dtype(dtype)
        storage = Storage.of_array(name, np.full(shape, _poison(np_type), np_type))
        storage.written = np.zeros(storage.flat.size, dtype=bool)
        return storage

    def mark_written(self, positions) -> None:
        if self.written is not None:
            self.written[positions] = True

    def check_written(self, positions, mask, block: str | None) -> None:
        """Raise UninitializedReadError if a position read where ``mask`` holds is unwritten."""
        if self.written is None:
            return
        unwritten = np.logical_not(self.written[positions])
        if mask is not True:
            unwritten = unwritten & mask
        if not np.any(unwritten):
            return
        point = tuple(np.argwhere(unwritten)[0]) if np.ndim(unwritten) else ()
        position = int(np.broadcast_to(positions, np.shape(unwritten))[point]) - self.offset
        index = []
        for stride in self.strides:  # the view's strides are row-major over its own region
            index.append(position // stride if stride else 0)
            position -= index[-1] * stride
        where = f" in block {block}" if block else ""
        raise UninitializedReadError(f"buffer {self.name}: element {tuple(index)} is read{where} "
                                     "before anything wrote it")


def _poison(np_type: np.dtype):
    if np_type.kind in "fc":
        return np.nan
    if np_type.kind in "iu":
        return np.iinfo(np_type).min
    return np.zeros((), np_type)[()]


@functools.cache
def np_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of one element of ``dtype`` ('float32x4' -> float32)."""
    return dt.to_numpy(dtype)


def lift(value):
    """Give a one-lane value a trailing axis of length 1, so it broadcasts against lanes."""
    return np.asarray(value)[..., None]


def and_mask(mask, cond):
    """``mask & cond`` that keeps the cheap ``True`` when the condition is a constant true."""
    if np.ndim(cond) == 0:
        return mask if bool(cond) else np.False_
    cond = np.asarray(cond, dtype=bool)
    return cond if mask is True else mask & cond


def flat_index(storage: Storage, indices: list, mask, lanes: int = 1):
    """The flat element position(s) of ``storage[indices]`` at the points where ``mask`` holds.

    Out-of-bounds indices raise IndexError naming the buffer; indices at masked-off points are
    replaced by 0 so they can be used for gathers without touching memory out of bounds."""
    if mask is True and lanes == 1 and all(np.ndim(i) == 0 for i in indices):
        position = storage.offset
        for i, extent, stride in zip(indices, storage.shape, storage.strides):
            i = int(i)
            if not 0 <= i < extent:
                raise _out_of_bounds(storage, [int(x) for x in indices])
            position += i * stride
        return position
    if lanes > 1 and mask is not True:
        mask = lift(mask)
    index_arrays = [np.asarray(i).astype(np.int64, copy=False) for i in indices]
    bad_per_dim = [(i < 0) | (i >= extent) for i, extent in zip(index_arrays, storage.shape)]
    if any(np.any(b) for b in bad_per_dim):
        bad = functools.reduce(np.logical_or, bad_per_dim)
        if mask is not True:
            bad = bad & mask
        if np.any(bad):
            point = tuple(np.argwhere(bad)[0]) if np.ndim(bad) else ()
            at = [int(np.broadcast_to(i, np.shape(bad))[point]) for i in index_arrays]
            raise _out_of_bounds(storage, at)
        index_arrays = [np.where(mask, i, 0) if np.any(b) else i
                        for i, b in zip(index_arrays, bad_per_dim)]
    position = np.int64(storage.offset)
    for i, stride in zip(index_arrays, storage.strides):
        position = position + i * stride
    return position


def _out_of_bounds(storage: Storage, index: list) -> IndexError:
    return IndexError(f"buffer {storage.name}: index {tuple(index)} is out of bounds for shape "
                      f"{tuple(storage.shape)}")


def _cast(value, dtype: str):
    if not hasattr(value, "dtype"):
        value = np.asarray(value)
    want = np_dtype(dtype)
    return value if value.dtype == want else value.astype(want)


def _trunc_div(a, b):
    """C integer division (rounds toward zero), as the IR's integer Div requires."""
    q = np.floor_divide(a, b)
    inexact = np.remainder(a, b) != 0
    return q + (inexact & ((a < 0) != (b < 0))).astype(q.dtype)


def _erf(x):
    try:
        from scipy.special import erf
    except ImportError:  # scipy is optional; math.erf is exact but runs per element
        return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.asarray(x).dtype)
    return erf(x)


# "round" is round-half-to-even (nearbyint), as the compiled backends lower it.
_INTRINSICS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "tanh": np.tanh, "sigmoid": lambda x: np.reciprocal(1 + np.exp(-x)), "fabs": np.abs,
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.rint, "sin": np.sin,
    "cos": np.cos, "erf": _erf, "pow": np.power,
    "likely": lambda x: x,   # a hint: the value is the condition's
}


def _round_half_away(x):
    """C's round(): halfway cases away from zero (numpy rounds them to even)."""
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


# numpy for each C math function T.call_extern reaches (tir.extern.EXTERN_MATH), by base name.
_EXTERN_MATH = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt, "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "erf": _erf, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": _round_half_away, "rint": np.rint, "nearbyint": np.rint,
    "pow": np.power, "atan2": np.arctan2, "fmod": np.fmod, "fmin": np.fmin, "fmax": np.fmax,
    "hypot": np.hypot, "copysign": np.copysign,
}


def _binary(int_op, float_op=None):
    """Arithmetic on two operands of one dtype; the result keeps that dtype (the IR's rule)."""
    float_op = float_op or int_op

    def visit(self, e, mask):
        a, b = self.eval(e.a, mask), self.eval(e.b, mask)
        result = (float_op if a.dtype.kind == "f" else int_op)(a, b)
        return result if result.dtype == a.dtype else result.astype(a.dtype)
    return visit


def _compare(op):
    def visit(self, e, mask):
        return op(self.eval(e.a, mask), self.eval(e.b, mask))
    return visit


lanes_of = functools.cache(dt.lanes)  # dtype string -> lanes, without re-parsing each time


@functools.lru_cache(maxsize=1 << 14)
def access_lanes(access) -> int:
    """Lanes of a BufferLoad/BufferStore (1 unless an index is a vector); cached per node
    because the interpreter asks once per element while stepping."""
    return max((lanes_of(i.dtype) for i in access.indices), default=1)


class Evaluator:
    """Evaluates expressions under ``env`` (Var -> value) and ``storages`` (Buffer -> Storage).
    Both dicts are read live, so the caller may rebind variables between calls."""

    def __init__(self, env: dict, storages: dict, block: str | None = None):
        self.env = env
        self.storages = storages
        self.block = block  # the block whose statements run now, for error messages

    def eval(self, e, mask=True):
        return _VISIT[type(e)](self, e, mask)

    def load_position(self, load, mask=True):
        """Flat positions (bounds-checked under ``mask``) that a BufferLoad/BufferStore touches."""
        storage = self.storage(load.buffer)
        lanes = access_lanes(load)
        indices = [self.eval(i, mask) for i in load.indices]
        if lanes > 1:
            indices = [i if lanes_of(expr.dtype) > 1 else lift(i)
                       for i, expr in zip(indices, load.indices)]
        return flat_index(storage, indices, mask, lanes)

    def storage(self, buffer):
        try:
            return self.storages[buffer]
        except KeyError:
            raise RuntimeError(f"buffer {buffer.name} is used but was never allocated or passed "
                               "as a parameter") from None

    def visit_var(self, e, mask):
        try:
            return self.env[e]
        except KeyError:
            raise RuntimeError(f"variable {e.name} is used outside the loop, block or let that "
                               "defines it (or a shape variable no argument binds)") from None

    def visit_imm(self, e, mask):
        return np_dtype(e.dtype).type(e.value)

    def visit_cast(self, e, mask):
        return _cast(self.eval(e.value, mask), e.dtype)

    def visit_not(self, e, mask):
        return np.logical_not(self.eval(e.a, mask))

    def visit_select(self, e, mask):
        return self._select(e.condition, e.true_value, e.false_value, e.dtype, mask)

    def _select(self, condition, true_value, false_value, dtype, mask):
        cond = self.eval(condition, mask)
        if lanes_of(condition.dtype) == 1:
            t = self.eval(true_value, and_mask(mask, cond))
            f = self.eval(false_value, and_mask(mask, np.logical_not(cond)))
            if lanes_of(dtype) > 1:
                cond = lift(cond)
        else:  # a per-lane condition: evaluate both sides everywhere
            t, f = self.eval(true_value, mask), self.eval(false_value, mask)
        return _cast(np.where(cond, t, f), dtype)

    def visit_load(self, e, mask):
        storage = self.storage(e.buffer)
        position = self.load_position(e, mask)
        if storage.flat.size == 0:  # every point is masked off (else bounds checks raised)
            return np.zeros(np.shape(position), storage.flat.dtype)
        if storage.written is not None:
            if mask is not True and access_lanes(e) > 1:
                mask = lift(mask)
            storage.check_written(position, mask, self.block)
        return storage.flat[position]

    def visit_call(self, e, mask):
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        if op == "if_then_else":
            return self._select(*e.args, e.dtype, mask)
        if op == "call_extern":
            return self._call_extern(e, mask)
        if op == "buffer_elem_offset":   # A.elem_offset: where A's first element lies in storage
            return _cast(self.load_position(e.args[0], mask), e.dtype)
        if op not in _INTRINSICS:
            raise NotImplementedError(f"the interpreter does not know the intrinsic {e.op!r}; it "
                                      f"knows {', '.join(sorted(_INTRINSICS))}, if_then_else")
        args = [self.eval(a, mask) for a in e.args]
        return _cast(_INTRINSICS[op](*args), e.dtype)

    def _call_extern(self, e, mask):
        name = e.args[0].value
        math = require_extern_math(name, "the interpreter")
        base, param, _ = math
        with np.errstate(all="ignore"):   # as in C: a domain error gives nan or inf, not a warning
            result = _EXTERN_MATH[base](*(_cast(self.eval(a, mask), param) for a in e.args[1:]))
        return _cast(result, e.dtype)

    def visit_ramp(self, e, mask):
        base, stride = lift(self.eval(e.base, mask)), lift(self.eval(e.stride, mask))
        return _cast(base + stride * np.arange(e.lanes, dtype=base.dtype), e.dtype)

    def visit_broadcast(self, e, mask):
        value = lift(self.eval(e.value, mask))
        return np.broadcast_to(value, value.shape[:-1] + (e.lanes,))

    def visit_string(self, e, mask):
        raise TypeError(f"the string {e.value!r} has no numeric value")


_VISIT = {
    E.Var: Evaluator.visit_var, E.SizeVar: Evaluator.visit_var,
    E.IntImm: Evaluator.visit_imm, E.FloatImm: Evaluator.visit_imm,
    E.Cast: Evaluator.visit_cast, E.Not: Evaluator.visit_not, E.Select: Evaluator.visit_select,
    E.BufferLoad: Evaluator.visit_load, E.Call: Evaluator.visit_call, E.Ramp: Evaluator.visit_ramp,
    E.Broadcast: Evaluator.visit_broadcast, E.StringImm: Evaluator.visit_string,
    E.Add: _binary(np.add), E.Sub: _binary(np.subtract), E.Mul: _binary(np.multiply),
    E.Div: _binary(_trunc_div, np.true_divide), E.Mod: _binary(np.fmod),
    E.FloorDiv: _binary(np.floor_divide, lambda a, b: np.floor(a / b)),
    E.FloorMod: _binary(np.mod), E.Min: _binary(np.minimum), E.Max: _binary(np.maximum),
    E.And: _compare(np.logical_and), E.Or: _compare(np.logical_or),
    E.EQ: _compare(np.equal), E.NE: _compare(np.not_equal), E.LT: _compare(np.less),
    E.LE: _compare(np.less_equal), E.GT: _compare(np.greater), E.GE: _compare(np.greater_equal),
}


hooks.provide("runtime.evaluator", Evaluator)
