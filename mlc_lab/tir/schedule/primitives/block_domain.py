"""Where blocks go when compute_at, reverse_compute_at and cache_read/cache_write move or create
them: the part of a buffer the blocks under a loop touch, and the iterations of a block that cover
a required region (with the predicate that keeps an overhanging tile inside its domain).
The interval arithmetic lives in region.py.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...linear_index import can_prove, simplify
from ....arith.simplify import Linear, from_linear, is_multiple_of, linear_form
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import substitute, uses_var
from ...intervals import Interval, Region, intersect, relax, relax_region, union, union_regions


# ----------------------------------------------------------------------------------------------
# Regions touched under a loop
def loops_between(index, stmt, outer: S.For) -> list:
    """The loops strictly inside ``outer`` that enclose ``stmt``, outermost first."""
    path = index.path(stmt)
    position = next(k for k, anc in enumerate(path) if anc is outer)
    return [anc for anc in path[position + 1:] if isinstance(anc, S.For)]


def enclosing_ranges(index, loop: S.For) -> dict:
    """Var -> Range of ``loop`` and every loop around it (the variables that stay symbolic)."""
    loops = [anc for anc in index.path(loop) if isinstance(anc, S.For)] + [loop]
    return {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops}


_STORAGE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "warp": 2, "local": 3}


def shared_by_threads(index, loop: S.For, scope: str) -> dict:
    """Var -> Range of the thread-bound loops (``loop`` and those around it) whose threads all see
    one copy of a buffer in storage ``scope``: threadIdx/vthread loops for shared memory,
    threadIdx.x for warp memory, none for global and local buffers. A buffer computed under
    such a loop must hold what every one of those threads needs."""
    rank = _STORAGE_RANK.get(scope, 0)
    if rank in (0, 3):
        return {}
    out = {}
    for lp in [anc for anc in index.path(loop) if isinstance(anc, S.For)] + [loop]:
        tag = lp.thread_binding or ""
        if lp.kind != "thread_binding" or tag.startswith("blockIdx"):
            continue
        if rank == 2 and tag != "threadIdx.x":
            continue
        out[lp.loop_var] = S.Range(lp.min, lp.extent)
    return out


def accessed_region(index, loop: S.For, realizes, buffer, writes: bool = False,
                    known: dict | None = None, also_relax: dict | None = None) -> Region | None:
    """The part of ``buffer`` that the given blocks (all under ``loop``) read, or write when
    ``writes``, over all iterations of the loops inside ``loop`` (and of the loops in
    ``also_relax``, Var -> Range); None when none of the blocks touches it."""
    known = enclosing_ranges(index, loop) if known is None else known
    found = []
    for realize in realizes:
        block = realize.block
        binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
        relaxed = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops_between(index, realize, loop)}
        relaxed.update(also_relax or {})
        for region in (block.writes if writes else block.reads):
            if region.buffer is buffer:
                found.append(relax_region(region, relaxed, known, binding, [realize.predicate]))
    return union_regions(found, known)


# ----------------------------------------------------------------------------------------------
# From a required region to the iterations of a block
@dataclass(frozen=True)
class IterDomain:
    """Where one block iterator must run: ``min + ax`` for ax in ``range(extent)``. ``low`` and
    ``high`` are the iterator's own bounds when a value may fall below / above them (the new
    block then gets a predicate), else None."""
    min: E.PrimExpr
    extent: E.PrimExpr
    low: E.PrimExpr | None = None
    high: E.PrimExpr | None = None

    def guard(self, value: E.PrimExpr) -> list:
        """The conditions that keep ``value`` inside the iterator's domain."""
        return ([value >= self.low] if self.low is not None else []) + \
               ([value < simplify(self.high + 1)] if self.high is not None else [])


class UncoverableRegion(Exception):
    """No range of block iterations covers a required region (see block_var_domains)."""

    def __init__(self, buffer, dim: int):
        super().__init__(f"dimension {dim} of buffer {buffer.name}")
        self.buffer, self.dim = buffer, dim


