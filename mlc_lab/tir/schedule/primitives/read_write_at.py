"""read_at / write_at: stage the part of a buffer one block reads (writes) under a loop through a
new buffer in another storage scope, copied in at the start (out at the end) of the loop body."""
from __future__ import annotations

from ....arith import can_prove, simplify
from ....arith.simplify import linear_form
from .. import errors
from ... import expr as E
from ... import stmt as S
from ..instruction import instruction
from ..rv import BlockRV
from ...stmt_functor import and_all, conjuncts, loads_in, stores_in, substitute, uses_var
from .block_domain import accessed_region, enclosing_ranges, loops_between, shared_by_threads
from .cache import _check_scope, _new_buffer, _nth_buffer, swap_buffer
from .padding import _Replace
from .scope import all_blocks_under, const_int


class ReadWriteAtPrimitives:

    @instruction
    def read_at(self, loop, block, read_buffer_index: int, storage_scope: str):
        """Copy the part of a buffer that ``block`` reads during one iteration of ``loop`` into a
        new buffer in ``storage_scope`` at the start of the loop's body, and make the block read
        the copy (a staging step, as the reference compiler's read_at does).

        The copy is one block named after the new buffer, annotated ``auto_copy``, with one
        iterator per loop its region depends on; the region covers the iterations of the loops
        under ``loop`` and of the thread loops that share the scope (e.g. threadIdx for
        "shared").

        Requires: ``loop`` is an ancestor of the block; no block under ``loop`` writes the
        buffer; the region has constant extents and stays inside the buffer.

        Parameters: loop (LoopRV), block (BlockRV or name), read_buffer_index (int, among the
        block's reads), storage_scope (str).
        Returns: the copy block.
        Raises: ReadWriteAtLoopNotAncestorError, ReadAtWrittenUnderLoopError,
        ReadWriteAtRegionError (all ReadWriteAtError), BufferIndexOutOfRangeError,
        UnknownStorageScopeError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        ...     for i, j in T.grid(8, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> copy = sch.read_at(i, sch.get_block("B"), 0, "local")
        >>> print(sch.mod["main"].body.block.body.body[0])
        with T.block("A_local"):
            v0 = T.axis.spatial(8, i)
            T.reads(A[v0, 0:8])
            T.writes(A_local[v0, 0:8])
            T.block_attr({"auto_copy": 1})
            for ax0 in range(8):
                A_local[v0, ax0] = A[v0, ax0]
        """
        return self._stage_at("read_at", loop, block, read_buffer_index, storage_scope, read=True)

    @instruction
    def write_at(self, loop, block, write_buffer_index: int, storage_scope: str):
        """Make ``block`` write a new buffer in ``storage_scope`` instead of its output, and copy
        the part it wrote back to the output at the end of ``loop``'s body (a staging step, as
        the reference compiler's write_at does). The region and the copy block are formed as in
        ``read_at``.

        Requires: ``loop`` is an ancestor of the block; no other block of the scope accesses the
        buffer; a block reading the buffer initialises it; every element of the copied region is
        written by the block in the same iteration of the loops the region depends on (each
        dimension ``outer * c + inner loops`` that cover ``c`` values densely), so the last copy
        of every element holds its final value.

        Parameters: loop (LoopRV), block (BlockRV or name), write_buffer_index (int, among the
        block's writes), storage_scope (str).
        Returns: the copy block.
        Raises: ReadWriteAtLoopNotAncestorError, WriteAtOtherAccessError,
        WriteAtReadWithoutInitError, WriteAtCoverageError, ReadWriteAtRegionError (all
        ReadWriteAtError), BufferIndexOutOfRangeError, UnknownStorageScopeError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        ...     for i, j in T.grid(8, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> copy = sch.write_at(i, sch.get_block("B"), 0, "local")
        >>> print(sch.mod["main"].body.block.body.body[1])
        with T.block("B_local"):
            v0 = T.axis.spatial(8, i)
            T.reads(B_local[v0, 0:8])
            T.writes(B[v0, 0:8])
            T.block_attr({"auto_copy": 1})
            for ax0 in range(8):
                B[v0, ax0] = B_local[v0, ax0]
        """
        return self._stage_at("write_at", loop, block, write_buffer_index, storage_scope, read=False)

    def _stage_at(self, p, loop, block, buffer_index, storage_scope, read: bool):
        func_name, realize, index = self._resolve_block(block, p)
        _, loop_node, _ = self._resolve_loop(loop, p)
        func = self._func(func_name)
        blk = realize.block
        buffer = _nth_buffer(realize, buffer_index, "read" if read else "write", p, func)
        _check_scope(storage_scope, p, func, realize)
        if not any(anc is loop_node for anc in index.path(realize)):
            raise errors.ReadWriteAtLoopNotAncestorError(
                p, f'loop {loop_node.loop_var.name} is not an ancestor of block "{blk.name_hint}"',
                func, [loop_node, blk])
        scope = index.parent_block(realize)
        if read:
            writers = [r for r in all_blocks_under(loop_node)
                       if any(w.buffer is buffer for w in r.block.writes)]
            if writers:
                raise errors.ReadAtWrittenUnderLoopError(
                    p, f'block "{writers[0].block.name_hint}" writes buffer {buffer.name} under loop '
                    f"{loop_node.loop_var.name}", func, [loop_node, writers[0].block])
        else:
            _check_write_at(p, func, realize, buffer, scope)
        threads = shared_by_threads(index, loop_node, storage_scope)
        known = enclosing_ranges(index, loop_node)
        region = accessed_region(index, loop_node, [realize], buffer, writes=not read,
                                 known=known, also_relax=threads)
        if region is None or any(iv is None for iv in region):
            raise errors.ReadWriteAtRegionError(
                p, f"the region of buffer {buffer.name} touched under loop "
                f"{loop_node.loop_var.name} cannot be bounded", func, [blk])
        extents = [const_int(simplify(iv.hi - iv.lo + 1, known)) for iv in region]
        for d, (iv, ext) in enumerate(zip(region, extents)):
            if ext is None or not (can_prove(E.GE(iv.lo, 0), known)
                                   and can_prove(E.LE(iv.hi, buffer.shape[d] - 1), known)):
                raise errors.ReadWriteAtRegionError(
                    p, f"dimension {d} of the region of buffer {buffer.name} touched under loop "
                    f"{loop_node.loop_var.name} has no constant extent or may leave the buffer",
                    func, [blk])
        if not read:
            _check_coverage(p, func, index, loop_node, realize, buffer, region, threads)
        new_buffer = _new_buffer(func, buffer, storage_scope)
        copy = _copy_block(new_buffer.name, index, loop_node, region, extents,
                           src=buffer if read else new_buffer, dst=new_buffer if read else buffer)
        if read:   # skip the iterations the block skips, whose elements may never be written
            inner = [lp.loop_var for lp in loops_between(index, realize, loop_node)]
            kept = [c for c in conjuncts(realize.predicate) if not uses_var(c, inner)
                    and const_int(c) != 1]
            if kept:
                copy = copy.replace(predicate=and_all(kept))
        new_realize = swap_buffer(realize, buffer, new_buffer)
        new_loop = _Replace({id(realize): new_realize}).visit(loop_node)
        # the copy goes right before (after) the statement of the loop body holding the block
        items = list(new_loop.body.seq) if isinstance(new_loop.body, S.SeqStmt) else [new_loop.body]
        holder = next(k for k, st in enumerate(items)
                      if st is new_realize or any(x is new_realize for x in all_blocks_under(st)))
        items.insert(holder if read else holder + 1, copy)
        new_loop = new_loop.replace(body=S.seq(*items))
        new_scope = _Replace({id(loop_node): new_loop}).visit(scope.block)
        new_scope = new_scope.replace(alloc_buffers=new_scope.alloc_buffers + (new_buffer,))
        self._replace(func_name, {id(scope.block): new_scope}, p)
        return BlockRV(new_buffer.name, func_name)


