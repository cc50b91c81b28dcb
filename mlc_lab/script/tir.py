"""The ``T`` namespace of the script language: ``from mlc_lab.script import tir as T``.

Expression helpers (``T.float32(0)``, ``T.max``, ``T.exp``, ...) are ordinary functions that build
IR and work anywhere. Statement forms (``T.block``, ``T.axis.*``, ``T.reads``, ``T.init``, ...) only
mean something inside a ``@T.prim_func``; the parser recognises them, and calling them outside
a script raises a RuntimeError that says so.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..ir import hooks as _hooks
from ..tir import dtype as dt
from ..tir import expr as E
from ..tir.buffer import BUFFER_DATA as _BUFFER_DATA
from ..tir.buffer import Buffer as _Buffer
from ..tir.buffer import decl_buffer as _decl_buffer
from ..tir.extern import call_extern as _call_extern
from ..tir.stmt import FOR_KINDS, THREAD_TAGS
from .tir_fixed_point import q_multiply_shift, q_multiply_shift_per_axis


class ScriptOnly:
    """A statement form that the parser interprets, e.g. ``T.block`` or ``T.axis.remap``."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"T.{self.name} can only be used inside a function decorated with @T.prim_func")

    def __repr__(self) -> str:
        return f"T.{self.name}"


# -- functions and buffers -----------------------------------------------------------------------
_WARNED_OPTIONS: set = set()


def _check_buffer_options(align: int, offset_factor: int) -> None:
    """``align`` and ``offset_factor`` are accepted for compatibility with TVMScript and ignored:
    mlc_lab allocates its buffers 64-byte aligned and its buffers have no element offset. Values
    that ask for more than that warn, once per process for each option."""
    if align and 64 % align:
        _warn_once("align", f"align={align} is ignored: mlc_lab aligns the buffers it allocates to "
                   "64 bytes and does not check the alignment of arguments")
    if offset_factor not in (0, 1):
        _warn_once("offset_factor", f"offset_factor={offset_factor} is ignored: mlc_lab buffers have "
                   "no element offset")


def _warn_once(option: str, message: str) -> None:
    if option not in _WARNED_OPTIONS:
        _WARNED_OPTIONS.add(option)
        warnings.warn(message, stacklevel=4)


def check_elem_offset(elem_offset, name: str) -> None:
    """``elem_offset=0`` says the buffer starts at the first element of its storage, as every
    mlc_lab buffer does (a view into another buffer is ``T.match_buffer`` of a region inside a
    block, which knows its corner); any other value is refused."""
    if elem_offset is None or (type(elem_offset) is int and elem_offset == 0) or (
            isinstance(elem_offset, E.IntImm) and elem_offset.value == 0):
        return
    raise ValueError(f"buffer {name}: elem_offset={elem_offset} is not supported: an mlc_lab buffer "
                     "starts at the first element of its storage (elem_offset=0), and a view into "
                     "part of another buffer is written T.match_buffer(A[region], shape) inside a "
                     "block; no variable holds its offset")


def prim_func(func=None, *, private: bool = False):
    """Decorator: parse the decorated Python function into a :class:`~mlc_lab.tir.PrimFunc`."""
    from .parser import parse_function

    if func is None:
        return lambda f: parse_function(f, private=private)
    return parse_function(func, private=private)


class _BufferType:
    """``T.Buffer((128, 128), "float32")`` or the older ``T.Buffer[(128, 128), "float32"]``."""

    def __call__(self, shape, dtype: str = "float32", strides=None, scope: str = "global",
                 align: int = 0, offset_factor: int = 0, *, data=None, elem_offset=None,
                 axis_separators=None) -> _Buffer:
        _check_buffer_options(align, offset_factor)
        check_elem_offset(elem_offset, "buffer")
        buffer = _decl_buffer(shape, dtype, "buffer", strides or (), scope, axis_separators)
        return buffer if data is None else _over_data(buffer, data, "T.Buffer")

    def __getitem__(self, key) -> _Buffer:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str):
            return self(key[0], key[1])
        return self(key)

    def __repr__(self) -> str:
        return "T.Buffer"


Buffer = _BufferType()


def decl_buffer(shape, dtype: str = "float32", data=None, strides=None, elem_offset=None,
                scope: str = "global", align: int = 0, offset_factor: int = 0,
                axis_separators=None) -> _Buffer:
    """``T.decl_buffer(shape, dtype, data=X)``: the buffer whose storage is X's, where X is what
    ``T.allocate`` or ``T.allocate_const`` bound (or ``A.data``). mlc_lab buffers do not alias one
    another, so it must have X's shape and dtype, and it is X itself."""
    if data is None:
        raise TypeError("T.decl_buffer without data= is not supported; " + _NO_BUFFER_DECL)
    _check_buffer_options(align, offset_factor)
    check_elem_offset(elem_offset, "buffer")
    return _over_data(_decl_buffer(shape, dtype, "buffer", strides or (), scope, axis_separators), data,
                      "T.decl_buffer")


