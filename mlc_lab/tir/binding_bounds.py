# Exact ranges of block bindings over constant-range loops, for verify's binding rule: interval
# arithmetic on bindings that use each loop variable once, with loop ranges narrowed by predicates.
from __future__ import annotations

from typing import Optional

from . import dtype as dt
from . import expr as E
from .stmt_functor import post_order_visit


def narrowed_by(predicate: E.PrimExpr, loop_ranges: dict) -> Optional[dict]:
    """The loop ranges left once ``predicate`` holds, or None when the predicate may guard in
    ways not tracked here. Tracked: a conjunction of ``loop var < c`` (<=, >, >=) terms."""
    if isinstance(predicate, E.IntImm):
        return loop_ranges if predicate.value else None
    ranges = dict(loop_ranges)
    terms = [predicate]
    while terms:
        term = terms.pop()
        if isinstance(term, E.And):
            terms += [term.a, term.b]
            continue
        if not (isinstance(term, (E.LT, E.LE, E.GT, E.GE)) and isinstance(term.a, E.Var)
                and isinstance(term.b, E.IntImm) and id(term.a) in ranges):
            return None
        lo, hi = ranges[id(term.a)]
        c = term.b.value
        if isinstance(term, (E.LT, E.LE)):
            hi = min(hi, c - 1 if isinstance(term, E.LT) else c)
        else:
            lo = max(lo, c + 1 if isinstance(term, E.GT) else c)
        if lo > hi:
            return None   # the block never runs: nothing to check
        ranges[id(term.a)] = (lo, hi)
    return ranges


def value_bounds(value: E.PrimExpr, loop_ranges: dict) -> Optional[tuple[int, int]]:
    """Exact (min, max) of an integer binding over constant-range loops, or None when unknown.

    Only expressions that use each loop variable once are handled: then the terms vary
    independently, and +, -, * by a constant, and floordiv/floormod by a positive constant
    give exact bounds by interval arithmetic.
    """
    uses: dict[int, int] = {}

    def count(node):
        if isinstance(node, E.Var):
            uses[id(node)] = uses.get(id(node), 0) + 1
    post_order_visit(value, count)
    if any(n > 1 for n in uses.values()):
        return None
    result = _interval(value, loop_ranges)
    return None if result is None else result[:2]


def _interval(e: E.PrimExpr, ranges: dict) -> Optional[tuple[int, int, bool]]:
    """(min, max, dense) where ``dense`` says every integer in between is taken."""
    if isinstance(e, E.IntImm):
        return e.value, e.value, True
    if isinstance(e, E.Var):
        r = ranges.get(id(e))
        return None if r is None else (r[0], r[1], True)
    if isinstance(e, E.Cast):
        return _interval(e.value, ranges) if dt.is_int(e.dtype) else None
    if not isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod)):
        return None
    a, b = _interval(e.a, ranges), _interval(e.b, ranges)
    if a is None or b is None:
        return None
    if isinstance(e, E.Add):
        return a[0] + b[0], a[1] + b[1], a[2] and b[2]
    if isinstance(e, E.Sub):
        return a[0] - b[1], a[1] - b[0], a[2] and b[2]
    if isinstance(e, E.Mul):
        if b[0] != b[1]:
            a, b = b, a
        if b[0] != b[1]:
            return None
        c = b[0]
        lo, hi = sorted((a[0] * c, a[1] * c))
        return lo, hi, a[2] and abs(c) <= 1
    c = b[0]
    if b[0] != b[1] or c <= 0:
        return None
    if isinstance(e, E.FloorDiv):
        return a[0] // c, a[1] // c, a[2]
    if a[0] // c == a[1] // c:
        return a[0] % c, a[1] % c, a[2]
    if not a[2]:
        return None
    return 0, c - 1, a[1] - a[0] + 1 >= c
