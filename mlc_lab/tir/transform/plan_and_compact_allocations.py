# Moves every alloc_buffer to the lowest loop (or block body) enclosing all its uses, as an Allocate
# there, shrunk to the box it touches under that place. Expects block-form PrimFuncs (after lower_init_block).
from __future__ import annotations

from ...arith import can_prove, simplify
from ...arith.bound import int_bound
from ...arith.simplify import atom_key
from ...arith.simplify_memo import current_memo
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer, storage_rank
from ..function import PrimFunc
from ..functor import StmtExprMutator, StmtExprVisitor
from ..intervals import relax
from ..stmt_functor import free_vars, substitute, uses_var
from .prim_func_pass import is_const, loop_range, prim_func_pass
from .storage_align import aligned_strides, dim_align_requests


@prim_func_pass
def plan_and_compact_allocations(func: PrimFunc) -> PrimFunc:
    """A 1024x1024 ``local`` cache written and read only under an 8x32 tile loop becomes an
    8x32 ``T.allocate`` inside that loop, with every access shifted by the tile's corner."""
    owners = _Owners()
    owners.visit(func.body)
    if not owners.buffers:
        return func
    uses = _UseCollector(owners.buffers)
    uses.visit(func.body)
    plans = {}
    aligns = dim_align_requests(func.body)   # sch.storage_align: padded strides
    for key, (buffer, owner) in owners.buffers.items():
        plan = _plan(buffer, owner, uses.uses.get(key, []), uses.carried.get(key, set()))
        if key in aligns and not buffer.strides:
            plan = _aligned(plan, buffer, owner, aligns[key])
        if plan is not None:
            plans[key] = plan
    return func.replace(body=_Rewrite(plans).visit(func.body)) if plans else func


class _Owners(StmtExprVisitor):
    """id(buffer) -> (buffer, the Block whose alloc_buffers hold it)."""

    def __init__(self):
        self.buffers = {}

    def visit_PrimExpr(self, e):
        pass   # no block inside an expression

    def visit_Block(self, block):
        for buf in block.alloc_buffers:
            self.buffers[id(buf)] = (buf, block)
        self.generic_visit(block)


class _Use:
    """One access: the scopes (For and Block nodes, outermost first) around it, and its box as
    inclusive (lo, hi) per dimension in loop variables (block iterators replaced by bindings), and
    the block predicates that guard it; ``kind`` is "load", "store", "declared" (a block's
    read/write regions) or "match" (a match_buffer view of it)."""
    __slots__ = ("path", "box", "guards", "kind")

    def __init__(self, path, box, guards, kind):
        self.path, self.box, self.guards, self.kind = path, box, guards, kind


class _UseCollector(StmtExprVisitor):
    def __init__(self, targets: dict):
        self.targets = targets
        self.path: list = []
        self.guards: list = []
        self.binding: dict = {}
        self.uses: dict[int, list] = {}
        self.carried: dict[int, set] = {}   # id(buffer) -> ids of loop vars a reduction runs over

    def record(self, buffer, box, kind="declared"):
        if id(buffer) in self.targets:
            box = [(substitute(lo, self.binding), substitute(hi, self.binding)) for lo, hi in box]
            self.uses.setdefault(id(buffer), []).append(_Use(tuple(self.path), box, tuple(self.guards), kind))

    def visit_For(self, loop):
        self.visit(loop.min)
        self.visit(loop.extent)
        self.path.append(loop)
        self.visit(loop.body)
        self.path.pop()

    def visit_LetStmt(self, let):
        self.visit(let.value)
        self.binding[let.var] = substitute(let.value, self.binding)
        self.visit(let.body)

    def visit_BlockRealize(self, realize):
        self.visit(realize.iter_values)
        self.visit(realize.predicate)
        block = realize.block
        values = [substitute(v, self.binding) for v in realize.iter_values]
        saved = dict(self.binding)
        self.binding.update({iv.var: v for iv, v in zip(block.iter_vars, values)})
        self.guards.append(substitute(realize.predicate, saved))
        for region in block.reads + block.writes:   # declared at the block's place, outside it
            self.record(region.buffer, _region_box(region))
        # an opaque iterator (e.g. a rolling buffer's axis) may read what earlier iterations of
        # its loops stored, as a reduction does: the buffer must persist across them too
        reduce_vars = {id(v) for v in free_vars([v for iv, v in zip(block.iter_vars, values)
                                                  if iv.iter_type in ("reduce", "opaque")])}
        for region in block.writes:
            if id(region.buffer) in self.targets and reduce_vars:
                self.carried.setdefault(id(region.buffer), set()).update(reduce_vars)
        self.path.append(block)
        for match in block.match_buffers:
            self.record(match.source.buffer, _region_box(match.source), "match")
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)
        self.path.pop()
        self.guards.pop()
        self.binding = saved

    def visit_BufferLoad(self, load):
        self.record(load.buffer, [(i, i) for i in load.indices], "load")
        self.visit(load.indices)

    def visit_BufferStore(self, store):
        self.record(store.buffer, [(i, i) for i in store.indices], "store")
        self.visit(store.value)
        self.visit(store.indices)


