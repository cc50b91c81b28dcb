"""cache_index: the index arithmetic a block computes from its iterators alone, precomputed into
buffers by blocks placed before it, so the block loads each value instead of computing it.

The candidates are chosen as the reference compiler's common-subexpression rules choose them:
the largest pure computations of each store (those whose use count reaches ``cse_thresh``), a
computation seen too few times giving way to its direct subcomputations, which inherit its
count. Integer computations count as one when they simplify to the same form; float ones only
when they are the same tree (so a replacement never reassociates float arithmetic)."""
from __future__ import annotations

from ....arith import int_bound, simplify
from ....ir import structural_equal
from ...buffer import Buffer, check_scope
from ... import dtype as dt
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import StmtReplacer, free_vars, stores_in, substitute
from .. import errors
from ..rv import BlockRV
from .reindex_stage import check_leaf, fresh_name, point, stmt_path, taken_names

_DIVISIONS = (E.FloorDiv, E.FloorMod, E.Div, E.Mod)


def apply_cache_index(sch, block, storage_scope: str, cse_thresh: int) -> list:
    primitive = "cache_index"
    func_name, realize, index = sch._resolve_block(block, primitive)
    func = sch._func(func_name)
    blk = realize.block
    if not isinstance(cse_thresh, int) or isinstance(cse_thresh, bool) or cse_thresh < 0:
        raise ValueError(f"sch.cache_index: cse_thresh is a non-negative int, got {cse_thresh!r}")
    problem = check_scope(storage_scope)
    if problem:
        raise errors.UnknownStorageScopeError(primitive, problem, func, [blk])
    check_leaf(realize, primitive, func)
    scope = index.parent_block(realize)
    iters = {id(iv.var) for iv in blk.iter_vars}
    chosen = []
    for store in stores_in([blk.init, blk.body]):
        chosen = _choose(store, cse_thresh, iters, chosen)
    if not chosen:
        return []

    binding = {id(iv.var): v for iv, v in zip(blk.iter_vars, realize.iter_values)}
    inside = index.loops_above(realize)
    ranges = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in index.path(realize)
              if isinstance(lp, S.For)}
    taken, block_names = taken_names(func), set(index.blocks)
    stages, loads, names = [], [], []
    for k, expr in enumerate(chosen):
        used = _vars_in_order(expr)
        values = [binding[id(v)] for v in used]
        shape = []
        for v, value in zip(used, values):
            lo, hi = int_bound(value, ranges)
            if lo is None or lo < 0 or hi is None:
                raise errors.ReindexOutOfBoundsError(
                    primitive, f"the binding {value} of iterator {v.name} of block "
                    f'"{blk.name_hint}" cannot be bounded to a non-negative range, so it cannot '
                    "index a buffer of precomputed values", func, [blk])
            shape.append(E.const(hi + 1, value.dtype))
        name = fresh_name(f"index_var_{k}", taken)
        taken.add(name)
        cache = Buffer(name, tuple(shape), expr.dtype, scope=storage_scope)
        loops = [lp for lp in inside if any(_uses(v, lp.loop_var) for v in values)]
        loop_map = {lp.loop_var: E.Var(f"ax{j}", lp.loop_var.dtype) for j, lp in enumerate(loops)}
        new_vars = [E.Var(f"v{j}", v.dtype) for j, v in enumerate(used)]
        iter_vars = [S.IterVar(nv, S.Range(E.const(0, d.dtype), d), "spatial")
                     for nv, d in zip(new_vars, shape)]
        body = S.BufferStore(cache, substitute(expr, dict(zip(used, new_vars))), tuple(new_vars))
        block_name = fresh_name(f"index_{k}", block_names)
        block_names.add(block_name)
        stage_block = S.Block(block_name, tuple(iter_vars), (), (point(cache, new_vars),), body)
        stage = S.BlockRealize(tuple(substitute(v, loop_map) for v in values), E.const(True),
                               stage_block)
        for lp in reversed(loops):
            stage = S.For(loop_map[lp.loop_var], lp.min, lp.extent, "serial", stage)
        stages.append(stage)
        loads.append((expr, E.BufferLoad(cache, tuple(used))))
        names.append(block_name)

    new_realize = realize.replace(block=_rewrite_block(blk, loads))
    body = scope.block.body
    entry = stmt_path(body, realize)[1] if isinstance(body, S.SeqStmt) else body
    new_entry = StmtReplacer({id(realize): new_realize}).visit(entry)
    if isinstance(body, S.SeqStmt):
        items = []
        for item in body.seq:
            items += stages + [new_entry] if item is entry else [item]
        new_body = S.SeqStmt(tuple(items))
    else:
        new_body = S.seq(*stages, new_entry)
    caches = tuple(load.buffer for _, load in loads)
    new_scope = scope.replace(block=scope.block.replace(
        body=new_body, alloc_buffers=scope.block.alloc_buffers + caches))
    sch._replace(func_name, {id(scope): new_scope}, primitive)
    return [BlockRV(n, func_name) for n in names]


