# BindParams: replace parameters of one relax function by constants (e.g. trained weights), removing
# them from its signature. Expects {parameter name or relax.Var: numpy array or NDArray}.
"""``relax.transform.BindParams("main", {"w0": w0_np, "b0": b0_np})``: weights become constants.

Before::

    def main(x: R.Tensor((1, 784)), w0: R.Tensor((128, 784))):
        lv = R.matmul(x, R.permute_dims(w0))

After::

    def main(x: R.Tensor((1, 784))):
        lv = R.matmul(x, R.permute_dims(metadata["relax.expr.Constant"][0]))

Arrays must match the parameter's dtype and (static) shape; a name that is not a parameter, or
that several parameters share, is an error. Followed by FoldConstant, computations on weights
only (like the transpose above) happen at compile time.
"""
from __future__ import annotations

import numpy as np

from ...ir.transform import Pass, PassInfo
from ..expr import Constant, Function, Var
from ..functor import ExprMutator
from ..struct_info import TensorStructInfo, dim_value


def _array(value) -> np.ndarray:
    if hasattr(value, "numpy"):
        return value.numpy()
    if isinstance(value, Constant):
        return value.data
    return np.asarray(value)


def _check(func_name: str, param: Var, data: np.ndarray) -> None:
    sinfo = param.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise TypeError(f"BindParams({func_name!r}): parameter {param.name_hint} is not a tensor "
                        f"({sinfo.script() if sinfo else 'unknown'}); only tensors can be bound")
    if data.dtype.name != sinfo.dtype:
        raise TypeError(f"BindParams({func_name!r}): parameter {param.name_hint} is {sinfo.dtype} "
                        f"but the array is {data.dtype.name}")
    if sinfo.ndim >= 0 and data.ndim != sinfo.ndim:
        raise ValueError(f"BindParams({func_name!r}): parameter {param.name_hint} has {sinfo.ndim} "
                         f"dimension(s) but the array has shape {data.shape}")
    for axis, dim in enumerate(sinfo.shape or ()):
        if dim_value(dim) is not None and dim_value(dim) != data.shape[axis]:
            raise ValueError(f"BindParams({func_name!r}): parameter {param.name_hint} has shape "
                             f"{sinfo.script()} but the array has shape {data.shape}")


class BindParams(Pass):
    def __init__(self, func_name: str, params: dict):
        self.func_name = func_name
        self.params = dict(params)
        self.info = PassInfo(0, "BindParams")

    def transform_module(self, mod, ctx):
        func = mod[self.func_name]
        if not isinstance(func, Function):
            raise TypeError(f"BindParams: {self.func_name} is not a relax function")
        bound: dict = {}
        for key, value in self.params.items():
            matches = [p for p in func.params if p is key or p.name_hint == key]
            if not matches:
                names = ", ".join(p.name_hint for p in func.params)
                raise KeyError(f"BindParams({self.func_name!r}): {getattr(key, 'name_hint', key)!r} is "
                               f"not a parameter; the parameters are: {names}")
            if len(matches) > 1:
                raise KeyError(f"BindParams({self.func_name!r}): several parameters are named {key!r}; "
                               "pass the relax.Var itself as the key")
            data = _array(value)
            _check(self.func_name, matches[0], data)
            bound[matches[0]] = Constant(data)
        mutator = ExprMutator(mod)
        mutator.var_remap_.update(bound)
        body = mutator.visit_expr(func.body)
        params = [p for p in func.params if p not in bound]
        new = Function(params, body, func.ret_struct_info, func.attrs, func.is_pure)
        return mod.with_function(self.func_name, new)
