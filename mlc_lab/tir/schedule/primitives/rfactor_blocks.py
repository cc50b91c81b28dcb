"""rfactor's pieces: the legality checks of the loop being factored, the block that reduces into
the rf buffer, the block that writes it back, and the reducer matched from a block's body."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....arith import can_prove
from ....ir import structural_equal
from ...analysis import block_access_regions
from ... import dtype as dt
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator
from ...stmt_functor import and_all, conjuncts, free_vars, substitute, uses_var
from .. import errors
from ..func_index import child_blocks
from .cache import unique_block_name
from .injective import affine_problem
from .scope import (first_loop_feeding_reduction, is_reduction_block, loop_iter_type,
                     mixed_loop_of_reduction, substitute_and_simplify)
from .region import constant_on_right, relax_region, satisfiable_over


@dataclass
class RFactorSite:
    """What rfactor works on, once checked: the reduction under ``loop``, the one reduce iterator
    ``loop`` feeds, the update store and its combiner, the loops above the block (``top_pos``
    indexes the outermost one holding only this block) and the rfactor buffer's new axis."""
    loop: S.For
    index: object
    realize: S.BlockRealize
    touched: S.IterVar
    store: S.BufferStore
    combine: object
    loops: list
    top_pos: int
    axis: int

    @staticmethod
    def validate(loop_node: S.For, index, func, factor_axis: int) -> "RFactorSite":
        primitive = "rfactor"
        lname = loop_node.loop_var.name
        children = child_blocks(loop_node)
        if len(children) != 1:
            raise errors.LoopHoldsOtherBlocksError(
                primitive, f"loop {lname} holds {len(children)} blocks "
                f"({', '.join(repr(r.block.name_hint) for r in children) or 'none'}); rfactor needs "
                "a loop over a single reduction block", func, [loop_node])
        realize = children[0]
        blk = realize.block
        if not is_reduction_block(blk):
            raise errors.NotReductionBlockError(
                primitive, f'block "{blk.name_hint}" is not a reduction block (it needs reduce '
                "iterators and a T.init)", func, [blk])
        touched = [(iv, v) for iv, v in zip(blk.iter_vars, realize.iter_values)
                   if uses_var(v, loop_node.loop_var)]
        spatial = [iv.var.name for iv, _ in touched if iv.iter_type == "spatial"]
        if spatial or len(touched) != 1:
            why = (f"feeds the spatial iterator(s) {', '.join(spatial)}" if spatial else
                   f"feeds {len(touched)} iterators" if touched else "feeds no iterator")
            raise errors.NotSingleReduceIterError(
                primitive, f'loop {lname} {why} of block "{blk.name_hint}"; rfactor needs a loop '
                "that feeds exactly one reduce iterator", func, [loop_node, blk])
        store, combine = _match_reducer(blk, func, primitive)
        loops = index.loops_above(realize)
        problem = affine_problem(realize, loops)
        if problem is not None:
            raise errors.NotAffineBindingError(
                primitive, f'block "{blk.name_hint}" has bindings that are not affine in its loops '
                f"({problem}); rfactor regroups the iterations by loop, which only keeps the "
                "reduction when each binding is a dense sum of multiples of loop variables (and "
                "their // c, % c)", func, [blk])
        parallel = next((lp for lp in loops if lp.kind != "serial"
                         and loop_iter_type(lp.loop_var, realize) == "reduce"), None)
        if parallel is not None:
            raise errors.NotSerialLoopError(
                primitive, f"loop {parallel.loop_var.name} feeds a reduce iterator of block "
                f'"{blk.name_hint}" but is {parallel.kind}, not serial; rfactor needs the reduction '
                "loops serial", func, [parallel])
        uncovered = _uncovered_reader(index, realize, store.buffer)
        if uncovered is not None:
            raise errors.NotStagePipelineError(
                primitive, f'block "{uncovered.block.name_hint}" reads more of buffer '
                f'{store.buffer.name} than block "{blk.name_hint}" writes: the scope is not a stage '
                "pipeline (each read covered by what the writers produce), which rfactor needs",
                func, [blk, uncovered.block])
        mixed = mixed_loop_of_reduction(loops, realize)
        if mixed is not None:
            raise errors.MixedIterTypeLoopError(
                primitive, f'loop {mixed.loop_var.name} feeds both spatial and reduce iterators of '
                f'block "{blk.name_hint}"; the rfactor block\'s init would run only for some of its '
                "outputs. rfactor before fusing spatial and reduce loops", func, [mixed, blk])
        top_pos = next(k for k, lp in enumerate(loops) if child_blocks(lp) == [realize])
        outer = first_loop_feeding_reduction(realize, loops[:top_pos])
        if outer is not None:
            raise errors.LoopHoldsOtherBlocksError(
                primitive, f"loop {outer.loop_var.name} feeds a reduce iterator of block "
                f'"{blk.name_hint}" but also holds other blocks; rfactor needs the reduction '
                "loops to hold only this block", func, [outer])
        ndim = store.buffer.ndim
        if not -ndim - 1 <= factor_axis <= ndim:
            raise errors.FactorAxisOutOfRangeError(
                primitive, f"factor_axis {factor_axis} is out of range for the {ndim + 1}-d buffer "
                f"{store.buffer.name}_rf (use {-ndim - 1} .. {ndim})", func, [loop_node])
        reduce_loops = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops
                        if lp is not loop_node and loop_iter_type(lp.loop_var, realize) == "reduce"}
        if _slots_predicate(realize.predicate, reduce_loops) is None:
            raise errors.PredicateNotFactorableError(
                primitive, f'the T.where of block "{blk.name_hint}" constrains its reduce loops in a '
                f"way rfactor cannot carry over to the write-back block (it needs comparisons, at "
                f"most one of them on the loops other than {lname})", func, [blk])
        return RFactorSite(loop_node, index, realize, touched[0][0], store, combine, loops,
                            top_pos, factor_axis % (ndim + 1))


