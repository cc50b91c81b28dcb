"""Graph-level (Relax) expressions: variables, constants, tuples, calls, binding blocks and functions.

Every expression carries its ``struct_info``. Op functions (``relax.op.add`` ...) compute it when
they build a call; a node built by hand without it gets it from ``BlockBuilder.normalize``.
Variables are binders compared by identity: ``structural_equal`` matches the variables two
functions define, whatever their names.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..ir import hooks
from ..ir.module import GlobalVar
from ..ir.node import Node, node
from ..tir import dtype as dt
from ..tir.expr import PrimExpr, convert
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                          StructInfo, TensorStructInfo, TupleStructInfo, to_shape)
from .ty import Type, struct_info_of, type_of


class Attrs(tuple):
    """Call/function attributes: a sorted tuple of ``(name, value)`` pairs that also reads like
    an object or a dict: ``call.attrs.axis``, ``func.attrs["Primitive"]``, ``"axis" in attrs``."""

    def __new__(cls, items=()):
        if items is None:
            items = ()
        if isinstance(items, dict):
            items = items.items()
        return super().__new__(cls, tuple(sorted((str(k), _freeze(v)) for k, v in items)))

    def __getattr__(self, name: str):
        for key, value in self:
            if key == name:
                return value
        raise AttributeError(f"no attribute {name!r}; attributes: {', '.join(self.keys()) or 'none'}")

    def __getitem__(self, key):
        if isinstance(key, str):
            for k, value in self:
                if k == key:
                    return value
            raise KeyError(key)
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        return any(k == key for k, _ in self) if isinstance(key, str) else super().__contains__(key)

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def keys(self) -> list:
        return [k for k, _ in self]

    def items(self) -> list:
        return list(self)

    def with_attr(self, key: str, value) -> "Attrs":
        return Attrs({**dict(self), key: value})


def _freeze(value):
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.integer):
        return int(value)
    return value


class Expr(Node):
    """Base of graph-level expressions. ``a + b``, ``a * b``, ``a @ b``, ``t[i]`` build calls."""
    __slots__ = ()
    struct_info: Optional[StructInfo]

    def __add__(self, other): return _binary("add", self, other)
    def __sub__(self, other): return _binary("subtract", self, other)
    def __mul__(self, other): return _binary("multiply", self, other)
    def __truediv__(self, other): return _binary("divide", self, other)
    def __matmul__(self, other): return _binary("matmul", self, other)

    def __getitem__(self, index: int) -> "TupleGetItem":
        return TupleGetItem(self, index)

    @property
    def checked_type(self):
        """The 2022 type of this value (a ``relax.DynTensorType`` for a tensor), read off its
        structure info."""
        return type_of(self.struct_info)

    _checked_type_ = checked_type

    @property
    def shape_(self) -> Optional["ShapeExpr"]:
        """The 2022 shape annotation: the tensor's shape as a ShapeExpr (None when unknown)."""
        sinfo = self.struct_info
        if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
            return ShapeExpr(sinfo.shape)
        return None


def _binary(name: str, a, b):
    from . import op
    return getattr(op, name)(a, b)


@node
class Var(Expr):
    """A variable: a function parameter or the name bound by a VarBinding (a binder).

    ``Var(name, struct_info)``; the 2022 form ``Var(name, shape, type)`` (a shape tuple and a
    ``relax.DynTensorType``) is turned into the same structure info."""
    name_hint: str
    struct_info: Optional[StructInfo] = None
    _binds_by_identity = True   # structural_equal matches variables up to renaming

    def __init__(self, name_hint: str, struct_info=None, type_annotation=None, *,
                 shape_annotation=None):
        if type_annotation is not None or shape_annotation is not None or _is_legacy(struct_info):
            shape = struct_info if shape_annotation is None else shape_annotation
            if _is_legacy_type(shape) and type_annotation is None:
                shape, type_annotation = None, shape
            struct_info = struct_info_of(shape, type_annotation, f"relax.Var({name_hint!r}, ...)")
        object.__setattr__(self, "name_hint", name_hint)
        object.__setattr__(self, "struct_info", struct_info)
        self.__post_init__()

    def __post_init__(self):
        if not isinstance(self.name_hint, str):
            raise TypeError(f"relax.Var: the name must be a str, got {self.name_hint!r}")
        if self.struct_info is not None and not isinstance(self.struct_info, StructInfo):
            raise TypeError(f"relax.Var {self.name_hint}: struct_info must be a StructInfo such as "
                            f"relax.TensorStructInfo((1, 784), 'float32'), got {self.struct_info!r}")

    @property
    def name(self) -> str:
        return self.name_hint


