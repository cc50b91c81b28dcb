"""The VirtualMachine: runs the graph-level functions of an Executable binding by binding.

    ex = relax.build(mod, target="llvm")
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    out = vm["main"](x, w)                 # NDArrays or numpy arrays; returns NDArray(s)
    vm.memory_stats()                      # {"allocations": 3, "bytes_allocated": ..., ...}

``call_tir`` allocates its outputs from ``out_sinfo`` (symbolic sizes are read off the
arguments' shapes) and runs the compiled PrimFunc on inputs and outputs; ``call_dps_packed``
does the same with a function registered by ``mlc_lab.register_func``. A function whose
"relax.memory_plan" attribute lists ``(var_name, storage_id, bytes)`` places those tensors in
shared storages instead of allocating each one.
"""
from __future__ import annotations

import numpy as np

from ..ir.module import GlobalVar
from ..runtime.device import Device, cpu
from ..runtime.module import Module
from ..runtime.ndarray import NDArray
from ..runtime.packed import get_global_func
from ..tir.function import PrimFunc
from .expr import (Call, Constant, ExternFunc, Function, Op, PrimValue, ShapeExpr, Tuple,
                   TupleGetItem, Var)
from .functor import ExprVisitor
from .struct_info import shape_text
from .vm_memory import MemoryTracker, MemoryPlan
from .vm_match import Matcher, evaluate_dim

RUNNABLE_OPS = ("relax.call_tir", "relax.call_dps_packed")


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
            counter = _CallCounter()
            counter.visit_expr(self.mod[name])
            func = self.mod[name]
            calls = ", ".join(f"{n} {kind}" for kind, n in counter.counts.items()) or "no calls"
            plan = MemoryPlan.of(func)
            plan_text = f"memory plan: {plan.describe()}" if plan else "no memory plan"
            lines.append(f"  {name}({', '.join(p.name_hint for p in func.params)}): {calls}; "
                         f"{len(counter.constants)} constant(s) of {counter.constant_bytes()} "
                         f"bytes; {plan_text}")
        prim_names = self.lib.function_names
        lines.append(f"  {len(prim_names)} PrimFunc(s) compiled for {self.lib.target}: "
                     f"{', '.join(prim_names) or 'none'}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<relax.Executable target={self.target!r} functions={self.function_names} "
                f"prim_funcs={self.lib.function_names}>")


class _CallCounter(ExprVisitor):
    def __init__(self):
        self.counts: dict[str, int] = {}
        self.constants: dict[int, Constant] = {}

    def visit_call_(self, call: Call) -> None:
        kind = call.op.name.split(".")[-1] if isinstance(call.op, Op) else "call"
        self.counts[kind] = self.counts.get(kind, 0) + 1
        super().visit_call_(call)

    def visit_constant_(self, const: Constant) -> None:
        self.constants[id(const)] = const

    def constant_bytes(self) -> int:
        return sum(c.data.nbytes for c in self.constants.values())


class _Uses(ExprVisitor):
    def __init__(self):
        self.vars: list[Var] = []

    def visit_var_(self, var: Var) -> None:
        self.vars.append(var)

    visit_dataflow_var_ = visit_var_


class _Compiled:
    """A relax function prepared for running: its bindings in order, the variables whose last
    use each binding is (released after it), and its memory plan."""

    def __init__(self, name: str, func: Function):
        self.name, self.func = name, func
        self.bindings = [b for block in func.body.blocks for b in block.bindings]
        last_use: dict[Var, int] = {}
        for index, binding in enumerate(self.bindings):
            last_use[binding.var] = index
            for var in _used(binding.value):
                last_use[var] = index
        for var in _used(func.body.body):
            last_use[var] = len(self.bindings)
        bound = {b.var for b in self.bindings}
        self.dying: list[list[Var]] = [[] for _ in self.bindings]
        for var, index in last_use.items():
            if var in bound and index < len(self.bindings):
                self.dying[index].append(var)
        self.plan = MemoryPlan.of(func)
        self.matcher = Matcher(name)
        self.checks_result = [_computes_new_value(b.value) for b in self.bindings]


