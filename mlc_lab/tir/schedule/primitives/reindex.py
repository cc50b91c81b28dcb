"""reindex, reindex_cache_read, reindex_cache_write and cache_index: copies of a buffer indexed by
the block's own iterators (or a precomputed index)."""
from __future__ import annotations

import inspect

from ...buffer import Buffer
from ...index_map import IndexMap
from .. import errors
from ..instruction import instruction
from .layout import _compile_index_map, index_map_source
from .index_cache import apply_cache_index
from .reindex_rules import apply_reindex, apply_reindex_cache


class ReindexPrimitives:
    """Mixin of tir.Schedule (the primitives are added here)."""

    def reindex(self, block, buffer):
        """Stage a buffer through a copy indexed by the block's iterators: the block then reads
        (or writes) ``<name>_reindex[v...]``, where v are the iterators that appear in its
        indices, in the block's order; a new block ``<name>_reindex`` copies the buffer into it
        right before the block's loop nest (for a read) or back right after it (for a write).
        Folding an access pattern such as ``A[vj, vi]`` or ``X[h * 2 + rh, ...]`` into a plain
        grid this way is how layouts are prepared for tensorization.

        Requires: ``buffer`` is ``("read", n)``/``("write", n)`` (the n-th read/write region of
        ``block``), or a buffer name or Buffer the block accesses (a buffer both read and written
        counts as written; the trace records the pair); the block is a leaf, alone in a chain of
        loops under its enclosing block, and loads/stores the buffer at one index pattern only,
        through plain loads and stores; the indices stay inside the buffer over the whole
        iterator domain (the copy runs over all of it). A reindexed read must not be written
        by the block; when the block has a T.where (or its loops may not reach every point of
        its domain), the copy of a read runs over the block's own loops, bindings and predicate
        instead, so it copies only what the block reads (refused when the predicate uses a loop
        that feeds none of the copy's iterators). A reindexed write must be stored on every
        iteration and every point of the domain must be bound by the loops (no T.where), and the
        block may read the buffer only as a reduction with a T.init.

        Parameters: block (BlockRV or name), buffer (tuple, str or Buffer).
        Returns: the copy block.
        Raises (ReindexError unless noted): BufferIndexOutOfRangeError and
        BufferNotAccessedError (CacheError, LayoutError), NotLeafBlockError,
        NoBufferAccessError, NonUniqueAccessError, OpaqueBufferAccessError, NotLoopChainError,
        ReindexWritesReadBufferError, ReindexReadsWrittenBufferError, PartialWriteError,
        ReindexOutOfBoundsError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
        ...     for i, j in T.grid(8, 4):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vj, vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.reindex(sch.get_block("B"), ("read", 0))
        BlockRV("A_reindex")
        >>> print(sch.mod["main"].script())
        @T.prim_func
        def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
            T.func_attr({"global_symbol": "f"})
            # with T.block("root"):
            A_reindex = T.alloc_buffer((8, 4))
            for ax0, ax1 in T.grid(8, 4):
                with T.block("A_reindex"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(A[v1, v0])
                    T.writes(A_reindex[v0, v1])
                    A_reindex[v0, v1] = A[v1, v0]
            for i, j in T.grid(8, 4):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(A_reindex[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A_reindex[vi, vj] + T.float32(1)
        """
        return self._traced_reindex(block, self._reindex_buffer(block, buffer))

    def _reindex_buffer(self, block, buffer) -> tuple:
        """``buffer`` as ``(kind, index)``; a name or Buffer both read and written is a write."""
        if isinstance(buffer, (tuple, list)) and len(buffer) == 2 and buffer[0] in ("read", "write"):
            return (buffer[0], buffer[1])
        if not isinstance(buffer, (str, Buffer)):
            raise TypeError("sch.reindex: parameter 'buffer' expects (\"read\", n), (\"write\", n), "
                            f"a buffer name or a Buffer, got {type(buffer).__name__}: {buffer!r}")
        func_name, realize, _ = self._resolve_block(block, "reindex")
        found = {}
        for kind, regions in (("read", realize.block.reads), ("write", realize.block.writes)):
            for k, region in enumerate(regions):
                if region.buffer is buffer or region.buffer.name == buffer:
                    found[id(region.buffer)] = (region.buffer, (kind, k))
        if len(found) > 1:
            raise ValueError(f'sch.reindex: block "{realize.block.name_hint}" accesses several '
                             f"buffers named {buffer!r}; give (\"read\", n) or (\"write\", n)")
        if not found:
            shown = buffer if isinstance(buffer, str) else buffer.name
            names = sorted({r.buffer.name for r in realize.block.reads + realize.block.writes})
            raise errors.BufferNotAccessedError(
                "reindex", f'block "{realize.block.name_hint}" does not access a buffer {shown!r} '
                f"(it accesses {', '.join(names) or 'none'})", self._func(func_name), [realize.block])
        return next(iter(found.values()))[1]

    def reindex_cache_read(self, block, read_buffer_index, storage_scope: str, index_map):
        """Read a buffer through a cache laid out by the block's iterators: a new block
        ``<name>_<scope>`` copies each element the block reads to
        ``cache[index_map(iterators)]``, and the block reads it from there. The copy goes in
        the enclosing block's body, after the buffer's writer (inside a loop nest it shares with
        the block, over the inner loops that feed the iterators used); only ``block`` is
        redirected.

        Requires: ``read_buffer_index`` indexes the block's reads (or names a buffer it reads);
        a known storage scope; the block is a leaf that reads one element of the buffer per
        iteration (every load at its read region's point) and does not write it; the index map
        takes one argument per block iterator, uses exactly the iterators the buffer's indices
        use, and sends different iterations to different elements; the buffer's indices stay
        inside it over the iterators' domains.

        Parameters: block (BlockRV or name), read_buffer_index (int, str or Buffer),
        storage_scope (str), index_map (lambda, its source string, or IndexMap).
        Returns: the copy block.
        Raises (ReindexError unless noted): BufferIndexOutOfRangeError, BufferNotAccessedError,
        UnknownStorageScopeError (CacheError), NotSinglePointAccessError, NotLeafBlockError,
        OpaqueBufferAccessError, NonUniqueAccessError, ReindexWritesReadBufferError,
        IndexMapArityError (LayoutError), IndexMapNotMatchError, IndexMapNotInjectiveError,
        ReindexOutOfBoundsError, StageSiteError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
        ...     for i, j in T.grid(8, 4):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> sch.reindex_cache_read("B", 0, "shared", lambda i, j: (j, i))
        BlockRV("A_shared")
        >>> print(sch.mod["main"].body.block.body)
        for i, j in T.grid(8, 4):
            with T.block("A_shared"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(A_shared[vj, vi])
                A_shared[vj, vi] = A[vi, vj]
        for i, j in T.grid(8, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A_shared[vj, vi])
                T.writes(B[vi, vj])
                B[vi, vj] = A_shared[vj, vi] * T.float32(2)
        """
        n = self._region_index(block, read_buffer_index, "read", "reindex_cache_read")
        return self._traced_reindex_cache_read(block, n, storage_scope,
                                               _map_source(index_map, "reindex_cache_read"))

    def reindex_cache_write(self, block, write_buffer_index, storage_scope: str, index_map):
        """Write a buffer through a cache laid out by the block's iterators: the block writes
        ``cache[index_map(iterators)]`` (``<name>_<scope>``) and a new block of that name copies
        each element back right after the block's loop nest (inside a loop nest it shares with
        another user of the buffer).

        Requires: ``write_buffer_index`` indexes the block's writes (or names a buffer it
        writes); a known storage scope; the block is a leaf, the only writer of the buffer in its
        scope, stores one element per iteration on every iteration (no condition, no T.where),
        and reads the buffer only as a reduction with a T.init; the index map takes one
        argument per block iterator, uses exactly the iterators the buffer's indices use, and
        sends different iterations to different elements.

        Parameters: block (BlockRV or name), write_buffer_index (int, str or Buffer),
        storage_scope (str), index_map (lambda, its source string, or IndexMap).
        Returns: the copy block.
        Raises (ReindexError unless noted): as reindex_cache_read, and NotSingleWriterError
        (CacheError), ReindexReadsWrittenBufferError, PartialWriteError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
        ...     for i, j in T.grid(8, 4):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> sch.reindex_cache_write("B", 0, "local", "lambda i, j: (j, i)")
        BlockRV("B_local")
        >>> print(sch.mod["main"].body.block.body)
        for i, j in T.grid(8, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B_local[vj, vi])
                B_local[vj, vi] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(8, 4):
            with T.block("B_local"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(B_local[vj, vi])
                T.writes(B[vi, vj])
                B[vi, vj] = B_local[vj, vi]
        """
        n = self._region_index(block, write_buffer_index, "write", "reindex_cache_write")
        return self._traced_reindex_cache_write(block, n, storage_scope,
                                                _map_source(index_map, "reindex_cache_write"))

    def cache_index(self, block, storage_scope: str, cse_thresh: int = 0):
        """Precompute the index arithmetic of a block: each pure computation of its stores that
        uses only its iterators (``vi // 4 + vj // 4``, a bilinear weight) and is used at least
        ``cse_thresh`` times (0: every largest one) goes into a buffer ``index_var_<k>`` indexed
        by the iterators it uses, filled by a new block ``index_<k>`` placed before the block's
        loop nest; the block loads the value instead. Computations are counted as the reference
        compiler's common-subexpression rules count them: one used too rarely gives way to its
        direct subcomputations. The block's reads list the new buffers (the reference compiler
        leaves them out, which hides the dependency from queries such as get_consumers).

        Requires: a leaf block; a known storage scope; a non-negative ``cse_thresh``; bindings
        that stay non-negative and bounded. Integer divisions by a divisor that may be zero are
        not precomputed (the new block would compute them where the block might not).

        Parameters: block (BlockRV or name), storage_scope (str), cse_thresh (int).
        Returns: the new blocks, in order (an empty list when nothing qualifies; the function
        is then unchanged).
        Raises: UnknownStorageScopeError (CacheError), NotLeafBlockError,
        ReindexOutOfBoundsError (ReindexError).

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((16,), "float32"), B: T.Buffer((8, 8), "float32")):
        ...     for i, j in T.grid(8, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi + vj // 2 * 2]
        >>> sch = tir.Schedule(f)
        >>> sch.cache_index("B", "global")
        [BlockRV("index_0")]
        >>> print(sch.mod["main"].body.block.body)
        for ax0, ax1 in T.grid(8, 8):
            with T.block("index_0"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                T.reads()
                T.writes(index_var_0[v0, v1])
                index_var_0[v0, v1] = v0 + v1 // 2 * 2
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi + vj // 2 * 2], index_var_0[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[index_var_0[vi, vj]]
        """
        return self._traced_cache_index(block, storage_scope, cse_thresh)

    def _region_index(self, block, buffer, kind: str, primitive: str):
        """A buffer name or Buffer as the index of its first ``kind`` region in ``block``."""
        if not isinstance(buffer, (str, Buffer)):
            return buffer
        func_name, realize, _ = self._resolve_block(block, primitive)
        regions = realize.block.reads if kind == "read" else realize.block.writes
        for k, region in enumerate(regions):
            if region.buffer is buffer or region.buffer.name == buffer:
                return k
        shown = buffer if isinstance(buffer, str) else buffer.name
        raise errors.BufferNotAccessedError(
            primitive, f'block "{realize.block.name_hint}" does not {kind} a buffer {shown!r} (it '
            f"{kind}s {', '.join(r.buffer.name for r in regions) or 'none'})",
            self._func(func_name), [realize.block])


