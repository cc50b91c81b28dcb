"""Base class of every IR node: small immutable dataclasses whose children sit in tuples.

Nodes compare and hash by identity (like object references); ``structural_equal`` and
``structural_hash`` in :mod:`mlc_lab.ir.structural` compare them by content.

Printing is done by the script printer, which sits above the IR and provides itself as the hook
``"script.printer"`` (:mod:`mlc_lab.ir.hooks`) when it is imported (``import mlc_lab`` does so), so
the base IR depends on no printer.
"""
from __future__ import annotations

import dataclasses
import operator

from . import hooks


def set_printer(new_printer) -> None:
    """Install ``new_printer``: an object (e.g. a module) with ``script(node, **kwargs) -> str``
    and ``show(node, **kwargs)``, used by ``node.script()``, ``node.show()``, ``str(node)``."""
    hooks.provide("script.printer", new_printer)


def printer():
    """The installed printer; raises RuntimeError when none is."""
    return hooks.need("script.printer")


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


# class -> the names of its dataclass fields, in declaration order (see Node.fields)
_FIELD_NAMES: dict = {}
# class -> a function giving the tuple of its field values (see field_values)
_FIELD_GETTERS: dict = {}


def field_names(cls: type) -> tuple:
    """The names of the dataclass fields of node class ``cls``, in declaration order."""
    names = _FIELD_NAMES.get(cls)
    if names is None:   # the field list of a class never changes: read it once
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def field_values(node) -> tuple:
    """The values of ``node``'s fields, in ``field_names`` order (what ``fields`` pairs with
    the names, fetched in one call: traversals over every node of a program use it)."""
    getter = _FIELD_GETTERS.get(type(node))
    if getter is None:
        names = field_names(type(node))
        if len(names) == 1:
            name = names[0]
            getter = lambda n: (getattr(n, name),)   # noqa: E731
        elif names:
            getter = operator.attrgetter(*names)
        else:
            getter = lambda n: ()   # noqa: E731
        _FIELD_GETTERS[type(node)] = getter
    return getter(node)


class Node(Printable):
    __slots__ = ()
    # Variables and buffers set this to True: they are binders, compared by identity up to a
    # consistent renaming (``structural_equal`` maps the ones two programs define onto each other).
    _binds_by_identity = False
    # Graph-level (relax) functions set this to True: ``ir.transform.FunctionPass`` rewrites them
    # and leaves every other function of a module (PrimFuncs) as it is.
    _graph_level = False

    def fields(self):
        """(name, value) for every dataclass field, in declaration order."""
        return list(zip(field_names(type(self)), field_values(self)))

    def replace(self, **changes):
        """A copy of this node with some fields changed (nodes are immutable)."""
        return dataclasses.replace(self, **changes)

    def same_as(self, other) -> bool:
        """Whether ``other`` is this very node (identity, as ``==`` is for nodes; the reference
        compiler's name for it). ``structural_equal`` compares by content."""
        return self is other

    def __repr__(self) -> str:
        text = self.script()
        return text if "\n" not in text else f"<{type(self).__name__}>\n{text}"


def node(cls):
    """Decorator: an immutable, slotted dataclass compared by identity."""
    return dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
