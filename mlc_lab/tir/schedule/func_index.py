"""Finding blocks and loops in a PrimFunc and replacing subtrees (the schedule's plumbing)."""
from __future__ import annotations

import dataclasses

from .. import stmt as S
from ..stmt_functor import StmtReplacer


class _PathFinder:
    """Records, for every For and BlockRealize, the chain of For/BlockRealize nodes above it.
    Only statements hold loops and blocks: expressions are not walked."""

    def __init__(self):
        self.stack: list = []
        self.paths: dict[int, list] = {}
        self.blocks: dict[str, S.BlockRealize] = {}
        self.loops: dict[int, S.For] = {}
        self.order: list = []

    def visit(self, node) -> None:
        if isinstance(node, S.For):
            self.paths[id(node)] = list(self.stack)
            self.loops[id(node.loop_var)] = node
            self.order.append(node)
            self.stack.append(node)
            self.visit(node.body)
            self.stack.pop()
        elif isinstance(node, S.BlockRealize):
            self.paths[id(node)] = list(self.stack)
            self.blocks[node.block.name_hint] = node
            self.order.append(node)
            self.stack.append(node)
            if node.block.init is not None:
                self.visit(node.block.init)
            self.visit(node.block.body)
            self.stack.pop()
        elif isinstance(node, S.Stmt):
            for name in _stmt_fields(type(node)):
                self.visit(getattr(node, name))
        elif isinstance(node, (tuple, list)):
            for item in node:
                self.visit(item)


class FuncIndex:
    """Where every block and loop of one PrimFunc sits (rebuilt after each primitive)."""

    def __init__(self, func):
        self.func = func
        finder = _PathFinder()
        finder.visit(func.body)
        self._paths, self.blocks, self.loops, self.order = (finder.paths, finder.blocks,
                                                             finder.loops, finder.order)

    def path(self, node) -> list:
        """For/BlockRealize ancestors of ``node``, outermost first."""
        return self._paths[id(node)]

    def loops_above(self, node) -> list:
        """The loops between ``node`` and its nearest enclosing block, outermost first."""
        out = []
        for anc in reversed(self.path(node)):
            if isinstance(anc, S.BlockRealize):
                break
            out.append(anc)
        return out[::-1]

    def parent_block(self, node) -> S.BlockRealize | None:
        for anc in reversed(self.path(node)):
            if isinstance(anc, S.BlockRealize):
                return anc
        return None

    def child_blocks(self, stmt) -> list:
        """The blocks directly under ``stmt`` (a For or BlockRealize): not inside another block."""
        return child_blocks(stmt)

    def producers(self, realize: S.BlockRealize) -> list:
        """The other blocks of ``realize``'s scope that write a buffer it reads, in program order."""
        return self._neighbours(realize, realize.block.reads, "writes")

    def consumers(self, realize: S.BlockRealize) -> list:
        """The other blocks of ``realize``'s scope that read a buffer it writes, in program order."""
        return self._neighbours(realize, realize.block.writes, "reads")

    def _neighbours(self, realize, regions, their_side: str) -> list:
        scope = self.parent_block(realize)
        buffers = {id(r.buffer) for r in regions}
        return [other for other in (child_blocks(scope) if scope is not None else [])
                if other is not realize
                and any(id(r.buffer) in buffers for r in getattr(other.block, their_side))]


def _collect_child_blocks(node, found: list) -> None:
    # only statements hold blocks: expressions are not walked
    if isinstance(node, S.BlockRealize):
        found.append(node)
    elif isinstance(node, S.Stmt):
        for name in _stmt_fields(type(node)):
            _collect_child_blocks(getattr(node, name), found)
    elif isinstance(node, (tuple, list)):
        for item in node:
            _collect_child_blocks(item, found)


def child_blocks(stmt) -> list:
    """BlockRealizes under ``stmt`` that are not nested inside another block under it."""
    found: list = []
    _collect_child_blocks(stmt.block.body if isinstance(stmt, S.BlockRealize) else stmt, found)
    return found


def replace_stmts(func, replacements: dict):
    """``func`` with each statement ``old`` (keyed by id) replaced by ``replacements[id(old)]``."""
    if not replacements:
        return func
    walk = _StmtWalk(replacements)
    new_body = walk.visit(func.body)
    if walk.used != len(replacements):
        # a key that is no statement of the tree (or lies under another replaced one): the
        # general mutator, which looks at every node, decides what it means
        new_body = StmtReplacer(replacements).visit(func.body)
    return func.replace(body=new_body)


_STMTS = (S.Stmt, S.Block)
_MISSING = object()
_STMT_FIELDS: dict = {}


def _stmt_fields(cls) -> tuple:
    """The fields of a statement class that may hold statements: for the statements of the loop
    IR, read off their declared types; for any other class, every field."""
    names = _STMT_FIELDS.get(cls)
    if names is None:
        known = cls.__module__ == S.__name__
        names = _STMT_FIELDS[cls] = tuple(
            f.name for f in dataclasses.fields(cls)
            if not known or f.name == "seq" or any(word in str(f.type) for word in ("Stmt", "Block")))
    return names


class _StmtWalk:
    """StmtReplacer's rewrite, descending into statements only (the common, fast case): nodes
    are rebuilt only on the way to a replaced statement; ``used`` counts the replacements made."""

    def __init__(self, replacements: dict):
        self.replacements = replacements
        self.used = 0

    def visit(self, node):
        new = self.replacements.get(id(node), _MISSING)
        if new is not _MISSING:
            self.used += 1
            return new
        if isinstance(node, _STMTS):
            changes = {}
            for name in _stmt_fields(type(node)):
                value = getattr(node, name)
                if value is not None:
                    new = self.visit(value)
                    if new is not value:
                        changes[name] = new
            return node.replace(**changes) if changes else node
        if isinstance(node, (tuple, list)):
            new = [self.visit(item) for item in node]
            if all(a is b for a, b in zip(new, node)):
                return node
            return type(node)(new)
        return node
