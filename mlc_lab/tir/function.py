"""PrimFunc: a tensor program with buffer (or scalar) parameters and a loop-nest body."""
from __future__ import annotations

from ..ir.node import Node, node
from .buffer import Buffer
from .expr import Var
from .stmt import Stmt


@node
class PrimFunc(Node):
    """``params`` holds Buffers (tensor arguments) and Vars (scalar arguments) in call order.
    Shape variables of parameter buffers are bound from the arguments at call time."""
    params: tuple
    body: Stmt
    attrs: tuple = ()

    @property
    def attr_dict(self) -> dict:
        return dict(self.attrs)

    def with_attr(self, key, value=None) -> "PrimFunc":
        """A copy with attribute ``key`` set to ``value``, or with every pair of a dict set:
        ``f.with_attr("global_symbol", "mm")`` or ``f.with_attr({"global_symbol": "mm"})``."""
        if isinstance(key, dict):
            if value is not None:
                raise TypeError("PrimFunc.with_attr: pass a dict of attributes or a key and a "
                                "value, not both")
            changes = key
        elif isinstance(key, str):
            if value is None:
                raise TypeError(f"PrimFunc.with_attr({key!r}) needs a value: f.with_attr(key, value) "
                                "or f.with_attr({key: value, ...})")
            changes = {key: value}
        else:
            raise TypeError(f"PrimFunc.with_attr: the key must be a str (or a dict of attributes), "
                            f"got {type(key).__name__}: {key!r}")
        attrs = dict(self.attrs)
        attrs.update(changes)
        return self.replace(attrs=tuple(sorted(attrs.items())))

    @property
    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    @property
    def scalar_params(self) -> list[Var]:
        return [p for p in self.params if isinstance(p, Var)]

    @property
    def buffer_map(self) -> dict:
        """Parameter -> the buffer it holds, as the reference compiler maps handle parameters to
        buffers. Here a tensor parameter is its buffer, so each maps to itself:
        ``f.buffer_map[f.params[0]]`` is ``f.params[0]``."""
        return {p: p for p in self.params if isinstance(p, Buffer)}

    @property
    def name(self) -> str | None:
        return self.attr_dict.get("global_symbol")


def __getattr__(name: str):
    # ``tir.function.TensorIntrin``: the tensor intrinsic registry lives with the schedule, a
    # layer above; it is bound on first use, as ``mlc_lab.tir`` binds it.
    if name == "TensorIntrin":
        import importlib
        return importlib.import_module("mlc_lab.tir.schedule").TensorIntrin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
