"""Data layout: transform_layout rewrites a buffer's shape and every access to it through an
index map such as ``lambda i, j: (j // 4, i, j % 4)``."""
from __future__ import annotations

import numpy as np

from ....arith import int_bound, simplify
from ....ir import hooks
from ...analysis import relax_bound
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...index_map import IndexMap, IndexMapError, fold_div_mod
from ...index_map_digits import fold_symbolic_split
from ...stmt_functor import StmtReplacer, loads_in, post_order_visit, substitute
from .. import errors
from ..instruction import instruction
from .block_layout import BlockLayoutPrimitives
from .index_map_text import (_compile_index_map, _arity, build_index_map, index_map_source,  # noqa: F401
                             name_scope, pad_value_source)
from .layout_padding import apply_padding

_INJECTIVITY_CHECK_LIMIT = 1 << 22


class LayoutPrimitives(BlockLayoutPrimitives):

    def transform_layout(self, block, buffer, index_map, pad_value=None, *,
                         assume_injective_transform=False):
        """Change the layout of a buffer: element ``X[i, j]`` moves to ``X[index_map(i, j)]``.

        The buffer's new shape is the range of the map over the old shape; every load, store and
        block region of the buffer is rewritten. The index map is a Python function (also
        ``lambda *indices, k: ...``), a ``tir.IndexMap`` or the source string of a lambda (the
        trace records the string, so it saves to JSON); ``IndexMap.AXIS_SEPARATOR`` among its
        outputs sets the new buffer's axis separators. Applied to a parameter, it changes the
        function's signature: callers must pass the array in the new layout.

        Places of the new shape that no element reaches (padding: ``lambda i: (i // 4, i % 4)``
        on 14 elements) get ``pad_value`` (a number, a function of the new indices, or an
        IndexMap giving one value) as the reference compiler does: a writer that stores every
        element in a row-major loop nest of its own is rewritten over the new shape with
        ``T.if_then_else(padding, pad_value, value)``; otherwise a block after the last writer
        fills the padding; a buffer nothing writes (an input) gets a ``T.assume`` block stating
        that the caller's padding holds the value.

        Requires: ``buffer`` is ``("read", n)``/``("write", n)`` (the n-th read/write region of
        ``block``), the name of a buffer ``block`` accesses, or that Buffer; it is a parameter or
        an alloc_buffer without strides; the map takes one argument per dimension, gives
        non-negative bounded indices, sends different elements to different places, and, for a
        parameter, leaves no place of the new shape unused unless ``pad_value`` fills it or
        ``assume_injective_transform=True`` says the caller accepts unused places (without
        them the caller would see places nothing writes). A buffer allocated in the function
        may be padded without a value (the classic extra column against shared-memory bank
        conflicts: ``r * 33 + c``); the reference compiler asks for ``pad_value`` or
        ``assume_injective_transform`` there, and nothing reads the unused places.
        ``pad_value`` has the buffer's dtype and reads no buffer.

        Parameters: block (BlockRV or name), buffer (tuple, str or Buffer), index_map (function,
        IndexMap or str), pad_value (None, number, function, IndexMap or str),
        assume_injective_transform (bool).
        Raises (all LayoutError): BufferNotAccessedError, BufferIndexOutOfRangeError,
        NotParamOrAllocError, NonCompactBufferError, IndexMapArityError, NegativeIndexError,
        UnboundedIndexError, NotInjectiveError, TransformationPaddingError, BufferHasViewsError,
        PadValueArityError, PadValueTypeError, PadValueLoadError, PaddingNotAnalyzableError,
        IndexMapNameError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
        ...     B = T.alloc_buffer((4, 8))
        ...     for i, j in T.grid(4, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] + T.float32(1)
        ...     for i, j in T.grid(4, 8):
        ...         with T.block("C"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             C[vi, vj] = B[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: (j // 4, i, j % 4))
        >>> print(sch.mod["main"].body)
        with T.block("root"):
            T.reads()
            T.writes()
            B = T.alloc_buffer((2, 4, 4))
            for i, j in T.grid(4, 8):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(A[vi, vj])
                    T.writes(B[vj // 4, vi, vj % 4])
                    B[vj // 4, vi, vj % 4] = A[vi, vj] + T.float32(1)
            for i, j in T.grid(4, 8):
                with T.block("C"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(B[vj // 4, vi, vj % 4])
                    T.writes(C[vi, vj])
                    C[vi, vj] = B[vj // 4, vi, vj % 4] * T.float32(2)
        >>> print(sch.trace.as_python()[-1])
        sch.transform_layout(block=b0, buffer=["write", 0], index_map="lambda i, j: (j // 4, i, j % 4)")

        With padding, filled by the writer:

        >>> @T.prim_func
        ... def g(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32")):
        ...     for i in range(6):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(6, i)
        ...             B[vi] = A[vi]
        >>> sch = tir.Schedule(g)
        >>> sch.transform_layout("B", "B", lambda i: (i // 4, i % 4), pad_value=0.0)
        >>> print(sch.mod["main"].body.block.body)
        for axis0, axis1 in T.grid(2, 4):
            with T.block("B"):
                v_axis0, v_axis1 = T.axis.remap("SS", [axis0, axis1])
                T.reads(A[v_axis0 * 4 + v_axis1])
                T.writes(B[v_axis0, v_axis1])
                B[v_axis0, v_axis1] = T.if_then_else(v_axis0 == 1 and v_axis1 >= 2, T.float32(0), A[v_axis0 * 4 + v_axis1])
        """
        func_name, realize, _ = self._resolve_block(block, "transform_layout")
        func = self._func(func_name)
        target = _resolve_buffer(realize, buffer, func, "transform_layout")
        if isinstance(buffer, type(target)):
            buffer = _region_of(realize, target)
        env = name_scope(func)
        dtype = target.shape[0].dtype if target.shape else "int32"
        source = index_map_source(index_map, target.ndim, dtype, env)
        kwargs = {}

        def fail(error, message):
            raise error("transform_layout", message, func, [realize.block])
        imap = build_index_map(source, target.ndim, dtype, env,
                               lambda message: fail(errors.IndexMapNameError, message))[0]
        if pad_value is not None:
            outputs = len(imap.final_indices)
            _pad_map(pad_value, outputs, target, env, dtype, fail)   # refuse before recording
            kwargs["pad_value"] = pad_value_source(pad_value, outputs, dtype, env, target.dtype)
        if assume_injective_transform:
            kwargs["assume_injective_transform"] = True
        return self._traced_transform_layout(block, buffer, source, **kwargs)


