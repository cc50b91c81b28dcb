"""The operator registry: one ``Op`` per name, with its structure-info inference and, once
registered, its legalization to loop-level code.

- ``infer(call: Call) -> StructInfo`` computes the result's structure or raises a clear error.
- ``legalize(bb: BlockBuilder, call: Call) -> Expr`` rewrites the call into loop-level code,
  typically ``bb.call_te(topi_function, *call.args, ...)``; None until a legalization is known.

Ops carry no fusion pattern: FuseOps groups the PrimFuncs that legalization produces, and the one
source of their pattern kind is ``relax.transform.AnnotateTIROpPattern``, which reads it off the
loop-level code itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..expr import Call, Op


@dataclass
class OpInfo:
    op: Op
    infer: Callable
    legalize: Optional[Callable] = None


_REGISTRY: dict[str, OpInfo] = {}


def register_op(name: str, infer: Callable, legalize: Optional[Callable] = None) -> Op:
    """Register (or re-register) the op ``name``; returns its unique Op object."""
    op = _REGISTRY[name].op if name in _REGISTRY else Op(name)
    _REGISTRY[name] = OpInfo(op, infer, legalize)
    return op


def get_op(name: str) -> Op:
    """The Op registered as ``name`` (e.g. ``"relax.add"``)."""
    if name not in _REGISTRY:
        near = [n for n in _REGISTRY if n.split(".")[-1] == name.split(".")[-1]]
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise KeyError(f"no relax op named {name!r}{hint}")
    return _REGISTRY[name].op


def op_info(op) -> OpInfo:
    """The registry entry of an Op (or op name); its ``legalize`` may be set."""
    name = op if isinstance(op, str) else op.name
    get_op(name)
    return _REGISTRY[name]


def list_ops() -> list[str]:
    return sorted(_REGISTRY)


def register_legalize(name: str, legalize: Optional[Callable] = None):
    """Set the legalization of op ``name``; usable as a decorator:
    ``@register_legalize("relax.add") def _add(bb, call): return bb.call_te(topi.add, *call.args)``."""
    def setter(func: Callable) -> Callable:
        op_info(name).legalize = func
        return func
    return setter(legalize) if legalize is not None else setter


def infer_struct_info(call: Call):
    """The result structure of a call to a registered op (raises the op's error if ill-typed)."""
    return op_info(call.op).infer(call)


def make_call(name: str, args, attrs=None, sinfo_args=()) -> Call:
    """Build a call to op ``name`` and infer its structure info now, so errors surface at once."""
    call = Call(get_op(name), tuple(args), attrs or (), sinfo_args)
    return call.replace(struct_info=infer_struct_info(call))