def _region_box(region: S.BufferRegion) -> list:
    return [(r.min, simplify(r.min + r.extent - 1)) for r in region.region]


# ----------------------------------------------------------------------------------------------
# Planning: where each buffer goes and which box it keeps
class _Plan:
    __slots__ = ("old", "new", "offsets", "owner", "place")

    def __init__(self, old, new, offsets, owner, place):
        self.old, self.new, self.offsets, self.owner, self.place = old, new, offsets, owner, place


def _plan(buffer: Buffer, owner: S.Block, uses: list, carried: set):
    if not uses:
        return _Plan(buffer, None, None, owner, None)   # never used: the allocation goes away
    common = list(uses[0].path)
    for use in uses[1:]:
        n = 0
        while n < min(len(common), len(use.path)) and common[n] is use.path[n]:
            n += 1
        common = common[:n]
    if not any(scope is owner for scope in common):
        return None
    owner_at = next(k for k, scope in enumerate(common) if scope is owner)
    common = _lift(common, carried)
    common = common[:_first_loop_reading_earlier_iterations(common, owner_at, uses)]
    # Threads that share the buffer share one copy: it lives outside their loops. In shared
    # memory it holds what all of them touch (those loops relaxed) while loops inside them stay
    # fixed: a tile fetched per step of k holds one step's tile, and barriers keep the block's
    # threads in step. Global memory has no barrier across blocks: every loop inside is relaxed.
    sharing = [s for s in common if isinstance(s, S.For) and _shared_across(s, buffer.scope)]
    placed = common[:common.index(sharing[0])] if sharing else common
    if sharing and storage_rank(buffer.scope) == "global":
        common = placed
    if len(placed) <= owner_at:
        return None   # the place it needs is outside its block: lower_blocks allocates it there
    place = placed[-1]
    known = {s.loop_var: loop_range(s) for s in common
             if isinstance(s, S.For) and not any(s is t for t in sharing)}
    box = _hull(uses, len(common), known, relaxed=sharing)
    shape, offsets = [], []
    for dim, interval in zip(buffer.shape, box):
        extent = None if interval is None or buffer.strides else _extent(interval, known)
        if extent is None or (is_const(dim) and extent.value >= dim.value):
            shape.append(dim)
            offsets.append(E.const(0, dim.dtype))
        else:
            shape.append(E.const(extent.value, dim.dtype))
            offsets.append(interval[0])
    new = buffer.replace(shape=tuple(shape))
    return _Plan(buffer, new, offsets, owner, place)


def _aligned(plan, buffer: Buffer, owner: S.Block, aligns: dict):
    """``plan`` with its (compacted) buffer given the strides storage_align asks for; a buffer
    left where it is gets them too, allocated at its block as lower_blocks would."""
    if plan is None:
        zeros = [E.const(0, d.dtype) for d in buffer.shape]
        plan = _Plan(buffer, buffer, zeros, owner, owner)
    if plan.new is not None:
        # The backends keep every buffer in one block of memory, where axis separators address
        # as row-major does: the aligned strides alone give the layout.
        plan.new = plan.new.replace(strides=aligned_strides(plan.new.shape, aligns),
                                    axis_separators=())
    return plan


def _lift(common: list, carried: set) -> list:
    """The scopes above the allocation, cut above every loop it may not live inside: vectorized
    loops and loops a reduction into it runs over (its value must persist across their
    iterations)."""
    for k, node in enumerate(common):
        if isinstance(node, S.For) and (node.kind == "vectorized" or id(node.loop_var) in carried):
            return common[:k]
    return common


def _first_loop_reading_earlier_iterations(common: list, owner_at: int, uses: list) -> int:
    """The position in ``common`` of the outermost loop below the owner block in one iteration of
    which the buffer is loaded outside the box stored to in that same iteration, or len(common).
    Such loads read what earlier iterations wrote, so the buffer must live outside that loop: a
    copy per iteration would lose those values."""
    loads = [u for u in uses if u.kind == "load"]
    stores = [u for u in uses if u.kind == "store"]
    if not loads or any(u.kind == "match" for u in uses):   # accesses through a view: not tracked
        return len(common)
    for k in range(owner_at + 1, len(common)):
        if not isinstance(common[k], S.For):
            continue
        known = {s.loop_var: loop_range(s) for s in common[:k + 1] if isinstance(s, S.For)}
        loaded, stored = _hull(loads, k + 1, known), _hull(stores, k + 1, known)
        if stored is None or any(
                l is None or s is None or not (can_prove(l[0] >= s[0], known) and can_prove(l[1] <= s[1], known))
                for l, s in zip(loaded, stored)):
            return k
    return len(common)