def block_var_domains(block: S.Block, provided, required: dict, known: dict,
                      cover_all: bool = True) -> list:
    """The IterDomain of each iterator of ``block`` so that it covers ``required``.

    ``provided`` are the block's own regions (in its iterators) of the buffers in ``required``
    (id(buffer) -> Region). A dimension indexed by ``v + offset`` asks iterator ``v`` to cover
    the required interval shifted by ``offset``; iterators that no dimension pins down run over
    their whole domain. When several dimensions pin one iterator, ``cover_all`` takes the union
    of their intervals (a producer must write everything any consumer reads), otherwise the
    intersection (a consumer may only read what every producer wrote), and then a dimension that
    is not a single element per iteration cannot be covered: UncoverableRegion.
    The result is clipped to each iterator's domain when that can be proved to give a constant
    extent, and otherwise keeps the region with a predicate for the sides that may overhang.
    """
    wanted: dict[int, Interval | None] = {}
    iter_vars = [iv.var for iv in block.iter_vars]
    for region in provided:
        need = required.get(id(region.buffer))
        if need is None:
            continue
        if not cover_all and not all(_is_one(r.extent) and _var_plus_offset(r.min, iter_vars)
                                     for r in region.region
                                     if any(uses_var(r.min, v) for v in iter_vars)):
            read_back = _read_back(block, region, need, known)
            if read_back is None:
                read_back = _read_windows(block, region, need, known)
            if read_back is None:
                dim = next(d for d, r in enumerate(region.region)
                           if not (_is_one(r.extent) and _var_plus_offset(r.min, iter_vars)))
                raise UncoverableRegion(region.buffer, dim)
            for var, interval in read_back.items():
                wanted[id(var)] = interval if id(var) not in wanted else \
                    intersect(wanted[id(var)], interval, known)
            continue
        for dim, (rng, interval) in enumerate(zip(region.region, need)):
            users = [v for v in iter_vars if uses_var(rng.min, v) or uses_var(rng.extent, v)]
            if not users:
                # Every iteration reads the same range here: a consumer may only if all of it
                # is in the box made (a blockized consumer reading a whole row, under a loop
                # that makes one element of it, may not).
                if not cover_all and (interval is None or not (
                        can_prove(rng.min >= interval.lo, known)
                        and can_prove(rng.min + rng.extent - 1 <= interval.hi, known))):
                    raise UncoverableRegion(region.buffer, dim)
                continue
            pinned = _var_plus_offset(rng.min, iter_vars) if _is_one(rng.extent) else None
            tile = _tile(rng, iter_vars) if pinned is None and cover_all else None
            if pinned is None and tile is None:
                if not cover_all:
                    raise UncoverableRegion(region.buffer, dim)
                for v in users:
                    wanted[id(v)] = None
                continue
            if tile is not None:
                var, shifted = tile[0], None if interval is None else _tiles_touching(interval, *tile[1:])
            else:
                var, offset = pinned
                shifted = None if interval is None else interval.shifted(offset)
            if id(var) not in wanted:
                wanted[id(var)] = shifted
            elif cover_all:
                wanted[id(var)] = union(wanted[id(var)], shifted, known)
            else:
                wanted[id(var)] = intersect(wanted[id(var)], shifted, known)
    return [_clip(wanted.get(id(iv.var)), iv, known) for iv in block.iter_vars]


def uncovered_iterator(block: S.Block, domains: list, relaxed: dict, known: dict):
    """The first iterator of ``block`` whose IterDomain, taken over every value of the loops in
    ``relaxed`` (Var -> Range), is not provably all of the iterator's domain; None when each one
    is. (A union of per-iteration ranges is checked at its ends only.)"""
    for iv, dom in zip(block.iter_vars, domains):
        full = Interval.of_range(iv.dom)
        low = relax(dom.min, relaxed, known)
        high = relax(simplify(dom.min + dom.extent - 1, known), relaxed, known)
        if low is None or high is None or not (can_prove(low.lo <= full.lo, known)
                                               and can_prove(high.hi >= full.hi, known)):
            return iv
    return None


