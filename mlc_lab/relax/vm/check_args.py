"""Checking run-time values against structure info for the VirtualMachine: arguments against a
function's parameters (count, kind, dtype, rank, shape) and the symbolic sizes they define.

A symbolic dimension ``n`` is defined by the first argument whose shape holds it; every later
use must agree. Errors name the function and the parameter.
"""
from __future__ import annotations

import numpy as np

from ...runtime.interpreter.expr import Evaluator, np_dtype
from ...runtime.ndarray import NDArray
from ...tir.expr import IntImm, Var as TirVar
from ..struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo,
                          TupleStructInfo, shape_text)


def evaluate_dim(dim, env: dict, what: str):
    """The value of a loop-IR expression (a shape dimension) under ``env`` (tir Var -> value)."""
    if isinstance(dim, IntImm):
        return dim.value
    try:
        return np.asarray(Evaluator(env, {}).eval(dim)).item()
    except RuntimeError:
        raise ValueError(f"cannot compute {what}: it uses a symbolic size that no argument's shape "
                         f"defines ({dim.script() if hasattr(dim, 'script') else dim})") from None


def dim_reader(dim, what: str):
    """A function of ``env`` giving the value of ``dim`` as an int, as ``evaluate_dim`` does, with
    a constant or a plain variable read without the evaluator (the hot path of every call)."""
    if isinstance(dim, IntImm):
        value = dim.value
        return lambda env: value
    if isinstance(dim, TirVar):
        def read(env):
            value = env.get(dim)
            return int(value) if value is not None else evaluate_dim(dim, env, what)
        return read
    return lambda env: int(evaluate_dim(dim, env, what))


def as_ndarray(value, what: str):
    """NDArrays pass; numpy arrays (and DLPack tensors such as torch's) are wrapped without copying."""
    if isinstance(value, NDArray):
        return value
    if isinstance(value, np.ndarray):
        return NDArray(value)
    if hasattr(value, "__dlpack__"):
        return NDArray(np.from_dlpack(value))
    raise TypeError(f"{what} expects a tensor (an NDArray or a numpy array), got "
                    f"{type(value).__name__}")


