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
from ..struct_info import (PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
                          shape_text)


def evaluate_dim(dim, env: dict, what: str):
    """The value of a loop-IR expression (a shape dimension) under ``env`` (tir Var -> value)."""
    if isinstance(dim, IntImm):
        return dim.value
    try:
        return np.asarray(Evaluator(env, {}).eval(dim)).item()
    except RuntimeError:
        raise ValueError(f"cannot compute {what}: it uses a symbolic size that no argument's shape "
                         f"defines ({dim.script() if hasattr(dim, 'script') else dim})") from None


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

    A tensor parameter of static shape and dtype gets a quick check (an NDArray on the device
    type ``device_type`` with exactly that shape and dtype); only arguments that fail it, and
    parameters with symbolic sizes or of other kinds, go through the full match, which names
    what is wrong."""

    def __init__(self, func_name: str, params=(), device_type: str = "cpu"):
        self.func_name, self.params, self.device_type = func_name, tuple(params), device_type
        quick = [_quick_check(p.struct_info) for p in self.params]
        self.quick = quick if all(q is not None for q in quick) else None

    def arguments(self, args) -> tuple[list, dict]:
        """The arguments as the VM holds them (numpy arrays become NDArrays) and the symbolic
        sizes they define; raises TypeError/ValueError naming the parameter at fault."""
        device_type = self.device_type
        if self.quick is not None and len(args) == len(self.quick):
            values = []
            for (shape, np_type), arg in zip(self.quick, args):
                if type(arg) is np.ndarray:
                    arg = NDArray(arg)
                elif type(arg) is not NDArray or arg.device.device_type != device_type:
                    break
                view = arg.numpy_view()
                if view.shape != shape or view.dtype != np_type:
                    break
                values.append(arg)
            else:
                return values, {}
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


def _quick_check(sinfo):
    """(shape, numpy dtype) of a tensor of static shape, else None."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.static_shape is None:
        return None
    return tuple(sinfo.static_shape), np_dtype(sinfo.dtype)


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


__all__ = ["Matcher", "as_ndarray", "evaluate_dim"]
