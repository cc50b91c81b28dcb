"""reindex and reindex_cache_read/write applied to a schedule: the checks of each rule, then the
new stage and the rewritten block (the IR pieces come from reindex_stage.py)."""
from __future__ import annotations

from ....arith import int_bound, simplify
from ...buffer import check_scope
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import free_vars, substitute, uses_var
from .. import errors
from ..rv import BlockRV
from .injective import repeated_points
from .reindex_stage import (Site, block_accesses, check_full_write, check_in_bounds,
                            check_reads_own_writes, copy_block, fresh_name, is_true, one_to_one,
                            redirect_block, taken_names, unique_indices, wrap_loops)
from .scope import all_blocks_under, const_int, writers_in_scope


def nth_region(realize, kind: str, n, primitive: str, func) -> S.BufferRegion:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"sch.{primitive}: a buffer index is an int, got {type(n).__name__}: {n!r}")
    regions = realize.block.reads if kind == "read" else realize.block.writes
    if not 0 <= n < len(regions):
        names = ", ".join(r.buffer.name for r in regions) or "none"
        raise errors.BufferIndexOutOfRangeError(
            primitive, f'block "{realize.block.name_hint}" {kind}s {len(regions)} buffer(s) '
            f"({names}); {kind} buffer index {n} is out of range", func, [realize.block])
    return regions[n]


# -- reindex ---------------------------------------------------------------------------------------
def apply_reindex(sch, block, kind: str, n: int) -> BlockRV:
    primitive = "reindex"
    func_name, realize, index = sch._resolve_block(block, primitive)
    func = sch._func(func_name)
    blk = realize.block
    target = nth_region(realize, kind, n, primitive, func).buffer
    acc = block_accesses(realize, target, primitive, func)
    indices = unique_indices(acc, realize, primitive, func)
    used = free_vars(indices)
    covered = [iv for iv in blk.iter_vars if any(v is iv.var for v in used)]
    if kind == "read" and acc.stores:
        raise errors.ReindexWritesReadBufferError(
            primitive, f'block "{blk.name_hint}" also writes buffer {target.name}; its writes would '
            "go to the copy and be lost (reindex its write instead)", func, [blk])
    if kind == "write":
        check_reads_own_writes(acc, realize, primitive, func)
        check_full_write(acc, realize, primitive, func)
    scope = index.parent_block(realize)
    loops = index.loops_above(realize)
    entry = _chain_entry(scope, realize, loops, primitive, func)
    if kind == "write":
        problem = _skipped_points(realize, loops)
        if problem:
            raise errors.PartialWriteError(
                primitive, f'block "{blk.name_hint}": {problem}, so some elements of the copy '
                "would never be written before it is copied back", func, [blk])
    check_in_bounds(indices, target, covered, realize, primitive, func)

    shape = tuple(simplify(iv.dom.min + iv.dom.extent) for iv in covered)
    new_buffer = target.replace(name=fresh_name(f"{target.name}_reindex", taken_names(func)),
                                shape=shape, strides=(), axis_separators=())
    stage_vars = [E.Var(f"v{k}", iv.var.dtype) for k, iv in enumerate(covered)]
    mapping = {iv.var: v for iv, v in zip(covered, stage_vars)}
    target_indices = tuple(substitute(i, mapping) for i in indices)
    if kind == "read":
        copy = (new_buffer.name, target, target_indices, new_buffer, stage_vars)
    else:
        copy = (new_buffer.name, new_buffer, stage_vars, target, target_indices)
    name, src, src_idx, dst, dst_idx = copy
    name = fresh_name(name, set(index.blocks))
    iter_vars = [S.IterVar(v, iv.dom, "spatial") for v, iv in zip(stage_vars, covered)]
    stage_block = copy_block(name, iter_vars, src, src_idx, dst, dst_idx)
    if kind == "read" and (not is_true(realize.predicate) or _skipped_points(realize, loops)):
        # The block reads only where its loops and T.where take it: the copy runs the same loops
        # and bindings under the same predicate, so it reads nothing the block would not.
        stage = _stage_over_block_loops(realize, loops, covered, stage_block, primitive, func)
    else:
        loop_vars = [E.Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(covered)]
        stage = wrap_loops(S.BlockRealize(tuple(loop_vars), E.const(True), stage_block),
                           [(lv, iv.dom.min, iv.dom.extent) for lv, iv in zip(loop_vars, covered)])
    new_realize = redirect_block(realize, target, new_buffer, [iv.var for iv in covered],
                                 stores=True)
    body = scope.block.body
    container = body if isinstance(body, S.SeqStmt) else None
    position = 0 if container is None else next(k for k, x in enumerate(body.seq) if x is entry)
    site = Site(scope, container, position, [entry])
    new_scope = site.insert(stage, {id(realize): new_realize}, after=kind == "write", alloc=new_buffer)
    sch._replace(func_name, {id(scope): new_scope}, primitive)
    return BlockRV(name, func_name)


