"""A relax function prepared for the VirtualMachine: its bindings compiled, once, into steps that
read and write numbered registers.

    program = Program(vm, "main", func)
    result, _ = program.run(args, CallStats())

Preparing does all the work that does not depend on the arguments: each variable gets a
register (parameters first), constants are placed in theirs, each kernel is looked up, the
memory plan is checked (``memory.Layout``) and the lifetimes of tensors
(``relax.lifetime``) become, per step, the tensors to free after it. A call then checks its
arguments (``check_args.Matcher``), runs the steps, and frees each tensor the call allocated after
its last use.

A kernel compiled for the CPU whose inputs and outputs all have static shapes is checked by the
compiled function itself the first time it runs (shapes, dtypes, devices); from then on it is
called straight on the data addresses of its arguments, which the relax types guarantee have
the shapes checked.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.module import GlobalVar
from ...runtime.interpreter.expr import np_dtype
from ...runtime.module import written_buffers
from ...runtime.ndarray import NDArray
from ...runtime.packed import get_global_func
from ...tir.function import PrimFunc
from ..expr import Call, Constant, ExternFunc, Op, PrimValue, ShapeExpr, Tuple, TupleGetItem, Var
from ..lifetime import dps_call, function_bindings, tensor_sites
from ..struct_info import TensorStructInfo, shape_text
from .check_args import Matcher, evaluate_dim
from .memory import Layout, MemoryPlan, Workspace
from .native_sequence import NativeSequence, runs_as_sequence

RUNNABLE_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.reshape")


class _Frame:
    """One running call: its registers, workspace, statistics, symbolic sizes, and the bytes
    of each tensor it allocated that is still alive (by site)."""
    __slots__ = ("regs", "workspace", "stats", "env", "sizes", "device")

    def __init__(self, regs, workspace, stats, env, device):
        self.regs, self.workspace, self.stats, self.env = regs, workspace, stats, env
        self.sizes, self.device = {}, device


class Program:
    """The steps of relax function ``name`` of ``vm``'s executable."""

    def __init__(self, vm, name: str, func):
        self.vm, self.name, self.func = vm, name, func
        self.matcher = Matcher(name, func.params, vm.device.device_type)
        self.slots = {p: k for k, p in enumerate(func.params)}
        self.constants = {}   # id(Constant) -> its register
        self.template = [None] * len(func.params)
        sites = tensor_sites(func)
        self.layout = Layout(MemoryPlan.of(func), sites)
        self.idle: list = []   # workspaces not in use by a running call
        self.sequence, self.calls = None, 0   # the NativeSequence, made by the second call
        self.steps = []
        for index, binding in enumerate(function_bindings(func)):
            slot = self._new_register()
            try:
                step = self._compile(binding, [s for s in sites if s.binding == index], slot)
            except _NotRunnable as err:
                step = _Fail(err.error)
            step.name = binding.var.name_hint
            dying = tuple(s for s in sites if s.last_use == index and s not in self.layout.storage_of)
            release = self.layout.release.get(index, 0)
            step.after = (dying, release) if dying or release else None
            self.steps.append(step)
            self.slots[binding.var] = slot
        try:
            self.result = self._reader(func.body.body)
        except _NotRunnable as err:
            self.result = _Fail(err.error).run

    def run(self, args, stats) -> tuple:
        """(result, bytes of memory allocated by this call that the result holds)."""
        args, env = self.matcher.arguments(args)
        top = stats.fresh()
        if self.sequence is not None and top:
            done = self.sequence.run(args, stats)
            if done is not None:
                return done
        stats.memory_plan |= self.layout.planned
        workspace = None
        if self.layout.sizes:
            try:
                workspace = self.idle.pop()   # atomic: another thread may take the last one
            except IndexError:
                workspace = Workspace(self.layout, stats, self.vm.device)
            stats.planned_bytes += self.layout.nbytes
        regs = self.template.copy()
        regs[:len(args)] = args
        frame = _Frame(regs, workspace, stats, env, self.vm.device)
        try:
            for step in self.steps:
                step.run(frame)
                if step.after is not None:
                    dying, release = step.after
                    stats.live_bytes -= release + sum(frame.sizes.pop(s, 0) for s in dying)
        except Exception as err:
            err.add_note(f"while computing {step.name} in relax function {self.name}")
            raise
        finally:
            if workspace is not None:
                self.idle.append(workspace)
        result = self.result(frame), sum(frame.sizes.values())
        self.calls += 1
        if self.calls == 2 and top and not env and runs_as_sequence(self):
            # Every kernel has been checked by a call with these shapes, and this call's
            # statistics are those of any later one (its workspace was already there).
            try:
                self.sequence = NativeSequence(self, stats.copy(), result[1])
            except Exception:   # an unusual program: it keeps running step by step
                self.sequence = None
        return result

    # -- compiling ------------------------------------------------------------------------------
    def _new_register(self) -> int:
        self.template.append(None)
        return len(self.template) - 1

    def _register(self, expr) -> int:
        """The register holding ``expr``: a variable's, or one holding a constant (a copy of its
        data, made once)."""
        if isinstance(expr, Var):
            if expr not in self.slots:
                raise _NotRunnable(NameError(
                    f"{expr.name_hint} is used in relax function {self.name} but is neither a "
                    "parameter nor bound before this point"))
            return self.slots[expr]
        if isinstance(expr, Constant):
            if id(expr) not in self.constants:
                self.constants[id(expr)] = self._new_register()
                self.template[-1] = NDArray(expr.data.copy(), self.vm.device)
            return self.constants[id(expr)]
        raise _NotRunnable(NotImplementedError(
            f"the VirtualMachine passes variables and constants to calls, not a "
            f"{type(expr).__name__}; normalize the function first"))

    def _reader(self, expr):
        """A function of the frame giving the value of ``expr`` (a leaf, tuple or shape)."""
        if isinstance(expr, (Var, Constant)):
            slot = self._register(expr)
            return lambda frame: frame.regs[slot]
        if isinstance(expr, Tuple):
            items = [self._reader(e) for e in expr.elements]
            return lambda frame: tuple(item(frame) for item in items)
        if isinstance(expr, TupleGetItem):
            inner, index = self._reader(expr.tuple_value), expr.index
            return lambda frame: inner(frame)[index]
        if isinstance(expr, ShapeExpr):
            dims = expr.values
            return lambda frame: tuple(evaluate_dim(d, frame.env, "a shape value") for d in dims)
        if isinstance(expr, PrimValue):
            return lambda frame: evaluate_dim(expr.value, frame.env, "a scalar value")
        if isinstance(expr, ExternFunc):
            return lambda frame: get_global_func(expr.global_symbol)
        raise _NotRunnable(NotImplementedError(
            f"the VirtualMachine cannot run a {type(expr).__name__} binding"))

    def _compile(self, binding, born: list, slot: int):
        """The step computing ``binding`` into register ``slot``; ``born``: its sites."""
        value = binding.value
        if not isinstance(value, Call):
            return _Bind(self._reader(value), slot)
        if isinstance(value.op, Op):
            if value.op.name not in RUNNABLE_OPS:
                raise _NotRunnable(NotImplementedError(
                    f"the VirtualMachine cannot run {value.op.name}; build the module with "
                    "relax.build, which legalizes it"))
            if value.op.name == "relax.reshape":
                return _View(self, value, binding.var, slot)
            return _Kernel(self, dps_call(value), born, slot)
        args = [self._reader(a) for a in value.args]
        if isinstance(value.op, GlobalVar):
            if isinstance(self.vm.executable.mod[value.op], PrimFunc):
                raise _NotRunnable(TypeError(
                    f"{value.op.name_hint} is a PrimFunc; call it with R.call_tir"))
            return _CallFunction(self, value.op.name_hint, args, binding.var, born[0], slot)
        if isinstance(value.op, ExternFunc):
            return _CallExtern(self, value.op.global_symbol, args, binding.var, slot)
        raise _NotRunnable(NotImplementedError(f"the VirtualMachine cannot call {value.op!r}"))


