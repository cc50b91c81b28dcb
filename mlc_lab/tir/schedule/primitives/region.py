"""Region inference for the primitives that move or create blocks (compute_at, reverse_compute_at,
cache_read/cache_write): which part of a buffer the blocks under a loop touch, which iterations of
a block cover a required region, and the tree surgery that removes or places a block.

Intervals are inclusive and symbolic: loops inside the loop of interest are relaxed over their
ranges, loops outside it stay as variables (so a region under ``i_0`` reads ``A[i_0 * 32 : i_0 *
32 + 34]``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ....arith import can_prove, simplify
from ....arith.simplify import Linear, from_linear, linear_form
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import conjuncts, substitute, uses_var


@dataclass(frozen=True)
class Interval:
    """The integers ``lo .. hi`` (both inclusive, both expressions)."""
    lo: E.PrimExpr
    hi: E.PrimExpr

    @staticmethod
    def of_range(rng: S.Range) -> "Interval":
        return Interval(rng.min, simplify(rng.min + rng.extent - 1))

    def extent(self, known: dict | None = None) -> E.PrimExpr:
        return simplify(self.hi - self.lo + 1, known)

    def shifted(self, offset: E.PrimExpr) -> "Interval":
        return Interval(simplify(self.lo - offset), simplify(self.hi - offset))


Region = list   # one Interval (or None: "anything") per buffer dimension


# ----------------------------------------------------------------------------------------------
# Relaxing expressions and regions
def relax(expr: E.PrimExpr, relaxed: dict, known: dict | None = None) -> Interval | None:
    """The values of ``expr`` while the variables in ``relaxed`` (Var -> Range) take every value
    of their ranges; the other variables stay symbolic. None when no bound can be expressed.
    ``known`` (Var -> Range) holds the ranges of the symbolic variables, used to simplify."""
    bounds = _relax(simplify(expr), relaxed, known or {})
    if bounds is None:
        return None
    return Interval(simplify(bounds[0], known), simplify(bounds[1], known))


def satisfiable_over(cond: E.PrimExpr, relaxed: dict) -> E.PrimExpr | None:
    """A condition without the variables of ``relaxed`` (Var -> Range) that holds when ``cond``, a
    comparison ``e < b`` (``<=``, ``>``, ``>=``) whose ``b`` does not use them, holds for some of
    their values: ``e`` at its most favourable bound. None for other conditions."""
    if not isinstance(cond, (E.LT, E.LE, E.GT, E.GE)) or uses_var(cond.b, list(relaxed)):
        return None
    bounds = relax(cond.a, relaxed)
    if bounds is None:
        return None
    return type(cond)(bounds.lo if isinstance(cond, (E.LT, E.LE)) else bounds.hi, cond.b)


def constant_on_right(cond: E.PrimExpr) -> E.PrimExpr:
    """``0 < n`` as ``n > 0``: the script parser reads a comparison with a Python number on the
    left as the mirrored one, so IR written this way prints and parses back the same."""
    mirrored = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE}
    if type(cond) in mirrored and isinstance(cond.a, E.IntImm) and not isinstance(cond.b, E.IntImm):
        return mirrored[type(cond)](cond.b, cond.a)
    return cond


def relax_region(region: S.BufferRegion, relaxed: dict, known: dict | None = None,
                 binding: dict | None = None, guards=()) -> Region:
    """``region`` with ``binding`` (block iterator -> value) substituted, relaxed over ``relaxed``;
    ``guards`` (conditions on the loop variables, such as a block's T.where) narrow it."""
    out = []
    for rng in region.region:
        lo, hi = rng.min, rng.min + rng.extent - 1
        if binding:
            lo, hi = substitute(lo, binding), substitute(hi, binding)
        low, high = relax(lo, relaxed, known), relax(hi, relaxed, known)
        if low is None or high is None:
            out.append(None)
            continue
        low, high = low.lo, high.hi
        # A guard narrows a side only where that is provable for every value of the variables
        # left symbolic, so the region keeps a fixed size (the tile loops stay constant).
        low = next((t for t in guarded_bounds(lo, guards, relaxed, known, upper=False)
                    if can_prove(t >= low, known) and _fixed_size(t, high, known)), low)
        high = next((t for t in guarded_bounds(hi, guards, relaxed, known, upper=True)
                     if can_prove(t <= high, known) and _fixed_size(low, t, known)), high)
        out.append(Interval(low, high))
    return out


def _fixed_size(low, high, known) -> bool:
    return isinstance(simplify(high - low, known), E.IntImm)


def guarded_bounds(e: E.PrimExpr, guards, relaxed: dict, known: dict | None = None,
                   upper=True) -> list:
    """Upper (or lower) bounds of ``e`` over the iterations where ``guards`` hold: a guard
    ``g < b`` (or ``g >= b``) on relaxed variables whose ``g`` appears in ``e`` scaled by c bounds
    that part by ``c * b``; the rest is relaxed. One bound per guard, and one from all of them
    together. A predicate ``i_0 * 7 + i_2 < 3`` caps ``(i_0 * 7 + i_2) * 7 + j`` at
    ``14 + max(j)``."""
    usable = [c for guard in guards for part in conjuncts(guard) for c in comparisons(part)
              if c[2] == upper and c[0].dtype == e.dtype and uses_var(c[0], list(relaxed))]
    found = []
    for chosen in [[c] for c in usable] + ([usable] if len(usable) > 1 else []):
        rest, bound_of_parts, used = e, E.const(0, e.dtype), False
        for g, bound, _ in chosen:
            scale = guard_scale(rest, g)
            if scale is not None:
                c = E.const(scale, e.dtype)
                rest, bound_of_parts, used = simplify(rest - g * c, known), bound_of_parts + bound * c, True
        interval = relax(rest, relaxed, known) if used else None
        if interval is not None:
            found.append(simplify(bound_of_parts + (interval.hi if upper else interval.lo), known))
    return found


def guard_scale(e: E.PrimExpr, g: E.PrimExpr) -> int | None:
    """A positive c with ``e = c * g + (terms bounded on their own)``: the ratio of the
    coefficients of g's first term in both (13 for ``e`` = 39 * i_0 + 13 * i_1 + j and ``g`` =
    3 * i_0 + i_1), or None."""
    terms_g, terms_e = linear_form(g).terms, linear_form(e).terms
    if not terms_g:
        return None
    key, (_, coef) = next(iter(terms_g.items()))
    coef_e = terms_e.get(key, (None, 0))[1]
    if coef_e == 0 or coef_e % coef or coef_e // coef <= 0:
        return None
    return coef_e // coef


def comparisons(cond):
    """(g, bound, is_upper) meaning ``g <= bound`` (is_upper) or ``g >= bound``, from one
    comparison (``<``, ``<=``, ``>``, ``>=``, ``==``, or a negated one)."""
    one = lambda x: E.const(1, x.dtype)  # noqa: E731
    if isinstance(cond, E.LT):
        yield cond.a, cond.b - one(cond.b), True
        yield cond.b, cond.a + one(cond.a), False
    elif isinstance(cond, E.LE):
        yield cond.a, cond.b, True
        yield cond.b, cond.a, False
    elif isinstance(cond, E.GT):
        yield cond.a, cond.b + one(cond.b), False
        yield cond.b, cond.a - one(cond.a), True
    elif isinstance(cond, E.GE):
        yield cond.a, cond.b, False
        yield cond.b, cond.a, True
    elif isinstance(cond, E.EQ):
        yield cond.a, cond.b, True
        yield cond.a, cond.b, False
    elif isinstance(cond, E.Not) and isinstance(cond.a, (E.LT, E.LE, E.GT, E.GE)):
        flipped = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}[type(cond.a)]
        yield from comparisons(flipped(cond.a.a, cond.a.b))


