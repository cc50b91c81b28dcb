"""The 2022 type annotations of graph-level values, and their mapping to structure info.

Course text from 2022 declares a variable with a shape and a type apart::

    x = relax.Var("x", (1, 784), relax.DynTensorType(2, "float32"))

Today the two are one structure info: ``relax.Var("x", relax.TensorStructInfo((1, 784),
"float32"))``. These types are accepted where the old text puts them and turned into structure
info at once; ``expr.checked_type`` reads one back from an expression's structure info.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..tir import dtype as dt
from .struct_info import (ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                          TupleStructInfo, shape_text, to_shape)


class Type:
    """Base of the 2022 types (today: structure info)."""
    __slots__ = ()


@dataclass(frozen=True)
class DynTensorType(Type):
    """A tensor of rank ``ndim`` (-1: unknown) and ``dtype``; its shape is given apart."""
    ndim: int = -1
    dtype: str = "float32"

    def __post_init__(self):
        if isinstance(self.ndim, bool) or not isinstance(self.ndim, int) or self.ndim < -1:
            raise TypeError(f"relax.DynTensorType: ndim must be an int >= -1 (-1: unknown), got "
                            f"{self.ndim!r}; today's form is relax.TensorStructInfo(shape, dtype)")
        object.__setattr__(self, "dtype", dt.check_dtype(self.dtype))

    def __repr__(self) -> str:
        return f'relax.DynTensorType(ndim={self.ndim}, dtype="{self.dtype}")'


@dataclass(frozen=True)
class ShapeType(Type):
    """A shape value of ``ndim`` dimensions (-1: unknown)."""
    ndim: int = -1

    def __repr__(self) -> str:
        return f"relax.ShapeType(ndim={self.ndim})"


@dataclass(frozen=True)
class ObjectType(Type):
    """Any value."""

    def __repr__(self) -> str:
        return "relax.ObjectType()"


@dataclass(frozen=True)
class TupleType(Type):
    """A tuple whose items have the types ``fields``."""
    fields: tuple = ()

    def __repr__(self) -> str:
        return f"relax.TupleType([{', '.join(map(repr, self.fields))}])"


def struct_info_of(shape, type_, what: str) -> StructInfo:
    """The structure info meant by a 2022 ``(shape annotation, type annotation)`` pair.

    ``what`` names the construct in messages, e.g. ``relax.Var('x', ...)``; a pair that says too
    little (a shape but no dtype) or contradicts itself is refused with the form to write today."""
    if shape is not None and not isinstance(shape, (tuple, list)) and not hasattr(shape, "values"):
        raise TypeError(f"{what}: the shape annotation must be a tuple of sizes, got {shape!r}")
    dims = None if shape is None else to_shape(shape, what)
    if type_ is None:
        if dims is None:
            return None
        raise TypeError(f"{what}: the structure info must be a StructInfo such as relax.TensorStructInfo("
                        f"{shape_text(dims)}, \"float32\"); a shape alone leaves the dtype unknown (the "
                        f"2022 form adds a type: relax.DynTensorType({len(dims)}, \"float32\"))")
    if isinstance(type_, DynTensorType):
        if dims is not None and type_.ndim not in (-1, len(dims)):
            raise ValueError(f"{what}: the shape {shape_text(dims)} has {len(dims)} dimension(s) but "
                             f"the type says ndim={type_.ndim}; write relax.TensorStructInfo("
                             f"{shape_text(dims)}, \"{type_.dtype}\"), which needs no ndim")
        return TensorStructInfo(dims, type_.dtype, -1 if dims is not None else type_.ndim)
    if dims is not None:
        raise TypeError(f"{what}: a shape annotation only goes with a relax.DynTensorType, got "
                        f"{type_!r}")
    if isinstance(type_, ShapeType):
        return ShapeStructInfo(ndim=type_.ndim)
    if isinstance(type_, ObjectType):
        return ObjectStructInfo()
    if isinstance(type_, TupleType):
        return TupleStructInfo([struct_info_of(None, t, what) for t in type_.fields])
    raise TypeError(f"{what}: expected a relax.DynTensorType (2022) or a relax.TensorStructInfo, "
                    f"got {type_!r}")


def type_of(sinfo: StructInfo | None) -> Type:
    """The 2022 type of a value with structure info ``sinfo``."""
    if isinstance(sinfo, TensorStructInfo):
        return DynTensorType(sinfo.ndim, sinfo.dtype)
    if isinstance(sinfo, ShapeStructInfo):
        return ShapeType(sinfo.ndim)
    if isinstance(sinfo, TupleStructInfo):
        return TupleType(tuple(type_of(f) for f in sinfo.elements))
    if sinfo is None or isinstance(sinfo, ObjectStructInfo):
        return ObjectType()
    raise TypeError(f"a value of {sinfo.script()} has no 2022 type; read its .struct_info")


__all__ = ["DynTensorType", "ObjectType", "ShapeType", "TupleType", "Type", "struct_info_of",
           "type_of"]
