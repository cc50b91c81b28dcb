"""Statement half of the LLVM code generator: loops, branches, let, allocation, loads and stores.

Loads and stores take one index (buffers are flat after lowering). A Ramp index with stride 1
becomes one vector load/store; any other vector index is a gather/scatter done lane by lane.
With ``-bounds-check`` every (lane) index is compared with the buffer's size first.
"""
from __future__ import annotations

import functools
import math

import llvmlite.ir as ir

from ..tir import dtype as dt
from ..tir import expr as E
from ..tir.transform.vectorize_loop import _ramp_arith
from .llvm_expr import scalar_type, undef, value_type

# Status codes returned by compiled functions.
STATUS_OK, STATUS_OUT_OF_BOUNDS, STATUS_NO_MEMORY, STATUS_RUNTIME_ERROR = 0, 1, 2, 3


class StmtEmitter:
    """Mixin of FunctionEmitter: ``emit(stmt)`` emits ``stmt`` at the builder's position."""

    def emit(self, s) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise NotImplementedError(f"the llvm backend cannot compile {type(s).__name__} "
                                      "statements; it takes lowered functions")
        method(s)

    def bind(self, var, value) -> None:
        """Give ``var`` its value for the statements emitted next. A variable bound again inside
        its own binding (shadowing) makes every remembered expression value stale."""
        if var in self.vars:
            self.forget_expressions()
        self.vars[var] = value

    def stmt_SeqStmt(self, s) -> None:
        for stmt in s.seq:
            self.emit(stmt)

    def stmt_Evaluate(self, s) -> None:
        """Expressions have no side effects in the lowered IR: nothing to emit. A ``T.call_extern``
        is compiled, so that a call made for its effect, which this backend cannot make, is
        refused rather than dropped."""
        if getattr(s.value, "op", None) == "call_extern":
            self.expr(s.value)

    def stmt_LetStmt(self, s) -> None:
        value = self.expr(s.value)
        with self.cse_scope():
            self.bind(s.var, value)
            self.emit(s.body)
            del self.vars[s.var]

    def stmt_IfThenElse(self, s) -> None:
        cond = self.expr(s.condition)
        if s.else_case is None:
            with self.builder.if_then(cond), self.cse_scope():
                self.emit(s.then_case)
            return
        with self.builder.if_else(cond) as (then, otherwise):
            with then, self.cse_scope():
                self.emit(s.then_case)
            with otherwise, self.cse_scope():
                self.emit(s.else_case)

    def stmt_For(self, loop) -> None:
        if loop.kind == "parallel":
            self.codegen.outline(self, loop)
            return
        start = self.expr(loop.min)
        extent = self.cast(self.expr(loop.extent), loop.extent.dtype, loop.loop_var.dtype)
        start = self.cast(start, loop.min.dtype, loop.loop_var.dtype)
        metadata = None
        if loop.kind in ("unrolled", "vectorized"):
            metadata = self.codegen.loop_metadata(loop)
        self.emit_loop(loop.loop_var, start, extent, loop.body, metadata=metadata)

    def emit_loop(self, var, start, extent, body, metadata=None, offset=None) -> None:
        """``for k in [start, start + extent): var = k (+ offset); body``."""
        b = self.builder
        typ = value_type(var.dtype)
        end = b.add(start, extent)
        preheader = b.block
        header = self.fn.append_basic_block(f"for_{var.name}")
        body_block = self.fn.append_basic_block(f"for_{var.name}_body")
        exit_block = self.fn.append_basic_block(f"for_{var.name}_end")
        b.branch(header)
        b.position_at_end(header)
        k = b.phi(typ, name=var.name)
        k.add_incoming(start, preheader)
        b.cbranch(b.icmp_signed("<", k, end), body_block, exit_block)
        b.position_at_end(body_block)
        with self.cse_scope():
            self.bind(var, k if offset is None else b.add(offset, k))
            self.emit(body)
            del self.vars[var]
        following = b.add(k, ir.Constant(typ, 1))
        following.flags.append("nsw")
        k.add_incoming(following, b.block)
        back = b.branch(header)
        if metadata is not None:
            back.set_metadata("llvm.loop", metadata)
        b.position_at_end(exit_block)

    def stmt_Allocate(self, s) -> None:
        buffer = s.buffer
        elem = scalar_type(buffer.dtype, in_memory=True)
        elem_bytes = max(1, dt.bits(buffer.dtype) // 8)
        dims = [d.value if isinstance(d, E.IntImm) else None for d in buffer.shape]
        if None not in dims and math.prod(dims) * elem_bytes <= self.codegen.stack_limit_bytes:
            self.buffers[buffer] = self.entry_alloca(ir.ArrayType(elem, max(1, math.prod(dims))),
                                                     buffer.name)
            self.codegen.buffer_id(buffer)
            self.emit(s.body)
            del self.buffers[buffer]
            return
        b, i64 = self.builder, ir.IntType(64)
        size = b.mul(self.buffer_size(buffer), ir.Constant(i64, elem_bytes))
        pointer = b.call(self.codegen.extern("malloc", ir.PointerType(), [i64]), [size],
                         name=buffer.name)
        with b.if_then(b.icmp_unsigned("==", pointer, ir.Constant(ir.PointerType(), None)),
                       likely=False):
            self.fail(STATUS_NO_MEMORY)
        self.codegen.buffer_id(buffer)
        self.buffers[buffer] = pointer
        self.heap.append(pointer)
        self.emit(s.body)
        self.heap.pop()
        del self.buffers[buffer]
        b.call(self.codegen.extern("free", ir.VoidType(), [ir.PointerType()]), [pointer])

    def buffer_size(self, buffer):
        """Number of elements of ``buffer``, as an i64 value."""
        size = ir.Constant(ir.IntType(64), 1)
        for dim in buffer.shape:
            size = self.builder.mul(size, self.cast(self.expr(dim), dim.dtype, "int64"))
        return size

    # -- memory --------------------------------------------------------------------------------
    def stmt_BufferStore(self, s) -> None:
        value = self.expr(s.value)
        if dt.is_bool(s.buffer.dtype):
            value = self.builder.zext(value, value_type(s.value.dtype, in_memory=True))
        index = self._index(s.buffer, s.indices)
        b, base = self.builder, self.lookup_buffer(s.buffer)
        elem = scalar_type(s.buffer.dtype, in_memory=True)
        if _contiguous(index):
            start = self._checked(s.buffer, index)
            self._store_lanes(value, self.address(base, start, elem), s.buffer.dtype,
                              index.lanes)
            return
        lanes = self._checked(s.buffer, index)
        if not isinstance(lanes, list):
            b.store(value, self.address(base, lanes, elem))
            return
        for lane, position in enumerate(lanes):
            lane_value = b.extract_element(value, ir.Constant(ir.IntType(32), lane))
            b.store(lane_value, self.address(base, position, elem))

    def load(self, buffer, indices, dtype):
        index = self._index(buffer, indices)
        b, base = self.builder, self.lookup_buffer(buffer)
        elem = scalar_type(buffer.dtype, in_memory=True)
        typ = value_type(dtype, in_memory=True)
        if _contiguous(index):
            start = self._checked(buffer, index)
            value = self._load_lanes(self.address(base, start, elem), buffer.dtype,
                                     index.lanes, typ)
        elif _short_stride(index):
            # Every stride-th element of one contiguous run: one load of the run, one shuffle.
            stride, lanes = index.stride.value, index.lanes
            start = self._checked(buffer, E.Ramp(index.base, E.const(1, index.base.dtype),
                                                 (lanes - 1) * stride + 1))
            run = self._load_lanes(self.address(base, start, elem), buffer.dtype,
                                   (lanes - 1) * stride + 1,
                                   ir.VectorType(elem, (lanes - 1) * stride + 1))
            value = b.shuffle_vector(run, undef(run.type),
                                     _lane_indices(range(0, lanes * stride, stride)))
        else:
            lanes = self._checked(buffer, index)
            if not isinstance(lanes, list):
                value = b.load(self.address(base, lanes, elem), typ=typ)
            else:
                value = undef(typ)
                for lane, position in enumerate(lanes):
                    item = b.load(self.address(base, position, elem), typ=elem)
                    value = b.insert_element(value, item, ir.Constant(ir.IntType(32), lane))
        if dt.is_bool(buffer.dtype):
            value = b.icmp_unsigned("!=", value, ir.Constant(typ, None))
        return value

    # Vectors of a width that is not a power of two (13, 26 lanes) are loaded and stored through
    # masked operations on the next power of two: LLVM legalizes a plain load of such a vector
    # into pieces and reassembles them lane by lane.
    # On the stack (a local accumulator) plain accesses stay: LLVM keeps such an array in
    # registers only when nothing but plain loads and stores touch it.
    def _load_lanes(self, pointer, dtype: str, lanes: int, typ):
        b = self.builder
        if not _masked_width(dtype, lanes) or _on_stack(pointer):
            return b.load(pointer, typ=typ, align=_align(dtype))
        wide, mask = self._mask(dtype, lanes)
        load = self._masked("load", wide, [ir.PointerType(), ir.IntType(32), mask.type, wide], wide)
        loaded = b.call(load, [pointer, ir.Constant(ir.IntType(32), _align(dtype)), mask,
                               undef(wide)])
        return b.shuffle_vector(loaded, undef(wide), _lane_indices(range(lanes)))

    def _store_lanes(self, value, pointer, dtype: str, lanes: int) -> None:
        b = self.builder
        if not _masked_width(dtype, lanes) or not isinstance(value.type, ir.VectorType) \
                or _on_stack(pointer):
            b.store(value, pointer, align=_align(dtype))
            return
        wide, mask = self._mask(dtype, lanes)
        widened = b.shuffle_vector(value, undef(value.type),
                                   _lane_indices(list(range(lanes)) + [0] * (wide.count - lanes)))
        store = self._masked("store", wide, [wide, ir.PointerType(), ir.IntType(32), mask.type],
                             ir.VoidType())
        b.call(store, [widened, pointer, ir.Constant(ir.IntType(32), _align(dtype)), mask])

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def _mask(dtype: str, lanes: int):
        """The vector of the next power of two lanes, and the mask of its first ``lanes``
        (constants: one object serves every use)."""
        width = 1 << (lanes - 1).bit_length()
        wide = ir.VectorType(scalar_type(dtype, in_memory=True), width)
        return wide, ir.Constant(ir.VectorType(ir.IntType(1), width), [k < lanes for k in range(width)])

    def _masked(self, what: str, wide, args: list, ret):
        """The declaration of ``llvm.masked.<what>`` (load or store) on vectors like ``wide``."""
        name = f"llvm.masked.{what}.v{wide.count}{_MASKED_TYPES[str(wide.element)]}.p0"
        return self.codegen.extern(name, ret, args)

    def address(self, base, index, elem):
        """The address of element ``index`` of ``base`` (an array of ``elem``). An address is
        computed once per scope, like a pure expression: a load and a store of one element,
        or two loads of it, share it."""
        values = self.cse_values()
        key = ("address", id(base), id(index), str(elem))   # the GEP holds base and index
        pointer = values.get(key)
        if pointer is None:
            pointer = values[key] = self.builder.gep(base, [index], source_etype=elem)
            self._cse_log.append(key)
        return pointer

    def _index(self, buffer, indices):
        if len(indices) != 1:
            raise ValueError(f"function {self.name}: buffer {buffer.name} is indexed with "
                             f"{len(indices)} indices; the llvm backend takes lowered functions "
                             "with flat buffers (one index)")
        return _as_ramp(indices[0])

    def _checked(self, buffer, index):
        """The address index (a Ramp: its start; a vector: a list, one per lane), after bounds
        checks when they are on."""
        if _contiguous(index):
            start = self.expr(index.base)
            if self.options["bounds-check"]:
                self._check(buffer, start, index.base.dtype)
                last = self.builder.add(start, ir.Constant(start.type, index.lanes - 1))
                self._check(buffer, last, index.base.dtype)
            return start
        value = self.expr(index)
        if dt.lanes(index.dtype) == 1:
            if self.options["bounds-check"]:
                self._check(buffer, value, index.dtype)
            return value
        lanes = [self.builder.extract_element(value, ir.Constant(ir.IntType(32), lane))
                 for lane in range(dt.lanes(index.dtype))]
        if self.options["bounds-check"]:
            for lane in lanes:
                self._check(buffer, lane, dt.element_of(index.dtype))
        return lanes

    def _check(self, buffer, position, dtype) -> None:
        b, i64 = self.builder, ir.IntType(64)
        wide = self.cast(position, dtype, "int64")
        outside = b.icmp_unsigned(">=", wide, self.buffer_size(buffer))   # negatives wrap high
        with b.if_then(outside, likely=False), self.cse_scope():
            report = self.codegen.extern("mlc_bounds_error", ir.VoidType(), [ir.IntType(32), i64])
            b.call(report, [ir.Constant(ir.IntType(32), self.codegen.buffer_id(buffer)), wide])
            self.fail(STATUS_OUT_OF_BOUNDS)


_MASKED_TYPES = {"float": "f32", "double": "f64", "i32": "i32", "i64": "i64"}


def _as_ramp(index):
    """A vector index written as arithmetic of Broadcasts and Ramps (as flattening leaves the
    index of a view: ``Broadcast(row) + Ramp(0, 1, n)``) folded into one Ramp or Broadcast where
    it is one, so that a contiguous access stays one vector load or store."""
    if isinstance(index, (E.Ramp, E.Broadcast)) or dt.lanes(index.dtype) == 1:
        return index
    if type(index) in (E.Add, E.Sub, E.Mul):
        folded = _ramp_arith(type(index), _as_ramp(index.a), _as_ramp(index.b))
        if folded is not None:
            return folded
    return index


def _masked_width(dtype: str, lanes: int) -> bool:
    """A vector worth a masked access: more than 4 lanes, not a power of two, of a type whose
    masked operations LLVM lowers well."""
    return lanes > 4 and lanes & (lanes - 1) != 0 and lanes <= 64 and \
        str(scalar_type(dtype, in_memory=True)) in _MASKED_TYPES


def _lane_indices(indices) -> ir.Constant:
    """A shufflevector mask picking ``indices``."""
    return _lane_constant(tuple(indices))


@functools.lru_cache(maxsize=None)
def _lane_constant(indices: tuple) -> ir.Constant:
    # a constant is a value, not an instruction: one object serves every use (and its text,
    # which llvmlite caches, is formatted once)
    return ir.Constant(ir.VectorType(ir.IntType(32), len(indices)), list(indices))


def _on_stack(pointer) -> bool:
    """Whether ``pointer`` (a getelementptr) points into an alloca."""
    while isinstance(pointer, ir.instructions.GEPInstr):
        pointer = pointer.pointer
    return isinstance(pointer, ir.instructions.AllocaInstr)


def _short_stride(index) -> bool:
    """A Ramp of constant stride 2 to 4: read as one contiguous run and a shuffle."""
    return isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) \
        and 2 <= index.stride.value <= 4 and isinstance(index.lanes, int)


def _contiguous(index) -> bool:
    return isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) and index.stride.value == 1


def _align(dtype: str) -> int:
    return max(1, dt.bits(dtype) // 8)
