"""Inlining: compute_inline (fold a producer's expression into its consumers) and
reverse_compute_inline (fold a consumer's expression into its producer)."""
from __future__ import annotations

from ....arith import simplify
from ....ir import structural_equal
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...analysis import block_access_regions
from ...functor import StmtExprMutator, StmtExprVisitor
from ..instruction import instruction
from ..func_index import StmtReplacer, child_blocks, replace_stmts
from ...stmt_functor import loads_in, substitute, uses_var
from .scope import dataflow_violation, is_spatial
from .move_stmt import remove_and_insert
from .inline_affine import covers, in_bound_predicate, invert, ranges_of, tidy
from .inline_checks import (check_inputs_not_rewritten, check_output_not_read_between,
                            check_runs_whole_domain, is_true, loads_conditionally,
                            producer_writes_all)


class InlinePrimitives:

    @instruction
    def compute_inline(self, block) -> None:
        """Inline a block into its consumers: every load of the buffer it writes is replaced by
        the expression it stores, and the block (with the loops it leaves empty) and the buffer's
        allocation disappear. The consumers' T.reads are recomputed.

        Requires: the block is a complete block (only spatial iterators, no init, the only
        writer of its buffer); its body is a single store ``B[indices] = expr`` from whose
        indices its iterators can be read back: distinct block iterators, or, as the reference
        compiler accepts, iterators split or fused by constants (``B[vi * 16 + vj]``,
        ``B[v // 4, v % 4]``; a load ``B[k]`` then takes ``expr`` at ``vi = k // 16,
        vj = k % 16``), unit iterators taking their one value; ``expr`` uses no iterator the
        indices leave undetermined; ``B`` is allocated in the block's scope (it is not an
        output of the function); every consumer reads ``B`` through loads (not through
        match_buffer or opaque regions); no block writes a buffer the block reads between the
        block and its consumers (the inlined value reads those buffers later).

        Parameters: block (BlockRV).
        Raises (all InlineError): NotCompleteBlockError, BodyNotSingleStoreError,
        NotSingleWriterError, NotCompleteOrReductionBlockError, IndicesNotIteratorsError,
        ValueUsesOtherIteratorError, OutputBlockError, InputWrittenBetweenError,
        OpaqueAccessError.

        Example:

        >>> @T.prim_func
        ... def scale_add(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        ...     B = T.alloc_buffer((16,))
        ...     for i in range(16):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(16, i)
        ...             B[vi] = A[vi] * T.float32(2)
        ...     for i in range(16):
        ...         with T.block("C"):
        ...             vi = T.axis.remap("S", [i])
        ...             C[vi] = B[vi] + T.float32(1)
        >>> sch = tir.Schedule(scale_add)
        >>> sch.compute_inline(sch.get_block("B"))
        >>> print(sch.mod["main"])
        @T.prim_func
        def scale_add(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
            T.func_attr({"global_symbol": "scale_add"})
            # with T.block("root"):
            for i in range(16):
                with T.block("C"):
                    vi = T.axis.remap("S", [i])
                    T.reads(A[vi])
                    T.writes(C[vi])
                    C[vi] = A[vi] * T.float32(2) + T.float32(1)
        """
        func_name, realize, idx = self._resolve_block(block, "compute_inline")
        func = self._func(func_name)
        producer = realize.block
        name = producer.name_hint

        def fail(error, rule, *culprits):
            raise error("compute_inline", f'cannot inline block "{name}": {rule}',
                        func, culprits or (producer,), func_name=func_name)

        scope = _scope_of(idx, realize, fail)
        if not is_spatial(producer):
            fail(errors.NotCompleteBlockError, "it is a reduction block (it has reduce iterators or "
                 "T.init); only a complete block B[v...] = expr can be inlined")
        store = _single_store(producer, fail)
        buffer = store.buffer
        problem = dataflow_violation(realize, scope)
        if problem:
            fail(*problem)
        index_vars = _plain_iter_vars(store.indices, producer)
        others = [iv.var for iv in producer.iter_vars
                  if all(iv.var is not v for v in index_vars or ())]
        inverse = None
        if index_vars is None or any(uses_var(store.value, v) for v in others):
            inverse, why = invert(store.indices, producer.iter_vars)
        if inverse is None and index_vars is None:
            fail(errors.IndicesNotIteratorsError,
                 f"its iterators cannot be read back from the store indices of {buffer.name} "
                 f"({', '.join(str(i) for i in store.indices)}): {why}", store)
        if inverse is None and any(uses_var(store.value, v) for v in others):
            fail(errors.ValueUsesOtherIteratorError,
                 f"the stored value uses a block iterator that is not an index of {buffer.name}",
                 store)
        if not _allocates(scope, buffer):
            fail(errors.OutputBlockError,
                 f"it writes {buffer.name}, which is not allocated in its scope (an output of the "
                 "function); an output block cannot be inlined")

        check_inputs_not_rewritten(idx, child_blocks(scope), realize, buffer, fail, self.state)
        body = _LoadInliner(buffer, index_vars, store.value, inverse).visit(scope.block.body)
        new_func = _rebuild_scope(func, scope, remove_and_insert(body, remove=realize), buffer)
        _check_no_access_left(new_func, buffer, fail)
        self._update(func_name, new_func, "compute_inline")

    @instruction
    def reverse_compute_inline(self, block) -> None:
        """Inline a block into its only producer: the producer stores the consumer's expression
        of the value it computed straight into the consumer's output, and the consumer (with the
        loops it leaves empty) and the intermediate buffer disappear.

        Requires: the block is a complete block whose body is a single store and which has no
        predicate; it reads exactly one buffer written in its scope (the intermediate), loading
        it everywhere at the same indices, from which its iterators can be read back (each index
        a sum of its iterators, split or fused by constants, with a dense mixed radix: ``B[v]``,
        ``B[vi * 16 + vj, vk]``, ``B[v // 16, v % 16]``, ``B[v + 1]``); its store writes each
        element once and its loops run its whole iteration domain once; no other block reads
        the intermediate, and the block's output is not read before the block writes it; the
        producer is a complete block (not a reduction) whose body is a single store to the
        intermediate (or one guarded by an ``if`` without ``else``), which is allocated in the
        scope.

        The producer then stores, at each element ``x`` it computes, the block's value for the
        iteration that loads ``x``, under an ``if`` that keeps only the elements the block reads
        (as the reference compiler does, the ``if`` is left out when provably always true). Beyond
        the reference compiler's checks, which only compare ranges, every step is proven here: a
        load that skips elements (``B[v * 2]``) is refused, an element must also match a
        constant index (``B[0, v]`` keeps only row 0) and lie in the range of a digit that wraps
        (``v % 4``), and a load inside a branch (``T.if_then_else``) needs proof that the
        producer writes every element the branch may read. A program that reads elements
        its producer never writes has no defined result, and gets none here.

        Parameters: block (BlockRV).
        Raises (all InlineError): NotCompleteBlockError, BodyNotSingleStoreError,
        NotSingleWriterError, NotCompleteOrReductionBlockError, NotSingleIntermediateError,
        NotSingleConsumerError, OutputBlockError, NonTrivialPredicateError,
        InconsistentLoadIndicesError, IndicesNotIteratorsError, NonInjectiveStoreError,
        PartialConsumerError, OutputReadBetweenError, ProducerNotCoverConsumerError,
        OpaqueAccessError.

        Example:

        >>> @T.prim_func
        ... def add_relu(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        ...     B = T.alloc_buffer((16,))
        ...     for i in range(16):
        ...         with T.block("B"):
        ...             vi = T.axis.remap("S", [i])
        ...             B[vi] = A[vi] + T.float32(1)
        ...     for i in range(16):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(16, i)
        ...             C[vi] = T.max(B[vi], T.float32(0))
        >>> sch = tir.Schedule(add_relu)
        >>> sch.reverse_compute_inline(sch.get_block("C"))
        >>> print(sch.mod["main"])
        @T.prim_func
        def add_relu(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
            T.func_attr({"global_symbol": "add_relu"})
            # with T.block("root"):
            for i in range(16):
                with T.block("B"):
                    vi = T.axis.remap("S", [i])
                    T.reads(A[vi])
                    T.writes(C[vi])
                    C[vi] = T.max(A[vi] + T.float32(1), T.float32(0))
        """
        func_name, realize, idx = self._resolve_block(block, "reverse_compute_inline")
        func = self._func(func_name)
        consumer = realize.block
        name = consumer.name_hint

        def fail(error, rule, *culprits):
            raise error("reverse_compute_inline",
                        f'cannot inline block "{name}" into its producer: {rule}',
                        func, culprits or (consumer,), func_name=func_name)

        scope = _scope_of(idx, realize, fail)
        if not is_spatial(consumer):
            fail(errors.NotCompleteBlockError,
                 "it is a reduction block; only a complete block can be inlined")
        store = _single_store(consumer, fail)
        problem = dataflow_violation(realize, scope)
        if problem:
            fail(*problem)
        siblings = child_blocks(scope)
        buffer = _single_intermediate(consumer, realize, siblings, fail)
        producers = [b for b in idx.producers(realize) if any(w.buffer is buffer for w in b.block.writes)]
        if len(producers) != 1:
            fail(errors.NotSingleWriterError,
                 f"buffer {buffer.name} has {len(producers)} producer blocks; it needs exactly one",
                 *[p.block for p in producers])
        producer_realize = producers[0]
        producer = producer_realize.block
        if not is_spatial(producer):
            fail(errors.NotCompleteBlockError,
                 f'its producer "{producer.name_hint}" is a reduction block (it has T.init and '
                 "reduce iterators), whose value is only final after the last reduction step; only "
                 "a complete producer can take the consumer in (decompose_reduction first)",
                 producer, consumer)
        p_store = _producer_store(producer, fail)
        if p_store.buffer is not buffer:
            fail(errors.BodyNotSingleStoreError,
                 f'the producer "{producer.name_hint}" does not store {buffer.name} in a single '
                 "statement", producer)
        for other in siblings:
            if other is not realize and other is not producer_realize and \
                    any(r.buffer is buffer for r in other.block.reads):
                fail(errors.NotSingleConsumerError,
                     f'block "{other.block.name_hint}" also reads {buffer.name}, which would no '
                     "longer be written", other.block)
        if not _allocates(scope, buffer):
            fail(errors.OutputBlockError,
                 f"buffer {buffer.name} is not allocated in the scope (an output of the function) "
                 "and would no longer be written")
        if not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value):
            fail(errors.NonTrivialPredicateError,
                 "it has a predicate (T.where), so it does not consume every element of "
                 f"{buffer.name}", consumer)
        loads = [load for load in loads_in(store) if load.buffer is buffer]
        if not loads:
            fail(errors.OpaqueAccessError, f"it reads {buffer.name} other than by loads", consumer)
        first = loads[0].indices
        if any(not _same_exprs(load.indices, first) for load in loads[1:]):
            fail(errors.InconsistentLoadIndicesError, f"it loads {buffer.name} at different indices",
                 store)
        inverse, why = invert(first, consumer.iter_vars)
        if inverse is None:
            fail(errors.IndicesNotIteratorsError,
                 f"its iterators cannot be read back from where it loads {buffer.name} "
                 f"({buffer.name}[{', '.join(str(i) for i in first)}]): {why}", store)
        if invert(store.indices, consumer.iter_vars)[0] is None:
            fail(errors.NonInjectiveStoreError,
                 f"its store {store.buffer.name}[{', '.join(str(i) for i in store.indices)}] is "
                 "not shown to write each element once, so running it in the producer's order "
                 "could change which write lands last", store)
        check_runs_whole_domain(idx, realize, fail)
        check_output_not_read_between(idx, siblings, realize, producer_realize, store.buffer, fail)

        mapping, conds = inverse.apply(p_store.indices)
        p_ranges = ranges_of(producer)
        problem = covers(mapping, consumer.iter_vars, p_ranges)
        if problem is None and loads_conditionally(store.value, buffer):
            problem = producer_writes_all(idx, producer_realize, p_store, first, consumer)
        if problem:
            fail(errors.ProducerNotCoverConsumerError,
                 f'its producer "{producer.name_hint}" does not write every element of '
                 f"{buffer.name} it may read: {problem}", producer, consumer)
        value = _LoadInliner(buffer, (), p_store.value).visit(substitute(store.value, mapping))
        new_store = S.BufferStore(store.buffer, value,
                                  tuple(substitute(i, mapping) for i in store.indices))
        pred = in_bound_predicate(consumer.iter_vars, mapping, conds, p_ranges)
        body = new_store
        if isinstance(producer.body, S.IfThenElse):
            guard = tidy(simplify(producer.body.condition, p_ranges))
            if is_true(pred):
                pred = producer.body.condition
            elif not structural_equal(pred, guard):
                pred = tidy(simplify(E.And(pred, producer.body.condition), p_ranges))
        if not is_true(pred):
            body = S.IfThenElse(pred, new_store)
        new_producer = producer_realize.replace(block=_with_regions(producer.replace(body=body)))
        body = StmtReplacer({id(producer_realize): new_producer}).visit(scope.block.body)
        new_func = _rebuild_scope(func, scope, remove_and_insert(body, remove=realize), buffer)
        _check_no_access_left(new_func, buffer, fail)
        self._update(func_name, new_func, "reverse_compute_inline")


