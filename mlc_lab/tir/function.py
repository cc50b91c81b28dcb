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
        """A copy with attribute ``key`` set to ``value``, or with every item of the dict ``key``
        set (``f.with_attr({"global_symbol": "mm"})``, as TVM also takes it)."""
        if not isinstance(key, dict) and value is None:
            raise TypeError(f"with_attr({key!r}) needs a value: f.with_attr(key, value) or "
                            "f.with_attr({key: value, ...})")
        attrs = dict(self.attrs)
        attrs.update(key if isinstance(key, dict) else {key: value})
        return self.replace(attrs=tuple(sorted(attrs.items())))

    @property
    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    @property
    def scalar_params(self) -> list[Var]:
        return [p for p in self.params if isinstance(p, Var)]

    @property
    def name(self) -> str | None:
        return self.attr_dict.get("global_symbol")
