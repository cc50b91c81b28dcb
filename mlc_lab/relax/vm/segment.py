"""Runs of kernel steps called as one compiled function: the VirtualMachine's fast path for
functions with symbolic sizes, registered calls or several calls in flight.

After a function's first call has gone through every step (each kernel's checked call among
them), ``segment_steps`` groups each maximal run of consecutive steps made of kernels callable on
addresses (``kernel_call``), views and aliases into one ``Segment``. A run of steps

    lv3 = R.call_tir(cls.matmul, (x, w), ...)             # planned output: a fixed address
    lv4 = R.reshape(lv3, R.shape([1, 4, 16]))             # a view: lv3's address
    lv5 = R.call_tir(cls.scores, (lv4, k), ..., m)        # fresh output of m rows, takes m

becomes one LLVM function ``i32 segment(ptr table)`` calling each kernel in turn. What is known
when the segment is made is written into it: the constants' addresses and the planned storages
of the workspace the first call used. The rest is read from the table, filled on each call: the
addresses of tensors made outside the run (arguments, values that registered functions
returned) and of this call's fresh outputs, and the integers the kernels take (symbolic sizes
under this call's values, scalar arguments). Before the one compiled call, the steps of the run
do, in order, what does not compute data (outputs allocated and counted, views and aliases put in
their registers), so registers and memory statistics are those of the step-by-step path.

A call that runs on another workspace (a recursive call, or one from another thread) runs the
steps one by one. A kernel's failure stops the segment, which returns ``status | k << 8`` for
its k-th kernel; that kernel reports the error as it would have, and the error's ``step_name``
tells the program which step to name.
"""
from __future__ import annotations

import ctypes


from ...runtime import llvm_runtime, parallel
from ...runtime.device import zeros
from ...runtime.ndarray import NDArray
from ...tir.expr import IntImm, Var as TirVar
from ..expr import TupleGetItem, Var
from .native_sequence import render_calls

_STEP_SHIFT = 8


def free_after(frame, step) -> None:
    """Count the tensors that die after ``step`` as no longer in use."""
    dying, release = step.after
    frame.stats.live_bytes -= release + sum(frame.sizes.pop(s, 0) for s in dying)


def segment_steps(program, workspace):
    """``program.steps`` with each run of kernels (and the views and aliases among them) that
    can go on addresses replaced by a Segment baked for ``workspace``; None when there is none."""
    runs, plan, run = [], [], []

    def flush():
        if any(_kind(s) == "_Kernel" for s in run):
            segment = Segment(program, list(run), workspace, len(runs))
            runs.append(segment)
            plan.append(segment)
        else:
            plan.extend(run)
        run.clear()

    for step in program.steps:
        if _joins(step):
            run.append(step)
        else:
            flush()
            plan.append(step)
    flush()
    if not runs:
        return None
    jit = llvm_runtime.JITModule("".join(s.text for s in runs))
    for segment in runs:
        segment.load(jit)
    return plan


def _joins(step) -> bool:
    kind = _kind(step)
    return kind in ("_View", "_Bind") or (
        kind == "_Kernel" and step.verified and step.ints is not None and step.packed is None)


def _kind(step) -> str:
    return type(step).__name__


