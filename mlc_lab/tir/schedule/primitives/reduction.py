"""Reductions: decompose_reduction (split off the init) and rfactor (reduce in two stages)."""
from __future__ import annotations

from ... import expr as E
from ... import stmt as S
from ...stmt_functor import substitute, uses_var
from .. import errors
from ..instruction import instruction
from ..func_index import StmtReplacer
from ..rv import BlockRV
from .cache import replace_flat, taken_buffer_names, unique_block_name, unique_name
from .scope import first_loop_feeding_reduction, is_reduction_block, substitute_and_simplify
from .injective import repeated_points
from .rfactor_blocks import (RFactorSite, hoisted_rf_nest, keep_conjuncts, rf_block, with_regions,
                             write_back_block)


class ReductionPrimitives:

    @instruction
    def decompose_reduction(self, block, loop):
        """Split a reduction block into ``<name>_init``, which stores the init value, and
        ``<name>_update``, the block without its ``T.init``.

        The init block is placed right before ``loop``, inside copies of the loops under ``loop``
        that its spatial iterators need (named ``<loop>_init``, same kinds). The update block
        stays where the reduction block was, and the old handle to ``block`` names it from now on
        (as does ``sch.get_block("<name>_update")``).

        Requires: ``block`` is a reduction block with ``T.init``; ``loop`` is an ancestor of it and
        is not inside any loop that feeds a reduce iterator. Vectorize/parallelize the block's loops
        first: afterwards the block is no longer the only writer of its output.

        Parameters: block (BlockRV), loop (LoopRV).
        Returns: the init block.
        Raises: NotReductionBlockError, LoopNotAncestorError, LoopHeightError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
        ...     for i, k in T.grid(8, 16):
        ...         with T.block("B"):
        ...             vi, vk = T.axis.remap("SR", [i, k])
        ...             with T.init():
        ...                 B[vi] = T.float32(0)
        ...             B[vi] = B[vi] + A[vi, vk]
        >>> sch = tir.Schedule(f)
        >>> i, k = sch.get_loops(sch.get_block("B"))
        >>> init = sch.decompose_reduction(sch.get_block("B"), k)
        >>> print(sch.mod["main"].body.block.body)
        for i in range(8):
            with T.block("B_init"):
                vi = T.axis.remap("S", [i])
                T.reads()
                T.writes(B[vi])
                B[vi] = T.float32(0)
            for k in range(16):
                with T.block("B_update"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    T.reads(B[vi], A[vi, vk])
                    T.writes(B[vi])
                    B[vi] = B[vi] + A[vi, vk]
        """
        primitive = "decompose_reduction"
        func_name, realize, index = self._resolve_block(block, primitive)
        _, loop_node, _ = self._resolve_loop(loop, primitive)
        func = self._func(func_name)
        blk = realize.block
        if not is_reduction_block(blk):
            raise errors.NotReductionBlockError(
                primitive, f'block "{blk.name_hint}" is not a reduction block (it needs reduce '
                "iterators and a T.init)", func, [blk])
        loops = index.loops_above(realize)
        pos = next((k for k, lp in enumerate(loops) if lp is loop_node), None)
        if pos is None:
            raise errors.LoopNotAncestorError(
                primitive, f'loop {loop_node.loop_var.name} is not an ancestor of block '
                f'"{blk.name_hint}"', func, [loop_node, blk])
        outer = first_loop_feeding_reduction(realize, loops[:pos])
        if outer is not None:
            raise errors.LoopHeightError(
                primitive, f"loop {loop_node.loop_var.name} is inside loop {outer.loop_var.name}, "
                f'which feeds a reduce iterator of block "{blk.name_hint}"; the init would run '
                f"on every iteration of {outer.loop_var.name}. Decompose at "
                f"{outer.loop_var.name} or a loop above it", func, [loop_node, outer])
        repeats = repeated_points(realize, loops[pos:], loops[:pos])
        if repeats is not False:
            how = ("visit some of its iterations more than once" if repeats else
                   "cannot be shown to visit each of its iterations once")
            raise errors.RepeatedIterationError(
                primitive, f'the loops from {loop_node.loop_var.name} down to block "{blk.name_hint}" '
                f"{how} (as after compute_at under a fused or split loop); with the init hoisted "
                f"above {loop_node.loop_var.name} the update would accumulate again. Decompose at a "
                "loop below the repeating one", func, [loop_node, blk])
        var_map, iter_vars, values = {}, [], []
        for iv, value in zip(blk.iter_vars, realize.iter_values):
            if iv.iter_type == "spatial":
                new_var = E.Var(iv.var.name, iv.var.dtype)
                var_map[iv.var] = new_var
                iter_vars.append(iv.replace(var=new_var))
                values.append(value)
        chosen = [lp for lp in loops[pos:] if any(uses_var(v, lp.loop_var) for v in values)]
        dropped = [lp.loop_var for lp in loops[pos:] if not any(lp is c for c in chosen)]
        loop_map = {lp.loop_var: E.Var(f"{lp.loop_var.name}_init", lp.loop_var.dtype) for lp in chosen}
        init_block = S.Block(unique_block_name(index, f"{blk.name_hint}_init"), tuple(iter_vars),
                             (), (), substitute_and_simplify(blk.init, var_map), annotations=blk.annotations)
        init_block = with_regions(init_block)
        predicate = keep_conjuncts(realize.predicate, lambda c: not any(uses_var(c, v) for v in dropped))
        init_stmt = S.BlockRealize(tuple(substitute(v, loop_map) for v in values),
                                   substitute(predicate, loop_map), init_block)
        for lp in reversed(chosen):
            init_stmt = lp.replace(loop_var=loop_map[lp.loop_var], min=substitute(lp.min, loop_map),
                                   extent=substitute(lp.extent, loop_map), body=init_stmt)
        # the update block reads what it writes (the init no longer provides it): the written
        # regions it did not list as reads come first, as the reference compiler puts them
        read_ids = {id(r.buffer) for r in blk.reads}
        update = blk.replace(name_hint=unique_block_name(index, f"{blk.name_hint}_update"), init=None,
                             reads=tuple(w for w in blk.writes if id(w.buffer) not in read_ids) + blk.reads)
        new_loop = StmtReplacer({id(realize): realize.replace(block=update)}).visit(loop_node)
        new_body = replace_flat(func.body, {id(loop_node): S.seq(init_stmt, new_loop)})
        self._update(func_name, func.replace(body=new_body), primitive)
        self._renamed[(func_name, blk.name_hint)] = update.name_hint
        return BlockRV(init_block.name_hint, func_name)

    @instruction
    def rfactor(self, loop, factor_axis: int):
        """Reduce in two stages: a new block ``<name>_rf`` reduces into ``<buffer>_rf``, which has
        an extra dimension (the extent of ``loop``, at position ``factor_axis``) indexed by
        ``loop``, so ``loop`` becomes a spatial loop there (it can then be parallelized or
        vectorized); the original block, in a new loop nest after it, reduces ``<buffer>_rf``
        over that dimension.

        Requires: ``loop`` holds a single block, a reduction block whose update is a reducer
        (see reducers.py): ``x = x + e`` (or ``*``, ``T.max``, ``T.min``) with the operator's
        identity as init, several such outputs, or an argmax/argmin pair (an index and a value,
        new values computed in LetStmts, then stored); ``loop`` feeds only reduce iterators of
        it (one, as in ``k_0 * 4 + k_1``, or several, as in ``r // 7`` and ``r % 7``), or none
        when its extent is 1; the loops feeding reduce iterators hold no other block. When
        ``loop`` feeds every reduce iterator, the rfactor block has none left: it just copies
        each value into its rf slot (no init). Each output gets its own rf buffer.

        rfactor changes the order in which values are combined: sums of floats round
        differently, and an argmax whose combiner keeps the first of equal values (``>=``) may
        return another index of the same maximum; the tie-breaking form (``>``, then the smaller
        index) returns the same index.

        When the reduction's outer loops hold other blocks too, the rf block runs in a copy of
        all its loops placed before them (as the reference compiler does) and the write-back
        stays in place; if a block in those loops writes what the reduction reads, or one of
        them is not a plain serial loop, the rf nest stays in place instead.

        Parameters: loop (LoopRV), factor_axis (int, may be negative as in numpy).
        Returns: the rfactor block.
        Raises: NotReductionBlockError, and (all RFactorError) LoopHoldsOtherBlocksError,
        NotSingleReduceIterError, ReducerNotRecognizedError, FactorAxisOutOfRangeError,
        NotAffineBindingError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((16,), "float32"), B: T.Buffer((1,), "float32")):
        ...     for k in range(16):
        ...         with T.block("B"):
        ...             vk = T.axis.reduce(16, k)
        ...             with T.init():
        ...                 B[0] = T.float32(0)
        ...             B[0] = B[0] + A[vk]
        >>> sch = tir.Schedule(f)
        >>> (k,) = sch.get_loops(sch.get_block("B"))
        >>> k0, k1 = sch.split(k, [None, 4])
        >>> rf = sch.rfactor(k1, 0)
        >>> print(sch.mod["main"].body)
        with T.block("root"):
            T.reads()
            T.writes()
            B_rf = T.alloc_buffer((4, 1))
            for k_0, k_1 in T.grid(4, 4):
                with T.block("B_rf"):
                    vk_1, vk_0 = T.axis.remap("SR", [k_1, k_0])
                    T.reads(A[vk_0 * 4 + vk_1])
                    T.writes(B_rf[vk_1, 0])
                    with T.init():
                        B_rf[vk_1, 0] = T.float32(0)
                    B_rf[vk_1, 0] = B_rf[vk_1, 0] + A[vk_0 * 4 + vk_1]
            for k_1 in range(4):
                with T.block("B"):
                    vk_1 = T.axis.remap("R", [k_1])
                    T.reads(B_rf[vk_1, 0])
                    T.writes(B[0])
                    with T.init():
                        B[0] = T.float32(0)
                    B[0] = B[0] + B_rf[vk_1, 0]
        """
        primitive = "rfactor"
        func_name, loop_node, index = self._resolve_loop(loop, primitive)
        func = self._func(func_name)
        if not isinstance(factor_axis, int) or isinstance(factor_axis, bool):
            raise TypeError(f"sch.rfactor: parameter 'factor_axis' expects an int, got "
                            f"{type(factor_axis).__name__}: {factor_axis!r}")
        site = RFactorSite.validate(loop_node, index, func, factor_axis)
        taken, rf_buffers = taken_buffer_names(func), []
        for buffer in site.reducer.buffers:
            rf_buffers.append(buffer.replace(
                name=unique_name(f"{buffer.name}_rf", taken | {b.name for b in rf_buffers}),
                shape=buffer.shape[:site.axis] + (loop_node.extent,) + buffer.shape[site.axis:],
                strides=(),
                # the same physical dimensions: the new axis joins the group that holds the
                # axis it is placed before
                axis_separators=tuple(s + (s > site.axis) for s in buffer.axis_separators)))
        rf_realize = rf_block(site, rf_buffers)
        write_back = write_back_block(site, rf_buffers)

        top, scope = site.loops[site.top_pos], index.parent_block(site.realize)
        hoisted = hoisted_rf_nest(site, rf_realize, scope)
        if hoisted is not None:   # the rf nest before the loops shared with other blocks
            outer = site.loops[0]
            new_outer = StmtReplacer({id(top): write_back}).visit(outer)
            new_body = replace_flat(scope.block.body, {id(outer): S.seq(hoisted, new_outer)})
        else:
            new_top = StmtReplacer({id(site.realize): rf_realize}).visit(top)
            new_body = replace_flat(scope.block.body, {id(top): S.seq(new_top, write_back)})
        new_scope = scope.replace(block=scope.block.replace(
            body=new_body, alloc_buffers=scope.block.alloc_buffers + tuple(rf_buffers)))
        self._replace(func_name, {id(scope): new_scope}, primitive)
        return self._block_rv(rf_realize, func_name)
