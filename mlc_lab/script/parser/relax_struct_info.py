"""Struct info checks of the R parser: may a value of one struct info be annotated with another?"""
from __future__ import annotations

from ...relax.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                 StructInfo, TensorStructInfo, TupleStructInfo, dims_equal)
from ...tir.expr import Var as TirVar


def is_base_of(base: StructInfo, derived: StructInfo | None) -> bool:
    """True when every value described by ``derived`` is also described by ``base``: an
    annotation may say less than inference knows (``R.Tensor(dtype="float32", ndim=2)`` for a
    (1, 128) tensor), never something different."""
    if isinstance(base, ObjectStructInfo):
        return True
    if derived is None or type(base) is not type(derived):
        return False
    if isinstance(base, TensorStructInfo):
        return (base.dtype == derived.dtype and base.ndim in (-1, derived.ndim)
                and (base.shape is None or _dims_match(base.shape, derived.shape)))
    if isinstance(base, ShapeStructInfo):
        return base.ndim in (-1, derived.ndim) and (base.values is None or _dims_match(base.values, derived.values))
    if isinstance(base, PrimStructInfo):
        return base.dtype == derived.dtype
    if isinstance(base, TupleStructInfo):
        return (len(base.elements) == len(derived.elements)
                and all(is_base_of(a, b) for a, b in zip(base.elements, derived.elements)))
    if isinstance(base, FuncStructInfo):
        from ...ir.structural import structural_equal
        return base.params is None or structural_equal(base, derived)
    return False


def _dims_match(a, b) -> bool:
    return b is not None and len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b))


def sinfo_text(sinfo: StructInfo | None) -> str:
    return "a value of unknown structure" if sinfo is None else sinfo.script()


def call_result(params, args, ret: StructInfo) -> StructInfo:
    """The result of calling a function with ``params`` on ``args``: the callee's own symbolic
    sizes in ``ret`` are replaced by the caller's (``(n, 128)`` of the caller, not the callee's n)."""
    mapping: dict = {}
    for param, arg in zip(params, args):
        _match(param.struct_info, getattr(arg, "struct_info", None), mapping)
    return _substitute(ret, mapping) if mapping else ret


def _match(param: StructInfo | None, arg: StructInfo | None, mapping: dict) -> None:
    if isinstance(param, TensorStructInfo) and isinstance(arg, TensorStructInfo):
        _match_dims(param.shape, arg.shape, mapping)
    elif isinstance(param, ShapeStructInfo) and isinstance(arg, ShapeStructInfo):
        _match_dims(param.values, arg.values, mapping)
    elif isinstance(param, TupleStructInfo) and isinstance(arg, TupleStructInfo):
        for p, a in zip(param.elements, arg.elements):
            _match(p, a, mapping)


def _match_dims(params, args, mapping: dict) -> None:
    if params is None or args is None or len(params) != len(args):
        return
    for p, a in zip(params, args):
        if isinstance(p, TirVar) and p not in mapping:
            mapping[p] = a


def _substitute(sinfo: StructInfo, mapping: dict) -> StructInfo:
    from ...tir.stmt_functor import substitute
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return sinfo.replace(shape=tuple(substitute(d, mapping) for d in sinfo.shape))
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return sinfo.replace(values=tuple(substitute(d, mapping) for d in sinfo.values))
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([_substitute(f, mapping) for f in sinfo.elements])
    return sinfo
