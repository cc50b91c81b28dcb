"""Barriers for shared memory: ``inject_sync(kernel_body, thread_vars)`` puts
``T.tvm_storage_sync("shared")`` (``__syncthreads()``) wherever the threads of a block could
otherwise see each other's shared-memory accesses out of order.

A barrier goes before a statement that

* reads a shared buffer some statement wrote since the last barrier (read after write: the
  cooperative fetch must be complete before anyone computes with it), or
* writes a shared buffer some statement read since the last barrier (write after read: the next
  tile must not overwrite the one others still read).

A serial loop is followed round its back edge: the end of one iteration meets the start of the
next, which puts the barrier that protects the next fetch at the top of the loop body. Barriers
go only where every thread of the block arrives: inside a loop or ``if`` whose bounds or condition
depend on the thread index, the whole construct counts as one statement, and the barrier goes
before it. (Accesses that conflict inside such a construct cannot be ordered by a barrier; the
cuda-sim simulator reports them as races.)
"""
from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..stmt_functor import loads_in, stores_in, uses_var

SYNC_OP = "tvm_storage_sync"


def sync_stmt() -> S.Evaluate:
    return S.Evaluate(E.Call("int32", SYNC_OP, (E.StringImm("shared"),)))


def is_sync(stmt) -> bool:
    return isinstance(stmt, S.Evaluate) and isinstance(stmt.value, E.Call) and stmt.value.op == SYNC_OP


def inject_sync(body: S.Stmt, thread_vars) -> S.Stmt:
    planner = _Planner(list(thread_vars))
    return planner.stmt(body, (frozenset(), frozenset()))[0]


def _shared_accesses(stmt) -> tuple[frozenset, frozenset]:
    reads = frozenset(id(load.buffer) for load in loads_in(stmt) if _shared(load.buffer))
    writes = frozenset(id(store.buffer) for store in stores_in(stmt) if _shared(store.buffer))
    return reads, writes


def _shared(buffer) -> bool:
    return buffer.scope.startswith("shared")


class _Planner:
    """Walks statements in uniform control flow with the state ``(reads, writes)``: the shared
    buffers accessed since the last barrier."""

    def __init__(self, thread_vars: list):
        self.varying = list(thread_vars)   # grows with let variables computed from thread indices

    def uniform(self, *nodes) -> bool:
        return not uses_var(nodes, self.varying)

    def stmt(self, stmt, state):
        if isinstance(stmt, S.SeqStmt):
            out = []
            for s in stmt.seq:
                s, state = self.stmt(s, state)
                out.append(s)
            return S.seq(*out), state
        if isinstance(stmt, S.For) and self.uniform(stmt.min, stmt.extent):
            return self.loop(stmt, state)
        if isinstance(stmt, S.IfThenElse) and self.uniform(stmt.condition):
            then, then_state = self.stmt(stmt.then_case, state)
            other, other_state = (self.stmt(stmt.else_case, state) if stmt.else_case is not None
                                  else (None, state))
            merged = (then_state[0] | other_state[0], then_state[1] | other_state[1])
            return S.IfThenElse(stmt.condition, then, other), merged
        if isinstance(stmt, S.LetStmt):
            if not self.uniform(stmt.value):
                self.varying.append(stmt.var)
            body, state = self.stmt(stmt.body, self.after(stmt.value, state)[1])
            return S.LetStmt(stmt.var, stmt.value, body), state
        if isinstance(stmt, S.Allocate):
            body, state = self.stmt(stmt.body, state)
            return S.Allocate(stmt.buffer, body), state
        if is_sync(stmt):
            return stmt, (frozenset(), frozenset())
        needs_sync, state = self.after(stmt, state)
        return (S.seq(sync_stmt(), stmt) if needs_sync else stmt), state

    def after(self, node, state):
        """(whether a barrier must come before ``node``, the state after it)."""
        reads, writes = _shared_accesses(node)
        if _conflict(state, reads, writes):
            return True, (reads, writes)
        return False, (state[0] | reads, state[1] | writes)

    def loop(self, loop: S.For, state):
        # A conflict with what came before the loop is settled once, before it, not on every
        # iteration; what remains inside is carried from one iteration to the next.
        sync_before = _conflict(state, *_shared_accesses(loop))
        if sync_before:
            state = (frozenset(), frozenset())
        body, end = self.stmt(loop.body, state)
        if end != state:   # go round the back edge once more with what the body leaves pending
            body, end = self.stmt(loop.body, (state[0] | end[0], state[1] | end[1]))
        new = S.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding,
                    loop.annotations)
        return (S.seq(sync_stmt(), new) if sync_before else new), \
            (state[0] | end[0], state[1] | end[1])


def _conflict(state, reads, writes) -> bool:
    """Read after write or write after read of one shared buffer since the last barrier. (Writes
    after writes are left alone: a schedule's stores to one buffer are its own cooperative
    fetch, each thread writing its share.)"""
    return bool(reads & state[1] or writes & state[0])
