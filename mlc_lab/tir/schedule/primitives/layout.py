"""Data layout: transform_layout rewrites a buffer's shape and every access to it through an
index map such as ``lambda i, j: (j // 4, i, j % 4)``."""
from __future__ import annotations

import ast
import inspect

import numpy as np

from ....arith import int_bound, simplify
from ....ir import hooks, structural_equal
from ...analysis import relax_bound
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import post_order_visit, substitute
from .. import errors
from ..instruction import instruction

_INJECTIVITY_CHECK_LIMIT = 1 << 22


class LayoutPrimitives:

    def transform_layout(self, block, buffer, index_map):
        """Change the layout of a buffer: element ``X[i, j]`` moves to ``X[index_map(i, j)]``.

        The buffer's new shape is the range of the map over the old shape; every load, store and
        block region of the buffer is rewritten. The index map is a Python lambda or its source
        string (the trace records the string, so it saves to JSON). Applied to a parameter, it
        changes the function's signature: callers must pass the array in the new layout.

        Requires: ``buffer`` is ``("read", n)``/``("write", n)`` (the n-th read/write region of
        ``block``) or the name of a buffer ``block`` accesses; it is a parameter or an
        alloc_buffer without strides; the map takes one argument per dimension, gives
        non-negative bounded indices, sends different elements to different places, and, for a
        parameter, leaves no place of the new shape unused (no padding, as in the reference
        compiler without ``pad_value``). A buffer allocated in the function may be padded (the
        classic extra column against shared-memory bank conflicts: ``r * 33 + c``); the
        reference compiler asks for ``storage_align`` or ``pad_value`` there, and nothing reads
        the unused places.

        Parameters: block (BlockRV), buffer (tuple or str), index_map (lambda or str).
        Raises (all LayoutError): BufferNotAccessedError, BufferIndexOutOfRangeError,
        NotParamOrAllocError, NonCompactBufferError, IndexMapArityError, NegativeIndexError,
        UnboundedIndexError, NotInjectiveError, TransformationPaddingError, BufferHasViewsError.

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
        """
        return self._traced_transform_layout(block, buffer, index_map_source(index_map))


def _transform_layout(self, block, buffer, index_map):
    primitive = "transform_layout"
    func_name, realize, _ = self._resolve_block(block, primitive)
    func = self._func(func_name)
    target = _resolve_buffer(realize, buffer, func, primitive)
    blk_name = realize.block.name_hint
    if not any(p is target for p in func.params) and not _is_allocated(func, target):
        raise errors.NotParamOrAllocError(
            primitive, f"buffer {target.name} is neither a parameter nor an alloc_buffer (e.g. a "
            "match_buffer); only those can change layout", func, [realize.block])
    if target.strides:
        raise errors.NonCompactBufferError(
            primitive, f"buffer {target.name} has explicit strides; transform_layout needs a "
            "compact buffer", func, [realize.block])
    fn = _compile_index_map(index_map)
    arity = len(inspect.signature(fn).parameters)
    if arity != target.ndim:
        raise errors.IndexMapArityError(
            primitive, f"the index map {index_map} takes {arity} argument(s) but buffer "
            f"{target.name} (accessed by block \"{blk_name}\") has {target.ndim} dimension(s)",
            func, [realize.block])
    in_vars = [E.Var(name, dim.dtype) for name, dim in zip(inspect.signature(fn).parameters, target.shape)]
    outputs = _apply(fn, in_vars, target.shape[0].dtype if target.shape else "int32")
    domain = {v: S.Range(E.const(0, d.dtype), d) for v, d in zip(in_vars, target.shape)}
    new_shape = []
    for out in outputs:
        lo, hi = int_bound(out, domain)
        if lo is not None and lo < 0:
            raise errors.NegativeIndexError(
                primitive, f"the index map {index_map} gives {out}, which can be negative ({lo}) "
                f"on buffer {target.name}", func, [realize.block])
        if hi is None:
            same = [d for v, d in zip(in_vars, target.shape) if out is v]
            if not same:
                raise errors.UnboundedIndexError(
                    primitive, f"cannot bound {out} from the index map {index_map} over the shape "
                    f"of buffer {target.name}", func, [realize.block])
            new_shape.append(same[0])
        else:
            new_shape.append(E.const(hi + 1, out.dtype))
    reached = _image_size(fn, target.shape, new_shape)
    old_size = int(np.prod([d.value for d in target.shape])) if reached is not None else None
    if reached is not None and reached < old_size:
        raise errors.NotInjectiveError(
            primitive, f"the index map {index_map} sends two elements of buffer {target.name} to "
            "the same place; it must be one-to-one", func, [realize.block])
    new_size = int(np.prod([d.value for d in new_shape])) if reached is not None else None
    if reached is not None and reached < new_size and not _is_allocated(func, target):
        raise errors.TransformationPaddingError(
            primitive, f"the index map {index_map} sends the {old_size} elements of parameter "
            f"{target.name} to {new_size} places of the new shape "
            f"({', '.join(str(d) for d in new_shape)}): the {new_size - reached} others would be "
            "padding that nothing writes, and the caller would see them. Choose a map that fills "
            "the new shape (split by a factor of the extent)", func, [realize.block])
    new_buffer = target.replace(shape=tuple(new_shape))
    rewriter = _Relayout(target, new_buffer, in_vars, outputs)
    new_func = rewriter.visit(func)
    if rewriter.matched:
        raise errors.BufferHasViewsError(
            primitive, f"buffer {target.name} is the source of a match_buffer; transform_layout "
            "cannot rewrite views of it", func, [realize.block])
    self._update(func_name, new_func, primitive)


