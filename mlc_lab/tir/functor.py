"""The one traversal tool for the loop IR: a visitor and a mutator with ``visit_<NodeName>`` methods.

Both dispatch on the node's class name, walking the class's bases, so ``visit_Var`` also
receives a ``SizeVar`` unless a ``visit_SizeVar`` exists. A node without a method of its own is
handled by ``generic_visit``, which recurses into every field that holds nodes (directly or in
tuples/lists). Override a ``visit_X`` method and call ``self.generic_visit(node)`` inside it to
keep recursing::

    class CountLoads(StmtExprVisitor):
        def __init__(self):
            self.count = 0

        def visit_BufferLoad(self, load):
            self.count += 1
            self.generic_visit(load)

    class RenameVar(StmtExprMutator):
        def __init__(self, mapping):
            super().__init__()
            self.mapping = mapping

        def visit_Var(self, var):
            return self.mapping.get(var, var)
"""
from __future__ import annotations

import inspect
import types
from typing import Any

from ..ir.node import Node, field_names, field_values


def _visit_method(instance: Any, node_cls: type):
    """The bound ``visit_<Name>`` method for ``node_cls`` (or one of its bases), or None."""
    cache = type(instance).__dict__.get("_visit_cache")
    if cache is None:
        cache = {}
        setattr(type(instance), "_visit_cache", cache)
    if node_cls not in cache:
        name = next((f"visit_{base.__name__}" for base in node_cls.__mro__
                     if base is not Node and hasattr(instance, f"visit_{base.__name__}")), None)
        # a plain function of the class (the usual case) is called without building a bound
        # method each time; anything else (a static method, a callable attribute) by its name
        function = inspect.getattr_static(type(instance), name, None) if name else None
        cache[node_cls] = function if isinstance(function, types.FunctionType) else name
    entry = cache[node_cls]
    if entry is None:
        return None
    return getattr(instance, entry) if isinstance(entry, str) else entry.__get__(instance)


def _dispatch(instance: Any, node: Node):
    """``instance.visit_<Name>(node)``, or ``instance.generic_visit(node)`` when there is none."""
    try:   # the common case, a class met before
        entry = type(instance).__dict__["_visit_cache"][type(node)]
    except KeyError:
        method = _visit_method(instance, type(node))
        return method(node) if method is not None else instance.generic_visit(node)
    if entry is None:
        return instance.generic_visit(node)
    if isinstance(entry, str):
        return getattr(instance, entry)(node)
    return entry(instance, node)


class StmtExprVisitor:
    """Walks statements and expressions (and functions, buffers, regions) without changing them."""

    def visit(self, node: Any) -> None:
        if isinstance(node, Node):
            return _dispatch(self, node)
        if isinstance(node, (tuple, list)):
            for item in node:
                self.visit(item)
        return None

    def generic_visit(self, node: Node) -> None:
        """Visit every field of ``node`` that holds IR."""
        for value in field_values(node):
            if isinstance(value, (Node, tuple, list)):
                self.visit(value)


class StmtExprMutator:
    """Rebuilds IR bottom-up. A node is rebuilt only when one of its children changed, so an
    unchanged subtree comes back as the very same object (identity is preserved).

    A Buffer whose shape or strides change is rebuilt once and the same new Buffer is used at
    every place the old one appeared, so loads, stores and allocations stay consistent.
    """

    def __init__(self):
        self._buffer_map: dict[int, Any] = {}

    def visit(self, node: Any) -> Any:
        if isinstance(node, Node):
            return _dispatch(self, node)
        if isinstance(node, (tuple, list)):
            new = [self.visit(item) for item in node]
            if all(a is b for a, b in zip(new, node)):
                return node
            return type(node)(new)
        return node

    def generic_visit(self, node: Node) -> Node:
        """``node`` with every IR-holding field mutated; ``node`` itself when nothing changed."""
        changes = None
        for name, value in zip(field_names(type(node)), field_values(node)):
            if isinstance(value, (Node, tuple, list)):
                new = self.visit(value)
                if new is not value:
                    if changes is None:
                        changes = {}
                    changes[name] = new
        return node.replace(**changes) if changes else node

    def visit_Buffer(self, buffer: Node) -> Node:
        # setdefault: subclasses that skip ``super().__init__()`` still get a memo.
        memo = self.__dict__.setdefault("_buffer_map", {})
        if id(buffer) not in memo:
            memo[id(buffer)] = (buffer, self.generic_visit(buffer))
        return memo[id(buffer)][1]
