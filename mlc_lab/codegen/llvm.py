"""LLVM code generation: lowered PrimFuncs -> LLVM IR text (via llvmlite's IR builder).

``render(func, name, target)`` returns the IR of one function; ``render_module`` renders several
into one LLVM module and also returns each function's calling convention (``FunctionABI``), which
the JIT runtime (``mlc_lab.runtime.llvm_runtime``) uses to call it.

Calling convention of a compiled function ``name``::

    i32 @name(<buffer params as ptr>, <scalar params>, <shape vars as i64>)

Parameters come in the PrimFunc's order (buffers as element pointers, scalar Vars by value);
then every Var that appears in a buffer parameter's shape and is not itself a parameter is an
extra trailing ``i64`` argument, in order of first appearance. The result is a status: 0 ok,
``STATUS_OUT_OF_BOUNDS`` after ``mlc_bounds_error(i32 buffer_id, i64 index)`` was called (only
with ``-bounds-check``), ``STATUS_NO_MEMORY`` when ``malloc`` failed, or a parallel loop's status.

A parallel loop's body becomes an internal function ``i32 body(i64 begin, i64 end, ptr closure)``
running iterations [begin, end); the closure is a struct holding every value the body uses from
outside (buffer pointers, scalars, enclosing loop and let variables, the loop's start). The
caller packs it and calls ``i32 mlc_parallel_for(ptr body, i64 extent, ptr closure, i32 threads)``
(``threads``: the target's ``num-cores``, 0 when unset: every core), which the runtime implements
(``mlc_lab.runtime.parallel``: a pool of worker threads).
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field

import llvmlite.binding as llvm_binding
import llvmlite.ir as ir

from .._env import debug_enabled
from ..ir.node import Node, field_values
from ..target import Target
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.functor import StmtExprVisitor
from ..tir.transform.func_memo import FuncMemo, memo_enabled
from ..tir.transform.unroll_loop import fits_unroll_budget, partial_unroll_count
from ..tir.stmt_functor import _FreeScan, free_vars
from .llvm_expr import ExprEmitter, value_type
from .llvm_stmt import (STATUS_NO_MEMORY, STATUS_OK, STATUS_OUT_OF_BOUNDS, STATUS_RUNTIME_ERROR,
                        StmtEmitter)

__all__ = ["CodegenError", "FunctionABI", "STATUS_NO_MEMORY", "STATUS_OK", "STATUS_OUT_OF_BOUNDS",
           "STATUS_RUNTIME_ERROR", "llvm_target", "render", "render_module"]

# How many copies of an unexpanded unrolled loop's body LLVM makes per iteration.
PARTIAL_UNROLL_COUNT = 8


class CodegenError(ValueError):
    """The function cannot be compiled for the llvm target; the message says why and what to do."""


def llvm_target(target=None) -> Target:
    """``target`` (a Target, a string such as "llvm -bounds-check", a dict, or None for plain
    "llvm") as a Target whose backend generates LLVM IR; its attributes are the codegen options."""
    target = Target("llvm" if target is None else target)
    if target.capabilities.dialect != "llvm":
        raise ValueError(f"the llvm code generator needs an llvm target, got {str(target)!r}")
    return target


@dataclass
class BufferInfo:
    """A buffer that bounds checks can name: ``param`` is its parameter position, or None."""
    name: str
    shape: tuple
    param: int | None


@dataclass
class FunctionABI:
    name: str
    params: tuple                   # the PrimFunc's params (Buffers and Vars), in call order
    shape_vars: tuple               # trailing i64 arguments
    buffers: list = field(default_factory=list)   # BufferInfo by buffer id (module-wide)


def render(func, name: str | None = None, target=None) -> str:
    """LLVM IR text of one lowered PrimFunc."""
    name = name or func.attr_dict.get("global_symbol") or "main"
    return render_module({name: func}, target)[0]


def render_module(functions: dict, target=None) -> tuple[str, dict]:
    """``(llvm_ir_text, {name: FunctionABI})`` for lowered PrimFuncs ``{name: func}``. The
    same function objects (as ``tir.transform.lower`` gives them again for a kernel it lowered
    before) for the same target are rendered once."""
    target = llvm_target(target)
    remember = memo_enabled()
    key = (tuple((name, id(func)) for name, func in functions.items()), target)
    found = _RENDERED.get(key) if remember else None
    if found is not None and all(a is b for a, b in zip(found[0], functions.values())):
        return found[1], found[2]
    codegen = ModuleCodegen(target.attrs, target.capabilities.stack_limit_bytes)
    abis = {name: codegen.add_function(func, name) for name, func in functions.items()}
    text = str(codegen.module)
    if debug_enabled():
        print(f"=== mlc_lab llvm: generated IR for {', '.join(functions)} ===\n{text}", file=sys.stderr)
    if remember:   # the functions are held with the text, so their ids stay theirs
        _RENDERED.put(key, (tuple(functions.values()), text, abis))
    return text, abis


# Modules rendered before, by the identity of their lowered functions and the target.
_RENDERED = FuncMemo("llvm render", capacity=64)


class _LoopID(ir.values.MDValue):
    """Loop metadata must be a distinct node whose first operand is itself."""

    def descr(self, buf):
        buf.append("distinct ")
        super().descr(buf)


@functools.lru_cache(maxsize=None)
def _process_triple() -> str:
    """Asked of LLVM once: a call into LLVM waits while another thread compiles."""
    return llvm_binding.get_process_triple()


class ModuleCodegen:
    """One LLVM module: its functions, declarations of external functions, loop metadata.
    ``options`` are the target's attributes; allocations of at most ``stack_limit_bytes`` (the
    backend's capability) live on the stack, larger ones are malloc'd."""

    def __init__(self, options: dict, stack_limit_bytes: int):
        self.options, self.stack_limit_bytes = options, stack_limit_bytes
        self.module = ir.Module(name="mlc_lab")
        self.module.triple = _process_triple()
        self.buffers: list[BufferInfo] = []
        self._buffer_ids: dict[int, int] = {}
        self._externs: dict[str, ir.Function] = {}
        self._outlined = 0
        self.noalias = False   # of the function being added

    def extern(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        if name not in self._externs:
            self._externs[name] = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return self._externs[name]

    def buffer_id(self, buffer: Buffer, param: int | None = None) -> int:
        if id(buffer) not in self._buffer_ids:
            self._buffer_ids[id(buffer)] = len(self.buffers)
            self.buffers.append(BufferInfo(buffer.name, buffer.shape, param))
        return self._buffer_ids[id(buffer)]

    def loop_metadata(self, loop):
        """``llvm.loop`` metadata for an unrolled or vectorized loop (a new node per loop).

        An unrolled loop too big to unroll fully within the lowering pass's budget (see
        tir/transform/unroll_loop.py) is unrolled by a bounded count (none when its body alone
        is that big): a full unroll would make compile time grow with the loop's extent."""
        m = self.module
        if loop.kind == "unrolled" and fits_unroll_budget(loop):
            hint = m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.full")])
        elif loop.kind == "unrolled":
            count = partial_unroll_count(loop, PARTIAL_UNROLL_COUNT)
            hint = m.add_metadata([ir.MetaDataString(m, "llvm.loop.unroll.count"),
                                   ir.Constant(ir.IntType(32), count)] if count > 1 else
                                  [ir.MetaDataString(m, "llvm.loop.unroll.disable")])
        else:
            hint = m.add_metadata([ir.MetaDataString(m, "llvm.loop.vectorize.enable"),
                                   ir.Constant(ir.IntType(1), 1)])
        loop_id = _LoopID(m, [], name=str(len(m.metadata)))
        loop_id.operands = (loop_id, hint)
        return loop_id

    def add_function(self, func, name: str) -> FunctionABI:
        _check_loops(func, name)
        buffer_params = [p for p in func.params if isinstance(p, Buffer)]
        for p in buffer_params:
            if len(p.shape) != 1:
                raise CodegenError(f"function {name}: parameter {p.name} has shape of rank "
                                   f"{len(p.shape)}; the llvm backend takes lowered functions "
                                   "with flat 1-D buffers (run the lowering pipeline first)")
        shape_vars = _shape_vars(func)
        arg_types = [ir.PointerType() if isinstance(p, Buffer) else value_type(p.dtype)
                     for p in func.params] + [ir.IntType(64)] * len(shape_vars)
        fn = ir.Function(self.module, ir.FunctionType(ir.IntType(32), arg_types), name)
        noalias = self.noalias = bool(func.attr_dict.get("tir.noalias", False))
        emitter = FunctionEmitter(self, fn, name)
        for index, (param, arg) in enumerate(zip(func.params, fn.args)):
            arg.name = param.name
            if isinstance(param, Buffer):
                if noalias:
                    arg.add_attribute("noalias")
                self.buffer_id(param, index)
                emitter.buffers[param] = arg
            else:
                emitter.vars[param] = arg
        for var, arg in zip(shape_vars, fn.args[len(func.params):]):
            arg.name = var.name
            emitter.vars[var] = emitter.cast(arg, "int64", var.dtype)
        emitter.emit(func.body)
        emitter.finish()
        return FunctionABI(name, tuple(func.params), tuple(shape_vars), self.buffers)

    def outline(self, parent: "FunctionEmitter", loop: S.For):
        """Emit ``loop`` (parallel) as a call of ``mlc_parallel_for`` on a new body function."""
        self._outlined += 1
        captured_vars, captured_buffers = _free_values(loop)
        start = parent.cast(parent.expr(loop.min), loop.min.dtype, loop.loop_var.dtype)
        extent = parent.cast(parent.expr(loop.extent), loop.extent.dtype, "int64")
        fields = [start] + [parent.lookup_var(v) for v in captured_vars] + \
                 [parent.lookup_buffer(b) for b in captured_buffers]
        closure_type = ir.LiteralStructType([f.type for f in fields])
        body_type = ir.FunctionType(ir.IntType(32), [ir.IntType(64), ir.IntType(64), ir.PointerType()])
        body_fn = ir.Function(self.module, body_type, f"{parent.name}_parallel_{loop.loop_var.name}_"
                                                      f"{self._outlined}")
        body_fn.linkage = "internal"
        begin, end, closure = body_fn.args
        begin.name, end.name, closure.name = "begin", "end", "closure"

        builder = parent.builder
        slot = parent.entry_alloca(closure_type, "closure")
        i32 = ir.IntType(32)
        for index, value in enumerate(fields):
            builder.store(value, builder.gep(slot, [i32(0), i32(index)], source_etype=closure_type))
        threads = i32(self.options.get("num-cores") or 0)
        status = builder.call(self.extern("mlc_parallel_for", i32,
                                          [ir.PointerType(), ir.IntType(64), ir.PointerType(), i32]),
                              [body_fn, extent, slot, threads])
        parent.fail_unless_ok(status)

        # The body unpacks the closure and calls a kernel taking the values as parameters, so the
        # buffers can be marked noalias (LLVM keeps that when it inlines the kernel).
        i64 = ir.IntType(64)
        kernel = ir.Function(self.module, ir.FunctionType(i32, [i64, i64] + [f.type for f in fields]),
                             body_fn.name + "_kernel")
        kernel.linkage = "internal"
        unpack = ir.IRBuilder(body_fn.append_basic_block("entry"))
        loaded = [unpack.load(unpack.gep(closure, [i32(0), i32(index)], source_etype=closure_type),
                              typ=f.type) for index, f in enumerate(fields)]
        unpack.ret(unpack.call(kernel, [begin, end] + loaded))

        child = FunctionEmitter(self, kernel, parent.name)
        lo, hi, start_arg, *values = kernel.args
        lo.name, hi.name, start_arg.name = "begin", "end", "start"
        for var, value in zip(captured_vars, values):
            value.name = var.name
            child.vars[var] = value
        for buffer, value in zip(captured_buffers, values[len(captured_vars):]):
            value.name = buffer.name
            if self.noalias:
                value.add_attribute("noalias")
            child.buffers[buffer] = value
        var_type = loop.loop_var.dtype
        lo, hi = (child.cast(x, "int64", var_type) for x in (lo, hi))
        child.emit_loop(loop.loop_var, lo, child.builder.sub(hi, lo), loop.body, offset=start_arg)
        child.finish()


