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

A kernel compiled for the CPU is checked by the compiled function itself the first time it runs
(shapes, dtypes, devices). When the relax types fix every shape it sees, symbolic sizes included
(``kernel_call.address_form``), it is from then on called straight on the data addresses of its
arguments, followed by its sizes read off the call's symbolic values. After the first call, each
run of such kernels (with the views and aliases among them) becomes one ``segment.Segment``: one
compiled call for the run, so a call costs a few Python steps per registered function in between
rather than one per binding.
"""
from __future__ import annotations

import math

import numpy as np

from ...ir.module import GlobalVar
from ...runtime.interpreter.expr import np_dtype
from ...runtime.device import aligned_copy
from ...runtime.ndarray import NDArray
from ...runtime.packed import get_global_func
from ...tir.function import PrimFunc
from ..expr import Call, Constant, ExternFunc, Op, PrimValue, ShapeExpr, Tuple, TupleGetItem, Var
from ..lifetime import dps_call, function_bindings, tensor_sites, upper_bounds
from ..struct_info import TensorStructInfo, shape_text
from .check_args import Matcher, dim_reader, evaluate_dim
from .kernel_call import address_form
from .memory import Layout, MemoryPlan, Workspace
from .native_sequence import NativeSequence, runs_as_sequence
from .segment import free_after, segment_steps

RUNNABLE_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.reshape", "relax.match_cast")


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
        self.layout = Layout(MemoryPlan.of(func), sites, upper_bounds(func))
        self.idle: list = []   # workspaces not in use by a running call
        self.sequence, self.calls = None, 0   # the NativeSequence, made by the second call
        self.steps = []   # one per binding
        self.plan = self.steps   # what a call runs: the steps, or segments of them after one call
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
            for step in self.plan:
                step.run(frame)
                if step.after is not None:
                    free_after(frame, step)
        except Exception as err:
            name = err.__dict__.pop("step_name", step.name)   # a segment names its failing step
            err.add_note(f"while computing {name} in relax function {self.name}")
            raise
        finally:
            if workspace is not None:
                self.idle.append(workspace)
        result = self.result(frame), sum(frame.sizes.values())
        self.calls += 1
        if self.plan is self.steps and self.calls == 1:
            # Every kernel has gone through its checked call: runs of them become segments.
            try:
                self.plan = segment_steps(self, workspace) or self.steps
            except Exception:   # an unusual program: it keeps running step by step
                self.plan = self.steps
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
                self.template[-1] = NDArray(aligned_copy(expr.data), self.vm.device)
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
            dims = [dim_reader(d, "a shape value") for d in expr.values]
            return lambda frame: tuple(read(frame.env) for read in dims)
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
            return _Bind(self._reader(value), slot, value)
        if isinstance(value.op, Op):
            if value.op.name not in RUNNABLE_OPS:
                raise _NotRunnable(NotImplementedError(
                    f"the VirtualMachine cannot run {value.op.name}; build the module with "
                    "relax.build, which legalizes it"))
            if value.op.name == "relax.reshape":
                return _View(self, value, binding.var, slot)
            if value.op.name == "relax.match_cast":
                return _MatchCast(self, self._reader(value.args[0]), binding.var, slot)
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

    def __init__(self, reader, slot: int, expr=None):
        self.reader, self.slot, self.expr = reader, slot, expr

    def run(self, frame) -> None:
        frame.regs[self.slot] = self.reader(frame)


class _MatchCast:
    """``var = R.match_cast(value, sinfo)``: the value, checked against the variable's structure
    info; the symbolic sizes it introduces are defined from it."""

    def __init__(self, program: Program, reader, var, slot: int):
        self.reader, self.var, self.slot, self.matcher = reader, var, slot, program.matcher

    def run(self, frame) -> None:
        value = self.reader(frame)
        self.matcher.result(self.var, value, frame.env)
        frame.regs[self.slot] = value


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
        self.shape_readers = [None if shape is not None else
                              [dim_reader(d, f"the output shape {shape_text(s.sinfo.shape)}")
                               for d in s.sinfo.shape] for s, _, shape, _ in self.outputs]
        self.occupy = layout.occupy.get(born[0].binding, 0)
        # bytes the plan saves allocating: a planned output of symbolic shape counts its own
        self.planned_bytes = sum(s.nbytes for s in born
                                 if s in layout.storage_of and s.sinfo.static_shape is not None)
        self.fallbacks = sum(s in layout.fallbacks for s in born)
        self.packed = None if call.op.name == "relax.call_tir" else kernel.global_symbol
        self.function = None
        self.ints = None   # with an AddressForm: a reader of each int argument after the addresses
        if self.packed is not None and self.packed in lib:
            # A packed name is looked up among the executable's own compiled functions first,
            # then among registered ones: call_dps_packed("f", ...) runs the module's PrimFunc f.
            kernel, self.packed = self.packed, None
        if self.packed is None:
            name = kernel if isinstance(kernel, str) else kernel.name_hint
            try:
                self.function = lib[name]
            except KeyError as err:
                raise _NotRunnable(err) from None
            form = address_form(self.function, program.vm.executable.mod[name], call,
                                [s.sinfo for s in born])
            if form is not None:
                self.int_exprs = [expr for expr, _ in form.ints]
                self.int_dtypes = [dtype for _, dtype in form.ints]
                self.ints = [dim_reader(expr, f"a size {name} takes") for expr in self.int_exprs]
        self.verified = False   # a checked call went through: later ones may go on addresses

    def run(self, frame) -> None:
        outputs = self.prepare(frame)
        inputs = [frame.regs[s] for s in self.inputs]
        if self.verified:
            addresses = [a.address for a in inputs] + [o.address for o in outputs]
            if self.ints:
                env = frame.env
                addresses += [read(env) for read in self.ints]
            self.function.call_addresses(addresses)
        elif self.packed is not None:
            _call_packed_dps(self.packed, inputs, outputs)
        else:
            tir_vars = self.tir_vars(frame) if self.tir_vars is not None else ()
            self.function(*inputs, *outputs, *tir_vars)
            self.verified = self.ints is not None

    def prepare(self, frame) -> list:
        """The outputs of this call (planned views, or tensors allocated now and counted), also
        placed in the step's register."""
        stats = frame.stats
        if self.occupy:
            stats.occupy(self.occupy)
        stats.unplanned_bytes += self.planned_bytes
        stats.plan_fallbacks += self.fallbacks
        outputs = []
        for (site, planned, shape, np_type), readers in zip(self.outputs, self.shape_readers):
            if planned and shape is not None:
                outputs.append(frame.workspace.views[site])
                continue
            if shape is None:
                env = frame.env
                shape = tuple(read(env) for read in readers)
            if planned:
                out = frame.workspace.view(site, shape, np_type)
                stats.unplanned_bytes += out.numpy_view().nbytes
                outputs.append(out)
                continue
            out = stats.allocate(shape, np_type, frame.device)
            frame.sizes[site] = out.numpy_view().nbytes
            outputs.append(out)
        frame.regs[self.slot] = outputs[0] if len(outputs) == 1 else tuple(outputs)
        return outputs


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