def _computes_new_value(value) -> bool:
    """True for calls whose results may introduce sizes (calls of functions and packed
    functions); call_tir's outputs are allocated from sizes already known."""
    return isinstance(value, Call) and not isinstance(value.op, Op)


def _used(expr) -> list[Var]:
    uses = _Uses()
    uses.visit_expr(expr)
    return uses.vars


class VirtualMachine:
    """Runs an Executable: ``vm["main"](*args)``, ``vm.memory_stats()``,
    ``vm.time_evaluator("main", dev)(*args)``."""

    def __init__(self, executable: Executable, device=None):
        if not isinstance(executable, Executable):
            raise TypeError(f"relax.VirtualMachine expects the Executable that relax.build returns, "
                            f"got {type(executable).__name__}")
        device = device[0] if isinstance(device, (list, tuple)) else (device or cpu())
        if not isinstance(device, Device):
            raise TypeError(f"relax.VirtualMachine: device must be a Device such as mlc_lab.cpu(), "
                            f"got {device!r}")
        self.executable, self.device = executable, device
        self._compiled: dict[str, _Compiled] = {}
        self._constants: dict[int, NDArray] = {}
        self._stats: dict = {}
        self._calls = 0

    def get_function(self, name: str):
        if name not in self.executable.function_names:
            raise KeyError(f"the executable has no relax function named {name!r}; it has: "
                           f"{', '.join(self.executable.function_names) or 'none'}")

        def run(*args):
            return self._invoke(name, args)
        run.__name__ = name
        return run

    __getitem__ = get_function

    def _invoke(self, name: str, args):
        tracker = MemoryTracker()
        result = self._call(name, args, tracker)
        tracker.release(result)
        self._calls += 1
        self._stats = {"function": name, "calls": self._calls, **tracker.summary()}
        return result

    def memory_stats(self) -> dict:
        """Memory of the last call: ``allocations`` and ``bytes_allocated`` (intermediate and
        output tensors), ``peak_bytes`` (most bytes live at once), ``unplanned_bytes`` (what one
        allocation per tensor takes), ``planned_bytes`` (the memory plan's storages) and
        ``plan_fallbacks`` (planned tensors that got their own allocation instead)."""
        if not self._stats:
            raise RuntimeError("memory_stats: no function has been called on this VirtualMachine yet")
        return dict(self._stats)

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

    # -- running -------------------------------------------------------------------------------
    def _prepared(self, name: str) -> _Compiled:
        if name not in self._compiled:
            self._compiled[name] = _Compiled(name, self.executable.mod[name])
        return self._compiled[name]

    def _call(self, name: str, args, tracker: MemoryTracker):
        compiled = self._prepared(name)
        func = compiled.func
        args, shape_env = compiled.matcher.arguments(func.params, args)
        frame = _Frame(compiled, tracker, shape_env)
        frame.values.update(zip(func.params, args))
        for index, binding in enumerate(compiled.bindings):
            try:
                value = self._eval(binding.value, frame, binding.var)
                if compiled.checks_result[index]:
                    compiled.matcher.result(binding.var, value, shape_env)
            except Exception as err:
                err.add_note(f"while computing {binding.var.name_hint} in relax function {name}")
                raise
            frame.values[binding.var] = value
            tracker.retain(value)
            frame.release_holds()
            for var in compiled.dying[index]:
                tracker.release(frame.values.pop(var))
        result = self._eval(func.body.body, frame, None)
        frame.close(result)
        return result

    def _eval(self, expr, frame: "_Frame", var):
        if isinstance(expr, Var):
            if expr not in frame.values:
                raise NameError(f"{expr.name_hint} is used in relax function {frame.compiled.name} "
                                "but is neither a parameter nor bound before this point")
            return frame.values[expr]
        if isinstance(expr, Constant):
            return self._constant(expr)
        if isinstance(expr, Tuple):
            return tuple(self._eval(e, frame, None) for e in expr.elements)
        if isinstance(expr, TupleGetItem):
            return self._eval(expr.tuple_value, frame, None)[expr.index]
        if isinstance(expr, ShapeExpr):
            return tuple(evaluate_dim(d, frame.shape_env, "a shape value") for d in expr.values)
        if isinstance(expr, PrimValue):
            return evaluate_dim(expr.value, frame.shape_env, "a scalar value")
        if isinstance(expr, ExternFunc):
            return get_global_func(expr.global_symbol)
        if isinstance(expr, Call):
            return self._eval_call(expr, frame, var)
        raise NotImplementedError(f"the VirtualMachine cannot run a {type(expr).__name__} binding")

    def _constant(self, const: Constant) -> NDArray:
        key = id(const)
        if key not in self._constants:
            self._constants[key] = NDArray(const.data.copy(), self.device)
        return self._constants[key]

    def _eval_call(self, call: Call, frame: "_Frame", var):
        if isinstance(call.op, Op):
            if call.op.name not in RUNNABLE_OPS:
                raise NotImplementedError(f"the VirtualMachine cannot run {call.op.name}; build "
                                          "the module with relax.build, which legalizes it")
            inputs = self._eval(call.args[1], frame, None)
            outputs = frame.allocate_outputs(call.sinfo_args, var)
            if call.op.name == "relax.call_tir":
                tir_vars = self._eval(call.args[2], frame, None) if len(call.args) > 2 else ()
                self.executable.lib[call.args[0].name_hint](*inputs, *outputs, *tir_vars)
            else:
                _call_packed_dps(call.args[0].global_symbol, inputs, outputs)
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        args = [self._eval(a, frame, None) for a in call.args]
        if isinstance(call.op, GlobalVar):
            callee = self.executable.mod[call.op]
            if isinstance(callee, PrimFunc):
                raise TypeError(f"{call.op.name_hint} is a PrimFunc; call it with R.call_tir")
            result = self._call(call.op.name_hint, args, frame.tracker)
            frame.holds.append(result)
            return result
        if isinstance(call.op, ExternFunc):
            result = get_global_func(call.op.global_symbol)(*args)
            return NDArray(result, self.device) if isinstance(result, np.ndarray) else result
        raise NotImplementedError(f"the VirtualMachine cannot call {call.op!r}")


