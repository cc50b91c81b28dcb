"""Running a kernel's statements for a batch of blocks: every thread at once, in lockstep.

Each statement runs once for all lanes (threads) of the batch, as numpy array operations, before
the next one starts. That order is one of those a GPU may choose, and for a kernel without data
races every order gives the same result; the race detector checks that there are none.

Control flow uses a per-lane **mask** (``True``: every lane): an ``if`` on a thread index runs
both branches, each for the lanes whose condition holds; a loop whose bounds differ between
threads runs as many iterations as the longest, each for the lanes still inside. Loads at
masked-off lanes are neither bounds-checked nor counted. A barrier must be reached by all
threads of a block or by none (``BarrierDivergenceError``).

Axes of a value, from the right: the thread (lane) axis last, then the axis of vector lanes
(``T.Ramp``; length 1 for a one-lane value), then one axis per enclosing ``T.vectorized`` loop,
the innermost loop furthest left: ``A[T.Ramp(tx * 2 + i_1, 10, 4)]`` under ``for i_1 in
T.vectorized(2)`` has the shape ``(2, 4, threads)``. Vector lanes keep that one axis at every
loop depth, so a vector computed outside a vectorized loop lines up with one computed inside
it, and the iterations of nested vectorized loops never share an axis.

Indices go through ``position``: the launch-invariant part of an index (see ``prepare``) is a
cached array whose minimum and maximum make the bounds check two comparisons, and whose
counters, which only depend on the offset modulo a sector or the banks, are cached too.
"""
from __future__ import annotations

import numpy as np

from ...tir import expr as E
from ...tir import stmt as S
from ...tir.transform.inject_sync import is_sync
from ..interpreter.expr import _VISIT, Evaluator, _cast, np_dtype
from .errors import BarrierDivergenceError, OutOfBoundsError, SimulatorError
from .memory import LocalMemory, SharedMemory
from .ptx_mma import is_ptx_op, run_ptx_op
from .tensor_core import FragmentError, FragmentMemory, is_tensor_op, run_tensor_op


class LaneEvaluator(Evaluator):
    """The interpreter's expression evaluator with the simulator's memories and cached
    launch-invariant expressions; vector lanes go on the axis before the threads' (see above)."""

    def __init__(self, machine):
        super().__init__(machine.env, {}, None)
        self.machine = machine
        self.cacheable = machine.prep.cacheable
        self.compiled = machine.prep.compiled

    def eval(self, e, mask=True):
        compiled = self.compiled.get(e)
        if compiled is not None:
            return compiled(self.env)
        if e in self.cacheable:
            return self.machine.invariant(e)[0]
        return _LANE_VISIT[type(e)](self, e, mask)

    def _select(self, condition, true_value, false_value, dtype, mask):
        cond = self.eval(condition, mask)
        if np.ndim(cond) == 0:
            return _cast(self.eval(true_value if cond else false_value, mask), dtype)
        yes = self.eval(true_value, narrow(mask, cond) if cond.any() else np.False_)
        no = self.eval(false_value, narrow(mask, ~cond) if not cond.all() else np.False_)
        return _cast(np.where(cond, yes, no), dtype)

    def visit_load(self, e, mask):
        return self.machine.load(e, mask)

    def visit_ramp(self, e, mask):
        # vector lanes on the axis just before the threads', whatever the loop depth (see above)
        base = np.asarray(self.eval(e.base, mask))
        steps = np.arange(e.lanes).reshape(e.lanes, 1)
        return _cast(base + self.eval(e.stride, mask) * steps, e.dtype)

    def visit_broadcast(self, e, mask):
        return self.eval(e.value, mask)


_LANE_VISIT = {**_VISIT, E.BufferLoad: LaneEvaluator.visit_load, E.Ramp: LaneEvaluator.visit_ramp,
               E.Broadcast: LaneEvaluator.visit_broadcast}


def narrow(mask, cond):
    """``mask & cond``, or True when that is every lane."""
    cond = np.asarray(cond, dtype=bool)
    narrowed = cond if mask is True else mask & cond
    return True if narrowed.all() else narrowed


