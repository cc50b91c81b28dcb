"""Buffer attributes: storage_align, set_axis_separator, unsafe_set_dtype; and add_unit_loop."""
from __future__ import annotations

from ...buffer import BUFFER_DATA, BUFFER_ELEM_OFFSET, Buffer
from ... import dtype as dt
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import post_order_visit
from ...transform.storage_align import BUFFER_DIM_ALIGN, align_entries
from .. import errors
from ..instruction import instruction
from ..rv import BlockRV, LoopRV
from .cache import _nth_buffer


class BufferAttrPrimitives:

    @instruction
    def storage_align(self, block, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        """Ask that the buffer ``block`` writes (its ``buffer_index``-th write) be laid out with
        ``stride[axis] % factor == offset``: lowering pads that axis's stride up to the next such
        value (rows of a shared-memory tile one element longer than 32 against bank conflicts).

        The request is the block annotation ``buffer_dim_align`` (a list of
        ``[buffer_index, axis, factor, offset]``; a second request for the same buffer and axis
        replaces the first). When the buffer is allocated, after it has been compacted to the
        region it needs, its strides are computed from the innermost axis outwards, each aligned
        axis rounded up as asked; the allocation spans the padded size and every access uses
        those strides. The values a program computes do not change.

        Requires: ``buffer_index`` indexes ``block``'s writes; the buffer is an alloc_buffer
        without explicit strides; ``factor`` >= 1; 0 <= ``offset`` < ``factor`` (a stride leaves
        no other remainder); ``axis`` in [-ndim, ndim); any existing annotation is well formed.

        Raises: BufferIndexOutOfRangeError, StorageAlignFactorError, StorageAlignOffsetError,
        StorageAlignAxisError, NotAllocatedBufferError, StridedBufferError,
        StorageAlignAnnotationError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        ...     B = T.alloc_buffer((16, 16))
        ...     for i, j in T.grid(16, 16):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        ...     for i, j in T.grid(16, 16):
        ...         with T.block("C"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             C[vi, vj] = B[vi, vj] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=1)
        >>> print(sch.mod["main"].script().splitlines()[10])
                    T.block_attr({"buffer_dim_align": [[0, 0, 8, 1]]})
        >>> lowered = mlc_lab.lower(sch.mod)["main"].script().splitlines()
        >>> print("\\n".join(lowered[3:6]))   # rows of 17 elements, not 16
            B = T.allocate((271,), "float32", "global")
            for i, j in T.grid(16, 16):
                B[i * 17 + j] = A[i * 16 + j] * T.float32(2)
        """
        primitive = "storage_align"
        func_name, realize, index = self._resolve_block(block, primitive)
        func = self._func(func_name)
        for name, value in (("buffer_index", buffer_index), ("axis", axis), ("factor", factor),
                            ("offset", offset)):
            _check_int(primitive, name, value)
        blk = realize.block
        buffer = _nth_buffer(realize, buffer_index, "write", primitive, func)

        def fail(error, message):
            raise error(primitive, message, func, [blk])
        if factor < 1:
            fail(errors.StorageAlignFactorError, f"the factor must be a positive integer, got "
                 f"{factor} (for buffer {buffer.name} written by block \"{blk.name_hint}\")")
        if not 0 <= offset < factor:
            fail(errors.StorageAlignOffsetError, f"the offset {offset} is not in 0 .. {factor - 1}: "
                 f"a stride divided by {factor} leaves no remainder {offset} (buffer {buffer.name})")
        if not -buffer.ndim <= axis < buffer.ndim:
            fail(errors.StorageAlignAxisError, f"buffer {buffer.name} has {buffer.ndim} "
                 f"dimension(s), so the axis must be in [{-buffer.ndim}, {buffer.ndim}); got {axis}")
        _check_allocated(primitive, func, index, buffer, blk)
        if buffer.strides:
            fail(errors.StridedBufferError, f"buffer {buffer.name} declares the strides "
                 f"{list(buffer.strides)}; storage_align sets strides of a buffer that has none")
        annotations = dict(blk.annotations)
        entries = [] if BUFFER_DIM_ALIGN not in annotations else align_entries(annotations[BUFFER_DIM_ALIGN])
        if entries is None:
            fail(errors.StorageAlignAnnotationError, f"block \"{blk.name_hint}\" has the annotation "
                 f"{BUFFER_DIM_ALIGN}={annotations[BUFFER_DIM_ALIGN]!r}, which is not a list of "
                 "[buffer_index, axis, factor, offset] integer quadruples")
        request = (buffer_index, axis % buffer.ndim, factor, offset)
        if any(e[:2] == request[:2] for e in entries):   # replaces the earlier request in place
            entries = [request if e[:2] == request[:2] else e for e in entries]
        else:
            entries = entries + [request]
        annotations[BUFFER_DIM_ALIGN] = [list(e) for e in entries]
        new_block = blk.replace(annotations=tuple(sorted(annotations.items())))
        self._replace(func_name, {id(realize): realize.replace(block=new_block)}, primitive)

    def set_axis_separator(self, block, buffer, axis_separators) -> None:
        """Split the physical layout of a buffer into several dimensions: ``axis_separators``
        (e.g. ``[1]`` for a 2-D buffer) start a new physical dimension at each given axis.

        The buffer is named as ``("read", n)``/``("write", n)`` (the n-th region ``block`` reads
        or writes), by its name, or as the Buffer; the trace records the pair. Every use of the
        buffer (a parameter, in the function's signature, too) gets the separators, and so do
        the match_buffer views of it, as the reference compiler does. On the CPU and GPU
        backends every buffer lives in one block of memory, so the program is addressed as
        before; the separators are kept for printing and for backends with multi-dimensional
        memory. ``axis_separators=[]`` (or None) removes them.

        Requires: the buffer is a parameter or an alloc_buffer (not a match_buffer view), without
        explicit strides; the separators increase strictly and lie in 1 .. ndim - 1.

        Raises: AccessIndexOutOfRangeError (an AssertionError too), BufferNotAccessedError,
        SubregionBufferError, StridedBufferError, AxisSeparatorsError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
        ...     B = T.alloc_buffer((4, 4))
        ...     for i, j in T.grid(4, 4):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        ...     for i, j in T.grid(4, 4):
        ...         with T.block("C"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             C[vi, vj] = B[vi, vj] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
        >>> print(sch.mod["main"].script().splitlines()[4])
            B = T.alloc_buffer((4, 4), axis_separators=[1])
        """
        primitive = "set_axis_separator"
        func_name, realize, _ = self._resolve_block(block, primitive)
        spec = _buffer_spec(realize, buffer, self._func(func_name), primitive)
        separators = [] if axis_separators is None else axis_separators
        if isinstance(separators, (int, E.IntImm)):
            separators = [separators]
        if not isinstance(separators, (list, tuple)):
            raise TypeError(f"sch.{primitive}: parameter 'axis_separators' expects a list of int, "
                            f"got {type(axis_separators).__name__}: {axis_separators!r}")
        separators = [s.value if isinstance(s, E.IntImm) else s for s in separators]
        for s in separators:
            _check_int(primitive, "axis_separators", s)
        return self._traced_set_axis_separator(block, spec, list(separators))

    def _set_axis_separator(self, block, buffer, axis_separators) -> None:
        primitive = "set_axis_separator"
        func_name, realize, index = self._resolve_block(block, primitive)
        func = self._func(func_name)
        blk = realize.block
        target = _buffer_of(realize, _buffer_spec(realize, buffer, func, primitive))

        def fail(error, message):
            raise error(primitive, message, func, [blk])
        is_param = any(p is target for p in func.params)
        if not is_param and _allocating_block(func, target) is None:
            fail(errors.SubregionBufferError, f"buffer {target.name} accessed by block "
                 f"\"{blk.name_hint}\" is a match_buffer view, not a parameter or an alloc_buffer; "
                 "set the separators of the buffer it views")
        if target.strides:
            fail(errors.StridedBufferError, f"buffer {target.name} declares the strides "
                 f"{list(target.strides)}; a strided buffer cannot be split into physical axes")
        seps = tuple(int(s) for s in axis_separators)
        if any(not 0 < s < target.ndim for s in seps) or any(a >= b for a, b in zip(seps, seps[1:])):
            fail(errors.AxisSeparatorsError, f"axis_separators={list(seps)} for buffer "
                 f"{target.name} of {target.ndim} dimension(s): they must increase strictly and "
                 f"lie in 1 .. {target.ndim - 1}, each physical dimension holding at least one axis")
        self._update(func_name, with_axis_separators(func, target, seps), primitive)

    def unsafe_set_dtype(self, block, buffer_index, dtype: str) -> None:
        """Change the element type of the buffer ``block`` writes (its ``buffer_index``-th
        write, the written buffer of that name, or that Buffer; the trace records the index).

        Every store to the buffer (or to a match_buffer view of it, which changes type too)
        converts the stored value to ``dtype``; every load converts the element back to the old
        type, so the rest of the program keeps its types. This is unsafe: values are rounded or
        wrapped to the new type (float32 to float16 loses precision), which changes results;
        ``check_numerics`` will report it. A dtype equal to the buffer's changes nothing.

        Requires: the buffer is an alloc_buffer (not a parameter or a view); ``dtype`` is a
        scalar dtype; the buffer's storage is not handed out whole (``B.data``,
        ``B.access_ptr``), where no conversion could be put.

        Raises: BufferIndexOutOfRangeError, BufferNotAccessedError, InvalidDTypeError,
        NotAllocatedBufferError, OpaqueBufferUseError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        ...     B = T.alloc_buffer((8,))
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(f)
        >>> sch.unsafe_set_dtype(sch.get_block("B"), 0, "float16")
        >>> lines = sch.mod["main"].script().splitlines()
        >>> print("\\n".join([lines[4], lines[10], lines[16]]))
            B = T.alloc_buffer((8,), "float16")
                    B[vi] = T.Cast("float16", A[vi] * T.float32(2))
                    C[vi] = T.Cast("float32", B[vi]) + T.float32(1)
        """
        buffer_index = self._buffer_index(block, buffer_index, "write", "unsafe_set_dtype")
        return self._traced_unsafe_set_dtype(block, buffer_index, dtype)

    def _unsafe_set_dtype(self, block, buffer_index: int, dtype: str) -> None:
        primitive = "unsafe_set_dtype"
        func_name, realize, index = self._resolve_block(block, primitive)
        func = self._func(func_name)
        blk = realize.block
        buffer = _nth_buffer(realize, buffer_index, "write", primitive, func)
        try:
            dtype = dt.check_dtype(dtype)
        except (TypeError, ValueError) as err:
            raise errors.InvalidDTypeError(primitive, f"{err} (for buffer {buffer.name})", func,
                                           [blk]) from None
        if dtype in ("handle",) or "x" in dtype:
            raise errors.InvalidDTypeError(primitive, f"{dtype!r} is not a scalar element type "
                                           f"(for buffer {buffer.name})", func, [blk])
        _check_allocated(primitive, func, index, buffer, blk)
        if buffer.dtype == dtype:
            return None
        mapping = _with_views(func, buffer, buffer.replace(dtype=dtype),
                              lambda view, new: view.replace(dtype=new.dtype))
        opaque = _opaque_use(func.body, mapping)
        if opaque is not None:
            raise errors.OpaqueBufferUseError(
                primitive, f"buffer {opaque.name} is handed out whole ({opaque.name}.data or "
                f"{opaque.name}.access_ptr), so its elements cannot be converted at each access",
                func, [blk])
        self._update(func_name, _Retype(mapping, convert=True).visit(func), primitive)
        return None

    @instruction
    def add_unit_loop(self, block_or_loop) -> LoopRV:
        """Wrap a block (its BlockRealize) or a loop in a new loop ``u`` of extent 1.

        Useful to give a loopless block a loop to split, bind or tensorize at. The new loop is
        serial and binds nothing, so the program computes the same.

        Requires: the block is not the root block.
        Returns: the new loop.
        Raises: UnitLoopAboveRootError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((), "int32"), C: T.Buffer((), "int32")):
        ...     with T.block("C"):
        ...         vi = T.axis.spatial(1, 0)
        ...         C[()] = A[()] + 1
        >>> sch = tir.Schedule(f)
        >>> u = sch.add_unit_loop(sch.get_block("C"))
        >>> print(sch.mod["main"].body.block.body.script().splitlines()[0])
        for u in range(1):
        """
        primitive = "add_unit_loop"
        if isinstance(block_or_loop, LoopRV):
            func_name, node, index = self._resolve_loop(block_or_loop, primitive, "block_or_loop")
            dtype = node.loop_var.dtype
        else:
            func_name, node, index = self._resolve_block(block_or_loop, primitive, "block_or_loop")
            if node is self._func(func_name).body or not index.path(node):
                raise errors.UnitLoopAboveRootError(
                    primitive, f'block "{node.block.name_hint}" is the root block of function '
                    f"{func_name}; a loop can only be added above a block inside it",
                    self._func(func_name), [node.block])
            loops = index.loops_above(node)
            dtype = loops[0].loop_var.dtype if loops else "int32"
        var = E.Var("u", dtype)
        new_loop = S.For(var, E.const(0, dtype), E.const(1, dtype), "serial", node)
        self._replace(func_name, {id(node): new_loop}, primitive)
        return self._loop_rv_of_var(var, func_name)


# -- helpers -------------------------------------------------------------------------------------
def _check_int(primitive: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"sch.{primitive}: parameter '{name}' expects an int, got "
                        f"{type(value).__name__}: {value!r}")


def _allocating_block(func, buffer):
    """The Block whose alloc_buffers hold ``buffer``, or None."""
    found = []

    def note(node):
        if isinstance(node, S.Block) and any(b is buffer for b in node.alloc_buffers):
            found.append(node)
    post_order_visit(func.body, note)
    return found[0] if found else None


def _check_allocated(primitive, func, index, buffer, blk) -> None:
    if _allocating_block(func, buffer) is None:
        what = ("a parameter of the function" if any(p is buffer for p in func.params)
                else "a match_buffer view of another buffer")
        raise errors.NotAllocatedBufferError(
            primitive, f"buffer {buffer.name} (written by block \"{blk.name_hint}\") is {what}, "
            f"not an alloc_buffer; {primitive} applies to buffers allocated inside the function",
            func, [blk])


def with_axis_separators(func, buffer, separators: tuple):
    """``func`` with ``buffer`` (and every match_buffer view of it, which carries its source's
    separators) given ``separators``; nothing else changes."""
    mapping = _with_views(func, buffer, buffer.replace(axis_separators=tuple(separators)),
                          lambda view, new: view.replace(axis_separators=new.axis_separators))
    return _Retype(mapping).visit(func)


def _buffer_spec(realize, buffer, func, primitive: str) -> tuple:
    """``buffer`` as ("read", n) or ("write", n) of ``realize``'s block."""
    blk = realize.block
    if isinstance(buffer, (str, Buffer)):
        for kind, regions in (("read", blk.reads), ("write", blk.writes)):
            for n, region in enumerate(regions):
                if region.buffer is buffer or region.buffer.name == buffer:
                    return (kind, n)
        shown = buffer if isinstance(buffer, str) else buffer.name
        names = sorted({r.buffer.name for r in blk.reads + blk.writes})
        raise errors.BufferNotAccessedError(
            primitive, f'block "{blk.name_hint}" does not access a buffer {shown!r} (it accesses '
            f"{', '.join(names) or 'none'})", func, [blk])
    if (not isinstance(buffer, (tuple, list)) or len(buffer) != 2 or buffer[0] not in ("read", "write")
            or isinstance(buffer[1], bool) or not isinstance(buffer[1], int)):
        raise TypeError(f"sch.{primitive}: parameter 'buffer' expects (\"read\", n), (\"write\", n), "
                        f"a buffer name or a Buffer, got {buffer!r}")
    kind, n = buffer
    regions = blk.reads if kind == "read" else blk.writes
    if not 0 <= n < len(regions):
        raise errors.AccessIndexOutOfRangeError(
            primitive, f'block "{blk.name_hint}" {kind}s {len(regions)} buffer(s); {kind} index '
            f"{n} is out of range", func, [blk])
    return (kind, n)


def _buffer_of(realize, spec):
    kind, n = spec
    return (realize.block.reads if kind == "read" else realize.block.writes)[n].buffer


def _with_views(func, old, new, derive) -> dict:
    """id(buffer) -> (old buffer, new buffer) for ``old`` and every match_buffer view of it (views
    of views too); each view's new buffer is ``derive(view, new buffer of its source)``."""
    matches = []
    post_order_visit(func.body, lambda n: matches.append(n) if isinstance(n, S.MatchBufferRegion) else None)
    mapping = {id(old): (old, new)}
    changed = True
    while changed:
        changed = False
        for match in matches:
            source = mapping.get(id(match.source.buffer))
            if source is not None and id(match.buffer) not in mapping:
                mapping[id(match.buffer)] = (match.buffer, derive(match.buffer, source[1]))
                changed = True
    return mapping


def _opaque_use(body, mapping: dict):
    """A buffer of ``mapping`` whose storage a call takes whole (``B.data``), or None."""
    found = []

    def note(node):
        if isinstance(node, E.Call) and node.op == BUFFER_DATA:
            load = node.args[0]
            if isinstance(load, E.BufferLoad) and id(load.buffer) in mapping:
                found.append(load.buffer)
    post_order_visit(body, note)
    return found[0] if found else None


class _Retype(StmtExprMutator):
    """Every use of the buffers of ``mapping`` becomes the new buffer; with ``convert``, stores
    cast the value to the new dtype and loads cast the element back to the old one."""

    def __init__(self, mapping: dict, convert: bool = False):
        super().__init__()
        self.mapping, self.convert = mapping, convert

    def visit_Buffer(self, buffer):
        entry = self.mapping.get(id(buffer))
        return buffer if entry is None else entry[1]

    def visit_Call(self, call):
        # A.data / A.elem_offset name the buffer through a marker load, which reads no element
        if call.op in (BUFFER_DATA, BUFFER_ELEM_OFFSET) and isinstance(call.args[0], E.BufferLoad):
            marker = call.args[0]
            return call.replace(args=(marker.replace(buffer=self.visit_Buffer(marker.buffer),
                                                     indices=self.visit(marker.indices)),))
        return self.generic_visit(call)

    def visit_BufferLoad(self, load):
        new = self.generic_visit(load)
        entry = self.mapping.get(id(load.buffer))
        if self.convert and entry is not None:
            return E.Cast(entry[0].dtype, new)
        return new

    def visit_BufferStore(self, store):
        new = self.generic_visit(store)
        entry = self.mapping.get(id(store.buffer))
        if self.convert and entry is not None:
            return new.replace(value=E.Cast(entry[1].dtype, new.value))
        return new


def _traced(method, name: str):
    """``method`` as the traced instruction ``name``; its public wrapper normalises the buffer
    argument first, so that traces record an index and replay from JSON."""
    import inspect

    def call(self, *args, **kwargs):
        return method(self, *args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__signature__ = inspect.signature(method)
    getattr(BufferAttrPrimitives, name).is_instruction = True
    return instruction(call)


BufferAttrPrimitives._traced_set_axis_separator = _traced(
    BufferAttrPrimitives._set_axis_separator, "set_axis_separator")
BufferAttrPrimitives._traced_unsafe_set_dtype = _traced(
    BufferAttrPrimitives._unsafe_set_dtype, "unsafe_set_dtype")
