"""One compiled call for a whole relax function: the VirtualMachine's fast path at small sizes.

When every binding of a prepared function (``program.Program``) is a kernel compiled for the CPU
that takes data addresses (static shapes on both sides, checked by the first call), the steps
do not change from call to call: the same kernels, on the same constants and planned storages,
in the same order. ``NativeSequence`` renders them as one LLVM function

    i32 sequence(ptr addresses)   ; addresses: the arguments', then each fresh output's

that calls each kernel in turn on addresses known when it is built (the weights, the planned
storages of its own workspace) or read from the table (the arguments, and the outputs allocated
for this call). A call then costs one check of its arguments, the allocation of its outputs and
one call into compiled code, however many kernels the function has: at batch 1, where each
kernel takes a microsecond, the interpreter's per-step work was most of the time.

A kernel's failure (a status other than 0) stops the sequence; the sequence returns
``status | step << 8`` and the step's own function reports the error as it would have.
"""
from __future__ import annotations

import ctypes
import threading


from ...runtime import llvm_runtime, parallel
from ...runtime.device import zeros
from ...runtime.ndarray import NDArray
from ..expr import Var

_STEP_SHIFT = 8


class NativeSequence:
    """The kernels of ``program``'s steps, called from one compiled function."""

    def __init__(self, program, stats, result_bytes: int):
        self.program, self.steps = program, program.steps
        self.stats, self.result_bytes = stats, result_bytes   # those of one call, replayed
        self.kernels = [step for step in self.steps if _kind(step) == "_Kernel"]
        self.outputs = [(site, shape, np_type) for step in self.kernels
                        for site, planned, shape, np_type in step.outputs if not planned]
        self.num_cores = max(step.function.num_cores for step in self.kernels)
        self.lock = threading.Lock()   # one call at a time uses the workspace
        # The storages of one workspace of the program, for this sequence alone from now on
        # (given back if the sequence cannot be made).
        self.workspace = program.idle.pop() if program.layout.sizes else None
        try:
            self._compile()
        except BaseException:
            if self.workspace is not None:
                program.idle.append(self.workspace)
            raise

    def _compile(self) -> None:
        program = self.program
        table = {}    # register -> index in the address table
        for slot in range(len(program.func.params)):
            table[slot] = len(table)
        for site, _, _ in self.outputs:
            table[("site", site)] = len(table)
        self.size = len(table)
        calls = []
        for step in self.kernels:
            args = []
            for slot in step.inputs:
                args.append(self._address(slot, table))
            for site, planned, _, _ in step.outputs:
                args.append(("const", self.workspace.views[site].address) if planned
                            else ("table", table[("site", site)]))
            calls.append((step.function, args))
        # Per step: its register and what fills it (an index into this call's fresh outputs,
        # or a planned storage's view).
        fresh_index = {site: k for k, (site, _, _) in enumerate(self.outputs)}
        self.assign = [(step.slot, step if _kind(step) != "_Kernel" else
                        [self.workspace.views[site] if planned else fresh_index[site]
                         for site, planned, _, _ in step.outputs]) for step in self.steps]
        # The result, when it is a single fresh output of a kernel: returned without registers.
        body = program.func.body.body
        result_slot = program.slots.get(body) if isinstance(body, Var) else None
        self.direct = next((items[0] for slot, items in self.assign if slot == result_slot
                            and type(items) is list and len(items) == 1 and type(items[0]) is int),
                           None)
        self.text = render_calls(calls)
        self.jit = llvm_runtime.JITModule(self.text)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(self.jit.address("sequence"))
        self._table_type = ctypes.c_int64 * max(self.size, 1)

    def _address(self, slot: int, table: dict):
        program = self.program
        if slot in table:
            return ("table", table[slot])
        constant = program.template[slot]
        if constant is not None:
            return ("const", constant.address)
        for step in self.steps:   # an earlier step's output, or a view of one
            if step.slot == slot and _kind(step) == "_View":
                return self._address(step.input, table)
            if step.slot == slot and _kind(step) == "_Bind":
                raise _NotSequence(f"register {slot} is bound to a tuple item or an alias")
            if step.slot == slot:
                (site, planned, _, _), = step.outputs
                return ("const", self.workspace.views[site].address) if planned \
                    else ("table", table[("site", site)])
        raise _NotSequence(f"register {slot} is neither an argument, a constant nor a kernel's output")

    def run(self, args, stats):
        """(result, bytes it holds), as ``Program.run``; None when another call holds the
        sequence's workspace (the caller then takes the step-by-step path)."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            table = self._table_type()
            k = 0
            for arg in args:
                table[k] = arg.address
                k += 1
            fresh, device = [], self.program.vm.device
            for _, shape, np_type in self.outputs:
                out = NDArray.wrap_new(zeros(shape, np_type), device)
                fresh.append(out)
                table[k] = out.address
                k += 1
            parallel.prepare(self.num_cores)
            status = self._cfunc(table)
            if status:
                self._fail(status)
            if self.direct is not None:   # the result is one fresh output
                stats.replay(self.stats)
                return fresh[self.direct], self.result_bytes
            regs = self.program.template.copy()
            regs[:len(args)] = args
            frame = _Result(regs)
            for slot, items in self.assign:
                if type(items) is not list:   # a view, or an alias / tuple item
                    regs[slot] = items.view(regs[items.input], items.static) \
                        if _kind(items) == "_View" else items.reader(frame)
                    continue
                outs = [fresh[item] if type(item) is int else item for item in items]
                regs[slot] = outs[0] if len(outs) == 1 else tuple(outs)
            stats.replay(self.stats)
            return self.program.result(frame), self.result_bytes
        finally:
            self.lock.release()

    def _fail(self, status: int):
        step = self.kernels[status >> _STEP_SHIFT]
        error = step.function._error(status & ((1 << _STEP_SHIFT) - 1),
                                     [None] * len(step.function.func.params), {})
        error.add_note(f"while computing {step.name} in relax function {self.program.name}")
        raise error


def runs_as_sequence(program) -> bool:
    """Whether every step of ``program`` is a CPU kernel now called on bare addresses, a view of
    static shape, or an alias or tuple item (and there is a kernel)."""
    kinds = [_kind(step) for step in program.steps]
    return "_Kernel" in kinds and all(
        kind == "_Bind" or (kind == "_View" and step.static is not None)
        or (kind == "_Kernel" and step.verified and step.packed is None and not step.ints)
        for kind, step in zip(kinds, program.steps))


def _kind(step) -> str:
    return type(step).__name__


class _Result:
    """What the program's result reader reads: the registers (no symbolic sizes here)."""
    __slots__ = ("regs", "env")

    def __init__(self, regs):
        self.regs, self.env = regs, {}