def _transform_layout(self, block, buffer, index_map, pad_value=None, assume_injective_transform=False):
    primitive = "transform_layout"
    func_name, realize, _ = self._resolve_block(block, primitive)
    func = self._func(func_name)
    target = _resolve_buffer(realize, buffer, func, primitive)
    blk_name = realize.block.name_hint

    def fail(error, message):
        raise error(primitive, message, func, [realize.block])
    is_param = any(p is target for p in list(func.buffer_map.values()) + list(func.params))
    if not is_param and not _is_allocated(func, target):
        fail(errors.NotParamOrAllocError, f"buffer {target.name} is neither a parameter nor an "
             "alloc_buffer (e.g. a match_buffer); only those can change layout")
    if target.strides:
        fail(errors.NonCompactBufferError, f"buffer {target.name} has explicit strides; "
             "transform_layout needs a compact buffer")
    env = name_scope(func)
    dtype = target.shape[0].dtype if target.shape else "int32"
    fn = _compile_index_map(index_map, env)
    arity = _arity(fn)
    if arity is not None and arity != target.ndim:
        fail(errors.IndexMapArityError, f"the index map {index_map} takes {arity} argument(s) but "
             f"buffer {target.name} (accessed by block \"{blk_name}\") has {target.ndim} dimension(s)")
    imap, separators = build_index_map(index_map, target.ndim, dtype, env,
                                       lambda message: fail(errors.IndexMapNameError, message))
    imap = imap.with_dtype(dtype)
    pad_map = _pad_map(pad_value, len(imap), target, env, dtype, fail)
    domain = {v: S.Range(E.const(0, d.dtype), d) for v, d in zip(imap.initial_indices, target.shape)}
    for out in imap.final_indices:
        lo = int_bound(out, domain)[0]
        if lo is not None and lo < 0:
            fail(errors.NegativeIndexError, f"the index map {index_map} gives {out}, which can be "
                 f"negative ({lo}) on buffer {target.name}")
    try:
        new_shape = imap.map_shape(target.shape)
    except IndexMapError:
        new_shape = None
    try:
        inverse, padding = imap.non_surjective_inverse(target.shape)
    except IndexMapError:
        inverse = padding = None
    if new_shape is None:
        new_shape = _bounded_shape(imap, target, domain, index_map, fail)
    has_padding = padding is not None and not (isinstance(padding, E.IntImm) and padding.value == 0)
    if inverse is None:
        reached = _image_size(imap, target.shape, new_shape)
        if reached is not None and reached < _size(target.shape):
            fail(errors.NotInjectiveError, f"the index map {index_map} sends two elements of buffer "
                 f"{target.name} to the same place; it must be one-to-one")
        has_padding = reached is not None and reached < _size(new_shape)
    if assume_injective_transform:
        has_padding = False
    if has_padding and pad_map is None and is_param:
        shape_text = ", ".join(str(d) for d in new_shape)
        where = "" if padding is None else f" (where {padding})"
        sizes = [_size(target.shape), _size(new_shape)]
        if None in sizes:
            what = (f"leaves places of the new shape ({shape_text}) of parameter {target.name} that "
                    f"no element reaches{where}")
        else:
            what = (f"sends the {sizes[0]} elements of parameter {target.name} to {sizes[1]} places "
                    f"of the new shape ({shape_text}): the {sizes[1] - sizes[0]} others would be "
                    f"padding{where}")
        fail(errors.TransformationPaddingError,
             f"the index map {index_map} {what}, which nothing writes and the caller would see. "
             "Give pad_value=..., or choose a map that fills the new shape (split by a factor of "
             "the extent)")
    if has_padding and pad_map is not None and inverse is None:
        fail(errors.PaddingNotAnalyzableError,
             f"the index map {index_map} pads buffer {target.name}, but it is not a split/fuse "
             "map whose padding can be located, so pad_value cannot be written")
    new_buffer = target.replace(shape=tuple(new_shape))
    if separators:
        new_buffer = new_buffer.replace(axis_separators=tuple(separators))
    body = func.body
    if has_padding and pad_map is not None:
        if not isinstance(body, S.BlockRealize) and not _is_allocated(func, target):
            fail(errors.PaddingNotAnalyzableError, f"function {func_name} has no root block to "
                 f"hold the block that fills the padding of parameter {target.name}")
        body = _pad(body, target, new_buffer, inverse, padding, pad_map)
    rewriter = _Relayout(target, new_buffer, imap.initial_indices, imap.final_indices)
    new_func = rewriter.visit(func.replace(body=body))
    identity = not has_padding and len(imap.final_indices) == len(imap.initial_indices) and all(
        o is v for o, v in zip(imap.final_indices, imap.initial_indices))
    if rewriter.matched and identity:   # only separators change: the views keep their regions
        from .buffer_attrs import with_axis_separators
        new_func = with_axis_separators(func, target, tuple(separators))
    elif rewriter.matched:
        fail(errors.BufferHasViewsError, f"buffer {target.name} is the source of a match_buffer; "
             "transform_layout cannot rewrite views of it")
    self._update(func_name, new_func, primitive)