def _clip(interval: Interval | None, iv: S.IterVar, known: dict) -> IterDomain:
    full = Interval.of_range(iv.dom)
    if interval is None:
        return IterDomain(iv.dom.min, iv.dom.extent)
    lo = simplify(E.Max(interval.lo, full.lo), known)
    hi = simplify(E.Min(interval.hi, full.hi), known)
    extent = simplify(hi - lo + 1, known)
    if isinstance(extent, E.IntImm) and not isinstance(lo, E.Max) and not isinstance(hi, E.Min):
        return IterDomain(lo, extent)
    # A side needs a guard unless it provably stays inside the domain: the clipped bound folding
    # to a plain expression says nothing (Min(n_0, 0) folds to 0 when n_0 >= 0, yet n_0 > 0
    # overhangs).
    return IterDomain(interval.lo, interval.extent(known),
                      None if can_prove(interval.lo >= full.lo, known) else full.lo,
                      None if can_prove(interval.hi <= full.hi, known) else full.hi)


def _is_one(e) -> bool:
    e = simplify(e)
    return isinstance(e, E.IntImm) and e.value == 1


def _var_plus_offset(e, iter_vars):
    """(v, offset) when ``e`` is ``v + offset`` with offset free of the iterators; else None."""
    lin = linear_form(simplify(e))
    var, rest = None, dict(lin.terms)
    for key, (atom, coef) in lin.terms.items():
        if any(atom is v for v in iter_vars):
            if coef != 1 or var is not None:
                return None
            var = atom
            del rest[key]
    if var is None or any(uses_var(atom, iter_vars) for atom, _ in rest.values()):
        return None
    offset = from_linear(Linear(rest, lin.const), var.dtype)
    return var, offset


def _read_back(block: S.Block, region: S.BufferRegion, need, known: dict) -> dict | None:
    """Var -> Interval: the iterations of ``block`` that read, through ``region`` (one element
    per iteration at indices such as ``[v // 16, v % 16]``), exactly the elements of the box
    ``need``; None unless that set is provably a box of iterations. The indices are inverted
    (inline_affine.invert): each element of the box is read by one iteration, so when the box
    holds as many elements as the box of iterations its inverse spans, those iterations are it."""
    from .inline_affine import invert   # inline_affine builds on this module's neighbours
    if any(r is None or not _is_one(rng.extent) for r, rng in zip(need, region.region)):
        return None
    inverse, _ = invert([rng.min for rng in region.region], block.iter_vars)
    if inverse is None:
        return None
    extents = [simplify(r.extent(known), known) for r in need]
    if not all(isinstance(e, E.IntImm) for e in extents):
        return None
    xs = [E.Var(f"x{d}", rng.min.dtype) for d, rng in enumerate(region.region)]
    box = {x: S.Range(r.lo, e) for x, r, e in zip(xs, need, extents)}
    mapping, conds = inverse.apply(xs)
    scope = {**known, **box}
    for cond in conds:
        low = relax(cond.a, box, known)
        if low is None or not can_prove(type(cond)(low.lo, cond.b), known) \
                or not can_prove(type(cond)(low.hi, cond.b), known):
            return None
    out, count = {}, 1
    for e in extents:
        count *= e.value
    spanned = 1
    for iv in block.iter_vars:
        value = mapping.get(iv.var)
        if value is None:
            return None
        interval = relax(simplify(value, scope), box, known)
        if interval is None:
            return None
        size = simplify(interval.hi - interval.lo + 1, known)
        if not isinstance(size, E.IntImm):
            return None
        spanned *= size.value
        out[iv.var] = interval
    return out if spanned == count else None


