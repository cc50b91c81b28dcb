"""Buffers: named multi-dimensional arrays with a shape, dtype, optional strides and a storage scope."""
from __future__ import annotations

from ..ir.node import Node, node
from . import dtype as dt
from .expr import BufferLoad, IntImm, PrimExpr, convert, const

SCOPES = ("global", "shared", "local", "warp", "shared.dyn")


@node
class Buffer(Node):
    """A buffer. Compared by identity: two buffers with the same name are still two buffers."""
    name: str
    shape: tuple
    dtype: str = "float32"
    strides: tuple = ()
    scope: str = "global"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if any(isinstance(i, slice) for i in indices):
            from .stmt import BufferRegion
            return BufferRegion.from_slices(self, indices)
        if len(indices) != self.ndim:
            raise IndexError(f"buffer {self.name} has {self.ndim} dimension(s) but was indexed "
                             f"with {len(indices)} index(es)")
        return BufferLoad(self, tuple(_index(i, self) for i in indices))

    def vload(self, indices) -> BufferLoad:
        return self[indices]


def _index(i, buffer: Buffer) -> PrimExpr:
    if isinstance(i, PrimExpr):
        return i
    if isinstance(i, (int,)) or hasattr(i, "__index__"):
        dtype = buffer.shape[0].dtype if buffer.shape and isinstance(buffer.shape[0], PrimExpr) else "int32"
        return const(int(i), dtype if dt.is_int(dtype) else "int32")
    return convert(i)


def decl_buffer(shape, dtype: str = "float32", name: str = "buffer", strides=(), scope: str = "global") -> Buffer:
    """Make a buffer; ``shape`` entries may be ints or PrimExprs (symbolic dimensions)."""
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    shape = tuple(const(s) if isinstance(s, int) else convert(s) for s in shape)
    for s in shape:
        if not dt.is_int(s.dtype):
            raise TypeError(f"buffer {name}: shape entries must be integers, got {s} of dtype {s.dtype}")
        if isinstance(s, IntImm) and s.value < 0:
            raise ValueError(f"{'a buffer' if name == 'buffer' else 'buffer ' + name}: dimension sizes "
                             "cannot be negative, got shape "
                             f"({', '.join(str(d) for d in shape)})")
    if scope not in SCOPES:
        raise ValueError(f"buffer {name}: unknown storage scope {scope!r}; expected one of {SCOPES}")
    strides = tuple(const(s) if isinstance(s, int) else convert(s) for s in strides)
    return Buffer(name, shape, dt.check_dtype(dtype), strides, scope)
