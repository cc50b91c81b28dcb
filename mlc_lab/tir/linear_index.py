"""Index expressions that are sums of ``variable * constant`` terms, handled without the general
simplifier: the schedule primitives and the region arithmetic simplify, compare and relax such
sums far more often than anything else (a split loop's binding ``i_0 * 128 + i_1 * 4 + i_2``).

Each function here gives exactly what ``mlc_lab.arith`` gives for the same input (the same
expression, term for term, in the same order), only sooner; an input outside the linear subset
(a division, a product of two variables, a vector, a mixed dtype, a symbolic range) goes to
``mlc_lab.arith`` unchanged. ``MLC_LAB_CHECK_LINEAR=1`` in the environment makes every call also
run the general path and raise when the two differ.

The simplifier folds an integer ``+``, ``-`` or ``*`` node by node: it simplifies both operands,
takes the linear form of the result and rebuilds it with the positive terms first (in the order
they were first seen), then the constant. ``_linear`` follows the same steps on the linear form
alone, so the term order of every intermediate rebuild is reproduced without building it.
"""
from __future__ import annotations

import os

from ..arith import can_prove as _can_prove, int_bound, simplify as _simplify
from ..arith.simplify import Linear, from_linear, linear_form as _linear_form
from . import dtype as dt
from . import expr as E

_CHECK = os.environ.get("MLC_LAB_CHECK_LINEAR", "") not in ("", "0")
_ARITH = (E.Add, E.Sub, E.Mul)
_COMPARE = {E.LT: lambda lo, hi: (hi is not None and hi < 0, lo is not None and lo >= 0),
            E.LE: lambda lo, hi: (hi is not None and hi <= 0, lo is not None and lo > 0),
            E.GT: lambda lo, hi: (lo is not None and lo > 0, hi is not None and hi <= 0),
            E.GE: lambda lo, hi: (lo is not None and lo >= 0, hi is not None and hi < 0)}


def _scalar_int(dtype: str) -> bool:
    return dt.is_int(dtype) and dt.lanes(dtype) == 1


_is_int = dt.is_int   # cached in tir.dtype


def linear_form(e) -> Linear:
    """``arith.linear_form(e)``: the terms in the order first seen, no simplification first."""
    lin = _terms_as_seen(e)
    if lin is None:
        return _linear_form(e)
    out = Linear(lin[0], lin[1])
    if _CHECK:
        slow = _linear_form(e)
        if list(out.terms.items()) != list(slow.terms.items()) or out.const != slow.const:
            raise AssertionError(f"linear_index: linear_form({e}) differs")
    return out


def _terms_as_seen(e):
    """``(terms, const)`` as ``arith.linear_form`` finds them (keys ("var", id), values (var,
    coef)); None when an atom is not a variable."""
    kind = type(e)
    if kind is E.IntImm and _is_int(e.dtype):
        return {}, e.value
    if (kind is E.Add or kind is E.Sub or kind is E.Mul) and _is_int(e.dtype):
        a = _terms_as_seen(e.a)
        b = None if a is None else _terms_as_seen(e.b)
        if b is None:
            return None
        if kind is E.Mul:
            if not b[0]:
                return _scaled_as_seen(a, b[1])
            if not a[0]:
                return _scaled_as_seen(b, a[1])
            return None
        sign = 1 if kind is E.Add else -1
        terms = dict(a[0])
        for key, (var, coef) in b[0].items():
            total = terms.get(key, (var, 0))[1] + sign * coef
            if total == 0:
                terms.pop(key, None)
            else:
                terms[key] = (var, total)
        return terms, a[1] + sign * b[1]
    if isinstance(e, E.Var):
        return {("var", id(e)): (e, 1)}, 0
    return None


def _scaled_as_seen(lin, c: int):
    if c == 0:
        return {}, 0
    return {k: (var, coef * c) for k, (var, coef) in lin[0].items()}, lin[1] * c