class FunctionEmitter(ExprEmitter, StmtEmitter):
    """Emits one LLVM function. Allocas go to the entry block (so loops never grow the stack);
    code goes after it. ``heap`` holds the malloc'd pointers live at the current point, freed on
    every exit."""

    def __init__(self, codegen: ModuleCodegen, fn: ir.Function, name: str):
        self.codegen, self.fn, self.name = codegen, fn, name
        self.options = codegen.options
        self.entry = ir.IRBuilder(fn.append_basic_block("entry"))
        self.builder = ir.IRBuilder(fn.append_basic_block("start"))
        self.vars: dict = {}
        self.buffers: dict = {}
        self.heap: list = []

    def entry_alloca(self, typ: ir.Type, name: str = "", align: int = 64):
        slot = self.entry.alloca(typ, name=name)
        slot.align = align
        slot.type = ir.PointerType()   # opaque, like every pointer here (loads and GEPs name types)
        return slot

    def finish(self) -> None:
        self.entry.branch(self.fn.blocks[1])
        if not self.builder.block.is_terminated:
            self.builder.ret(ir.Constant(ir.IntType(32), STATUS_OK))

    def fail(self, status) -> None:
        """Free the live heap buffers and return ``status`` (ends the current block)."""
        for pointer in reversed(self.heap):
            self.builder.call(self.codegen.extern("free", ir.VoidType(), [ir.PointerType()]), [pointer])
        self.builder.ret(status if isinstance(status, ir.Value) else ir.Constant(ir.IntType(32), status))

    def fail_unless_ok(self, status) -> None:
        failed = self.builder.icmp_signed("!=", status, ir.Constant(ir.IntType(32), 0))
        with self.builder.if_then(failed, likely=False):
            self.fail(status)

    def lookup_var(self, var):
        if var not in self.vars:
            raise CodegenError(f"function {self.name}: variable {var.name} is used but never bound "
                               "(not a parameter, loop variable, let variable or shape variable)")
        return self.vars[var]

    def lookup_buffer(self, buffer):
        if buffer not in self.buffers:
            raise CodegenError(f"function {self.name}: buffer {buffer.name} is used but is neither "
                               "a parameter nor allocated (T.allocate) around its use")
        return self.buffers[buffer]


