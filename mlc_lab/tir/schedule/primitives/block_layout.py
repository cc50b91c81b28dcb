"""transform_block_layout: remap a block's iterators through an index map and rebuild its loops."""
from __future__ import annotations

from ....arith import simplify
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...index_map import IndexMapError, fold_div_mod
from ...stmt_functor import StmtReplacer, free_vars, substitute
from .. import errors
from ..instruction import instruction
from .index_map_text import build_index_map, index_map_source, name_scope


class BlockLayoutPrimitives:

    def transform_block_layout(self, block, index_map):
        """Remap the iterators of a block through an index map: the block gets one iterator per
        output of the map, its loops are rebuilt over the new iteration domain, and the body
        reads its old iterators back through the inverse map.

        Requires: the block sits alone under its loops, which start at 0 and bind its iterators
        one to one (``T.axis.remap``, no ``T.where``); the map takes one index per iterator and is
        a split/fuse map that is one-to-one and onto its output shape over the block's domain;
        each output combines iterators of one kind (spatial or reduction).

        Parameters: block (BlockRV or name), index_map (function, IndexMap or str).
        Raises (all LayoutError): BlockLayoutArityError, BlockLayoutLoopsError,
        NotBijectiveAffineMapError, MixedIterTypeError, IndexMapNameError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
        ...     for i, j in T.grid(4, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i * 8 + j,))
        >>> print(sch.mod["main"].body.block.body)
        for ax0 in range(32):
            with T.block("B"):
                v0 = T.axis.remap("S", [ax0])
                T.reads(A[v0 // 8, v0 % 8])
                T.writes(B[v0 // 8, v0 % 8])
                B[v0 // 8, v0 % 8] = A[v0 // 8, v0 % 8] * T.float32(2)
        >>> print(sch.trace.as_python()[-1])
        sch.transform_block_layout(block=b0, index_map="lambda i, j: (i * 8 + j,)")
        """
        func_name, realize, _ = self._resolve_block(block, "transform_block_layout")
        func = self._func(func_name)
        ivs = realize.block.iter_vars
        dtype = ivs[0].var.dtype if ivs else "int32"
        source = index_map_source(index_map, len(ivs), dtype, name_scope(func))
        return self._traced_transform_block_layout(block, source)


def _transform_block_layout(self, block, index_map):
    primitive = "transform_block_layout"
    func_name, realize, index = self._resolve_block(block, primitive)
    func = self._func(func_name)
    blk = realize.block

    def fail(error, message):
        raise error(primitive, message, func, [blk])
    ivs = list(blk.iter_vars)
    dtype = ivs[0].var.dtype if ivs else "int32"
    imap, separators = build_index_map(index_map, len(ivs), dtype, name_scope(func),
                                       lambda message: fail(errors.IndexMapNameError, message))
    if separators:
        fail(errors.BlockLayoutArityError, f"the index map {index_map} returns "
             "IndexMap.AXIS_SEPARATOR, which only buffer layouts take")
    if imap.ndim != len(ivs):
        fail(errors.BlockLayoutArityError, f"the index map {index_map} takes {imap.ndim} indices, "
             f'but block "{blk.name_hint}" has {len(ivs)} iterators')
    loops = index.loops_above(realize)
    _check_loops(loops, realize, fail)
    extents = [iv.dom.extent for iv in ivs]
    old_vars = [iv.var for iv in ivs]
    try:
        new_extents = imap.map_shape(extents)
        inverse = imap.inverse(extents)
    except IndexMapError as exc:
        fail(errors.NotBijectiveAffineMapError, f"the index map {index_map} is not one-to-one "
             f'and onto over the iterators of block "{blk.name_hint}" ({exc})')
    kinds = {id(iv.var): iv.iter_type for iv in ivs}
    new_ivs = []
    for k, (out, extent) in enumerate(zip(imap.map_indices(old_vars), new_extents)):
        used = {kinds[id(v)] for v in free_vars(out) if id(v) in kinds}
        if len(used) != 1:
            fail(errors.MixedIterTypeError, f"the new iterator {out} of block \"{blk.name_hint}\" "
                 f"combines {' and '.join(sorted(used)) or 'no'} iterators; each must be of one kind")
        new_ivs.append(S.IterVar(E.Var(f"v{k}", out.dtype), S.Range(E.const(0, extent.dtype), extent),
                                 used.pop()))
    ranges = {iv.var: iv.dom for iv in new_ivs}
    back = inverse.map_indices([iv.var for iv in new_ivs], ranges)
    mapping = dict(zip(old_vars, back))
    new_block = _Simplify(ranges).visit(substitute(blk.replace(iter_vars=()), mapping))
    new_block = new_block.replace(iter_vars=tuple(new_ivs))
    loop_vars = [E.Var(f"ax{k}", iv.var.dtype) for k, iv in enumerate(new_ivs)]
    stmt = S.BlockRealize(tuple(loop_vars), E.const(True), new_block)
    for var, iv in reversed(list(zip(loop_vars, new_ivs))):
        stmt = S.For(var, E.const(0, var.dtype), iv.dom.extent, "serial", stmt)
    anchor = loops[0] if loops else realize
    self._update(func_name, func.replace(body=StmtReplacer({id(anchor): stmt}).visit(func.body)),
                 primitive)


