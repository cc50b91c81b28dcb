"""The work behind reindex, reindex_cache_read and reindex_cache_write: how a leaf block accesses
one buffer, the copy stage indexed by the block's iterators, where it goes, and the block
rewritten to use the copy."""
from __future__ import annotations

import numpy as np

from ....arith import can_prove, int_bound, simplify
from ....ir import hooks
from ...analysis import expr_deep_equal
from ...buffer import BUFFER_DATA, Buffer
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator, StmtExprVisitor
from ...stmt_functor import StmtReplacer, free_vars, post_order_visit
from .. import errors
from .scope import all_blocks_under, const_int

MAX_ENUMERATED = 1 << 20   # iterator points an index map is evaluated on to prove it one-to-one


# -- how the block accesses the buffer ------------------------------------------------------------
class _Accesses(StmtExprVisitor):
    """Loads and stores of one buffer in a block body; a store is *guarded* when it may not run
    on every iteration (under an if, or a loop that may run zero times)."""

    def __init__(self, buffer):
        self.buffer = buffer
        self.loads, self.stores = [], []     # stores: (BufferStore, guarded)
        self.nested = None
        self.opaque = False
        self.local_vars = []
        self._guard = 0

    def visit_BlockRealize(self, node):
        self.nested = self.nested or node.block

    def visit_Block(self, node):
        self.nested = self.nested or node

    def visit_IfThenElse(self, node):
        self.visit(node.condition)
        self._guard += 1
        self.visit(node.then_case)
        self.visit(node.else_case)
        self._guard -= 1

    def visit_For(self, node):
        self.local_vars.append(node.loop_var)
        self.visit(node.min)
        self.visit(node.extent)
        sure = isinstance(node.extent, E.IntImm) and node.extent.value > 0
        self._guard += not sure
        self.visit(node.body)
        self._guard -= not sure

    def visit_LetStmt(self, node):
        self.local_vars.append(node.var)
        self.generic_visit(node)

    def visit_Let(self, node):
        self.local_vars.append(node.var)
        self.generic_visit(node)

    def visit_Call(self, node):
        if node.op == BUFFER_DATA and any(isinstance(a, E.BufferLoad) and a.buffer is self.buffer
                                          for a in node.args):
            self.opaque = True
        self.generic_visit(node)

    def visit_BufferLoad(self, node):
        if node.buffer is self.buffer:
            self.loads.append(node)
        self.generic_visit(node)

    def visit_BufferStore(self, node):
        if node.buffer is self.buffer:
            self.stores.append((node, self._guard > 0))
        self.generic_visit(node)


def block_accesses(realize, buffer, primitive: str, func) -> _Accesses:
    """The accesses of ``buffer`` in the leaf block of ``realize`` (init included)."""
    block = realize.block
    acc = _Accesses(buffer)
    acc.visit(block.init)
    acc.visit(block.body)
    if acc.nested is not None:
        raise errors.NotLeafBlockError(
            primitive, f'block "{block.name_hint}" holds block "{acc.nested.name_hint}"; '
            f"{primitive} rewrites the accesses of a leaf block only", func, [block])
    if acc.opaque or any(m.source.buffer is buffer for m in block.match_buffers):
        raise errors.OpaqueBufferAccessError(
            primitive, f'block "{block.name_hint}" uses buffer {buffer.name} opaquely (its address '
            "or a match_buffer view), not only through loads and stores", func, [block])
    return acc


def check_leaf(realize, primitive: str, func) -> None:
    """Raise NotLeafBlockError when the block of ``realize`` holds other blocks."""
    block_accesses(realize, None, primitive, func)


def unique_indices(acc: _Accesses, realize, primitive: str, func) -> tuple:
    """The one index tuple every load and store of the buffer uses, simplified over the block's
    iterator domains."""
    block, buffer = realize.block, acc.buffer
    accesses = [load.indices for load in acc.loads] + [store.indices for store, _ in acc.stores]
    if not accesses:
        raise errors.NoBufferAccessError(
            primitive, f'block "{block.name_hint}" lists buffer {buffer.name} in its regions but '
            "never loads or stores it", func, [block])
    first = accesses[0]
    for other in accesses[1:]:
        if not all(expr_deep_equal(a, b) for a, b in zip(first, other)):
            raise errors.NonUniqueAccessError(
                primitive, f'block "{block.name_hint}" accesses buffer {buffer.name} at '
                f"[{_text(first)}] and at [{_text(other)}]; {primitive} needs one index pattern",
                func, [block])
    local = [v for v in free_vars(first) if any(v is w for w in acc.local_vars)]
    if local:
        raise errors.NonUniqueAccessError(
            primitive, f'block "{block.name_hint}" accesses buffer {buffer.name} at '
            f"[{_text(first)}], which depends on {local[0].name}, a variable bound inside the "
            "block, so the element changes within one iteration", func, [block])
    ranges = {iv.var: iv.dom for iv in block.iter_vars}
    return tuple(simplify(i, ranges) for i in first)