def _hull(uses: list, depth: int, known: dict, relaxed=()):
    """The union of the uses' boxes with every loop deeper than ``depth`` scopes relaxed, and the
    loops ``relaxed``. A use that repeats another (the same box and guards, structurally, under
    the same relaxed loops: a block's declared region and its store, say) adds nothing."""
    box = None
    memo = current_memo()
    keys = memo.keys if memo is not None else {}
    seen = set()
    for use in uses:
        loops = [s for s in (*use.path[depth:], *relaxed) if isinstance(s, S.For)]
        signature = (tuple(id(s) for s in loops), atom_key(tuple(use.box), keys),
                     atom_key(use.guards, keys))
        if signature in seen:
            continue
        seen.add(signature)
        inner = {s.loop_var: loop_range(s) for s in loops}
        use_box = [_relax_dim(lo, hi, inner, known, use.guards) for lo, hi in use.box]
        box = use_box if box is None else [_union(a, b, known) for a, b in zip(box, use_box)]
    return box


def _shared_across(loop: S.For, scope: str) -> bool:
    if loop.kind != "thread_binding":
        return False
    tag = loop.thread_binding or ""
    scope = storage_rank(scope)
    if scope == "global":
        return True
    if scope in ("shared", "shared.dyn"):
        return tag.startswith(("threadIdx", "vthread"))
    if scope == "warp":
        return tag == "threadIdx.x"
    return False


def _relax_dim(lo, hi, inner: dict, known: dict, guards=()):
    low, high = relax(lo, inner, known), relax(hi, inner, known)
    if low is None or high is None:
        return None
    low, high = low.lo, high.hi
    for bound, is_upper, guarded in _guard_bounds(guards):
        shift = simplify((hi if is_upper else lo) - guarded)
        if uses_var((shift, bound), inner):
            continue
        if is_upper:
            high = simplify(E.Min(high, shift + bound), known)
        else:
            low = simplify(E.Max(low, shift + bound), known)
    if uses_var((low, high), inner):
        return None
    return low, high


def _guard_bounds(guards):
    """(bound, is_upper, e) for each conjunct ``e < b``, ``e <= b``, ``e >= b``, ``e > b`` of the
    guards: ``e`` stays at most (or at least) ``bound``. A predicate ``ax * 128 + tx < 130`` caps an
    index ``base + ax * 128 + tx`` at ``base + 129``, so a padded tile keeps only what it touches."""
    todo = list(guards)
    while todo:
        g = todo.pop()
        if isinstance(g, E.And):
            todo += [g.a, g.b]
        elif isinstance(g, E.LT):
            yield g.b - 1, True, g.a
        elif isinstance(g, E.LE):
            yield g.b, True, g.a
        elif isinstance(g, E.GE):
            yield g.b, False, g.a
        elif isinstance(g, E.GT):
            yield g.b + 1, False, g.a


def _union(a, b, known):
    if a is None or b is None:
        return None
    return simplify(E.Min(a[0], b[0]), known), simplify(E.Max(a[1], b[1]), known)


def _extent(interval, known):
    """The constant size of ``interval`` (an upper bound of it when it varies), or None."""
    extent = simplify(interval[1] - interval[0] + 1, known)
    if not is_const(extent):
        extent = int_bound(extent, known)[1]
        if extent is None:
            return None
        extent = E.const(extent, interval[0].dtype)
    return extent if extent.value > 0 else None


# ----------------------------------------------------------------------------------------------
class _Rewrite(StmtExprMutator):
    def __init__(self, plans: dict):
        super().__init__()
        self.plans = plans
        self.places: dict[int, list] = {}
        for plan in plans.values():
            if plan.place is not None:
                self.places.setdefault(id(plan.place), []).append(plan.new)

    def wrap(self, node, body):
        for buf in reversed(self.places.get(id(node), [])):
            body = S.Allocate(buf, body)
        return body

    def visit_For(self, loop):
        new = self.generic_visit(loop)
        return new.replace(body=self.wrap(loop, new.body)) if id(loop) in self.places else new

    def visit_Block(self, block):
        new = self.generic_visit(block)
        kept = tuple(b for b in new.alloc_buffers if id(b) not in self.plans)
        body = self.wrap(block, new.body)
        if body is new.body and len(kept) == len(new.alloc_buffers):
            return new
        return new.replace(alloc_buffers=kept, body=body)

    def visit_Buffer(self, buffer):
        return buffer   # allocated buffers are swapped at their accesses below

    def shifted(self, buffer, indices):
        plan = self.plans.get(id(buffer))
        if plan is None or plan.new is None:
            return buffer, self.visit(indices)
        return plan.new, tuple(simplify(self.visit(i) - off) if not is_const(off, 0) else self.visit(i)
                               for i, off in zip(indices, plan.offsets))

    def visit_BufferLoad(self, load):
        buffer, indices = self.shifted(load.buffer, load.indices)
        return E.BufferLoad(buffer, indices)

    def visit_BufferStore(self, store):
        buffer, indices = self.shifted(store.buffer, store.indices)
        return S.BufferStore(buffer, self.visit(store.value), indices)

    def visit_BufferRegion(self, region):
        plan = self.plans.get(id(region.buffer))
        if plan is None or plan.new is None:
            return self.generic_visit(region)
        ranges = tuple(S.Range(simplify(r.min - off), r.extent) for r, off in zip(region.region, plan.offsets))
        return S.BufferRegion(plan.new, ranges)
