"""Expressions of the loop IR (TensorIR-style): variables, constants, arithmetic, loads, calls."""
from __future__ import annotations

from typing import Any

from ..ir.node import Node, node
from . import dtype as dt


class PrimExpr(Node):
    """A scalar (or vector) expression. Python operators build IR, as in the course's TVM."""
    __slots__ = ()
    dtype: str

    def __add__(self, other): return _binary(Add, self, other)
    def __radd__(self, other): return _binary(Add, other, self)
    def __sub__(self, other): return _binary(Sub, self, other)
    def __rsub__(self, other): return _binary(Sub, other, self)
    def __mul__(self, other): return _binary(Mul, self, other)
    def __rmul__(self, other): return _binary(Mul, other, self)
    def __truediv__(self, other): return _binary(Div, self, other)
    def __rtruediv__(self, other): return _binary(Div, other, self)
    def __floordiv__(self, other): return _binary(FloorDiv, self, other)
    def __rfloordiv__(self, other): return _binary(FloorDiv, other, self)
    def __mod__(self, other): return _binary(FloorMod, self, other)
    def __rmod__(self, other): return _binary(FloorMod, other, self)
    def __lt__(self, other): return _binary(LT, self, other)
    def __le__(self, other): return _binary(LE, self, other)
    def __gt__(self, other): return _binary(GT, self, other)
    def __ge__(self, other): return _binary(GE, self, other)
    def __eq__(self, other): return _binary(EQ, self, other)
    def __ne__(self, other): return _binary(NE, self, other)
    def __and__(self, other): return _binary(And, self, other)
    def __or__(self, other): return _binary(Or, self, other)
    def __invert__(self): return Not(self)
    def __neg__(self): return _binary(Sub, const(0, self.dtype), self)
    __hash__ = Node.__hash__

    def __bool__(self):
        raise TypeError(f"cannot use the symbolic expression `{self}` as a Python bool; "
                        "build conditions with T.if_then_else / T.Select or compare values at run time")

    def astype(self, dtype: str) -> "PrimExpr":
        return self if dtype == self.dtype else Cast(dt.check_dtype(dtype), self)