def _rewrite_block(blk, loads):
    """The block with each chosen computation in its stores replaced by a load of its buffer,
    and those buffers added to its reads (the block now depends on the precomputing blocks)."""
    def rewrite(stmt):
        for expr, load in loads:
            stmt = _Replace(expr, load).visit(stmt)
        return stmt
    return blk.replace(body=rewrite(blk.body),
                       init=None if blk.init is None else rewrite(blk.init),
                       reads=blk.reads + tuple(point(load.buffer, load.indices) for _, load in loads))


class _Replace(StmtExprMutator):
    """In stores, every expression equivalent to ``expr`` becomes ``load`` (outermost first)."""

    def __init__(self, expr, load):
        super().__init__()
        self.expr, self.load = expr, load

    def visit_BufferStore(self, node):
        indices = tuple(self._expr(i) for i in node.indices)
        value = self._expr(node.value)
        if value is node.value and all(a is b for a, b in zip(indices, node.indices)):
            return node
        return node.replace(value=value, indices=indices)

    def _expr(self, e):
        return _ReplaceExpr(self.expr, self.load).visit(e)


class _ReplaceExpr(StmtExprMutator):
    def __init__(self, expr, load):
        super().__init__()
        self.expr, self.load = expr, load

    def visit(self, node):
        if isinstance(node, E.PrimExpr) and _equivalent(node, self.expr):
            return self.load
        return super().visit(node)

    def visit_Buffer(self, buffer):
        return buffer


# -- choosing the computations --------------------------------------------------------------------
def _choose(store, thresh: int, iters: set, chosen: list) -> list:
    """``chosen`` extended with the computations of ``store`` used at least ``thresh`` times,
    ordered by size (largest first; stable)."""
    table = []                      # [[expr, count]] in order of discovery, syntactic
    for child in (store.value,) + tuple(store.indices):
        _maximal(child, iters, table)
    merged = []                     # equivalent ones merged (the first seen represents them)
    for expr, count in table:
        entry = next((m for m in merged if _equivalent(m[0], expr)), None)
        if entry is None:
            merged.append([expr, count])
        else:
            entry[1] += count
    k = 0
    while k < len(merged):
        expr, count = merged[k]
        if count < thresh:
            for sub in _direct(expr, iters):
                entry = next((m for m in merged if _equivalent(m[0], sub)), None)
                if entry is not None:
                    entry[1] += count
                else:
                    size = _size(sub)
                    at = next((j for j, m in enumerate(merged) if _size(m[0]) < size), len(merged))
                    merged.insert(at, [sub, count])
        k += 1
    out = list(chosen)
    for node in _post_order(store.value):
        for expr, count in merged:
            if count >= thresh and _equivalent(node, expr) and not any(expr is c for c in out):
                out.append(expr)
    return sorted(out, key=lambda e: -_size(e))


def _maximal(e, iters, table) -> None:
    """Count the largest eligible computations in ``e`` into ``table``."""
    if isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
        return
    if _eligible(e, iters):
        entry = next((t for t in table if structural_equal(t[0], e, map_free_vars=False)), None)
        if entry is None:
            table.append([e, 1])
        else:
            entry[1] += 1
        return
    for child in _children(e):
        _maximal(child, iters, table)


def _direct(e, iters) -> list:
    """The eligible computations right below ``e`` (looking through ineligible ones)."""
    out = []

    def visit(x):
        if _eligible(x, iters):
            out.append(x)
        else:
            for child in _children(x):
                visit(child)
    for child in _children(e):
        visit(child)
    return out


def _eligible(e, iters) -> bool:
    """Worth precomputing: pure, more than a leaf, a function of the block's iterators only (at
    least one), and free of integer divisions by a divisor that might be zero (computed where
    the block would not, say under an if_then_else, such a division would fault)."""
    if isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm, E.Ramp, E.Broadcast)):
        return False
    names = free_vars(e)
    if not names or any(id(v) not in iters for v in names):
        return False
    ok = [True]

    def check(x):
        if isinstance(x, E.BufferLoad) or (isinstance(x, E.Call) and x.op not in E.INTRINSICS):
            ok[0] = False
        elif isinstance(x, _DIVISIONS) and dt.is_int(x.dtype) and not (
                isinstance(x.b, E.IntImm) and x.b.value != 0):
            ok[0] = False
        for child in _children(x):
            check(child)
    check(e)
    return ok[0] and _size(e) > 1


def _equivalent(a, b) -> bool:
    if a is b:
        return True
    if a.dtype != b.dtype:
        return False
    if dt.is_int(a.dtype):
        return structural_equal(simplify(a), simplify(b), map_free_vars=False)
    return structural_equal(a, b, map_free_vars=False)


def _children(e) -> list:
    """The expressions directly under ``e`` (a load's indices, not its buffer)."""
    out = []
    for _, value in e.fields():
        items = value if isinstance(value, (tuple, list)) else (value,)
        out += [x for x in items if isinstance(x, E.PrimExpr)]
    return out


def _post_order(e) -> list:
    out = []
    for child in _children(e):
        out += _post_order(child)
    return out + [e]


def _size(e) -> int:
    return len(_post_order(e))


def _vars_in_order(e) -> list:
    out = []
    for node in _post_order(e):
        if isinstance(node, E.Var) and not any(node is v for v in out):
            out.append(node)
    return out


def _uses(e, var) -> bool:
    return any(v is var for v in free_vars(e))


__all__ = ["apply_cache_index"]