def _uncovered_reader(index, writer, buffer):
    """A block of ``writer``'s scope that reads a part of ``buffer`` (over all its loops there)
    that ``writer`` does not write, if it can be shown; else None."""
    def extent_of(realize, writes):
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
        relaxed = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in index.loops_above(realize)}
        return [relax_region(r, relaxed, {}, binding, [realize.predicate])
                for r in (realize.block.writes if writes else realize.block.reads) if r.buffer is buffer]
    (written,) = extent_of(writer, True) or [None]
    if written is None or None in written:
        return None
    for reader in index.consumers(writer):
        for read in extent_of(reader, False):
            if any(r is not None and (can_prove(r.lo < w.lo) or can_prove(r.hi > w.hi))
                   for r, w in zip(read, written)):
                return reader
    return None


def rf_block(site: RFactorSite, rf_buffer) -> S.BlockRealize:
    """The rfactor block: ``loop`` becomes the spatial iterator v<loop>, the other loops feeding
    the touched reduce iterator get reduce iterators of their own; it reduces into rf_buffer."""
    loop_node, realize, blk = site.loop, site.realize, site.realize.block
    loop_vars = {id(lp.loop_var): lp for lp in site.loops}
    rf_var = E.Var(f"v{loop_node.loop_var.name}", loop_node.loop_var.dtype)
    block_of_loop = {loop_node.loop_var: rf_var}
    iter_vars = [S.IterVar(rf_var, S.Range(loop_node.min, loop_node.extent), "spatial")]
    values = [loop_node.loop_var]
    var_map = {}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv is not site.touched:
            iter_vars.append(iv)
            values.append(value)
            continue
        for var in free_vars(value):
            lp = loop_vars.get(id(var))
            if lp is None or var in block_of_loop:
                continue
            new = E.Var(f"v{var.name}", var.dtype)
            block_of_loop[var] = new
            iter_vars.append(S.IterVar(new, S.Range(lp.min, lp.extent), "reduce"))
            values.append(var)
        var_map[iv.var] = substitute(value, block_of_loop)
    to_rf = _AddAxis(site.store.buffer, rf_buffer, site.axis, rf_var)
    rf_block = blk.replace(name_hint=unique_block_name(site.index, f"{blk.name_hint}_rf"),
                           iter_vars=tuple(iter_vars),
                           body=to_rf.visit(substitute_and_simplify(blk.body, var_map)),
                           init=to_rf.visit(substitute_and_simplify(blk.init, var_map)))
    return S.BlockRealize(tuple(values), realize.predicate, with_regions(rf_block))


def write_back_block(site: RFactorSite, rf_buffer) -> S.Stmt:
    """The write-back block keeps the reduction's name: in new copies of ``loop`` and of the loops
    feeding its spatial iterators, it reduces rf_buffer over v<loop> into the original buffer."""
    loop_node, realize, blk = site.loop, site.realize, site.realize.block
    buffer, axis = site.store.buffer, site.axis
    spatial_values = [v for iv, v in zip(blk.iter_vars, realize.iter_values) if iv.iter_type == "spatial"]
    wb_loops = [lp for lp in site.loops[site.top_pos:] if lp is loop_node
                or any(uses_var(v, lp.loop_var) for v in spatial_values)]
    loop_map = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in wb_loops}
    wb_rf_var = E.Var(f"v{loop_node.loop_var.name}", loop_node.loop_var.dtype)
    wb_iters = [S.IterVar(wb_rf_var, S.Range(loop_node.min, loop_node.extent), "reduce")]
    wb_values = [loop_map[loop_node.loop_var]]
    wb_map = {}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.iter_type == "spatial":
            wb_map[iv.var] = E.Var(iv.var.name, iv.var.dtype)
            wb_iters.append(iv.replace(var=wb_map[iv.var]))
            wb_values.append(substitute(value, loop_map))
    indices = tuple(substitute(i, wb_map) for i in site.store.indices)
    rf_indices = indices[:axis] + (wb_rf_var,) + indices[axis:]
    wb_body = S.BufferStore(buffer, site.combine(E.BufferLoad(buffer, indices),
                                                 E.BufferLoad(rf_buffer, rf_indices)), indices)
    wb_block = with_regions(S.Block(blk.name_hint, tuple(wb_iters), (), (), wb_body,
                                     substitute_and_simplify(blk.init, wb_map), annotations=blk.annotations))
    dropped = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in site.loops[site.top_pos:]
               if not any(lp is w for w in wb_loops)}
    predicate = _slots_predicate(realize.predicate, dropped)
    wb_stmt = S.BlockRealize(tuple(wb_values), substitute(predicate, loop_map), wb_block)
    for lp in reversed(wb_loops):
        wb_stmt = lp.replace(loop_var=loop_map[lp.loop_var], min=substitute(lp.min, loop_map),
                             extent=substitute(lp.extent, loop_map), body=wb_stmt)
    return wb_stmt