# ----------------------------------------------------------------------------------------------
def _scope_of(idx, realize, fail):
    scope = idx.parent_block(realize)
    if scope is None:
        fail(errors.RootBlockError, "it is the root block")
    return scope


def _single_store(block: S.Block, fail) -> S.BufferStore:
    if block.init is not None:
        fail(errors.NotCompleteBlockError,
             f'block "{block.name_hint}" has an init (it is a reduction)', block)
    if not isinstance(block.body, S.BufferStore):
        what = "several statements" if isinstance(block.body, S.SeqStmt) else \
            f"a {type(block.body).__name__}"
        fail(errors.BodyNotSingleStoreError,
             f'the body of block "{block.name_hint}" is {what}, not a single store '
             "B[...] = value", block)
    return block.body


def _producer_store(block: S.Block, fail) -> S.BufferStore:
    """The producer's store: its body, or the body of its one ``if`` without ``else``."""
    body = block.body
    if block.init is None and isinstance(body, S.IfThenElse) and body.else_case is None \
            and isinstance(body.then_case, S.BufferStore):
        return body.then_case
    return _single_store(block, fail)


def _plain_iter_vars(indices, block: S.Block):
    """The iterators used as ``indices`` when each index is a distinct block iterator, else None."""
    found = []
    for i in indices:
        var = next((iv.var for iv in block.iter_vars if iv.var is i), None)
        if var is None or any(var is v for v in found):
            return None
        found.append(var)
    return found