class Machine:
    """One batch of blocks: the lanes, their memories and variables, and the checks and counters
    that watch them (``races``, ``counters``, ``trace`` may each be None)."""

    def __init__(self, prep, lanes, memories: dict, scalars: dict, allocated: dict, races=None,
                 counters=None, trace=None):
        self.prep, self.lanes, self.memories = prep, lanes, dict(memories)
        self.allocated = allocated  # Buffer -> BufferCounters, for shared/local allocations
        self.env = {**scalars, **lanes.values}
        self.races, self.counters, self.trace = races, counters, trace
        self.ev = LaneEvaluator(self)
        self.invariants, self.counted, self.block_bases = {}, {}, {}
        self.vector_depth = 0
        self.stmt = None            # the statement running now, for error messages

    def run(self, stmt, mask=True) -> None:
        _RUN[type(stmt)](self, stmt, mask)

    # -- memory accesses -------------------------------------------------------------------
    def invariant(self, e):
        """(value, min, max) of the launch-invariant expression ``e`` for this batch."""
        hit = self.invariants.get(e)
        if hit is None:
            value = np.asarray(_LANE_VISIT[type(e)](self.ev, e, True))
            ints = value.dtype.kind in "iu" and value.size
            if ints:
                value = value.astype(np.intp)   # gathers with intp indices are the fastest
            hit = (value, int(value.min()) if ints else 0, int(value.max()) if ints else 0)
            self.invariants[e] = hit
        return hit

    def memory(self, buffer):
        try:
            return self.memories[buffer]
        except KeyError:
            raise SimulatorError(f"{self.lanes.kernel.name}: buffer {buffer.name} is neither a "
                                 "kernel parameter nor allocated in the kernel",
                                 self._shown()) from None

    def element_memory(self, buffer, verb: str):
        """The memory of ``buffer`` for an element access (a fragment has no elements to touch)."""
        memory = self.memory(buffer)
        if isinstance(memory, FragmentMemory):
            raise FragmentError(f"{self.lanes.kernel.name}: a thread {verb} an element of "
                                f"{buffer.name}, a {buffer.scope} fragment, whose elements are "
                                "spread over the registers of a warp in an undocumented layout: "
                                "only wmma instructions (tensorize) can use it", self._shown(),
                                buffer=buffer.name)
        return memory

    def position(self, access, memory, mask, verb: str):
        """(bounds-checked element positions, (cached part, offset) or None, counter key)."""
        base_e, rest_e = self.prep.access_split(access)
        if base_e is not None:
            base, lo, hi = self.invariant(base_e)
            offset = 0 if rest_e is None else self.ev.eval(rest_e, mask)
            if type(offset) is not np.ndarray:
                offset = int(offset)
                position = base + offset if offset else base
                if lo + offset >= 0 and hi + offset < memory.size:
                    key = None
                    if mask is True and memory.period:
                        key = (access, offset % memory.period)
                    return position, (base, offset), key
                return self.checked(memory, position, mask, verb), None, None
            position = base + offset
        else:
            position = self.ev.eval(rest_e, mask)
            if type(position) is not np.ndarray and 0 <= position < memory.size:
                # one element for all threads: no gather, and the same counts every time
                return position, None, ((access, -1) if mask is True else None)
        return self.checked(memory, position, mask, verb), None, None

    def checked(self, memory, position, mask, verb):
        bad = (position < 0) | (position >= memory.size)
        if not np.any(bad):
            return position
        live = bad if mask is True else bad & mask
        if np.any(live):
            shape = np.broadcast_shapes(np.shape(live), (self.lanes.size,))
            at = int(np.argmax(np.broadcast_to(live, shape)))
            index = int(np.broadcast_to(position, shape).reshape(-1)[at])
            thread, block = self.lanes.where(at % self.lanes.size)
            raise OutOfBoundsError(
                f"{self.lanes.kernel.name}: thread {thread} of block {block} {verb} "
                f"{memory.name}[{index}], but {memory.name} ({memory.scope} memory) has "
                f"{memory.size} elements", self._shown(), buffer=memory.name, index=index,
                thread=thread, block=block)
        return np.where(bad, 0, position)

    def load(self, e, mask):
        memory = self.element_memory(e.buffer, "reads")
        position, parts, key = self.position(e, memory, mask, "reads")
        if self.counters is not None:
            self.count(memory, position, mask, key, False, self.prep.reuse.get(e, 1.0))
        if self.races is not None and memory.scope == "shared":
            self.races.read(memory, parts or position, mask, self.stmt)
        if self.trace is not None and memory.scope != "local":
            self.trace.record_warp(memory, "load", position, mask, self._shown())
        if parts is not None and memory.scope == "shared":
            return memory.load_at(self.block_base(memory, parts[0]), parts[1])
        return memory.load(position)

    def block_base(self, memory, base):
        """``memory.lane_base + base`` (where each lane's block starts, plus the cached part of
        an index), computed once per batch."""
        key = (memory, id(base))
        found = self.block_bases.get(key)
        if found is None:
            found = self.block_bases[key] = memory.lane_base + base
        return found

    def active_threads(self, mask) -> int:
        if mask is True:
            return self.lanes.size
        mask = np.broadcast_to(mask, np.broadcast_shapes(np.shape(mask), (self.lanes.size,)))
        return int(np.count_nonzero(mask.reshape(-1, self.lanes.size).any(axis=0)))

    def count(self, memory, position, mask, key, write: bool, weight: float) -> int:
        entry = self.counted.get(key) if key is not None else None
        if entry is None:
            entry = memory.counters.measure(position, mask, self.lanes)
            if key is not None:
                self.counted[key] = entry
        return memory.counters.add(entry, write, weight)

    # -- statements ------------------------------------------------------------------------
    def store(self, s, mask):
        self.stmt = s
        value = self.ev.eval(s.value, mask)
        memory = self.element_memory(s.buffer, "writes")
        position, _, key = self.position(s, memory, mask, "writes")
        if self.counters is not None:
            elements = self.count(memory, position, mask, key, True, 1.0)
            self.counters.flops += self.prep.flops[s] * elements
            rounds = self.prep.rounds[s]
            if rounds:
                self.counters.load_rounds += rounds * self.active_threads(mask)
        if self.races is not None and memory.scope == "shared":
            self.races.write(memory, position, mask, s)
        if self.trace is not None and memory.scope != "local":
            self.trace.record_warp(memory, "store", position, mask, self._shown())
            if memory.scope == "global":
                self.trace.record_store(memory, position, mask)
        memory.store(position, value, mask)

    def seq(self, s, mask):
        for stmt in s.seq:
            self.run(stmt, mask)

    def loop(self, s, mask):
        self.stmt = s
        start, extent = self.ev.eval(s.min, mask), self.ev.eval(s.extent, mask)
        var, dtype = s.loop_var, np_dtype(s.loop_var.dtype)
        if np.ndim(start) == 0 and np.ndim(extent) == 0:
            values = np.arange(start, start + extent, dtype=dtype)
            if s.kind == "vectorized":
                # left of the vector-lane and thread axes and of the enclosing vectorized loops'
                self.env[var] = values.reshape((values.size,) + (1,) * (self.vector_depth + 2))
                self.vector_depth += 1
                self.run(s.body, mask)
                self.vector_depth -= 1
            else:
                for value in values:
                    self.env[var] = value
                    self.run(s.body, mask)
        else:   # bounds differ between threads: lanes leave the loop one by one
            start, extent = np.broadcast_arrays(start, extent)
            for step in range(int(np.max(np.where(mask, extent, 0)))):
                inside = narrow(mask, step < extent)
                if inside is not True and not inside.any():
                    break
                self.env[var] = (start + step).astype(dtype)
                self.run(s.body, inside)
        self.env.pop(var, None)

    def branch(self, s, mask):
        self.stmt = s
        cond = self.ev.eval(s.condition, mask)
        if np.ndim(cond) == 0:
            chosen = s.then_case if cond else s.else_case
            if chosen is not None:
                self.run(chosen, mask)
            return
        for case, holds in ((s.then_case, cond), (s.else_case, ~cond)):
            if case is not None:
                inside = narrow(mask, holds)
                if inside is True or inside.any():
                    self.run(case, inside)

    def let(self, s, mask):
        self.stmt = s
        value = self.ev.eval(s.value, mask)
        if isinstance(value, np.ndarray) and value.base is not None:
            value = value.copy()   # a view of local memory would change under later stores
        self.env[s.var] = value
        self.run(s.body, mask)
        self.env.pop(s.var, None)

    def allocate(self, s, mask):
        if s.buffer not in self.memories:
            if s.buffer.scope.startswith("wmma."):
                self.memories[s.buffer] = FragmentMemory(s.buffer, self.lanes)
            else:
                kind = SharedMemory if s.buffer.scope.startswith("shared") else LocalMemory
                self.memories[s.buffer] = kind(s.buffer, self.lanes, self.allocated.get(s.buffer))
        self.run(s.body, mask)

    def evaluate(self, s, mask):
        self.stmt = s
        if is_sync(s):
            self.barrier(s, mask)
        elif is_tensor_op(s.value):
            run_tensor_op(self, s.value, mask)
        elif is_ptx_op(s.value):
            run_ptx_op(self, s.value, mask)
        else:
            self.ev.eval(s.value, mask)

    def barrier(self, s, mask):
        arrived = None
        if mask is not True:
            lanes = self.lanes
            per_block = np.broadcast_to(mask, (lanes.size,)).reshape(lanes.blocks, lanes.threads)
            arrived, everyone = per_block.any(axis=1), per_block.all(axis=1)
            split = np.flatnonzero(arrived & ~everyone)
            if split.size and self.races is not None:
                slot = int(split[0])
                came, missing = per_block[slot], ~per_block[slot]
                block = lanes.block_of(slot)
                first_in = lanes.thread_of(int(np.argmax(came)))
                first_out = lanes.thread_of(int(np.argmax(missing)))
                raise BarrierDivergenceError(
                    f"{lanes.kernel.name}: a barrier (__syncthreads()) is reached by "
                    f"{int(came.sum())} of the {lanes.threads} threads of block {block} (e.g. "
                    f"thread {first_in} arrives, thread {first_out} does not): a barrier must be "
                    "reached by every thread of a block, so it cannot sit inside a loop or if "
                    "whose bounds or condition depend on threadIdx", s, block=block,
                    thread=first_out)
        if self.counters is not None:
            self.counters.barriers += self.lanes.blocks if arrived is None else int(arrived.sum())
        if self.races is not None:
            self.races.barrier(arrived)

    def _shown(self):
        return self.prep.origin.get(self.stmt, self.stmt)


_RUN = {S.BufferStore: Machine.store, S.SeqStmt: Machine.seq, S.For: Machine.loop,
        S.IfThenElse: Machine.branch, S.LetStmt: Machine.let, S.Allocate: Machine.allocate,
        S.Evaluate: Machine.evaluate}
