"""Statements of the loop IR: loops, blocks (TensorIR's unit of computation), stores, allocation."""
from __future__ import annotations

from typing import Any, Optional

from ..ir.node import Node, node
from .buffer import Buffer
from .expr import IntImm, PrimExpr, Var, const, convert


class Stmt(Node):
    __slots__ = ()


@node
class Range(Node):
    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        min_value = convert(min_value)
        extent = convert(extent)
        if extent.dtype != min_value.dtype and isinstance(min_value, IntImm):
            min_value = const(min_value.value, extent.dtype)
        return Range(min_value, extent)


@node
class BufferRegion(Node):
    """A rectangular part of a buffer, one Range per dimension (``A[vi, 0:128]``)."""
    buffer: Buffer
    region: tuple

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, tuple(Range(const(0, s.dtype), s) for s in buffer.shape))

    @staticmethod
    def from_slices(buffer: Buffer, indices) -> "BufferRegion":
        if len(indices) != buffer.ndim:
            raise IndexError(f"buffer {buffer.name} has {buffer.ndim} dimension(s) but the region "
                             f"names {len(indices)}")
        region = []
        for idx, dim in zip(indices, buffer.shape):
            if isinstance(idx, slice):
                if idx.step not in (None, 1):
                    raise ValueError(f"buffer {buffer.name}: region slices must have step 1")
                start = convert(0 if idx.start is None else idx.start)
                stop = dim if idx.stop is None else convert(idx.stop)
                region.append(Range(start, stop - start))
            else:
                region.append(Range(convert(idx), const(1, convert(idx).dtype)))
        return BufferRegion(buffer, tuple(region))


@node
class IterVar(Node):
    """A block iterator: its variable, its domain, and whether it is spatial or a reduction."""
    var: Var
    dom: Range
    iter_type: str = "spatial"   # "spatial" | "reduce" | "opaque" | "scan" (ordered: each
    # iteration may use the previous ones, so its loops keep their order)


@node
class MatchBufferRegion(Node):
    buffer: Buffer
    source: BufferRegion


@node
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple


@node
class SeqStmt(Stmt):
    seq: tuple

    def __getitem__(self, index):
        """``seq_stmt[k]``: its k-th statement (the reference compiler's indexing)."""
        return self.seq[index]

    def __len__(self) -> int:
        return len(self.seq)


FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")


class ForKind:
    """The kinds of loop under the reference compiler's names: ``ForKind.SERIAL`` is "serial",
    the string ``For.kind`` holds (plain strings, so ``kind=ForKind.SERIAL`` and ``kind="serial"``
    build the same loop)."""
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
               "vthread", "vthread.x", "vthread.y", "vthread.z")


class Annotations(tuple):
    """The annotations of a loop or block: (key, value) pairs, also looked up by key like the
    reference compiler's annotation map (``block.annotations["key"]``, ``.get("key")``)."""
    __slots__ = ()

    def __getitem__(self, key):
        if isinstance(key, str):
            for k, v in self:
                if k == key:
                    return v
            raise KeyError(key)
        return tuple.__getitem__(self, key)

    def get(self, key: str, default=None):
        return next((v for k, v in self if k == key), default)


def _annotations(value) -> Annotations:
    if type(value) is Annotations:
        return value
    return Annotations(() if value is None else value.items() if isinstance(value, dict) else value)


@node
class For(Stmt):
    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    thread_binding: Optional[str] = None
    annotations: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "annotations", _annotations(self.annotations))


_for_fields_init = For.__init__


def _for_init(self, *args, min_val=None, **kwargs):
    """``For(loop_var, min, extent, kind, body, ...)``; the start may also be given as
    ``min_val=`` (the reference compiler's keyword)."""
    if min_val is not None:
        if "min" in kwargs or len(args) > 1:
            raise TypeError("For: give the loop's start once, as min or as min_val")
        kwargs["min"] = min_val
    _for_fields_init(self, *args, **kwargs)


For.__init__ = _for_init


@node
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Optional[Stmt] = None


@node
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@node
class Evaluate(Stmt):
    value: PrimExpr


@node
class Allocate(Stmt):
    """Storage for ``buffer`` that lives while ``body`` runs."""
    buffer: Buffer
    body: Stmt


@node
class AllocateConst(Allocate):
    """An Allocate whose storage holds ``data`` (the buffer's elements in row-major order, Python
    floats or ints of its dtype) before ``body`` runs: ``T.allocate_const``. Being an Allocate,
    every analysis that sees allocations sees it; ``lower_init_block`` turns it into an Allocate
    and the stores that fill it."""
    data: tuple = ()

    def __post_init__(self):
        size = 1
        for dim in self.buffer.shape:
            if not isinstance(dim, IntImm):
                raise ValueError(f"T.allocate_const {self.buffer.name}: the extents must be constants, "
                                 f"got {dim}")
            size *= dim.value
        if len(self.data) != size:
            raise ValueError(f"T.allocate_const {self.buffer.name}: {len(self.data)} value(s) for "
                             f"extents {tuple(d.value for d in self.buffer.shape)} ({size} elements)")
        kind = float if self.buffer.dtype.startswith("float") else int
        object.__setattr__(self, "data", tuple(kind(v) for v in self.data))


@node
class Block(Stmt):
    """The unit of computation: iterators with domains, the regions it reads and writes, an optional
    reduction ``init``, the buffers it allocates, and its body."""
    name_hint: str
    iter_vars: tuple
    reads: tuple
    writes: tuple
    body: Stmt
    init: Optional[Stmt] = None
    alloc_buffers: tuple = ()
    match_buffers: tuple = ()
    annotations: tuple = ()

    def __post_init__(self):
        # The reference compiler's constructor takes lists, None for "none" and a dict of
        # annotations: keep the fields tuples (of (key, value) pairs for the annotations).
        for name in ("iter_vars", "reads", "writes", "alloc_buffers", "match_buffers"):
            value = getattr(self, name)
            if type(value) is not tuple:
                value = () if value is None else tuple(value)
                object.__setattr__(self, name, value)
        object.__setattr__(self, "annotations", _annotations(self.annotations))


@node
class BlockRealize(Stmt):
    """A block placed in a loop nest: ``iter_values`` bind its iterators, ``predicate`` guards it."""
    iter_values: tuple
    predicate: PrimExpr
    block: Block

    def __post_init__(self):
        # As the reference compiler's constructor: a list of values, a Python bool predicate.
        if type(self.iter_values) is not tuple:
            object.__setattr__(self, "iter_values", tuple(self.iter_values))
        if not isinstance(self.predicate, PrimExpr):
            object.__setattr__(self, "predicate", convert(self.predicate))


def seq(*stmts: Stmt) -> Stmt:
    """A SeqStmt of the given statements, flattening nested sequences; one statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        elif s is not None:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


def annotations_dict(annotations: tuple) -> dict[str, Any]:
    return dict(annotations)


def make_annotations(mapping: dict[str, Any]) -> tuple:
    return tuple(sorted(mapping.items()))
