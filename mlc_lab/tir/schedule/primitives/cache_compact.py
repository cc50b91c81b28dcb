"""Compact caches: a cache_read or cache_write copy placed straight into a block's body (not under
a loop of it) holds only the region its block uses, as the reference compiler allocates it. The
cache buffer gets the region's extents, and every access to it is shifted by the region's start:
a 16x16 tile of a 128x128 buffer read inside a tile block becomes a 16x16 local buffer.
"""
from __future__ import annotations

from ....arith import can_prove, simplify
from ...analysis import block_access_regions
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import uses_var


def compact_box(site, buffer, region) -> tuple | None:
    """(starts, extents) of ``region`` (one Interval per dimension) when the copy at ``site``
    may hold just that box: the site is the top level of its block's body, every side is bounded,
    the extents do not change while the block runs, and the box lies inside ``buffer``."""
    body = site.scope.block.body
    if not (site.container is None or site.container is body) or any(r is None for r in region):
        return None
    known = site.known()
    scope_vars = [iv.var for iv in site.scope.block.iter_vars]
    starts = [r.lo for r in region]
    extents = [r.extent(known) for r in region]
    for start, extent, dim in zip(starts, extents, buffer.shape):
        if uses_var(extent, scope_vars) or not (can_prove(start >= 0, known)
                                                and can_prove(start + extent <= dim, known)):
            return None
    if all(isinstance(s, E.IntImm) and s.value == 0 for s in starts) and all(
            can_prove(e >= d, known) for e, d in zip(extents, buffer.shape)):
        return None   # the whole buffer: nothing to compact
    return starts, extents


def compact_copy(name: str, buffer, cache, starts, extents, reading: bool) -> S.Stmt:
    """``cache[v] = buffer[start + v]`` (``reading``) or ``buffer[start + v] = cache[v]`` over
    the box, one loop and one iterator per dimension."""
    loops = [E.Var(f"ax{d}", e.dtype) for d, e in enumerate(extents)]
    iter_vars = tuple(S.IterVar(E.Var(f"v{d}", e.dtype), S.Range(E.const(0, e.dtype), e))
                      for d, e in enumerate(extents))
    local = tuple(iv.var for iv in iter_vars)
    outer = tuple(simplify(s + v) for s, v in zip(starts, local))
    if reading:
        body = S.BufferStore(cache, E.BufferLoad(buffer, outer), local)
    else:
        body = S.BufferStore(buffer, E.BufferLoad(cache, local), outer)
    block = S.Block(name, iter_vars, (), (), body)
    reads, writes = block_access_regions(block)
    stmt = S.BlockRealize(tuple(loops), E.const(True), block.replace(reads=reads, writes=writes))
    for var, extent in reversed(list(zip(loops, extents))):
        stmt = S.For(var, E.const(0, var.dtype), extent, "serial", stmt)
    return stmt


def shift_buffer(stmt, old, new, starts):
    """``stmt`` with every access to ``old`` made to ``new`` at the index minus ``starts``."""
    return _Shift(old, new, starts).visit(stmt)


class _Shift(StmtExprMutator):
    def __init__(self, old, new, starts):
        super().__init__()
        self.old, self.new, self.starts = old, new, starts

    def _indices(self, indices) -> tuple:
        return tuple(simplify(self.visit(i) - s) for i, s in zip(indices, self.starts))

    def visit_BufferLoad(self, load):
        if load.buffer is not self.old:
            return self.generic_visit(load)
        return E.BufferLoad(self.new, self._indices(load.indices))

    def visit_BufferStore(self, store):
        if store.buffer is not self.old:
            return self.generic_visit(store)
        return S.BufferStore(self.new, self.visit(store.value), self._indices(store.indices))

    def visit_BufferRegion(self, region):
        if region.buffer is not self.old:
            return self.generic_visit(region)
        return S.BufferRegion(self.new, tuple(S.Range(simplify(r.min - s), r.extent)
                                              for r, s in zip(region.region, self.starts)))

    def visit_MatchBufferRegion(self, match):
        if match.source.buffer is self.old:   # a view with the old strides cannot shift
            raise _CannotShift()
        return self.generic_visit(match)

    def visit_Buffer(self, buffer):
        if buffer is self.old:   # any other use (A.data) cannot shift
            raise _CannotShift()
        return buffer


class _CannotShift(Exception):
    pass


def try_shift(stmt, old, new, starts):
    """shift_buffer, or None when ``stmt`` uses ``old`` other than by loads, stores and regions."""
    try:
        return shift_buffer(stmt, old, new, starts)
    except _CannotShift:
        return None
