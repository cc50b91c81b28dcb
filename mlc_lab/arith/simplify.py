"""Arithmetic simplification of index expressions: constant folding, a canonical linear form
(sum of coefficient * atom + constant), and floordiv/floormod/min/max/compare rules that use the
bounds of the loop variables."""
from __future__ import annotations

import math

from ..ir.node import Node, field_values
from ..tir import dtype as dt
from ..tir import expr as E
from .bound import int_bound
from .simplify_memo import SimplifyMemo, current_memo


def simplify(e, var_ranges: dict | None = None, memo: "SimplifyMemo | None" = None):
    """Simplify ``e`` (a PrimExpr); ``var_ranges`` maps Var -> Range for bound-based rules.
    ``memo`` (a SimplifyMemo) lets many calls share what they learn about the same nodes; a
    pass that simplifies every expression of a function passes one.

    >>> from mlc_lab import tir
    >>> i = tir.Var("i")
    >>> simplify(i * 4 + 2 - i * 4), simplify(i // 8, {i: tir.Range.from_min_extent(0, 8)})
    (2, 0)
    """
    if not isinstance(e, E.PrimExpr):
        return e
    return _Simplifier(var_ranges or {}, memo or current_memo()).visit(e)


def can_prove(cond, var_ranges: dict | None = None) -> bool:
    """True when ``cond`` simplifies to the constant true under the given ranges."""
    c = simplify(cond, var_ranges)
    return isinstance(c, E.IntImm) and c.value == 1


def atom_key(e, memo: dict | None = None) -> tuple:
    """A hashable key for an expression that identifies variables and buffers by identity.
    ``memo`` (a dict, id(node) -> (node, key)) reuses the keys of nodes met before."""
    if isinstance(e, E.Var):
        return ("var", id(e))
    if isinstance(e, tuple):
        return tuple(atom_key(x, memo) for x in e)
    if not isinstance(e, Node):
        return (type(e).__name__, e)
    if type(e).__name__ == "Buffer":
        return ("buffer", id(e))
    if memo is not None:
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
    key = _Key((type(e).__name__,) + tuple(atom_key(v, memo) for v in field_values(e)))
    if memo is not None:
        memo[id(e)] = (e, key)
    return key


class _Key(tuple):
    """A node's atom key: a tuple that computes its hash once. Keys nest as deep as the
    expression, and a Linear's term dictionary hashes its keys at every lookup and copy."""

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            self._hash = tuple.__hash__(self)
            return self._hash


def linear_form(e) -> "Linear":
    """``e`` as a Linear: integer ``+``, ``-`` and ``*`` by a constant are expanded, every
    other subexpression is an atom. No simplification happens first.

    >>> from mlc_lab import tir
    >>> i, j = tir.Var("i"), tir.Var("j")
    >>> lin = linear_form(i * 4 + j - i + 3)
    >>> [(str(atom), coef) for atom, coef in lin.terms.values()], lin.const
    ([('i', 3), ('j', 1)], 3)
    >>> from_linear(lin, "int32")
    i * 3 + j + 3
    """
    return _Simplifier({}).linear(e)


def is_multiple_of(e, k: int) -> bool:
    """True when the integer ``e`` is provably a multiple of ``k`` for every value of its
    variables: each term of its linear form is, counting ``x % c`` as a multiple of g when g
    divides c and x.

    >>> from mlc_lab import tir
    >>> t = tir.Var("t")
    >>> is_multiple_of(t * 4 % 8 + t * 8 + 4, 4), is_multiple_of(t * 2 + 4, 4)
    (True, False)
    """
    lin = linear_form(e)
    if lin.const % k:
        return False
    for atom, coef in lin.terms.values():
        need = k // math.gcd(k, coef)
        if need > 1 and not (isinstance(atom, E.FloorMod) and isinstance(_const_value(atom.b), int)
                             and _const_value(atom.b) % need == 0 and is_multiple_of(atom.a, need)):
            return False
    return True


def from_linear(lin: "Linear", dtype: str):
    """The expression ``lin`` stands for: positive terms first, then the constant."""
    return _Simplifier({}).rebuild(lin, dtype)