def check_in_bounds(indices, buffer, iters, realize, primitive: str, func) -> None:
    """Every index stays inside ``buffer`` over the whole domain of ``iters`` (IterVars)."""
    ranges = {iv.var: iv.dom for iv in iters}
    for dim, (idx, extent) in enumerate(zip(indices, buffer.shape)):
        lo, hi = int_bound(idx, ranges)
        inside = lo is not None and lo >= 0 and (
            (hi is not None and const_int(extent) is not None and hi < const_int(extent))
            or can_prove(idx < extent, ranges))
        same = next((iv for iv in iters if idx is iv.var), None)
        if not inside and same is not None:   # an iterator over a symbolic extent
            room = const_int(simplify(extent - same.dom.min - same.dom.extent))
            low = const_int(same.dom.min)
            inside = low is not None and low >= 0 and room is not None and room >= 0
        if not inside and const_int(extent) is not None:
            values = _evaluated([idx], iters)   # bounds of intervals can be loose: count exactly
            inside = values is not None and (not values[0].size or (
                values[0].min() >= 0 and values[0].max() < const_int(extent)))
        if not inside:
            raise errors.ReindexOutOfBoundsError(
                primitive, f"the copy runs over the whole domain of the iterators of block "
                f'"{realize.block.name_hint}", where index {idx} of buffer {buffer.name} (dimension '
                f"{dim}, extent {extent}) cannot be shown to stay inside the buffer", func,
                [realize.block])


def check_full_write(acc: _Accesses, realize, primitive: str, func, predicate_ok=False) -> None:
    """The block stores the buffer on each iteration it runs, and (unless ``predicate_ok``: the
    copy keeps the T.where) runs on every one it binds."""
    block = realize.block
    if any(guarded for _, guarded in acc.stores):
        raise errors.PartialWriteError(
            primitive, f'block "{block.name_hint}" stores buffer {acc.buffer.name} under a '
            "condition, so some elements of the copy would never be written before it is copied "
            "back", func, [block])
    if not predicate_ok and not is_true(realize.predicate):
        raise errors.PartialWriteError(
            primitive, f'block "{block.name_hint}" runs only where T.where({realize.predicate}) '
            "holds, so some elements of the copy would never be written before it is copied back",
            func, [block])


def check_reads_own_writes(acc: _Accesses, realize, primitive: str, func) -> None:
    """A block whose writes go to a copy may read the buffer only as a reduction whose init
    stores it first (then every read sees the copy's own values)."""
    block = realize.block
    init_stores = block.init is not None and any(
        s.buffer is acc.buffer for s in _stores(block.init))
    if acc.loads and not init_stores:
        raise errors.ReindexReadsWrittenBufferError(
            primitive, f'block "{block.name_hint}" reads buffer {acc.buffer.name}, which it also '
            "writes, without being a reduction whose T.init stores it; it would read the new copy "
            "before anything was stored there", func, [block])


def _stores(stmt) -> list:
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, S.BufferStore) else None)
    return found


# -- building ---------------------------------------------------------------------------------------
def point(buffer, indices) -> S.BufferRegion:
    return S.BufferRegion(buffer, tuple(S.Range(i, E.const(1, i.dtype)) for i in indices))


class Redirect(StmtExprMutator):
    """Loads (and, with ``stores``, stores) of ``old`` become accesses of ``new`` at ``indices``."""

    def __init__(self, old, new, indices, stores: bool):
        super().__init__()
        self.old, self.new, self.indices, self.stores = old, new, tuple(indices), stores

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        if node.buffer is self.old:
            return E.BufferLoad(self.new, self.indices)
        return node

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        if self.stores and node.buffer is self.old:
            return node.replace(buffer=self.new, indices=self.indices)
        return node


def redirect_block(realize, old, new, indices, stores: bool):
    """``realize`` with its block reading (and writing, with ``stores``) ``new`` at ``indices``
    instead of ``old``, its regions of ``old`` replaced by that point of ``new``."""
    block = realize.block
    mutator = Redirect(old, new, indices, stores)
    region = point(new, indices)
    reads = tuple(region if r.buffer is old else r for r in block.reads)
    writes = tuple(region if r.buffer is old else r for r in block.writes)
    init = None if block.init is None else mutator.visit(block.init)
    new_block = block.replace(body=mutator.visit(block.body), init=init, reads=reads, writes=writes)
    return realize.replace(block=new_block)


def copy_block(name, iter_vars, src, src_indices, dst, dst_indices) -> S.Block:
    body = S.BufferStore(dst, E.BufferLoad(src, tuple(src_indices)), tuple(dst_indices))
    return S.Block(name, tuple(iter_vars), (point(src, src_indices),), (point(dst, dst_indices),), body)


def taken_names(func) -> set:
    names = set()
    post_order_visit((func.params, func.body),
                     lambda n: names.add(n.name) if isinstance(n, Buffer) else None)
    return names


def fresh_name(base: str, taken) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


