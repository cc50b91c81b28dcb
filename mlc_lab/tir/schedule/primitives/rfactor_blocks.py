"""rfactor's pieces: the legality checks of the loop being factored, the block that reduces into
the rf buffers and the block that writes them back (the reducer itself is matched in reducers.py)."""
from __future__ import annotations

from dataclasses import dataclass

from ....arith import can_prove
from ...analysis import block_access_regions
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import and_all, conjuncts, free_vars, substitute, uses_var
from .. import errors
from ..func_index import child_blocks
from .cache import unique_block_name
from .injective import affine_problem
from .scope import (const_int, first_loop_feeding_reduction, is_reduction_block, loop_iter_type,
                     mixed_loop_of_reduction)
from .reducers import Reducer, match_reducer
from .region import constant_on_right, relax_region, satisfiable_over


@dataclass
class RFactorSite:
    """What rfactor works on, once checked: the reduction under ``loop``, the reduce iterators
    ``loop`` feeds, the matched reducer, the loops above the block (``top_pos`` indexes the
    outermost one holding only this block) and the rfactor buffers' new axis."""
    loop: S.For
    index: object
    realize: S.BlockRealize
    touched: list
    reducer: Reducer
    loops: list
    top_pos: int
    axis: int

    @property
    def indices(self) -> tuple:
        """Where the reduction stores its outputs (all at the same indices)."""
        return tuple(self.reducer.stores[0].indices)

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
        if spatial or (not touched and const_int(loop_node.extent) != 1):
            why = (f"feeds the spatial iterator(s) {', '.join(spatial)}" if spatial else
                   "feeds no iterator and has more than one iteration")
            raise errors.NotSingleReduceIterError(
                primitive, f'loop {lname} {why} of block "{blk.name_hint}"; rfactor needs a loop '
                "that feeds only reduce iterators (or a loop of extent 1)", func, [loop_node, blk])
        reducer = match_reducer(blk)
        if isinstance(reducer, str):
            raise errors.ReducerNotRecognizedError(
                primitive, f'block "{blk.name_hint}" is not a reduction rfactor understands: '
                f"{reducer}", func, [blk])
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
        for buffer in reducer.buffers:
            uncovered = _uncovered_reader(index, realize, buffer)
            if uncovered is not None:
                raise errors.NotStagePipelineError(
                    primitive, f'block "{uncovered.block.name_hint}" reads more of buffer '
                    f'{buffer.name} than block "{blk.name_hint}" writes: the scope is not a stage '
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
        ndim = reducer.buffers[0].ndim
        if not -ndim - 1 <= factor_axis <= ndim:
            raise errors.FactorAxisOutOfRangeError(
                primitive, f"factor_axis {factor_axis} is out of range for the {ndim + 1}-d buffer "
                f"{reducer.buffers[0].name}_rf (use {-ndim - 1} .. {ndim})", func, [loop_node])
        reduce_loops = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops
                        if lp is not loop_node and loop_iter_type(lp.loop_var, realize) == "reduce"}
        if _slots_predicate(realize.predicate, reduce_loops) is None:
            raise errors.PredicateNotFactorableError(
                primitive, f'the T.where of block "{blk.name_hint}" constrains its reduce loops in a '
                f"way rfactor cannot carry over to the write-back block (it needs comparisons, at "
                f"most one of them on the loops other than {lname})", func, [blk])
        return RFactorSite(loop_node, index, realize, [iv for iv, _ in touched], reducer, loops,
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


def rf_block(site: RFactorSite, rf_buffers) -> S.BlockRealize:
    """The rfactor block: ``loop`` becomes the spatial iterator v<loop>; each reduce iterator it
    fed is replaced by reduce iterators of the other loops in its binding; the reducer combines
    into the rf buffers. Without reduce iterators left it just stores what it would combine."""
    loop_node, realize, blk = site.loop, site.realize, site.realize.block
    loop_vars = {id(lp.loop_var): lp for lp in site.loops}
    rf_var = E.Var(f"v{loop_node.loop_var.name}", loop_node.loop_var.dtype)
    block_of_loop = {loop_node.loop_var: rf_var}
    iter_vars = [S.IterVar(rf_var, S.Range(loop_node.min, loop_node.extent), "spatial")]
    values = [loop_node.loop_var]
    var_map = {}
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if not any(iv is t for t in site.touched):
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
    reducer = site.reducer
    indices = site.indices[:site.axis] + (rf_var,) + site.indices[site.axis:]
    indices = tuple(substitute(i, var_map) for i in indices)
    rhs = [substitute(r, var_map) for r in reducer.rhs]
    if any(iv.iter_type == "reduce" for iv in iter_vars):
        body = reducer.body(rf_buffers, indices, [E.BufferLoad(b, indices) for b in rf_buffers], rhs)
        init = reducer.init(rf_buffers, indices)
    else:   # every reduce iterator came from ``loop``: each rf slot holds one value
        body, init = S.seq(*[S.BufferStore(b, r, indices) for b, r in zip(rf_buffers, rhs)]), None
    # the regions of the reduction, as the reference compiler derives them: its reads (the
    # outputs, if listed, become the rf buffers) and its writes, moved to the rf buffers
    rf_of = {id(b): rf for b, rf in zip(reducer.buffers, rf_buffers)}

    def moved(region):
        if id(region.buffer) not in rf_of:
            return S.BufferRegion(region.buffer, tuple(_substituted(r, var_map) for r in region.region))
        ranges = tuple(region.region)
        ranges = ranges[:site.axis] + (S.Range(rf_var, E.const(1, rf_var.dtype)),) + ranges[site.axis:]
        return S.BufferRegion(rf_of[id(region.buffer)], tuple(_substituted(r, var_map) for r in ranges))
    rf_block = blk.replace(name_hint=unique_block_name(site.index, f"{blk.name_hint}_rf"),
                           iter_vars=tuple(iter_vars), body=body, init=init,
                           reads=tuple(moved(r) for r in blk.reads),
                           writes=tuple(moved(w) for w in blk.writes))
    return S.BlockRealize(tuple(values), realize.predicate, rf_block)


def _substituted(rng: S.Range, var_map) -> S.Range:
    return S.Range(substitute(rng.min, var_map), substitute(rng.extent, var_map))


def _points(buffers, indices) -> tuple:
    one = [E.const(1, i.dtype) for i in indices]
    return tuple(S.BufferRegion(b, tuple(S.Range(i, n) for i, n in zip(indices, one))) for b in buffers)


def write_back_block(site: RFactorSite, rf_buffers) -> S.Stmt:
    """The write-back block keeps the reduction's name: in new copies of ``loop`` and of the loops
    that feed no reduce iterator, it reduces the rf buffers over v<loop> into the outputs."""
    loop_node, realize, blk = site.loop, site.realize, site.realize.block
    axis, reducer = site.axis, site.reducer
    reduce_values = [v for iv, v in zip(blk.iter_vars, realize.iter_values) if iv.iter_type != "spatial"]
    wb_loops = [lp for lp in site.loops[site.top_pos:] if lp is loop_node
                or not any(uses_var(v, lp.loop_var) for v in reduce_values)]
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
    indices = tuple(substitute(i, wb_map) for i in site.indices)
    rf_indices = indices[:axis] + (wb_rf_var,) + indices[axis:]
    outputs = reducer.buffers
    wb_body = reducer.body(outputs, indices, [E.BufferLoad(b, indices) for b in outputs],
                           [E.BufferLoad(b, rf_indices) for b in rf_buffers])
    wb_block = S.Block(blk.name_hint, tuple(wb_iters), _points(rf_buffers, rf_indices),
                       _points(outputs, indices), wb_body, reducer.init(outputs, indices),
                       annotations=blk.annotations)
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


def hoisted_rf_nest(site: RFactorSite, rf_realize: S.BlockRealize, scope) -> S.Stmt | None:
    """The rf block in a copy of all its loops, to run before the outermost one, as the reference
    compiler places it when the reduction shares its outer loops with other blocks; None when
    there are no such loops, one of them is not a plain serial loop, or another block under them
    writes a buffer the reduction reads (the hoisted reduction would read it too early)."""
    outer = site.loops[:site.top_pos]
    if not outer or any(lp.kind != "serial" or lp.annotations for lp in outer):
        return None
    read = {id(r.buffer) for r in site.realize.block.reads}
    for other in child_blocks(scope):
        for realize in [other] + _nested(other):
            if realize is site.realize or not _under(site.index, realize, site.loops[0]):
                continue
            if any(id(w.buffer) in read for w in realize.block.writes):
                return None
    fresh = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in site.loops}
    stmt = rf_realize.replace(iter_values=tuple(substitute(v, fresh) for v in rf_realize.iter_values),
                              predicate=substitute(rf_realize.predicate, fresh))
    for lp in reversed(site.loops):
        stmt = lp.replace(loop_var=fresh[lp.loop_var], min=substitute(lp.min, fresh),
                          extent=substitute(lp.extent, fresh), body=stmt)
    return stmt


def _nested(realize) -> list:
    out = []
    for child in child_blocks(realize):
        out += [child] + _nested(child)
    return out


def _under(index, realize, loop) -> bool:
    return any(anc is loop for anc in index.path(realize))