def _over_data(buffer: _Buffer, data, what: str) -> _Buffer:
    """The buffer ``data`` (an allocation, or ``A.data``) holds, checked against ``buffer``, the
    declaration that claims its storage."""
    if isinstance(data, E.Call) and data.op == _BUFFER_DATA:
        data = data.args[0].buffer
    if not isinstance(data, _Buffer):
        raise TypeError(f"{what}(data=...) takes what T.allocate or T.allocate_const bound, or A.data; "
                        f"got {data!r}")
    from ..ir import structural_equal
    same = (buffer.dtype == data.dtype and len(buffer.shape) == len(data.shape)
            and all(structural_equal(a, b) for a, b in zip(buffer.shape, data.shape))
            and buffer.strides in ((), data.strides) and buffer.scope in ("global", data.scope)
            and buffer.axis_separators in ((), data.axis_separators))
    if not same:
        shape = ", ".join(str(d) for d in data.shape)
        raise ValueError(f"{what}(data={data.name}) must declare {data.name}'s shape ({shape}) and dtype "
                         f"{data.dtype}: mlc_lab buffers do not alias one another, so the buffer over "
                         f"the storage of {data.name} is {data.name} itself")
    return data


class _Handle:
    """``a: T.handle``; the parameter becomes the buffer that ``T.match_buffer(a, ...)`` declares."""

    dtype = "handle"

    def __repr__(self) -> str:
        return "T.handle"


handle = _Handle()

match_buffer = ScriptOnly("match_buffer")
alloc_buffer = ScriptOnly("alloc_buffer")
allocate = ScriptOnly("allocate")
allocate_const = ScriptOnly("allocate_const")
func_attr = ScriptOnly("func_attr")
var = ScriptOnly("var")


# -- loops -----------------------------------------------------------------------------------------
@dataclass
class LoopSpec:
    """One loop of a ``for`` header: its bounds (``stop`` is None for a plain extent) and kind."""
    start: object
    stop: object
    kind: str = "serial"
    thread: str | None = None
    annotations: dict = field(default_factory=dict)


def _loop(kind: str, start, stop=None, annotations=None, thread=None) -> LoopSpec:
    if kind not in FOR_KINDS:
        raise ValueError(f"unknown loop kind {kind!r}")
    return LoopSpec(start, stop, kind, thread, dict(annotations or {}))


def serial(start, stop=None, *, annotations=None) -> LoopSpec:
    return _loop("serial", start, stop, annotations)


def parallel(start, stop=None, *, annotations=None) -> LoopSpec:
    return _loop("parallel", start, stop, annotations)


def vectorized(start, stop=None, *, annotations=None) -> LoopSpec:
    return _loop("vectorized", start, stop, annotations)


def unroll(start, stop=None, *, annotations=None) -> LoopSpec:
    return _loop("unrolled", start, stop, annotations)


def thread_binding(start, stop=None, thread: str | None = None, *, annotations=None) -> LoopSpec:
    """``T.thread_binding(n, thread="threadIdx.x")`` or ``T.thread_binding(a, b, thread=...)``."""
    if thread is None and isinstance(stop, str):
        start, stop, thread = start, None, stop
    if thread is None:
        raise TypeError('T.thread_binding needs a thread tag, e.g. thread="threadIdx.x"')
    if thread not in THREAD_TAGS:
        raise ValueError(f"unknown thread tag {thread!r}; expected one of {', '.join(THREAD_TAGS)}")
    return _loop("thread_binding", start, stop, annotations, thread)


def grid(*extents) -> tuple:
    """``for i, j in T.grid(a, b)``: nested serial loops."""
    if not extents:
        raise TypeError("T.grid needs at least one extent")
    return tuple(serial(e) for e in extents)


# -- blocks ----------------------------------------------------------------------------------------
block = ScriptOnly("block")
init = ScriptOnly("init")
where = ScriptOnly("where")
reads = ScriptOnly("reads")
writes = ScriptOnly("writes")
block_attr = ScriptOnly("block_attr")