_transform_layout.__name__ = _transform_layout.__qualname__ = "transform_layout"
LayoutPrimitives._traced_transform_layout = instruction(_transform_layout)
LayoutPrimitives.transform_layout.is_instruction = True


def _pad(body, old, new, inverse, padding, pad_map):
    """``body`` with the padding plan applied in the block that allocates ``old`` (the root
    block for a parameter)."""
    owner, names = [], set()

    def find(node):
        if isinstance(node, S.Block):
            names.add(node.name_hint)
            if any(b is old for b in node.alloc_buffers):
                owner.append(node)
    post_order_visit(body, find)
    scope = owner[0] if owner else body.block
    padded = apply_padding(scope, old, new, inverse, padding, pad_map, names)
    return StmtReplacer({id(scope): padded}).visit(body)


def _size(shape) -> int | None:
    """The number of elements of a constant shape (None for a symbolic one)."""
    if not all(isinstance(d, E.IntImm) for d in shape):
        return None
    return int(np.prod([d.value for d in shape]))


def _bounded_shape(imap, target, domain, index_map, fail) -> list:
    shape = []
    for out in imap.final_indices:
        hi = int_bound(out, domain)[1]
        if hi is None:
            same = [d for v, d in zip(imap.initial_indices, target.shape) if out is v]
            if not same:
                fail(errors.UnboundedIndexError, f"cannot bound {out} from the index map "
                     f"{index_map} over the shape of buffer {target.name}")
            shape.append(same[0])
        else:
            shape.append(E.const(hi + 1, out.dtype))
    return shape


