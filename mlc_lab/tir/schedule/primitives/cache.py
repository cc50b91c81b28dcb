"""Caching stages: cache_read, cache_write, set_scope, and the helpers that place a new copy stage
next to an existing one (shared with the reduction primitives)."""
from __future__ import annotations

import inspect

from ...analysis import block_access_regions
from ....ir.node import Node
from ...buffer import Buffer, check_scope
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import and_all, conjuncts, free_vars, post_order_visit
from .. import errors
from ..instruction import instruction
from ..func_index import StmtReplacer
from ..rv import BlockRV
from .scope import all_blocks_under, writers_in_scope
from .block_domain import block_var_domains, realize_over
from .cache_compact import compact_box, compact_copy, try_shift
from .region import Interval, relax_region, union_regions


class CachePrimitives:

    def cache_read(self, block, read_buffer_index, storage_scope: str, consumer_blocks=None):
        """Read a buffer through a cache: a new block copies it into ``<name>_<scope>`` and
        ``block`` reads the copy instead.

        The copy block is named like the new buffer, gets its own loop nest over the whole buffer
        and is placed right before the loop nest of ``block`` in the enclosing block (when the
        buffer's producer shares that loop nest, just before ``block``'s part of it, copying the
        region ``block`` reads, under the part of its T.where on the shared loops, so the copy
        runs only where ``block`` does). The new buffer is allocated in the enclosing block. Only
        ``block`` is redirected; other readers keep reading the original buffer. With
        ``consumer_blocks``, exactly those blocks (and the blocks inside them) read the copy
        instead, ``block`` only naming the buffer: the copy goes before the first of them and
        holds what they all read.
        A copy that lands straight in a block's body (a tile block's, not under one of its loops)
        holds only the tile the block reads, as the reference compiler allocates it: the cache
        has the tile's shape and is read at the index minus the tile's start.

        Requires: ``read_buffer_index`` indexes ``block``'s reads (or is the name of a buffer it
        reads, or that Buffer; the trace records the index); a known storage scope ("global",
        "shared", "shared.dyn", "local", "warp"); the blocks redirected do not write the buffer;
        at most one block of the scope writes it (after decompose_reduction, cache before it);
        consumer blocks are in ``block``'s scope, read the buffer, and, when there are several,
        the first is not in a loop nest the writer shares.

        Parameters: block (BlockRV), read_buffer_index (int, str or Buffer), storage_scope (str),
        consumer_blocks (list of BlockRV or block names, optional).
        Returns: the copy block.
        Raises (all CacheError): BufferIndexOutOfRangeError, BufferNotAccessedError,
        UnknownStorageScopeError, BufferWrittenByBlockError, NotSingleWriterError,
        ConsumerBlockError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
        ...     for i, j in T.grid(4, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> A_shared = sch.cache_read(sch.get_block("B"), 0, "shared")
        >>> print(sch.mod["main"].script())
        @T.prim_func
        def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
            T.func_attr({"global_symbol": "f"})
            # with T.block("root"):
            A_shared = T.alloc_buffer((4, 8), scope="shared")
            for ax0, ax1 in T.grid(4, 8):
                with T.block("A_shared"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(A[v0, v1])
                    T.writes(A_shared[v0, v1])
                    A_shared[v0, v1] = A[v0, v1]
            for i, j in T.grid(4, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(A_shared[vi, vj])
                    T.writes(B[vi, vj])
                    B[vi, vj] = A_shared[vi, vj] * T.float32(2)
        """
        read_buffer_index = self._buffer_index(block, read_buffer_index, "read", "cache_read")
        extra = {"consumer_blocks": list(consumer_blocks)} if consumer_blocks else {}
        return self._traced_cache_read(block, read_buffer_index, storage_scope, **extra)

    def _buffer_index(self, block, buffer, kind: str, primitive: str):
        """``buffer`` as an index into ``block``'s reads (``kind`` "read") or writes: a buffer
        name or a Buffer becomes the index of its region; an index is left as it is."""
        if not isinstance(buffer, (str, Buffer)):
            return buffer
        if isinstance(buffer, str) and not buffer.isidentifier():
            raise TypeError(f"sch.{primitive}: parameter '{kind}_buffer_index' expects an int, a "
                            f"buffer name or a Buffer, got the str {buffer!r}, which is no name")
        _, realize, _ = self._resolve_block(block, primitive)
        regions = realize.block.reads if kind == "read" else realize.block.writes
        for k, region in enumerate(regions):
            if region.buffer is buffer or region.buffer.name == buffer:
                return k
        shown = buffer if isinstance(buffer, str) else buffer.name
        raise errors.BufferNotAccessedError(
            primitive, f'block "{realize.block.name_hint}" does not {kind} a buffer {shown!r} (it '
            f"{kind}s {', '.join(r.buffer.name for r in regions) or 'none'})",
            self._func(block.func_name if isinstance(block, BlockRV) else self._default_func_name()),
            [realize.block])


    def cache_write(self, block, write_buffer_index, storage_scope: str, consumer_blocks=None):
        """Write a buffer through a cache: ``block`` writes ``<name>_<scope>`` instead, and a new
        block of the same name copies the result back to the original buffer.

        The write-back block gets its own loop nest over the region ``block`` writes and is placed
        right after ``block``'s loop nest (inside a shared loop nest when a consumer of the
        buffer shares it). The new buffer is allocated in the enclosing block. The blocks of
        ``consumer_blocks`` (and those inside them) read the cache directly; the others read the
        original buffer.

        Requires: ``write_buffer_index`` indexes ``block``'s writes (or is the name of a buffer it
        writes, or that Buffer; the trace records the index); a known storage scope; ``block`` is
        the only writer of the buffer in its scope and does not read it (other than as the
        accumulator of a reduction with ``T.init``); consumer blocks are in its scope and read
        the buffer. The reference compiler also caches a block that reads what it writes (a tile
        block whose inner blocks write A and then read it), redirecting the reads too; an element
        such a block reads before writing would then come from the uninitialised cache, so this
        one refuses rather than compute garbage.

        Parameters: block (BlockRV), write_buffer_index (int, str or Buffer), storage_scope (str),
        consumer_blocks (list of BlockRV or block names, optional).
        Returns: the write-back block.
        Raises (all CacheError): BufferIndexOutOfRangeError, BufferNotAccessedError,
        UnknownStorageScopeError, NotSingleWriterError, NotCompleteOrReductionBlockError,
        ConsumerBlockError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
        ...     for i, j in T.grid(4, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> B_local = sch.cache_write(sch.get_block("B"), 0, "local")
        >>> print(sch.mod["main"].script())
        @T.prim_func
        def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
            T.func_attr({"global_symbol": "f"})
            # with T.block("root"):
            B_local = T.alloc_buffer((4, 8), scope="local")
            for i, j in T.grid(4, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(A[vi, vj])
                    T.writes(B_local[vi, vj])
                    B_local[vi, vj] = A[vi, vj] * T.float32(2)
            for ax0, ax1 in T.grid(4, 8):
                with T.block("B_local"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    T.reads(B_local[v0, v1])
                    T.writes(B[v0, v1])
                    B[v0, v1] = B_local[v0, v1]
        """
        write_buffer_index = self._buffer_index(block, write_buffer_index, "write", "cache_write")
        extra = {"consumer_blocks": list(consumer_blocks)} if consumer_blocks else {}
        return self._traced_cache_write(block, write_buffer_index, storage_scope, **extra)

    def _cache_write(self, block, write_buffer_index: int, storage_scope: str, consumer_blocks=None):
        primitive = "cache_write"
        func_name, realize, index = self._resolve_block(block, primitive)
        func = self._func(func_name)
        buffer = _nth_buffer(realize, write_buffer_index, "write", primitive, func)
        _check_scope(storage_scope, primitive, func, realize)
        name = realize.block.name_hint
        scope = index.parent_block(realize)
        # Blocks nested in the writer (a blockized one) write through it, so they are not others.
        inner = [realize] + all_blocks_under(realize)
        others = [r for r in writers_in_scope(scope, buffer) if not any(r is i for i in inner)]
        if others:
            raise errors.NotSingleWriterError(
                primitive, f'block "{name}" is not the only writer of buffer {buffer.name} (also '
                f'written by {", ".join(repr(r.block.name_hint) for r in others)}); cache_write '
                "needs the only writer (apply it before decompose_reduction)",
                func, [realize.block] + [r.block for r in others])
        if any(r.buffer is buffer for r in realize.block.reads):
            raise errors.NotCompleteOrReductionBlockError(
                primitive, f'block "{name}" reads buffer {buffer.name}, which it also writes, without '
                "being a reduction with T.init; the cache would be read before it is written",
                func, [realize.block])
        users = [r for r in all_blocks_under(scope) if not any(r is i for i in inner) and any(
            reg.buffer is buffer for reg in r.block.reads + r.block.writes)]
        site = StageSite.find(scope, realize, lambda item: not _contains_any(item, users))
        cache = _new_buffer(func, buffer, storage_scope)
        region = site.relaxed_region(realize, realize.block.writes[write_buffer_index])
        copy_name = unique_block_name(index, cache.name)
        known = site.known()
        # Where the writer's T.where rules out a whole iteration of the loops around the copy,
        # the writer stored nothing there, so the copy must not run either.
        skipped = [c for c in conjuncts(realize.predicate)
                   if all(any(v is k for k in known) for v in free_vars(c))]
        copy = copy_stage(copy_name, cache, buffer, region, known, predicate=and_all(skipped))
        new_realize = swap_buffer(realize, buffer, cache)
        new_scope = site.insert(copy, new_realize, after=True, alloc=cache)
        if consumer_blocks:
            readers = _consumers(self, consumer_blocks, buffer, scope, index, primitive, func)
            new_scope = StmtReplacer({id(r): swap_buffer(r, buffer, cache) for r in readers
                                      if r is not realize}).visit(new_scope)
        self._replace(func_name, {id(scope): new_scope}, primitive)
        return BlockRV(copy_name, func_name)

    def set_scope(self, block, buffer_index, storage_scope: str) -> None:
        """Change the storage scope of the buffer ``block`` writes (its ``buffer_index``-th write,
        or the written buffer of that name, or that Buffer; the trace records the index).

        Requires: the buffer is allocated inside the function (an alloc_buffer), not a parameter;
        a known storage scope.

        Parameters: block (BlockRV), buffer_index (int, str or Buffer), storage_scope (str).
        Raises (all CacheError): BufferIndexOutOfRangeError, BufferNotAccessedError,
        UnknownStorageScopeError, ParameterBufferError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] + T.float32(1)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> sch.set_scope(sch.get_block("B"), 0, "shared")
        >>> print(sch.mod["main"].script().splitlines()[4])
            B = T.alloc_buffer((8,), scope="shared")
        """
        buffer_index = self._buffer_index(block, buffer_index, "write", "set_scope")
        return self._traced_set_scope(block, buffer_index, storage_scope)

    def _set_scope(self, block, buffer_index: int, storage_scope: str) -> None:
        primitive = "set_scope"
        func_name, realize, index = self._resolve_block(block, primitive)
        func = self._func(func_name)
        buffer = _nth_buffer(realize, buffer_index, "write", primitive, func)
        _check_scope(storage_scope, primitive, func, realize)
        owner = next((r for r in [func.body] + list(index.blocks.values())
                      if isinstance(r, S.BlockRealize)
                      and any(b is buffer for b in r.block.alloc_buffers)), None)
        if owner is None:
            raise errors.ParameterBufferError(
                primitive, f"buffer {buffer.name} is a parameter of function {func_name}, not an "
                "alloc_buffer; only buffers allocated inside the function can change scope",
                func, [realize.block])
        if buffer.scope == storage_scope:
            return None
        # Views of the buffer (match_buffers of its regions) live in the same storage.
        views = []
        post_order_visit(func.body, lambda n: views.append(n.buffer) if isinstance(
            n, S.MatchBufferRegion) and n.source.buffer is buffer else None)
        new_body = func.body
        for old in [buffer] + views:
            new_body = _BufferSwap(old, old.replace(scope=storage_scope)).visit(new_body)
        self._update(func_name, func.replace(body=new_body), primitive)
        return None