def _shape_vars(func) -> list:
    """Vars in buffer parameter shapes that are not parameters themselves, first appearance first."""
    params = {id(p) for p in func.params}
    shapes = tuple(p.shape for p in func.params if isinstance(p, Buffer))
    return [v for v in free_vars(shapes) if id(v) not in params]


class _LoopChecker(StmtExprVisitor):
    def __init__(self, name: str):
        self.name, self.parallel = name, []

    def visit_For(self, loop):
        if loop.kind == "thread_binding":
            raise CodegenError(f"function {self.name}: loop {loop.loop_var.name} is bound to "
                               f"{loop.thread_binding}; the llvm target runs on the CPU: use target "
                               "'cuda' or 'cuda-sim' for thread-bound loops")
        if loop.kind == "parallel" and self.parallel:
            raise CodegenError(f"function {self.name}: parallel loop {loop.loop_var.name} is nested "
                               f"inside parallel loop {self.parallel[-1].loop_var.name}; the llvm "
                               "target runs one level of parallel loops: make one of them serial")
        if loop.kind == "parallel":
            self.parallel.append(loop)
        self.generic_visit(loop)
        if loop.kind == "parallel":
            self.parallel.pop()

    def visit_PrimExpr(self, e):
        pass   # no loop or block inside an expression

    def visit_BlockRealize(self, realize):
        raise CodegenError(f"function {self.name} still contains block {realize.block.name_hint!r}; "
                           "the llvm backend takes lowered functions (mlc_lab.build lowers them, or "
                           "run mlc_lab.tir.transform.pipeline.lower first)")


