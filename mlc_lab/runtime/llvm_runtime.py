"""Running the llvm target: JIT-compile rendered LLVM IR (llvmlite MCJIT), run parallel loops
(``mlc_lab.runtime.parallel``), and call compiled functions on numpy arrays.

    fns = build_llvm({"add": lowered_add}, "llvm -num-cores=2")
    fns["add"](a, b, c)                      # numpy arrays / NDArrays and scalars, in param order
    print(fns["add"].get_source("asm"))

Compiled functions are called through ctypes, which releases the GIL for the call. A parallel
loop calls ``mlc_parallel_for``, which runs one chunk of iterations per core at the same time
(a pool of worker threads, see ``parallel``, else a Python thread pool). The calling convention itself is
documented in ``mlc_lab.codegen.llvm``.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
import threading
import warnings

import llvmlite.binding as llvm
import numpy as np

from ..codegen.llvm import (STATUS_NO_MEMORY, STATUS_OK, STATUS_OUT_OF_BOUNDS, STATUS_RUNTIME_ERROR,
                            llvm_target, render_module)
from ..codegen.llvm_extern import import_llvm_texts
from ..tir import expr as E
from ..tir.buffer import Buffer
from .interpreter.expr import Evaluator
from .module import bind_arguments
from .ndarray import NDArray
from . import parallel

_BOUNDS_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int64)
_CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
           "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
           "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
           "float32": ctypes.c_float, "float64": ctypes.c_double}

_lock = threading.Lock()
_setup_done = False
set_chunk_hook = parallel.set_chunk_hook


def _bounds_error(buffer_id: int, index: int) -> None:
    parallel.record_error((buffer_id, index))


# Module-level so the callback lives as long as the process (the JIT holds its address).
_BOUNDS_CALLBACK = _BOUNDS_ERROR(_bounds_error)


def _setup() -> None:
    global _setup_done
    with _lock:
        if _setup_done:
            return
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.add_symbol("mlc_bounds_error", ctypes.cast(_BOUNDS_CALLBACK, ctypes.c_void_p).value)
        target = llvm.Target.from_default_triple()
        parallel.install(target.create_target_machine(cpu=llvm.get_host_cpu_name(), opt=2))
        _setup_done = True


def parallel_backend() -> str:
    """What runs parallel loops in this process: ``"native"`` or ``"python"`` (see
    ``mlc_lab.runtime.parallel``)."""
    _setup()
    return parallel.backend()


def min_parallel_flops() -> float:
    """The least work (flops) worth a parallel loop with this process's parallel backend."""
    return parallel.MIN_PARALLEL_FLOPS[parallel_backend()]


def host_target_machine(mcpu: str | None = None):
    """The machine code is generated for: the host CPU with its features, or ``mcpu`` (a CPU
    name LLVM knows) with that CPU's own features."""
    _setup()
    target = llvm.Target.from_default_triple()
    if mcpu is not None and mcpu != llvm.get_host_cpu_name():
        return target.create_target_machine(cpu=mcpu, features="", opt=3)
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(), opt=3)


_NOT_VECTORIZED = "loop not vectorized"


class VectorizeWarning(UserWarning):
    """A loop marked vectorized that LLVM left scalar (the values it computes are unchanged)."""