def _cache_read(self, block, read_buffer_index: int, storage_scope: str, consumer_blocks=None):
    primitive = "cache_read"
    func_name, realize, index = self._resolve_block(block, primitive)
    func = self._func(func_name)
    buffer = _nth_buffer(realize, read_buffer_index, "read", primitive, func)
    _check_scope(storage_scope, primitive, func, realize)
    scope = index.parent_block(realize)
    if consumer_blocks:
        consumers = _consumers(self, consumer_blocks, buffer, scope, index, primitive, func)
    else:
        consumers = [realize]
    for consumer in consumers:
        if any(w.buffer is buffer for w in consumer.block.writes):
            raise errors.BufferWrittenByBlockError(
                primitive, f'block "{consumer.block.name_hint}" both reads and writes buffer '
                f"{buffer.name}; cache_read only redirects reads, use cache_write for a buffer the "
                "block writes", func, [consumer.block])
    writers = writers_in_scope(scope, buffer)
    nested = {id(inner) for w in writers for inner in all_blocks_under(w)}
    outermost = [w for w in writers if id(w) not in nested]
    if len(outermost) > 1:
        raise errors.NotSingleWriterError(
            primitive, f"buffer {buffer.name} is written by "
            f"{', '.join(repr(w.block.name_hint) for w in outermost)}; cache_read copies a "
            "buffer with one writer (or none) in the scope", func, [w.block for w in outermost])
    first = consumers[0]
    site = StageSite.find(scope, first, lambda item: not _contains_any(item, writers))
    if consumer_blocks:
        region = _consumed_region(site, consumers, buffer, index, scope, primitive, func)
    else:
        region = site.relaxed_region(realize, realize.block.reads[read_buffer_index])
    guard = _fixed_guard(site, consumers)
    cache = _new_buffer(func, buffer, storage_scope)
    copy_name = unique_block_name(index, cache.name)
    swap = lambda stmt: swap_buffer(stmt, buffer, cache)  # noqa: E731
    box = compact_box(site, buffer, region)
    if box is not None:
        starts, extents = box
        small = cache.replace(shape=tuple(extents))
        shifted = [try_shift(c, buffer, small, starts) for c in consumers]
        if all(c is not None for c in shifted):
            cache, by_id = small, {id(c): new for c, new in zip(consumers, shifted)}
            swap = lambda stmt: by_id[id(stmt)]  # noqa: E731
            copy = _guarded(compact_copy(copy_name, buffer, cache, starts, extents, reading=True),
                            guard)
        else:
            box = None
    if box is None:
        copy = copy_stage(copy_name, buffer, cache, region, site.known(), guard)
    new_scope = site.insert(copy, swap(first), after=False, alloc=cache)
    others = {id(c): swap(c) for c in consumers[1:]}
    if others:
        new_scope = StmtReplacer(others).visit(new_scope)
    self._replace(func_name, {id(scope): new_scope}, primitive)
    return BlockRV(copy_name, func_name)