class _NotRunnable(Exception):
    """A binding the VM cannot run; ``error`` is raised when the call reaches it."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class _Fail:
    def __init__(self, error: Exception):
        self.error = error

    def run(self, frame) -> None:
        raise type(self.error)(*self.error.args)


class _Bind:
    """``var = value`` for tuples, their items, aliases, constants and shapes."""

    def __init__(self, reader, slot: int):
        self.reader, self.slot = reader, slot

    def run(self, frame) -> None:
        frame.regs[self.slot] = self.reader(frame)


class _Kernel:
    """``R.call_tir`` / ``R.call_dps_packed``: take the planned outputs from the workspace,
    allocate the others, run the callee on inputs then outputs."""

    def __init__(self, program: Program, call: Call, born: list, slot: int):
        layout, kernel, lib = program.layout, call.args[0], program.vm.executable.lib
        self.slot = slot
        self.inputs = [program._register(a) for a in call.args[1].elements]
        self.tir_vars = program._reader(call.args[2]) if len(call.args) > 2 else None
        self.outputs = [(s, s in layout.storage_of, s.sinfo.static_shape, np_dtype(s.sinfo.dtype))
                        for s in born]
        self.occupy = layout.occupy.get(born[0].binding, 0)
        self.planned_bytes = sum(s.nbytes for s in born if s in layout.storage_of)
        self.fallbacks = sum(s in layout.fallbacks for s in born)
        self.packed = None if call.op.name == "relax.call_tir" else kernel.global_symbol
        self.function, self.direct = None, False
        if self.packed is None:
            try:
                self.function = lib[kernel.name_hint]
            except KeyError as err:
                raise _NotRunnable(err) from None
            self.direct = _runs_on_addresses(self.function, program.vm.executable.mod[kernel],
                                             call, self.tir_vars)
        self.verified = False

    def run(self, frame) -> None:
        stats, regs = frame.stats, frame.regs
        if self.occupy:
            stats.occupy(self.occupy)
        stats.unplanned_bytes += self.planned_bytes
        stats.plan_fallbacks += self.fallbacks
        outputs = []
        for site, planned, shape, np_type in self.outputs:
            if planned:
                outputs.append(frame.workspace.views[site])
                continue
            if shape is None:
                what = f"the output shape {shape_text(site.sinfo.shape)}"
                shape = tuple(evaluate_dim(d, frame.env, what) for d in site.sinfo.shape)
            out = stats.allocate(shape, np_type, frame.device)
            frame.sizes[site] = out.numpy_view().nbytes
            outputs.append(out)
        inputs = [regs[s] for s in self.inputs]
        if self.verified:
            self.function.call_addresses([a.address for a in inputs] + [o.address for o in outputs])
        elif self.packed is not None:
            _call_packed_dps(self.packed, inputs, outputs)
        else:
            tir_vars = self.tir_vars(frame) if self.tir_vars is not None else ()
            self.function(*inputs, *outputs, *tir_vars)
            self.verified = self.direct
        regs[self.slot] = outputs[0] if len(outputs) == 1 else tuple(outputs)


class _View:
    """``R.reshape``: the same memory seen with another shape (tensors are contiguous)."""

    def __init__(self, program: Program, call: Call, var, slot: int):
        self.input, self.slot = program._register(call.args[0]), slot
        self.static = var.struct_info.static_shape if isinstance(var.struct_info, TensorStructInfo) \
            else None
        self.shape = program._reader(call.args[1])

    def run(self, frame) -> None:
        shape = self.static if self.static is not None else self.shape(frame)
        frame.regs[self.slot] = self.view(frame.regs[self.input], shape)

    def view(self, source, shape) -> NDArray:
        array = source.numpy_view()
        if shape is not self.static and math.prod(shape) != array.size:   # static: checked at build
            raise ValueError(f"R.reshape: cannot view a tensor of shape {array.shape} "
                             f"({array.size} elements) as shape {tuple(shape)}")
        return NDArray.wrap_new(array.reshape(shape), source.device)


def _runs_on_addresses(function, prim_func, call: Call, tir_vars) -> bool:
    """Whether later runs may skip the checks: a compiled function taking addresses, tensors
    of static shape on both sides, and no input the kernel writes."""
    if not getattr(function, "takes_addresses", False) or tir_vars is not None:
        return False
    tensors = [a.struct_info for a in call.args[1].elements] + list(call.sinfo_args)
    if not all(isinstance(s, TensorStructInfo) and s.static_shape is not None for s in tensors):
        return False
    written = written_buffers(prim_func)
    return not any(p in written for p in prim_func.buffer_params[:len(call.args[1].elements)])


def _call_packed_dps(name: str, inputs, outputs) -> None:
    result = get_global_func(name)(*inputs, *outputs)
    if result is not None and not any(result is out for out in outputs):
        raise TypeError(f"packed function {name!r} returned a {type(result).__name__}; with "
                        "call_dps_packed it must write its result into the output argument(s) "
                        "it is given last, e.g. out.copyfrom(value), and return None")


class _CallFunction:
    """A call of another relax function; its result is checked against the variable's type."""

    def __init__(self, program: Program, callee: str, args: list, var, site, slot: int):
        self.vm, self.callee, self.args, self.var, self.site = program.vm, callee, args, var, site
        self.matcher, self.slot = program.matcher, slot

    def run(self, frame) -> None:
        program = self.vm._programs[self.callee]
        value, nbytes = program.run([a(frame) for a in self.args], frame.stats)
        self.matcher.result(self.var, value, frame.env)
        frame.sizes[self.site] = nbytes
        frame.regs[self.slot] = value


class _CallExtern:
    """A call of a registered function; a numpy result becomes an NDArray."""

    def __init__(self, program: Program, symbol: str, args: list, var, slot: int):
        self.symbol, self.args, self.var = symbol, args, var
        self.matcher, self.slot = program.matcher, slot

    def run(self, frame) -> None:
        result = get_global_func(self.symbol)(*[a(frame) for a in self.args])
        if isinstance(result, np.ndarray):
            result = NDArray(result, frame.device)
        self.matcher.result(self.var, result, frame.env)
        frame.regs[self.slot] = result


__all__ = ["Program", "RUNNABLE_OPS"]
