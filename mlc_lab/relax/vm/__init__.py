"""The VirtualMachine: runs the graph-level functions of an Executable binding by binding.

    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    out = vm["main"](x, w)                 # NDArrays or numpy arrays; returns NDArray(s)
    vm.memory_stats()                      # {"allocations": 3, "bytes_allocated": ..., ...}

``call_tir`` allocates its outputs from ``out_sinfo`` (symbolic sizes are read off the
arguments' shapes) and runs the compiled PrimFunc on inputs and outputs; ``call_dps_packed``
does the same with a function registered by ``mlc_lab.register_func``. A function whose
"relax.memory_plan" attribute lists ``(var_name, storage_id, bytes)`` places those tensors in
shared storages, allocated on its first call and reused by every later one (``vm/memory.py``).
How a function is prepared and run step by step: ``vm/program.py``.
"""
from __future__ import annotations

from collections import Counter

from ...runtime.device import Device, cpu
from ...runtime.module import Module
from ..analysis import References
from ..expr import Function, Op
from .memory import CallStats, MemoryPlan
from .program import RUNNABLE_OPS, Program


class Executable:
    """What ``relax.build`` returns: ``mod`` (the module after the pipeline), ``lib`` (its
    PrimFuncs compiled into one runtime Module) and the ``target``."""

    def __init__(self, mod, lib: Module, target: str):
        self.mod, self.lib, self.target = mod, lib, target

    @property
    def function_names(self) -> list[str]:
        """The graph-level functions a VirtualMachine can call."""
        return [gv.name_hint for gv, f in self.mod.functions.items() if isinstance(f, Function)]

    def stats(self) -> str:
        """A short text summary: functions, their calls, constants and memory plans."""
        lines = [f"Executable for target {self.target!r}"]
        for name in self.function_names:
            func = self.mod[name]
            refs = References(func)
            counts = Counter(c.op.name.split(".")[-1] if isinstance(c.op, Op) else "call"
                             for c in refs.calls)
            calls = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no calls"
            constant_bytes = sum(c.data.nbytes for c in refs.constants)
            plan = MemoryPlan.of(func)
            plan_text = f"memory plan: {plan.describe()}" if plan else "no memory plan"
            lines.append(f"  {name}({', '.join(p.name_hint for p in func.params)}): {calls}; "
                         f"{len(refs.constants)} constant(s) of {constant_bytes} "
                         f"bytes; {plan_text}")
        prim_names = self.lib.function_names
        lines.append(f"  {len(prim_names)} PrimFunc(s) compiled for {self.lib.target}: "
                     f"{', '.join(prim_names) or 'none'}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<relax.Executable target={self.target!r} functions={self.function_names} "
                f"prim_funcs={self.lib.function_names}>")


class VirtualMachine:
    """Runs an Executable: ``vm["main"](*args)``, ``vm.memory_stats()``,
    ``vm.time_evaluator("main", dev)(*args)``. Every relax function is prepared once, here
    (``program.Program``), so a call does only what depends on its arguments."""

    def __init__(self, executable: Executable, device=None):
        if not isinstance(executable, Executable):
            raise TypeError(f"relax.VirtualMachine expects the Executable that relax.build returns, "
                            f"got {type(executable).__name__}")
        device = device[0] if isinstance(device, (list, tuple)) else (device or cpu())
        if not isinstance(device, Device):
            raise TypeError(f"relax.VirtualMachine: device must be a Device such as mlc_lab.cpu(), "
                            f"got {device!r}")
        self.executable, self.device = executable, device
        self._programs = {gv.name_hint: Program(self, gv.name_hint, func)
                          for gv, func in executable.mod.functions.items()
                          if isinstance(func, Function)}
        self._last = None   # (function name, number of calls, CallStats) of the last call
        self._calls = 0

    def get_function(self, name: str):
        if name not in self._programs:
            raise KeyError(f"the executable has no relax function named {name!r}; it has: "
                           f"{', '.join(self._programs) or 'none'}")
        program = self._programs[name]

        def run(*args):
            stats = CallStats()
            result = program.run(args, stats)[0]
            self._calls += 1
            self._last = (name, self._calls, stats)
            return result
        run.__name__ = name
        return run

    __getitem__ = get_function

    def memory_stats(self) -> dict:
        """Memory of the last call: ``allocations`` and ``bytes_allocated`` (what the call
        allocated: tensors, and the planned storages the first time a function runs; later
        calls reuse them), ``peak_bytes`` (most bytes in use at once), ``unplanned_bytes`` (what
        one allocation per tensor takes), ``planned_bytes`` (the memory plan's storages in use)
        and ``plan_fallbacks`` (planned tensors that got their own allocation instead)."""
        if self._last is None:
            raise RuntimeError("memory_stats: no function has been called on this VirtualMachine yet")
        name, calls, stats = self._last
        return {"function": name, "calls": calls, **stats.summary()}

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0):
        """As ``Module.time_evaluator``: returns a callable taking the function's arguments and
        returning a BenchmarkResult."""
        module = Module({func_name: self.get_function(func_name)}, self.executable.lib.target)
        return module.time_evaluator(func_name, dev, number, repeat, min_repeat_ms,
                                     cooldown_interval_ms)

    @property
    def module(self) -> "VirtualMachine":
        """The VM itself, for the course's ``vm.module.time_evaluator("main", dev)``."""
        return self


def build(mod, target="llvm", params=None, **options) -> Executable:
    """``relax.vm.build(mod, "llvm")``: the 2022 place of :func:`mlc_lab.relax.build`."""
    from ..build import build as relax_build
    return relax_build(mod, target, params, **options)


__all__ = ["Executable", "RUNNABLE_OPS", "VirtualMachine", "build"]