_transform_block_layout.__name__ = _transform_block_layout.__qualname__ = "transform_block_layout"
BlockLayoutPrimitives._traced_transform_block_layout = instruction(_transform_block_layout)
BlockLayoutPrimitives.transform_block_layout.is_instruction = True


def _check_loops(loops, realize, fail):
    """The loops hold only the block, start at 0 and bind its iterators one to one."""
    name = realize.block.name_hint
    for outer, inner in zip(loops, loops[1:] + [realize]):
        if outer.body is not inner:
            fail(errors.BlockLayoutLoopsError, f'loop {outer.loop_var.name} holds more than block '
                 f'"{name}" and its loops')
    for lp in loops:
        if not (isinstance(lp.min, E.IntImm) and lp.min.value == 0):
            fail(errors.BlockLayoutLoopsError, f"loop {lp.loop_var.name} starts at {lp.min}, not 0")
        if lp.kind != "serial" or lp.thread_binding:
            fail(errors.BlockLayoutLoopsError, f"loop {lp.loop_var.name} is {lp.kind}; only serial "
                 "loops are rebuilt")
    if not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value):
        fail(errors.BlockLayoutLoopsError, f'block "{name}" has a predicate (T.where)')
    loop_vars = [lp.loop_var for lp in loops]
    values = list(realize.iter_values)
    if len(values) != len(loop_vars) or any(v is not lv for v, lv in zip(values, loop_vars)):
        fail(errors.BlockLayoutLoopsError, f'the iterators of block "{name}" are not bound to its '
             "loop variables one to one, in order")
    for lp, iv in zip(loops, realize.block.iter_vars):
        if not (isinstance(iv.dom.min, E.IntImm) and iv.dom.min.value == 0) or not _equal(
                iv.dom.extent, lp.extent):
            fail(errors.BlockLayoutLoopsError, f"iterator {iv.var.name} of block \"{name}\" does not "
                 f"cover loop {lp.loop_var.name} from 0")


def _equal(a, b) -> bool:
    d = simplify(E.convert(a) - E.convert(b))
    return isinstance(d, E.IntImm) and d.value == 0


class _Simplify(StmtExprMutator):
    """Buffer indices simplified with the ranges of the new iterators."""

    def __init__(self, ranges):
        super().__init__()
        self.ranges = ranges

    def visit_BufferLoad(self, load):
        load = self.generic_visit(load)
        return load.replace(indices=tuple(fold_div_mod(simplify(i, self.ranges)) for i in load.indices))

    def visit_BufferStore(self, store):
        store = self.generic_visit(store)
        return store.replace(indices=tuple(fold_div_mod(simplify(i, self.ranges)) for i in store.indices))

    def visit_Range(self, rng):
        return S.Range(fold_div_mod(simplify(rng.min, self.ranges)), simplify(rng.extent, self.ranges))