class _Axis:
    """``T.axis.spatial / reduce / opaque / remap`` (and the ``S`` / ``R`` aliases)."""

    spatial = ScriptOnly("axis.spatial")
    reduce = ScriptOnly("axis.reduce")
    opaque = ScriptOnly("axis.opaque")
    scan = ScriptOnly("axis.scan")
    remap = ScriptOnly("axis.remap")
    S = spatial
    R = reduce

    def __repr__(self) -> str:
        return "T.axis"


axis = _Axis()


# -- expressions -----------------------------------------------------------------------------------
class DTypeFunc:
    """``T.float32``: a dtype (``x: T.float32``), a constant/cast maker (``T.float32(0)``,
    ``T.float32("inf")``, ``T.float32(expr)``), and with no argument a symbolic variable
    declaration (``n = T.int64()``, inside a script)."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def __call__(self, value=None):
        if value is None:
            raise RuntimeError(f"T.{self.dtype}() declares a symbolic variable; write `n = T.{self.dtype}()` "
                               "inside a @T.prim_func")
        if isinstance(value, str):
            if not dt.is_float(self.dtype):
                raise TypeError(f"T.{self.dtype} got the string {value!r}; only float types accept "
                                '"inf", "-inf" and "nan"')
            if value.strip().lower() not in ("inf", "+inf", "-inf", "nan"):
                raise ValueError(f'T.{self.dtype} got the string {value!r}; the strings it accepts are '
                                 '"inf", "-inf" and "nan"')
            return E.FloatImm(self.dtype, float(value))
        if isinstance(value, E.PrimExpr):
            return value.astype(self.dtype)
        return E.const(value, self.dtype)

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


bool = DTypeFunc("bool")  # noqa: A001  (the script name shadows the builtin on purpose)
int8, int16, int32, int64 = (DTypeFunc(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (DTypeFunc(f"uint{b}") for b in (8, 16, 32, 64))
float16, float32, float64 = (DTypeFunc(f"float{b}") for b in (16, 32, 64))


def Cast(dtype: str, value) -> E.PrimExpr:  # noqa: N802  (TVM's name)
    if isinstance(value, str) and not isinstance(dtype, str):
        raise TypeError(f"T.Cast takes the dtype first: T.Cast({value!r}, x); "
                        f"T.cast(x, {value!r}) takes it second")
    return E.convert(value).astype(dt.check_dtype(dtype))


def cast(value, dtype: str) -> E.PrimExpr:
    """``T.cast(x, "float32")``: TVM's other spelling of ``T.Cast("float32", x)``."""
    if isinstance(value, str) and not isinstance(dtype, str):
        raise TypeError(f"T.cast takes the value first: T.cast(x, {value!r}); "
                        f"T.Cast({value!r}, x) takes the dtype first")
    return Cast(dtype, value)


def Select(condition, true_value, false_value) -> E.Select:  # noqa: N802
    a, b = E.unify_operands(true_value, false_value)
    return E.Select(E.convert(condition), a, b)


def Ramp(base, stride, lanes: int) -> E.Ramp:  # noqa: N802
    base, stride = E.unify_operands(base, stride)
    return E.Ramp(base, stride, int(lanes))


def Broadcast(value, lanes: int) -> E.Broadcast:  # noqa: N802
    return E.Broadcast(E.convert(value), int(lanes))


def evaluate(value) -> E.PrimExpr:
    return E.convert(value)


def max(a, b) -> E.Max:  # noqa: A001
    return E.Max(*E.unify_operands(a, b))


def min(a, b) -> E.Min:  # noqa: A001
    return E.Min(*E.unify_operands(a, b))


def floordiv(a, b) -> E.FloorDiv:
    return E.FloorDiv(*E.unify_operands(a, b))


def floormod(a, b) -> E.FloorMod:
    return E.FloorMod(*E.unify_operands(a, b))


def truncdiv(a, b) -> E.Div:
    return E.Div(*E.unify_operands(a, b))


def truncmod(a, b) -> E.Mod:
    return E.Mod(*E.unify_operands(a, b))


def _intrinsic(name: str):
    def call(*args, dtype: str | None = None):
        return E.call_intrin(name, *args, dtype=dtype)
    call.__name__ = name
    call.__doc__ = (f"``T.{name}(...)``: the ``{name}`` intrinsic; ``dtype=`` (as older TVMScript "
                    "prints it) must be the dtype it computes, and types the Python numbers given.")
    return call


exp, log, sqrt, rsqrt, tanh, sigmoid, fabs, abs, floor, ceil, round, sin, cos, erf, pow, if_then_else = (  # noqa: A001
    _intrinsic(n) for n in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "fabs", "abs", "floor",
                            "ceil", "round", "sin", "cos", "erf", "pow", "if_then_else"))
