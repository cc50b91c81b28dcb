"""Tree surgery for the primitives that move a block: remove one statement (and the loops and
sequences it leaves empty) and insert one into a loop body, in a single pass."""
from __future__ import annotations

from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator


class _Surgery(StmtExprMutator):
    """Removes one statement (and the loops and sequences it leaves empty) and inserts one
    statement into a loop body, in a single pass."""

    def __init__(self, remove=None, insert=None):
        super().__init__()
        self.remove = remove
        self.insert = insert   # (loop, position, stmt)

    def visit(self, node):
        if node is not None and node is self.remove:
            return None
        return super().visit(node)

    def visit_SeqStmt(self, node):
        items = [self.visit(s) for s in node.seq]
        if all(a is b for a, b in zip(items, node.seq)):
            return node
        kept = [s for s in items if s is not None]
        return S.seq(*kept) if kept else None

    def visit_For(self, node):
        new = self._single_body(node)
        if new is None or self.insert is None or node is not self.insert[0]:
            return new
        _, position, stmt = self.insert
        body = list(new.body.seq) if isinstance(new.body, S.SeqStmt) else [new.body]
        return new.replace(body=S.seq(*body[:position], stmt, *body[position:]))

    def _single_body(self, node):
        body = self.visit(node.body)
        if body is None:
            return None
        return node if body is node.body else node.replace(body=body)

    visit_LetStmt = visit_Allocate = _single_body

    def generic_visit(self, node):
        # Only statements hold the statements to remove or extend; expressions stay as they are.
        return super().generic_visit(node) if isinstance(node, (S.Stmt, S.Block)) else node

    def visit_IfThenElse(self, node):
        then_case = self.visit(node.then_case)
        else_case = self.visit(node.else_case) if node.else_case is not None else None
        if then_case is None and else_case is None:
            return None
        if then_case is None:
            return S.IfThenElse(E.Not(node.condition), else_case)
        if then_case is node.then_case and else_case is node.else_case:
            return node
        return node.replace(then_case=then_case, else_case=else_case)


def remove_and_insert(stmt, remove=None, insert=None):
    """``stmt`` without the statement ``remove`` (plus the loops it leaves empty) and with
    ``insert = (loop, position, new_stmt)`` placed at ``position`` in ``loop``'s body."""
    return _Surgery(remove, insert).visit(stmt)


def loop_children(loop: S.For) -> list:
    """The statements of a loop body, as a list."""
    return list(loop.body.seq) if isinstance(loop.body, S.SeqStmt) else [loop.body]