def _pad_map(pad_value, ndim, target, env, dtype, fail):
    """The pad value as an IndexMap of the new indices giving one value of the buffer's dtype."""
    if pad_value is None:
        return None
    if isinstance(pad_value, IndexMap):
        pad = pad_value.with_dtype(dtype)
    elif isinstance(pad_value, str):
        pad, _ = build_index_map(pad_value, ndim, dtype, env,
                                 lambda message: fail(errors.IndexMapNameError, message), "pad value")
    elif callable(pad_value):
        pad = IndexMap.from_func(pad_value, ndim, index_dtype=dtype)
    else:
        value = _typed_number(pad_value, target.dtype)
        pad = IndexMap.from_func(lambda *indices: value, ndim, index_dtype=dtype)
    if len(pad) != 1:
        fail(errors.PadValueArityError, f"pad_value {pad} gives {len(pad)} values; it must give one "
             f"value for each place of buffer {target.name}")
    value = pad.final_indices[0]
    if value.dtype != target.dtype:
        fail(errors.PadValueTypeError, f"buffer {target.name} holds {target.dtype}, but pad_value "
             f"{value} is {value.dtype}")
    loads = loads_in(value)
    if loads:
        fail(errors.PadValueLoadError, f"pad_value {pad} reads buffer {loads[0].buffer.name}; the "
             "value written into the padding of buffer " f"{target.name} may use only its indices")
    return pad


def _typed_number(value, dtype):
    """A Python number as a constant of the buffer's dtype when it is of the same kind (an int
    into an int buffer, a float into a float buffer); other values keep their own dtype."""
    if isinstance(value, E.PrimExpr):
        return value
    if isinstance(value, bool):
        return E.const(value)
    if isinstance(value, int) and ("int" in dtype):
        return E.const(value, dtype)
    if isinstance(value, float) and "float" in dtype:
        return E.const(value, dtype)
    return E.const(value)


def _image_size(imap, old_shape, new_shape) -> int | None:
    """How many places of ``new_shape`` the map reaches from ``old_shape``, found by evaluating it
    on every index (constant, small shapes only); None for maps that cannot be evaluated so (a
    symbolic shape, too many elements, a map the evaluator cannot run)."""
    if not all(isinstance(d, E.IntImm) for d in list(old_shape) + list(new_shape)):
        return None
    dims = [d.value for d in old_shape]
    if int(np.prod(dims)) > _INJECTIVITY_CHECK_LIMIT:
        return None
    Evaluator = hooks.need("runtime.evaluator")
    size = int(np.prod(dims))
    grids = np.indices(dims).reshape(len(dims), -1) if dims else np.zeros((0, 1), np.int64)
    env = {v: g.astype(np.int64) for v, g in zip(imap.initial_indices, grids)}
    try:
        evaluator = Evaluator(env, {})
        coords = [np.broadcast_to(np.asarray(evaluator.eval(e), dtype=np.int64), (size,))
                  for e in imap.final_indices]
        flat = np.ravel_multi_index(coords, [d.value for d in new_shape])
    except Exception:  # not evaluable here
        return None
    return len(np.unique(flat))


# -- finding and rewriting the buffer -------------------------------------------------------------
def _resolve_buffer(realize, buffer, func, primitive):
    blk = realize.block
    if type(buffer).__name__ == "Buffer":
        for region in blk.reads + blk.writes:
            if region.buffer is buffer:
                return buffer
        names = sorted({r.buffer.name for r in blk.reads + blk.writes})
        raise errors.BufferNotAccessedError(
            primitive, f'block "{blk.name_hint}" does not access the given buffer {buffer.name} '
            f"(it accesses {', '.join(names) or 'none'})", func, [blk])
    if isinstance(buffer, str):
        for region in blk.reads + blk.writes:
            if region.buffer.name == buffer:
                return region.buffer
        for b in list(blk.alloc_buffers) + [m.buffer for m in blk.match_buffers]:
            if b.name == buffer:
                return b
        names = sorted({r.buffer.name for r in blk.reads + blk.writes})
        raise errors.BufferNotAccessedError(
            primitive, f'block "{blk.name_hint}" does not access a buffer named {buffer!r} (it '
            f"accesses {', '.join(names) or 'none'})", func, [blk])
    if (not isinstance(buffer, (tuple, list)) or len(buffer) != 2 or buffer[0] not in ("read", "write")
            or not isinstance(buffer[1], int) or isinstance(buffer[1], bool)):
        raise TypeError("sch.transform_layout: parameter 'buffer' expects (\"read\", n), "
                        f"(\"write\", n) or a buffer name, got {buffer!r}")
    kind, n = buffer
    regions = blk.reads if kind == "read" else blk.writes
    if not 0 <= n < len(regions):
        raise errors.BufferIndexOutOfRangeError(
            primitive, f'block "{blk.name_hint}" has {len(regions)} {kind} region(s); '
            f"{kind} index {n} is out of range", func, [blk])
    return regions[n].buffer


