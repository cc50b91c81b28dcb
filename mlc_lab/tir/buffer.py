"""Buffers: named multi-dimensional arrays with a shape, dtype, optional strides and a storage scope."""
from __future__ import annotations

from ..ir.node import Node, node
from . import dtype as dt
from .expr import BufferLoad, Call, IntImm, PrimExpr, convert, const

SCOPES = ("global", "shared", "local", "warp", "shared.dyn")
# Beyond these, a scope may be "<rank>.<tag>", e.g. "global.A_reg" for the register file of a
# specialised accelerator: to lowering and the CPU backends it is memory of its rank (the part
# before the dot); the tag names it for the tensor intrinsics whose buffers declare it.
_RANKS = ("global", "shared", "local", "warp")
# The tensor-core fragments of the reference compiler: registers a warp holds together, so memory
# of rank "warp". mlc_lab has no tensor-core intrinsics: the CPU backends treat them as memory,
# and a GPU kernel refuses to allocate them.
FRAGMENT_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")


def check_scope(scope) -> str | None:
    """Why ``scope`` is not a storage scope, or None when it is one."""
    if not isinstance(scope, str):
        return f"a storage scope is a str such as 'shared', got {type(scope).__name__}: {scope!r}"
    if scope in SCOPES or scope in FRAGMENT_SCOPES:
        return None
    rank, dot, tag = scope.partition(".")
    if rank in _RANKS and dot and tag.replace("_", "a").replace(".", "a").isalnum():
        return None
    return (f"unknown storage scope {scope!r}; use one of {', '.join(map(repr, SCOPES))}, or "
            f"'<rank>.<tag>' with a rank among {', '.join(map(repr, _RANKS))} "
            "(e.g. 'global.A_reg')")


def storage_rank(scope: str) -> str:
    """The memory a scope lives in: "global.A_reg" -> "global"; a standard scope is its own."""
    if scope in FRAGMENT_SCOPES:
        return "warp"
    return scope if scope in SCOPES else scope.partition(".")[0]


BUFFER_DATA = "buffer_data"   # the op of ``Buffer.data``


@node
class Buffer(Node):
    """A buffer. Compared by identity: two buffers with the same name are still two buffers."""
    name: str
    shape: tuple
    dtype: str = "float32"
    strides: tuple = ()
    scope: str = "global"
    _binds_by_identity = True   # structural_equal matches buffers up to renaming

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

    @property
    def data(self) -> Call:
        """``A.data``: the address of the buffer's storage (a handle), as TVMScript hands a buffer
        to an external function, ``T.call_extern("f", A.data, dtype="")``. In the IR it is
        ``Call("handle", "buffer_data", (A[0, ..., 0],))``, so a schedule step that replaces A
        (cache_read, set_scope) replaces it too, and a block using it reads and writes all of A.
        mlc_lab runs no external function but the C math library's, so such a call does not run."""
        return Call("handle", BUFFER_DATA, (BufferLoad(self, tuple(const(0, d.dtype) for d in self.shape)),))

    @property
    def elem_offset(self):
        """``A.elem_offset``: where the buffer starts in its storage, in elements; always 0 here
        (an mlc_lab buffer owns its storage from the first element; views are match_buffers of
        regions, whose offset is their region's start)."""
        return const(0, self.shape[0].dtype if self.shape else "int32")

    def access_ptr(self, access_mask="rw", *args, **kwargs):
        """Not provided: the loop IR has no pointers, so a kernel cannot be handed a buffer's
        address (as for ``T.call_extern`` of a hand-written C kernel)."""
        raise NotImplementedError(
            f"{self.name}.access_ptr: mlc_lab has no pointers into buffers, so buffers cannot be "
            "passed to an external C kernel; write the kernel as loops in a T.prim_func (for a "
            "tensor intrinsic, as the impl given to tir.TensorIntrin.register)")


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
    if scope == "":   # the reference compiler's empty scope means global memory
        scope = "global"
    problem = check_scope(scope)
    if problem:
        raise ValueError(f"buffer {name}: {problem}")
    strides = tuple(const(s) if isinstance(s, int) else convert(s) for s in strides)
    return Buffer(name, shape, dt.check_dtype(dtype), strides, scope)


class UninitializedReadError(RuntimeError):
    """A program read an element of an intermediate buffer that nothing had written yet: its
    value is whatever the memory held (compiled code) and the program is wrong."""
    # Raised by the reference interpreter (mlc_lab.runtime, which re-exports it) and caught by the
    # schedule's numerics guard, so it lives here, below both.