def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant; Python bool -> bool, int -> int32, float -> float32 unless ``dtype`` is given."""
    if isinstance(value, PrimExpr):
        return value if dtype is None else value.astype(dtype)
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
    dtype = dt.check_dtype(dtype)
    if dt.is_float(dtype):
        return FloatImm(dtype, float(value))
    if isinstance(value, float) and not float(value).is_integer():
        raise TypeError(f"cannot make a {dtype} constant from the float {value}")
    return IntImm(dtype, int(value))


def convert(value: Any) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, (bool, int, float)) or hasattr(value, "dtype") and not isinstance(value, Node):
        if hasattr(value, "item"):
            return const(value.item(), str(value.dtype))
        return const(value)
    raise TypeError(f"expected a PrimExpr or a Python number, got {type(value).__name__}: {value!r}")


def unify_operands(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    """Bring two operands to one dtype: Python numbers take the other side's dtype,
    narrower ints widen, ints meet floats as floats, scalars broadcast to vectors."""
    if isinstance(b, PrimExpr) and not isinstance(a, PrimExpr):
        a = _number_like(a, b.dtype)
    elif isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        b = _number_like(b, a.dtype)
    a, b = convert(a), convert(b)
    if a.dtype == b.dtype:
        return a, b
    la, lb = dt.lanes(a.dtype), dt.lanes(b.dtype)
    if la != lb and 1 not in (la, lb):
        raise TypeError(f"vector lanes differ: {a.dtype} vs {b.dtype}")
    ea, eb = dt.element_of(a.dtype), dt.element_of(b.dtype)
    if dt.is_float(ea) != dt.is_float(eb):
        target = ea if dt.is_float(ea) else eb
    elif dt.is_bool(ea) or dt.is_bool(eb):
        target = eb if dt.is_bool(ea) else ea
    else:
        target = ea if dt.bits(ea) >= dt.bits(eb) else eb
    a, b = a.astype(dt.with_lanes(target, la)), b.astype(dt.with_lanes(target, lb))
    if la < lb:
        a = Broadcast(a, lb)
    elif lb < la:
        b = Broadcast(b, la)
    return a, b


def _number_like(value: Any, dtype: str) -> Any:
    """A Python number as a constant of ``dtype``'s element type (a float meeting an integer
    expression stays a float32 constant, so the expression is promoted instead)."""
    if not isinstance(value, (bool, int, float)):
        return value
    elem = dt.element_of(dtype)
    if isinstance(value, float) and not dt.is_float(elem):
        return const(value, "float32")
    return const(value, elem)


def _binary(cls, a, b):
    a, b = unify_operands(a, b)
    return cls(a, b)


def floordiv(a, b) -> "FloorDiv":
    """``a // b`` rounded toward negative infinity (Python's ``//``; also what ``//`` on
    expressions builds). Either side may be a Python number."""
    return _binary(FloorDiv, a, b)


def floormod(a, b) -> "FloorMod":
    """The remainder of :func:`floordiv`, with the sign of ``b`` (Python's ``%``)."""
    return _binary(FloorMod, a, b)


def truncdiv(a, b) -> "Div":
    """Integer ``a / b`` rounded toward zero, as C divides (``Div`` of two integers)."""
    return _binary(Div, a, b)


def truncmod(a, b) -> "Mod":
    """The remainder of :func:`truncdiv`, with the sign of ``a`` (C's ``%``)."""
    return _binary(Mod, a, b)


# ----------------------------------------------------------------------------------------------
# Leaves
@node
class Var(PrimExpr):
    """A scalar variable (loop variable, block iterator, symbolic shape, scalar parameter)."""
    name: str
    dtype: str = "int32"
    _binds_by_identity = True   # structural_equal matches variables up to renaming


@node
class SizeVar(Var):
    """A variable known to be non-negative (symbolic shape dimension)."""


@node
class IntImm(PrimExpr):
    dtype: str
    value: int

    def __int__(self) -> int:
        return self.value

    def __bool__(self) -> bool:
        return self.value != 0


@node
class FloatImm(PrimExpr):
    dtype: str
    value: float

    def __float__(self) -> float:
        return self.value


@node
class StringImm(PrimExpr):
    value: str
    dtype: str = "handle"


@node
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


# ----------------------------------------------------------------------------------------------
# Binary arithmetic (dtype follows the operands, which share one dtype)
class BinaryOp(PrimExpr):
    __slots__ = ()
    a: PrimExpr
    b: PrimExpr

    @property
    def dtype(self) -> str:
        return self.a.dtype

    def __post_init__(self):
        # Like TVM's constructors: Python numbers become constants, operand dtypes are unified.
        a, b = self.a, self.b
        if not (isinstance(a, PrimExpr) and isinstance(b, PrimExpr)) or a.dtype != b.dtype:
            a, b = unify_operands(a, b)
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)