def _traced(method, name: str):
    """``method`` as the traced instruction ``name``: its public wrapper normalises the
    arguments (a buffer given by name becomes its index) so that traces replay from JSON."""
    def call(self, *args, **kwargs):
        return method(self, *args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__signature__ = inspect.signature(method)
    getattr(CachePrimitives, name).is_instruction = True
    return instruction(call)


CachePrimitives._traced_cache_read = _traced(_cache_read, "cache_read")
CachePrimitives._traced_cache_write = _traced(CachePrimitives._cache_write, "cache_write")
CachePrimitives._traced_set_scope = _traced(CachePrimitives._set_scope, "set_scope")


def _consumers(sch, blocks, buffer, scope, index, primitive: str, func) -> list:
    """The BlockRealizes of ``blocks`` (BlockRVs or names), in program order, each checked: in
    ``scope`` and reading ``buffer``."""
    found = []
    for block in blocks:
        _, realize, _ = sch._resolve_block(block, primitive, "consumer_blocks")
        name = realize.block.name_hint
        if index.parent_block(realize) is not scope:
            raise errors.ConsumerBlockError(
                primitive, f'consumer block "{name}" is not in the scope of the cached block',
                func, [realize.block])
        if not any(r.buffer is buffer for r in realize.block.reads):
            raise errors.ConsumerBlockError(
                primitive, f'consumer block "{name}" does not read buffer {buffer.name}',
                func, [realize.block])
        if not any(f is realize for f in found):
            found.append(realize)
    position = {id(node): k for k, node in enumerate(index.order)}
    return sorted(found, key=lambda r: position[id(r)])


def _consumed_region(site, consumers, buffer, index, scope, primitive: str, func) -> list:
    """The union of what ``consumers`` read of ``buffer``, relaxed as the copy at ``site`` sees it:
    over the loops below the site (a block outside the site's entry must come after it in the
    scope's own sequence)."""
    top = [scope.block.body] if not isinstance(scope.block.body, S.SeqStmt) else list(scope.block.body.seq)
    regions = []
    for consumer in consumers:
        inside = _contains_any(site.item, [consumer])
        if not inside and not any(site.item is entry for entry in top):
            raise errors.ConsumerBlockError(
                primitive, f'consumer block "{consumer.block.name_hint}" is outside the loop nest '
                f'that the copy for "{consumers[0].block.name_hint}" goes in (it shares loops with '
                f"the writer of {buffer.name}); cache for each consumer on its own",
                func, [consumer.block])
        known = site.known()
        binding = {iv.var: v for iv, v in zip(consumer.block.iter_vars, consumer.iter_values)}
        loops = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in index.loops_above(consumer)
                 if not any(lp.loop_var is v for v in known)}
        regions += [relax_region(read, loops, known, binding, (consumer.predicate,))
                    for read in consumer.block.reads if read.buffer is buffer]
    return union_regions(regions, site.known())


