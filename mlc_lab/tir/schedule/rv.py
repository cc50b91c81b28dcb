"""Handles to blocks and loops. IR nodes are immutable and get rebuilt by every primitive, so a
handle names what it points to in a stable way: a block by its (unique) name, a loop by its loop
variable, which primitives keep whenever they keep the loop."""
from __future__ import annotations

from dataclasses import dataclass

from ..expr import Var


@dataclass(frozen=True, eq=False)
class BlockRV:
    name: str
    func_name: str

    def __repr__(self) -> str:
        return f'BlockRV("{self.name}")'


@dataclass(frozen=True, eq=False)
class LoopRV:
    var: Var
    func_name: str

    def __repr__(self) -> str:
        return f"LoopRV({self.var.name})"


class SampledInt(int):
    """An int a sampling instruction returned. Each is its own object, so the trace names it
    (``v3``) where later instructions use it, and a replay with another decision passes the new
    value on to them."""
