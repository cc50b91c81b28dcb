"""Structure information of graph-level values: what a value is (tensor, tuple, shape, scalar,
function) and, as far as known, its shape and dtype.

Shape dimensions are loop-IR PrimExprs: ``IntImm("int64", 3)`` for a static size (Python ints
are converted), or an int64 ``tir.Var`` such as ``n`` for a symbolic one.
"""
from __future__ import annotations

from typing import Any, Optional

from ..ir.node import Node, node
from ..tir import dtype as dt
from ..tir.expr import IntImm, PrimExpr, Var as TirVar


class StructInfo(Node):
    """Base of all structure information."""
    __slots__ = ()


def to_dim(value: Any, what: str = "shape") -> PrimExpr:
    """A shape dimension: Python/numpy ints become int64 constants; PrimExprs must be integers."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: a dimension must be an integer, got {value!r}")
    if isinstance(value, int) or (hasattr(value, "__index__") and not isinstance(value, Node)):
        return IntImm("int64", int(value))
    if isinstance(value, PrimExpr):
        if not dt.is_int(value.dtype):
            raise TypeError(f"{what}: a dimension must be an integer expression, got {value} of "
                            f"dtype {value.dtype}")
        return value
    raise TypeError(f"{what}: a dimension must be an int or a tir PrimExpr, got {value!r}")


def to_shape(values: Any, what: str = "shape") -> tuple:
    if isinstance(values, (int, PrimExpr)):
        values = (values,)
    if hasattr(values, "values") and isinstance(getattr(values, "values"), tuple):
        values = values.values  # a ShapeExpr
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{what}: expected a tuple of ints or PrimExprs, got {values!r}")
    return tuple(to_dim(v, what) for v in values)


def dim_value(d: PrimExpr) -> Optional[int]:
    """The integer value of a static dimension, or None for a symbolic one."""
    return d.value if isinstance(d, IntImm) else None


def dims_equal(a: PrimExpr, b: PrimExpr) -> Optional[bool]:
    """True/False when the two dimensions are known to be equal/different, None when unknown."""
    va, vb = dim_value(a), dim_value(b)
    if va is not None and vb is not None:
        return va == vb
    if a is b:
        return True
    from ..ir.structural import structural_equal
    return True if structural_equal(a, b) else None


def shape_text(shape) -> str:
    """``(1, n, 3)``: a shape as the user wrote it, for error messages."""
    if shape is None:
        return "(unknown shape)"
    parts = [str(v) if (v := dim_value(d)) is not None else _sym_text(d) for d in shape]
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def _sym_text(d: PrimExpr) -> str:
    return d.name if isinstance(d, TirVar) else d.script()


@node
class ObjectStructInfo(StructInfo):
    """Anything (nothing is known about the value)."""


@node
class PrimStructInfo(StructInfo):
    """A scalar of ``dtype``."""
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "dtype", dt.check_dtype(self.dtype))


@node
class ShapeStructInfo(StructInfo):
    """A shape value: its ``values`` when known, else only its ``ndim`` (-1: unknown)."""
    values: Optional[tuple] = None
    ndim: int = -1

    def __post_init__(self):
        if self.values is not None:
            values = to_shape(self.values, "ShapeStructInfo")
            object.__setattr__(self, "values", values)
            object.__setattr__(self, "ndim", len(values))


@node
class TensorStructInfo(StructInfo):
    """A tensor: ``shape`` (tuple of int64 PrimExprs, or None when unknown), ``dtype`` and ``ndim``
    (derived from the shape; -1 when even the rank is unknown).

    >>> TensorStructInfo((1, 784), "float32")
    R.Tensor((1, 784), dtype="float32")
    """
    shape: Optional[tuple] = None
    dtype: str = "float32"
    ndim: int = -1

    def __post_init__(self):
        object.__setattr__(self, "dtype", dt.check_dtype(self.dtype))
        if self.shape is not None:
            shape = to_shape(self.shape, "TensorStructInfo")
            if self.ndim not in (-1, len(shape)):
                raise ValueError(f"TensorStructInfo: shape {shape_text(shape)} has {len(shape)} "
                                 f"dimension(s) but ndim={self.ndim}")
            object.__setattr__(self, "shape", shape)
            object.__setattr__(self, "ndim", len(shape))
        elif not isinstance(self.ndim, int) or self.ndim < -1:
            raise ValueError(f"TensorStructInfo: ndim must be -1 (unknown) or >= 0, got {self.ndim!r}")

    @property
    def static_shape(self) -> Optional[tuple]:
        """The shape as Python ints when every dimension is static, else None."""
        if self.shape is None:
            return None
        values = tuple(dim_value(d) for d in self.shape)
        return None if None in values else values


@node
class TupleStructInfo(StructInfo):
    """A tuple whose items have the structure info in ``elements``."""
    elements: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "elements", tuple(self.elements))
        for f in self.elements:
            if not isinstance(f, StructInfo):
                raise TypeError(f"TupleStructInfo: elements must be StructInfo, got {f!r}")


@node
class FuncStructInfo(StructInfo):
    """A function from ``params`` (StructInfo each, or None when unknown) to ``ret``."""
    params: Optional[tuple] = None
    ret: StructInfo = ObjectStructInfo()
    purity: bool = True

    def __post_init__(self):
        if self.params is not None:
            object.__setattr__(self, "params", tuple(self.params))


def struct_info_equal(a: StructInfo, b: StructInfo) -> bool:
    """True when two structure infos describe the same values (symbolic dims by identity)."""
    from ..ir.structural import structural_equal
    return a is b or structural_equal(a, b)