def _fixed_guard(site, consumers):
    """When the consumers read at all, as the copy at ``site`` sees it: the parts of each one's
    T.where that use only variables fixed while the copy runs (the loops above the site, the
    scope's iterators), or-ed over the consumers (constant true when one has none). Region
    inference narrows by guards on the loops the copy runs over; a guard on a loop the copy sits
    inside cannot narrow a region, it decides whether the consumer reads anything at all, so the
    copy must carry it or it copies elements the consumer never reads (and nothing may have
    written)."""
    known = site.known()
    fixed_ids = {id(v) for v in known}
    guards = []
    for consumer in consumers:
        parts = [c for c in conjuncts(consumer.predicate)
                 if free_vars(c) and all(id(v) in fixed_ids for v in free_vars(c))]
        if not parts:
            return E.const(True)
        guards.append(and_all(parts))
    out = guards[0]
    for g in guards[1:]:
        out = E.Or(out, g)
    return out


def _guarded(stmt, guard):
    """``stmt`` (loops around one BlockRealize) with ``guard`` and-ed into the block's
    predicate."""
    if isinstance(guard, E.IntImm) and guard.value:
        return stmt
    if isinstance(stmt, S.For):
        return stmt.replace(body=_guarded(stmt.body, guard))
    predicate = stmt.predicate
    new = guard if isinstance(predicate, E.IntImm) and predicate.value else E.And(predicate, guard)
    return stmt.replace(predicate=new)


