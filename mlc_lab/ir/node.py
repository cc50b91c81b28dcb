"""Base class of every IR node: small immutable dataclasses whose children sit in tuples.

Nodes compare and hash by identity (like object references); ``structural_equal`` and
``structural_hash`` in :mod:`mlc_lab.ir.structural` compare them by content.

Printing is done by the script printer, which sits above the IR and installs itself here with
``set_printer`` when it is imported (``import mlc_lab`` does so), so the base IR depends on no
printer.
"""
from __future__ import annotations

import dataclasses

_printer = None


def set_printer(new_printer) -> None:
    """Install ``new_printer``: an object (e.g. a module) with ``script(node, **kwargs) -> str``
    and ``show(node, **kwargs)``, used by ``node.script()``, ``node.show()``, ``str(node)``."""
    global _printer
    _printer = new_printer


def printer():
    """The installed printer; raises RuntimeError when none is."""
    if _printer is None:
        raise RuntimeError("no IR printer is installed; import mlc_lab (or mlc_lab.script.printer)")
    return _printer


class Printable:
    """What every printable IR object shares: ``script()``, ``show()`` and ``str()`` come from
    the printer."""
    __slots__ = ()

    def script(self, **kwargs) -> str:
        return printer().script(self, **kwargs)

    def show(self, **kwargs) -> None:
        printer().show(self, **kwargs)

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
