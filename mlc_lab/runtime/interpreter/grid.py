"""Running a whole loop nest at once: every loop gets its own numpy axis, and every BufferStore in
the nest becomes one array operation (an "action"); the actions run in program order.

The planner walks the nest once with loop variables bound to ``arange``s laid along their axes,
recording for each store the bindings it sees and the mask of the conditions, predicates and init
guards around it. ``checks`` then decides, from the actual index arrays, whether the
reordering keeps the sequential result. If it does not, nothing has run yet: the caller steps the
outer loop in Python instead and tries again one level down.
"""
from __future__ import annotations

import math

import numpy as np

from ...tir import stmt as S
from ...tir.functor import StmtExprVisitor
from ...tir.stmt_functor import loads_in
from .checks import NotVectorizable, analyse_action, check_order
from .expr import Evaluator, access_lanes, and_mask, lanes_of, lift, np_dtype

# Above this many points per store the arrays get too large: step the outer loop instead.
MAX_GRID_POINTS = 1 << 22
MAX_AXES = 32  # numpy allows 64 dimensions; deeper nests are stepped


class NestInfo:
    """What a loop nest looks like, independent of run-time values: its loops (axis numbers in
    depth-first order) and the buffers it writes."""
    __slots__ = ("axes", "written")

    def __init__(self, axes: dict, written: frozenset):
        self.axes, self.written = axes, written


def analyse_nest(loop: S.For) -> NestInfo | None:
    """Static facts about the nest under ``loop``, or None when it can never run as a grid."""
    scan = _NestScanner()
    scan.visit(loop)
    if scan.blocked or len(scan.loops) > MAX_AXES:
        return None
    checker = _ControlReadChecker(frozenset(scan.written))
    checker.visit(loop)
    if checker.found:
        return None
    return NestInfo({lp: axis for axis, lp in enumerate(scan.loops)}, frozenset(scan.written))


class _NestScanner(StmtExprVisitor):
    """Collects loops and written buffers; notes allocations, which need a fresh buffer per
    iteration and so cannot share one grid."""

    def __init__(self):
        self.loops, self.written, self.blocked = [], set(), False

    def visit_For(self, loop):
        self.loops.append(loop)
        self.generic_visit(loop)

    def visit_BufferStore(self, store):
        self.written.add(store.buffer)
        self.generic_visit(store)

    def visit_Allocate(self, alloc):
        self.blocked = True

    def visit_Evaluate(self, s):
        if getattr(s.value, "op", None) == "call_extern":   # run one by one (and refused when
            self.blocked = True                             # the interpreter cannot make it)

    def visit_Block(self, block):
        if block.alloc_buffers or block.match_buffers:
            self.blocked = True
        else:
            self.generic_visit(block)


class _ControlReadChecker(StmtExprVisitor):
    """Looks for control expressions (loop bounds, conditions, bindings, indices) that read a
    buffer the nest writes: planning evaluates them before any write happens, so they would see
    stale data."""

    def __init__(self, written: frozenset):
        self.written, self.found = written, False

    def control(self, *exprs):
        self.found |= any(load.buffer in self.written for load in loads_in(exprs))

    def visit_For(self, loop):
        self.control(loop.min, loop.extent)
        self.visit(loop.body)

    def visit_IfThenElse(self, s):
        self.control(s.condition)
        self.visit(s.then_case)
        self.visit(s.else_case)

    def visit_LetStmt(self, s):
        self.control(s.value)
        self.visit(s.body)

    def visit_BlockRealize(self, realize):
        self.control(realize.iter_values, realize.predicate)
        block = realize.block
        self.control(tuple(iv.dom.min for iv in block.iter_vars))
        self.visit(block.init)
        self.visit(block.body)

    def visit_BufferStore(self, store):
        self.control(store.indices)
        self.visit(store.value)

    def visit_BufferLoad(self, load):
        self.control(load.indices)

    def visit_Select(self, e):
        self.control(e.condition)
        self.visit((e.true_value, e.false_value))

    def visit_Call(self, e):
        if e.op in ("if_then_else", "tir.if_then_else"):
            self.control(e.args[0])
            self.visit(e.args[1:])
        else:
            self.generic_visit(e)


class Action:
    """One BufferStore over its enclosing grid loops: the bindings it sees, where it runs, the
    grid ``shape`` (extent on its loops' axes, 1 elsewhere, lanes last), what it touches."""
    __slots__ = ("store", "env", "mask", "axes", "shape", "write", "reads", "reduction", "block")

    def __init__(self, store, env, mask, axes, shape, block):
        self.store, self.env, self.mask, self.axes, self.shape = store, env, mask, axes, shape
        self.block = block
        self.write, self.reads, self.reduction = None, [], None


def run_nest(loop: S.For, nest: NestInfo, env: dict, storages: dict,
             block: str | None = None) -> bool:
    """Run the nest under ``loop`` (inside ``block``) as a grid if that gives the sequential
    result; return False, having done nothing, if not."""
    planner = _Planner(nest, env, storages, block)
    try:
        planner.walk(loop, (), True)
        for action in planner.actions:
            analyse_action(action, storages, planner.extents)
        check_order(planner.actions, planner.extents, storages)
    except NotVectorizable:
        return False
    for action in planner.actions:
        _execute(action, storages, len(nest.axes))
    return True