@node
class DataflowVar(Var):
    """A variable bound inside a dataflow block; it is not visible after the block."""
    __init__ = Var.__init__


def _is_legacy_type(value) -> bool:
    return isinstance(value, Type)


def _is_legacy(struct_info) -> bool:
    """True for the 2022 second argument of Var: a shape (tuple, list, ShapeExpr) or a type."""
    return isinstance(struct_info, (tuple, list, ShapeExpr)) or isinstance(struct_info, Type)


@node
class Constant(Expr):
    """A constant tensor (a numpy array)."""
    data: np.ndarray
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        data = np.asarray(self.data)
        object.__setattr__(self, "data", data)
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", TensorStructInfo(data.shape, data.dtype.name))


def const(value, dtype: Optional[str] = None) -> Constant:
    """``relax.const(1.0)``, ``relax.const(np_array)``, ``relax.const([1, 2], "int64")``. The 2022
    form passes a type for ``dtype`` (``relax.DynTensorType(2, "float32")``): its dtype is used."""
    if isinstance(value, Constant):
        return value
    if dtype is not None and not isinstance(dtype, str) and isinstance(getattr(dtype, "dtype", None), str):
        ndim = getattr(dtype, "ndim", -1)
        if ndim not in (-1, None) and ndim != np.ndim(value):
            raise ValueError(f"relax.const: the value has {np.ndim(value)} dimensions but the type "
                             f"{dtype} says {ndim}")
        dtype = dtype.dtype
    if dtype is None and isinstance(value, float):
        dtype = "float32"
    elif dtype is None and isinstance(value, bool):
        dtype = "bool"
    elif dtype is None and isinstance(value, int):
        dtype = "int32"
    data = np.asarray(value) if dtype is None else np.asarray(value, dtype=dt.to_numpy(dt.check_dtype(dtype)))
    if data.dtype.name == "float64" and dtype is None and not isinstance(value, np.ndarray):
        data = data.astype("float32")
    return Constant(data)


@node
class Tuple(Expr):
    """A tuple of expressions. Its items are ``elements``, also readable as ``fields`` (the
    reference compiler's name: ``for f in t.fields``, ``t.fields[0]``), which stays callable like
    every node's ``fields()`` method; ``t[i]`` and ``len(t)`` read them too."""
    elements: tuple
    struct_info: Optional[StructInfo] = None

    @property
    def fields(self) -> "_Fields":
        return _Fields(self)

    def __post_init__(self):
        fields = tuple(as_expr(f) for f in self.elements)
        object.__setattr__(self, "elements", fields)
        if self.struct_info is None and all(f.struct_info is not None for f in fields):
            object.__setattr__(self, "struct_info", TupleStructInfo([f.struct_info for f in fields]))

    def __len__(self) -> int:
        return len(self.elements)

    def __getitem__(self, index: int) -> Expr:
        return self.elements[index]


class _Fields(tuple):
    """A Tuple's elements that can also be called, as ``fields()`` of any node is, for its
    (name, value) pairs."""

    def __new__(cls, node: "Tuple"):
        out = super().__new__(cls, node.elements)
        out._node = node
        return out

    def __call__(self):
        return Expr.fields(self._node)


@node
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        sinfo = self.tuple_value.struct_info
        if self.struct_info is None and isinstance(sinfo, TupleStructInfo):
            if not -len(sinfo.elements) <= self.index < len(sinfo.elements):
                raise IndexError(f"tuple index {self.index} is out of range for a tuple of "
                                 f"{len(sinfo.elements)} item(s)")
            object.__setattr__(self, "struct_info", sinfo.elements[self.index])


@node
class ShapeExpr(Expr):
    """A shape value, e.g. the target shape of ``reshape``: ``R.shape([1, 784])``."""
    values: tuple
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        values = to_shape(self.values, "relax.ShapeExpr")
        object.__setattr__(self, "values", values)
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", ShapeStructInfo(values))


@node
class PrimValue(Expr):
    """A scalar value given by a loop-IR expression (e.g. ``T.int64(1)`` or a shape variable)."""
    value: PrimExpr
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        value = convert(self.value)
        object.__setattr__(self, "value", value)
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", PrimStructInfo(value.dtype))


@node
class Op(Expr):
    """A registered operator; there is one Op object per name: ``Op.get("relax.add")``."""
    name: str
    struct_info: Optional[StructInfo] = None

    @staticmethod
    def get(name: str) -> "Op":
        from .op.registry import get_op
        return get_op(name)


