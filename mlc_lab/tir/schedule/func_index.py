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
        self.shared = False   # whether some loop or block appears twice in the tree

    def visit(self, node) -> None:
        if isinstance(node, S.For):
            self.shared = self.shared or id(node) in self.paths
            self.paths[id(node)] = list(self.stack)
            self.loops[id(node.loop_var)] = node
            self.order.append(node)
            self.stack.append(node)
            self.visit(node.body)
            self.stack.pop()
        elif isinstance(node, S.BlockRealize):
            self.shared = self.shared or id(node) in self.paths
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
        self.shared = finder.shared

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
    hit = _CHILD_BLOCKS.get(id(stmt))
    if hit is not None and hit[0] is stmt:
        return list(hit[1])
    found: list = []
    _collect_child_blocks(stmt.block.body if isinstance(stmt, S.BlockRealize) else stmt, found)
    if len(_CHILD_BLOCKS) >= _CHILD_BLOCKS_LIMIT:
        _CHILD_BLOCKS.clear()
    _CHILD_BLOCKS[id(stmt)] = (stmt, tuple(found))
    return found


# id(stmt) -> (stmt, its child blocks): statements are immutable and the same loop nest is asked
# about by every check of a primitive (and by every schedule sharing it), so the answer is kept,
# holding the statement so that its id stays its own; emptied when full.
_CHILD_BLOCKS: dict = {}
_CHILD_BLOCKS_LIMIT = 1 << 11


def replace_stmts(func, replacements: dict, index: FuncIndex | None = None):
    """``func`` with each statement ``old`` (keyed by id) replaced by ``replacements[id(old)]``.
    With ``func``'s ``index``, only the loops and blocks above the replaced statements are
    looked into (when each of them is a loop or block the index knows)."""
    if not replacements:
        return func
    walk = _StmtWalk(replacements, _ancestors(index, func, replacements))
    new_body = walk.visit(func.body)
    if walk.used != len(replacements):
        # a key that is no statement of the tree (or lies under another replaced one): the
        # general mutator, which looks at every node, decides what it means
        new_body = StmtReplacer(replacements).visit(func.body)
    return func.replace(body=new_body)


_STMTS = (S.Stmt, S.Block)
_PLACED = (S.For, S.BlockRealize)
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


def _rebuilt(node, changes: dict):
    """``node.replace(**changes)``, calling the class with every field in order where its
    fields are all plain constructor parameters (what dataclasses.replace ends up doing)."""
    cls = type(node)
    names = _PLAIN_FIELDS.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        names = _PLAIN_FIELDS[cls] = tuple(f.name for f in fields) if all(
            f.init and not f.kw_only for f in fields) else ()
    if not names:
        return node.replace(**changes)
    return cls(*[changes[name] if name in changes else getattr(node, name) for name in names])


_PLAIN_FIELDS: dict = {}   # class -> its field names, () when replace must go the general way


def _ancestors(index, func, replacements: dict) -> set | None:
    """The ids of the loops and blocks above the statements to replace, from ``func``'s index;
    None (look everywhere) without one, or when a statement is not a loop or block it placed."""
    if index is None or getattr(index, "func", None) is not func or getattr(index, "shared", True):
        return None
    out = set()
    for key in replacements:
        path = index._paths.get(key)
        if path is None:
            return None
        out.update(id(node) for node in path)
    return out


class _StmtWalk:
    """StmtReplacer's rewrite, descending into statements only (the common, fast case): nodes
    are rebuilt only on the way to a replaced statement; ``used`` counts the replacements made.
    With ``ancestors`` (ids), a loop or block not among them is left as it is unvisited: no
    replaced statement lies inside it."""

    def __init__(self, replacements: dict, ancestors: set | None = None):
        self.replacements = replacements
        self.ancestors = ancestors
        self.used = 0

    def visit(self, node):
        new = self.replacements.get(id(node), _MISSING)
        if new is not _MISSING:
            self.used += 1
            return new
        if self.ancestors is not None and isinstance(node, _PLACED) and id(node) not in self.ancestors:
            return node
        if isinstance(node, _STMTS):
            changes = {}
            for name in _stmt_fields(type(node)):
                value = getattr(node, name)
                if value is not None:
                    new = self.visit(value)
                    if new is not value:
                        changes[name] = new
            return _rebuilt(node, changes) if changes else node
        if isinstance(node, (tuple, list)):
            new = [self.visit(item) for item in node]
            if all(a is b for a, b in zip(new, node)):
                return node
            return type(node)(new)
        return node
