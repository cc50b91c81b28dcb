"""Register reuse in fully unrolled loops, for ``prepare``.

nvcc unrolls a loop nest with a small constant trip count completely (here: loops of at most
``MAX_UNROLL_LOOP`` iterations, or marked ``T.unroll``, and at most ``MAX_UNROLL`` statements
in all), and then loads a value once for as long as its address does not change, keeping it
in a register:

    for k, i, j in T.grid(8, 8, 8):                 # 512 statements, unrolled
        C_local[i * 8 + j] += A_shared[tx // 8 * 64 + i * 8 + k] * B_shared[k * 64 + tx % 8 * 8 + j]

loads ``A_shared`` 64 times (once per ``k, i``: its index does not use ``j``), not 512. Each load
of such a nest gets the weight ``1 / (trip count of the nest's loops its index does not use)``
(``prepared.reuse``), unless the nest writes the loaded buffer. The nest also issues its global
loads together, so it waits for memory once, not once per statement (``prepared.rounds``).
"""
from __future__ import annotations

from ...tir import expr as E
from ...tir import stmt as S
from ...tir.stmt_functor import loads_in, stores_in

MAX_UNROLL = 512       # statements up to which a constant loop nest counts as fully unrolled
MAX_UNROLL_LOOP = 32   # ... if each of its serial loops has at most this many iterations


def _trips(stmt):
    """Iterations of the statements under ``stmt`` if nvcc would unroll it completely, else None."""
    if isinstance(stmt, S.BufferStore):
        return 1
    if isinstance(stmt, S.For):
        if not (isinstance(stmt.extent, E.IntImm) and isinstance(stmt.min, E.IntImm)):
            return None
        if stmt.kind == "serial" and stmt.extent.value > MAX_UNROLL_LOOP:
            return None
        inner = _trips(stmt.body)
        if inner is None:
            return None
        return inner if stmt.kind == "vectorized" else inner * stmt.extent.value
    if isinstance(stmt, S.SeqStmt):
        counts = [_trips(s) for s in stmt.seq]
        return None if None in counts else sum(counts)
    if isinstance(stmt, S.IfThenElse):
        counts = [_trips(s) for s in (stmt.then_case, stmt.else_case) if s is not None]
        return None if None in counts else sum(counts)
    if isinstance(stmt, S.LetStmt):
        return _trips(stmt.body)
    return None


def find_unrolled(stmt, prepared) -> None:
    if isinstance(stmt, S.For) and stmt.kind != "vectorized":
        trips = _trips(stmt)
        if trips is not None and trips <= MAX_UNROLL:
            written = {s.buffer for s in stores_in(stmt)}
            _weigh(stmt, [], written, prepared, trips)
            return
    for _, value in stmt.fields():
        if isinstance(value, S.Stmt):
            find_unrolled(value, prepared)
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, S.Stmt):
                    find_unrolled(v, prepared)


def _weigh(stmt, loops, written, prepared, trips) -> None:
    """Reuse weights of the loads in an unrolled nest of ``trips`` statements; its global loads
    are issued together, so the nest waits one memory latency, not one per statement."""
    if isinstance(stmt, S.For):
        inner = loops if stmt.kind == "vectorized" else loops + [stmt]
        _weigh(stmt.body, inner, written, prepared, trips)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _weigh(s, loops, written, prepared, trips)
    elif isinstance(stmt, S.IfThenElse):
        for s in (stmt.then_case, stmt.else_case):
            if s is not None:
                _weigh(s, loops, written, prepared, trips)
    elif isinstance(stmt, S.LetStmt):
        _weigh(stmt.body, loops, written, prepared, trips)
    elif isinstance(stmt, S.BufferStore):
        prepared.rounds[stmt] = prepared.rounds.get(stmt, 0.0) / trips
        for load in loads_in(stmt.value):
            if load.buffer in written or load not in prepared.reuse:
                continue
            used = prepared.deps(load.indices[0])[0]
            repeats = 1
            for loop in loops:
                if loop.loop_var not in used:
                    repeats *= loop.extent.value
            prepared.reuse[load] = 1.0 / repeats