# ``mlc_lab.ir.Op`` (the course's ``tvm.ir.Op.get("relax.add")``) is this class: an Op is a relax
# expression, and relax sits above the ir package, so ir finds it through this hook.
hooks.provide("relax.Op", Op)


@node
class ExternFunc(Expr):
    """A function found by name at run time (a packed function), e.g. ``"env.linear"``."""
    global_symbol: str
    struct_info: Optional[StructInfo] = ObjectStructInfo()


@node
class Call(Expr):
    """``op(*args)``; ``op`` is an Op, a GlobalVar (a function of the module) or an ExternFunc.
    ``attrs`` holds the op's attributes, ``sinfo_args`` the result structure for ops that cannot
    infer it (``call_tir``'s ``out_sinfo``)."""
    op: Any
    args: tuple
    attrs: Attrs = Attrs()
    sinfo_args: tuple = ()
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        if not isinstance(self.op, (Op, GlobalVar, ExternFunc, Var)):
            raise TypeError(f"relax.Call: op must be an Op, a GlobalVar or an ExternFunc, got {self.op!r}")
        object.__setattr__(self, "args", tuple(as_expr(a) for a in self.args))
        object.__setattr__(self, "attrs", Attrs(self.attrs))
        sinfo_args = self.sinfo_args or ()
        if isinstance(sinfo_args, StructInfo):
            sinfo_args = (sinfo_args,)
        object.__setattr__(self, "sinfo_args", tuple(sinfo_args))


@node
class VarBinding(Node):
    """``var = value`` inside a binding block."""
    var: Var
    value: Expr


@node
class BindingBlock(Node):
    bindings: tuple

    def __post_init__(self):
        object.__setattr__(self, "bindings", tuple(self.bindings))


@node
class DataflowBlock(BindingBlock):
    """A block of pure bindings (``with R.dataflow()``); only its output Vars outlive it."""


@node
class SeqExpr(Expr):
    """Run ``blocks`` in order, then evaluate ``body``."""
    blocks: tuple
    body: Expr
    struct_info: Optional[StructInfo] = None

    def __post_init__(self):
        object.__setattr__(self, "blocks", tuple(self.blocks))
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", self.body.struct_info)


@node
class Function(Expr):
    """A graph-level function. ``attrs`` holds e.g. ``global_symbol`` and ``Primitive``."""
    params: tuple
    body: SeqExpr
    ret_struct_info: Optional[StructInfo] = None
    attrs: Attrs = Attrs()
    is_pure: bool = True
    struct_info: Optional[StructInfo] = None
    _graph_level = True   # ir.transform.FunctionPass rewrites it (and not PrimFuncs)

    def __post_init__(self):
        params = tuple(self.params)
        for p in params:
            if not isinstance(p, Var):
                raise TypeError(f"relax.Function: parameters must be relax.Var, got {p!r}")
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "attrs", Attrs(self.attrs))
        if self.ret_struct_info is None:
            object.__setattr__(self, "ret_struct_info", self.body.struct_info or ObjectStructInfo())
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", FuncStructInfo(
                [p.struct_info or ObjectStructInfo() for p in params], self.ret_struct_info, self.is_pure))

    def with_attr(self, key: str, value) -> "Function":
        return self.replace(attrs=self.attrs.with_attr(key, value))

    def without_attr(self, key: str) -> "Function":
        return self.replace(attrs=Attrs({k: v for k, v in self.attrs if k != key}))

    @property
    def name(self) -> Optional[str]:
        return self.attrs.get("global_symbol")


def as_expr(value: Any) -> Expr:
    """Convert call arguments: Exprs stay, lists/tuples become Tuples, numbers and arrays become
    constants, GlobalVars (functions called by ``call_tir``) pass through."""
    if isinstance(value, (Expr, GlobalVar)):
        return value
    if isinstance(value, (list, tuple)):
        return Tuple(value)
    if isinstance(value, (bool, int, float, np.ndarray, np.generic)):
        return const(value)
    if isinstance(value, PrimExpr):
        return PrimValue(value)
    raise TypeError(f"expected a relax expression, got {type(value).__name__}: {value!r}")


LEAF_TYPES = (Var, Constant, ShapeExpr, PrimValue, Op, ExternFunc)


def is_leaf(expr: Any) -> bool:
    """True for expressions that may appear as call arguments in normal form (no nested calls)."""
    if isinstance(expr, Tuple):
        return all(is_leaf(f) for f in expr.elements)
    return isinstance(expr, LEAF_TYPES + (GlobalVar,))