def _linear(e):
    """``(terms, const)`` of a linear index expression, ``terms`` mapping id(var) -> [var, coef]
    in the order the simplifier's rebuild of ``e`` lists them; None outside the linear subset."""
    kind = type(e)
    if kind is E.Var:
        return {id(e): [e, 1]}, 0
    if kind is E.IntImm:
        return ({}, e.value) if _scalar_int(e.dtype) else None
    if kind not in _ARITH or not _scalar_int(e.a.dtype):
        return None
    a = _linear(e.a)
    if a is None:
        return None
    b = _linear(e.b)
    if b is None:
        return None
    if kind is E.Mul:
        if not b[0]:
            terms, const = _scaled(a, b[1])
        elif not a[0]:
            terms, const = _scaled(b, a[1])
        else:
            return None   # a product of two variables: an atom of its own
    else:
        sign = 1 if kind is E.Add else -1
        terms, const = dict(a[0]), a[1] + sign * b[1]
        for key, (var, coef) in b[0].items():
            old = terms.get(key)
            total = (0 if old is None else old[1]) + sign * coef
            if total == 0:
                terms.pop(key, None)
            elif old is None:
                terms[key] = [var, total]
            else:
                terms[key] = [old[0], total]
    return _positive_first(terms), const


def _scaled(lin, c: int):
    if c == 0:
        return {}, 0
    return {k: [var, coef * c] for k, (var, coef) in lin[0].items()}, lin[1] * c


def _positive_first(terms: dict) -> dict:
    """The terms as the rebuild lists them: positive coefficients first, order kept otherwise."""
    seen_negative = False
    for _, coef in terms.values():
        if coef < 0:
            seen_negative = True
        elif seen_negative:
            return dict(sorted(terms.items(), key=lambda kv: kv[1][1] < 0))
    return terms


def _rebuild(terms: dict, const: int, dtype: str):
    """The expression the simplifier rebuilds from a linear form (``arith.from_linear``): the
    terms in order, positive ones first, then the constant; ``9 - i`` rather than ``i * -1 + 9``."""
    if _CHECK:
        expected = from_linear(Linear({("var", k): (v, c) for k, (v, c) in terms.items()}, const), dtype)
    terms = _positive_first(terms)
    if not terms:
        out = E.IntImm(dtype, const)
    elif const > 0 and all(coef < 0 for _, coef in terms.values()):
        out = E.IntImm(dtype, const)
        for var, coef in terms.values():
            out = E.Sub(out, var if coef == -1 else E.Mul(var, E.IntImm(dtype, -coef)))
    else:
        out = None
        for var, coef in terms.values():   # (already positive first)
            if out is None:
                out = var if coef == 1 else E.Mul(var, E.IntImm(dtype, coef))
            elif coef > 0:
                out = E.Add(out, var if coef == 1 else E.Mul(var, E.IntImm(dtype, coef)))
            else:
                out = E.Sub(out, var if coef == -1 else E.Mul(var, E.IntImm(dtype, -coef)))
        if const > 0:
            out = E.Add(out, E.IntImm(dtype, const))
        elif const < 0:
            out = E.Sub(out, E.IntImm(dtype, -const))
    if _CHECK:
        _same(out, expected, terms)
    return out


def _same(fast, slow, what) -> None:
    from ..ir.structural import structural_equal
    if not (fast is slow or structural_equal(fast, slow)
            and getattr(fast, "dtype", None) == getattr(slow, "dtype", None)):
        raise AssertionError(f"linear_index: {what} gave {fast}, the simplifier {slow}")


def _checked(fast, e, known, general):
    if _CHECK:
        _same(fast, general(e, known), e)
    return fast


def simplify(e, known: dict | None = None):
    """``arith.simplify(e, known)``: a linear index expression is rebuilt from its linear form
    (the variable ranges in ``known`` change nothing there).

    >>> from mlc_lab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> simplify(j - i * 4 + 2 + i * 8), relax(i * 4 + j, {j: tir.Range.from_min_extent(0, 4)})
    (j + i * 4 + 2, (i * 4, i * 4 + 3))
    """
    kind = type(e)
    if kind is E.Var or kind is E.IntImm:
        return e
    if kind in _ARITH:
        lin = _linear(e)
        if lin is not None:
            return _checked(_rebuild(lin[0], lin[1], e.dtype), e, known, _simplify)
    elif kind is E.Min or kind is E.Max:
        out = _min_max(e, known)
        if out is not None:
            return _checked(out, e, known, _simplify)
    return _simplify(e, known)