def _stage_over_block_loops(realize, loops, covered, stage_block, primitive: str, func):
    """The copy of a reindexed read run over copies of the block's loops that feed the
    ``covered`` iterators, with the block's bindings of them and its T.where: it copies exactly
    the elements the block reads. Refused when the predicate or a copied loop's bounds use a loop
    that feeds no covered iterator (the copy would have to run it as well)."""
    blk = realize.block
    values = [v for iv, v in zip(blk.iter_vars, realize.iter_values)
              if any(iv is c for c in covered)]
    kept = [lp for lp in loops if uses_var(values, lp.loop_var)]
    loop_map = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in kept}
    kept_ids = {id(lp.loop_var) for lp in kept}
    chain_ids = {id(lp.loop_var) for lp in loops}
    needs = [(realize.predicate, f"T.where({realize.predicate})")] + [
        (e, f"the bounds of loop {lp.loop_var.name}") for lp in kept for e in (lp.min, lp.extent)]
    for expr, what in needs:
        missing = [v for v in free_vars(expr) if id(v) in chain_ids and id(v) not in kept_ids]
        if missing:
            raise errors.ReindexOutOfBoundsError(
                primitive, f'block "{blk.name_hint}" reads only where its loops and T.where take '
                f"it, and {what} uses loop {missing[0].name}, which feeds none of the iterators "
                "that index the copy; the copy could not keep to the elements the block reads",
                func, [blk])
    predicate = substitute(realize.predicate, loop_map)
    realize_stage = S.BlockRealize(tuple(substitute(v, loop_map) for v in values), predicate,
                                   stage_block)
    return wrap_loops(realize_stage, [(loop_map[lp.loop_var], substitute(lp.min, loop_map),
                                       substitute(lp.extent, loop_map)) for lp in kept])


def _chain_entry(scope, realize, loops, primitive: str, func):
    """The outermost loop of ``realize`` (or the block itself), checked to be an entry of the
    scope's body with each loop holding only the next one."""
    top = loops[0] if loops else realize
    inner = list(loops[1:]) + [realize]
    body = None if scope is None else scope.block.body
    chain = all(outer.body is nxt for outer, nxt in zip(loops, inner))
    placed = body is top or (isinstance(body, S.SeqStmt) and any(x is top for x in body.seq))
    if scope is None or not chain or not placed:
        raise errors.NotLoopChainError(
            primitive, f'block "{realize.block.name_hint}" is not alone in a chain of loops right '
            "under its enclosing block, so the copy stage has no place next to its loop nest",
            func, [realize.block])
    return top


def _skipped_points(realize, loops) -> str | None:
    """Why the loops may not bind every point of the block's domain (None: they do)."""
    block = realize.block
    by_var = {id(lp.loop_var): lp for lp in loops}
    seen = set()
    plain = True
    for iv, value in zip(block.iter_vars, realize.iter_values):
        loop = by_var.get(id(value)) if isinstance(value, E.Var) else None
        if (loop is None or id(loop) in seen or const_int(simplify(loop.min - iv.dom.min)) != 0
                or const_int(simplify(loop.extent - iv.dom.extent)) != 0):
            plain = False
            break
        seen.add(id(loop))
    if plain:
        return None
    loop_sizes = [const_int(lp.extent) for lp in loops]
    dom_sizes = [const_int(iv.dom.extent) for iv in block.iter_vars]
    if None in loop_sizes or None in dom_sizes:
        return "its bindings cannot be shown to reach every point of its iterator domain"
    total_loops, total_dom = 1, 1
    for size in loop_sizes:
        total_loops *= size
    for size in dom_sizes:
        total_dom *= size
    if total_loops == total_dom and repeated_points(realize, loops) is False:
        return None
    return "its bindings cannot be shown to reach every point of its iterator domain"