def _read_windows(block: S.Block, region: S.BufferRegion, need, known: dict) -> dict | None:
    """Var -> Interval: for a block reading windows side by side, the iterations whose windows lie
    in the box ``need``; None when the block does not read so or the box's edges may cut a window.
    A dimension is either ``v + offset`` or, for a pooling, ``c * v + r + offset`` with ``r`` a
    reduce iterator over [0, c) used in no other dimension: iteration v reads the window ``[c * v
    + offset, c * v + offset + c)``. With the box's edges on window edges (provably), the
    iterations whose windows it holds are a box of iterations, each reading only elements in it."""
    iterators = {id(iv.var): iv for iv in block.iter_vars}
    found, seen = {}, set()
    for rng, interval in zip(region.region, need):
        if interval is None or not _is_one(rng.extent):
            return None
        lin = linear_form(simplify(rng.min))
        mine, rest = [], {}
        for key, (atom, coef) in lin.terms.items():
            bare = atom.value if isinstance(atom, E.Cast) and isinstance(atom.value, E.Var) else atom
            if id(bare) in iterators:
                mine.append((iterators[id(bare)], coef))
            else:
                rest[key] = (atom, coef)
        if any(uses_var(atom, [iv.var for iv in block.iter_vars]) for atom, _ in rest.values()):
            return None
        offset = from_linear(Linear(rest, lin.const), rng.min.dtype)
        if not mine:   # one element for every iteration: it must be in the box
            if not (can_prove(offset >= interval.lo, known) and can_prove(offset <= interval.hi, known)):
                return None
            continue
        spatial = [(iv, c) for iv, c in mine if iv.iter_type == "spatial"]
        windows = [(iv, c) for iv, c in mine if iv.iter_type != "spatial"]
        if len(spatial) != 1 or len(windows) > 1 or id(spatial[0][0].var) in found:
            return None
        (iv, c), = spatial
        if windows:
            r, unit = windows[0]
            if unit != 1 or id(r.var) in seen or not _is_const(r.dom.min, 0) \
                    or not _is_const(r.dom.extent, c):
                return None
            seen.add(id(r.var))
        elif c != 1:
            return None
        if c < 1 or not (is_multiple_of(simplify(interval.lo - offset, known), c)
                         and is_multiple_of(simplify(interval.hi + 1 - offset, known), c)):
            return None
        width = E.const(c, offset.dtype)
        found[id(iv.var)] = (iv.var, Interval(
            simplify(E.FloorDiv(interval.lo - offset, width), known),
            simplify(E.FloorDiv(interval.hi + 1 - offset, width) - 1, known)))
    if any(iv.iter_type != "spatial" and uses_var(rng.min, iv.var) and id(iv.var) not in seen
           for iv in block.iter_vars for rng in region.region):
        return None
    return dict(found.values())


def _is_const(e, value: int) -> bool:
    e = simplify(e)
    return isinstance(e, E.IntImm) and e.value == value


def _tile(rng: S.Range, iter_vars):
    """(v, c, offset, e) when the range is ``c * v + offset`` for ``e`` elements (c a non-zero
    and e a positive constant, offset free of the iterators): iteration v touches a tile (``Y[9 -
    v]`` is one with c = -1); else None."""
    extent = simplify(rng.extent)
    lin = linear_form(simplify(rng.min))
    found = [(atom, coef) for atom, coef in lin.terms.values() if any(atom is v for v in iter_vars)]
    if not isinstance(extent, E.IntImm) or extent.value < 1 or len(found) != 1 or found[0][1] == 0:
        return None
    (var, coef), = found
    rest = {k: t for k, t in lin.terms.items() if t[0] is not var}
    if any(uses_var(atom, iter_vars) for atom, _ in rest.values()):
        return None
    return var, coef, from_linear(Linear(rest, lin.const), var.dtype), extent.value


def _tiles_touching(interval: Interval, coef: int, offset: E.PrimExpr, size: int) -> Interval:
    """The iterations v whose tile ``[coef * v + offset, coef * v + offset + size)`` meets
    ``interval``: a producer written in tiles must run each tile holding a required element."""
    c = E.const(abs(coef), offset.dtype)
    if coef > 0:
        return Interval(simplify(E.FloorDiv(interval.lo - offset - (size - coef), c)),
                        simplify(E.FloorDiv(interval.hi - offset, c)))
    return Interval(simplify(E.FloorDiv(offset - interval.hi + (-coef - 1), c)),
                    simplify(E.FloorDiv(offset + size - 1 - interval.lo, c)))


