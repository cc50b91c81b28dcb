"""Compute location: compute_at (move a producer under a consumer's loop) and reverse_compute_at
(move a consumer under a producer's loop), each covering exactly the region needed there."""
from __future__ import annotations

from ...linear_index import can_prove, simplify
from ....arith.bound import int_bound
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import and_all, conjuncts, uses_var
from ..instruction import instruction
from ..func_index import child_blocks
from .scope import dataflow_violation
from .block_domain import (UncoverableRegion, accessed_region, block_var_domains,
                           enclosing_ranges, loops_between, predicate_in_iterators, realize_over,
                           shared_by_threads, uncovered_iterator)
from .region import Interval, relax, relax_region
from ...intervals import narrowed_ranges
from .move_stmt import loop_children, remove_and_insert


class ComputeLocationPrimitives:

    @instruction
    def compute_at(self, block, loop, preserve_unit_loops: bool = False, index: int = -1) -> None:
        """Move a producer block under ``loop`` so that each iteration of the loop computes just
        the part of the block's output that the consumers under the loop read.

        The block gets new loops ``ax0, ax1, ...`` (one per block iterator whose range is not a
        single point) that cover the consumers' read region, relaxed over the loops inside
        ``loop``; the block iterators keep their names and domains, only their bindings change.
        Where that region may overhang an iterator's domain the block gets a ``T.where``.
        Reduction blocks re-create their reduce loops in full. For a block writing shared (or
        warp) memory, the threadIdx loops at and around ``loop`` are relaxed too, because the
        threads of a GPU block share one copy: computed at the thread loop of a 128-thread
        window-sum tile, the copy covers the 130 elements the whole tile reads.

        Requires: the block is a complete block (only spatial iterators, the only writer of its
        outputs, not reading them) or a reduction block of its scope; it writes only buffers
        allocated in its scope (not an output of the function); ``loop`` is in the same scope,
        does not enclose the block already, and encloses every consumer of the block (at
        least one); under ``loop`` the block's producers come before its consumers; a
        ``T.where`` of the block can be rewritten in its iterators (it is kept).

        Parameters: block (BlockRV), loop (LoopRV, or None for the root as
        sample_compute_location gives it: then the block stays where it is),
        preserve_unit_loops (keep loops of extent 1), index (where in the loop body: -1 before
        the first consumer, -2 right after the last producer, or a position in between).
        Raises (all ComputeAtError): NotInSameScopeError, RootBlockError, LoopInsideBlockError,
        LoopEnclosesBlockError, NotSingleWriterError, NotCompleteOrReductionBlockError,
        OutputBlockError, NotAllRequiredBlocksVisitedError, ProducerAfterConsumerError,
        InvalidIndexError,
        NoDependenceUnderLoopError, PredicateNotInIteratorsError, WrongBlockIterTypeError.

        Example:

        >>> @T.prim_func
        ... def window_sum(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32")):
        ...     A_shared = T.alloc_buffer((130,), scope="shared")
        ...     for i in range(130):
        ...         with T.block("A_shared"):
        ...             v = T.axis.spatial(130, i)
        ...             A_shared[v] = A[v]
        ...     for i in range(128):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(128, i)
        ...             B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]
        >>> sch = tir.Schedule(window_sum)
        >>> i0, i1 = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[4, 32])
        >>> sch.compute_at(sch.get_block("A_shared"), i0)
        >>> print(sch.mod["main"].body.block.body)
        for i_0 in range(4):
            for ax0 in range(34):
                with T.block("A_shared"):
                    v = T.axis.spatial(130, i_0 * 32 + ax0)
                    T.reads(A[v])
                    T.writes(A_shared[v])
                    A_shared[v] = A[v]
            for i_1 in range(32):
                with T.block("B"):
                    vi = T.axis.spatial(128, i_0 * 32 + i_1)
                    T.reads(A_shared[vi:vi + 3])
                    T.writes(B[vi])
                    B[vi] = A_shared[vi] + A_shared[vi + 1] + A_shared[vi + 2]
        """
        self._move_block(block, loop, preserve_unit_loops, index, "compute_at")

    @instruction
    def reverse_compute_at(self, block, loop, preserve_unit_loops: bool = False,
                           index: int = -1) -> None:
        """Move a consumer block under ``loop`` so that each iteration of the loop consumes just
        the part of its input that the producers under the loop have written.

        The block gets new loops ``ax0, ax1, ...`` covering the region the producers under
        ``loop`` write (relaxed over the loops inside ``loop``), placed after them; a
        ``T.where`` guards iterations that would overhang the block's domain.

        Requires: the block is a complete or reduction block of its scope that reads one
        element of each produced buffer per iteration (``B[vi, vj]``, not a window); ``loop`` is
        in the same scope, does not enclose the block already, and encloses every producer of
        the block (at least one); a reduction producer runs its whole reduction inside
        ``loop``; under ``loop`` the block's producers come before its consumers; the producers
        there feed every iteration of the block (not so for the border of a padding stage),
        and a ``T.where`` of the block can be rewritten in its iterators. A consumer reading
        one element at split or fused indices (``temp[v // 16, v % 16]``) runs the iterations
        whose elements the producers just made, found by inverting the indices. The reference
        compiler also moves a consumer that reads a window per iteration (a pooling stage),
        running each iteration once every element it reads has been made; this one refuses
        that rather than risk running an iteration too early.

        Parameters: block (BlockRV), loop (LoopRV, or None for the root as
        sample_compute_location gives it: then the block stays where it is),
        preserve_unit_loops (keep loops of extent 1), index (as in compute_at).
        Raises (all ComputeAtError): as compute_at (except OutputBlockError), and
        ConsumerBeforeLoopError, ReductionNotFinishedError, RegionNotCoverableError,
        NoDependenceUnderLoopError, UncoveredIterationsError, PredicateNotInIteratorsError,
        WrongBlockIterTypeError.

        Example (the course's mm_relu):

        >>> @T.prim_func
        ... def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
        ...             C: T.Buffer((128, 128), "float32")):
        ...     Y = T.alloc_buffer((128, 128))
        ...     for i, j, k in T.grid(128, 128, 128):
        ...         with T.block("Y"):
        ...             vi, vj, vk = T.axis.remap("SSR", [i, j, k])
        ...             with T.init():
        ...                 Y[vi, vj] = T.float32(0)
        ...             Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        ...     for i, j in T.grid(128, 128):
        ...         with T.block("C"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
        >>> sch = tir.Schedule(mm_relu)
        >>> i, j, k = sch.get_loops(sch.get_block("Y"))
        >>> j0, j1 = sch.split(j, factors=[None, 4])
        >>> sch.reorder(j0, k, j1)
        >>> sch.reverse_compute_at(sch.get_block("C"), j0)
        >>> print(sch.mod["main"].body.block.body)
        for i, j_0 in T.grid(128, 32):
            for k, j_1 in T.grid(128, 4):
                with T.block("Y"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + j_1)
                    vk = T.axis.reduce(128, k)
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(Y[vi, vj])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
            for ax0 in range(4):
                with T.block("C"):
                    vi = T.axis.spatial(128, i)
                    vj = T.axis.spatial(128, j_0 * 4 + ax0)
                    T.reads(Y[vi, vj])
                    T.writes(C[vi, vj])
                    C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
        """
        self._move_block(block, loop, preserve_unit_loops, index, "reverse_compute_at")

    # ------------------------------------------------------------------------------------------
    def _move_block(self, block, loop, preserve_unit_loops: bool, index: int, primitive: str) -> None:
        forward = primitive == "compute_at"
        func_name, realize, idx = self._resolve_block(block, primitive)
        if loop is None:   # the root, as sample_compute_location gives it: the block stays put
            return
        loop_func, loop_node, _ = self._resolve_loop(loop, primitive)
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"sch.{primitive}: parameter 'index' expects an int, got {index!r}")
        func = self._func(func_name)
        name, loop_name = realize.block.name_hint, loop_node.loop_var.name

        def fail(error, rule, *culprits):
            raise error(primitive, rule, func, culprits, func_name=func_name)

        if loop_func != func_name:
            raise errors.NotInSameScopeError(
                primitive, f'block "{name}" is in function {func_name} but loop {loop_name} is in '
                f"function {loop_func}", func, (realize.block,), func_name=func_name)
        scope = idx.parent_block(realize)
        if scope is None:
            fail(errors.RootBlockError,
                 f'block "{name}" is the root block; only blocks inside it can be moved',
                 realize.block)
        if any(anc is realize for anc in idx.path(loop_node)):
            fail(errors.LoopInsideBlockError,
                 f'loop {loop_name} is inside block "{name}"; the block cannot move under its own '
                 "loop", loop_node, realize.block)
        if idx.parent_block(loop_node) is not scope:
            fail(errors.NotInSameScopeError,
                 f'loop {loop_name} and block "{name}" are not in the same block scope',
                 loop_node, realize.block)
        if any(anc is loop_node for anc in idx.path(realize)):
            fail(errors.LoopEnclosesBlockError,
                 f'loop {loop_name} is an ancestor of block "{name}" (it already encloses it); give '
                 "a loop that does not enclose it (e.g. one of its consumers' loops)", loop_node,
                 realize.block)
        problem = dataflow_violation(realize, scope)
        if problem:
            error, why = problem
            fail(error, f"{why}; only a complete block or a reduction block can be moved",
                 realize.block)
        if forward:
            own = {id(b) for b in scope.block.alloc_buffers}
            for w in realize.block.writes:
                if id(w.buffer) not in own:
                    fail(errors.OutputBlockError,
                         f'block "{name}" writes buffer {w.buffer.name}, which is not allocated in '
                         "its scope (an output of the function); an output block cannot be moved "
                         "under a consumer's loop", realize.block)

        producers, consumers = idx.producers(realize), idx.consumers(realize)
        needed = consumers if forward else producers
        for other in needed:
            if not any(anc is loop_node for anc in idx.path(other)):
                role = "consumer" if forward else "producer"
                fail(errors.NotAllRequiredBlocksVisitedError,
                     f'loop {loop_name} does not enclose block "{other.block.name_hint}", a {role} '
                     f'of block "{name}"; {primitive} requires all the {role}s to be under the '
                     "loop",
                     loop_node, other.block)
        if not forward:
            # A consumer left outside the loop must not run before the block's new place.
            order = {id(n): k for k, n in enumerate(idx.order)}
            for other in consumers:
                outside = not any(anc is loop_node for anc in idx.path(other))
                if outside and order[id(other)] < order[id(loop_node)]:
                    fail(errors.ConsumerBeforeLoopError,
                         f'block "{other.block.name_hint}" consumes what block "{name}" writes but '
                         f"runs before loop {loop_name}; it would read values not yet written",
                         loop_node, other.block)
        if not needed:
            role, relation = (("consumer", "reads what it writes") if forward
                              else ("producer", "writes what it reads"))
            fail(errors.NoDependenceUnderLoopError,
                 f'block "{name}" has no {role} under loop {loop_name} (no block there {relation}), '
                 "so nothing limits which of its iterations run there: it would run all of them in "
                 f"every iteration of the loop; {primitive} needs a {role} of the block under the loop",
                 loop_node, realize.block)
        position = _insertion_point(loop_node, producers, consumers, index, fail)

        known = enclosing_ranges(idx, loop_node)
        needed_buffers = {id(r.buffer) for other in needed
                          for r in (other.block.reads if forward else other.block.writes)}
        provided = [r for r in (realize.block.writes if forward else realize.block.reads)
                    if id(r.buffer) in needed_buffers]
        required = {}
        for region in provided:
            threads = shared_by_threads(idx, loop_node, region.buffer.scope) if forward else {}
            touched = accessed_region(idx, loop_node, needed, region.buffer, writes=not forward,
                                      known=known, also_relax=threads)
            if touched is not None:
                required[id(region.buffer)] = touched
        if not forward:
            for other in needed:
                _check_reduction_finished(idx, other, loop_node, known, fail)
            for region in provided:
                box = required.get(id(region.buffer))
                if not _provably_equal(loop_node.extent, E.const(1, loop_node.extent.dtype), known) \
                        and (box is None or any(interval is None for interval in box)):
                    fail(errors.RegionNotCoverableError,
                         f"the part of buffer {region.buffer.name} that the producers under loop "
                         f"{loop_name} write in one iteration cannot be bounded (an index is not "
                         "affine in the loops, or multiplies one by a factor of unknown sign), so "
                         f'block "{name}" would read all of it in every iteration, elements not '
                         "written yet among them; compute_at the producer instead, or split with "
                         "constant factors", loop_node, realize.block)
                skipping = _skipping_guard(idx, loop_node, needed, region.buffer, known)
                if skipping is not None:
                    fail(errors.RegionNotCoverableError,
                         f"a producer under loop {loop_name} skips iterations by T.where "
                         f"({skipping}), which leaves gaps in the part of buffer "
                         f"{region.buffer.name} it writes per iteration that no box can follow: "
                         f'block "{name}" would read elements not written yet. Move it under a loop '
                         "outside the split that made the T.where, or compute_at the producer instead",
                         loop_node, realize.block)
                sparse = _sparsely_written(idx, loop_node, needed, region.buffer, required, known)
                if sparse is not None:
                    fail(errors.RegionNotCoverableError,
                         f"the producers under loop {loop_name} write {sparse[0]} elements of buffer "
                         f"{region.buffer.name} per iteration, fewer than the {sparse[1]} of the box "
                         f'around them that block "{name}" would read (a fused or split loop writes '
                         "part of a row): it would read elements not written yet. Split the loop so "
                         "that each iteration writes whole rows, or compute_at the producer instead",
                         loop_node, realize.block)
        try:
            domains = block_var_domains(realize.block, provided, required, known,
                                        cover_all=forward)
        except UncoverableRegion as e:
            fail(errors.RegionNotCoverableError,
                 f'block "{name}" reads a range of buffer {e.buffer.name} in each iteration (not '
                 f"one element per iterator), so no set of its iterations uses exactly what the "
                 f"producers under loop {loop_name} write; compute_at the producers instead",
                 realize.block)
        if not forward:
            # The consumer's iterations are shared out among the iterations of the loop; those
            # that no producer there feeds (the border of a padding stage) would never run.
            around = set(map(id, idx.path(realize)))
            entered = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in idx.path(loop_node) + [loop_node]
                       if isinstance(lp, S.For) and id(lp) not in around}
            # The consumer skips the iterations of the loop where the producers write nothing
            # (below); its iterations must all lie in the others.
            skipped = _producers_guard(idx, needed, loop_node, known, fail, name, loop_name)
            allowed = narrowed_ranges(skipped, entered, known) if skipped else entered
            missing = uncovered_iterator(realize.block, domains, allowed, known)
            if skipped and missing is None and all(allowed[v] is entered[v] for v in entered):
                fail(errors.UncoveredIterationsError,
                     f"a producer under loop {loop_name} writes only where {and_all(skipped)}, "
                     f'which block "{name}" would then skip too; that its iterations all lie where '
                     "the producer writes cannot be shown (a symbolic bound), and those outside "
                     "(e.g. a padding border) would never run", loop_node, realize.block)
            if missing is not None:
                fail(errors.UncoveredIterationsError,
                     f'the producers under loop {loop_name} feed only part of the iterations of block '
                     f'"{name}" (iterator {missing.var.name} does not reach its whole domain '
                     f"[{missing.dom.min}, {simplify(missing.dom.min + missing.dom.extent)}) there); "
                     "the others (e.g. a padding border) would never run", loop_node, realize.block)
        staying = {id(anc) for anc in idx.path(loop_node)}
        gone = [anc.loop_var for anc in idx.path(realize)
                if isinstance(anc, S.For) and id(anc) not in staying]
        predicate = predicate_in_iterators(realize, gone)
        if predicate is None:
            fail(errors.PredicateNotInIteratorsError,
                 f'block "{name}" has a T.where ({realize.predicate}) over loops it would leave that '
                 "cannot be rewritten in its iterators, so the iterations it skips could not be "
                 f"skipped under loop {loop_name}", realize.block)
        if not forward:
            predicate = and_all([predicate] + skipped)
        moved = realize_over(realize.block, domains, preserve_unit_loops, known, predicate)
        _check_reduce_iterators_stay_serial(idx.path(loop_node) + [loop_node], moved, fail, name)
        body = remove_and_insert(func.body, remove=realize, insert=(loop_node, position, moved))
        self._update(func_name, func.replace(body=body), primitive)


