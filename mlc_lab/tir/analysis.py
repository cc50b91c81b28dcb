"""Analyses of the loop IR: which buffer regions a block reads and writes."""
from __future__ import annotations

from .linear_index import simplify
from ..arith.simplify import Linear, from_linear, linear_form
from ..arith.bound import int_bound
from . import expr as E
from . import stmt as S
from .buffer import BUFFER_DATA, BUFFER_ELEM_OFFSET, Buffer
from .intervals import narrowed_by_guards
from .stmt_functor import substitute, uses_var


def block_access_regions(block: S.Block) -> tuple[tuple, tuple]:
    """(reads, writes) of ``block`` as BufferRegions, inferred from its body and init.

    Indices that use loops inside the block are relaxed over those loops' ranges, cut to the
    iterations where the guards above the access hold (a nested block's T.where, an ``if``), so
    that a region covers only elements the block really touches; several accesses to one buffer
    are merged into their bounding box. Buffers the block allocates are
    left out, and in a reduction block (one with ``init``) the reduction buffer is only a write.
    """
    collector = _AccessCollector()
    collector.visit(block.body, {})
    if block.init is not None:
        collector.visit(block.init, {})
    own = {id(b) for b in block.alloc_buffers} | collector.allocated
    views = {id(m.buffer): m for m in block.match_buffers}
    collector.reads = [_through_view(a, views) for a in collector.reads]
    collector.writes = [_through_view(a, views) for a in collector.writes]
    written = {id(b) for b, _ in collector.writes}
    reads = [(b, r) for b, r in collector.reads
             if id(b) not in own and not (block.init is not None and id(b) in written)]
    writes = [(b, r) for b, r in collector.writes if id(b) not in own]
    return _merge(reads), _merge(writes)


def _through_view(access: tuple, views: dict) -> tuple:
    """An access to one of the block's own match_buffer views as the access to the region of
    the buffer it views: the view's leading missing dimensions take the region's ranges, the
    others are shifted by the region's start (a view of a view is followed to the end)."""
    buffer, dims = access
    for _ in range(len(views)):
        match = views.get(id(buffer))
        if match is None:
            break
        region = match.source.region
        kept = len(region) - len(dims)
        if kept < 0:
            break
        out = [(r.min, r.extent) for r in region[:kept]]
        for r, (lo, ext) in zip(region[kept:], dims):
            out.append((r.min, r.extent) if lo is None else (simplify(r.min + lo), ext))
        buffer, dims = match.source.buffer, out
    return buffer, dims


class _AccessCollector:
    """Collects (buffer, [(min, extent) per dim]) for every load and store, relaxing inner loops."""

    def __init__(self):
        self.reads: list = []
        self.writes: list = []
        self.allocated: set[int] = set()   # buffers of Allocate statements inside the block

    def visit(self, node, inner: dict, guards: tuple = ()) -> None:
        mask = _access_ptr_mask(node)
        if mask is not None:
            # A.access_ptr(mask): all of A, read (mask 1) and/or written (mask 2), as it says.
            buffer = node.args[2].args[0].buffer
            for bit, target in ((1, self.reads), (2, self.writes)):
                if mask & bit:
                    target.append((buffer, [(None, None)] * buffer.ndim))
            for arg in node.args[3:5]:
                self.visit(arg, inner, guards)
        elif isinstance(node, E.Call) and node.op == BUFFER_ELEM_OFFSET:
            return   # where a buffer starts: no element of it is accessed
        elif isinstance(node, E.Call) and node.op == BUFFER_DATA:
            # A.data hands all of A's storage to the callee, to read and write as it likes.
            buffer = node.args[0].buffer
            self.reads.append((buffer, [(None, None)] * buffer.ndim))
            self.writes.append((buffer, [(None, None)] * buffer.ndim))
        elif isinstance(node, E.BufferLoad):
            self.reads.append((node.buffer, relax_indices(node.indices, inner, guards)))
            for i in node.indices:
                self.visit(i, inner, guards)
        elif isinstance(node, S.BufferStore):
            self.visit(node.value, inner, guards)
            for i in node.indices:
                self.visit(i, inner, guards)
            self.writes.append((node.buffer, relax_indices(node.indices, inner, guards)))
        elif isinstance(node, S.Allocate):
            self.allocated.add(id(node.buffer))
            self.visit(node.body, inner, guards)
        elif isinstance(node, S.For):
            self.visit(node.body, {**inner, node.loop_var: S.Range(node.min, node.extent)}, guards)
        elif isinstance(node, S.IfThenElse):
            self.visit(node.condition, inner, guards)
            self.visit(node.then_case, inner, guards + (node.condition,))
            if node.else_case is not None:
                self.visit(node.else_case, inner, guards + (E.Not(node.condition),))
        elif isinstance(node, S.BlockRealize):
            self.visit_nested_block(node, inner, guards + (node.predicate,))
        elif isinstance(node, (tuple, list)):
            for x in node:
                self.visit(x, inner, guards)
        elif hasattr(node, "fields") and not isinstance(node, (E.Var, Buffer)):
            for _, v in node.fields():
                self.visit(v, inner, guards)

    def visit_nested_block(self, realize: S.BlockRealize, inner: dict, guards: tuple) -> None:
        block = realize.block
        binding = {iv.var: val for iv, val in zip(block.iter_vars, realize.iter_values)}
        for target, regions in ((self.reads, block.reads), (self.writes, block.writes)):
            for region in regions:
                lo_hi = []
                for rng in region.region:
                    lo = substitute(rng.min, binding)
                    hi = substitute(rng.min + rng.extent - 1, binding)
                    lo_hi.append(_relaxed(lo, hi, inner, guards))
                # An unbounded side leaves the whole dimension (see _merge), as in relax_indices.
                target.append((region.buffer, [(None, None) if lo is None or hi is None
                                               else (lo, simplify(hi - lo + 1)) for lo, hi in lo_hi]))
        for v in realize.iter_values:
            self.visit(v, inner, guards)