def _check_loops(func, name: str) -> None:
    _LoopChecker(name).visit(func.body)


def _free_values(loop: S.For) -> tuple[list, list]:
    """Variables and buffers the body of ``loop`` takes from outside, in first-use order; the
    sizes of those buffers count as used (bounds checks and heap allocation need them)."""
    scan = _FreeValues()
    scan.visit(loop.body)
    return [v for v in scan.vars if v is not loop.loop_var], scan.buffers


class _FreeValues(_FreeScan):
    """``free_vars(..., buffer_shapes=True)`` and ``free_buffers`` in one walk, which looks at
    an expression shared by several statements (unrolled copies share many) once: what it uses
    was recorded, in first-use order, the first time."""

    def __init__(self):
        super().__init__(buffer_shapes=True)
        self.seen: set = set()

    def visit(self, node):
        if isinstance(node, E.PrimExpr):
            self.scan_expr(node)
            return None
        return super().visit(node)

    def scan_expr(self, e) -> None:
        """What ``e`` uses (an expression binds nothing), walked directly: expressions are
        most of a loop body."""
        if type(e) in _CONSTANTS or id(e) in self.seen:
            return
        self.seen.add(id(e))   # the statement holds the node: its id stays its own
        if isinstance(e, E.Var):
            self.visit_Var(e)
            return
        for value in field_values(e):
            if isinstance(value, E.PrimExpr):
                self.scan_expr(value)
            elif isinstance(value, (Node, tuple, list)):
                super().visit(value)


_CONSTANTS = (E.IntImm, E.FloatImm, E.StringImm)   # expressions that use nothing