def _allocates(scope, buffer) -> bool:
    return any(b is buffer for b in scope.block.alloc_buffers)


def _single_intermediate(consumer: S.Block, realize, siblings, fail):
    written = {}
    for other in siblings:
        if other is not realize:
            for w in other.block.writes:
                written[id(w.buffer)] = w.buffer
    found = []
    for r in consumer.reads:
        if id(r.buffer) in written and all(r.buffer is not b for b in found):
            found.append(r.buffer)
    if len(found) != 1:
        names = ", ".join(b.name for b in found) or "none"
        fail(errors.NotSingleIntermediateError,
             f"it must read exactly one buffer written by another block of its scope, but reads "
             f"{len(found)} ({names})")
    return found[0]


def _same_exprs(a, b) -> bool:
    return len(a) == len(b) and all(structural_equal(simplify(x), simplify(y)) for x, y in zip(a, b))


class _LoadInliner(StmtExprMutator):
    """Replaces every load of ``buffer`` by ``value`` with ``index_vars`` set to the load's
    indices (or, given an Inverse, with the iterators it reads back from them), and recomputes the access regions of every block it changes."""

    def __init__(self, buffer, index_vars, value, inverse=None):
        super().__init__()
        self.buffer, self.index_vars, self.value = buffer, index_vars, value
        self.inverse = inverse

    def visit_BufferLoad(self, load):
        load = self.generic_visit(load)
        if load.buffer is not self.buffer:
            return load
        if self.inverse is not None:
            return substitute(self.value, self.inverse.apply(load.indices)[0])
        return substitute(self.value, dict(zip(self.index_vars, load.indices)))

    def visit_Call(self, call):
        if call.op == "buffer_data":   # A.data names the whole buffer, it loads nothing: the
            return call                # access stays (and _check_no_access_left refuses it)
        return self.generic_visit(call)

    def visit_Block(self, block):
        new = self.generic_visit(block)
        if new is block:
            return new
        return _with_regions(new)