# -- placing the stage ----------------------------------------------------------------------------
def stmt_path(root, target) -> list:
    """Statements from ``root`` down to ``target``, both included ([] when absent); does not enter
    other blocks."""
    if root is target:
        return [root]
    if isinstance(root, S.SeqStmt):
        children = root.seq
    elif isinstance(root, (S.For, S.LetStmt)):
        children = (root.body,)
    elif isinstance(root, S.IfThenElse):
        children = (root.then_case, root.else_case)
    else:
        children = ()
    for child in children:
        rest = stmt_path(child, target) if child is not None else []
        if rest:
            return [root] + rest
    return []


class Site:
    """Where a stage goes in ``scope``'s body: next to ``entry`` (position ``position`` of the
    SeqStmt ``container``, or the whole body when ``container`` is None); ``path`` runs from
    ``entry`` down to the block."""

    def __init__(self, scope, container, position, path):
        self.scope, self.container, self.position, self.path = scope, container, position, path
        self.entry = path[0]

    @property
    def inner_loops(self) -> list:
        return [s for s in self.path if isinstance(s, S.For)]

    @staticmethod
    def outermost(scope, realize, avoid) -> "Site | None":
        """The outermost level whose entry holding ``realize`` holds none of ``avoid``."""
        body = scope.block.body
        path = stmt_path(body, realize)
        levels = [] if isinstance(body, S.SeqStmt) else [(None, 0, path)]
        for k, stmt in enumerate(path[:-1]):
            if isinstance(stmt, S.SeqStmt):
                position = next(i for i, x in enumerate(stmt.seq) if x is path[k + 1])
                levels.append((stmt, position, path[k + 1:]))
        avoid_ids = {id(r) for r in avoid}
        for container, position, rest in levels:
            inside = [rest[0]] + all_blocks_under(rest[0])
            if not any(id(r) in avoid_ids for r in inside):
                return Site(scope, container, position, rest)
        return None

    def insert(self, stage, replacements: dict, after: bool, alloc):
        """The scope's BlockRealize with ``stage`` before/after the entry, ``replacements``
        ({id: stmt}) applied inside the entry, and ``alloc`` allocated in the scope."""
        new_entry = StmtReplacer(replacements).visit(self.entry)
        pair = (new_entry, stage) if after else (stage, new_entry)
        block = self.scope.block
        if self.container is None:
            new_body = S.seq(*pair)
        else:
            items = list(self.container.seq)
            items[self.position:self.position + 1] = pair
            new_body = StmtReplacer({id(self.container): S.SeqStmt(tuple(items))}).visit(block.body)
        return self.scope.replace(block=block.replace(
            body=new_body, alloc_buffers=block.alloc_buffers + (alloc,)))


def wrap_loops(stmt, loops) -> S.Stmt:
    """``stmt`` inside serial loops ``[(var, min, extent)]``, outermost first."""
    for var, lo, extent in reversed(loops):
        stmt = S.For(var, lo, extent, "serial", stmt)
    return stmt


# -- index maps -------------------------------------------------------------------------------------
def one_to_one(indices, iters) -> bool:
    """Whether ``indices`` (in the variables of ``iters``) give different places for different
    points of the iterators' domains: plain distinct iterators, or checked point by point."""
    if all(isinstance(i, E.Var) for i in indices) and len({id(i) for i in indices}) == len(indices) \
            == len(iters):
        return True
    places = _evaluated(indices, iters)
    if places is None:
        return False
    size = int(np.prod([const_int(iv.dom.extent) for iv in iters], dtype=np.int64))
    if not places or size <= 1:
        return size <= 1
    return len(np.unique(np.stack(places, axis=1), axis=0)) == size


def _evaluated(exprs, iters) -> list | None:
    """Each expression's values at every point of the iterators' domains (numpy arrays, one
    entry per point); None when the domains are symbolic or too large, or an expression cannot
    be evaluated so."""
    extents = [const_int(iv.dom.extent) for iv in iters]
    mins = [const_int(iv.dom.min) for iv in iters]
    if None in extents or None in mins or int(np.prod(extents, dtype=np.int64)) > MAX_ENUMERATED:
        return None
    grids = np.meshgrid(*[np.arange(m, m + e, dtype=np.int64) for m, e in zip(mins, extents)],
                        indexing="ij")
    size = int(np.prod(extents, dtype=np.int64))
    env = {iv.var: g.ravel() for iv, g in zip(iters, grids)}
    try:
        evaluator = hooks.need("runtime.evaluator")(env, {})
        return [np.broadcast_to(np.asarray(evaluator.eval(e), np.int64), (size,)) for e in exprs]
    except Exception:  # a variable other than the iterators, a load: not decidable this way
        return None


def is_true(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _text(indices) -> str:
    return ", ".join(str(i) for i in indices)


__all__ = ["Site", "block_accesses", "check_full_write", "check_leaf", "check_in_bounds",
           "check_reads_own_writes",
           "copy_block", "fresh_name", "one_to_one", "point", "redirect_block", "taken_names",
           "unique_indices", "wrap_loops"]
