"""Base class of every IR node: small immutable dataclasses whose children sit in tuples.

Nodes compare and hash by identity (like object references); ``structural_equal`` and
``structural_hash`` in :mod:`mlc_lab.ir.structural` compare them by content.
"""
from __future__ import annotations

import dataclasses


class Printable:
    """What every printable IR object shares: ``script()``, ``show()`` and ``str()`` come from
    the printer."""
    __slots__ = ()

    def script(self, **kwargs) -> str:
        from ..script.printer import script
        return script(self, **kwargs)

    def show(self, **kwargs) -> None:
        from ..script.printer import show
        show(self, **kwargs)

    def __str__(self) -> str:
        return self.script()


class Node(Printable):
    __slots__ = ()

    def fields(self):
        """(name, value) for every dataclass field, in declaration order."""
        return [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self)]

    def replace(self, **changes):
        """A copy of this node with some fields changed (nodes are immutable)."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        text = self.script()
        return text if "\n" not in text else f"<{type(self).__name__}>\n{text}"


def node(cls):
    """Decorator: an immutable, slotted dataclass compared by identity."""
    return dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
