# Storage alignment: the strides that the "buffer_dim_align" block annotations (made by
# sch.storage_align) ask of the buffers the annotated blocks write. plan_and_compact_allocations
# gives each allocated buffer those strides; flatten_buffer then allocates the padded size and
# indexes with them.
from __future__ import annotations

from ...arith import simplify
from .. import expr as E
from ..functor import StmtExprVisitor

BUFFER_DIM_ALIGN = "buffer_dim_align"


def align_entries(value) -> list | None:
    """A "buffer_dim_align" annotation value as a list of (buffer_index, axis, factor, offset)
    int tuples, or None when it is not a list of integer quadruples."""
    if not isinstance(value, (list, tuple)):
        return None
    out = []
    for entry in value:
        if not isinstance(entry, (list, tuple)) or len(entry) != 4:
            return None
        ints = []
        for item in entry:
            item = item.value if isinstance(item, E.IntImm) else item
            if isinstance(item, bool) or not isinstance(item, int):
                return None
            ints.append(int(item))
        out.append(tuple(ints))
    return out


def dim_align_requests(body) -> dict:
    """id(buffer) -> {axis: (factor, offset)} for every buffer an annotated block writes. An
    entry that no longer fits the block (an index or axis out of range after later schedule
    steps, a factor below 1) asks nothing; a later block's request for an axis overrides an
    earlier one's. Alignment only changes where elements live, never what a program computes."""
    finder = _Requests()
    finder.visit(body)
    return finder.requests


class _Requests(StmtExprVisitor):
    def __init__(self):
        self.requests: dict = {}

    def visit_PrimExpr(self, e):
        pass   # no block inside an expression

    def visit_Block(self, block):
        entries = align_entries(dict(block.annotations).get(BUFFER_DIM_ALIGN))
        for buffer_index, axis, factor, offset in entries or ():
            if not 0 <= buffer_index < len(block.writes) or factor < 1:
                continue
            buffer = block.writes[buffer_index].buffer
            if -buffer.ndim <= axis < buffer.ndim:
                self.requests.setdefault(id(buffer), {})[axis % buffer.ndim] = (factor, offset % factor)
        self.generic_visit(block)


def aligned_strides(shape, aligns: dict) -> tuple:
    """Row-major strides of ``shape``, each axis of ``aligns`` padded up to the next stride that
    leaves ``offset`` when divided by ``factor``: shape (128, 128) with axis 0 aligned to
    (128, 127) has strides (255, 1)."""
    dtype = "int64" if any(d.dtype == "int64" for d in shape) else "int32"
    strides = [None] * len(shape)
    stride = E.const(1, dtype)
    for axis in reversed(range(len(shape))):
        if axis in aligns:
            factor, offset = aligns[axis]
            pad = E.FloorMod(E.const(factor + offset, dtype) - E.FloorMod(stride, E.const(factor, dtype)),
                             E.const(factor, dtype))
            stride = simplify(stride + pad)
        strides[axis] = stride
        stride = simplify(stride * shape[axis].astype(dtype))
    return tuple(strides)