# -- placing a new stage ---------------------------------------------------------------------------
class StageSite:
    """Where a new stage goes: next to ``item``, the statement holding a block at one level of
    its enclosing block's body (a SeqStmt entry, or the whole body when it is not a SeqStmt).
    ``inner_loops`` are the loops from ``item`` down to the block."""

    def __init__(self, scope, container, position, path):
        self.scope, self.container, self.position = scope, container, position
        self.item = path[0]
        self.target = path[-1]
        self.inner_loops = [s for s in path if isinstance(s, S.For)]

    def known(self) -> dict:
        """Var -> Range of what stays fixed while the new stage runs once: the scope block's
        iterators and the loops between the scope and the site."""
        ranges = {iv.var: iv.dom for iv in self.scope.block.iter_vars}
        for stmt in stmt_path(self.scope.block.body, self.item)[:-1]:
            if isinstance(stmt, S.For):
                ranges[stmt.loop_var] = S.Range(stmt.min, stmt.extent)
        return ranges

    def relaxed_region(self, realize, region: S.BufferRegion) -> list:
        """The part of ``region`` (in the iterators of ``realize``) that the target block touches
        over all iterations of the loops under the site: one Interval, or None when it cannot be
        bounded, per dimension; the outer loops stay symbolic. The block's T.where narrows it: an
        iteration it skips touches nothing."""
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
        inner = {loop.loop_var: S.Range(loop.min, loop.extent) for loop in self.inner_loops}
        return relax_region(region, inner, self.known(), binding, guards=(realize.predicate,))

    @staticmethod
    def find(scope, target, accept) -> "StageSite":
        """The outermost level whose entry holding ``target`` satisfies ``accept(entry)``."""
        body = scope.block.body
        path = stmt_path(body, target)
        levels = [] if isinstance(body, S.SeqStmt) else [(None, 0, path)]
        for k, s in enumerate(path[:-1]):
            if isinstance(s, S.SeqStmt):
                position = next(i for i, x in enumerate(s.seq) if x is path[k + 1])
                levels.append((s, position, path[k + 1:]))
        for container, position, rest in levels:
            if accept(rest[0]):
                return StageSite(scope, container, position, rest)
        container, position, rest = levels[-1]
        return StageSite(scope, container, position, rest)

    def insert(self, stage, new_target, after: bool, alloc=None):
        """The scope's BlockRealize with ``stage`` placed before/after the entry, the target
        block replaced by ``new_target``, and ``alloc`` added to the scope's allocations."""
        new_item = StmtReplacer({id(self.target): new_target}).visit(self.item)
        pair = (new_item, stage) if after else (stage, new_item)
        block = self.scope.block
        if self.container is None:
            new_body = S.seq(*pair)
        else:
            items = list(self.container.seq)
            items[self.position:self.position + 1] = pair
            new_body = replace_flat(block.body, {id(self.container): S.SeqStmt(tuple(items))})
        allocs = block.alloc_buffers + ((alloc,) if alloc is not None else ())
        return self.scope.replace(block=block.replace(body=new_body, alloc_buffers=allocs))


