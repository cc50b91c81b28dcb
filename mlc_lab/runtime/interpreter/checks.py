"""Why running a loop nest as a grid gives the sequential result: the checks, made with the
nest's actual index arrays before anything runs.

Running a nest as a grid reorders the program (all iterations of the first store, then all of
the second, ...). That is exact when
  (a) within an action no two grid points write one element, unless the store is a reduction
      update (``B[i] = B[i] + e``, max, min, *, -) that ``np.<op>.at`` accumulates in grid order;
  (b) where an action reads the buffer it writes, no grid point reads an element that an earlier
      point wrote (numpy reads every point before writing any); a reduction reads it only at
      the element it updates;
  (c) for actions s1 before s2 and an element both touch, one of them writing: every s1 access
      happens at an iteration of their shared loops no later than every conflicting s2 access
      (iterations of the shared loops are numbered row-major, so "no later" is a comparison of
      integers, computed per element with np.maximum.at / np.minimum.at).
"""
from __future__ import annotations

import numpy as np

from ...tir import expr as E
from ...tir import stmt as S
from ...tir.functor import StmtExprVisitor
from .expr import Evaluator, access_lanes, and_mask, lanes_of, lift


class NotVectorizable(Exception):
    """This loop nest cannot run as one grid (the message says why); step its outer loop."""


class Access:
    """Flat positions one load or store touches, and where it really runs (arrays at the rank of
    its action, so they broadcast together)."""
    __slots__ = ("buffer", "node", "flat", "mask")

    def __init__(self, buffer, node, flat, mask):
        self.buffer, self.node, self.flat, self.mask = buffer, node, flat, mask


def analyse_action(action, storages: dict, extents: list) -> None:
    """Work out what ``action`` touches and apply checks (a) and (b) to it."""
    ev = Evaluator(action.env, storages)
    store, vector = action.store, len(action.shape) > len(extents)
    rank_mask = lift(action.mask) if vector and action.mask is not True else action.mask
    action.write = Access(store.buffer, store, ev.load_position(store, action.mask), rank_mask)
    _ReadCollector(ev, action.mask, vector, action.reads).visit(store.value)
    own_reads = [r for r in action.reads if r.buffer is store.buffer]
    if not _injective(action.write, action.shape):
        action.reduction = _match_reduction(store)
        if action.reduction is None or len(own_reads) != 1:
            raise NotVectorizable(f"several iterations write one element of {store.buffer.name}")
    for read in own_reads:
        same = np.equal(action.write.flat, read.flat)
        if read.mask is not True:
            same = same | np.logical_not(read.mask)
        if np.all(same):
            continue
        if action.reduction is None:
            size = storages[store.buffer].flat.size
            last_read = _positions([read], action.axes, extents, size, last=True)
            first_write = _positions([action.write], action.axes, extents, size, last=False)
            if not np.any(last_read > first_write):
                continue
        raise NotVectorizable(f"a store to {store.buffer.name} reads elements it wrote earlier")


class _ReadCollector(StmtExprVisitor):
    """The loads of a stored value, each under the mask of the branches it sits in (so a padded
    read in the untaken side of an if_then_else is not counted)."""

    def __init__(self, ev: Evaluator, mask, vector: bool, out: list):
        self.ev, self.mask, self.vector, self.out = ev, mask, vector, out

    def visit_BufferLoad(self, load):
        flat = self.ev.load_position(load, self.mask)
        if self.vector and access_lanes(load) == 1:
            flat = lift(flat)
        mask = lift(self.mask) if self.vector and self.mask is not True else self.mask
        self.out.append(Access(load.buffer, load, flat, mask))

    def visit_Select(self, e):
        self.branches(e, e.condition, e.true_value, e.false_value)

    def visit_Call(self, e):
        if e.op in ("if_then_else", "tir.if_then_else"):
            self.branches(e, *e.args)
        else:
            self.generic_visit(e)

    def branches(self, e, condition, true_value, false_value):
        if lanes_of(condition.dtype) != 1:  # per-lane condition: both sides run on every lane
            self.generic_visit(e)
            return
        outer = self.mask
        cond = self.ev.eval(condition, outer)
        self.mask = and_mask(outer, cond)
        self.visit(true_value)
        self.mask = and_mask(outer, np.logical_not(cond))
        self.visit(false_value)
        self.mask = outer