# -- reindex_cache_read / reindex_cache_write ------------------------------------------------------
def apply_reindex_cache(sch, block, n: int, storage_scope: str, index_map_fn, map_text: str,
                        is_read: bool) -> BlockRV:
    primitive = "reindex_cache_read" if is_read else "reindex_cache_write"
    kind = "read" if is_read else "write"
    func_name, realize, index = sch._resolve_block(block, primitive)
    func = sch._func(func_name)
    blk = realize.block
    problem = check_scope(storage_scope)
    if problem:
        raise errors.UnknownStorageScopeError(primitive, problem, func, [blk])
    region = nth_region(realize, kind, n, primitive, func)
    buffer = region.buffer
    if not all(const_int(r.extent) == 1 for r in region.region):
        raise errors.NotSinglePointAccessError(
            primitive, f'block "{blk.name_hint}" {kind}s region {_region_text(region)}, not a '
            f"single element per iteration", func, [blk])
    acc = block_accesses(realize, buffer, primitive, func)
    accessed = unique_indices(acc, realize, primitive, func)
    ranges = {iv.var: iv.dom for iv in blk.iter_vars}
    old = tuple(simplify(r.min, ranges) for r in region.region)
    if not all(const_int(simplify(a - b)) == 0 for a, b in zip(accessed, old)):
        raise errors.NotSinglePointAccessError(
            primitive, f'block "{blk.name_hint}" accesses buffer {buffer.name} at '
            f"[{', '.join(map(str, accessed))}], not at its region {_region_text(region)}",
            func, [blk])
    if is_read and acc.stores:
        raise errors.ReindexWritesReadBufferError(
            primitive, f'block "{blk.name_hint}" also writes buffer {buffer.name}; its writes would '
            "go to the cache and be lost", func, [blk])
    scope = index.parent_block(realize)
    if not is_read:
        check_reads_own_writes(acc, realize, primitive, func)
        check_full_write(acc, realize, primitive, func, predicate_ok=True)
        others = [r for r in writers_in_scope(scope, buffer) if r is not realize]
        if others:
            raise errors.NotSingleWriterError(
                primitive, f'block "{blk.name_hint}" is not the only writer of buffer {buffer.name} '
                f'(also written by {", ".join(repr(r.block.name_hint) for r in others)})',
                func, [blk] + [r.block for r in others])

    new_indices = _mapped(index_map_fn, map_text, realize, primitive, func)
    in_old, in_new = free_vars(old), free_vars(new_indices)
    for iv in blk.iter_vars:
        a_old, a_new = (any(v is iv.var for v in vs) for vs in (in_old, in_new))
        if a_old != a_new:
            where = f"[{', '.join(map(str, old))}]"
            other = f"the index map's [{', '.join(map(str, new_indices))}]"
            raise errors.IndexMapNotMatchError(
                primitive, f'block "{blk.name_hint}": iterator {iv.var.name} appears in '
                f"{where if a_old else other} but not in {other if a_old else where}; the index "
                f"map {map_text} must use exactly the iterators that index buffer {buffer.name}",
                func, [blk])
    used = [iv for iv in blk.iter_vars if any(v is iv.var for v in in_new)]
    if not one_to_one(new_indices, used):
        raise errors.IndexMapNotInjectiveError(
            primitive, f"the index map {map_text} cannot be shown to send different iterations "
            f'of block "{blk.name_hint}" to different elements of the cache', func, [blk])
    if is_read:
        check_in_bounds(old, buffer, used, realize, primitive, func)
    shape = _cache_shape(new_indices, used, map_text, realize, primitive, func)

    cache = buffer.replace(name=fresh_name(f"{buffer.name}_{storage_scope.replace('.', '_')}",
                                           taken_names(func)),
                           shape=shape, scope=storage_scope, strides=(), axis_separators=())
    if is_read:
        avoid = writers_in_scope(scope, buffer)
    else:
        avoid = [r for r in all_blocks_under(scope) if r is not realize and any(
            reg.buffer is buffer for reg in r.block.reads + r.block.writes)]
    site = Site.outermost(scope, realize, avoid)
    if site is None:
        raise errors.StageSiteError(
            primitive, f'block "{blk.name_hint}" shares its innermost loop body with another block '
            f"that uses buffer {buffer.name}; no place separates the copy from it", func, [blk])
    used_values = [v for iv, v in zip(blk.iter_vars, realize.iter_values)
                   if any(iv is u for u in used)]
    loops = [lp for lp in site.inner_loops if uses_var(used_values, lp.loop_var)]
    loop_map = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    var_map = {iv.var: E.Var(iv.var.name, iv.var.dtype) for iv in used}
    old_s = [substitute(i, var_map) for i in old]
    new_s = [substitute(i, var_map) for i in new_indices]
    name = fresh_name(cache.name, set(index.blocks))
    iter_vars = [S.IterVar(var_map[iv.var], iv.dom, "spatial") for iv in used]
    if is_read:
        stage_block = copy_block(name, iter_vars, buffer, old_s, cache, new_s)
    else:
        stage_block = copy_block(name, iter_vars, cache, new_s, buffer, old_s)
    values = tuple(substitute(v, loop_map) for v in used_values)
    stage = wrap_loops(S.BlockRealize(values, _stage_predicate(realize, site, loop_map, primitive,
                                                              func), stage_block),
                       [(loop_map[lp.loop_var], lp.min, lp.extent) for lp in loops])
    new_realize = redirect_block(realize, buffer, cache, new_indices, stores=not is_read)
    new_scope = site.insert(stage, {id(realize): new_realize}, after=not is_read, alloc=cache)
    sch._replace(func_name, {id(scope): new_scope}, primitive)
    return BlockRV(name, func_name)