def union(a: Interval | None, b: Interval | None, known: dict | None = None) -> Interval | None:
    """The smallest interval holding both (None, "anything", absorbs everything)."""
    if a is None or b is None:
        return None
    return Interval(simplify(E.Min(a.lo, b.lo), known), simplify(E.Max(a.hi, b.hi), known))


def intersect(a: Interval | None, b: Interval | None, known: dict | None = None) -> Interval | None:
    """The integers in both (None, "anything", leaves the other unchanged)."""
    if a is None or b is None:
        return b if a is None else a
    return Interval(simplify(E.Max(a.lo, b.lo), known), simplify(E.Min(a.hi, b.hi), known))


def union_regions(regions: list, known: dict | None = None) -> Region | None:
    """Dimension-wise union of several regions of one buffer; None when there are none."""
    if not regions:
        return None
    out = list(regions[0])
    for region in regions[1:]:
        out = [union(a, b, known) for a, b in zip(out, region)]
    return out


def _relax(e, relaxed: dict, known: dict):
    if not uses_var(e, relaxed):
        return e, e
    if isinstance(e, E.Var):
        rng = relaxed[e]
        return rng.min, rng.min + rng.extent - 1
    if isinstance(e, E.Cast):
        inner = _relax(e.value, relaxed, known)
        return None if inner is None else (E.Cast(e.dtype, inner[0]), E.Cast(e.dtype, inner[1]))
    if not isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)):
        return None
    a, b = _relax(e.a, relaxed, known), _relax(e.b, relaxed, known)
    if a is None or b is None:
        return None
    if isinstance(e, E.Add):
        return a[0] + b[0], a[1] + b[1]
    if isinstance(e, E.Sub):
        return a[0] - b[1], a[1] - b[0]
    if isinstance(e, (E.Min, E.Max)):
        return type(e)(a[0], b[0]), type(e)(a[1], b[1])
    if isinstance(e, E.Mul):
        if not isinstance(b[0], E.IntImm) or b[0] is not b[1]:
            a, b = b, a
        if not isinstance(b[0], E.IntImm) or b[0] is not b[1]:
            return None
        c = b[0]
        return (a[0] * c, a[1] * c) if c.value >= 0 else (a[1] * c, a[0] * c)
    c = b[0]
    if not isinstance(c, E.IntImm) or b[0] is not b[1] or c.value <= 0:
        return None
    if isinstance(e, E.FloorDiv):
        return E.FloorDiv(a[0], c), E.FloorDiv(a[1], c)
    same_period = simplify(E.FloorDiv(a[1], c) - E.FloorDiv(a[0], c), known)
    if isinstance(same_period, E.IntImm) and same_period.value == 0:
        return E.FloorMod(a[0], c), E.FloorMod(a[1], c)
    return E.const(0, e.dtype), E.const(c.value - 1, e.dtype)


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
        for dim, (rng, interval) in enumerate(zip(region.region, need)):
            users = [v for v in iter_vars if uses_var(rng.min, v) or uses_var(rng.extent, v)]
            if not users:
                continue
            pinned = _var_plus_offset(rng.min, iter_vars) if _is_one(rng.extent) else None
            if pinned is None:
                if not cover_all:
                    raise UncoverableRegion(region.buffer, dim)
                for v in users:
                    wanted[id(v)] = None
                continue
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


