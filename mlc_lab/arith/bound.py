"""Integer interval bounds of index expressions, given the ranges of the loop variables."""
from __future__ import annotations

from typing import Optional

from ..tir import expr as E
from ..tir import dtype as dt

Interval = tuple[Optional[int], Optional[int]]   # None = unbounded on that side
UNBOUNDED: Interval = (None, None)


def int_bound(e: E.PrimExpr, var_ranges: dict | None = None) -> Interval:
    """Inclusive (min, max) of an integer expression; ``var_ranges`` maps Var -> Range."""
    return _Bounder(var_ranges or {}).bound(e)


class _Bounder:
    def __init__(self, var_ranges: dict):
        self.var_ranges = var_ranges

    def bound(self, e) -> Interval:
        method = _RULES.get(type(e))
        if method is None:
            method = _RULES[type(e)] = next(
                (getattr(_Bounder, "bound_" + cls.__name__) for cls in type(e).__mro__
                 if hasattr(_Bounder, "bound_" + cls.__name__)), False)
        if not method or not _is_int(e.dtype):
            return UNBOUNDED
        return method(self, e)

    def bound_IntImm(self, e):
        return (e.value, e.value)

    def bound_Var(self, e):
        rng = self.var_ranges.get(e)
        if rng is None:
            return (0, None) if isinstance(e, E.SizeVar) else UNBOUNDED
        lo, _ = self.bound(rng.min)
        _, hi_min = self.bound(rng.min)
        _, hi_ext = self.bound(rng.extent)
        return (lo, None if hi_min is None or hi_ext is None else hi_min + hi_ext - 1)


    def bound_Cast(self, e):
        return self.bound(e.value) if _is_int(e.value.dtype) else UNBOUNDED

    def bound_Add(self, e):
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return (_add(a0, b0), _add(a1, b1))

    def bound_Sub(self, e):
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return (_add(a0, _neg(b1)), _add(a1, _neg(b0)))

    def bound_Mul(self, e):
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        if None in (a0, a1, b0, b1):
            if b0 is not None and b0 == b1:
                return _scale((a0, a1), b0)
            if a0 is not None and a0 == a1:
                return _scale((b0, b1), a0)
            return UNBOUNDED
        products = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
        return (min(products), max(products))

    def bound_FloorDiv(self, e):
        (a0, a1), (c0, c1) = self.bound(e.a), self.bound(e.b)
        if c0 is None or c0 != c1 or c0 <= 0:
            return UNBOUNDED
        return (None if a0 is None else a0 // c0, None if a1 is None else a1 // c0)

    def bound_FloorMod(self, e):
        (a0, a1), (c0, c1) = self.bound(e.a), self.bound(e.b)
        if c0 is None or c0 != c1 or c0 <= 0:
            return UNBOUNDED
        if a0 is not None and a1 is not None and a0 // c0 == a1 // c0:
            return (a0 % c0, a1 % c0)
        return (0, c0 - 1)

    def bound_Min(self, e):
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return (_min(a0, b0, lower=True), _min(a1, b1, lower=False))

    def bound_Max(self, e):
        (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
        return (_max(a0, b0, lower=True), _max(a1, b1, lower=False))

    def bound_Select(self, e):
        (a0, a1), (b0, b1) = self.bound(e.true_value), self.bound(e.false_value)
        return (None if None in (a0, b0) else min(a0, b0), None if None in (a1, b1) else max(a1, b1))


# expression class -> the _Bounder rule for it (found through its bases), False when none
_RULES: dict = {}


def _add(x, y):
    return None if x is None or y is None else x + y


def _neg(x):
    return None if x is None else -x


def _scale(iv: Interval, c: int) -> Interval:
    lo, hi = iv
    if c >= 0:
        return (None if lo is None else lo * c, None if hi is None else hi * c)
    return (None if hi is None else hi * c, None if lo is None else lo * c)


def _min(x, y, lower):
    if x is None or y is None:
        return None if lower else (y if x is None else x)
    return min(x, y)


def _max(x, y, lower):
    if x is None or y is None:
        return (y if x is None else x) if lower else None
    return max(x, y)


_is_int, _lanes = dt.is_int, dt.lanes   # cached in tir.dtype
