# Turns every buffer into a 1-D buffer of the same name: indices become one row-major offset (or use
# the buffer's strides), parameters become flat buffers. Expects block-free PrimFuncs (after lower_blocks).
from __future__ import annotations

from ...arith import simplify
from .. import expr as E
from .. import stmt as S
from ..buffer import BUFFER_ELEM_OFFSET, Buffer, physical_groups
from ..function import PrimFunc
from ..functor import StmtExprMutator
from .prim_func_pass import prim_func_pass


@prim_func_pass
def flatten_buffer(func: PrimFunc) -> PrimFunc:
    """``A: T.Buffer((64, 32))`` read as ``A[i, j]`` becomes ``A: T.Buffer((2048,))`` read as
    ``A[i * 32 + j]``."""
    flat = _Flatten()
    params = tuple(flat.flat(p) if isinstance(p, Buffer) else p for p in func.params)
    return func.replace(params=params, body=flat.visit(func.body))


def flat_shape(buffer: Buffer) -> E.PrimExpr:
    """The number of elements the flat buffer spans: the product of the dimensions, or with
    explicit strides the distance from the first to the last element plus one."""
    dtype = "int64" if any(d.dtype == "int64" for d in buffer.shape) else "int32"
    if buffer.strides:
        span = E.const(1, dtype)
        for dim, stride in zip(buffer.shape, buffer.strides):
            span = span + (dim.astype(dtype) - 1) * stride.astype(dtype)
        return simplify(span)
    size = E.const(1, dtype)
    for dim in buffer.shape:
        size = size * dim.astype(dtype)
    return simplify(size)


def row_major_strides(buffer: Buffer) -> list:
    if buffer.strides:
        return list(buffer.strides)
    strides, step = [], None
    for dim in reversed(buffer.shape):
        strides.append(step)
        step = dim if step is None else simplify(step * dim)
    return list(reversed(strides))


class _Flatten(StmtExprMutator):
    def __init__(self):
        super().__init__()
        self.flat_of: dict[int, Buffer] = {}
        self.strides: dict[int, list] = {}

    def flat(self, buffer: Buffer) -> Buffer:
        if id(buffer) not in self.flat_of:
            physical_groups(buffer)   # separators that leave a physical dimension empty: refused
            if buffer.axis_separators and buffer.strides:
                raise NotImplementedError(
                    f"flatten_buffer: buffer {buffer.name} has both strides and axis_separators="
                    f"{list(buffer.axis_separators)}; its physical dimensions would not be one "
                    "row-major block of memory, which the backends need (drop one of the two)")
            # Axis separators cut the buffer into physical dimensions, each the row-major
            # flattening of its group of axes; stored in one block of memory, as the backends
            # store every buffer, that multi-dimensional array is the row-major offset below.
            if buffer.ndim == 1 and not buffer.strides:
                self.flat_of[id(buffer)] = buffer
            else:
                self.flat_of[id(buffer)] = buffer.replace(shape=(flat_shape(buffer),), strides=(),
                                                          axis_separators=())
            self.strides[id(buffer)] = row_major_strides(buffer)
        return self.flat_of[id(buffer)]

    def offset(self, buffer: Buffer, indices) -> tuple:
        indices = [self.visit(i) for i in indices]
        if buffer.ndim == 1 and not buffer.strides:
            return tuple(indices)
        total = None
        for index, stride in zip(indices, self.strides[id(buffer)]):
            term = index if stride is None else index * stride
            total = term if total is None else total + term
        return (E.const(0) if total is None else simplify(total),)

    def visit_BufferLoad(self, load):
        buffer = self.flat(load.buffer)
        return E.BufferLoad(buffer, self.offset(load.buffer, load.indices))

    def visit_Call(self, call):
        if call.op == BUFFER_ELEM_OFFSET:   # A.elem_offset: the flat index of A's first element
            load = call.args[0]            # (a view lowered to its source starts where it lies)
            self.flat(load.buffer)
            (flat,) = self.offset(load.buffer, load.indices)
            return E.Cast(call.dtype, flat) if flat.dtype != call.dtype else flat
        return self.generic_visit(call)

    def visit_BufferStore(self, store):
        buffer = self.flat(store.buffer)
        return S.BufferStore(buffer, self.visit(store.value), self.offset(store.buffer, store.indices))

    def visit_Allocate(self, alloc):
        return S.Allocate(self.flat(alloc.buffer), self.visit(alloc.body))