class _Planner:
    """Walks the nest once, binding loop variables to aranges, and turns each store into an
    Action with the mask of the conditions, predicates and init guards around it."""

    def __init__(self, nest: NestInfo, env: dict, storages: dict, block: str | None):
        self.nest = nest
        self.env = dict(env)
        self.ev = Evaluator(self.env, storages, block)
        self.extents = [1] * len(nest.axes)
        self.actions: list[Action] = []

    def walk(self, s, axes, mask):
        method = getattr(self, "walk_" + type(s).__name__, None)
        if method is None:
            raise NotVectorizable(f"{type(s).__name__} statements are stepped")
        method(s, axes, mask)

    def bind(self, var, value):
        previous = self.env.get(var, _UNBOUND)
        self.env[var] = value
        return previous

    def unbind(self, var, previous):
        if previous is _UNBOUND:
            del self.env[var]
        else:
            self.env[var] = previous

    def walk_For(self, loop, axes, mask):
        low, extent = self.ev.eval(loop.min, mask), self.ev.eval(loop.extent, mask)
        if np.ndim(low) or np.ndim(extent):
            raise NotVectorizable(f"the bounds of loop {loop.loop_var.name} vary inside the nest")
        if extent <= 0:
            return
        axis = self.nest.axes[loop]
        self.extents[axis] = int(extent)
        shape = [1] * len(self.extents)
        shape[axis] = int(extent)
        values = (np.arange(int(extent)) + int(low)).astype(np_dtype(loop.loop_var.dtype))
        previous = self.bind(loop.loop_var, values.reshape(shape))
        self.walk(loop.body, axes + (axis,), mask)
        self.unbind(loop.loop_var, previous)

    def walk_SeqStmt(self, s, axes, mask):
        for stmt in s.seq:
            self.walk(stmt, axes, mask)

    def walk_Evaluate(self, s, axes, mask):
        """Expressions have no side effects: nothing to run."""

    def walk_IfThenElse(self, s, axes, mask):
        cond = self.ev.eval(s.condition, mask)
        self.walk(s.then_case, axes, and_mask(mask, cond))
        if s.else_case is not None:
            self.walk(s.else_case, axes, and_mask(mask, np.logical_not(cond)))

    def walk_LetStmt(self, s, axes, mask):
        previous = self.bind(s.var, self.ev.eval(s.value, mask))
        self.walk(s.body, axes, mask)
        self.unbind(s.var, previous)

    def walk_BlockRealize(self, realize, axes, mask):
        block = realize.block
        values = [self.ev.eval(v, mask) for v in realize.iter_values]
        saved = [(iv.var, self.bind(iv.var, np.asarray(v).astype(np_dtype(iv.var.dtype))))
                 for iv, v in zip(block.iter_vars, values)]
        outer_block, self.ev.block = self.ev.block, block.name_hint
        mask = and_mask(mask, self.ev.eval(realize.predicate, mask))
        if block.init is not None:
            init_mask = mask
            for iv in block.iter_vars:
                if iv.iter_type == "reduce":
                    at_min = np.equal(self.env[iv.var], self.ev.eval(iv.dom.min, mask))
                    init_mask = and_mask(init_mask, at_min)
            self.walk(block.init, axes, init_mask)
        self.walk(block.body, axes, mask)
        self.ev.block = outer_block
        for var, previous in reversed(saved):
            self.unbind(var, previous)

    def walk_BufferStore(self, store, axes, mask):
        lanes = access_lanes(store)
        shape = tuple(self.extents[a] if a in axes else 1 for a in range(len(self.extents)))
        shape += (lanes,) if lanes > 1 else ()
        if math.prod(shape) > MAX_GRID_POINTS:
            raise NotVectorizable(f"the grid of {math.prod(shape)} points is too large")
        self.actions.append(Action(store, dict(self.env), mask, axes, shape, self.ev.block))


_UNBOUND = object()


def _execute(action: Action, storages: dict, ndim: int) -> None:
    ev = Evaluator(action.env, storages, action.block)
    store, storage = action.store, storages[action.store.buffer]
    if action.reduction is not None:
        ufunc, _, term = action.reduction
        value_expr, value = term, ev.eval(term, action.mask)
    else:
        value_expr, value = store.value, ev.eval(store.value, action.mask)
    value = np.asarray(value).astype(storage.flat.dtype, copy=False)
    if len(action.shape) > ndim and lanes_of(value_expr.dtype) == 1:
        value = lift(value)
    write, mask = action.write, action.write.mask
    if action.reduction is not None:
        full = action.shape  # every grid point contributes, including repeats
    else:
        full = np.broadcast_shapes(np.shape(write.flat), np.shape(value),
                                   () if mask is True else np.shape(mask))
    positions, value = np.broadcast_to(write.flat, full), np.broadcast_to(value, full)
    if mask is not True:
        where = np.broadcast_to(mask, full)
        positions, value = positions[where], value[where]
    if action.reduction is not None:
        # the update reads the element it accumulates into; only its first read can see an
        # element this action has not written itself
        storage.check_written(positions, True, action.block)
        action.reduction[0].at(storage.flat, np.ravel(positions), np.ravel(value))
    else:
        storage.flat[positions] = value
    storage.mark_written(positions)
