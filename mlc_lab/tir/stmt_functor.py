"""Everyday questions and rewrites on the loop IR, built on the visitor/mutator of :mod:`.functor`.

Variables and buffers are compared by identity (two ``Var("i")`` are two variables), as
everywhere in the IR. Each helper takes an expression, a statement, or a tuple/list of them.

>>> from mlc_lab import tir
>>> i, j, n = tir.Var("i"), tir.Var("j"), tir.Var("n")
>>> A = tir.decl_buffer((n,), name="A")
>>> e = A[i] + A[j * 2]
>>> free_vars(e)
[i, j]
>>> uses_var(e, j), uses_var(e, n)
(True, False)
>>> [load.indices[0] for load in loads_in(e)]
[i, j * 2]
>>> substitute(e, {i: tir.const(0)})
A[0] + A[j * 2]
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir.node import Node
from . import expr as E
from . import stmt as S
from .functor import StmtExprMutator, StmtExprVisitor


class _FreeScan(StmtExprVisitor):
    """Variables and buffers used but not bound inside the visited IR, in first-use order.

    Loops bind their variable, let statements theirs, blocks their iterators, ``Allocate`` and
    blocks' ``alloc_buffers``/``match_buffers`` their buffers. With ``buffer_shapes`` a buffer's
    shape and strides count as uses the first time the buffer is met.
    """

    def __init__(self, buffer_shapes: bool):
        self.buffer_shapes = buffer_shapes
        self.vars: list = []
        self.buffers: list = []
        self.bound: set[int] = set()
        self.seen_vars: set[int] = set()
        self.seen_buffers: set[int] = set()

    def visit_Var(self, var):
        if id(var) not in self.bound and id(var) not in self.seen_vars:
            self.seen_vars.add(id(var))
            self.vars.append(var)

    def visit_Buffer(self, buffer):
        if id(buffer) in self.seen_buffers:
            return
        self.seen_buffers.add(id(buffer))
        if self.buffer_shapes:
            self.visit(buffer.shape + buffer.strides)
        self.buffers.append(buffer)

    def bind_buffer(self, buffer):
        if id(buffer) not in self.seen_buffers:
            self.seen_buffers.add(id(buffer))
            if self.buffer_shapes:
                self.visit(buffer.shape + buffer.strides)

    def visit_For(self, loop):
        self.visit((loop.min, loop.extent))
        self.bound.add(id(loop.loop_var))
        self.visit((loop.body, loop.annotations))

    def visit_LetStmt(self, let):
        self.visit(let.value)
        self.bound.add(id(let.var))
        self.visit(let.body)

    def visit_Allocate(self, alloc):
        self.bind_buffer(alloc.buffer)
        self.visit(alloc.body)

    def visit_IterVar(self, iv):
        self.visit(iv.dom)
        self.bound.add(id(iv.var))

    def visit_Block(self, block):
        self.visit(block.iter_vars)
        for buffer in block.alloc_buffers:
            self.bind_buffer(buffer)
        for match in block.match_buffers:
            self.visit(match.source)
            self.bind_buffer(match.buffer)
        self.visit((block.reads, block.writes, block.init, block.body, block.annotations))


def free_vars(node: Any, buffer_shapes: bool = False) -> list:
    """The variables ``node`` uses but does not bind, each once, in order of first use.

    Loop variables, let variables and block iterators bound inside ``node`` are not free. A
    buffer's shape and strides are looked at only with ``buffer_shapes=True`` (the sizes a
    compiled statement needs to index or allocate its buffers).

    >>> from mlc_lab import tir
    >>> i, n = tir.Var("i"), tir.Var("n")
    >>> A = tir.decl_buffer((n,), name="A")
    >>> loop = tir.For(i, tir.const(0), n, "serial", tir.BufferStore(A, A[i] + 1.0, (i,)))
    >>> free_vars(loop), free_vars(loop.body), free_vars(loop.body, buffer_shapes=True)
    ([n], [i], [n, i])
    """
    scan = _FreeScan(buffer_shapes)
    scan.visit(node)
    return scan.vars


def free_buffers(node: Any) -> list:
    """The buffers ``node`` accesses but does not allocate, each once, in order of first use.

    >>> from mlc_lab import tir
    >>> A, B = tir.decl_buffer((4,), name="A"), tir.decl_buffer((4,), name="B")
    >>> i = tir.Var("i")
    >>> [b.name for b in free_buffers(tir.BufferStore(B, A[i], (i,)))]
    ['B', 'A']
    >>> free_buffers(tir.Allocate(A, tir.BufferStore(A, tir.const(0.0), (i,))))
    []
    """
    scan = _FreeScan(buffer_shapes=False)
    scan.visit(node)
    return scan.buffers


def uses_var(node: Any, var_or_vars) -> bool:
    """Whether ``node`` uses ``var_or_vars`` (a Var, or any Var of a collection of them) freely.

    >>> from mlc_lab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> uses_var(i * 4 + 1, i), uses_var(i * 4 + 1, [j]), uses_var((j, i), {i: None})
    (True, False, True)
    """
    kind = type(node)
    if kind is E.IntImm:
        return False
    if kind is E.Var:
        return node is var_or_vars if isinstance(var_or_vars, E.Var) else any(node is v for v in var_or_vars)
    if isinstance(node, E.PrimExpr):
        used = _expr_var_ids(node)
        if used is not None:
            if isinstance(var_or_vars, E.Var):
                return id(var_or_vars) in used
            return any(id(v) in used for v in var_or_vars)
    wanted = {id(var_or_vars)} if isinstance(var_or_vars, E.Var) else {id(v) for v in var_or_vars}
    return any(id(v) in wanted for v in free_vars(node))


# id(expression) -> (expression, the ids of the variables it uses, or None): expressions are
# immutable and asked about again and again (a binding, for each loop above its block), so the
# answer is kept, holding the expression so that its id stays its own; emptied when full.
_VAR_IDS: dict = {}
_VAR_IDS_LIMIT = 1 << 16


def _expr_var_ids(expr) -> frozenset | None:
    hit = _VAR_IDS.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    found = _collect_var_ids(expr)
    if len(_VAR_IDS) >= _VAR_IDS_LIMIT:
        _VAR_IDS.clear()
    _VAR_IDS[id(expr)] = (expr, found)
    return found


def _collect_var_ids(expr) -> frozenset | None:
    """The ids of the variables an expression of the loop IR's own kinds uses (they bind none);
    None when it holds a node of another kind, left to the general scan."""
    found, todo = set(), [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, E.Var):
            found.add(id(node))
            continue
        if type(node).__module__ != E.__name__:
            return None
        for _, value in node.fields():
            if isinstance(value, E.PrimExpr):
                todo.append(value)
            elif isinstance(value, (tuple, list)):
                for item in value:
                    if isinstance(item, E.PrimExpr):
                        todo.append(item)
                    elif isinstance(item, (Node, tuple, list)):
                        return None
            elif isinstance(value, Node) and not isinstance(value, S.Buffer):
                return None   # (a load's buffer: its shape is not a use)
    return frozenset(found)


class _Collect(StmtExprVisitor):
    def __init__(self, cls: type):
        self.cls, self.found = cls, []

    def visit(self, node):
        if isinstance(node, self.cls):
            self.found.append(node)
        return super().visit(node)


def loads_in(node: Any) -> list:
    """Every BufferLoad in ``node`` (loads inside indices included), outer before inner, left to right.

    >>> from mlc_lab import tir
    >>> A, B = tir.decl_buffer((4,), name="A", dtype="int32"), tir.decl_buffer((4,), name="B")
    >>> i = tir.Var("i")
    >>> loads_in(B[A[i]] + B[i])
    [B[A[i]], A[i], B[i]]
    """
    collect = _Collect(E.BufferLoad)
    collect.visit(node)
    return collect.found


def stores_in(node: Any) -> list:
    """Every BufferStore in ``node``, in program order.

    >>> from mlc_lab import tir
    >>> A, i = tir.decl_buffer((4,), name="A"), tir.Var("i")
    >>> stores = stores_in(tir.For(i, tir.const(0), tir.const(4), "serial",
    ...                            tir.BufferStore(A, tir.const(1.0), (i,))))
    >>> [s.buffer.name for s in stores]
    ['A']
    """
    collect = _Collect(S.BufferStore)
    collect.visit(node)
    return collect.found


def post_order_visit(node: Any, fvisit: Callable[[Node], None]) -> None:
    """Call ``fvisit`` on every IR node in ``node`` (buffers too), children before parents.

    >>> from mlc_lab import tir
    >>> i = tir.Var("i")
    >>> seen = []
    >>> post_order_visit(i + 1, lambda n: seen.append(type(n).__name__))
    >>> seen
    ['Var', 'IntImm', 'Add']
    """
    class PostOrder(StmtExprVisitor):
        def visit(self, item):
            super().visit(item)
            if isinstance(item, Node):
                fvisit(item)
    PostOrder().visit(node)


def pre_order_visit(node: Any, fvisit: Callable[[Node], Any]) -> None:
    """Call ``fvisit`` on every IR node in ``node`` (buffers too), parents before children; when
    ``fvisit`` returns False (False itself, not just a falsy value) the node's children are skipped.

    >>> from mlc_lab import tir
    >>> i = tir.Var("i")
    >>> seen = []
    >>> pre_order_visit((i + 1) * 2, lambda n: seen.append(type(n).__name__))
    >>> seen
    ['Mul', 'Add', 'Var', 'IntImm', 'IntImm']
    >>> seen.clear()
    >>> pre_order_visit((i + 1) * 2, lambda n: seen.append(type(n).__name__) or not isinstance(n, tir.Add))
    >>> seen
    ['Mul', 'Add', 'IntImm']
    """
    class PreOrder(StmtExprVisitor):
        def visit(self, item):
            if isinstance(item, Node) and fvisit(item) is False:
                return None
            return super().visit(item)
    PreOrder().visit(node)


class Substitute(StmtExprMutator):
    """Replaces variables (by identity) with expressions; subclass it to do more on the way."""

    def __init__(self, mapping: dict):
        super().__init__()
        self.mapping = {id(k): v for k, v in mapping.items()}

    def visit_Var(self, var):
        return self.mapping.get(id(var), var)

    def generic_visit(self, node):
        new = super().generic_visit(node)
        # An operation the substitution left between two integer constants (a unit loop replaced
        # by 0 in ``v == 0``) is folded, as the script parser folds it: the IR prints and parses
        # back the same.
        fold = _INT_FOLDS.get(type(new)) if new is not node else None
        if fold is not None and isinstance(new.a, E.IntImm) and isinstance(new.b, E.IntImm) \
                and not (type(new) in (E.FloorDiv, E.FloorMod) and new.b.value == 0):
            return E.IntImm(new.dtype, int(fold(new.a.value, new.b.value)))
        return new


_INT_FOLDS = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
              E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b, E.Min: min,
              E.Max: max, E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b,
              E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b,
              E.GE: lambda a, b: a >= b, E.And: lambda a, b: a and b, E.Or: lambda a, b: a or b}


def substitute(node: Any, mapping: dict) -> Any:
    """``node`` with every variable that is a key of ``mapping`` replaced by its value.

    Keys are matched by identity; untouched subtrees come back as the same objects.

    >>> from mlc_lab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> substitute(i * 4 + j, {i: j + 1})
    (j + 1) * 4 + j
    """
    return Substitute(mapping).visit(node) if mapping else node


def conjuncts(cond) -> list:
    """The and-ed parts of a condition, constant truths left out.

    >>> from mlc_lab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> conjuncts(tir.And(i < 4, tir.And(j < 2, tir.const(True))))
    [i < 4, j < 2]
    """
    if isinstance(cond, E.And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    if isinstance(cond, E.IntImm) and cond.value == 1:
        return []
    return [cond]


def and_all(conditions) -> Any:
    """The conjunction of ``conditions`` (constant true for none)."""
    out = E.const(True)
    for c in conditions:
        out = c if isinstance(out, E.IntImm) else E.And(out, c)
    return out


class StmtReplacer(StmtExprMutator):
    """Replaces statements by identity (``{id(old): new}``); expressions are left alone."""

    def __init__(self, replacements: dict):
        super().__init__()
        self.replacements = replacements

    def visit(self, node):
        if id(node) in self.replacements:
            return self.replacements[id(node)]
        return super().visit(node)

    def generic_visit(self, node):
        if not isinstance(node, (S.Stmt, S.Block)):
            return node
        return super().generic_visit(node)


__all__ = ["StmtReplacer", "Substitute", "and_all", "conjuncts", "free_buffers", "free_vars", "loads_in",
           "post_order_visit", "pre_order_visit", "stores_in", "substitute", "uses_var"]


class Freshen(StmtExprMutator):
    """A copy of a statement whose defined variables (loops, lets, block iterators) and buffers
    (allocations) are new objects, so that it can stand in several places of one function;
    ``buffers`` maps other buffers to their replacements (a tensor intrinsic's parameters to the
    views it is instantiated on), and a block whose name is in ``taken_names`` is renamed."""

    def __init__(self, buffers: dict, taken_names: set):
        super().__init__()
        self.taken_names = taken_names
        self.buffer_map = dict(buffers)
        self.var_map: dict[int, E.Var] = {}

    def visit_Buffer(self, buffer):
        return self.buffer_map.get(id(buffer), buffer)

    def visit_Var(self, var):
        return self.var_map.get(id(var), var)

    def define(self, var: E.Var) -> None:
        self.var_map[id(var)] = var.replace()

    def visit_For(self, loop):
        self.define(loop.loop_var)
        return self.generic_visit(loop)

    def visit_LetStmt(self, let):
        self.define(let.var)
        return self.generic_visit(let)

    def visit_Block(self, block):
        for iv in block.iter_vars:
            self.define(iv.var)
        for buf in block.alloc_buffers:
            self.buffer_map[id(buf)] = buf.replace()
        name, k = block.name_hint, 1
        while name in self.taken_names:
            name, k = f"{block.name_hint}_{k}", k + 1
        self.taken_names.add(name)
        return self.generic_visit(block).replace(name_hint=name)

    def visit_Allocate(self, alloc):
        self.buffer_map[id(alloc.buffer)] = alloc.buffer.replace()
        return self.generic_visit(alloc)