class _NotSequence(Exception):
    pass


def render_calls(calls, name: str = "sequence") -> str:
    """LLVM IR of ``i32 name(ptr table)`` making ``calls`` [(LLVMFunction, [("table", i) |
    ("const", address) | ("int", i, bits)])] in order: an address read from entry i of the
    table (of i64), an address known now, or an integer of ``bits`` bits read from entry i."""
    lines = [f"define i32 @{name}(ptr %table) {{", "entry:"]
    for k, (function, args) in enumerate(calls):
        values = []
        for j, (kind, value, *bits) in enumerate(args):
            if kind == "const":
                values.append(f"ptr inttoptr (i64 {value} to ptr)")
                continue
            lines.append(f"  %p{k}_{j} = getelementptr i64, ptr %table, i64 {value}")
            if kind == "table":
                lines.append(f"  %a{k}_{j} = load ptr, ptr %p{k}_{j}")
                values.append(f"ptr %a{k}_{j}")
            elif bits[0] == 64:
                lines.append(f"  %a{k}_{j} = load i64, ptr %p{k}_{j}")
                values.append(f"i64 %a{k}_{j}")
            else:
                lines += [f"  %w{k}_{j} = load i64, ptr %p{k}_{j}",
                          f"  %a{k}_{j} = trunc i64 %w{k}_{j} to i{bits[0]}"]
                values.append(f"i{bits[0]} %a{k}_{j}")
        target = function.jit.address(function.name)
        lines += [f"  %s{k} = call i32 inttoptr (i64 {target} to ptr)({', '.join(values)})",
                  f"  %ok{k} = icmp eq i32 %s{k}, 0",
                  f"  br i1 %ok{k}, label %next{k}, label %fail{k}",
                  f"fail{k}:",
                  f"  %code{k} = or i32 %s{k}, {k << _STEP_SHIFT}",
                  f"  ret i32 %code{k}",
                  f"next{k}:"]
    lines += ["  ret i32 0", "}"]
    return "\n".join(lines) + "\n"


__all__ = ["NativeSequence", "render_calls"]