class Matcher:
    """Matches values against structure info for the function ``func_name``.

    The common cases get a quick check, compiled once per parameter (and per variable whose
    value a call returns): an NDArray on the device type ``device_type`` (or a numpy array)
    with the dtype and rank of its type, each static dimension equal and each symbolic one
    defining or agreeing with its size; shapes and tuples of those; objects. Only values that
    fail it, and types of other kinds, go through the full match, which names what is wrong."""

    def __init__(self, func_name: str, params=(), device_type: str = "cpu"):
        self.func_name, self.params, self.device_type = func_name, tuple(params), device_type
        quick = [_quick_check(p.struct_info, device_type, True) for p in self.params]
        self.quick = quick if all(q is not None for q in quick) else None
        self.result_checks = {}   # var -> its quick check (None: none applies)

    def arguments(self, args) -> tuple[list, dict]:
        """The arguments as the VM holds them (numpy arrays become NDArrays) and the symbolic
        sizes they define; raises TypeError/ValueError naming the parameter at fault."""
        if self.quick is not None and len(args) == len(self.quick):
            env = {}
            try:
                return [check(arg, env, []) for check, arg in zip(self.quick, args)], env
            except _Mismatch:
                pass   # the full match below says what is wrong
        params = self.params
        if len(args) != len(params):
            names = ", ".join(p.name_hint for p in params)
            raise TypeError(f"{self.func_name}() takes {len(params)} argument(s) ({names}) but "
                            f"{len(args)} were given")
        env, origin, deferred = {}, {}, []
        values = [self._match(p.struct_info, arg, f"parameter {p.name_hint}", env, origin, deferred)
                  for p, arg in zip(params, args)]
        self._check_deferred(env, deferred)
        return values, env

    def result(self, var, value, env: dict) -> None:
        """Check a value computed by a call against the structure info of its variable, and
        define the symbolic sizes it introduces."""
        try:
            check = self.result_checks[var]
        except KeyError:
            check = self.result_checks[var] = _quick_check(var.struct_info, self.device_type, False)
        if check is not None:
            added = []
            try:
                check(value, env, added)
                return
            except _Mismatch:
                for v in added:   # the full match below starts from the sizes known before
                    del env[v]
        origin = {v: "an earlier value" for v in env}
        deferred = []
        self._match(var.struct_info, value, f"the value of {var.name_hint}", env, origin, deferred,
                    convert=False)
        self._check_deferred(env, deferred)

    def _match(self, sinfo, value, what, env, origin, deferred, convert=True):
        where = f"{self.func_name}(): {what}"
        if isinstance(sinfo, TensorStructInfo):
            array = as_ndarray(value, where) if convert else value
            if not isinstance(array, NDArray):
                raise TypeError(f"{where} should be a tensor, got {type(array).__name__}")
            expected = _tensor_text(sinfo)
            if convert and array.device.device_type != self.device_type:
                raise ValueError(f"{where}: the array is on {array.device} but the "
                                 f"VirtualMachine runs on {self.device_type}; copy it with "
                                 f"arr.copyto(mlc_lab.{self.device_type}())")
            if array.numpy_view().dtype != np_dtype(sinfo.dtype):
                raise TypeError(f"{where} expects {expected} but got dtype {array.dtype}")
            if sinfo.ndim != -1 and array.ndim != sinfo.ndim:
                raise ValueError(f"{where} expects {expected} but got a {array.ndim}-d array of "
                                 f"shape {array.shape}")
            if sinfo.shape is not None:
                self._dims(sinfo.shape, array.shape, where, expected, env, origin, deferred)
            return array
        if isinstance(sinfo, TupleStructInfo):
            if not isinstance(value, (tuple, list)) or len(value) != len(sinfo.elements):
                raise TypeError(f"{where} expects a tuple of {len(sinfo.elements)} item(s), got "
                                f"{_describe(value)}")
            return tuple(self._match(s, v, f"{what}[{i}]", env, origin, deferred, convert)
                         for i, (s, v) in enumerate(zip(sinfo.elements, value)))
        if isinstance(sinfo, ShapeStructInfo):
            if not isinstance(value, (tuple, list)) or not all(_is_int(v) for v in value):
                raise TypeError(f"{where} expects a shape (a tuple of ints), got {_describe(value)}")
            value = tuple(int(v) for v in value)
            if sinfo.values is not None:
                self._dims(sinfo.values, value, where, shape_text(sinfo.values), env, origin,
                           deferred)
            elif sinfo.ndim not in (-1, len(value)):
                raise ValueError(f"{where} expects a shape of {sinfo.ndim} value(s), got {value}")
            return value
        if isinstance(sinfo, PrimStructInfo):
            if isinstance(value, np.ndarray) and value.ndim == 0 or isinstance(value, np.generic):
                value = value.item()
            if not isinstance(value, (bool, int, float)):
                raise TypeError(f"{where} expects a {sinfo.dtype} scalar, got {_describe(value)}")
            return value
        return as_ndarray(value, where) if convert and isinstance(value, np.ndarray) else value

    def _dims(self, dims, given, where, expected, env, origin, deferred) -> None:
        for axis, (dim, size) in enumerate(zip(dims, given)):
            if isinstance(dim, IntImm):
                if dim.value != size:
                    raise ValueError(f"{where} expects {expected} but got shape {tuple(given)}: "
                                     f"dimension {axis} should be {dim.value}")
            elif isinstance(dim, TirVar):
                if dim not in env:
                    env[dim], origin[dim] = np_dtype(dim.dtype).type(size), where
                elif int(env[dim]) != size:
                    raise ValueError(f"{where} expects {expected} but got shape {tuple(given)}: "
                                     f"dimension {axis} is {dim.name}, which is {int(env[dim])} "
                                     f"from {origin[dim].split(': ', 1)[-1]}")
            else:
                deferred.append((dim, size, axis, where, expected, tuple(given)))

    @staticmethod
    def _check_deferred(env, deferred) -> None:
        for dim, size, axis, where, expected, given in deferred:
            try:
                value = int(Evaluator(env, {}).eval(dim))
            except RuntimeError:  # uses a size nothing defines: nothing to check against
                continue
            if value != size:
                raise ValueError(f"{where} expects {expected} but got shape {given}: dimension "
                                 f"{axis} should be {value}")