def _copy_block(name, index, loop, region, extents, src, dst):
    """``with T.block(name)``: one iterator per loop the region's start uses, a loop nest copying
    the region from ``src`` to ``dst``."""
    outer = [anc for anc in index.path(loop) if isinstance(anc, S.For)] + [loop]
    order = []
    for iv in region:
        for lp in outer:
            if uses_var(iv.lo, lp.loop_var) and lp not in order:
                order.append(lp)
    iter_vars, mapping = [], {}
    for k, lp in enumerate(order):
        var = E.Var(f"v{k}", lp.loop_var.dtype)
        iter_vars.append(S.IterVar(var, S.Range(E.const(0, lp.extent.dtype), lp.extent), "spatial"))
        mapping[lp.loop_var] = var if const_int(lp.min) == 0 else var + lp.min
    starts = [simplify(substitute(iv.lo, mapping)) for iv in region]
    loop_vars, indices = [], []
    for d, (start, ext) in enumerate(zip(starts, extents)):
        if ext == 1:
            indices.append(start)
            continue
        var = E.Var(f"ax{len(loop_vars)}", start.dtype)
        loop_vars.append((var, ext))
        indices.append(var if const_int(start) == 0 else start + var)
    body = S.BufferStore(dst, E.BufferLoad(src, tuple(indices)), tuple(indices))
    for var, ext in reversed(loop_vars):
        body = S.For(var, E.const(0, var.dtype), E.const(ext, var.dtype), "serial", body)
    ranges = tuple(S.Range(start, E.const(ext, start.dtype)) for start, ext in zip(starts, extents))
    if not _disjoint(starts, extents, iter_vars):
        # Two iterations copy into one element (a start such as v0 % 7): the iterators cannot be
        # spatial, whose distinct values write distinct elements; as opaque ones no loop over
        # them can be parallelised or bound to threads, which would race on that element.
        iter_vars = [iv.replace(iter_type="opaque") for iv in iter_vars]
    block = S.Block(name, tuple(iter_vars), (S.BufferRegion(src, ranges),),
                    (S.BufferRegion(dst, ranges),), body, annotations={"auto_copy": 1})
    values = tuple(lp.loop_var for lp in order)
    return S.BlockRealize(values, E.const(True, "bool"), block)