def _call_packed_dps(name: str, inputs, outputs) -> None:
    result = get_global_func(name)(*inputs, *outputs)
    if result is not None and not any(result is out for out in outputs):
        raise TypeError(f"packed function {name!r} returned a {type(result).__name__}; with "
                        "call_dps_packed it must write its result into the output argument(s) "
                        "it is given last, e.g. out.copyfrom(value), and return None")


class _Frame:
    """The values of one running function, and where its tensors are allocated."""

    def __init__(self, compiled: _Compiled, tracker: MemoryTracker, shape_env: dict):
        self.compiled, self.tracker, self.shape_env = compiled, tracker, shape_env
        self.values: dict = {}
        self.holds: list = []   # results of calls to other functions, held until bound
        self.storages = tracker.open_plan(compiled.plan)

    def allocate_outputs(self, sinfos, var) -> list[NDArray]:
        outputs = []
        for sinfo in sinfos:
            shape = tuple(evaluate_dim(d, self.shape_env, f"the output shape "
                                       f"{shape_text(sinfo.shape)}") for d in sinfo.shape)
            name = var.name_hint if var is not None and len(sinfos) == 1 else None
            outputs.append(self.tracker.allocate(shape, sinfo.dtype, self.storages, name))
        return outputs

    def release_holds(self) -> None:
        for value in self.holds:
            self.tracker.release(value)
        self.holds.clear()

    def close(self, result) -> None:
        """End the call: ``result`` stays held (for the caller); everything else is released."""
        self.tracker.retain(result)
        self.release_holds()
        params = self.compiled.func.params
        for var, value in self.values.items():
            if var not in params:
                self.tracker.release(value)
        self.tracker.close_plan(self.storages)


def build(mod, target="llvm", params=None, **options) -> Executable:
    """``relax.vm.build(mod, "llvm")``: the 2022 place of :func:`mlc_lab.relax.build`."""
    from .build import build as relax_build
    return relax_build(mod, target, params, **options)


__all__ = ["Executable", "RUNNABLE_OPS", "VirtualMachine", "build"]