class Linear:
    """coefficient * atom terms (keyed by atom_key, in first-seen order) plus a constant."""
    __slots__ = ("terms", "const")

    def __init__(self, terms=None, const=0):
        self.terms: dict = dict(terms or {})
        self.const = const

    def add(self, other: "Linear", sign: int = 1) -> "Linear":
        out = Linear(self.terms, self.const + sign * other.const)
        for key, (atom, coef) in other.terms.items():
            old = out.terms.get(key, (atom, 0))[1]
            if old + sign * coef == 0:
                out.terms.pop(key, None)
            else:
                out.terms[key] = (atom, old + sign * coef)
        return out

    def scale(self, c: int) -> "Linear":
        if c == 0:
            return Linear()
        return Linear({k: (a, coef * c) for k, (a, coef) in self.terms.items()}, self.const * c)

    def split_by(self, c: int) -> tuple["Linear", "Linear"]:
        """(part divisible by c, remainder part)."""
        div, rest = Linear(), Linear()
        for k, (a, coef) in self.terms.items():
            (div if coef % c == 0 else rest).terms[k] = (a, coef)
        div.const, rest.const = self.const - self.const % c, self.const % c
        return div, rest


class _Simplifier:
    """Simplifies under fixed variable ranges. Every node's result is remembered (the same
    subexpression often appears many times), in ``memo`` when one is given."""

    def __init__(self, var_ranges, memo: SimplifyMemo | None = None):
        self.var_ranges = var_ranges
        memo = memo or SimplifyMemo()
        self.results = memo.results_for(var_ranges)
        self.keys, self.linears = memo.keys, memo.linears

    def visit(self, e):
        hit = self.results.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        method = _VISITORS.get(type(e))
        if method is None:
            method = _VISITORS[type(e)] = getattr(type(self), "visit_" + type(e).__name__, False)
        out = method(self, e) if method else e
        self.results[id(e)] = (e, out)
        return out

    # -- helpers ---------------------------------------------------------------------------
    def linear(self, e) -> Linear:
        """``e`` as a Linear (shared: callers build new ones rather than change it)."""
        hit = self.linears.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = self._linear(e)
        self.linears[id(e)] = (e, out)
        return out

    def linear_of(self, op: type, a, b) -> Linear:
        """``linear(op(a, b))`` for op Add, Sub or Mul, without building the node when the
        operands already share an integer dtype (the node is only needed as an atom)."""
        if not (isinstance(a, E.PrimExpr) and isinstance(b, E.PrimExpr) and a.dtype == b.dtype
                and _is_int(a.dtype)):
            return self.linear(op(a, b))
        la, lb = self.linear(a), self.linear(b)
        if op is E.Add or op is E.Sub:
            return la.add(lb, 1 if op is E.Add else -1)
        if not lb.terms:
            return la.scale(lb.const)
        if not la.terms:
            return lb.scale(la.const)
        return self.linear(op(a, b))

    def _linear(self, e) -> Linear:
        if isinstance(e, E.IntImm) and _is_int(e.dtype):
            return Linear(const=e.value)
        if isinstance(e, (E.Add, E.Sub)) and _is_int(e.dtype):
            return self.linear(e.a).add(self.linear(e.b), 1 if isinstance(e, E.Add) else -1)
        if isinstance(e, E.Mul) and _is_int(e.dtype):
            la, lb = self.linear(e.a), self.linear(e.b)
            if not lb.terms:
                return la.scale(lb.const)
            if not la.terms:
                return lb.scale(la.const)
        return Linear({atom_key(e, self.keys): (e, 1)})

    def rebuild(self, lin: Linear, dtype: str):
        def term(atom, coef):
            return atom if coef == 1 else E.Mul(atom, E.IntImm(dtype, coef))
        out = None
        if lin.const > 0 and lin.terms and all(coef < 0 for _, coef in lin.terms.values()):
            out = E.IntImm(dtype, lin.const)   # 9 - i rather than i * -1 + 9
            for atom, coef in lin.terms.values():
                out = E.Sub(out, term(atom, -coef))
            return out
        for atom, coef in sorted(lin.terms.values(), key=lambda t: t[1] < 0):
            if out is None:
                out = term(atom, coef) if coef > 0 else E.Mul(atom, E.IntImm(dtype, coef))
            elif coef > 0:
                out = E.Add(out, term(atom, coef))
            else:
                out = E.Sub(out, term(atom, -coef))
        if out is None:
            return E.IntImm(dtype, lin.const)
        if lin.const > 0:
            out = E.Add(out, E.IntImm(dtype, lin.const))
        elif lin.const < 0:
            out = E.Sub(out, E.IntImm(dtype, -lin.const))
        return out

    def merge_div_mod(self, lin: Linear) -> Linear:
        """``x // c * (k * c) + x % c * k`` is ``x * k`` (floor division and modulo, any x)."""
        for key, (atom, coef) in list(lin.terms.items()):
            c = _const_value(atom.b) if isinstance(atom, E.FloorMod) else None
            if not isinstance(c, int) or c == 0:
                continue
            div_key = ("FloorDiv",) + key[1:]   # atom_key of atom.a // atom.b
            if div_key in lin.terms and lin.terms[div_key][1] == coef * c:
                both = Linear({key: (atom, coef), div_key: (lin.terms[div_key][0], coef * c)})
                return self.merge_div_mod(lin.add(both, -1).add(self.linear(atom.a).scale(coef)))
        return lin

    def cancel_floordiv_pairs(self, lin: Linear) -> Linear:
        """``(x * 8 + 7) // 16 - x * 8 // 16`` is 0 and ``(x * 8 + 7) % 16 - x * 8 % 16`` is 7: two
        numerators that differ by a constant fall in the same block of d when their residues
        (multiples of g = gcd(coefficients, d), offset by the constant) leave room for it."""
        divs = [(key, atom, coef) for key, (atom, coef) in lin.terms.items()
                if isinstance(atom, (E.FloorDiv, E.FloorMod)) and isinstance(_const_value(atom.b), int)
                and _const_value(atom.b) > 0]
        for k1, a1, c1 in divs:
            for k2, a2, c2 in divs:
                d1, d2 = _const_value(a1.b), _const_value(a2.b)
                if k1 == k2 or c1 != -c2 or c1 <= 0 or type(a1) is not type(a2) \
                        or (d1 != d2 and isinstance(a1, E.FloorMod)):
                    continue
                # n // d is n * m // (d * m): bring both divisions to one denominator
                d = d1 * d2 // math.gcd(d1, d2)
                n1, n2 = self.linear(a1.a).scale(d // d1), self.linear(a2.a).scale(d // d2)
                diff = n1.add(n2, -1)
                if diff.terms or not n1.terms:
                    continue
                low = n2 if diff.const >= 0 else n1
                g = d
                for _, coef in low.terms.values():
                    g = math.gcd(g, coef)
                if low.const % g + abs(diff.const) < g:
                    out = Linear(lin.terms, lin.const)
                    del out.terms[k1], out.terms[k2]
                    if isinstance(a1, E.FloorMod):   # in one block the remainders differ by diff
                        out.const += c1 * diff.const
                    return self.cancel_floordiv_pairs(out)
        return lin

    def bound(self, e):
        return int_bound(e, self.var_ranges)

    def children(self, e):
        return e.replace(**{name: self.visit(v) for name, v in e.fields()
                            if isinstance(v, E.PrimExpr)})

    # -- rules -----------------------------------------------------------------------------
    def visit_Cast(self, e):
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        if isinstance(v, (E.IntImm, E.FloatImm)) and _lanes(e.dtype) == 1:
            return E.const(v.value if dt.is_float(e.dtype) else int(v.value), e.dtype)
        return E.Cast(e.dtype, v)

    def arith(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        if _is_const(a) and _is_const(b):
            return _fold(type(e), a, b)
        if _is_int(e.dtype) and _lanes(e.dtype) == 1:
            lin = self.cancel_floordiv_pairs(self.merge_div_mod(self.linear_of(type(e), a, b)))
            return self.rebuild(lin, e.dtype)
        if isinstance(e, E.Mul) and (_const_value(b) == 1 or _const_value(a) == 1):
            return a if _const_value(b) == 1 else b
        if isinstance(e, (E.Add, E.Sub)) and _const_value(b) == 0:
            return a
        return type(e)(a, b)

    visit_Add = visit_Sub = visit_Mul = arith

    def visit_Div(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        if _is_const(a) and _is_const(b) and _const_value(b) != 0:
            return _fold(type(e), a, b)
        if _const_value(b) == 1 and isinstance(e, E.Div):
            return a
        return type(e)(a, b)

    visit_Mod = visit_Div

    def visit_FloorDiv(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        c = _const_value(b)
        if not _is_int(e.dtype) or not isinstance(c, int) or c <= 0:
            return _fold(E.FloorDiv, a, b) if _is_const(a) and _is_const(b) and c else E.FloorDiv(a, b)
        if c == 1:
            return a
        if isinstance(a, E.FloorDiv) and isinstance(_const_value(a.b), int) and _const_value(a.b) > 0:
            return self.visit(E.FloorDiv(a.a, E.IntImm(e.dtype, c * _const_value(a.b))))
        div, rest = self.linear(a).split_by(c)
        quotient = Linear({k: (at, coef // c) for k, (at, coef) in div.terms.items()}, div.const // c)
        lo, hi = self.bound(self.rebuild(rest, e.dtype))
        if lo is not None and hi is not None and lo // c == hi // c:
            return self.rebuild(quotient.add(Linear(const=lo // c)), e.dtype)
        g = math.gcd(c, rest.const)   # (i * 8) // 16 is i // 2: divide out a common factor
        for _, coef in rest.terms.values():
            g = math.gcd(g, coef)
        if g > 1:
            rest = Linear({k: (at, coef // g) for k, (at, coef) in rest.terms.items()}, rest.const // g)
            c, b = c // g, E.IntImm(e.dtype, c // g)
        if not quotient.terms and quotient.const == 0:
            return E.FloorDiv(self.rebuild(rest, e.dtype), b)
        return E.Add(self.rebuild(quotient, e.dtype), E.FloorDiv(self.rebuild(rest, e.dtype), b)) \
            if quotient.terms else self._plus_const(E.FloorDiv(self.rebuild(rest, e.dtype), b), quotient.const)

    def _plus_const(self, e, k):
        if k == 0:
            return e
        return E.Add(e, E.IntImm(e.dtype, k)) if k > 0 else E.Sub(e, E.IntImm(e.dtype, -k))

    def visit_FloorMod(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        c = _const_value(b)
        if not _is_int(e.dtype) or not isinstance(c, int) or c <= 0:
            return _fold(E.FloorMod, a, b) if _is_const(a) and _is_const(b) and c else E.FloorMod(a, b)
        if c == 1:
            return E.IntImm(e.dtype, 0)
        _, rest = self.linear(a).split_by(c)
        r = self.rebuild(rest, e.dtype)
        lo, hi = self.bound(r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return self.rebuild(rest.add(Linear(const=-(lo // c) * c)), e.dtype)
        return E.FloorMod(r, b)

    def minmax(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        if _is_const(a) and _is_const(b):
            return _fold(type(e), a, b)
        if _is_int(e.dtype):
            lo, hi = self.bound(self.visit(E.Sub(a, b)))
            take_a = isinstance(e, E.Min)
            if hi is not None and hi <= 0:
                return a if take_a else b
            if lo is not None and lo >= 0:
                return b if take_a else a
        return type(e)(a, b)

    visit_Min = visit_Max = minmax

    def compare(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        if _is_const(a) and _is_const(b):
            return _fold(type(e), a, b)
        if _is_int(a.dtype) and _lanes(a.dtype) == 1:
            diff = self.visit(E.Sub(a, b))
            lo, hi = self.bound(diff)
            verdict = _decide(type(e), lo, hi)
            if verdict is not None:
                return E.IntImm("bool", int(verdict))
            k = _const_value(b)
            lin = self.linear(a)
            if isinstance(k, int) and isinstance(b, E.IntImm) and lin.terms and lin.const:
                # i - 16 >= 0 reads i >= 16: the constant goes to the right
                return type(e)(self.rebuild(Linear(lin.terms), a.dtype), E.IntImm(b.dtype, k - lin.const))
        return type(e)(a, b)

    visit_LT = visit_LE = visit_GT = visit_GE = visit_EQ = visit_NE = compare

    def visit_And(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        for x, y in ((a, b), (b, a)):
            if _const_value(x) == 1:
                return y
            if _const_value(x) == 0 and isinstance(x, E.IntImm):
                return E.IntImm("bool", 0)
        return E.And(a, b)

    def visit_Or(self, e):
        a, b = self.visit(e.a), self.visit(e.b)
        for x, y in ((a, b), (b, a)):
            if _const_value(x) == 0 and isinstance(x, E.IntImm):
                return y
            if _const_value(x) == 1:
                return E.IntImm("bool", 1)
        return E.Or(a, b)

    def visit_Not(self, e):
        a = self.visit(e.a)
        return E.IntImm("bool", 1 - a.value) if isinstance(a, E.IntImm) else E.Not(a)

    def visit_Select(self, e):
        c = self.visit(e.condition)
        if isinstance(c, E.IntImm):
            return self.visit(e.true_value if c.value else e.false_value)
        return E.Select(c, self.visit(e.true_value), self.visit(e.false_value))

    def visit_BufferLoad(self, e):
        return E.BufferLoad(e.buffer, tuple(self.visit(i) for i in e.indices))

    def visit_Call(self, e):
        return E.Call(e.dtype, e.op, tuple(self.visit(a) for a in e.args))

    def visit_Ramp(self, e):
        return E.Ramp(self.visit(e.base), self.visit(e.stride), e.lanes)

    def visit_Broadcast(self, e):
        return E.Broadcast(self.visit(e.value), e.lanes)


# expression class -> its _Simplifier rule (False: none, the expression stays as it is)
_VISITORS: dict = {}


def _is_const(e) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm))


def _const_value(e):
    return e.value if isinstance(e, (E.IntImm, E.FloatImm)) else None


def _decide(op, lo, hi):
    """Truth of ``diff op 0`` for diff in [lo, hi], or None when unknown."""
    checks = {
        E.LT: (hi is not None and hi < 0, lo is not None and lo >= 0),
        E.LE: (hi is not None and hi <= 0, lo is not None and lo > 0),
        E.GT: (lo is not None and lo > 0, hi is not None and hi <= 0),
        E.GE: (lo is not None and lo >= 0, hi is not None and hi < 0),
        E.EQ: (lo == hi == 0, (lo is not None and lo > 0) or (hi is not None and hi < 0)),
        E.NE: ((lo is not None and lo > 0) or (hi is not None and hi < 0), lo == hi == 0),
    }
    true, false = checks[op]
    return True if true else False if false else None


def _fold(op, a, b):
    x, y = a.value, b.value
    dtype = a.dtype
    if op in (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE):
        result = {E.LT: x < y, E.LE: x <= y, E.GT: x > y, E.GE: x >= y, E.EQ: x == y, E.NE: x != y}[op]
        return E.IntImm("bool", int(result))
    if op is E.Add:
        v = x + y
    elif op is E.Sub:
        v = x - y
    elif op is E.Mul:
        v = x * y
    elif op is E.Div:
        v = x / y if dt.is_float(dtype) else int(x / y) if y else None
        if _is_int(dtype) and y:
            v = abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1)
    elif op is E.Mod:
        v = math.fmod(x, y) if dt.is_float(dtype) else x - y * (abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1))
    elif op is E.FloorDiv:
        v = x // y if _is_int(dtype) else math.floor(x / y)
    elif op is E.FloorMod:
        v = x % y
    elif op is E.Min:
        v = min(x, y)
    elif op is E.Max:
        v = max(x, y)
    else:
        return op(a, b)
    if v is None:
        return op(a, b)
    return E.const(v, dtype)


_is_int, _lanes = dt.is_int, dt.lanes   # cached in tir.dtype