_transform_layout.__name__ = _transform_layout.__qualname__ = "transform_layout"
LayoutPrimitives._traced_transform_layout = instruction(_transform_layout)
LayoutPrimitives.transform_layout.is_instruction = True


# -- the index map ----------------------------------------------------------------------------------
def index_map_source(index_map) -> str:
    """The source text of an index map given as a lambda or a string."""
    if isinstance(index_map, str):
        text = index_map.strip()
        _compile_index_map(text)
        return text
    if not callable(index_map):
        raise TypeError("sch.transform_layout: parameter 'index_map' expects a lambda such as "
                        f"`lambda i, j: (j, i)` or its source string, got {type(index_map).__name__}")
    text = _lambda_text(index_map)
    if text is not None:
        return text
    return _printed_lambda(index_map)


def _compile_index_map(text: str):
    T = hooks.need("script.tir")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        tree = None
    if tree is None or not isinstance(tree.body, ast.Lambda):
        raise TypeError("sch.transform_layout: parameter 'index_map' expects a lambda such as "
                        f"`lambda i, j: (j, i)` or its source string, got {text!r}")
    return eval(compile(tree, "<index_map>", "eval"), {"T": T, "__builtins__": {}})


def _lambda_text(fn) -> str | None:
    """The lambda's own source, cut out of the line(s) it was written on; None when unavailable
    or when the text found does not compute the same map."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    names = list(inspect.signature(fn).parameters)
    start = source.find("lambda")
    while start >= 0:
        for end in range(len(source), start, -1):
            piece = source[start:end].strip()
            try:
                tree = ast.parse(piece, mode="eval")
            except SyntaxError:
                continue
            if isinstance(tree.body, ast.Lambda) and [a.arg for a in tree.body.args.args] == names:
                if _same_map(fn, _compile_index_map(piece), names):
                    return piece
            break
        start = source.find("lambda", start + 1)
    return None


def _same_map(f, g, names) -> bool:
    variables = [E.Var(n) for n in names]
    try:
        return structural_equal(_apply(f, variables, "int32"), _apply(g, variables, "int32"))
    except Exception:  # a map that fails on symbolic input cannot be recorded from its text
        return False


def _printed_lambda(fn) -> str:
    names = list(inspect.signature(fn).parameters)
    outputs = _apply(fn, [E.Var(n) for n in names], "int32")
    body = ", ".join(out.script() for out in outputs)
    return f"lambda {', '.join(names)}: ({body}{',' if len(outputs) == 1 else ''})"


def _apply(fn, variables, dtype) -> tuple:
    out = fn(*variables)
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return tuple(simplify(E.const(o, dtype) if isinstance(o, int) else E.convert(o)) for o in out)


def _image_size(fn, old_shape, new_shape) -> int | None:
    """How many places of ``new_shape`` the map reaches from ``old_shape``, found by evaluating it
    on every index (constant, small shapes only); None for maps that cannot be evaluated so (a
    symbolic shape, too many elements, a map numpy cannot run, e.g. one using T.min)."""
    if not all(isinstance(d, E.IntImm) for d in list(old_shape) + list(new_shape)):
        return None
    dims = [d.value for d in old_shape]
    if int(np.prod(dims)) > _INJECTIVITY_CHECK_LIMIT:
        return None
    try:
        coords = fn(*np.indices(dims).reshape(len(dims), -1))
        coords = coords if isinstance(coords, (tuple, list)) else (coords,)
        size = int(np.prod(dims))
        flat = np.ravel_multi_index([np.broadcast_to(np.asarray(c, dtype=np.int64), (size,))
                                     for c in coords], [d.value for d in new_shape])
    except Exception:  # not evaluable with numpy
        return None
    return len(np.unique(flat))


# -- finding and rewriting the buffer -------------------------------------------------------------
def _resolve_buffer(realize, buffer, func, primitive):
    blk = realize.block
    if isinstance(buffer, str):
        for region in blk.reads + blk.writes:
            if region.buffer.name == buffer:
                return region.buffer
        for b in blk.alloc_buffers:
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


def _is_allocated(func, buffer) -> bool:
    allocated = []

    def note(node):
        if isinstance(node, S.Block):
            allocated.extend(node.alloc_buffers)
    post_order_visit(func.body, note)
    return any(b is buffer for b in allocated)


class _Relayout(StmtExprMutator):
    """Every access to ``old`` goes through the index map to ``new``."""

    def __init__(self, old, new, in_vars, outputs):
        super().__init__()
        self.old, self.new, self.in_vars, self.outputs = old, new, in_vars, outputs
        self.matched = False

    def visit_Buffer(self, buffer):
        return self.new if buffer is self.old else buffer

    def _map(self, indices) -> tuple:
        binding = dict(zip(self.in_vars, indices))
        return tuple(simplify(substitute(out, binding)) for out in self.outputs)

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
        binding = dict(zip(self.in_vars, indices))
        ranges = []
        for out, dim in zip(self.outputs, self.new.shape):
            e = substitute(out, binding)
            lo, hi = relax_bound(e, inner, lower=True), relax_bound(e, inner, lower=False)
            if lo is None or hi is None:
                ranges.append(S.Range(E.const(0, dim.dtype), dim))
                continue
            if isinstance(lo, E.IntImm) and lo.value < 0:
                lo = E.const(0, lo.dtype)
            if isinstance(hi, E.IntImm) and isinstance(dim, E.IntImm) and hi.value >= dim.value:
                hi = E.const(dim.value - 1, hi.dtype)
            ranges.append(S.Range(lo, simplify(hi - lo + 1)))
        return S.BufferRegion(self.new, tuple(ranges))