@contextlib.contextmanager
def _llvm_diagnostics():
    """LLVM prints its diagnostics on file descriptor 2, one line per loop it was asked to
    vectorize and could not. Those lines become one Python warning (which a notebook shows and a
    filter can silence); any other diagnostic goes on to ``sys.stderr``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode(errors="replace").splitlines()
    missed = sum(_NOT_VECTORIZED in line for line in lines)
    rest = [line for line in lines if _NOT_VECTORIZED not in line]
    if rest:
        print("\n".join(rest), file=sys.stderr)
    if missed:
        warnings.warn(f"llvm: {missed} loop(s) marked vectorized stayed scalar: LLVM could not "
                      "vectorize them (an inner loop, a branch, a call or an irregular index in the "
                      "body); they still compute the same values, one element at a time",
                      VectorizeWarning, stacklevel=4)


# LLVM's module pipeline at -O2: the IR it gets is already tiled, vectorized and unrolled, and
# -O3 only adds passes that find little more in it (the same or slower kernels, measured on the
# course's models and matmuls) while taking a quarter longer to run.
SPEED_LEVEL = 2


class JITModule:
    """LLVM IR text compiled for the host (or the CPU named by ``mcpu``): parsed, verified,
    optimised at -O``SPEED_LEVEL``, loaded by MCJIT."""

    def __init__(self, ir_text: str, mcpu: str | None = None, unroll_heuristics: bool = True,
                 imports: tuple = ()):
        _setup()
        self.rendered_ir, self.mcpu = ir_text, mcpu
        module = llvm.parse_assembly(ir_text)
        module.verify()
        machine = host_target_machine(mcpu)
        module.triple = llvm.get_process_triple()
        module.data_layout = str(machine.target_data)
        for index, text in enumerate(imports):
            _link_import(module, text, index)
        _check_resolved(module)
        tuning = llvm.create_pipeline_tuning_options(speed_level=SPEED_LEVEL)
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
        # Off, LLVM unrolls only the loops the program marks unrolled. Bounds-checked code needs
        # that: a check in every copy of a fully unrolled nest can take LLVM minutes to compile.
        tuning.loop_unrolling = unroll_heuristics
        passes = llvm.create_pass_builder(machine, tuning)
        with _llvm_diagnostics():
            passes.getModulePassManager().run(module, passes)
        self.optimized_ir = str(module)
        self.engine = llvm.create_mcjit_compiler(module, machine)   # the engine owns `machine`
        self.engine.finalize_object()
        self._asm = None

    def address(self, name: str) -> int:
        return self.engine.get_function_address(name)

    def assembly(self) -> str:
        if self._asm is None:
            machine = host_target_machine(self.mcpu)
            self._asm = machine.emit_assembly(llvm.parse_assembly(self.optimized_ir))
        return self._asm


class LLVMFunction:
    """A compiled function: call it with numpy arrays (or NDArrays) and scalars in parameter
    order. ``signature`` (the function before lowering, optional) gives argument errors in the
    shapes the user wrote; arrays are passed flat, as the lowered function sees them."""

    def __init__(self, jit: JITModule, abi, func, num_cores: int, signature=None):
        self.jit, self.abi, self.func, self.name = jit, abi, func, abi.name
        self.num_cores, self.signature = num_cores, signature
        argtypes = []
        for param in func.params:
            if isinstance(param, Buffer):
                argtypes.append(ctypes.c_void_p)
            elif param.dtype in _CTYPES:
                argtypes.append(_CTYPES[param.dtype])
            else:
                raise TypeError(f"{self.name}: scalar parameter {param.name} has dtype {param.dtype}, "
                                "which compiled functions cannot take yet")
        argtypes += [ctypes.c_int64] * len(abi.shape_vars)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(jit.address(self.name))
        self.takes_addresses = not abi.shape_vars and all(isinstance(p, Buffer) for p in func.params)

    def get_source(self, fmt: str = "ll") -> str:
        """"ll": the optimised LLVM IR; "asm": host assembly; "rendered": the IR before optimisation."""
        sources = {"ll": lambda: self.jit.optimized_ir, "asm": self.jit.assembly,
                   "rendered": lambda: self.jit.rendered_ir}
        if fmt not in sources:
            raise ValueError(f"get_source: unknown format {fmt!r}; use one of {', '.join(sources)}")
        return sources[fmt]()

    def __call__(self, *args) -> None:
        bound = {}   # the shape variables, read off the arguments' shapes as written
        if self.signature is not None:
            bound = bind_arguments(self.signature, self.name, args)[1]
        originals, flat_args, write_back = [], [], []
        for param, arg in zip(self.func.params, args):
            if isinstance(param, Buffer) and isinstance(arg, (np.ndarray, NDArray)):
                array = arg.numpy_view() if isinstance(arg, NDArray) else arg
                originals.append(array)
                if not array.flags.c_contiguous:
                    contiguous = np.ascontiguousarray(array)
                    write_back.append((array, contiguous))
                    array = contiguous
                flat_args.append(array.reshape(-1))
            else:
                originals.append(arg)
                flat_args.append(arg)
        values, env = bind_arguments(self.func, self.name, flat_args)
        shape_values = self._shape_values(values, {**bound, **env})
        c_args = [v.ctypes.data if isinstance(p, Buffer) else v
                  for p, v in zip(self.func.params, values)] + shape_values
        parallel.prepare(self.num_cores)
        status = self._cfunc(*c_args)
        for original, contiguous in write_back:
            if original.flags.writeable:
                np.copyto(original, contiguous)
        if status != STATUS_OK:
            raise self._error(status, originals, env)

    def call_addresses(self, addresses: list) -> None:
        """Run with no checking at all on the data addresses of arrays already known to fit the
        buffer parameters, then the values of the scalar parameters and of the symbolic sizes
        (``abi.shape_vars``) in that order: for callers such as the VirtualMachine that checked
        one call through ``self(...)`` and know from types that later ones fit as well."""
        parallel.prepare(self.num_cores)
        status = self._cfunc(*addresses)
        if status != STATUS_OK:
            raise self._error(status, [None] * len(addresses), {})

    def _shape_values(self, values, env) -> list:
        """Values of the trailing shape-variable arguments, from the bound arguments or solved
        from the flat sizes (dimension ``v`` or ``v * c``)."""
        known = {var: int(env[var]) for var in self.abi.shape_vars if var in env}
        buffers = [(p, v) for p, v in zip(self.func.params, values) if isinstance(p, Buffer)]
        for param, array in buffers:
            var, scale = _linear(param.shape[0])
            if var is not None and var not in known and scale and array.size % scale == 0:
                known[var] = array.size // scale
        missing = [v.name for v in self.abi.shape_vars if v not in known]
        if missing:
            raise ValueError(f"{self.name}(): cannot tell the value of {', '.join(missing)} from "
                             "the array sizes; pass it as a scalar parameter")
        env = {**env, **{v: np.int64(x) for v, x in known.items()}}
        for param, array in buffers:
            expected = int(Evaluator(env, {}).eval(param.shape[0]))
            if expected != array.size:
                raise ValueError(f"{self.name}(): parameter {param.name} should hold {expected} "
                                 f"elements but its array holds {array.size}")
        return [known[v] for v in self.abi.shape_vars]

    def _error(self, status: int, originals: list, env: dict) -> Exception:
        error = parallel.last_error()
        if status == STATUS_OUT_OF_BOUNDS and isinstance(error, tuple):
            buffer_id, index = error
            info = self.abi.buffers[buffer_id]
            shape = _shape_text(info.shape, env)
            if info.param is not None:
                array = originals[info.param]
                if isinstance(array, np.ndarray) and array.ndim != 1:
                    shape += f" (the flattened {array.shape} array)"
            return IndexError(f"buffer {info.name}: index {index} is out of bounds for shape "
                              f"{shape} in {self.name}()")
        if status == STATUS_NO_MEMORY:
            return MemoryError(f"{self.name}(): an intermediate buffer could not be allocated")
        if isinstance(error, BaseException):
            return RuntimeError(f"{self.name}(): a parallel loop failed: {error!r}")
        return RuntimeError(f"{self.name}() failed with status {status}")

    def __repr__(self) -> str:
        return f"<mlc_lab llvm function {self.name}, {self.num_cores} core(s)>"


def _linear(dim):
    """``(var, scale)`` when ``dim`` is ``var`` or ``var * constant``; else ``(None, 0)``."""
    if isinstance(dim, E.Var):
        return dim, 1
    if isinstance(dim, E.Mul):
        for a, b in ((dim.a, dim.b), (dim.b, dim.a)):
            if isinstance(a, E.Var) and isinstance(b, E.IntImm):
                return a, b.value
    return None, 0


def _shape_text(shape: tuple, env: dict) -> str:
    dims = []
    for dim in shape:
        try:
            dims.append(str(int(Evaluator(env, {}).eval(dim))))
        except RuntimeError:
            dims.append(str(dim))
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _link_import(module, text: str, index: int) -> None:
    """Link LLVM IR ``text`` (a ``pragma_import_llvm`` annotation, e.g. from
    contrib.clang.create_llvm) into ``module``, so that calls of the functions it defines
    resolve. The imported module is made to speak of the host: its triple and data layout
    become ``module``'s (IR compiled for another target does not link)."""
    try:
        imported = llvm.parse_assembly(text)
        imported.verify()
    except RuntimeError as error:
        raise ValueError(f"the LLVM IR of pragma_import_llvm annotation #{index} does not parse: "
                         f"{str(error).strip()}") from None
    triple = imported.triple
    if triple and triple.split("-")[0] != module.triple.split("-")[0]:
        raise ValueError(f"the LLVM IR of pragma_import_llvm annotation #{index} was compiled for "
                         f"{triple}, but this process runs {module.triple}; compile it for the "
                         "host (contrib.clang.create_llvm does)")
    imported.triple, imported.data_layout = module.triple, module.data_layout
    clash = {f.name for f in imported.functions if not f.is_declaration} & \
        {f.name for f in module.functions if not f.is_declaration}
    if clash:
        raise ValueError(f"pragma_import_llvm annotation #{index} defines {', '.join(sorted(clash))}, "
                         "which the program or another import defines too")
    module.link_in(imported)


