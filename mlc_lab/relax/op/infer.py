"""Helpers shared by the ops' structure-info inference: reading arguments, broadcasting, axes.

Errors name the op as the user calls it (``relax.op.matmul``), the argument, and the shapes.
"""
from __future__ import annotations

from typing import Optional

from ...tir.expr import IntImm, Mul
from ..expr import Call
from ..struct_info import TensorStructInfo, dim_value, dims_equal, shape_text, to_dim


def user_name(call_or_name) -> str:
    """``relax.nn.relu`` -> ``relax.op.nn.relu`` (the Python function that builds it)."""
    name = call_or_name if isinstance(call_or_name, str) else call_or_name.op.name
    return "relax.op." + name[len("relax."):] if name.startswith("relax.") else name


def tensor_arg(call: Call, index: int, arg_name: str) -> TensorStructInfo:
    """The TensorStructInfo of argument ``index``, or a TypeError saying what it is instead."""
    op = user_name(call)
    if index >= len(call.args):
        raise TypeError(f"{op}: missing argument {arg_name}")
    sinfo = call.args[index].struct_info
    if sinfo is None:
        raise TypeError(f"{op}: argument {arg_name} has no struct info; build it with relax.op "
                        "functions or pass the call through BlockBuilder.normalize")
    if not isinstance(sinfo, TensorStructInfo):
        raise TypeError(f"{op}: argument {arg_name} must be a tensor, got {sinfo.script()}")
    return sinfo


def check_arity(call: Call, names: tuple) -> None:
    if len(call.args) != len(names):
        raise TypeError(f"{user_name(call)} takes {len(names)} argument(s) ({', '.join(names)}), "
                        f"got {len(call.args)}")


def same_dtype(call: Call, named: list) -> str:
    """The common dtype of the named tensor infos, or a TypeError naming both dtypes."""
    (first_name, first), *rest = named
    for name, sinfo in rest:
        if sinfo.dtype != first.dtype:
            raise TypeError(f"{user_name(call)}: the dtypes differ: {first_name} is {first.dtype}, "
                            f"{name} is {sinfo.dtype}; cast one of them first")
    return first.dtype


def require_float(call: Call, name: str, sinfo: TensorStructInfo) -> None:
    if not sinfo.dtype.startswith("float"):
        raise TypeError(f"{user_name(call)}: {name} must have a float dtype, got {sinfo.dtype}")


def broadcast_shapes(call: Call, a_name: str, a: tuple, b_name: str, b: tuple) -> Optional[tuple]:
    """numpy broadcasting of two shapes (aligned on the right). A symbolic dimension broadcasts
    with an equal one or with 1; when equality cannot be decided the result shape is unknown
    (None) and only the rank is known."""
    ndim = max(len(a), len(b))
    out = []
    for axis in range(-1, -ndim - 1, -1):
        da = a[axis] if -axis <= len(a) else None
        db = b[axis] if -axis <= len(b) else None
        if da is None or db is None:
            out.append(da if db is None else db)
            continue
        va, vb = dim_value(da), dim_value(db)
        equal = dims_equal(da, db)
        if equal:
            out.append(da)
        elif va == 1:
            out.append(db)
        elif vb == 1:
            out.append(da)
        elif equal is False:
            raise ValueError(f"{user_name(call)}: cannot broadcast {a_name} {shape_text(a)} with "
                             f"{b_name} {shape_text(b)}: at axis {ndim + axis} (counting from the "
                             f"left of the result) the sizes are {va} and {vb}; broadcasting "
                             "needs them equal or one of them 1")
        else:
            return None
    return tuple(reversed(out))


def normalize_axis(call: Call, axis: int, ndim: int, arg_name: str = "x") -> int:
    """``axis`` in ``[-ndim, ndim)`` as a non-negative axis."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"{user_name(call)}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{user_name(call)}: axis {axis} is out of range for {arg_name} with "
                         f"{ndim} dimension(s) (valid: {-ndim} .. {ndim - 1})")
    return axis % ndim


def normalize_axes(call: Call, axes, ndim: int, arg_name: str = "x") -> tuple:
    """A tuple of distinct non-negative axes; None means every axis."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, int):
        axes = (axes,)
    out = tuple(normalize_axis(call, a, ndim, arg_name) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{user_name(call)}: axes {tuple(axes)} repeat an axis")
    return out


def product(dims) -> object:
    """The product of shape dimensions (an int64 constant when all are static)."""
    values = [dim_value(d) for d in dims]
    if None not in values:
        total = 1
        for v in values:
            total *= v
        return IntImm("int64", total)
    static = 1
    symbolic = []
    for d, v in zip(dims, values):
        if v is None:
            symbolic.append(d)
        else:
            static *= v
    result = symbolic[0]
    for d in symbolic[1:]:
        result = Mul(result, d)
    return result if static == 1 else Mul(result, to_dim(static))


def dims_differ(a, b) -> bool:
    """True when two shape dimensions are provably different (static, or by arithmetic)."""
    from ...arith import can_prove
    equal = dims_equal(a, b)
    if equal is not None:
        return not equal
    return can_prove(a != b)


def dims_match(a, b) -> bool:
    """True when two shape dimensions are provably equal (``n * 4`` and ``4 * n`` are)."""
    from ...arith import can_prove
    return bool(dims_equal(a, b)) or can_prove(a == b)


def unknown_tensor(dtype: str, ndim: int = -1) -> TensorStructInfo:
    return TensorStructInfo(None, dtype, ndim)


def pair(op: str, value, name: str, length: int = 2) -> tuple:
    """An int or a tuple of ``length`` ints (strides, dilation, pool sizes)."""
    if isinstance(value, int):
        return (value,) * length
    value = tuple(value)
    if len(value) != length or not all(isinstance(v, int) for v in value):
        raise ValueError(f"{user_name(op)}: {name} must be an int or {length} ints, got {value!r}")
    return value


def padding4(op: str, padding) -> tuple:
    """TVM's padding forms: p, (p_h, p_w) or (top, left, bottom, right)."""
    if isinstance(padding, int):
        return (padding,) * 4
    padding = tuple(padding)
    if len(padding) == 2:
        return padding + padding
    if len(padding) == 4:
        return padding
    raise ValueError(f"{user_name(op)}: padding must be an int, 2 ints (height, width) or 4 ints "
                     f"(top, left, bottom, right), got {padding!r}")

