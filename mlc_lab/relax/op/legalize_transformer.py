"""Legalizations of the transformer ops (normalizations, activations, masks, indexing,
split/concat) to loop-level code through ``topi``; imported by ``legalize.py``."""
from __future__ import annotations

from ... import topi
from ..expr import Constant, PrimValue, Tuple, TupleGetItem, Var
from ..struct_info import TupleStructInfo
from .legalize import _attr, _te   # this module is imported at the end of legalize.py
from .registry import register_legalize


for _name in ("erf", "rsqrt", "sin", "cos", "square"):
    register_legalize(f"relax.{_name}", _te(_name, getattr(topi, _name)))
for _name in ("power", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
              "greater_equal"):
    register_legalize(f"relax.{_name}", _te(_name, getattr(topi, _name)))
for _name in ("gelu", "gelu_tanh", "silu"):
    register_legalize(f"relax.nn.{_name}", _te(_name, getattr(topi, _name)))
register_legalize("relax.where", _te("where", topi.where))
register_legalize("relax.astype", _te("cast", topi.cast, _attr("dtype")))


@register_legalize("relax.nn.layer_norm")
def _layer_norm(bb, call):
    data, gamma, beta = call.args
    a = call.attrs

    def layer_norm(x, g, b):
        return topi.layer_norm(x, g if a.scale else None, b if a.center else None, list(a.axes),
                               a.epsilon)

    return bb.call_te(layer_norm, data, gamma, beta, primfunc_name_hint="layer_norm")


register_legalize("relax.nn.rms_norm", _te("rms_norm", topi.rms_norm,
                                           lambda call: list(call.attrs.axes), _attr("epsilon")))


def _scalar_fill(expr):
    """A Python number for a constant fill value (so it is inlined), else the tensor itself."""
    if isinstance(expr, Constant) and expr.data.ndim == 0:
        return expr.data.item()
    return expr


@register_legalize("relax.full")
def _full(bb, call):
    return bb.call_te(topi.full, list(call.args[0].struct_info.values), call.struct_info.dtype,
                      _scalar_fill(call.args[1]), primfunc_name_hint="full")


def _like(dtype: str, value):
    """A te function filling a tensor shaped like its input, which it takes (unread) so that the
    kernel learns symbolic sizes from it rather than from extra scalar arguments."""
    def full_like(x, fill=None):
        return topi.full(x.shape, dtype, value if fill is None else fill)
    return full_like


@register_legalize("relax.full_like")
def _full_like(bb, call):
    fill = _scalar_fill(call.args[1])
    if isinstance(fill, (int, float, bool)):
        return bb.call_te(_like(call.struct_info.dtype, fill), call.args[0],
                          primfunc_name_hint="full")
    return bb.call_te(_like(call.struct_info.dtype, None), call.args[0], fill,
                      primfunc_name_hint="full")


def _constant(name: str, value: float, like: bool):
    def legalize(bb, call):
        if like:
            return bb.call_te(_like(call.struct_info.dtype, value), call.args[0],
                              primfunc_name_hint=name)
        return bb.call_te(topi.full, list(call.args[0].struct_info.values),
                          call.struct_info.dtype, value, primfunc_name_hint=name)
    return legalize


for _name, _value in (("zeros", 0.0), ("ones", 1.0)):
    register_legalize(f"relax.{_name}", _constant(_name, _value, like=False))
    register_legalize(f"relax.{_name}_like", _constant(_name, _value, like=True))


def _trilu(upper: bool):
    def legalize(bb, call):
        k = call.args[1].value if isinstance(call.args[1], PrimValue) else call.args[1]
        return bb.call_te(topi.trilu, call.args[0], k, upper,
                          primfunc_name_hint="triu" if upper else "tril")
    return legalize


register_legalize("relax.triu", _trilu(True))
register_legalize("relax.tril", _trilu(False))


@register_legalize("relax.arange")
def _arange(bb, call):
    start, end, step = (a.value for a in call.args)
    return bb.call_te(topi.arange, start, end, step, call.attrs.dtype, primfunc_name_hint="arange")


register_legalize("relax.take", _te("take", topi.take, axis=_attr("axis"), mode=_attr("mode")))


@register_legalize("relax.strided_slice")
def _strided_slice(bb, call):
    a = call.attrs
    return bb.call_te(topi.strided_slice, call.args[0], list(a.begin), list(a.end),
                      list(a.strides) if a.strides is not None else None, list(a.axes),
                      a.assume_inbound, primfunc_name_hint="strided_slice")


@register_legalize("relax.split")
def _split(bb, call):
    if not isinstance(call.struct_info, TupleStructInfo):   # a single piece: the input itself
        return call.args[0]
    return bb.call_te(topi.split, call.args[0], call.attrs.indices_or_sections, call.attrs.axis,
                      primfunc_name_hint="split")


@register_legalize("relax.concat")
def _concat(bb, call):
    tensors = call.args[0]
    while isinstance(tensors, Var) and isinstance(bb.lookup_binding(tensors), (Tuple, Var)):
        tensors = bb.lookup_binding(tensors)
    if isinstance(tensors, Tuple):
        fields = list(tensors.elements)
    else:
        count = len(tensors.struct_info.elements)
        fields = [bb.emit(TupleGetItem(tensors, i)) for i in range(count)]
    return bb.call_te(topi.concatenate, fields, call.attrs.axis, primfunc_name_hint="concatenate")


register_legalize("relax.expand_dims", _te("expand_dims", topi.expand_dims, _attr("axis")))
register_legalize("relax.squeeze", _te("squeeze", topi.squeeze, _attr("axis")))


@register_legalize("relax.broadcast_to")
def _broadcast_to(bb, call):
    return bb.call_te(topi.broadcast_to, call.args[0], list(call.struct_info.shape),
                      primfunc_name_hint="broadcast_to")