def _check_resolved(module) -> None:
    """Refuse a call of a function that neither the module (with its imports) nor the process
    defines: the JIT would make it a call of address 0."""
    for fn in module.functions:
        if fn.is_declaration and not fn.name.startswith("llvm.") \
                and not llvm.address_of_symbol(fn.name):
            raise NotImplementedError(
                f"T.call_extern({fn.name!r}): the llvm backend runs only C math library functions, "
                "functions this process has loaded, and those of LLVM IR that a loop imports "
                "(its pragma_import_llvm annotation, e.g. the text contrib.clang.create_llvm "
                f"returns); none defines {fn.name}: write {fn.name} as loops in a T.prim_func "
                "(for a tensor intrinsic, as its impl), or compile it with clang and import it so")


def compile_llvm(functions: dict, target=None) -> tuple[JITModule, dict]:
    """Render lowered PrimFuncs ``{name: func}`` into one LLVM module and JIT-compile it; returns
    the JITModule and each function's FunctionABI."""
    target = llvm_target(target)
    text, abis = render_module(functions, target)
    return JITModule(text, target.attrs["mcpu"], unroll_heuristics=not target.attrs["bounds-check"],
                     imports=import_llvm_texts(functions)), abis


def load_llvm(jit: JITModule, abis: dict, functions: dict, target=None,
              signatures: dict | None = None) -> dict:
    """``{name: LLVMFunction}`` for the lowered ``functions`` compiled into ``jit``; the
    target's ``num-cores`` (default: ``parallel.default_threads()``) sizes the pool their loops run on."""
    num_cores = llvm_target(target).attrs["num-cores"] or parallel.default_threads()
    signatures = signatures or {}
    return {name: LLVMFunction(jit, abis[name], func, num_cores, signatures.get(name))
            for name, func in functions.items()}


def build_llvm(functions: dict, target=None, signatures: dict | None = None) -> dict:
    """Compile lowered PrimFuncs ``{name: func}`` into one JIT module; returns
    ``{name: LLVMFunction}``. ``target`` is an llvm Target or target string (its attributes:
    ``num-cores``, ``fast-math``, ``bounds-check``, ``mcpu``); ``signatures`` optionally maps
    names to the functions before lowering, whose parameters are used to check arguments."""
    jit, abis = compile_llvm(functions, target)
    return load_llvm(jit, abis, functions, target, signatures)