def _check_reduce_iterators_stay_serial(ancestors, moved, fail, name: str) -> None:
    """Under a parallel, vectorized or thread-bound loop, the moved block may only take spatial
    iterators from it: iterations of a reduce iterator run side by side would race on the init
    and the updates of one element."""
    (new_realize,) = child_blocks(moved) if not isinstance(moved, S.BlockRealize) else (moved,)
    for lp in ancestors:
        if not isinstance(lp, S.For) or lp.kind not in ("parallel", "vectorized", "thread_binding"):
            continue
        for iv, value in zip(new_realize.block.iter_vars, new_realize.iter_values):
            if iv.iter_type != "spatial" and uses_var(value, lp.loop_var):
                kind = lp.thread_binding if lp.kind == "thread_binding" else lp.kind
                fail(errors.WrongBlockIterTypeError,
                     f'loop {lp.loop_var.name} is {kind} and would feed the reduce iterator '
                     f'{iv.var.name} of block "{name}": its iterations would update one element '
                     "side by side. Move the block under a loop outside it, or make that loop serial",
                     lp, new_realize.block)


def _producers_guard(idx, producers, loop: S.For, known: dict, fail, name: str, loop_name: str):
    """The conditions on ``loop`` and the loops around it under which the producers write at all:
    a T.where conjunct free of the loops inside ``loop`` (an overhanging split makes them) skips
    whole iterations of it, and the consumer moved there must skip them too, or it would read
    what a later iteration writes. With several producers their conditions would have to be
    or-ed per element, so that case is refused."""
    guards = []
    for producer in producers:
        inner = [lp.loop_var for lp in loops_between(idx, producer, loop)]
        guards.append([c for c in conjuncts(producer.predicate)
                       if not uses_var(c, inner) and not can_prove(c, known)])
    if len(producers) > 1 and any(guards):
        fail(errors.RegionNotCoverableError,
             f"a producer under loop {loop_name} writes in only some of its iterations (T.where "
             f"{and_all(next(g for g in guards if g))}), and there are several producers, so "
             f'no single condition says when block "{name}" may read; reverse_compute_at needs '
             "the producers to write in every iteration of the loop", loop)
    return guards[0] if guards else []