def _map_source(index_map, primitive: str) -> str:
    if isinstance(index_map, IndexMap):
        return index_map.to_python()
    try:
        return index_map_source(index_map)
    except TypeError:
        raise TypeError(f"sch.{primitive}: parameter 'index_map' expects a lambda such as "
                        f"`lambda i, j: (j, i)`, its source string or an IndexMap, got "
                        f"{type(index_map).__name__}: {index_map!r}") from None


def _reindex(self, block, buffer):
    if not (isinstance(buffer, (tuple, list)) and len(buffer) == 2 and buffer[0] in ("read", "write")):
        raise TypeError("sch.reindex: parameter 'buffer' expects (\"read\", n) or (\"write\", n), "
                        f"got {buffer!r}")
    return apply_reindex(self, block, buffer[0], buffer[1])


def _reindex_cache_read(self, block, read_buffer_index, storage_scope, index_map):
    return apply_reindex_cache(self, block, read_buffer_index, storage_scope,
                               _compile_index_map(index_map), index_map, is_read=True)


def _reindex_cache_write(self, block, write_buffer_index, storage_scope, index_map):
    return apply_reindex_cache(self, block, write_buffer_index, storage_scope,
                               _compile_index_map(index_map), index_map, is_read=False)


def _cache_index(self, block, storage_scope, cse_thresh=0):
    return apply_cache_index(self, block, storage_scope, cse_thresh)


def _traced(method, name: str):
    """``method`` as the traced instruction ``name``; the public method normalises the
    arguments (a buffer name becomes its index, a lambda its source) so traces replay from
    JSON."""
    def call(self, *args, **kwargs):
        return method(self, *args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__signature__ = inspect.signature(method)
    getattr(ReindexPrimitives, name).is_instruction = True
    return instruction(call)


ReindexPrimitives._traced_reindex = _traced(_reindex, "reindex")
ReindexPrimitives._traced_reindex_cache_read = _traced(_reindex_cache_read, "reindex_cache_read")
ReindexPrimitives._traced_reindex_cache_write = _traced(_reindex_cache_write, "reindex_cache_write")
ReindexPrimitives._traced_cache_index = _traced(_cache_index, "cache_index")

__all__ = ["ReindexPrimitives"]