def _disjoint(starts, extents, iter_vars) -> bool:
    """Whether distinct iterator values copy into distinct elements: each iterator steps one
    dimension's start by at least that dimension's extent, and no dimension uses two of them."""
    own = {id(iv.var) for iv in iter_vars}
    used = set()
    for start, ext in zip(starts, extents):
        terms = linear_form(simplify(start)).terms.values()
        mine = [(atom, coef) for atom, coef in terms if id(atom) in own]
        if len(mine) > 1 or any(id(atom) not in own and uses_var(atom, [iv.var for iv in iter_vars])
                                for atom, _ in terms):
            return False
        if mine:
            (var, coef), = mine
            if id(var) in used or abs(coef) < ext:
                return False
            used.add(id(var))
    return len(used) == len(own)


def _check_write_at(p, func, realize, buffer, scope) -> None:
    blk = realize.block
    for r in all_blocks_under(scope):
        if r is realize or any(r is x for x in all_blocks_under(realize)):
            continue
        if any(reg.buffer is buffer for reg in r.block.reads + r.block.writes):
            raise errors.WriteAtOtherAccessError(
                p, f'block "{r.block.name_hint}" also accesses buffer {buffer.name}', func,
                [blk, r.block])
    stored = stores_in(blk.body) + (stores_in(blk.init) if blk.init is not None else [])
    if all_blocks_under(blk.body) or any(st.buffer is buffer for st in stored) and any(
            ld.buffer is buffer for ld in loads_in(blk.body)) and not (
            blk.init is not None and any(st.buffer is buffer for st in stores_in(blk.init))):
        raise errors.WriteAtReadWithoutInitError(
            p, f'block "{blk.name_hint}" reads buffer {buffer.name} without an init writing it '
            "(or holds inner blocks)", func, [blk])


def _check_coverage(p, func, index, loop, realize, buffer, region, threads) -> None:
    """Each stored dimension is ``base + dense part`` where the dense part, over the relaxed
    loops, covers exactly the region's extent, and ``base`` uses at most one other loop, with a
    step at least that extent (different iterations copy disjoint regions)."""
    blk = realize.block
    relaxed = {id(lp.loop_var): lp for lp in loops_between(index, realize, loop)}
    relaxed.update({id(v): index.loops[id(v)] for v in threads})
    binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    stores = [st for st in stores_in(blk.body) if st.buffer is buffer]
    ok = const_int(realize.predicate) == 1 and len(stores) == 1
    used = set()
    for d, (idx, iv) in enumerate(zip(stores[0].indices if ok else (), region)):
        lin = linear_form(simplify(substitute(idx, binding)))
        dense, base = [], []
        for atom, coef in lin.terms.values():
            var = atom if isinstance(atom, E.Var) else None
            if var is None or id(var) in used:
                ok = False
                continue
            used.add(id(var))
            (dense if id(var) in relaxed else base).append((coef, var))
        step = 1
        for coef, var in sorted(dense, key=lambda t: t[0]):
            lp = relaxed[id(var)]
            if coef != step or const_int(lp.min) != 0 or const_int(lp.extent) is None:
                ok = False
                break
            step *= const_int(lp.extent)
        ext = const_int(simplify(iv.hi - iv.lo + 1))
        if step != ext or len(base) > 1 or (base and base[0][0] < ext):
            ok = False
    if not ok:
        raise errors.WriteAtCoverageError(
            p, f'the region of buffer {buffer.name} copied back at loop {loop.loop_var.name} is not '
            f'shown to be exactly what block "{blk.name_hint}" writes in that iteration', func, [blk])