def _min_max(e, known):
    """The simplifier's Min/Max rule on linear operands: fold two constants; otherwise keep the
    operand the bounds of their difference prove smaller (larger)."""
    if not _scalar_int(e.a.dtype):
        return None
    a, b = _linear(e.a), _linear(e.b)
    if a is None or b is None:
        return None
    dtype = e.dtype
    if not a[0] and not b[0]:
        return E.const(min(a[1], b[1]) if type(e) is E.Min else max(a[1], b[1]), e.a.dtype)
    sa, sb = _rebuild(a[0], a[1], dtype), _rebuild(b[0], b[1], dtype)
    lo, hi = int_bound(_difference(a, b, dtype), known)
    take_a = type(e) is E.Min
    if hi is not None and hi <= 0:
        return sa if take_a else sb
    if lo is not None and lo >= 0:
        return sb if take_a else sa
    return type(e)(sa, sb)


def _difference(a, b, dtype: str):
    """The rebuilt ``a - b`` of two linear forms, as the simplifier makes it."""
    terms, const = dict(a[0]), a[1] - b[1]
    for key, (var, coef) in b[0].items():
        old = terms.get(key)
        total = (0 if old is None else old[1]) - coef
        if total == 0:
            terms.pop(key, None)
        elif old is None:
            terms[key] = [var, total]
        else:
            terms[key] = [old[0], total]
    return _rebuild(_positive_first(terms), const, dtype)


def can_prove(cond, known: dict | None = None) -> bool:
    """``arith.can_prove(cond, known)``: a comparison ``<``, ``<=``, ``>``, ``>=`` of two linear
    index expressions is decided by the bounds of their difference."""
    rule = _COMPARE.get(type(cond))
    if rule is not None and _scalar_int(cond.a.dtype):
        a, b = _linear(cond.a), _linear(cond.b)
        if a is not None and b is not None:
            if not a[0] and not b[0]:
                diff = a[1] - b[1]
                verdict = rule(diff, diff)[0]
            else:
                verdict = rule(*int_bound(_difference(a, b, cond.a.dtype), known))[0]
            if _CHECK and verdict != _can_prove(cond, known):
                raise AssertionError(f"linear_index: can_prove({cond}) gave {verdict}")
            return verdict
    return _can_prove(cond, known)


def relax(expr, relaxed: dict, known: dict | None = None):
    """``(lo, hi)`` of a linear index expression while the variables of ``relaxed`` (Var ->
    Range with constant min and extent of the expression's dtype) take every value of their
    ranges, as ``intervals.relax`` gives them; None outside that case (``known`` only serves
    the check of MLC_LAB_CHECK_LINEAR)."""
    kind = type(expr)
    if kind is E.Var or kind is E.IntImm or kind in _ARITH:
        lin = _linear(expr)
    else:
        return None
    if lin is None:
        return None
    dtype = expr.dtype
    lo_terms, hi_terms, lo, hi = {}, {}, lin[1], lin[1]
    for key, term in lin[0].items():
        rng = relaxed.get(term[0])
        if rng is None:
            lo_terms[key] = hi_terms[key] = term
            continue
        first, extent = rng.min, rng.extent
        if type(first) is not E.IntImm or type(extent) is not E.IntImm \
                or first.dtype != dtype or extent.dtype != dtype:
            return None
        coef = term[1]
        low, high = first.value * coef, (first.value + extent.value - 1) * coef
        if coef < 0:
            low, high = high, low
        lo += low
        hi += high
    out = _rebuild(lo_terms, lo, dtype), _rebuild(hi_terms, hi, dtype)
    if _CHECK:
        from .intervals import _relax
        bounds = _relax(_simplify(expr), relaxed, known or {})
        for fast, slow in zip(out, bounds):
            _checked(fast, slow, known, _simplify)
    return out
