"""Region cover, one of the facts a ScheduleState caches per block: whether what the producers of
a block write covers what it reads of their buffers, at each loop they share (relaxed over the
loops below it, under-estimating what is written and over-estimating what is read)."""
from __future__ import annotations

from ...arith import can_prove, simplify
from ...arith.simplify import linear_form
from .. import expr as E
from .. import stmt as S
from ..stmt_functor import conjuncts, substitute, uses_var
from .primitives.injective import affine_problem
from ..intervals import Interval, comparisons, relax, relax_region
from .primitives.scope import const_int


def loops_up_to_block(sref) -> list:
    """The loops between ``sref`` and its parent block, outermost first."""
    loops, node = [], sref._parent
    while node is not None and isinstance(node._stmt, S.For):
        loops.append(node._stmt)
        node = node._parent
    return loops[::-1]


_STORAGE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "warp": 2, "local": 3}


def _relaxed_loops(block_sref, lca, scope: str):
    """(relaxed, known): Var -> Range of the loops from the block up to ``lca`` (not included),
    and of the thread loops anywhere above whose threads share a buffer of storage ``scope``
    (threadIdx for shared memory, threadIdx.x for warp memory); and of every other loop and
    block iterator above, which stay symbolic."""
    relaxed, known = {}, {}
    node = block_sref._parent
    while node is not None and node is not lca and isinstance(node._stmt, S.For):
        relaxed[node._stmt.loop_var] = S.Range(node._stmt.min, node._stmt.extent)
        node = node._parent
    rank = _STORAGE_RANK.get(scope, 9)
    while node is not None:
        stmt = node._stmt
        if isinstance(stmt, S.For):
            rng = S.Range(stmt.min, stmt.extent)
            tag = stmt.thread_binding or ""
            thread_rank = 0 if tag.startswith("blockIdx") else 1 if tag.startswith(("threadIdx", "vthread")) else None
            shares = stmt.kind == "thread_binding" and rank != 0 and thread_rank is not None and (
                (tag == "threadIdx.x") if rank == 2 else rank <= thread_rank)
            (relaxed if shares else known)[stmt.loop_var] = rng
        elif isinstance(stmt, S.Block):
            known.update({iv.var: iv.dom for iv in stmt.iter_vars})
        node = node._parent
    return relaxed, known


def read_upper_bound(region, realize, block_sref, lca) -> list:
    """What ``region`` of the block may touch over the loops below ``lca``: an Interval (or None,
    anything) per dimension."""
    relaxed, known = _relaxed_loops(block_sref, lca, region.buffer.scope)
    binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    return relax_region(region, relaxed, known, binding, guards=(realize.predicate,))


def written_lower_bound(region, realize, block_sref, lca) -> list | None:
    """What ``region`` of the block surely touches over the loops below ``lca``: an Interval per
    dimension, or None when that cannot be shown (then nothing counts as written).

    The hull of the relaxed region is all written when the bindings are affine (each iterator
    takes every value of its relaxed range), each dimension's start is a sum of multiples of
    iterators no other dimension uses, and each multiple steps by at most what the terms below
    it span (a mixed radix, possibly overlapping); a T.where may only bound a whole index."""
    block = realize.block
    relaxed, known = _relaxed_loops(block_sref, lca, region.buffer.scope)
    loops = [lp for lp in loops_up_to_block(block_sref) if lp.loop_var in relaxed]
    if affine_problem(realize, loops) is not None:
        return None
    binding = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    spans = {}
    for iv, value in binding.items():
        interval = relax(value, relaxed, known)
        size = None if interval is None else const_int(simplify(interval.hi - interval.lo + 1, known))
        if size is None:
            return None
        spans[id(iv)] = size
    users: dict = {}
    for dim, rng in enumerate(region.region):
        extent = const_int(simplify(rng.extent, known))
        if extent is None or extent < 1:
            return None
        terms = []
        for atom, coef in linear_form(rng.min).terms.values():
            if isinstance(atom, E.Var) and id(atom) in spans:
                if spans[id(atom)] > 1:
                    if users.setdefault(id(atom), dim) != dim:
                        return None
                    terms.append((abs(coef), spans[id(atom)]))
            elif any(uses_var(atom, iv) for iv in binding):
                return None
        covered = extent
        for coef, size in sorted(terms):
            if coef > covered:
                return None
            covered += coef * (size - 1)
    hull = relax_region(region, relaxed, known, binding)
    if any(h is None for h in hull):
        return None
    for cond in conjuncts(realize.predicate):
        if isinstance(cond, E.IntImm) or not uses_var(cond, list(relaxed)):
            continue
        hull = _narrowed_by(cond, hull, region, binding, relaxed, known)
        if hull is None:
            return None
    return hull


def _narrowed_by(cond, hull: list, region, binding: dict, relaxed: dict, known: dict) -> list | None:
    """``hull`` cut by the T.where conjunct ``cond``, which must bound one dimension's whole
    index (up to terms of loops not relaxed): a single-element dimension whose index, over the
    relaxed loops, is the compared expression. None otherwise."""
    def relaxed_part(e):
        return {key: coef for key, (atom, coef) in linear_form(e).terms.items()
                if uses_var(atom, list(relaxed))}
    found = False
    for g, bound, upper in comparisons(cond):
        if not uses_var(g, list(relaxed)):
            continue
        for dim, rng in enumerate(region.region):
            if const_int(rng.extent) != 1:
                continue
            index = simplify(substitute(rng.min, binding))
            if relaxed_part(index) != relaxed_part(g) or not relaxed_part(g):
                continue
            limit = simplify(bound + (index - g), known)   # index - g uses no relaxed loop
            old = hull[dim]
            hull = list(hull)
            hull[dim] = Interval(old.lo, simplify(E.Min(old.hi, limit), known)) if upper else \
                Interval(simplify(E.Max(old.lo, limit), known), old.hi)
            found = True
    return hull if found else None


def covers(buffer, written: list, consumed: list) -> bool:
    """Whether the union of the ``written`` regions (each per dimension, None: nothing known)
    contains ``consumed``, both cut to the buffer's bounds. As the reference compiler does, the
    union is taken dimension by dimension; intervals that touch merge."""
    if any(w is None for w in written):
        written = [w for w in written if w is not None]
        if not written:
            return False
    for dim, extent in enumerate(buffer.shape):
        inside = Interval(E.const(0, extent.dtype), simplify(extent - 1))
        pieces = [_clip(w[dim], inside) for w in written]
        merged = True
        while merged and len(pieces) > 1:
            merged = False
            for a in range(len(pieces)):
                for b in range(a + 1, len(pieces)):
                    p, q = pieces[a], pieces[b]
                    if can_prove(p.lo <= q.hi + 1) and can_prove(q.lo <= p.hi + 1):
                        pieces[a] = Interval(simplify(E.Min(p.lo, q.lo)), simplify(E.Max(p.hi, q.hi)))
                        del pieces[b]
                        merged = True
                        break
                if merged:
                    break
        need = _clip(consumed[dim] if consumed[dim] is not None else inside, inside)
        if not any(can_prove(p.lo <= need.lo) and can_prove(need.hi <= p.hi) for p in pieces):
            return False
    return True


def _clip(interval: Interval, inside: Interval) -> Interval:
    return Interval(simplify(E.Max(interval.lo, inside.lo)), simplify(E.Min(interval.hi, inside.hi)))
