"""Region arithmetic: intervals of buffer elements, relaxing an expression or a region over loop
ranges, narrowing by guards (a block's T.where, an enclosing if), and the predicates a loop range
can satisfy. The access analysis (analysis.py), the lowering passes and the schedule primitives
that move or create blocks (compute_at, cache_read/cache_write, blockize, rfactor) build on it.

Intervals are inclusive and symbolic: loops inside the loop of interest are relaxed over their
ranges, loops outside it stay as variables (so a region under ``i_0`` reads ``A[i_0 * 32 : i_0 *
32 + 34]``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .linear_index import can_prove, relax as _relax_linear, simplify
from ..arith.simplify import Linear, from_linear, linear_form
from . import expr as E
from . import stmt as S
from .stmt_functor import conjuncts, substitute, uses_var


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
    bounds = _relax_linear(expr, relaxed, known)
    if bounds is not None:
        return Interval(*bounds)
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
    return simplify(type(cond)(bounds.lo if isinstance(cond, (E.LT, E.LE)) else bounds.hi, cond.b))


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
        out.append(Interval(*narrowed_by_guards(lo, hi, low.lo, high.hi, guards, relaxed, known)))
    return out


def narrowed_by_guards(lo: E.PrimExpr, hi: E.PrimExpr, low: E.PrimExpr, high: E.PrimExpr, guards,
                       relaxed: dict, known: dict | None = None) -> tuple:
    """``(low, high)``, the relaxed bounds of the expressions ``lo`` and ``hi``, cut to the
    iterations where ``guards`` hold. A guard narrows a side only where that is provable for every
    value of the variables left symbolic, so the region keeps a fixed size (the tile loops stay
    constant)."""
    if not guards:
        return low, high
    low = next((t for t in guarded_bounds(lo, guards, relaxed, known, upper=False)
                if can_prove(t >= low, known) and _fixed_size(t, high, known)), low)
    high = next((t for t in guarded_bounds(hi, guards, relaxed, known, upper=True)
                 if can_prove(t <= high, known) and _fixed_size(low, t, known)), high)
    return low, high


def _fixed_size(low, high, known) -> bool:
    return isinstance(simplify(high - low, known), E.IntImm)


def guarded_bounds(e: E.PrimExpr, guards, relaxed: dict, known: dict | None = None,
                   upper=True) -> list:
    """Upper (or lower) bounds of ``e`` over the iterations where ``guards`` hold: a guard
    ``g < b`` (or ``g >= b``) on relaxed variables whose ``g`` appears in ``e`` scaled by c bounds
    that part by ``c * b``; the rest is relaxed. One bound per guard, and one from all of them
    together. A predicate ``i_0 * 7 + i_2 < 3`` caps ``(i_0 * 7 + i_2) * 7 + j`` at
    ``14 + max(j)``."""
    usable = [_divided(*c) for guard in guards for part in conjuncts(guard) for c in comparisons(part)
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
    narrowed = narrowed_ranges(guards, relaxed, known)
    if narrowed != relaxed:
        interval = relax(e, narrowed, known)
        if interval is not None:
            found.append(simplify(interval.hi if upper else interval.lo, known))
    return found


def narrowed_ranges(guards, relaxed: dict, known: dict | None = None) -> dict:
    """``relaxed`` (Var -> Range) with each variable's range cut to what the guards allow, where
    that is a constant: ``k_0 * 24 + k_1 * 8 + k_2 < 5`` over non-negative ranges leaves
    ``k_1 <= 0``, whichever part of the sum it is."""
    out = dict(relaxed)
    for part in [p for guard in guards for p in conjuncts(guard)]:
        for g, bound, upper in comparisons(part):
            if not uses_var(g, list(relaxed)):
                continue
            for atom, coef in linear_form(g).terms.values():
                if not isinstance(atom, E.Var) or atom not in out or coef <= 0:
                    continue
                rest = relax(simplify(g - atom * E.const(coef, g.dtype)), out, known)
                if rest is None:
                    continue
                c = E.const(coef, g.dtype)
                cut = simplify(E.FloorDiv(bound - rest.lo, c) if upper else
                               E.FloorDiv(bound - rest.hi + c - 1, c), known)
                rng = out[atom]
                lo, hi = rng.min, simplify(rng.min + rng.extent - 1, known)
                if not all(isinstance(x, E.IntImm) for x in (cut, lo, hi)):
                    continue
                was = (lo.value, hi.value)
                lo, hi = (lo.value, min(hi.value, cut.value)) if upper else (max(lo.value, cut.value), hi.value)
                if lo <= hi and (lo, hi) != was:
                    out[atom] = S.Range(E.const(lo, rng.min.dtype), E.const(hi - lo + 1, rng.extent.dtype))
    return out


def _divided(g: E.PrimExpr, bound: E.PrimExpr, upper: bool):
    """``g <= bound`` (or ``>=``) with g's coefficients divided by their common factor d: ``8 * k
    <= 17`` becomes ``k <= 2``, so that the guard bounds ``k`` where it appears alone."""
    lin = linear_form(g)
    d = 0
    for _, coef in lin.terms.values():
        d = math.gcd(d, coef)
    if d <= 1 or lin.const % d:
        return g, bound, upper
    reduced = Linear({key: (atom, coef // d) for key, (atom, coef) in lin.terms.items()}, lin.const // d)
    c = E.const(d, bound.dtype)
    return (from_linear(reduced, g.dtype),
            simplify(E.FloorDiv(bound, c) if upper else E.FloorDiv(bound + c - 1, c)), upper)


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
        if b[0] is not b[1]:
            a, b = b, a
        if b[0] is not b[1]:
            return None
        c = b[0]   # loop-invariant: a constant, or a symbolic factor of known sign
        if can_prove(c >= 0, known):
            return a[0] * c, a[1] * c
        if can_prove(c <= 0, known):
            return a[1] * c, a[0] * c
        return None
    c = b[0]
    if not isinstance(c, E.IntImm) or b[0] is not b[1] or c.value <= 0:
        return None
    if isinstance(e, E.FloorDiv):
        return E.FloorDiv(a[0], c), E.FloorDiv(a[1], c)
    same_period = simplify(E.FloorDiv(a[1], c) - E.FloorDiv(a[0], c), known)
    if isinstance(same_period, E.IntImm) and same_period.value == 0:
        return E.FloorMod(a[0], c), E.FloorMod(a[1], c)
    return E.const(0, e.dtype), E.const(c.value - 1, e.dtype)
