"""Handles to blocks and loops. IR nodes are immutable and get rebuilt by every primitive, so a
handle names what it points to in a stable way: a block by its (unique) name, a loop by its loop
variable, which primitives keep whenever they keep the loop."""
from __future__ import annotations

from dataclasses import dataclass

from ..expr import Var


@dataclass(frozen=True, eq=False)
class BlockRV:
    """A block handle. ``BlockRV()`` (no arguments, as the reference compiler writes it when it
    builds a trace by hand) names no block yet: it stands for an instruction's output and is
    bound when the trace is replayed on a schedule."""
    name: str | None = None
    func_name: str | None = None

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return "BlockRV()" if self.name is None else f'BlockRV("{self.name}")'


@dataclass(frozen=True, eq=False)
class LoopRV:
    """A loop handle; ``LoopRV()`` is an unbound one, as ``BlockRV()``."""
    var: Var | None = None
    func_name: str | None = None

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return "LoopRV()" if self.var is None else f"LoopRV({self.var.name})"


class SampledInt(int):
    """An int a sampling instruction returned. Each is its own object, so the trace names it
    (``v3``) where later instructions use it, and a replay with another decision passes the new
    value on to them."""