# ----------------------------------------------------------------------------------------------
# Tree surgery
class _Surgery(StmtExprMutator):
    """Removes one statement (and the loops and sequences it leaves empty) and inserts one
    statement into a loop body, in a single pass."""

    def __init__(self, remove=None, insert=None):
        super().__init__()
        self.remove = remove
        self.insert = insert   # (loop, position, stmt)

    def visit(self, node):
        if node is not None and node is self.remove:
            return None
        return super().visit(node)

    def visit_SeqStmt(self, node):
        items = [self.visit(s) for s in node.seq]
        if all(a is b for a, b in zip(items, node.seq)):
            return node
        kept = [s for s in items if s is not None]
        return S.seq(*kept) if kept else None

    def visit_For(self, node):
        new = self._single_body(node)
        if new is None or self.insert is None or node is not self.insert[0]:
            return new
        _, position, stmt = self.insert
        body = list(new.body.seq) if isinstance(new.body, S.SeqStmt) else [new.body]
        return new.replace(body=S.seq(*body[:position], stmt, *body[position:]))

    def _single_body(self, node):
        body = self.visit(node.body)
        if body is None:
            return None
        return node if body is node.body else node.replace(body=body)

    visit_LetStmt = visit_Allocate = _single_body

    def generic_visit(self, node):
        # Only statements hold the statements to remove or extend; expressions stay as they are.
        return super().generic_visit(node) if isinstance(node, (S.Stmt, S.Block)) else node

    def visit_IfThenElse(self, node):
        then_case = self.visit(node.then_case)
        else_case = self.visit(node.else_case) if node.else_case is not None else None
        if then_case is None and else_case is None:
            return None
        if then_case is None:
            return S.IfThenElse(E.Not(node.condition), else_case)
        if then_case is node.then_case and else_case is node.else_case:
            return node
        return node.replace(then_case=then_case, else_case=else_case)


def remove_and_insert(stmt, remove=None, insert=None):
    """``stmt`` without the statement ``remove`` (plus the loops it leaves empty) and with
    ``insert = (loop, position, new_stmt)`` placed at ``position`` in ``loop``'s body."""
    return _Surgery(remove, insert).visit(stmt)


def loop_children(loop: S.For) -> list:
    """The statements of a loop body, as a list."""
    return list(loop.body.seq) if isinstance(loop.body, S.SeqStmt) else [loop.body]
