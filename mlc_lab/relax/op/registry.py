"""The operator registry: one ``Op`` per name, with its structure-info inference, its pattern kind
(for fusion) and, once registered, its legalization to loop-level code.

- ``infer(call: Call) -> StructInfo`` computes the result's structure or raises a clear error.
- ``legalize(bb: BlockBuilder, call: Call) -> Expr`` rewrites the call into loop-level code,
  typically ``bb.call_te(topi_function, *call.args, ...)``; None until a legalization is known.
- ``pattern`` is one of ``PATTERN_KINDS`` (TVM's OpPatternKind, in increasing generality).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..expr import Call, Op

PATTERN_KINDS = ("elemwise", "broadcast", "injective", "comm_reduce", "out_elemwise_fusable",
                 "opaque")


@dataclass
class OpInfo:
    op: Op
    infer: Callable
    legalize: Optional[Callable] = None
    pattern: str = "opaque"


_REGISTRY: dict[str, OpInfo] = {}


def register_op(name: str, infer: Callable, legalize: Optional[Callable] = None,
                pattern: str = "opaque") -> Op:
    """Register (or re-register) the op ``name``; returns its unique Op object."""
    if pattern not in PATTERN_KINDS:
        raise ValueError(f"register_op({name!r}): unknown pattern {pattern!r}; expected one of "
                         f"{', '.join(PATTERN_KINDS)}")
    op = _REGISTRY[name].op if name in _REGISTRY else Op(name)
    _REGISTRY[name] = OpInfo(op, infer, legalize, pattern)
    return op


def get_op(name: str) -> Op:
    """The Op registered as ``name`` (e.g. ``"relax.add"``)."""
    if name not in _REGISTRY:
        near = [n for n in _REGISTRY if n.split(".")[-1] == name.split(".")[-1]]
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise KeyError(f"no relax op named {name!r}{hint}")
    return _REGISTRY[name].op


def op_info(op) -> OpInfo:
    """The registry entry of an Op (or op name); its ``legalize`` and ``pattern`` may be set."""
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