class Segment:
    """Steps ``members`` of ``program`` run as compiled function ``segment{number}``.

    What the steps would do besides computing is prepared when the segment is made, as lists
    walked on each call: ``fresh``, the outputs to allocate; ``assign``, what each register gets
    (a value known now, this call's fresh output, or the step itself run); ``events``, how the
    memory in use changes, step by step (for the peak)."""

    def __init__(self, program, members: list, workspace, number: int):
        self.members, self.workspace, self.symbol = members, workspace, f"segment{number}"
        self.name = f"{members[0].name} .. {members[-1].name}"
        self.after = None   # the events count what each member frees
        self.device = program.vm.device
        self.size = 0
        known = {}          # register -> ("const", address) | ("table", i) | ("tuple", [...])
        values = {}         # register -> ("const", value) | ("fresh", k) | ("tuple", [...])
        self.reads = []     # (table index, register): an address read after the members ran
        self.ints = []      # (table index, reader of the symbolic sizes)
        self.fresh = []     # (table index, static shape, shape readers, numpy dtype, site)
        self.planned = []   # (site, shape readers, numpy dtype): planned outputs of symbolic shape
        self.assign = []    # (register, "const" | "fresh" | "planned" | "tuple" | "step", what)
        self.events = []    # (code, value); see _count
        fresh_of = {}       # site -> k
        self.unplanned = self.fallbacks = 0
        int_index = {}
        calls, self.kernels = [], []

        def source(slot):
            if slot not in known:
                constant = program.template[slot]
                if constant is not None:
                    known[slot] = ("const", constant.address)
                else:
                    known[slot] = ("table", self._index())
                    self.reads.append((known[slot][1], slot))
            return known[slot]

        for step in members:
            kind = _kind(step)
            if kind == "_View":
                inner = known.get(step.input) or source(step.input)
                if inner[0] != "tuple":
                    known[step.slot] = inner
                held = values.get(step.input)
                if held is not None and held[0] == "const" and step.static is not None:
                    values[step.slot] = ("const", step.view(held[1], step.static))
                self._assign(step, values)
            elif kind == "_Bind":
                value = step.expr
                slot = program.slots.get(value) if isinstance(value, Var) else None
                if isinstance(value, TupleGetItem) and isinstance(value.tuple_value, Var):
                    whole = program.slots.get(value.tuple_value)
                    for table in (known, values):
                        if table.get(whole, ("",))[0] == "tuple":
                            table[step.slot] = table[whole][1][value.index]
                elif slot in known:
                    known[step.slot] = known[slot]
                    if slot in values:
                        values[step.slot] = values[slot]
                self._assign(step, values)
            else:
                args = [source(slot) for slot in step.inputs]
                outs, held = [], []
                if step.occupy:
                    self.events.append((0, step.occupy))
                self.unplanned += step.planned_bytes
                self.fallbacks += step.fallbacks
                for (site, planned, shape, np_type), readers in zip(step.outputs,
                                                                   step.shape_readers):
                    if planned and shape is not None:
                        view = workspace.views[site]
                        outs.append(("const", view.address))
                        held.append(("const", view))
                    elif planned:   # symbolic: its storage's address, seen with this call's shape
                        outs.append(("const", workspace.address(site)))
                        held.append(("planned", len(self.planned)))
                        self.planned.append((site, readers, np_type))
                    else:
                        outs.append(("table", self._index()))
                        fresh_of[site] = len(self.fresh)
                        held.append(("fresh", len(self.fresh)))
                        self.events.append((1, len(self.fresh)))
                        self.fresh.append((outs[-1][1], shape, readers, np_type, site))
                known[step.slot] = outs[0] if len(outs) == 1 else ("tuple", outs)
                values[step.slot] = held[0] if len(held) == 1 else ("tuple", held)
                self.assign.append((step.slot,) + values[step.slot])
                ints = []
                for expr, dtype, read in zip(step.int_exprs, step.int_dtypes, step.ints):
                    key = ("var", id(expr)) if isinstance(expr, TirVar) else \
                        ("imm", expr.value) if isinstance(expr, IntImm) else ("expr", id(read))
                    if key not in int_index:
                        int_index[key] = self._index()
                        self.ints.append((int_index[key], read))
                    ints.append(("int", int_index[key], int("".join(filter(str.isdigit, dtype)))))
                calls.append((step.function, args + outs + ints))
                self.kernels.append(step)
            if step.after is not None:
                dying, release = step.after
                if release:
                    self.events.append((2, release))
                for site in dying:
                    self.events.append((3, fresh_of.pop(site)) if site in fresh_of else (4, site))
        self.kept = [(k, site) for site, k in fresh_of.items()]   # fresh outputs alive after it
        self.text = render_calls(calls, self.symbol)
        self.num_cores = max(step.function.num_cores for step in self.kernels)
        self.table_type = ctypes.c_int64 * max(self.size, 1)
        self.cfunc = None

    def _index(self) -> int:
        self.size += 1
        return self.size - 1

    def _assign(self, step, values) -> None:
        held = values.get(step.slot)
        self.assign.append((step.slot,) + held if held is not None else (step.slot, "step", step))

    def load(self, jit) -> None:
        self.jit = jit   # keeps the compiled code alive
        self.cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(jit.address(self.symbol))

    def run(self, frame) -> None:
        if frame.workspace is not self.workspace:
            for step in self.members:
                try:
                    step.run(frame)
                except Exception as err:
                    err.step_name = step.name
                    raise
                if step.after is not None:
                    free_after(frame, step)
            return
        table, env, device = self.table_type(), frame.env, self.device
        fresh, sizes = [], []
        for index, shape, readers, np_type, _ in self.fresh:
            array = zeros(shape if shape is not None else tuple(read(env) for read in readers),
                          np_type)
            out = NDArray.wrap_new(array, device)
            table[index] = out.address
            fresh.append(out)
            sizes.append(array.nbytes)
        planned = [self.workspace.view(site, tuple(read(env) for read in readers), np_type)
                   for site, readers, np_type in self.planned]
        made = {"fresh": fresh, "planned": planned}
        regs = frame.regs
        for slot, kind, what in self.assign:
            if kind == "const":
                regs[slot] = what
            elif kind in made:
                regs[slot] = made[kind][what]
            elif kind == "tuple":
                regs[slot] = tuple(v if k == "const" else made[k][v] for k, v in what)
            else:
                what.run(frame)
        for index, slot in self.reads:
            table[index] = regs[slot].address
        for index, read in self.ints:
            table[index] = read(env)
        self._count(frame, sizes)
        frame.stats.unplanned_bytes += sum(view.numpy_view().nbytes for view in planned)
        parallel.prepare(self.num_cores)
        status = self.cfunc(table)
        if status:
            self._fail(status)

    def _count(self, frame, sizes: list) -> None:
        """The memory statistics of the members, as their own runs count them: events 0 (a
        planned storage comes into use), 1 (fresh output k is allocated), 2 (planned storages
        go out of use), 3 (fresh output k dies), 4 (a tensor made before the segment dies)."""
        stats = frame.stats
        total = sum(sizes)
        stats.allocations += len(sizes)
        stats.bytes_allocated += total
        stats.unplanned_bytes += total + self.unplanned
        stats.plan_fallbacks += self.fallbacks
        live, peak, held = stats.live_bytes, stats.peak_bytes, frame.sizes
        for code, value in self.events:
            if code < 2:
                live += value if code == 0 else sizes[value]
                if live > peak:
                    peak = live
            elif code == 2:
                live -= value
            else:
                live -= sizes[value] if code == 3 else held.pop(value, 0)
        stats.live_bytes, stats.peak_bytes = live, peak
        for k, site in self.kept:
            held[site] = sizes[k]

    def _fail(self, status: int):
        step = self.kernels[status >> _STEP_SHIFT]
        error = step.function._error(status & ((1 << _STEP_SHIFT) - 1),
                                     [None] * len(step.function.func.params), {})
        error.step_name = step.name   # the program names it, as it names a step that fails
        raise error


__all__ = ["Segment", "free_after", "segment_steps"]
