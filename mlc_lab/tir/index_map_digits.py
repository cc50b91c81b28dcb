"""The digit decomposition behind IndexMap's shape map and inverse: each output of a map as a
constant plus a mixed-radix sum of "digits" of the inputs (``(x + c) // d % m``), each input
covered by its digits exactly once."""
from __future__ import annotations

from ..arith import from_linear, linear_form, simplify
from ..ir.structural import structural_equal
from . import dtype as dt
from . import expr as E
from .stmt_functor import uses_var


class IndexMapError(ValueError):
    """An index map that cannot be inverted, or a call that does not fit it."""


class _Digit:
    """``((x + offset) // place) % modulus`` of input ``var`` (modulus None: no modulo)."""
    __slots__ = ("var", "offset", "place", "modulus", "size")

    def __init__(self, var, offset, place, modulus):
        self.var, self.offset, self.place, self.modulus, self.size = var, offset, place, modulus, None


def _as(e, dtype):
    if isinstance(e, E.IntImm) and e.dtype != dtype:
        return E.IntImm(dtype, e.value)
    return e


def _const(e):
    return e.value if isinstance(e, E.IntImm) else e if isinstance(e, int) else None


def _same(a, b) -> bool:
    a, b = E.convert(a), E.convert(b)
    if a.dtype != b.dtype:
        b = b.astype(a.dtype) if isinstance(b, E.IntImm) else b
    d = simplify(a - b)
    return isinstance(d, E.IntImm) and d.value == 0


def _mul(a, b):
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None:
        return ca * cb
    if ca == 1:
        return b
    if cb == 1:
        return a
    return simplify(E.convert(a) * E.convert(b))


