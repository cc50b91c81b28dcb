# Splits the last, partial iterations off a loop whose vector lanes are guarded against running
# past a symbolic size, so that the full iterations vectorize. Runs before vectorize_loop.
"""``partition_tail``: whole vectors for a symbolic length, a guarded tail after them.

Splitting a loop of symbolic extent ``n`` by 8 guards every lane (``split`` cannot know that 8
divides ``n``), and the vectorizer keeps a guarded loop scalar: its masked-off lanes would read
past the buffer. Only the last iteration of the outer loop needs the guard, so this pass makes two
loops of it, the full iterations without the guard and the rest with it:

Before::

    for j_0 in range((n + 7) // 8):
        for j_1 in T.vectorized(8):
            if j_0 * 8 + j_1 < n:
                B[j_0 * 8 + j_1] = A[j_0 * 8 + j_1] * 2.0

After (the first loop vectorizes; the second, serial, runs at most once and stays scalar)::

    for j_0 in range(T.min((n + 7) // 8, n // 8)):
        for j_1 in T.vectorized(8):
            B[j_0 * 8 + j_1] = A[j_0 * 8 + j_1] * 2.0
    for j_0 in range(T.min((n + 7) // 8, n // 8), (n + 7) // 8):
        for j_1 in T.vectorized(8):
            if j_0 * 8 + j_1 < n:
                B[j_0 * 8 + j_1] = A[j_0 * 8 + j_1] * 2.0

A guard qualifies when it is the whole body of a vectorized loop of constant extent ``L`` inside
the outer loop (serial or parallel, starting at 0), has no else branch, and reads ``a * o + b * v
+ r < 0`` once its sides are moved together, for the outer variable ``o``, the lane ``v``,
constants ``a > 0`` and ``b >= 0``, and ``r`` made of variables defined outside the outer loop.
For ``o < (a - 1 - b * (L - 1) - r) // a`` every lane passes it; the first loop runs those
iterations (never more than the original extent), with each such guard replaced by its body.
"""
from __future__ import annotations

from ...arith.simplify import linear_form
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..buffer import Buffer
from ..functor import StmtExprMutator
from ..stmt_functor import free_vars, pre_order_visit, substitute
from .prim_func_pass import is_const, prim_func_pass


@prim_func_pass
def partition_tail(func: PrimFunc) -> PrimFunc:
    """Loops whose vector lanes are guarded by a symbolic size become a loop of whole vectors and
    a guarded tail (module docstring)."""
    return func.replace(body=_Partition().visit(func.body))


class _Statements(StmtExprMutator):
    def visit_PrimExpr(self, e):
        return e   # guards and loops are statements: expressions stay as they are


class _Partition(_Statements):
    def __init__(self):
        super().__init__()
        self.guarded = 0   # guarded vector loops met so far: a loop with none inside is left alone

    def visit_For(self, loop):
        before = self.guarded
        loop = self.generic_visit(loop)
        if _is_guarded_vector_loop(loop):
            self.guarded += 1
        if loop.kind not in ("serial", "parallel") or not is_const(loop.min, 0) \
                or self.guarded == before:
            return loop
        statements = _statements(loop.body)
        candidates = [(s, s.body) for s in statements if _is_guarded_vector_loop(s)]
        if not candidates:
            return loop
        # the variables that loops and lets inside the loop define
        inner = {s.loop_var if isinstance(s, S.For) else s.var for s in statements
                 if isinstance(s, (S.For, S.LetStmt))}
        guards = {}   # id(IfThenElse) -> its then_case
        limits = []
        for vector, guard in candidates:
            limit = _full_iterations(guard.condition, loop.loop_var, vector, inner)
            if limit is not None:
                guards[id(guard)] = guard.then_case
                limits.append(limit)
        if not limits:
            return loop
        full = loop.extent
        for limit in limits:
            full = E.Min(full, E.Max(limit, E.IntImm(full.dtype, 0)))
        whole = S.For(loop.loop_var, loop.min, full, loop.kind, _Unguard(guards).visit(loop.body),
                      loop.thread_binding, loop.annotations)
        var = E.Var(loop.loop_var.name, loop.loop_var.dtype)   # each loop binds its own variable
        # the tail is usually one iteration: not worth starting threads for
        tail = S.For(var, full, E.Sub(loop.extent, full), "serial",
                     substitute(loop.body, {loop.loop_var: var}), loop.thread_binding,
                     loop.annotations)
        return S.SeqStmt([whole, tail])


class _Unguard(_Statements):
    """Each guard named in ``guards`` (by id) replaced by its body."""

    def __init__(self, guards: dict):
        super().__init__()
        self.guards = guards

    def visit_IfThenElse(self, s):
        body = self.guards.get(id(s))
        return self.visit(body) if body is not None else self.generic_visit(s)


def _statements(body) -> list:
    """Every statement in ``body``; loops, lets and guards are statements, so the walk never
    enters an expression or a buffer."""
    found = []

    def visit(node):
        if isinstance(node, S.Stmt):
            found.append(node)
            return True
        return not isinstance(node, (E.PrimExpr, Buffer))

    pre_order_visit(body, visit)
    return found


def _is_guarded_vector_loop(node) -> bool:
    """A vectorized loop of constant extent whose whole body is an if without else."""
    return isinstance(node, S.For) and node.kind == "vectorized" and is_const(node.extent) \
        and is_const(node.min, 0) and isinstance(node.body, S.IfThenElse) \
        and node.body.else_case is None


def _full_iterations(cond, outer: E.Var, vector: S.For, inner: set):
    """The number of iterations of ``outer`` from 0 for which ``cond`` holds on every lane of
    ``vector``, as an expression, or None when ``cond`` does not have the form described in the
    module docstring."""
    if not isinstance(cond, E.LT) or not cond.a.dtype.startswith("int"):
        return None
    lanes = vector.extent.value
    form = linear_form(E.Sub(cond.a, cond.b))
    a = b = 0
    rest = []
    for atom, coef in form.terms.values():
        var = atom.value if isinstance(atom, E.Cast) and isinstance(atom.value, E.Var) else atom
        if var is outer:
            a += coef
        elif var is vector.loop_var:
            b += coef
        else:
            rest.append((atom, coef))
    if a <= 0 or b < 0:
        return None
    dtype = outer.dtype
    r = E.IntImm(dtype, form.const)
    for atom, coef in rest:
        if any(v is outer or v is vector.loop_var or v in inner for v in free_vars(atom)):
            return None
        term = atom if atom.dtype == dtype else E.Cast(dtype, atom)
        r = E.Add(r, term if coef == 1 else E.Mul(term, E.IntImm(dtype, coef)))
    top = E.Sub(E.IntImm(dtype, a - 1 - b * (lanes - 1)), r)
    return top if a == 1 else E.FloorDiv(top, E.IntImm(dtype, a))


__all__ = ["partition_tail"]