def with_regions(block: S.Block) -> S.Block:
    reads, writes = block_access_regions(block)
    return block.replace(reads=reads, writes=writes)


def _slots_predicate(predicate, dropped: dict):
    """The predicate of the write-back block, which runs for every rf slot some iteration of the
    ``dropped`` loops (Var -> Range) writes: conjuncts without them stay; the one that constrains
    them must hold for some value of them (``satisfiable_over``). None when that cannot be said."""
    constraining = [c for c in conjuncts(predicate) if uses_var(c, list(dropped))]
    if len(constraining) > 1:
        return None
    kept = [c for c in conjuncts(predicate) if not uses_var(c, list(dropped))]
    for c in constraining:
        relaxed = satisfiable_over(c, dropped)
        if relaxed is None:
            return None
        kept.extend(constant_on_right(part) for part in conjuncts(relaxed))
    return and_all(kept)


def keep_conjuncts(predicate, keep):
    return and_all([c for c in conjuncts(predicate) if keep(c)])


_REDUCERS = {E.Add: 0, E.Mul: 1, E.Max: "min", E.Min: "max"}


def _match_reducer(blk, func, primitive):
    """(the update store, the combiner) when ``blk`` is ``x = x op e`` with op's identity as init."""
    store = blk.body
    problem = None
    if not isinstance(store, S.BufferStore) or len(blk.writes) != 1:
        problem = "its body is not a single store to its one output buffer"
    else:
        value = store.value
        op = type(value)
        own = [side for side in ("a", "b") if op in _REDUCERS and _is_self_load(getattr(value, side), store)]
        if not own:
            problem = (f"its update is not {store.buffer.name}[...] = {store.buffer.name}[...] op e "
                       "with op one of +, *, T.max, T.min")
        else:
            other = getattr(value, "b" if own[0] == "a" else "a")
            if _reads_buffer(other, store.buffer):
                problem = f"the reduced value reads {store.buffer.name} again"
            elif not _is_identity(blk.init, store, _REDUCERS[op]):
                problem = (f"its T.init does not store the identity of {op.__name__} "
                           f"to {store.buffer.name}[...]")
    if problem:
        raise errors.ReducerNotRecognizedError(
            primitive, f'block "{blk.name_hint}" is not a reduction rfactor understands: {problem}',
            func, [blk])
    return store, lambda acc, part: op(acc, part)


def _is_self_load(e, store) -> bool:
    return (isinstance(e, E.BufferLoad) and e.buffer is store.buffer
            and structural_equal(e.indices, store.indices))


def _reads_buffer(e, buffer) -> bool:
    if isinstance(e, E.BufferLoad) and e.buffer is buffer:
        return True
    if isinstance(e, E.PrimExpr):
        return any(_reads_buffer(v, buffer) for _, v in e.fields() if isinstance(v, (E.PrimExpr, tuple)))
    if isinstance(e, tuple):
        return any(_reads_buffer(x, buffer) for x in e)
    return False


def _is_identity(init, store, identity) -> bool:
    if not (isinstance(init, S.BufferStore) and init.buffer is store.buffer
            and structural_equal(init.indices, store.indices)
            and isinstance(init.value, (E.IntImm, E.FloatImm))):
        return False
    value, dtype = init.value.value, dt.element_of(init.value.dtype)
    if not isinstance(identity, str):
        return value == identity
    info = np.finfo(dtype) if dt.is_float(dtype) else np.iinfo(dtype)
    return value <= info.min if identity == "min" else value >= info.max


class _AddAxis(StmtExprMutator):
    """Accesses to ``old`` become accesses to ``new`` with ``var`` inserted at index ``axis``."""

    def __init__(self, old, new, axis, var):
        super().__init__()
        self.old, self.new, self.axis, self.var = old, new, axis, var

    def _indices(self, indices):
        indices = tuple(self.visit(i) for i in indices)
        return indices[:self.axis] + (self.var,) + indices[self.axis:]

    def visit_BufferLoad(self, load):
        if load.buffer is not self.old:
            return self.generic_visit(load)
        return E.BufferLoad(self.new, self._indices(load.indices))

    def visit_BufferStore(self, store):
        if store.buffer is not self.old:
            return self.generic_visit(store)
        return S.BufferStore(self.new, self.visit(store.value), self._indices(store.indices))
