"""Whether a nest of loops visits every iteration of a block at most once.

A block inside its own loops runs each of its iterator points once. After compute_at under a fused
or split consumer loop, the same points can be visited several times; that is harmless for a block
that recomputes its values from scratch (a reduction whose init sits inside it), but not once the
init has been hoisted above those loops by decompose_reduction: the update would accumulate again.
"""
from __future__ import annotations

import numpy as np

from ...linear_index import linear_form
from ....ir import hooks
from ... import expr as E
from ...stmt_functor import conjuncts, uses_var
from .scope import const_int

# Nests with more iterations than this are judged by their structure alone.
MAX_ENUMERATED = 1 << 20


def repeated_points(realize, loops, outer_loops=()) -> bool | None:
    """True when some iterator point of ``realize`` is visited more than once by ``loops`` (the
    loops between a place and the block, outermost first), False when each is visited at most
    once, None when neither can be shown. ``outer_loops`` enclose ``loops``; they are held at
    their first iteration."""
    loops = list(loops)
    if _affine_injective(realize, loops):
        return False
    extents = [const_int(lp.extent) for lp in loops]
    mins = [const_int(lp.min) for lp in loops]
    if None not in extents and None not in mins and int(np.prod(extents, dtype=np.int64)) <= MAX_ENUMERATED:
        return _enumerate(realize, loops, outer_loops)
    return None


def _enumerate(realize, loops, outer_loops) -> bool | None:
    Evaluator = hooks.need("runtime.evaluator")
    env = {}
    for lp in outer_loops:
        if const_int(lp.min) is None:
            return None
        env[lp.loop_var] = np.int64(const_int(lp.min))
    grids = np.meshgrid(*[np.arange(const_int(lp.min), const_int(lp.min) + const_int(lp.extent),
                                    dtype=np.int64) for lp in loops], indexing="ij")
    for lp, grid in zip(loops, grids):
        env[lp.loop_var] = grid.ravel()
    count = grids[0].size if grids else 1
    evaluator = Evaluator(env, {})
    try:
        keep = np.broadcast_to(np.asarray(evaluator.eval(realize.predicate), bool), (count,))
        points = [np.broadcast_to(np.asarray(evaluator.eval(v), np.int64), (count,))
                  for v in realize.iter_values]
    except RuntimeError:   # a binding reads a buffer or a variable bound elsewhere
        return None
    if not points:
        return int(keep.sum()) > 1
    visited = np.stack(points, axis=1)[keep]
    if not len(visited):
        return False
    low, high = visited.min(axis=0), visited.max(axis=0)
    spans = high - low + 1
    if float(np.prod(spans, dtype=np.float64)) < 2.0 ** 62:   # one int64 key per point
        keys = np.ravel_multi_index(tuple((visited - low).T), tuple(int(s) for s in spans))
        return len(np.unique(keys)) < len(keys)
    return len(np.unique(visited, axis=0)) < len(visited)


def quasi_affine(value, loops) -> bool:
    """True when ``value`` is built from the variables of ``loops`` by ``+``, ``-``, ``*`` by a
    constant and ``//``, ``%`` by a positive constant (terms that use none of them are free)."""
    for atom, _ in linear_form(value).terms.values():
        if not any(uses_var(atom, lp.loop_var) for lp in loops) or isinstance(atom, E.Var):
            continue
        if not (isinstance(atom, (E.FloorDiv, E.FloorMod)) and (const_int(atom.b) or 0) > 0
                and quasi_affine(atom.a, loops)):
            return False
    return True


def affine_problem(realize, loops, overlap: bool = False, predicate: bool = True) -> str | None:
    """Why the bindings of ``realize`` are not affine in ``loops`` as the reference compiler
    requires before reordering or parallelising them (None when they are): each binding must be
    quasi-affine and dense in those loops (its loop terms a mixed radix starting at 1, as split
    and fuse make them: ``i_0 * 4 + i_1``, not ``l * 16``), and each condition of its T.where
    that uses them must bound one of the bindings or a part of one (``i_0 * 4 + i_1 < 10``).
    ``overlap=True`` lets the digits overlap (``v0 * 2 + v1``, v1 in 0..4) but not skip values.
    ``predicate=False`` judges the bindings alone: a condition of the T.where only takes
    iterations away, so it cannot make two iterations meet at one block instance."""
    bounds = [(linear_form(c.a), const_int(c.b)) for c in conjuncts(realize.predicate)
              if isinstance(c, E.LT) and const_int(c.b) is not None]
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if not quasi_affine(value, loops):
            return f"{iv.var.name} = {value} is not quasi-affine"
        if not _dense(value, loops, bounds, overlap):
            return f"{iv.var.name} = {value} skips values (a multiple of a loop is not dense)"
    for cond in conjuncts(realize.predicate) if predicate else ():
        if isinstance(cond, E.IntImm) or not any(uses_var(cond, lp.loop_var) for lp in loops):
            continue
        bounded = cond.a if isinstance(cond, (E.LT, E.LE)) else cond.b if isinstance(cond, (E.GT, E.GE)) else None
        if bounded is None or not any(_part_of(bounded, part) for v in realize.iter_values
                                      for part in _sums_in(v)):
            return f"the condition {cond} of its T.where bounds none of its bindings"
    return None


