"""Runtime modules: what ``mlc_lab.build`` returns. Functions by name, argument checking shared by
every backend, and ``time_evaluator``.

Calling a function checks its arguments against the PrimFunc's parameters before anything runs,
so a wrong call says which parameter is wrong and how, instead of failing deep inside a kernel.
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from ..tir import dtype as dt
from ..tir.buffer import Buffer
from ..tir.expr import IntImm, Var
from ..tir.functor import StmtExprVisitor
from .device import Device
from .interpreter.expr import Evaluator, np_dtype
from .ndarray import NDArray


def bind_arguments(func, name: str, args, device: Device | None = None) -> tuple[list, dict]:
    """Check ``args`` against ``func.params``; return the numpy array (or scalar) for each
    parameter and the values of scalar parameters and symbolic shape variables.

    Arrays must live on ``device`` (the CPU unless given), and an array the function writes
    must be writeable."""
    params = func.params
    if len(args) != len(params):
        raise TypeError(f"{name}() takes {len(params)} argument(s) ({_names(params)}) but "
                        f"{len(args)} were given")
    device = device or Device("cpu", 0)
    for param, arg in zip(params, args):
        if isinstance(arg, NDArray) and arg.device.device_type != device.device_type:
            raise ValueError(f"{name}(): parameter {param.name}: the array is on {arg.device} but "
                             f"this function runs on {device}; copy it with "
                             f"arr.copyto(mlc_lab.{device.device_type}())")
    _check_outputs_writeable(func, name, args)
    env: dict = {}
    origin: dict = {}  # shape variable -> the parameter whose argument bound it
    values, derived = [], []
    for param, arg in zip(params, args):
        if isinstance(param, Var):
            value = _scalar(name, param, arg)
            if param in env and env[param] != value:
                raise ValueError(f"{name}(): parameter {param.name} is {value} but {origin[param]} "
                                 f"needs {param.name} = {env[param]}")
            env[param], origin[param] = value, f"argument {param.name}"
            values.append(value)
            continue
        array = _array(name, param, arg)
        for axis, (dim, given) in enumerate(zip(param.shape, array.shape)):
            if isinstance(dim, IntImm):
                if dim.value != given:
                    raise ValueError(f"{name}(): parameter {param.name}: dimension {axis} "
                                     f"should be {dim.value} but is {given} (array shape "
                                     f"{array.shape}, expected {_shape_text(param)})")
            elif isinstance(dim, Var):
                if dim not in env:
                    env[dim], origin[dim] = np_dtype(dim.dtype).type(given), param.name
                elif int(env[dim]) != given:
                    raise ValueError(f"{name}(): parameter {param.name}: dimension {axis} is "
                                     f"{dim.name} = {int(env[dim])} from {origin[dim]} but "
                                     f"{param.name} has {given}")
            else:
                derived.append((param, axis, dim, given))
        values.append(array)
    for param, axis, dim, given in derived:
        try:
            expected = int(Evaluator(env, {}).eval(dim))
        except RuntimeError:  # uses a variable no argument binds: nothing to check against
            continue
        if expected != given:
            raise ValueError(f"{name}(): parameter {param.name}: dimension {axis} should be "
                             f"{expected} (from {_shape_text(param)}) but is {given}")
    return values, env


def _check_outputs_writeable(func, name: str, args) -> None:
    read_only = [p for p, a in zip(func.params, args) if isinstance(p, Buffer)
                 and isinstance(a, (np.ndarray, NDArray)) and not _as_numpy(a).flags.writeable]
    if not read_only:
        return   # the common case: no need to look for the buffers the function writes
    written = written_buffers(func)
    for param in read_only:
        if param in written:
            raise ValueError(f"{name}(): parameter {param.name} is written by the function but its "
                             "array is read-only; pass a writeable array (e.g. arr.copy())")


def _as_numpy(arg) -> np.ndarray:
    return arg.numpy_view() if isinstance(arg, NDArray) else arg


def written_buffers(func) -> set:
    """The buffers ``func`` writes: those it stores to, or that a block declares written."""
    written = _WrittenBuffers()
    written.visit(func.body)
    return written.buffers


class _WrittenBuffers(StmtExprVisitor):
    """Buffers stored to, or declared written by a block (tensorized blocks write parameters
    through match_buffers)."""

    def __init__(self):
        self.buffers = set()

    def visit_BufferStore(self, store) -> None:
        self.buffers.add(store.buffer)
        self.generic_visit(store)

    def visit_Block(self, block) -> None:
        self.buffers.update(region.buffer for region in block.writes)
        self.generic_visit(block)


def _names(params) -> str:
    return ", ".join(p.name for p in params)


def _shape_text(buffer: Buffer) -> str:
    dims = [str(d.value) if isinstance(d, IntImm) else d.name if isinstance(d, Var) else "?"
            for d in buffer.shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _array(name: str, param: Buffer, arg) -> np.ndarray:
    if isinstance(arg, NDArray):
        array = arg.numpy_view()
    elif isinstance(arg, np.ndarray):
        array = arg
    else:
        raise TypeError(f"{name}(): parameter {param.name} expects an NDArray or numpy array of "
                        f"shape {_shape_text(param)} and dtype {param.dtype}, got "
                        f"{type(arg).__name__}")
    if array.dtype != np_dtype(param.dtype):
        raise TypeError(f"{name}(): parameter {param.name} expects dtype {param.dtype} but got "
                        f"{array.dtype.name}")
    if array.ndim != len(param.shape):
        raise ValueError(f"{name}(): parameter {param.name} expects a {len(param.shape)}-d array "
                         f"of shape {_shape_text(param)} but got a {array.ndim}-d array of shape "
                         f"{array.shape}")
    return array


def _scalar(name: str, param: Var, arg):
    if isinstance(arg, np.ndarray) and arg.ndim == 0:
        arg = arg.item()
    elif isinstance(arg, np.generic):
        arg = arg.item()
    ok = isinstance(arg, bool) if dt.is_bool(param.dtype) else (
        isinstance(arg, int) and not isinstance(arg, bool) if dt.is_int(param.dtype)
        else isinstance(arg, (int, float)) and not isinstance(arg, bool))
    if not ok:
        raise TypeError(f"{name}(): parameter {param.name} expects a {param.dtype} scalar, got "
                        f"{type(arg).__name__} {arg!r}")
    try:
        return np_dtype(param.dtype).type(arg)
    except OverflowError:
        raise ValueError(f"{name}(): parameter {param.name}: {arg} does not fit in "
                         f"{param.dtype}") from None


class BenchmarkResult:
    """Timings from ``time_evaluator``: ``results`` holds the mean seconds per call of each
    repeat; ``mean``, ``median``, ``min``, ``max``, ``std`` summarise them."""

    def __init__(self, results):
        self.results = tuple(results)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __repr__(self) -> str:
        ms = [f"{x * 1e3:.4f}" for x in (self.mean, self.median, self.max, self.min, self.std)]
        return ("Execution time summary:\n mean (ms)   median (ms)    max (ms)     min (ms)     "
                "std (ms)\n" + "   ".join(f"{m:>10}" for m in ms))


class Module:
    """A built library: ``lib["name"](*args)``, ``lib(*args)`` for its entry function,
    ``lib.get_function(name)``, ``lib.time_evaluator(name, dev)``.

    ``imported_modules`` holds the device code modules a host module launches (a GPU build's
    kernels, whose ``get_source()`` is the kernel source); a CPU build imports none."""

    def __init__(self, functions: dict, target: str = "python", imported_modules=()):
        self._functions = dict(functions)
        self.target = target
        self.imported_modules = list(imported_modules)

    @property
    def entry_name(self) -> str:
        """The function ``lib(*args)`` calls: the only one, or "main" among several."""
        if len(self._functions) == 1:
            return next(iter(self._functions))
        if "main" in self._functions:
            return "main"
        raise TypeError(f"this module holds {len(self._functions)} functions "
                        f"({', '.join(self._functions) or 'none'}) and none is \"main\", so it has no "
                        "entry function; call one by name: lib[name](...)")

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def get_function(self, name: str):
        if name not in self._functions:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"module has no function named {name!r}; it has: {known}")
        return self._functions[name]

    def __getitem__(self, name: str):
        return self.get_function(name)

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def get_source(self, fmt: str = "ll") -> str:
        """The generated code ("ll": LLVM IR, "asm": assembly) of a compiled module."""
        sources = [f for f in self._functions.values() if hasattr(f, "get_source")]
        if not sources:
            raise ValueError(f"a module built for target {self.target!r} has no generated source")
        return sources[0].get_source(fmt)   # the functions of one build share one JIT module

    def __call__(self, *args):
        return self._functions[self.entry_name](*args)

    @property
    def mod(self) -> "Module":
        """The module itself. ``mlc_lab.compile`` returns this Module where the reference
        compiler returns an executable wrapping one, so ``lib.mod.time_evaluator(...)`` and
        ``lib.mod["name"]`` work as they do there."""
        return self

    def jit(self, force_recompile: bool = False) -> "Module":
        """The module itself: what it holds is compiled and loaded already (the reference
        compiler's executables link their code here), so there is nothing to recompile."""
        return self

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0):
        """A callable taking the function's arguments and returning a BenchmarkResult. Each of
        ``repeat`` measurements times ``number`` calls (more when they take under
        ``min_repeat_ms``); one untimed call runs first to warm up, and checks the arguments.
        A compiled function of static shapes is then timed on the arguments' data addresses,
        as it runs inside a model: the time is the kernel's, not that of checking its arguments
        again on every call (tens of microseconds, more than a small kernel takes)."""
        func = self.get_function(func_name)
        if not isinstance(dev, Device):
            raise TypeError(f"time_evaluator expects a Device such as mlc_lab.cpu(), got "
                            f"{type(dev).__name__}")
        if number < 1 or repeat < 1:
            raise ValueError("time_evaluator: number and repeat must be at least 1")

        def evaluate(*args) -> BenchmarkResult:
            func(*args)
            run = _bare_call(func, args) or (lambda: func(*args))
            results, calls = [], number
            for index in range(repeat):
                while True:
                    start = time.perf_counter()
                    for _ in range(calls):
                        run()
                    elapsed = time.perf_counter() - start
                    if elapsed * 1e3 >= min_repeat_ms:
                        break
                    per_call_ms = max(elapsed * 1e3 / calls, 1e-6)
                    calls = max(math.ceil(min_repeat_ms / per_call_ms), calls * 2)
                results.append(elapsed / calls)
                if cooldown_interval_ms and index + 1 < repeat:
                    time.sleep(cooldown_interval_ms / 1e3)
            return BenchmarkResult(results)
        return evaluate

    def __repr__(self) -> str:
        return f"<mlc_lab runtime Module target={self.target!r} functions={self.function_names}>"


def _bare_call(func, args):
    """``func`` on the addresses of ``args`` without checks, when it takes addresses and every
    argument is a contiguous array (the checked call before has accepted them); else None."""
    if not getattr(func, "takes_addresses", False) or len(args) != len(func.func.params):
        return None
    addresses = []
    for arg in args:
        if isinstance(arg, NDArray) and isinstance(arg._array, np.ndarray):
            addresses.append(arg.address)
        elif isinstance(arg, np.ndarray) and arg.flags.c_contiguous and arg.flags.writeable:
            addresses.append(arg.ctypes.data)
        else:
            return None
    return lambda: func.call_addresses(addresses)