def _access_ptr_mask(node) -> int | None:
    """The access mask of ``A.access_ptr(...)`` (``T.tvm_access_ptr(type, A.data, offset,
    extent, mask)`` with a constant mask), or None for any other node."""
    if not (isinstance(node, E.Call) and node.op == "call_extern" and len(node.args) == 6
            and isinstance(node.args[0], E.StringImm) and node.args[0].value == "tvm_access_ptr"):
        return None
    data, mask = node.args[2], node.args[5]
    if not (isinstance(data, E.Call) and data.op == BUFFER_DATA and isinstance(mask, E.IntImm)):
        return None
    return mask.value


def relax_indices(indices, inner: dict, guards: tuple = ()) -> list:
    """[(min, extent)] per index once the loop variables in ``inner`` range over their domains
    (those where ``guards`` hold)."""
    out = []
    for idx in indices:
        lo, hi = _relaxed(idx, idx, inner, guards)
        out.append((lo, simplify(hi - lo + 1)) if lo is not None and hi is not None else (None, None))
    return out


def _relaxed(lo, hi, inner: dict, guards: tuple) -> tuple:
    """The least value of ``lo`` and the greatest of ``hi`` over the loops in ``inner`` where
    ``guards`` hold (None for a side that cannot be expressed)."""
    low, high = relax_bound(lo, inner, lower=True), relax_bound(hi, inner, lower=False)
    guards = tuple(g for g in guards if not (isinstance(g, E.IntImm) and g.value))
    if low is None or high is None or not guards or not inner:
        return low, high
    return narrowed_by_guards(lo, hi, low, high, guards, inner)


def relax_bound(e, inner: dict, lower: bool):
    """The least (or greatest) value of ``e`` over the loops in ``inner``, as an expression in
    the remaining variables; None when it cannot be expressed."""
    if not inner or not uses_var(e, inner):
        return simplify(e)
    lin = linear_form(simplify(e))
    kept = Linear(const=lin.const)
    symbolic = []   # coef * end of a loop whose range is symbolic (extent n: 0 .. n - 1)
    for key, (atom, coef) in lin.terms.items():
        if not uses_var(atom, inner):
            kept.terms[key] = (atom, coef)
            continue
        lo, hi = int_bound(atom, inner)
        if lo is not None and hi is not None:
            kept.const += coef * (lo if (coef > 0) == lower else hi)
            continue
        rng = inner.get(atom) if isinstance(atom, E.Var) else None
        if rng is None or uses_var(rng.min, inner) or uses_var(rng.extent, inner):
            return None
        end = rng.min if (coef > 0) == lower else rng.min + rng.extent - 1
        symbolic.append(end * E.const(coef, e.dtype))
    out = from_linear(kept, e.dtype)
    for term in symbolic:
        out = out + term
    return simplify(out)


def _merge(accesses: list) -> tuple:
    """Merge accesses of one buffer into a bounding box, keeping first-access order."""
    order: list[Buffer] = []
    boxes: dict[int, list] = {}
    for buffer, dims in accesses:
        if id(buffer) not in boxes:
            order.append(buffer)
            boxes[id(buffer)] = list(dims)
            continue
        box = boxes[id(buffer)]
        for d, ((lo1, ext1), (lo2, ext2)) in enumerate(zip(box, dims)):
            box[d] = _union(lo1, ext1, lo2, ext2)
    regions = []
    for buffer in order:
        ranges = []
        for d, (lo, ext) in enumerate(boxes[id(buffer)]):
            if lo is None:
                ranges.append(S.Range(E.const(0, buffer.shape[d].dtype), buffer.shape[d]))
            else:
                ranges.append(S.Range(lo, ext))
        regions.append(S.BufferRegion(buffer, tuple(ranges)))
    return tuple(regions)


def _union(lo1, ext1, lo2, ext2):
    if lo1 is None or lo2 is None:
        return (None, None)
    shift = simplify(lo2 - lo1)
    if not isinstance(shift, E.IntImm):
        return (None, None) if not _same(lo1, lo2) or not _same(ext1, ext2) else (lo1, ext1)
    end1, end2 = simplify(ext1), simplify(shift + ext2)
    if not (isinstance(end1, E.IntImm) and isinstance(end2, E.IntImm)):
        return (None, None)
    start = min(0, shift.value)
    lo = lo1 if start == 0 else lo2
    return (lo, E.const(max(end1.value, end2.value) - start, ext1.dtype))


def _same(a, b) -> bool:
    from ..ir import structural_equal
    return structural_equal(a, b)


def expr_deep_equal(lhs, rhs) -> bool:
    """Whether two expressions are the same tree: the same node types, dtypes and constants over
    the very same variables (a variable equals only itself: ``Var("i")`` and another ``Var("i")``
    differ). Python numbers count as constants (an int as an int32 one).

    >>> from mlc_lab import tir
    >>> i = tir.Var("i")
    >>> expr_deep_equal(i * 2 + 1, i * 2 + 1), expr_deep_equal(i * 2, tir.Var("i") * 2)
    (True, False)
    """
    from ..ir import structural_equal
    return structural_equal(E.convert(lhs), E.convert(rhs))