def _with_regions(block: S.Block) -> S.Block:
    reads, writes = block_access_regions(block)
    return block.replace(reads=reads, writes=writes)


def _rebuild_scope(func, scope, body, buffer):
    """``func`` with the scope block's body replaced and its allocation of ``buffer`` dropped;
    the scope keeps its T.reads/T.writes (its inputs and outputs do not change)."""
    if body is None:
        body = S.Evaluate(E.const(0))
    kept = tuple(b for b in scope.block.alloc_buffers if b is not buffer)
    new_scope = scope.replace(block=scope.block.replace(body=body, alloc_buffers=kept))
    return replace_stmts(func, {id(scope): new_scope})


class _BufferUse(StmtExprVisitor):
    def __init__(self, buffer):
        self.buffer, self.users = buffer, []
        self.current = None

    def visit_Block(self, block):
        outer, self.current = self.current, block
        for field in (block.reads, block.writes, block.match_buffers, block.init, block.body):
            self.visit(field)
        self.current = outer

    def visit_Buffer(self, buffer):
        if buffer is self.buffer and self.current is not None:
            self.users.append(self.current)


def _check_no_access_left(func, buffer, fail) -> None:
    use = _BufferUse(buffer)
    use.visit(func.body)
    if use.users:
        names = ", ".join(f'"{b.name_hint}"' for b in use.users)
        fail(errors.OpaqueAccessError,
             f"block {names} still accesses {buffer.name} other than by loads (e.g. through "
             "match_buffer or a declared region), so it cannot be inlined", use.users[0])
