"""The reductions rfactor understands: a block's init and update matched to a commutative reducer.

A reducer combines n accumulators ``x`` (the outputs, one element each) with n values ``y``:
``+``, ``*``, ``T.max`` and ``T.min`` over one output (or several independent ones), and the
two-output argmax / argmin forms that keep an index next to a value::

    idx = T.Select(val > y_val or (val == y_val and idx < y_idx), idx, y_idx)   # argmax
    val = T.Select(val > y_val, val, y_val)                                   # < for argmin

(with ties broken towards the smaller index: ``val > y_val or (val == y_val and idx <
y_idx)``; the form without it is refused, since which index wins a tie depends on the order
rfactor changes). With several outputs the update must compute all new values in ``LetStmt``s before
storing them, so that no value reads an output already overwritten; one output may be stored
directly or through a LetStmt (``v = C[i] + e; C[i] = v``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ....ir import structural_equal
from ... import dtype as dt
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import substitute


@dataclass
class Reducer:
    """The matched reduction: ``stores`` (one update per output, in reducer order; the value of
    each is the whole update), ``identities`` (their init values), ``rhs`` (the values combined
    into the outputs, free of them) and ``combine(lhs, rhs)`` -> the new output values."""
    stores: tuple
    identities: tuple
    rhs: tuple
    combine: Callable
    name: str

    @property
    def buffers(self) -> tuple:
        return tuple(s.buffer for s in self.stores)

    def body(self, buffers, indices, lhs, rhs) -> S.Stmt:
        """Stores of ``combine(lhs, rhs)`` to ``buffers`` at ``indices``; several outputs go
        through LetStmts so that every new value is computed from the old ones."""
        values = self.combine(list(lhs), list(rhs))
        if len(values) == 1:
            return S.BufferStore(buffers[0], values[0], tuple(indices))
        lets = [E.Var(f"v_{b.name}", v.dtype) for b, v in zip(buffers, values)]
        body = S.seq(*[S.BufferStore(b, var, tuple(indices)) for b, var in zip(buffers, lets)])
        for var, value in reversed(list(zip(lets, values))):
            body = S.LetStmt(var, value, body)
        return body

    def init(self, buffers, indices) -> S.Stmt:
        return S.seq(*[S.BufferStore(b, v, tuple(indices)) for b, v in zip(buffers, self.identities)])


def match_reducer(block: S.Block) -> Reducer | str:
    """The reducer of ``block`` (a reduction block), or a sentence saying why there is none."""
    inits = _stores(block.init)
    if inits is None:
        return "its T.init is not a list of stores"
    if len({id(s.buffer) for s in inits}) != len(inits):
        return "its T.init stores to one buffer twice"
    updates = _updates(block.body, len(inits))
    if isinstance(updates, str):
        return updates
    if len(updates) != len(inits) or {id(s.buffer) for s in updates} != {id(s.buffer) for s in inits}:
        return "its T.init and its update store to different buffers"
    first = updates[0]
    for s in list(updates) + list(inits):
        if len(s.buffer.shape) != len(first.buffer.shape) or not structural_equal(
                tuple(s.buffer.shape), tuple(first.buffer.shape)):
            return "its outputs have different shapes"
        if not structural_equal(tuple(s.indices), tuple(first.indices)):
            return "it stores its outputs at different indices"
    init_of = {id(s.buffer): s.value for s in inits}
    for match in (_match_argminmax, _match_elementwise):
        found = match(updates, init_of)
        if found is not None:
            return found
    ops = " and ".join(f"{s.buffer.name}[...] = {s.value}" for s in updates)
    return (f"its update {ops} with init {', '.join(str(init_of[id(s.buffer)]) for s in updates)} "
            "is not x = x op e with op one of +, *, T.max, T.min and its identity as init, nor an "
            "argmax/argmin pair")


def _stores(stmt):
    if isinstance(stmt, S.BufferStore):
        return [stmt]
    if isinstance(stmt, S.SeqStmt) and all(isinstance(s, S.BufferStore) for s in stmt.seq):
        return list(stmt.seq)
    return None


def _updates(body, n: int):
    """The ``n`` update stores of a body that is one store (``n`` = 1) or, as the reference
    compiler requires, ``n`` LetStmts computing the new values followed by ``n`` stores of those
    variables (so every new value is computed from the old ones); let values inlined."""
    if isinstance(body, S.BufferStore):
        return [body] if n == 1 else f"its update is one store but its T.init has {n}"
    lets, order = {}, []
    while isinstance(body, S.LetStmt) and len(order) < n:
        if body.var in lets:
            return "its update binds one variable twice"
        lets[body.var] = substitute(body.value, lets)
        order.append(body.var)
        body = body.body
    stores = _stores(body)
    if len(order) != n or stores is None or len(stores) != n:
        return (f"its update is not {n} LetStmt(s) computing the new values followed by {n} "
                "store(s) of them")
    if len({id(s.buffer) for s in stores}) != n:
        return "its update stores to one buffer twice"
    stored = [s.value for s in stores]
    if not all(isinstance(v, E.Var) and v in lets for v in stored) or len(set(map(id, stored))) != n:
        return "its stores do not each store one of the LetStmt variables"
    return [S.BufferStore(s.buffer, lets[s.value], s.indices) for s in stores]


def _load(store) -> E.BufferLoad:
    return E.BufferLoad(store.buffer, tuple(store.indices))


def _same(a, b) -> bool:
    return structural_equal(a, b)


def _reads_any(e, buffers) -> bool:
    if isinstance(e, E.BufferLoad) and any(e.buffer is b for b in buffers):
        return True
    if isinstance(e, E.PrimExpr):
        return any(_reads_any(v, buffers) for _, v in e.fields() if isinstance(v, (E.PrimExpr, tuple)))
    if isinstance(e, tuple):
        return any(_reads_any(x, buffers) for x in e)
    return False


_ONE_OUTPUT = {E.Add: 0, E.Mul: 1, E.Max: "lowest", E.Min: "highest"}


def _is_identity(value, identity) -> bool:
    if not isinstance(value, (E.IntImm, E.FloatImm)):
        return False
    if not isinstance(identity, str):
        return value.value == identity
    dtype = dt.element_of(value.dtype)
    info = np.finfo(dtype) if dt.is_float(dtype) else np.iinfo(dtype)
    return value.value <= info.min if identity == "lowest" else value.value >= info.max


def _match_elementwise(updates, init_of):
    """Each output reduced on its own by +, *, T.max or T.min."""
    buffers = [s.buffer for s in updates]
    ops, rhs = [], []
    for s in updates:
        op = type(s.value)
        if op not in _ONE_OUTPUT or not _is_identity(init_of[id(s.buffer)], _ONE_OUTPUT[op]):
            return None
        own = [side for side in ("a", "b") if _same(getattr(s.value, side), _load(s))]
        if not own:
            return None
        other = getattr(s.value, "b" if own[0] == "a" else "a")
        if _reads_any(other, buffers):
            return None
        ops.append(op)
        rhs.append(other)

    def combine(lhs, values):
        return [op(x, y) for op, x, y in zip(ops, lhs, values)]
    return Reducer(tuple(updates), tuple(init_of[id(s.buffer)] for s in updates), tuple(rhs),
                   combine, " and ".join(op.__name__ for op in ops))


_ARG = {E.GE: "lowest", E.LE: "highest"}
_STRICT = {E.GT: "lowest", E.LT: "highest"}


def _match_argminmax(updates, init_of):
    """Two outputs, an index and a value, in either order."""
    if len(updates) != 2:
        return None
    for idx, val in (updates, updates[::-1]):
        found = _argminmax(idx, val, init_of)
        if found is not None:
            return found
    return None


def _argminmax(idx, val, init_of):
    xi, xv = _load(idx), _load(val)
    sv, si = val.value, idx.value
    if not (isinstance(sv, E.Select) and isinstance(si, E.Select)):
        return None
    if not (_same(sv.true_value, xv) and _same(si.true_value, xi)):
        return None
    yv, yi = sv.false_value, si.false_value
    if _reads_any(yv, (idx.buffer, val.buffer)) or _reads_any(yi, (idx.buffer, val.buffer)):
        return None
    cmp = type(sv.condition)
    if not (isinstance(init_of[id(idx.buffer)], E.IntImm)):
        return None
    if cmp in _ARG and _same(sv.condition, cmp(xv, yv)) and _same(si.condition, sv.condition):
        # Not commutative: on equal values the index seen first wins, and rfactor combines the
        # partial results in another order than the loop (the reference compiler accepts it
        # and may return another index of the same extreme).
        name = "argmax" if cmp is E.GE else "argmin"
        strict = ">" if cmp is E.GE else "<"
        return (f"its {name} keeps the index seen first among equal values ({sv.condition}), "
                "which depends on the order the values come in, and rfactor combines partial "
                "results in another order; break ties by the index to make the result "
                f"order-free: {xv} {strict} {yv} or ({xv} == {yv} and {xi} < {yi})")
    elif cmp in _STRICT and _same(sv.condition, cmp(xv, yv)) and _same(
            si.condition, E.Or(cmp(xv, yv), E.And(E.EQ(xv, yv), E.LT(xi, yi)))):
        if not _is_identity(init_of[id(val.buffer)], _STRICT[cmp]):
            return None

        def combine(lhs, rhs):
            wins = E.Or(cmp(lhs[1], rhs[1]), E.And(E.EQ(lhs[1], rhs[1]), E.LT(lhs[0], rhs[0])))
            return [E.Select(wins, lhs[0], rhs[0]), E.Select(cmp(lhs[1], rhs[1]), lhs[1], rhs[1])]
        name = "argmax" if cmp is E.GT else "argmin"
    else:
        return None
    return Reducer((idx, val), (init_of[id(idx.buffer)], init_of[id(val.buffer)]), (yi, yv),
                   combine, name)
