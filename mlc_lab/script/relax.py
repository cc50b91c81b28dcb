"""The ``R`` namespace of the script language: ``from mlc_lab.script import relax as R``.

Structure info (``R.Tensor``, ``R.Tuple``, ``R.Shape``, ``R.Prim``, ``R.Object``, ``R.Callable``)
and the ops (``R.add``, ``R.matmul``, ``R.nn.relu``, ``R.call_tir`` ...) are ordinary functions
that build IR and work anywhere. ``R.dataflow``, ``R.output`` and ``R.func_attr`` only mean
something inside an ``@R.function``; the parser recognises them.

    @R.function
    def main(x: R.Tensor(("n", 784), "float32"), w: R.Tensor((128, 784), "float32")):
        with R.dataflow():
            lv = R.matmul(x, R.permute_dims(w))
            gv = R.nn.relu(lv)
            R.output(gv)
        return gv
"""
from __future__ import annotations

import contextvars
import inspect
import types

from ..relax import op as _op
from ..relax.expr import Call as _Call
from ..relax.expr import ExternFunc as _ExternFunc
from ..relax.expr import PrimValue as _PrimValue
from ..relax.expr import ShapeExpr as _ShapeExpr
from ..relax.expr import const
from ..relax.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo,
                                 ShapeStructInfo, TensorStructInfo, TupleStructInfo)
from ..tir import expr as _E

# While a function is parsed, quoted dimensions (``R.Tensor(("n", 784))``) name the function's
# symbolic sizes: the parser installs a resolver here so every "n" is the same variable.
_symbol_resolver: contextvars.ContextVar = contextvars.ContextVar("relax_symbol_resolver", default=None)


class ScriptOnly:
    """A statement form that the parser interprets, e.g. ``R.dataflow`` or ``R.output``."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"R.{self.name} can only be used inside a function decorated with @R.function")

    def __repr__(self) -> str:
        return f"R.{self.name}"


dataflow = ScriptOnly("dataflow")
output = ScriptOnly("output")
func_attr = ScriptOnly("func_attr")


class DeferredFunction:
    """An ``@R.function`` written in a class body: it is parsed by ``@I.ir_module`` once the
    module is assembled, so ``cls.f`` / ``Module.f`` can name the sibling functions."""

    def __init__(self, func, private: bool, pure: bool):
        self.func, self.private, self.pure = func, private, pure

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.func.__qualname__} is an @R.function inside a class: decorate the "
                           "class with @I.ir_module and call the module's compiled function instead")

    def __repr__(self) -> str:
        return f"<@R.function {self.func.__qualname__}, parsed by @I.ir_module>"


def function(func=None, *, private: bool = False, pure: bool = True):
    """Decorator: parse the decorated Python function into a :class:`~mlc_lab.relax.Function`.

    Inside an ``@I.ir_module`` class the parse waits until the module is assembled."""
    def decorate(f):
        if not inspect.isfunction(f):
            raise TypeError(f"@R.function decorates a function, got {type(f).__name__}")
        if _in_class_body(f):
            return DeferredFunction(f, private, pure)
        from .parser.relax_module import parse_python_function
        return parse_python_function(f, private=private, pure=pure)

    return decorate if func is None else decorate(func)


def _in_class_body(func) -> bool:
    parts = func.__qualname__.split(".")
    return len(parts) > 1 and parts[-2] != "<locals>"


# -- structure info ------------------------------------------------------------------------------
def _dim(d):
    if isinstance(d, str):
        resolve = _symbol_resolver.get()
        return resolve(d) if resolve is not None else _E.Var(d, "int64")
    return d


def _dims(values):
    if isinstance(values, _ShapeExpr):
        return values.values
    if isinstance(values, (int, str, _E.PrimExpr)):
        values = (values,)
    return tuple(_dim(d) for d in values)


def Tensor(shape=None, dtype: str | None = None, ndim: int = -1) -> TensorStructInfo:  # noqa: N802
    """``R.Tensor((1, 784), "float32")``; ``R.Tensor(("n", 784), "float32")`` names a symbolic
    size; ``R.Tensor(dtype="float32", ndim=2)`` leaves the shape unknown."""
    if isinstance(shape, str) and dtype is None:
        shape, dtype = None, shape
    return TensorStructInfo(None if shape is None else _dims(shape), dtype or "float32", ndim)


def Tuple(*fields) -> TupleStructInfo:  # noqa: N802
    """``R.Tuple(R.Tensor(...), R.Tensor(...))``: the structure of a tuple value."""
    if len(fields) == 1 and isinstance(fields[0], (list, tuple)):
        fields = tuple(fields[0])
    return TupleStructInfo(fields)


def Shape(values=None, ndim: int = -1) -> ShapeStructInfo:  # noqa: N802
    """``R.Shape([n, 784])`` or ``R.Shape(ndim=2)``."""
    return ShapeStructInfo(None if values is None else _dims(values), ndim)


def Prim(dtype: str) -> PrimStructInfo:  # noqa: N802
    """``R.Prim("int64")``: a scalar."""
    return PrimStructInfo(dtype)


def Callable(params=None, ret=None, purity: bool = True) -> FuncStructInfo:  # noqa: N802
    """``R.Callable((R.Tensor(...),), R.Tensor(...))``: the structure of a function value."""
    return FuncStructInfo(params, ret if ret is not None else ObjectStructInfo(), purity)


Object = ObjectStructInfo()


# -- values and calls ----------------------------------------------------------------------------
def shape(values) -> _ShapeExpr:
    """``R.shape([1, 784])``: a shape value (e.g. the target of ``R.reshape``)."""
    return _ShapeExpr(tuple(values))


def prim_value(value) -> _PrimValue:
    """``R.prim_value(3)``: a scalar value; a Python int is an int64, as shape sizes are."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = _E.IntImm("int64", value)
    return _PrimValue(value)


