"""The legalization table: how each high-level op becomes loop-level code.

Each entry is ``legalize(bb, call) -> Expr``: it calls a ``topi`` operator through
``bb.call_te``, which adds the PrimFunc to the module and returns the ``R.call_tir`` running it.
The PrimFunc is named after the op (``matmul``, ``add``, ``relu``), so fused kernels read as
``fused_matmul_add_relu``. ``relax.transform.LegalizeOps`` imports this module.
"""
from __future__ import annotations

from ... import topi
from .infer import user_name
from .registry import op_info, register_legalize


def legalize_rule(op, custom=None):
    """The rule that legalizes ``op``: ``custom[op.name]`` if given, else the registered one
    (None when there is none)."""
    return (custom or {}).get(op.name) or op_info(op).legalize


def _te(name: str, te_func, *args, **kwargs):
    """``legalize(bb, call)`` that runs ``te_func`` on the call's arguments (with extra
    positional ``args``/keyword ``kwargs`` computed from the call by functions)."""
    def legalize(bb, call):
        extra = [a(call) if callable(a) else a for a in args]
        options = {k: v(call) if callable(v) else v for k, v in kwargs.items()}
        return bb.call_te(te_func, *call.args, *extra, primfunc_name_hint=name, **options)
    return legalize


def _attr(key: str):
    return lambda call: call.attrs[key]


for _name in ("add", "subtract", "multiply", "divide", "exp", "log", "sqrt", "sigmoid", "tanh",
              "negative"):
    register_legalize(f"relax.{_name}", _te(_name, getattr(topi, _name)))
register_legalize("relax.nn.relu", _te("relu", topi.relu))


def _ewise_fma(x1, x2, x3):
    return topi.add(topi.multiply(x1, x2), x3)


register_legalize("relax.ewise_fma", _te("ewise_fma", _ewise_fma))
register_legalize("relax.matmul", _te("matmul", topi.matmul,
                                      out_dtype=lambda call: call.attrs.get("out_dtype")))
register_legalize("relax.nn.dense", _te("dense", topi.dense))
register_legalize("relax.nn.softmax", _te("softmax", topi.softmax, axis=_attr("axis")))
register_legalize("relax.nn.log_softmax", _te("log_softmax", topi.log_softmax, axis=_attr("axis")))


@register_legalize("relax.nn.conv2d")
def _conv2d(bb, call):
    if call.attrs.groups != 1:
        raise NotImplementedError(f"{user_name(call)}: legalization supports groups=1 only, got "
                                  f"groups={call.attrs.groups}")
    return bb.call_te(topi.conv2d_nchw, call.args[0], call.args[1], call.attrs.strides,
                      call.attrs.padding, call.attrs.dilation, call.attrs.get("out_dtype"),
                      primfunc_name_hint="conv2d")


def _pool(pool_type: str):
    def legalize(bb, call):
        a = call.attrs
        return bb.call_te(topi.pool2d, call.args[0], a.pool_size, a.strides, a.dilation, a.padding,
                          pool_type, a.ceil_mode, a.layout, primfunc_name_hint=f"{pool_type}_pool2d")
    return legalize


register_legalize("relax.nn.max_pool2d", _pool("max"))
register_legalize("relax.nn.avg_pool2d", _pool("avg"))
register_legalize("relax.reshape", _te("reshape", topi.reshape))
register_legalize("relax.flatten", _te("flatten", topi.flatten))
register_legalize("relax.permute_dims", _te("transpose", topi.transpose, axes=_attr("axes")))
for _name in ("sum", "mean", "max", "min"):
    register_legalize(f"relax.{_name}", _te(_name, getattr(topi, _name), axis=_attr("axis"),
                                            keepdims=_attr("keepdims")))

from . import legalize_transformer  # noqa: E402,F401 - registers the transformer ops' rules