def stmt_path(root, target) -> list:
    """Statements from ``root`` down to ``target`` (both included); [] when not found. Does not
    look inside other blocks."""
    if root is target:
        return [root]
    if isinstance(root, S.SeqStmt):
        children = root.seq
    elif isinstance(root, (S.For, S.LetStmt, S.Allocate)):
        children = (root.body,)
    elif isinstance(root, S.IfThenElse):
        children = (root.then_case, root.else_case)
    else:
        children = ()
    for child in children:
        if child is not None:
            rest = stmt_path(child, target)
            if rest:
                return [root] + rest
    return []


class _FlatReplacer(StmtReplacer):
    """Replace statements by id and splice a SeqStmt that replaces a SeqStmt entry into it."""

    def visit_SeqStmt(self, node):
        new = self.generic_visit(node)
        if new is node:
            return node
        return S.seq(*new.seq)


def replace_flat(stmt, replacements: dict):
    return _FlatReplacer(replacements).visit(stmt)


def blocks_in(stmt) -> list:
    return ([stmt] if isinstance(stmt, S.BlockRealize) else []) + all_blocks_under(stmt)


def _contains_any(stmt, realizes) -> bool:
    ids = {id(r) for r in realizes}
    return any(id(r) in ids for r in blocks_in(stmt))