likely = _intrinsic("likely")
likely.__doc__ = ("``T.likely(cond)``: a hint that ``cond`` is usually true; its value is ``cond``'s "
                  "(the backends compute the condition and ignore the hint).")


def assume(cond) -> E.Call:
    """``T.assume(cond)``: a statement that ``cond`` holds wherever it runs, for analyses (e.g.
    that the padding of a transformed input holds the pad value). It computes nothing: lowering
    drops it, so a false assumption is not detected at run time. Written as a statement, or as
    ``T.evaluate(T.assume(cond))``."""
    cond = E.convert(cond)
    if not dt.is_bool(cond.dtype):
        raise TypeError(f"T.assume takes a bool condition, got {cond} of dtype {cond.dtype}")
    return E.Call("bool", "assume", (cond,))


def call_extern(*args, dtype: str | None = None) -> E.Call:
    """``T.call_extern("expf", x, dtype="float32")`` (or ``T.call_extern("float32", "expf", x)``):
    call an external function by name. The C math library's functions (``exp``/``expf``, ``pow``,
    ``tanh``, ...) run on every backend; other names are refused when the program is built."""
    if dtype == "":   # TVMScript's void: a call made for its effect, kept as an opaque handle
        dtype = "handle"
    if dtype is None:
        if len(args) < 2 or not all(isinstance(a, str) for a in args[:2]):
            raise TypeError('T.call_extern needs the result dtype: T.call_extern("expf", x, '
                            'dtype="float32") or T.call_extern("float32", "expf", x)')
        dtype, args = args[0], args[1:]
    if not args:
        raise TypeError("T.call_extern needs the name of the function to call")
    return _call_extern(dtype, args[0], *(E.StringImm(a) if isinstance(a, str) else a for a in args[1:]))


def llvm_lookup_intrinsic_id(name: str) -> E.StringImm:
    """``T.llvm_lookup_intrinsic_id("llvm.x86.avx512.vpdpbusd.512")``: names an LLVM intrinsic for
    ``T.call_llvm_pure_intrin``. mlc_lab keeps the name itself (LLVM's numeric ids change from
    one LLVM release to the next)."""
    if not isinstance(name, str) or not name.startswith("llvm."):
        raise ValueError(f"T.llvm_lookup_intrinsic_id: an LLVM intrinsic name starts with 'llvm.', "
                         f"got {name!r}")
    return E.StringImm(name)


def call_llvm_pure_intrin(*args, dtype: str | None = None) -> E.Call:
    """``T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.x86.avx512.vpdpbusd.512"),
    T.uint32(3), c, a, b, dtype="int32x16")``: a call of an LLVM intrinsic on values (the name may
    also be given as a str, and the argument count may be left out). It is kept as a
    ``T.call_extern`` of the intrinsic's name, which the llvm target compiles to the intrinsic;
    the other backends refuse it by name."""
    if dtype is None and args and isinstance(args[0], str) and not args[0].startswith("llvm."):
        dtype, args = args[0], args[1:]   # the functional form: (dtype, name, *args)
    if dtype is None:
        raise TypeError("T.call_llvm_pure_intrin needs the result dtype, e.g. dtype=\"int32x16\"")
    if not args:
        raise TypeError("T.call_llvm_pure_intrin needs the intrinsic's name")
    name = args[0].value if isinstance(args[0], E.StringImm) else args[0]
    if not isinstance(name, str) or not name.startswith("llvm."):
        raise TypeError(f"T.call_llvm_pure_intrin: the intrinsic is named by a str starting with "
                        f"'llvm.' (or T.llvm_lookup_intrinsic_id), got {args[0]!r}")
    rest = list(args[1:])
    if rest and isinstance(rest[0], E.IntImm) and rest[0].dtype == "uint32" \
            and rest[0].value == len(rest) - 1:
        rest = rest[1:]   # the argument count the reference compiler's form passes first
    return _call_extern(dt.check_dtype(dtype), name, *rest)


call_llvm_intrin = call_llvm_pure_intrin


def reinterpret(value, dtype: str) -> E.Call:
    """``T.reinterpret(x, dtype="int32")``: the bits of ``x`` read as another type of the same
    size (``uint8x4`` -> ``int32``, ``int8x64`` -> ``int32x16``)."""
    value, dtype = E.convert(value), dt.check_dtype(dtype)
    if dt.bits(value.dtype) * dt.lanes(value.dtype) != dt.bits(dtype) * dt.lanes(dtype):
        raise TypeError(f"T.reinterpret: {value.dtype} and {dtype} differ in size; reinterpret "
                        "keeps the bits, so both must have as many")
    return E.Call(dtype, "reinterpret", (value,))


