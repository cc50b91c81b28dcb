"""The layout a buffer's access pattern asks for (``suggest_index_map``): read the flattened
index of an access as a mixed-radix number whose digits are pieces of the loop variables
(``(i // 16) % 4``), and lay the buffer out with those digits ordered by loop, outer first, so
that consecutive iterations of the inner loops touch consecutive elements.

>>> from mlc_lab import tir
>>> i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
>>> loops = [tir.For(i, 0, 4, "serial", tir.Evaluate(0)), tir.For(j, 0, 8, "serial", tir.Evaluate(0))]
>>> suggest(tir.decl_buffer((32,)), [j * 4 + i], loops)       # a transposed walk
IndexMap(lambda i0: (i0 % 4, i0 // 4))
"""
from __future__ import annotations

from ...arith import linear_form, simplify
from .. import expr as E
from ..index_map import IndexMap
from ..stmt import Range


# -- digits of the loop variables -------------------------------------------------------------------
class _Split:
    """``(loop_var // lower) % extent`` of the loop numbered ``loop`` (its place in ``loops``)."""
    __slots__ = ("loop", "total", "lower", "extent", "scale")

    def __init__(self, loop: int, total: int, lower: int, extent: int, scale: int = 0):
        self.loop, self.total, self.lower, self.extent, self.scale = loop, total, lower, extent, scale

    def but(self, lower: int, extent: int) -> "_Split":
        return _Split(self.loop, self.total, lower, extent, self.scale)


def _const(e):
    e = simplify(E.convert(e))
    return e.value if isinstance(e, E.IntImm) else None


