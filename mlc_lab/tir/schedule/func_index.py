"""Finding blocks and loops in a PrimFunc and replacing subtrees (the schedule's plumbing)."""
from __future__ import annotations

from .. import stmt as S
from ..functor import StmtExprVisitor
from ..stmt_functor import StmtReplacer


class _PathFinder(StmtExprVisitor):
    """Records, for every For and BlockRealize, the chain of For/BlockRealize nodes above it."""

    def __init__(self):
        self.stack: list = []
        self.paths: dict[int, list] = {}
        self.blocks: dict[str, S.BlockRealize] = {}
        self.loops: dict[int, S.For] = {}
        self.order: list = []

    def visit_For(self, node: S.For):
        self.paths[id(node)] = list(self.stack)
        self.loops[id(node.loop_var)] = node
        self.order.append(node)
        self.stack.append(node)
        self.visit(node.body)
        self.stack.pop()

    def visit_BlockRealize(self, node: S.BlockRealize):
        self.paths[id(node)] = list(self.stack)
        self.blocks[node.block.name_hint] = node
        self.order.append(node)
        self.stack.append(node)
        if node.block.init is not None:
            self.visit(node.block.init)
        self.visit(node.block.body)
        self.stack.pop()

    def generic_visit(self, node):
        # Only statements hold loops and blocks; skip expressions for speed.
        if isinstance(node, S.Stmt):
            super().generic_visit(node)


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


class _ChildBlocks(StmtExprVisitor):
    def __init__(self):
        self.found: list = []

    def visit_BlockRealize(self, node):
        self.found.append(node)

    def generic_visit(self, node):
        if isinstance(node, S.Stmt):
            super().generic_visit(node)


def child_blocks(stmt) -> list:
    """BlockRealizes under ``stmt`` that are not nested inside another block under it."""
    collector = _ChildBlocks()
    if isinstance(stmt, S.BlockRealize):
        collector.visit(stmt.block.body)
    else:
        collector.visit(stmt)
    return collector.found


def replace_stmts(func, replacements: dict):
    """``func`` with each statement ``old`` (keyed by id) replaced by ``replacements[id(old)]``."""
    new_body = StmtReplacer(replacements).visit(func.body)
    return func.replace(body=new_body)