def _skipping_guard(idx, loop: S.For, producers, buffer, known: dict):
    """A T.where conjunct of a producer of ``buffer`` over the loops inside ``loop`` that skips
    elements inside the region it writes there, or None. A conjunct that only keeps an iterator
    inside its domain skips nothing the consumer reads (the consumer is clipped the same way), and
    one that narrows the region (a nested split's guard) is followed by it; any other leaves
    unwritten elements inside the box."""
    for producer in producers:
        block = producer.block
        inner = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops_between(idx, producer, loop)}
        binding = {iv.var: v for iv, v in zip(block.iter_vars, producer.iter_values)}
        for cond in conjuncts(producer.predicate):
            if not uses_var(cond, list(inner)) or _bounds_an_iterator(cond, block, binding, known):
                continue
            for region in block.writes:
                if region.buffer is not buffer:
                    continue
                plain = relax_region(region, inner, known, binding)
                guarded = relax_region(region, inner, known, binding, [cond])
                if all(a is not None and b is not None and _provably_equal(a.lo, b.lo, known)
                       and _provably_equal(a.hi, b.hi, known) for a, b in zip(plain, guarded)):
                    return cond
    return None


def _bounds_an_iterator(cond, block: S.Block, binding: dict, known: dict) -> bool:
    """Whether ``cond`` is ``value < min + extent`` or ``value >= min`` for the value bound to
    one of the block's iterators (the guard an overhanging split puts on it)."""
    if not isinstance(cond, (E.LT, E.GE)):
        return False
    for iv in block.iter_vars:
        bound = iv.dom.min + iv.dom.extent if isinstance(cond, E.LT) else iv.dom.min
        if _provably_equal(cond.a, binding[iv.var], known) and _provably_equal(cond.b, bound, known):
            return True
    return False


