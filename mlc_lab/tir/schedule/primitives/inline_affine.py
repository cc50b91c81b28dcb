"""Reading block iterators back from the indices they load at, for reverse_compute_inline.

A consumer that loads ``B[f(v)]`` can be folded into the producer of ``B`` when ``f`` is
one-to-one and can be inverted: from the element ``x`` the producer writes, ``v = g(x)`` is the
consumer iteration that reads it. ``invert`` accepts the index forms split, fuse and reshape
make: each index is a sum of *digits* with positive constant coefficients forming a mixed
radix (``vj * 16 + vk``), a digit being ``(m // d) % n`` of a *mark*, which is either one block
iterator or a dense fusion of several (``(vi * 32 + vj) * 8 + vk``). Every iterator that is not
a unit one must be determined: the digits of each mark, over all indices, must tile it exactly.

``Inverse.apply`` gives, for the indices a producer stores at, the consumer's iterators as
expressions in them, and the conditions under which the element is one the consumer reads
(an index that is a constant must equal it; an index whose highest digit wraps around must lie
in the range the digits span). With those conditions and the consumer's iterator bounds, the
element ``x`` is read by exactly the iteration ``g(x)``: reading the digits back from ``x``
recomputes ``x``.
"""
from __future__ import annotations

from ....arith import simplify
from ....arith.bound import int_bound
from ....arith.simplify import Linear, from_linear, linear_form
from ....ir import structural_equal
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import substitute
from .scope import const_int


class _Mark:
    """One block iterator, or a dense fusion of several: ``parts`` are (var, coefficient,
    extent), coefficient ascending, each the product of the extents below it."""

    def __init__(self, parts):
        self.parts = parts
        self.key = tuple((id(v), c) for v, c, _ in parts)
        self.extent = 1
        for _, _, ext in parts:
            self.extent = None if ext is None or self.extent is None else self.extent * ext


def _fused(e, iters):
    lin = linear_form(e)
    if lin.const != 0 or len(lin.terms) < 2:
        return None
    parts = []
    for atom, coef in lin.terms.values():
        if not isinstance(atom, E.Var) or id(atom) not in iters or coef <= 0 \
                or iters[id(atom)][1] is None:
            return None
        parts.append((atom, coef, iters[id(atom)][1]))
    parts.sort(key=lambda p: p[1])
    place = 1
    for _, coef, ext in parts:
        if coef != place:
            return None
        place *= ext
    return _Mark(parts)


def _digit(e, iters):
    """(mark, d, n) when ``e`` is ``(mark // d) % n`` (n None: no modulo), else None."""
    if isinstance(e, E.Var):
        return (_Mark([(e, 1, iters[id(e)][1])]), 1, None) if id(e) in iters else None
    if not isinstance(e, (E.FloorDiv, E.FloorMod)) or (const_int(e.b) or 0) < 1:
        return None
    inner = _digit(e.a, iters) if isinstance(e.a, (E.Var, E.FloorDiv, E.FloorMod)) else None
    if inner is None:
        mark = _fused(e.a, iters)
        if mark is None:
            return None
        inner = (mark, 1, None)
    mark, d, n = inner
    c = const_int(e.b)
    if mark.extent is None:
        return None
    if n is not None and n % c:
        return None
    if isinstance(e, E.FloorDiv):
        return mark, d * c, None if n is None else n // c
    return mark, d, c