def _split_of(atom, loops: dict):
    """``atom`` (a loop variable, or floordiv/floormod of one by constants) as a _Split, or None.
    ``loops`` maps id(loop var) -> (number, extent)."""
    if isinstance(atom, E.Var):
        found = loops.get(id(atom))
        return None if found is None else _Split(found[0], found[1], 1, found[1])
    if not isinstance(atom, (E.FloorDiv, E.FloorMod)):
        return None
    c = _const(atom.b)
    inner = _split_of(atom.a, loops) if c is not None and c > 0 else None
    if inner is None:
        return None
    whole = inner.lower * inner.extent >= inner.total   # no wrap-around yet
    if isinstance(atom, E.FloorDiv):
        if inner.extent % c == 0 or whole:
            return inner.but(inner.lower * c, -(-inner.extent // c))
        return None
    if c >= inner.extent:
        return inner
    if inner.extent % c == 0 or whole:
        return inner.but(inner.lower, c)
    return None


def detect_splits(index, loops: dict) -> list | None:
    """The digits of ``index`` (an integer expression of the loop variables), largest scale
    first, when it is a mixed-radix number of disjoint digits of the loops: each digit's scale
    is the product of the extents of the digits below it (times the scale of the lowest one).
    Neighbouring digits of the same loop merge (``i % 4 + (i // 4 % 2) * 4`` is ``i % 8``).
    None for any other index."""
    lin = linear_form(index)
    splits = []
    for atom, coef in lin.terms.values():
        split = _split_of(atom, loops)
        if split is None or not isinstance(coef, int) or coef <= 0:
            return None
        if split.extent > 1:
            split.scale = coef
            splits.append(split)
    if not splits:
        return None
    splits.sort(key=lambda s: s.scale)
    for low, high in zip(splits, splits[1:]):
        if high.scale != low.scale * low.extent:
            return None
    merged = [splits[0]]
    for s in splits[1:]:
        last = merged[-1]
        if s.loop == last.loop and s.lower == last.lower * last.extent:
            merged[-1] = last.but(last.lower, last.extent * s.extent)
        else:
            merged.append(s)
    by_loop = {}
    for s in merged:
        by_loop.setdefault(s.loop, []).append(s)
    for parts in by_loop.values():   # the digits of one loop must not overlap
        parts = sorted(parts, key=lambda s: s.lower)
        if any(b.lower < a.lower * a.extent for a, b in zip(parts, parts[1:])):
            return None
    return merged[::-1]


# -- digits of a mixed-radix sum (the simplification the maps need) ---------------------------------
def _max(terms) -> int:
    return sum(c * (e - 1) for c, _, e in terms)


def _shrink(t, q: int, div: bool):
    """``t // q`` (div) or ``t % q`` of a term, folding a division of a division."""
    if div and isinstance(t, E.FloorDiv) and isinstance(t.b, E.IntImm):
        return E.FloorDiv(t.a, E.const(t.b.value * q, t.b.dtype))
    return simplify(E.floordiv(t, q) if div else E.floormod(t, q))


def _divide(terms, p: int):
    high = [(c // p, t, e) for c, t, e in terms if c % p == 0]
    low = sorted(((c, t, e) for c, t, e in terms if c % p), key=lambda x: x[0])
    if _max(low) < p:
        return high
    c, t, e = low[-1]
    if p % c == 0 and _max(low[:-1]) < c:
        q = p // c
        return high + ([(1, _shrink(t, q, True), -(-e // q))] if e > q else [])
    return None


def _modulo(terms, m: int):
    low = sorted(((c, t, e) for c, t, e in terms if c % m), key=lambda x: x[0])
    if _max(low) < m:
        return low
    c, t, e = low[-1]
    if m % c == 0 and _max(low[:-1]) < c:
        q = m // c
        return low[:-1] + [(c, t if e <= q else _shrink(t, q, False), min(e, q))]
    return None


def _sum(terms, dtype: str):
    out = None
    for c, t, _ in sorted(terms, key=lambda x: -x[0]):
        term = t if c == 1 else t * E.const(c, dtype)
        out = term if out is None else out + term
    return E.const(0, dtype) if out is None else out


def digit(terms, place: int, modulus: int | None, dtype: str, ranges: dict):
    """``(sum(c * t) // place) % modulus`` (no modulo when ``modulus`` is None) of terms
    ``(c, t, extent)`` with each ``t`` in ``[0, extent)``, as a sum of pieces of the ``t``."""
    part = _divide(terms, place) if place != 1 else list(terms)
    if part is not None and modulus is not None:
        part = _modulo(part, modulus)
    if part is not None:
        return _sum(part, dtype)
    value = E.floordiv(_sum(terms, dtype), place) if place != 1 else _sum(terms, dtype)
    return simplify(value if modulus is None else E.floormod(value, modulus), ranges)


# -- the suggestion ---------------------------------------------------------------------------------
def suggest(buffer, indices, loops, predicate=True) -> IndexMap | None:
    """See :func:`mlc_lab.tir.schedule.analysis.suggest_index_map`."""
    del predicate   # the map below is a bijection of the buffer whatever the loops visit
    shape = [_const(d) for d in buffer.shape]
    if not shape or len(indices) != len(shape) or any(d is None for d in shape):
        return None
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= d
    if buffer.strides and [_const(s) for s in buffer.strides] != strides:
        return None   # rows apart from each other: the relayout would not cover the buffer
    by_var = {}
    for n, loop in enumerate(loops):
        lo, extent = _const(loop.min), _const(loop.extent)
        if lo != 0 or extent is None or extent <= 0:
            return None
        by_var[id(loop.loop_var)] = (n, extent)
    flat = None
    for s, index in zip(strides, indices):
        term = E.convert(index) * s
        flat = term if flat is None else flat + term
    splits = detect_splits(flat, by_var)
    if splits is None:
        return None
    order = sorted(range(len(splits)), key=lambda k: (splits[k].loop, -splits[k].lower))
    dtype = buffer.shape[0].dtype if buffer.shape else "int32"
    size = 1
    for d in shape:
        size *= d
    places = []   # place value of each digit in the new layout, largest first
    place = 1
    for s in reversed(splits):
        places.insert(0, place)
        place *= s.extent
    extents = [s.extent for s in splits]
    extents[0] = -(-size // places[0])    # the top digit takes whatever is left of the buffer
    # the forward map: buffer indices -> digits
    xs = [E.Var(f"i{d}", dtype) for d in range(len(shape))]
    x_ranges = {x: Range(E.const(0, dtype), E.const(d, dtype)) for x, d in zip(xs, shape)}
    x_terms = [(s, x, d) for s, x, d in zip(strides, xs, shape)]
    digits = [digit(x_terms, places[k], None if k == 0 else extents[k], dtype, x_ranges)
              for k in range(len(splits))]
    # the inverse: digits -> buffer indices
    ys = [E.Var(f"i{k}", dtype) for k in range(len(splits))]
    y_terms = [(places[order[k]], y, extents[order[k]]) for k, y in enumerate(ys)]
    y_ranges = {y: Range(E.const(0, dtype), E.const(e, dtype)) for y, (_, _, e) in zip(ys, y_terms)}
    back = [digit(y_terms, strides[d], None if d == 0 else shape[d], dtype, y_ranges)
            for d in range(len(shape))]
    return IndexMap(xs, [digits[k] for k in order], IndexMap(ys, back))