def _sparsely_written(idx, loop: S.For, producers, buffer, required: dict, known: dict):
    """(elements written, elements in their box) per iteration of ``loop`` when the producers
    write fewer elements of ``buffer`` than the box around them holds (both known constants),
    else None. Each producer iteration writes its write region (one element, or a tile for a
    blockized producer), so that times its loop nest's size bounds them."""
    box = required.get(id(buffer))
    if not box or any(interval is None for interval in box):
        return None
    volume = 1   # the smallest the box gets over the iterations of the loops around ``loop``
    for interval in box:
        smallest = int_bound(simplify(interval.hi - interval.lo + 1, known), known)[0]
        volume *= max(1, smallest or 1)   # a box around written elements spans one at least
    written = 0
    for producer in producers:
        writes = [w for w in producer.block.writes if w.buffer is buffer]
        if not writes:
            continue
        count = 0
        for write in writes:
            tile = 1
            for dim in write.region:
                extent = simplify(dim.extent, known)
                if not isinstance(extent, E.IntImm):
                    return None
                tile *= extent.value
            count = max(count, tile)
        for lp in loops_between(idx, producer, loop):
            extent = simplify(lp.extent, known)
            if not isinstance(extent, E.IntImm):
                return None
            count *= extent.value
        written += count
    return (written, volume) if written < volume else None


