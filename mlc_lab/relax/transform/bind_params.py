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
that several parameters share, is an error. A symbolic size of a bound parameter
(``w0: R.Tensor(("n", "m"))``) takes the array's size, everywhere in the function. Followed by
FoldConstant, computations on weights only (like the transpose above) happen at compile time.
"""
from __future__ import annotations

import numpy as np

from ...ir.transform import Pass, PassInfo
from ...tir.expr import IntImm
from ...tir.expr import Var as SizeVar
from ...tir.stmt_functor import substitute
from ..expr import Constant, Function, PrimValue, ShapeExpr, Var
from ..functor import ExprMutator
from ..struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo, dim_value


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


def _sizes(func_name: str, bound: dict) -> dict:
    """{symbolic size: IntImm} read off the bound arrays; a size two arrays disagree on is an error."""
    sizes: dict = {}
    for param, const in bound.items():
        for dim, extent in zip(param.struct_info.shape or (), const.data.shape):
            if not isinstance(dim, SizeVar):
                continue
            if dim in sizes and sizes[dim].value != extent:
                raise ValueError(f"BindParams({func_name!r}): size {dim.name} is {sizes[dim].value} in "
                                 f"one bound array but {extent} in parameter {param.name_hint}'s")
            sizes[dim] = IntImm("int64", extent)
    return sizes


def _sinfo(sinfo, sizes: dict):
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return TensorStructInfo(tuple(substitute(d, sizes) for d in sinfo.shape), sinfo.dtype)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return ShapeStructInfo(tuple(substitute(d, sizes) for d in sinfo.values))
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([_sinfo(e, sizes) for e in sinfo.elements])
    return sinfo


class _BindSizes(ExprMutator):
    """Replaces the bound parameters by constants and their symbolic sizes by numbers, in the
    structure of every variable, shape value and call result."""

    def __init__(self, mod, bound: dict, sizes: dict):
        super().__init__(mod)
        self.var_remap_.update(bound)
        self.sizes = sizes

    def _var_def(self, var):
        if not self.sizes or var.struct_info is None:
            return var
        new = self.with_struct_info(var, _sinfo(var.struct_info, self.sizes))
        if new is not var:
            self.var_remap_[var] = new
        return new

    visit_var_def_ = visit_dataflow_var_def_ = _var_def

    def visit_shape_expr_(self, op):
        return ShapeExpr(tuple(substitute(d, self.sizes) for d in op.values)) if self.sizes else op

    def visit_prim_value_(self, op):
        return PrimValue(substitute(op.value, self.sizes)) if self.sizes else op

    def visit_call_(self, call):
        new = super().visit_call_(call)
        if self.sizes and new.sinfo_args:
            new = new.replace(sinfo_args=tuple(_sinfo(s, self.sizes) for s in new.sinfo_args),
                              struct_info=None)
        return new


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
        sizes = _sizes(self.func_name, bound)
        mutator = _BindSizes(mod, bound, sizes)
        params = [mutator.visit_var_def(p) for p in func.params if p not in bound]
        body = mutator.visit_expr(func.body)
        new = Function(params, body, _sinfo(func.ret_struct_info, sizes), func.attrs, func.is_pure)
        return mod.with_function(self.func_name, new)