class Decomposition:
    """Each output of the map as ``const + sum(coef * digit)``, each digit a part of one input."""

    def __init__(self, imap, shape):
        self.imap, self.shape_in = imap, shape
        self.dtype = shape[0].dtype if shape else "int32"
        self.outputs = []            # [(const, [(coef, digit)])]
        self.digits_of = {}          # var index -> [digit] sorted by place

    @staticmethod
    def of(imap, shape):
        if len(shape) != imap.ndim:
            raise IndexMapError(f"the index map {imap} takes {imap.ndim} indices; the shape "
                                f"({', '.join(map(str, shape))}) has {len(shape)}")
        dec = Decomposition(imap, shape)
        return dec if dec._build() else None

    def _build(self) -> bool:
        inputs = self.imap.initial_indices
        for e in self.imap.final_indices:
            terms = _terms(simplify(e), inputs)
            if terms is None:
                return False
            const, parts = 0, []
            for atom, coef in terms:
                if atom is None:
                    if _const(coef) is None:
                        return False
                    const += _const(coef)
                    continue
                digit = _digit(atom, inputs)
                if digit is None or (_const(coef) is not None and _const(coef) <= 0):
                    return False
                parts.append((coef, digit))
                self.digits_of.setdefault(digit.var, []).append(digit)
            self.outputs.append((const, parts))
        return self._cover() and self._order()

    def _cover(self) -> bool:
        """Each input's digits follow each other from place 1 and reach its extent."""
        for k, extent in enumerate(self.shape_in):
            digits = self.digits_of.get(k, [])
            if not digits:
                if _const(extent) != 1:
                    return False
                continue
            if len({d.offset for d in digits}) != 1:
                return False
            offset = digits[0].offset
            top = simplify(E.convert(extent) + offset) if offset else E.convert(extent)
            known = [d for d in digits if _const(d.place) is not None]
            if len(known) == len(digits):
                digits.sort(key=lambda d: _const(d.place))
            elif len(digits) > 1:
                chain = sorted(digits, key=lambda d: _const(d.place) is None)
                digits[:] = chain
            place = 1
            for n, d in enumerate(digits):
                if not _same(d.place, place):
                    return False
                last = n == len(digits) - 1
                if d.modulus is None:
                    if not last:
                        return False
                    d.size = simplify((top + d.place - 1) // d.place) if _const(d.place) != 1 else top
                    d.size = simplify(d.size)
                else:
                    if last:
                        span = _mul(d.place, d.modulus)
                        if _const(span) is None or _const(top) is None or _const(top) > _const(span):
                            return False
                        d.size = E.const(-(-_const(top) // _const(d.place)), self.dtype)
                    else:
                        d.size = E.convert(d.modulus)
                    place = _mul(d.place, d.modulus)
            if offset and _const(top) is None:
                return False
        return True

    def _order(self) -> bool:
        """The terms of each output, sorted by coefficient, form a mixed radix."""
        ordered = []
        for const, parts in self.outputs:
            if len(parts) != 1 or _const(parts[0][0]) != 1:   # a lone unit input stays itself
                parts = [(c, d) for c, d in parts if _const(d.size) != 1]
            if all(_const(c) is not None for c, _ in parts):
                parts.sort(key=lambda t: _const(t[0]))
                for (c0, d0), (c1, _) in zip(parts, parts[1:]):
                    if _const(d0.size) is None:
                        if not _same(c1, _mul(c0, d0.size)):
                            return False
                    elif _const(c1) % _const(c0) or _const(c1) < _const(c0) * _const(d0.size):
                        return False
            else:
                rest, chain, coef = list(parts), [], 1
                while rest:
                    nxt = next((t for t in rest if _same(t[0], coef)), None)
                    if nxt is None:
                        return False
                    rest = [t for t in rest if t is not nxt]
                    chain.append(nxt)
                    coef = _mul(nxt[0], nxt[1].size)
                parts = chain
            ordered.append((const, parts))
        self.outputs = ordered
        return True

    def shape(self) -> list:
        out = []
        for (const, parts), e in zip(self.outputs, self.imap.final_indices):
            dense = bool(parts) and _const(parts[0][0]) == 1 and all(
                _same(c1, _mul(c0, d0.size)) for (c0, d0), (c1, _) in zip(parts, parts[1:]))
            if not parts:
                total = const + 1
            elif dense:
                coef, digit = parts[-1]
                total = _mul(coef, digit.size)
                total = simplify(E.convert(total) + const) if const else total
            else:
                values = [(_const(c), _const(d.size)) for c, d in parts]
                if any(c is None or s is None for c, s in values):
                    raise IndexMapError(f"cannot bound the outputs of {self.imap} symbolically")
                total = const + sum(c * (s - 1) for c, s in values) + 1
            out.append(E.const(total, e.dtype) if isinstance(total, int) else _as(simplify(total), e.dtype))
        return out

    def inverse(self):
        """``(new variables, the inputs in terms of them, the padding condition)``."""
        shape = self.shape()
        new_vars = [E.Var(f"axis{k}", self.imap.final_indices[k].dtype) for k in range(len(shape))]
        value_of = {}
        padding = []
        for y, dim, (const, parts) in zip(new_vars, shape, self.outputs):
            rest = y - const if const else y
            if const:
                padding.append(E.LT(y, E.const(const, y.dtype)))
            if parts and _const(parts[0][0]) not in (None, 1):
                padding.append(E.NE(simplify(rest % parts[0][0]), E.const(0, y.dtype)))
            for n, (coef, digit) in enumerate(parts):
                top = n == len(parts) - 1
                value = rest if top else rest % parts[n + 1][0]
                value = simplify(value // coef if _const(coef) != 1 else value)
                value_of[id(digit)] = value
                if not top and not _same(parts[n + 1][0], _mul(coef, digit.size)):
                    padding.append(E.GE(value, digit.size))
        final = []
        for k, (var, extent) in enumerate(zip(self.imap.initial_indices, self.shape_in)):
            digits = self.digits_of.get(k, [])
            total = E.const(0, var.dtype)
            for d in reversed(digits):
                v = value_of.get(id(d), E.const(0, var.dtype))
                total = total + (v * d.place if _const(d.place) != 1 else v)
            offset = digits[0].offset if digits else 0
            final.append(simplify(total - offset if offset else total))
            if digits:
                cond = _at_least([(value_of.get(id(d), E.const(0, var.dtype)), d) for d in digits],
                                 simplify(E.convert(extent) + offset) if offset else E.convert(extent))
                if cond is not True and cond is not False:
                    padding.append(cond)
                elif cond is True:
                    padding.append(E.const(True, "bool"))
                if offset:
                    padding.append(E.LT(final[-1], E.const(0, var.dtype)))
        pred = E.const(False, "bool")
        for p in padding:
            if isinstance(p, E.IntImm) and p.dtype == "bool":
                if p.value:
                    return new_vars, final, E.const(True, "bool")
                continue
            pred = p if isinstance(pred, E.IntImm) else E.Or(pred, p)
        return new_vars, final, pred


def _at_least(digits, bound):
    """The condition ``sum(value * place) >= bound`` over the digits of one input (values taken
    in their ranges), built from the top digit down; True/False when it is constant."""
    digits = sorted(digits, key=lambda t: 0 if _const(t[1].place) is None else -_const(t[1].place))
    top = digits[0][1]
    if _same(_mul(top.place, top.size), bound):
        return False
    return _ge(digits, bound)


def _ge(digits, bound):
    if not digits:
        return True if _const(bound) is not None and _const(bound) <= 0 else False
    (value, d), rest = digits[0], digits[1:]
    place, size, b = _const(d.place), _const(d.size), _const(bound)
    if place is None or size is None or b is None:
        total = value * d.place
        for v, dd in rest:
            total = total + v * dd.place
        return E.GE(simplify(total), bound)
    if b <= 0:
        return True
    q, r = divmod(b, place)
    if q >= size:
        return False
    if r == 0:
        return E.GE(value, E.const(q, value.dtype))
    lower = _ge(rest, r)
    eq = E.EQ(value, E.const(q, value.dtype))
    eq = eq if lower is True else False if lower is False else E.And(eq, lower)
    if q + 1 >= size:
        return eq
    gt = E.GE(value, E.const(q + 1, value.dtype))
    return gt if eq is False else E.Or(gt, eq)


def _terms(e, inputs):
    """``e`` as [(atom or None, coefficient)] where each atom uses the inputs and each
    coefficient does not; None when a product of two input terms (or a division of a sum of
    several inputs) stands in the way."""
    if isinstance(e, E.Add):
        a, b = _terms(e.a, inputs), _terms(e.b, inputs)
        return None if a is None or b is None else a + b
    if isinstance(e, E.Sub):
        a, b = _terms(e.a, inputs), _terms(e.b, inputs)
        return None if a is None or b is None else a + [(t, _neg(c)) for t, c in b]
    if isinstance(e, E.Mul):
        ua, ub = uses_var(e.a, inputs), uses_var(e.b, inputs)
        if ua and ub:
            return None
        inner, factor = (e.a, e.b) if ua else (e.b, e.a)
        if not ua and not ub:
            return [(None, e)]
        terms = _terms(inner, inputs)
        return None if terms is None else [(t, _mul(c, _const(factor) if _const(factor) is not None else factor))
                                           for t, c in terms]
    if not uses_var(e, inputs):
        return [(None, _const(e) if _const(e) is not None else e)]
    return [(e, 1)]


def _neg(c):
    return -c if isinstance(c, int) else simplify(E.const(0, c.dtype) - c)


def _digit(atom, inputs):
    if isinstance(atom, E.Var):
        for k, v in enumerate(inputs):
            if v is atom:
                return _Digit(k, 0, 1, None)
        return None
    if isinstance(atom, (E.FloorDiv, E.FloorMod)):
        c = atom.b
        if uses_var(c, inputs) or (_const(c) is not None and _const(c) <= 0):
            return None
        lin = linear_form(atom.a)
        if len(lin.terms) == 1 and lin.const and list(lin.terms.values())[0][1] == 1:
            inner = _digit(list(lin.terms.values())[0][0], inputs)
            if inner is None or inner.place != 1 or inner.modulus is not None or inner.offset:
                return None
            inner.offset = lin.const
        else:
            inner = _digit(atom.a, inputs)
        if inner is None:
            return None
        cv = _const(c)
        if cv is None:   # a symbolic divisor: only right on a whole input
            if inner.place != 1 or inner.modulus is not None:
                return None
            if isinstance(atom, E.FloorDiv):
                inner.place = c
            else:
                inner.modulus = c
            return inner
        if isinstance(atom, E.FloorDiv):
            if _const(inner.place) is None or (inner.modulus is not None and (_const(inner.modulus) is None
                                                                            or _const(inner.modulus) % cv)):
                return None
            inner.place = _const(inner.place) * cv
            inner.modulus = None if inner.modulus is None else _const(inner.modulus) // cv
            return inner
        if inner.modulus is not None and (_const(inner.modulus) is None or _const(inner.modulus) % cv):
            return None
        inner.modulus = cv
        return inner
    return None


def fold_div_mod(e):
    """``e`` with each pair ``x // n * n`` and ``x % n`` of equal coefficients folded into ``x``
    (as the inverse of a split by a symbolic factor leaves them)."""
    if not isinstance(e, E.PrimExpr) or not dt.is_int(e.dtype):
        return e
    lin = linear_form(e)
    for key, (atom, coef) in list(lin.terms.items()):
        if not isinstance(atom, E.Mul) or key not in lin.terms:
            continue
        div, factor = (atom.a, atom.b) if isinstance(atom.a, E.FloorDiv) else (atom.b, atom.a)
        if not isinstance(div, E.FloorDiv) or not structural_equal(div.b, factor):
            continue
        match = next((k for k, (other, c) in lin.terms.items() if c == coef and isinstance(other, E.FloorMod)
                      and structural_equal(other.a, div.a) and structural_equal(other.b, div.b)), None)
        if match is None:
            continue
        del lin.terms[key], lin.terms[match]
        lin = lin.add(linear_form(div.a).scale(coef))
    return from_linear(lin, e.dtype) if len(lin.terms) or lin.const else E.const(0, e.dtype)


def fold_symbolic_split(e, ranges: dict):
    """``(q * n + r) // n`` -> ``q`` and ``(q * n + r) % n`` -> ``r`` for a symbolic ``n`` when
    ``r`` is a variable ranging over ``[0, n)`` in ``ranges`` (Var -> Range)."""
    if not isinstance(e, (E.FloorDiv, E.FloorMod)) or isinstance(e.b, E.IntImm):
        return e
    n, lin = e.b, linear_form(e.a)
    quotient, rest = [], []
    for atom, coef in lin.terms.values():
        factor = (atom.a if structural_equal(atom.b, n) else atom.b if structural_equal(atom.a, n)
                  else None) if isinstance(atom, E.Mul) else None
        (quotient if factor is not None else rest).append((factor, atom, coef))
    if lin.const or len(rest) != 1 or rest[0][2] != 1 or not isinstance(rest[0][1], E.Var):
        return e
    rng = next((r for v, r in ranges.items() if v is rest[0][1]), None)
    if rng is None or not (isinstance(rng.min, E.IntImm) and rng.min.value == 0) or \
            not structural_equal(rng.extent, n):
        return e
    if isinstance(e, E.FloorMod):
        return rest[0][1]
    total = None
    for factor, _, coef in quotient:
        term = factor if coef == 1 else factor * coef
        total = term if total is None else total + term
    return total if total is not None else E.const(0, e.dtype)