@node
class Add(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Sub(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Mul(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Div(BinaryOp):
    """True division for floats, truncating (C) division for integers."""
    a: PrimExpr
    b: PrimExpr


@node
class Mod(BinaryOp):
    """Truncating (C) remainder."""
    a: PrimExpr
    b: PrimExpr


@node
class FloorDiv(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class FloorMod(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Min(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Max(BinaryOp):
    a: PrimExpr
    b: PrimExpr


class CmpOp(BinaryOp):
    """Comparisons yield bool expressions. Truth-testing one (``if``, ``assert``, ``and``) gives
    its value when the simplifier decides it, so ``assert A.shape[1] == B.shape[0]`` checks
    constant (or identical symbolic) shapes; a comparison it cannot decide, such as ``n == m``
    for two shape variables, raises TypeError rather than guess."""
    __slots__ = ()

    @property
    def dtype(self) -> str:
        return dt.with_lanes("bool", dt.lanes(self.a.dtype))

    def __bool__(self) -> bool:
        from ..arith import simplify   # arith builds on this module
        if self.a is self.b:
            return isinstance(self, (EQ, LE, GE))
        decided = simplify(self)
        if isinstance(decided, IntImm):
            return decided.value != 0
        raise TypeError(f"cannot decide `{self}` as a Python bool: it depends on symbolic values; "
                        "compare constants, use the same variable on both sides, or build a "
                        "run-time condition with T.if_then_else")


@node
class EQ(CmpOp):
    a: PrimExpr
    b: PrimExpr


@node
class NE(CmpOp):
    a: PrimExpr
    b: PrimExpr


@node
class LT(CmpOp):
    a: PrimExpr
    b: PrimExpr


@node
class LE(CmpOp):
    a: PrimExpr
    b: PrimExpr


@node
class GT(CmpOp):
    a: PrimExpr
    b: PrimExpr


@node
class GE(CmpOp):
    a: PrimExpr
    b: PrimExpr


@node
class And(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Or(BinaryOp):
    a: PrimExpr
    b: PrimExpr


@node
class Not(PrimExpr):
    a: PrimExpr

    @property
    def dtype(self) -> str:
        return self.a.dtype


# ----------------------------------------------------------------------------------------------
@node
class Select(PrimExpr):
    """``condition ? true_value : false_value``; both sides may be evaluated."""
    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    @property
    def dtype(self) -> str:
        return self.true_value.dtype


@node
class BufferLoad(PrimExpr):
    buffer: Any  # tir.Buffer
    indices: tuple

    @property
    def dtype(self) -> str:
        lanes = max((dt.lanes(i.dtype) for i in self.indices), default=1)
        return dt.with_lanes(self.buffer.dtype, lanes)


@node
class Call(PrimExpr):
    """A call to an intrinsic by name, e.g. ``Call("float32", "exp", (x,))``."""
    dtype: str
    op: str
    args: tuple


@node
class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ..., base + (lanes-1)*stride]``."""
    base: PrimExpr
    stride: PrimExpr
    lanes: int

    @property
    def dtype(self) -> str:
        return dt.with_lanes(self.base.dtype, self.lanes)


@node
class Broadcast(PrimExpr):
    value: PrimExpr
    lanes: int

    @property
    def dtype(self) -> str:
        return dt.with_lanes(self.value.dtype, self.lanes)


# Intrinsics known to the interpreter and backends: name -> number of arguments. ``likely`` is
# a hint (its argument, a condition, is probably true) whose value is its argument.
INTRINSICS = {
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "fabs": 1, "abs": 1,
    "floor": 1, "ceil": 1, "round": 1, "sin": 1, "cos": 1, "erf": 1, "pow": 2, "if_then_else": 3,
    "likely": 1,
}
# The intrinsics that compute on floats only (the backends have no integer version).
FLOAT_INTRINSICS = frozenset(INTRINSICS) - {"abs", "if_then_else", "likely"}


def call_intrin(op: str, *args, dtype: str | None = None) -> Call:
    """Build an intrinsic call with its result dtype worked out from the arguments. ``dtype``
    (TVMScript's ``T.exp(x, dtype="float32")``) types the Python numbers among the value
    arguments and must be the dtype the call computes."""
    if op not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {op!r}; known: {', '.join(sorted(INTRINSICS))}")
    if len(args) != INTRINSICS[op]:
        raise TypeError(f"T.{op} takes {INTRINSICS[op]} argument(s), got {len(args)}")
    if dtype is not None:
        dtype = dt.check_dtype(dtype)
        first = 1 if op == "if_then_else" else 0   # the condition keeps its own type
        args = [*args[:first], *(const(a, dtype) if isinstance(a, (bool, int, float)) else a
                                 for a in args[first:])]
    call = _call_intrin(op, args)
    if dtype is not None and call.dtype != dtype:
        raise TypeError(f"T.{op}(...) computes {call.dtype} here, but dtype={dtype!r} was given; "
                        f"convert the argument(s) with T.{dt.element_of(dtype)}(...)")
    return call


def _call_intrin(op: str, args) -> Call:
    if op == "if_then_else":
        cond = convert(args[0])
        a, b = unify_operands(args[1], args[2])
        return Call(a.dtype, op, (cond, a, b))
    if op in FLOAT_INTRINSICS:   # a Python number is a float here: T.sqrt(2) is sqrt(2.0)
        args = [float(a) if isinstance(a, int) and not isinstance(a, bool) else a for a in args]
    if op == "pow":
        a, b = unify_operands(args[0], args[1])
    else:
        a = b = convert(args[0])
    if op in FLOAT_INTRINSICS and not dt.is_float(a.dtype):
        raise TypeError(f"T.{op} computes on floats, but its argument {a} has dtype {a.dtype}; "
                        f"cast it with T.float32(...)")
    return Call(a.dtype, op, (a, b) if op == "pow" else (a,))