def predicate_in_iterators(realize: S.BlockRealize, gone) -> E.PrimExpr | None:
    """The block's own ``T.where`` written in its iterators instead of the loop variables in
    ``gone`` (the loops it leaves when it moves); None when one of them cannot be eliminated.

    A loop variable is solved from a binding that uses it with coefficient +-1 (``vk = k_1``,
    ``vi = i_0 * 4 + i_1``), so the predicate of a split (``i_0 * 4 + i_1 < 10``) becomes one on
    the iterator (``vi < 10``) and that of an rfactor (``k_0 * 3 + k_1 < 10``) one on its
    iterators (``vk_0 * 3 + vk_1 < 10``)."""
    predicate = realize.predicate
    pending = [(iv.var, value) for iv, value in zip(realize.block.iter_vars, realize.iter_values)]
    while uses_var(predicate, gone):
        solved = next(((k, sol) for k, (var, value) in enumerate(pending)
                       for sol in [_solve_for_loop_var(var, value, predicate, gone)] if sol), None)
        if solved is None:
            return None
        k, (loop_var, expr) = solved
        pending.pop(k)
        predicate = simplify(substitute(predicate, {loop_var: expr}))
    return predicate


def _solve_for_loop_var(var: E.Var, value: E.PrimExpr, predicate, gone):
    """(l, expr) with ``l`` a loop variable of ``gone`` that ``predicate`` uses and ``var ==
    value`` solved for it (``l == expr``); None when ``value`` has no such term of coefficient
    +-1."""
    lin = linear_form(simplify(value))
    for key, (atom, coef) in lin.terms.items():
        if isinstance(atom, E.Var) and coef in (1, -1) and uses_var(atom, gone) \
                and uses_var(predicate, atom):
            rest = dict(lin.terms)
            del rest[key]
            expr = (var - from_linear(Linear(rest, lin.const), var.dtype)) * coef
            return atom, simplify(expr)
    return None


def realize_over(block: S.Block, domains: list, preserve_unit_loops: bool, known: dict,
                 predicate: E.PrimExpr | None = None) -> S.Stmt:
    """``block`` bound to new loops ``ax0, ax1, ...`` that run over ``domains``, outermost first;
    an iterator whose domain has extent 1 gets no loop unless ``preserve_unit_loops``.
    ``predicate``, written in the block's iterators, is kept on top of the domain guards."""
    loops, values, conditions = [], [], []
    ranges = dict(known)
    # A variable of extent 1 takes one value: the binding says so (``T.axis.spatial(1, 0)``).
    unit = {v: r.min for v, r in known.items() if _is_one(r.extent)}
    domains = [replace(d, min=simplify(substitute(d.min, unit), ranges)) if unit else d
               for d in domains]
    for iv, dom in zip(block.iter_vars, domains):
        dtype = iv.var.dtype
        if preserve_unit_loops or not _is_one(dom.extent):
            var = E.Var(f"ax{len(loops)}", dtype)
            loops.append((var, dom.extent))
            ranges[var] = S.Range(E.const(0, dtype), dom.extent)
            value = simplify(dom.min + var, ranges)
        else:
            value = simplify(dom.min, ranges)
        values.append(value)
        conditions += dom.guard(value)
    if predicate is not None and not _is_true(predicate):
        conditions.append(substitute(predicate, {iv.var: v for iv, v in zip(block.iter_vars, values)}))
    predicate = E.const(True)
    for cond in conditions:
        predicate = cond if _is_true(predicate) else predicate & cond
    stmt = S.BlockRealize(tuple(values), simplify(predicate, ranges), block)
    for var, extent in reversed(loops):
        stmt = S.For(var, E.const(0, var.dtype), extent, "serial", stmt)
    return stmt


def _is_true(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1
