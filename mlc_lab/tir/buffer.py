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
BUFFER_ELEM_OFFSET = "buffer_elem_offset"   # the op of ``Buffer.elem_offset``


@node
class Buffer(Node):
    """A buffer. Compared by identity: two buffers with the same name are still two buffers."""
    name: str
    shape: tuple
    dtype: str = "float32"
    strides: tuple = ()
    scope: str = "global"
    # Where the physical buffer starts a new dimension: (2,) splits a 3-D buffer into the
    # physical dimensions (axes 0-1, axis 2). Empty: one flat dimension, as for most buffers.
    axis_separators: tuple = ()
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
        """``A.elem_offset``: where the buffer starts in its storage, in elements. An mlc_lab
        buffer owns its storage from the first element, so this is 0 for a parameter or an
        allocation; for a view (a match_buffer of a region) it is where the region starts. In
        the IR it is ``Call(index dtype, "buffer_elem_offset", (A[0, ..., 0],))``: the offset of
        A's first element, so that it follows A when a schedule step puts a view in A's place
        (tensorize instantiates a tensor intrinsic's implementation so), and lowering makes it
        the flattened index of that element."""
        dtype = self.shape[0].dtype if self.shape else "int32"
        return Call(dtype, BUFFER_ELEM_OFFSET, (BufferLoad(self, tuple(const(0, d.dtype) for d in self.shape)),))

    def access_ptr(self, access_mask="rw", ptr_type: str = "handle", content_lanes: int = 1,
                   offset=0, extent=None) -> Call:
        """``A.access_ptr("r", extent=128)``: the address of A's storage from element ``offset``
        on, for ``extent`` elements (all that follow by default), for reading ("r"), writing
        ("w") or both ("rw", or the mask 1 | 2), as hand-written kernels and tensor intrinsics
        take it. It is the opaque call ``T.tvm_access_ptr(T.type_annotation(dtype), A.data,
        offset, extent, mask)``, as the reference compiler builds it: it parses, prints and
        schedules, and a block using it reads ("r") and/or writes ("w") all of A; building a
        program that calls something with it is refused by name, since mlc_lab runs no
        external kernel."""
        from .extern import call_extern   # below this module's own imports: no cycle
        mask = _access_mask(access_mask, self.name)
        if content_lanes != 1:
            raise NotImplementedError(f"{self.name}.access_ptr: content_lanes={content_lanes} is not "
                                      "supported; mlc_lab addresses buffers element by element")
        index = self.shape[0].dtype if self.shape else "int32"
        offset = const(offset, index) if isinstance(offset, int) else convert(offset)
        if extent is None:   # to the end of the buffer (of its outermost stride, if strided)
            extent = const(1, index)
            if self.strides and len(self.strides) == len(self.shape):
                extent = convert(self.strides[0]) * self.shape[0]
            else:
                for dim in self.shape:
                    extent = extent * dim
            extent = extent - offset
            from ..arith import simplify   # the arithmetic layer sits beside this one
            extent = simplify(extent)
        extent = const(extent, index) if isinstance(extent, int) else convert(extent)
        annotation = call_extern(self.dtype, "type_annotation")
        return call_extern(ptr_type or "handle", "tvm_access_ptr", annotation, self.data, offset, extent,
                           const(mask, "int32"))


def _access_mask(access_mask, name: str) -> int:
    """The mask of ``access_ptr``: 1 to read, 2 to write, 3 for both ("r", "w", "rw" or an int)."""
    if isinstance(access_mask, int) and not isinstance(access_mask, bool) and 0 < access_mask <= 3:
        return access_mask
    if isinstance(access_mask, str) and access_mask and set(access_mask) <= {"r", "w"}:
        return (1 if "r" in access_mask else 0) | (2 if "w" in access_mask else 0)
    raise ValueError(f"{name}.access_ptr: the access mask is \"r\", \"w\", \"rw\" or 1..3, got "
                     f"{access_mask!r}")


def _index(i, buffer: Buffer) -> PrimExpr:
    if isinstance(i, PrimExpr):
        return i
    if isinstance(i, (int,)) or hasattr(i, "__index__"):
        dtype = buffer.shape[0].dtype if buffer.shape and isinstance(buffer.shape[0], PrimExpr) else "int32"
        return const(int(i), dtype if dt.is_int(dtype) else "int32")
    return convert(i)


def decl_buffer(shape, dtype: str = "float32", name: str = "buffer", strides=(), scope: str = "global",
                axis_separators=()) -> Buffer:
    """Make a buffer; ``shape`` entries may be ints or PrimExprs (symbolic dimensions).
    ``axis_separators`` (increasing axes in ``1 .. ndim - 1``) split its physical layout into
    several dimensions, one per group of logical axes (``physical_groups``)."""
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
    separators = check_axis_separators(axis_separators, name)
    return Buffer(name, shape, dt.check_dtype(dtype), strides, scope, separators)


def check_axis_separators(axis_separators, name: str) -> tuple:
    """``axis_separators`` as a tuple of ints: non-negative and strictly increasing. Whether each
    physical dimension holds at least one axis (``1 <= s < ndim``) is checked where the buffer is
    flattened (``physical_groups``): a view may carry its source's separators, as in the
    reference compiler."""
    if axis_separators is None:
        return ()
    if isinstance(axis_separators, (int, IntImm)):
        axis_separators = (axis_separators,)
    out = []
    for sep in axis_separators:
        value = sep.value if isinstance(sep, IntImm) else sep
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"buffer {name}: axis_separators must be integers, got {sep!r}")
        out.append(int(value))
    if any(s < 0 for s in out) or any(a >= b for a, b in zip(out, out[1:])):
        raise ValueError(f"buffer {name}: axis_separators={out} must be non-negative and increase "
                         "strictly")
    return tuple(out)


def physical_groups(buffer: Buffer) -> list:
    """The logical axes of each physical dimension of ``buffer`` (``[[0, 1], [2]]`` for a 3-D
    buffer with ``axis_separators=[2]``); a ValueError names the buffer when a separator would
    leave a physical dimension without axes."""
    seps = buffer.axis_separators
    if any(not 0 < s < buffer.ndim for s in seps):
        raise ValueError(f"buffer {buffer.name}: axis_separators={list(seps)} must lie in "
                         f"1 .. {buffer.ndim - 1} for its {buffer.ndim} dimension(s): each physical "
                         "dimension holds at least one axis")
    bounds = [0, *seps, buffer.ndim]
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


class UninitializedReadError(RuntimeError):
    """A program read an element of an intermediate buffer that nothing had written yet: its
    value is whatever the memory held (compiled code) and the program is wrong."""
    # Raised by the reference interpreter (mlc_lab.runtime, which re-exports it) and caught by the
    # schedule's numerics guard, so it lives here, below both.