def _size(mark, d, n) -> int | None:
    if mark.extent is None:
        return None
    top = -(-mark.extent // d)
    return top if n is None else min(n, top)


class Inverse:
    """The consumer iterators of a load, read back from the indices a producer writes."""

    def __init__(self, rows, marks, units):
        self.rows, self.marks, self.units = rows, marks, units

    def apply(self, values) -> tuple[dict, list]:
        """(Var -> expression of ``values`` for every iterator, conditions on ``values``)."""
        digit_value, conds = {}, []
        mapping = dict(self.units)
        for (const, digits), x in zip(self.rows, values):
            if isinstance(digits, E.Var):   # a unit iterator, read back as it is
                mapping[digits] = x
                continue
            r = x if const == 0 else E.Sub(x, E.IntImm(x.dtype, const)) if const > 0 else \
                E.Add(x, E.IntImm(x.dtype, -const))
            if not digits:
                conds.append(E.EQ(x, E.IntImm(x.dtype, const)))
                continue
            for t, (coef, mark, d, n, size) in enumerate(digits):
                v = r if coef == 1 else E.FloorDiv(r, E.IntImm(x.dtype, coef))
                if t < len(digits) - 1:
                    v = E.FloorMod(v, E.IntImm(x.dtype, size))
                digit_value[(mark.key, d)] = v
            coef, mark, d, n, size = digits[-1]
            if n is not None and d * n < mark.extent:   # the top digit wraps around
                conds += [E.GE(r, E.IntImm(x.dtype, 0)), E.LT(r, E.IntImm(x.dtype, coef * size))]
        for mark, ds in self.marks.values():
            total = None
            for d in ds:
                v = digit_value[(mark.key, d)]
                term = v if d == 1 else E.Mul(v, E.IntImm(v.dtype, d))
                total = term if total is None else E.Add(total, term)
            for t, (var, coef, ext) in enumerate(mark.parts):
                v = total if coef == 1 else E.FloorDiv(total, E.IntImm(total.dtype, coef))
                if t < len(mark.parts) - 1:
                    v = E.FloorMod(v, E.IntImm(total.dtype, ext))
                mapping[var] = v
        return mapping, conds


def invert(indices, iter_vars) -> tuple[Inverse | None, str]:
    """(Inverse, "") when ``indices`` (expressions of the block iterators ``iter_vars``) are
    one-to-one in the iterators and can be read back, else (None, why).

    >>> @T.prim_func
    ... def unflatten(A: T.Buffer((8, 16), "float32"), C: T.Buffer((127,), "float32")):
    ...     for i in range(127):
    ...         with T.block("C"):
    ...             v = T.axis.spatial(127, i)
    ...             C[v] = A[v // 16, v % 16]
    >>> sch = tir.Schedule(unflatten)
    >>> block = sch.get(sch.get_block("C"))
    >>> inverse, why = invert(block.body.value.indices, block.iter_vars)
    >>> mapping, conds = inverse.apply([tir.Var("x"), tir.Var("y")])
    >>> [f"{var} = {e}" for var, e in mapping.items()], conds
    (['v = y + x * 16'], [y >= 0, y < 16])
    >>> invert([block.iter_vars[0].var * 2], block.iter_vars)[1]
    'v * 2 skips values (its terms are not a dense mixed radix)'
    """
    iters, units = {}, {}
    for iv in iter_vars:
        low, ext = const_int(iv.dom.min), const_int(iv.dom.extent)
        if ext == 1 and low is not None:
            units[iv.var] = iv.dom.min
        elif low != 0:
            return None, f"iterator {iv.var.name} does not start at 0"
        else:
            iters[id(iv.var)] = (iv.var, ext)
    # a unit iterator loaded on its own is read back from that index (the element's index there
    # must then be its one value, as the bounds check of apply's caller requires)
    own, rest = {}, []
    for k, index in enumerate(indices):
        unit = next((v for v in units if v is index and all(v is not u for u in own.values())),
                    None)
        if unit is not None:
            own[k] = unit
        rest.append(substitute(index, units) if units else index)
    result = _invert(rest, iters, units, own)
    if result[0] is None:   # try once more on the simplified forms
        again = _invert([simplify(i) for i in rest], iters, units, own)
        if again[0] is not None:
            return again
    return result


def _invert(indices, iters, units, own):
    rows, marks, owner = [], {}, {}
    for k, index in enumerate(indices):
        if k in own:
            rows.append((0, own[k]))
            continue
        lin = linear_form(index)
        digits = []
        for atom, coef in lin.terms.values():
            found = _digit(atom, iters)
            if found is None or coef <= 0:
                return None, f"{index} is not a sum of iterators split or fused by constants"
            mark, d, n = found
            size = _size(mark, d, n)
            if size is None or size > 1:
                digits.append((coef, mark, d, n, size))
        if any(t[4] is None for t in digits) and (len(digits) > 1 or digits[0][0] != 1):
            return None, f"{index} combines an iterator of symbolic extent with others"
        digits.sort(key=lambda t: t[0])
        place = 1
        for coef, mark, d, n, size in digits:
            if coef != place:
                return None, f"{index} skips values (its terms are not a dense mixed radix)"
            place *= size or 1
            for var, _, _ in mark.parts:
                if owner.setdefault(id(var), mark.key) != mark.key:
                    return None, f"iterator {var.name} appears in two different combinations"
            marks.setdefault(mark.key, (mark, []))[1].append((d, n))
        rows.append((lin.const, digits))
    for key, (mark, ds) in marks.items():
        ds.sort(key=lambda t: (t[0], t[1] is None, t[1] or 0))
        place = 1
        for i, (d, n) in enumerate(ds):
            if d != place or (n is None and i < len(ds) - 1):
                return None, f"the indices do not determine {mark.parts[0][0].name} exactly once"
            place = mark.extent if n is None else d * n
        if mark.extent is not None and place < mark.extent:
            return None, f"the indices do not determine {mark.parts[0][0].name} exactly once"
        marks[key] = (mark, [d for d, _ in ds])
    missing = [var.name for var, _ in iters.values() if id(var) not in owner]
    if missing:
        return None, f"the indices do not use iterator {', '.join(missing)}"
    return Inverse(rows, marks, units), ""


def in_bound_predicate(iter_vars, mapping, conds, var_ranges):
    """The condition, simplified over ``var_ranges``, that the iterators ``mapping`` gives lie
    in their domains and ``conds`` hold (constant true when provable)."""
    pred = E.IntImm("bool", 1)
    for iv in iter_vars:
        v = mapping[iv.var]
        known = var_ranges.get(v) if isinstance(v, E.Var) else None
        if known is not None and all(structural_equal(simplify(a), simplify(b)) for a, b in
                                     ((known.min, iv.dom.min), (known.extent, iv.dom.extent))):
            continue   # an iterator of the same domain: in bounds by construction
        pred = E.And(pred, E.And(E.GE(v, iv.dom.min), E.LT(v, E.Add(iv.dom.min, iv.dom.extent))))
    for c in conds:
        pred = E.And(pred, c)
    return tidy(simplify(pred, var_ranges))


def tidy(cond):
    """Comparisons with their left side's terms ordered by decreasing coefficient."""
    if isinstance(cond, (E.And, E.Or)):
        return type(cond)(tidy(cond.a), tidy(cond.b))
    if isinstance(cond, (E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE)) and cond.a.dtype.startswith("int"):
        lin = linear_form(cond.a)
        if len(lin.terms) > 1:
            ordered = sorted(lin.terms.items(), key=lambda kv: -abs(kv[1][1]))
            return type(cond)(from_linear(Linear(dict(ordered), lin.const), cond.a.dtype), cond.b)
    return cond


def covers(mapping, iter_vars, var_ranges) -> str | None:
    """Why the iterators ``mapping`` gives (over ``var_ranges``) provably miss part of the
    domain of ``iter_vars``, or None."""
    for iv in iter_vars:
        low, high = int_bound(mapping[iv.var], var_ranges)
        want_low, ext = const_int(iv.dom.min), const_int(iv.dom.extent)
        if want_low is None or ext is None:
            continue
        if (low is not None and low > want_low) or (high is not None and high < want_low + ext - 1):
            return (f"iterator {iv.var.name} must cover [{want_low}, {want_low + ext}) but the "
                    f"producer only reaches [{low}, {high}]")
    return None


def ranges_of(block: S.Block) -> dict:
    return {iv.var: S.Range(iv.dom.min, iv.dom.extent) for iv in block.iter_vars}