def _check_reduction_finished(idx, producer, loop: S.For, known: dict, fail) -> None:
    """A reduction producer must run its whole reduction inside ``loop`` for the values a consumer
    reads there to be final."""
    block = producer.block
    inner = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops_between(idx, producer, loop)}
    for iv, value in zip(block.iter_vars, producer.iter_values):
        if iv.iter_type != "reduce":
            continue
        covered = relax(value, inner, known)
        full = Interval.of_range(iv.dom)
        if covered is None or not (_provably_equal(covered.lo, full.lo, known)
                                   and _provably_equal(covered.hi, full.hi, known)):
            fail(errors.ReductionNotFinishedError,
                 f'block "{block.name_hint}" is a reduction whose iterator {iv.var.name} does not run '
                 f"over its whole domain inside loop {loop.loop_var.name}, so the values it has "
                 f"produced there are not final yet; choose a loop outside its reduce loops",
                 loop, block)


def _provably_equal(a, b, known: dict) -> bool:
    diff = simplify(a - b, known)
    return isinstance(diff, E.IntImm) and diff.value == 0


def _insertion_point(loop: S.For, producers, consumers, index: int, fail) -> int:
    """Where the moved block goes in ``loop``'s body: after every producer, before every consumer."""
    children = loop_children(loop)
    last_producer, first_consumer = -1, len(children)
    last_block = first_block = None
    for k, child in enumerate(children):
        inside = [child] if isinstance(child, S.BlockRealize) else child_blocks(child)
        for b in inside:
            if any(b is p for p in producers):
                last_producer, last_block = k, b
            if any(b is c for c in consumers) and first_block is None:
                first_consumer, first_block = k, b
    if last_producer >= first_consumer:
        fail(errors.ProducerAfterConsumerError,
             f'under loop {loop.loop_var.name}, block "{last_block.block.name_hint}" (a producer) '
             f'does not come before block "{first_block.block.name_hint}" (a consumer), so there is '
             "no place between them", loop, last_block.block, first_block.block)
    if index == -1:
        return first_consumer
    if index == -2:
        return last_producer + 1
    if not last_producer < index <= first_consumer:
        fail(errors.InvalidIndexError,
             f"index {index} is not a valid position in loop {loop.loop_var.name}: it must lie in "
             f"[{last_producer + 1}, {first_consumer}] (after the producers, before the consumers), "
             "or be -1 / -2", loop)
    return index