def _dense(value, loops, bounds=(), overlap: bool = False) -> bool:
    """The loop terms of ``value`` form a mixed radix from 1 up. A T.where bound ``s < c`` on a
    part ``s`` of them (as a split that does not divide makes) counts as one digit of size c."""
    ours = {id(lp.loop_var): lp for lp in loops}
    terms = {}
    for key, (atom, coef) in linear_form(value).terms.items():
        if not any(uses_var(atom, lp.loop_var) for lp in loops):
            continue
        digit = _digit(atom, ours)
        if digit is None:
            return True          # a // or % of a sum (a fused loop split again): not judged here
        terms[key] = (abs(coef), _digit_size(digit, ours))
    for lin, limit in sorted(bounds, key=lambda b: -len(b[0].terms)):
        part = {key: coef for key, (_, coef) in lin.terms.items()}
        if len(part) > 1 and all(key in terms and terms[key][0] == abs(c) for key, c in part.items()):
            low = min(terms[key][0] for key in part)
            for key in part:
                del terms[key]
            terms[tuple(part)] = (low, -(-(limit - lin.const) // low))
    expected = 1
    for coef, size in sorted(terms.values(), key=lambda t: t[0]):
        if size == 1:
            continue
        if coef > expected or (coef < expected and not overlap):
            return False
        if size is None:
            return True
        expected = max(expected, coef * size)
    return True


def _sums_in(value) -> list:
    """``value`` and the dividends of the ``//`` and ``%`` inside it."""
    out = [value]
    for atom, _ in linear_form(value).terms.values():
        if isinstance(atom, (E.FloorDiv, E.FloorMod)):
            out += _sums_in(atom.a)
    return out


def _part_of(a, b) -> bool:
    """The terms of ``a`` are terms of ``b`` (``k_1 * 2 + k_2`` of ``k_0 * 4 + k_1 * 2 + k_2``)."""
    lb = {k: c for k, (_, c) in linear_form(b).terms.items()}
    return all(lb.get(k) == c for k, (_, c) in linear_form(a).terms.items())


def _affine_injective(realize, loops) -> bool:
    """A proof without enumeration, for bindings made by split and fuse. Each binding is read as
    a sum of constant multiples of *digits* of the loops, a digit being ``(v // d) % m`` (v a
    loop variable starting at 0; ``floordiv``/``floormod`` by constants nest into one digit).
    The proof holds when the digits of each loop of extent > 1 are disjoint and together cover
    the loop (so they determine it), no digit appears in two bindings, and within a binding the
    coefficients form a mixed radix (sorted by size, each exceeds what the smaller terms can
    span). Then two distinct loop points give two distinct iterator points. False means "not
    shown", not "repeats"."""
    ours = {id(lp.loop_var): lp for lp in loops}
    digits_of: dict = {}     # loop id -> [(d, m)] of the digits used
    for value in realize.iter_values:
        terms = []
        for atom, coef in linear_form(value).terms.values():
            digit = _digit(atom, ours)
            if digit is None:
                if any(uses_var(atom, lp.loop_var) for lp in loops):
                    return False
                continue   # a term of outer loops: constant here
            loop_id, d, m = digit
            if const_int(ours[loop_id].extent) is None and (d, m) != (1, None):
                return False
            digits_of.setdefault(loop_id, []).append((d, m))
            size = _digit_size(digit, ours)
            terms.append((abs(coef), size))
        span = 0
        ordered = sorted((t for t in terms if t[1] != 1), key=lambda t: t[0])
        for n, (coef, size) in enumerate(ordered):
            if coef <= span or (size is None and n != len(ordered) - 1):
                return False   # a digit of symbolic size only as the binding's highest one
            span += coef * ((size or 1) - 1)
    for lp in loops:
        extent = const_int(lp.extent)
        if extent != 1 and not _digits_cover(sorted(digits_of.get(id(lp.loop_var), [])), extent):
            return False
    return True


def _digit(e, ours):
    """``(loop id, d, m)`` when ``e`` is ``(v // d) % m`` of one of ``ours`` (m None: no modulo)."""
    if isinstance(e, E.Var):
        return (id(e), 1, None) if id(e) in ours else None
    if not isinstance(e, (E.FloorDiv, E.FloorMod)) or const_int(e.b) is None or const_int(e.b) < 1:
        return None
    inner = _digit(e.a, ours)
    if inner is None or const_int(ours[inner[0]].min) != 0:
        return None
    loop_id, d, m = inner
    c = const_int(e.b)
    if isinstance(e, E.FloorDiv):
        if m is not None and m % c:
            return None
        return loop_id, d * c, None if m is None else m // c
    if m is not None and m % c:
        return None
    return loop_id, d, c


def _digit_size(digit, ours):
    """How many values the digit ``(loop id, d, m)`` takes over its loop (None: symbolic)."""
    loop_id, d, m = digit
    extent = const_int(ours[loop_id].extent)
    if extent is None:
        return None
    return -(-extent // d) if m is None else min(m, -(-extent // d))


def _digits_cover(digits, extent: int) -> bool:
    """The digits, sorted by place value, follow each other exactly from 1 up to ``extent``."""
    place = 1
    for d, m in digits:
        if d != place:
            return False
        if m is None:
            return True
        place = d * m
    return extent is not None and place >= extent   # a symbolic extent: not shown covered
