"""Whether a nest of loops visits every iteration of a block at most once.

A block inside its own loops runs each of its iterator points once. After compute_at under a fused
or split consumer loop, the same points can be visited several times; that is harmless for a block
that recomputes its values from scratch (a reduction whose init sits inside it), but not once the
init has been hoisted above those loops by decompose_reduction: the update would accumulate again.
"""
from __future__ import annotations

import numpy as np

from ...stmt_functor import uses_var
from .common import const_int

# Nests with more iterations than this are judged by their structure alone.
MAX_ENUMERATED = 1 << 20


def repeated_points(realize, loops, outer_loops=()) -> bool | None:
    """True when some iterator point of ``realize`` is visited more than once by ``loops`` (the
    loops between a place and the block, outermost first), False when each is visited at most
    once, None when neither can be shown. ``outer_loops`` enclose ``loops``; they are held at
    their first iteration."""
    loops = list(loops)
    extents = [const_int(lp.extent) for lp in loops]
    mins = [const_int(lp.min) for lp in loops]
    if None not in extents and None not in mins and int(np.prod(extents, dtype=np.int64)) <= MAX_ENUMERATED:
        return _enumerate(realize, loops, outer_loops)
    return None if not _is_permutation(realize, loops) else False


def _enumerate(realize, loops, outer_loops) -> bool | None:
    from ....runtime.interpreter_expr import Evaluator
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
    return len(np.unique(visited, axis=0)) < len(visited)


def _is_permutation(realize, loops) -> bool:
    """Each loop is the whole binding of one iterator, and no iterator uses two loops."""
    for lp in loops:
        users = [v for v in realize.iter_values if uses_var(v, lp.loop_var)]
        if len(users) != 1 or users[0] is not lp.loop_var:
            return False
    return True