class _Mismatch(Exception):
    """A value the quick check does not pass: the full match decides, and names the fault."""


def _quick_check(sinfo, device_type: str, convert: bool):
    """A function ``(value, env, added) -> value as the VM holds it`` passing the common values
    of type ``sinfo`` (defining the sizes they give in ``env``, listed in ``added``) and raising
    _Mismatch for any other; None when ``sinfo`` has no quick form. ``convert``: a numpy array
    becomes an NDArray, and the device is checked (arguments; results are the VM's own)."""
    if type(sinfo) is TensorStructInfo:
        dims = _quick_dims(sinfo.shape)
        if dims is None:
            return None
        np_type, ndim = np_dtype(sinfo.dtype), len(dims)
        static = tuple(size for size, _, _ in dims) if all(v is None for _, v, _ in dims) else None

        def check_tensor(value, env, added):
            if convert and type(value) is np.ndarray:
                value = NDArray(value)
            elif type(value) is not NDArray or convert and value.device.device_type != device_type:
                raise _Mismatch
            array = value.numpy_view()
            if array.dtype != np_type:
                raise _Mismatch
            if static is not None:
                if array.shape != static:
                    raise _Mismatch
            elif len(array.shape) != ndim:
                raise _Mismatch
            else:
                _check_dims(dims, array.shape, env, added)
            return value
        return check_tensor
    if type(sinfo) is ShapeStructInfo:
        dims = _quick_dims(sinfo.values) if sinfo.values is not None else None
        if dims is None:
            return None

        def check_shape(value, env, added):
            if type(value) not in (tuple, list) or len(value) != len(dims) \
                    or any(type(v) is not int for v in value):
                raise _Mismatch
            _check_dims(dims, value, env, added)
            return tuple(value)
        return check_shape
    if type(sinfo) is TupleStructInfo:
        items = [_quick_check(s, device_type, convert) for s in sinfo.elements]
        if any(item is None for item in items):
            return None
        count = len(items)

        def check_tuple(value, env, added):
            if type(value) not in (tuple, list) or len(value) != count:
                raise _Mismatch
            return tuple(item(v, env, added) for item, v in zip(items, value))
        return check_tuple
    if type(sinfo) is ObjectStructInfo:
        def check_object(value, env, added):
            if convert and isinstance(value, np.ndarray):
                raise _Mismatch   # the full match wraps it
            return value
        return check_object
    return None


def _quick_dims(shape):
    """[(static size or None, symbolic Var or None, its numpy type)] when every dimension of
    ``shape`` is a constant or a variable; else None."""
    if shape is None:   # only the rank (or nothing) is known: the full match checks it
        return None
    dims = []
    for dim in shape:
        if isinstance(dim, IntImm):
            dims.append((dim.value, None, None))
        elif isinstance(dim, TirVar):
            dims.append((None, dim, np_dtype(dim.dtype).type))
        else:
            return None
    return dims


def _check_dims(dims, given, env, added) -> None:
    for (size, var, np_type), value in zip(dims, given):
        if var is None:
            if size != value:
                raise _Mismatch
            continue
        known = env.get(var)
        if known is None:
            env[var] = np_type(value)
            added.append(var)
        elif int(known) != value:
            raise _Mismatch


def _tensor_text(sinfo: TensorStructInfo) -> str:
    shape = shape_text(sinfo.shape) if sinfo.shape is not None else (
        f"{sinfo.ndim}-d" if sinfo.ndim != -1 else "any shape")
    return f"a {sinfo.dtype} tensor of shape {shape}" if sinfo.shape is not None else \
        f"a {sinfo.dtype} tensor ({shape})"


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _describe(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    return type(value).__name__


__all__ = ["Matcher", "as_ndarray", "dim_reader", "evaluate_dim"]