# -- building the copy stage -------------------------------------------------------------------------
def copy_stage(name: str, src, dst, region, known: dict, predicate=None) -> S.Stmt:
    """``for ax...: with T.block(name): dst[v...] = src[v...]`` over ``region`` (one Interval, or
    None for the whole dimension, per dimension; variables in ``known``, Var -> Range, stay
    symbolic). A region that may overhang the buffer is clipped to it, by a predicate where the
    bound is symbolic, so the copy never touches an element outside the buffer; ``predicate``
    (in the variables of ``known``) is kept on top."""
    iter_vars = tuple(S.IterVar(E.Var(f"v{d}", dim.dtype), S.Range(E.const(0, dim.dtype), dim))
                      for d, dim in enumerate(dst.shape))
    indices = tuple(iv.var for iv in iter_vars)
    body = S.BufferStore(dst, E.BufferLoad(src, indices), indices)
    block = S.Block(name, iter_vars, (), (), body)
    reads, writes = block_access_regions(block)
    block = block.replace(reads=reads, writes=writes)
    required = [Interval.of_range(iv.dom) if interval is None else interval
                for iv, interval in zip(iter_vars, region)]
    domains = block_var_domains(block, block.writes, {id(dst): required}, known)
    return realize_over(block, domains, True, known, predicate)


class _BufferSwap(StmtExprMutator):
    """Every use of one buffer (loads, stores, regions, allocations) becomes another."""

    def __init__(self, old, new):
        super().__init__()
        self.old, self.new = old, new

    def visit_Buffer(self, buffer):
        return self.new if buffer is self.old else buffer


def swap_buffer(stmt, old, new):
    return _BufferSwap(old, new).visit(stmt)


# -- small helpers ----------------------------------------------------------------------------------
def _nth_buffer(realize, index, kind: str, primitive: str, func):
    if not isinstance(index, int) or isinstance(index, bool):
        raise TypeError(f"sch.{primitive}: parameter '{kind}_buffer_index' expects an int, a "
                        f"buffer name or a Buffer, got {type(index).__name__}: {index!r}")
    regions = realize.block.reads if kind == "read" else realize.block.writes
    if not 0 <= index < len(regions):
        names = ", ".join(r.buffer.name for r in regions) or "none"
        raise errors.BufferIndexOutOfRangeError(
            primitive, f'block "{realize.block.name_hint}" {kind}s {len(regions)} buffer(s) '
            f"({names}); {kind} buffer index {index} is out of range", func, [realize.block])
    return regions[index].buffer


def _check_scope(storage_scope, primitive: str, func, realize) -> None:
    if not isinstance(storage_scope, str):
        raise TypeError(f"sch.{primitive}: parameter 'storage_scope' expects a str such as "
                        f"'shared', got {type(storage_scope).__name__}: {storage_scope!r}")
    problem = check_scope(storage_scope)
    if problem:
        raise errors.UnknownStorageScopeError(primitive, problem, func, [realize.block])


def taken_buffer_names(func) -> set:
    """The names of every buffer reachable from the function's parameters and body (through
    any field, as ``post_order_visit`` reaches them), each node looked at once."""
    names, seen, todo = set(), set(), [func.params, func.body]
    while todo:
        node = todo.pop()
        if isinstance(node, (tuple, list)):
            todo.extend(node)
            continue
        if not isinstance(node, Node) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Buffer):
            names.add(node.name)
        todo.extend(value for _, value in node.fields() if isinstance(value, (Node, tuple, list)))
    return names


def _new_buffer(func, buffer, storage_scope: str):
    name = unique_name(f"{buffer.name}_{storage_scope.replace('.', '_')}", taken_buffer_names(func))
    return buffer.replace(name=name, scope=storage_scope, strides=())


def unique_block_name(index, base: str) -> str:
    return unique_name(base, set(index.blocks))


def unique_name(base: str, taken: set) -> str:
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"