def _region_of(realize, buffer) -> tuple:
    """``("read", n)`` or ``("write", n)``: where ``buffer`` stands among the block's regions."""
    for kind, regions in (("read", realize.block.reads), ("write", realize.block.writes)):
        for n, region in enumerate(regions):
            if region.buffer is buffer:
                return (kind, n)
    return buffer.name


def _is_allocated(func, buffer) -> bool:
    allocated = []

    def note(node):
        if isinstance(node, S.Block):
            allocated.extend(node.alloc_buffers)
    post_order_visit(func.body, note)
    return any(b is buffer for b in allocated)


class _Relayout(StmtExprMutator):
    """Every access to ``old`` goes through the index map to ``new``; the new indices are
    simplified with the ranges of the loops and block iterators around them."""

    def __init__(self, old, new, in_vars, outputs):
        super().__init__()
        self.old, self.new, self.in_vars, self.outputs = old, new, in_vars, outputs
        self.matched = False
        self.ranges = {}

    def visit_Buffer(self, buffer):
        return self.new if buffer is self.old else buffer

    def visit_For(self, loop):
        self.ranges[loop.loop_var] = S.Range(loop.min, loop.extent)
        try:
            return self.generic_visit(loop)
        finally:
            self.ranges.pop(loop.loop_var, None)

    def visit_Block(self, block):
        for iv in block.iter_vars:
            self.ranges[iv.var] = iv.dom
        try:
            return self.generic_visit(block)
        finally:
            for iv in block.iter_vars:
                self.ranges.pop(iv.var, None)

    def _map(self, indices) -> tuple:
        binding = dict(zip(self.in_vars, indices))
        unit = {v: r.min for v, r in self.ranges.items()
                if isinstance(r.extent, E.IntImm) and r.extent.value == 1}
        out = []
        for e in self.outputs:
            e = simplify(substitute(e, binding), self.ranges)
            if not isinstance(e, E.Var):   # a unit iterator in a sum is its only value
                e = simplify(substitute(e, unit), self.ranges)
            out.append(fold_symbolic_split(fold_div_mod(e), self.ranges))
        return tuple(out)

    def visit_BufferLoad(self, load):
        if load.buffer is not self.old:
            return self.generic_visit(load)
        return E.BufferLoad(self.new, self._map(tuple(self.visit(i) for i in load.indices)))

    def visit_BufferStore(self, store):
        if store.buffer is not self.old:
            return self.generic_visit(store)
        return S.BufferStore(self.new, self.visit(store.value),
                             self._map(tuple(self.visit(i) for i in store.indices)))

    def visit_MatchBufferRegion(self, match):
        if match.source.buffer is self.old:
            self.matched = True
        return self.generic_visit(match)

    def visit_BufferRegion(self, region):
        if region.buffer is not self.old:
            return self.generic_visit(region)
        inner, indices = {}, []
        for d, rng in enumerate(region.region):
            if isinstance(rng.extent, E.IntImm) and rng.extent.value == 1:
                indices.append(rng.min)
            else:
                t = E.Var(f"t{d}", rng.min.dtype)
                inner[t] = S.Range(E.const(0, rng.min.dtype), rng.extent)
                indices.append(rng.min + t)
        if not inner:
            return S.BufferRegion(self.new, tuple(S.Range(i, E.const(1, i.dtype))
                                                  for i in self._map(tuple(indices))))
        binding = dict(zip(self.in_vars, indices))
        ranges = []
        for out, dim in zip(self.outputs, self.new.shape):
            e = substitute(out, binding)
            lo, hi = relax_bound(e, inner, lower=True), relax_bound(e, inner, lower=False)
            if lo is None or hi is None:
                ranges.append(S.Range(E.const(0, dim.dtype), dim))
                continue
            lo, hi = simplify(lo, self.ranges), simplify(hi, self.ranges)
            if isinstance(lo, E.IntImm) and lo.value < 0:
                lo = E.const(0, lo.dtype)
            if isinstance(hi, E.IntImm) and isinstance(dim, E.IntImm) and hi.value >= dim.value:
                hi = E.const(dim.value - 1, hi.dtype)
            ranges.append(S.Range(lo, simplify(hi - lo + 1)))
        return S.BufferRegion(self.new, tuple(ranges))