def _stage_predicate(realize, site, loop_map: dict, primitive: str, func):
    """The block's T.where for the copy, which runs the same bindings over copies of the loops
    in ``loop_map``: it must visit only the iterations the block runs (an overhanging tile would
    otherwise reach past the iterators' domains)."""
    predicate = realize.predicate
    if is_true(predicate):
        return predicate
    inner = {id(lp.loop_var) for lp in site.inner_loops}
    mapped = {id(v) for v in loop_map}
    missing = [v for v in free_vars(predicate) if id(v) in inner and id(v) not in mapped]
    if missing:
        raise errors.ReindexOutOfBoundsError(
            primitive, f'block "{realize.block.name_hint}" runs only where '
            f"T.where({predicate}), which uses loop {missing[0].name} that the copy does not run; "
            "the copy would visit iterations outside the block's domain", func, [realize.block])
    return substitute(predicate, loop_map)


def _mapped(fn, map_text: str, realize, primitive: str, func) -> tuple:
    """The index map applied to the block's iterators, simplified over their domains."""
    import inspect
    blk = realize.block
    try:
        params = inspect.signature(fn).parameters
        arity = len(params)
    except (TypeError, ValueError):
        arity = None
    if arity is not None and arity != len(blk.iter_vars):
        raise errors.IndexMapArityError(
            primitive, f"the index map {map_text} takes {arity} argument(s) but block "
                       f'"{blk.name_hint}" has {len(blk.iter_vars)} iterator(s)', func, [blk])
    dtype = blk.iter_vars[0].var.dtype if blk.iter_vars else "int32"
    out = fn(*[iv.var for iv in blk.iter_vars])
    out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    ranges = {iv.var: iv.dom for iv in blk.iter_vars}
    return tuple(simplify(E.const(o, dtype) if isinstance(o, int) else E.convert(o), ranges)
                 for o in out)


def _cache_shape(indices, used, map_text: str, realize, primitive: str, func) -> tuple:
    """Each index's largest value + 1 over the iterators' domains."""
    ranges = {iv.var: iv.dom for iv in used}
    shape = []
    for idx in indices:
        lo, hi = int_bound(idx, ranges)
        same = next((iv for iv in used if idx is iv.var), None)
        if lo is not None and lo >= 0 and hi is not None:
            shape.append(E.const(hi + 1, idx.dtype))
        elif same is not None and (const_int(same.dom.min) or 0) >= 0:
            shape.append(simplify(same.dom.min + same.dom.extent))
        else:
            raise errors.ReindexOutOfBoundsError(
                primitive, f"the index map {map_text} gives {idx}, which cannot be bounded to a "
                f'non-negative range over the iterators of block "{realize.block.name_hint}"',
                func, [realize.block])
    return tuple(shape)


def _region_text(region) -> str:
    dims = ", ".join(str(r.min) if const_int(r.extent) == 1 else f"{r.min}:{simplify(r.min + r.extent)}"
                     for r in region.region)
    return f"{region.buffer.name}[{dims}]"


__all__ = ["apply_reindex", "apply_reindex_cache"]