def _injective(write: Access, shape: tuple) -> bool:
    """True when no two running grid points of the action write the same element."""
    mask = write.mask
    cover = np.broadcast_shapes(np.shape(write.flat), () if mask is True else np.shape(mask))
    cover = (1,) * (len(shape) - len(cover)) + cover
    if any(c == 1 and s > 1 for c, s in zip(cover, shape)):
        # a loop the index ignores repeats every element, unless nothing runs at all
        return mask is not True and not np.any(mask)
    points = np.broadcast_to(write.flat, cover)
    if mask is not True:
        points = points[np.broadcast_to(mask, cover)]
    points = np.ravel(points)
    if points.size < 2:
        return True
    if points.max() > 8 * points.size:  # sparse: sorting is cheaper than a huge histogram
        return np.unique(points).size == points.size
    return int(np.bincount(points).max()) <= 1


_REDUCTIONS = {E.Add: np.add, E.Mul: np.multiply, E.Max: np.maximum, E.Min: np.minimum,
               E.Sub: np.subtract}


def _match_reduction(store: S.BufferStore):
    """(ufunc, self_load, term) when the store is ``B[idx] = op(B[idx], term)``, else None."""
    value = store.value
    ufunc = _REDUCTIONS.get(type(value))
    if ufunc is None:
        return None
    candidates = [(value.a, value.b)] if ufunc is np.subtract else [(value.a, value.b),
                                                                    (value.b, value.a)]
    for self_load, term in candidates:
        if isinstance(self_load, E.BufferLoad) and self_load.buffer is store.buffer:
            return ufunc, self_load, term
    return None


def check_order(actions: list, extents: list, storages: dict) -> None:
    """Check (c): running each action to completion, in program order, keeps every dependence."""
    for j, late in enumerate(actions):
        late_touched = {late.store.buffer} | {r.buffer for r in late.reads}
        for early in actions[:j]:
            shared = _common_prefix(early.axes, late.axes)
            for buffer in late_touched & ({early.store.buffer} | {r.buffer for r in early.reads}):
                w1 = [early.write] if early.store.buffer is buffer else []
                w2 = [late.write] if late.store.buffer is buffer else []
                r1 = [r for r in early.reads if r.buffer is buffer]
                r2 = [r for r in late.reads if r.buffer is buffer]
                size = storages[buffer].flat.size
                pairs = ([(w1, r2 + w2)] if w1 else []) + ([(r1, w2)] if w2 else [])
                for first_group, second_group in pairs:
                    if not first_group or not second_group:
                        continue
                    last = _positions(first_group, shared, extents, size, last=True)
                    first = _positions(second_group, shared, extents, size, last=False)
                    if np.any(last > first):
                        raise NotVectorizable(f"a later iteration's access to {buffer.name} "
                                              "would move before an earlier one")


def _common_prefix(a: tuple, b: tuple) -> tuple:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _positions(accesses: list, shared: tuple, extents: list, size: int, last: bool) -> np.ndarray:
    """Per element, the last (or first) iteration of the ``shared`` loops at which one of the
    ``accesses`` touches it: -1 (or int64 max) where none does. Axes an access does not vary
    along are pinned to their last (or first) iteration, which is where the extreme lies."""
    out = np.full(size, -1 if last else np.iinfo(np.int64).max, dtype=np.int64)
    combine = np.maximum if last else np.minimum
    for acc in accesses:
        mask_shape = () if acc.mask is True else np.shape(acc.mask)
        shape = np.broadcast_shapes(np.shape(acc.flat), mask_shape)
        position, stride = np.int64(0), 1
        for axis in reversed(shared):
            n = extents[axis]
            if axis < len(shape) and shape[axis] > 1:
                along = np.arange(n, dtype=np.int64).reshape(
                    [n if k == axis else 1 for k in range(len(shape))])
            else:
                along = n - 1 if last else 0
            position, stride = position + along * stride, stride * n
        flat, position = np.broadcast_to(acc.flat, shape), np.broadcast_to(position, shape)
        if acc.mask is not True:
            where = np.broadcast_to(acc.mask, shape)
            flat, position = flat[where], position[where]
        combine.at(out, np.ravel(flat), np.ravel(position))
    return out