def _opaque_builtin(name: str):
    def call(*args, dtype: str = "handle") -> E.Call:
        return call_extern(name, *args, dtype=dtype or "handle")
    call.__name__ = name
    call.__doc__ = (f"``T.{name}(...)``: a builtin of the reference compiler's tensor-core and "
                    "pointer code, kept as an opaque call (``T.call_extern``) so that programs "
                    "using it parse, print and schedule; building one refuses it by name.")
    return call


# Tensor-core fragments and raw pointers, as the reference compiler's tensor intrinsics spell
# them; the printer prints these calls under their own names.
OPAQUE_BUILTINS = ("tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync",
                   "tvm_bmma_sync", "tvm_access_ptr", "type_annotation")
(tvm_fill_fragment, tvm_load_matrix_sync, tvm_store_matrix_sync, tvm_mma_sync, tvm_bmma_sync,
 tvm_access_ptr) = (_opaque_builtin(n) for n in OPAQUE_BUILTINS[:-1])


def type_annotation(dtype: str = "handle") -> E.Call:
    """``T.type_annotation("float16")``: a value that stands for its dtype only (the element type
    of ``T.tvm_access_ptr``): an opaque call of that dtype without arguments."""
    return _call_extern(dt.check_dtype(dtype), "type_annotation")


def min_value(dtype: str) -> E.PrimExpr:
    """The smallest finite value of ``dtype`` as a constant."""
    return _limit(dtype, "min")


def max_value(dtype: str) -> E.PrimExpr:
    """The largest finite value of ``dtype`` as a constant."""
    return _limit(dtype, "max")


def _limit(dtype: str, end: str) -> E.PrimExpr:
    dtype = dt.check_dtype(dtype)
    if dt.is_float(dtype):
        return E.FloatImm(dtype, float(getattr(np.finfo(dtype), end)))
    if dt.is_bool(dtype):
        return E.IntImm(dtype, int(end == "max"))
    return E.IntImm(dtype, int(getattr(np.iinfo(dtype), end)))


# -- forms of older TVMScript releases that mlc_lab does not take, with what to write instead -------
_NO_BUFFER_DECL = ("mlc_lab has no separate buffer declaration: annotate parameters with "
                   'T.Buffer((128,), "float32"), declare temporaries with T.alloc_buffer((128,), "float32"), '
                   'and view a T.handle parameter with T.match_buffer(a, (128,), "float32")')
RETIRED = {
    "buffer_decl": "T.buffer_decl (the 2022 name of T.decl_buffer) is not supported; " + _NO_BUFFER_DECL,
    "load": "T.load(dtype, A.data, i) is the pre-2022 form of a buffer read; write A[i]",
    "store": "T.store(A.data, i, value) is the pre-2022 form of a buffer write; write A[i] = value",
    "preflattened_buffer": ("T.preflattened_buffer (printed by 2022 releases after lowering) is not "
                            "needed: mlc_lab keeps buffer shapes until code generation; delete the line"),
    "env_thread": ('T.env_thread / T.launch_thread are the lowered form of thread binding; write the loop '
                   'as `for tx in T.thread_binding(n, thread="threadIdx.x"):` or bind it with sch.bind'),
    "launch_thread": ('T.env_thread / T.launch_thread are the lowered form of thread binding; write the loop '
                      'as `for tx in T.thread_binding(n, thread="threadIdx.x"):` or bind it with sch.bind'),
}


def __getattr__(name: str):
    if name in RETIRED:
        raise AttributeError(RETIRED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_hooks.provide("script.tir", sys.modules[__name__])   # the T namespace, for index-map lambdas

__all__ = [
    "prim_func", "Buffer", "decl_buffer", "handle", "match_buffer", "alloc_buffer", "allocate",
    "allocate_const", "func_attr", "var",
    "serial", "parallel", "vectorized", "unroll", "thread_binding", "grid",
    "block", "init", "where", "reads", "writes", "block_attr", "axis",
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "Cast", "cast", "Select", "Ramp", "Broadcast", "evaluate",
    "max", "min", "floordiv", "floormod", "truncdiv", "truncmod",
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "fabs", "abs", "floor", "ceil", "round",
    "sin", "cos", "erf", "pow", "if_then_else", "likely", "assume", "q_multiply_shift",
    "q_multiply_shift_per_axis", "min_value", "max_value",
    "call_extern", "call_llvm_pure_intrin", "call_llvm_intrin", "llvm_lookup_intrinsic_id",
    "reinterpret",
    "tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync", "tvm_mma_sync",
    "tvm_bmma_sync", "tvm_access_ptr", "type_annotation",
]