def call_tir(func, args, out_sinfo=None, tir_vars=None, dtype=None):
    """``R.call_tir(cls.f, (x, w), out_sinfo=R.Tensor((1, 128), "float32"))``; the 2022 form
    ``R.call_tir(f, (x, w), (1, 128), dtype="float32")`` means the same."""
    return _op.call_tir(func, args, out_sinfo, tir_vars, dtype)


def call_dps_packed(func, args, out_sinfo):
    """``R.call_dps_packed("env.linear", (x, w, b), out_sinfo=R.Tensor(...))``."""
    return _op.call_dps_packed(func, args, out_sinfo)


def call_packed(func: str, *args, sinfo_args=(), **attrs):
    """``R.call_packed("env.print", x, sinfo_args=(R.Object,))``: call a run-time function
    that returns its result (unlike call_dps_packed, which writes into allocated outputs)."""
    if not isinstance(func, str):
        raise TypeError(f"R.call_packed: the function must be named by a str, got {func!r}")
    sinfo = tuple(sinfo_args) if isinstance(sinfo_args, (list, tuple)) else (sinfo_args,)
    if not sinfo:
        raise TypeError("R.call_packed needs sinfo_args=(...) describing its result")
    result = sinfo[0] if len(sinfo) == 1 else TupleStructInfo(sinfo)
    return _Call(_ExternFunc(func), args, attrs, sinfo, result)


def call_pure_packed(func: str, *args, sinfo_args=(), **attrs):
    """``R.call_pure_packed("vm.builtin.attention_kv_cache_view", cache, shape,
    sinfo_args=R.Tensor((n, 4, 16), "float32"))``: a run-time function whose result depends
    only on its arguments. It is the same call as ``R.call_packed`` here (no pass moves or
    drops a call of a run-time function by its purity), and prints as one."""
    return call_packed(func, *args, sinfo_args=sinfo_args, **attrs)


add, subtract, multiply, divide, ewise_fma = _op.add, _op.subtract, _op.multiply, _op.divide, _op.ewise_fma
matmul, linear = _op.matmul, _op.linear
permute_dims, reshape, flatten = _op.permute_dims, _op.reshape, _op.flatten
sum, mean, max, min = _op.sum, _op.mean, _op.max, _op.min  # noqa: A001 - the script names
exp, log, sqrt, sigmoid, tanh, negative = _op.exp, _op.log, _op.sqrt, _op.sigmoid, _op.tanh, _op.negative
# The transformer ops (elementwise math, comparisons, masks, indexing, split/concat): same names.
_MORE_OPS = ("arange", "astype", "match_cast", "broadcast_to", "concat", "cos", "equal", "erf", "expand_dims",
             "full", "full_like", "greater", "greater_equal", "less", "less_equal", "maximum",
             "minimum", "not_equal", "ones", "ones_like", "power", "rsqrt", "sin", "split", "square",
             "squeeze", "strided_slice", "take", "tril", "triu", "where", "zeros", "zeros_like")
globals().update({name: getattr(_op, name) for name in _MORE_OPS})

_NN_OPS = ("relu", "softmax", "log_softmax", "conv2d", "max_pool2d", "avg_pool2d", "dense",
           "layer_norm", "rms_norm", "gelu", "gelu_tanh", "silu")
nn = types.SimpleNamespace(**{name: getattr(_op.nn, name) for name in _NN_OPS})

__all__ = ["Callable", "Object", "Prim", "Shape", "Tensor", "Tuple", "add", "call_dps_packed",
           "call_packed", "call_pure_packed", "call_tir", "const", "dataflow", "divide",
           "ewise_fma", "exp", "flatten",
           "func_attr", "function", "linear", "log", "matmul", "max", "mean", "min", "multiply",
           "negative", "nn", "output", "permute_dims", "prim_value", "reshape", "shape", "sigmoid",
           "sqrt", "subtract", "sum", "tanh", *_MORE_OPS]

# The name each function has in scripts, for error messages ("R.nn.relu() takes 1 argument").
SCRIPT_NAMES = {getattr(nn, name): f"R.nn.{name}" for name in _NN_OPS}
SCRIPT_NAMES.update({globals()[name]: f"R.{name}" for name in __all__
                     if callable(globals()[name]) and not isinstance(globals()[name], (ScriptOnly, types.SimpleNamespace))})
