"""Inlining: compute_inline (fold a producer's expression into its consumers) and
reverse_compute_inline (fold a consumer's expression into its producer)."""
from __future__ import annotations

from ....arith import simplify
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


class InlinePrimitives:

    @instruction
    def compute_inline(self, block) -> None:
        """Inline a block into its consumers: every load of the buffer it writes is replaced by
        the expression it stores, and the block (with the loops it leaves empty) and the buffer's
        allocation disappear. The consumers' T.reads are recomputed.

        Requires: the block is a complete block (only spatial iterators, no init, the only
        writer of its buffer); its body is a single store ``B[v0, v1, ...] = expr`` whose indices
        are distinct block iterators and ``expr`` uses no other iterator; ``B`` is allocated in
        the block's scope (it is not an output of the function); every consumer reads ``B``
        through loads (not through match_buffer or opaque regions).

        Parameters: block (BlockRV).
        Raises (all InlineError): NotCompleteBlockError, BodyNotSingleStoreError,
        NotSingleWriterError, NotCompleteOrReductionBlockError, IndicesNotIteratorsError,
        ValueUsesOtherIteratorError, OutputBlockError, OpaqueAccessError.

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
        if index_vars is None:
            fail(errors.IndicesNotIteratorsError,
                 f"the store indices of {buffer.name} are not distinct block iterators (they are "
                 f"{', '.join(str(i) for i in store.indices)}), so loads cannot be mapped back to "
                 "iterations", store)
        others = [iv.var for iv in producer.iter_vars if all(iv.var is not v for v in index_vars)]
        if any(uses_var(store.value, v) for v in others):
            fail(errors.ValueUsesOtherIteratorError,
                 f"the stored value uses a block iterator that is not an index of {buffer.name}",
                 store)
        if not _allocates(scope, buffer):
            fail(errors.OutputBlockError,
                 f"it writes {buffer.name}, which is not allocated in its scope (an output of the "
                 "function); an output block cannot be inlined")

        body = _LoadInliner(buffer, index_vars, store.value).visit(scope.block.body)
        new_func = _rebuild_scope(func, scope, remove_and_insert(body, remove=realize), buffer)
        _check_no_access_left(new_func, buffer, fail)
        self._update(func_name, new_func, "compute_inline")

    @instruction
    def reverse_compute_inline(self, block) -> None:
        """Inline a block into its only producer: the producer stores the consumer's expression
        of the value it computed straight into the consumer's output, and the consumer (with the
        loops it leaves empty) and the intermediate buffer disappear.

        Requires: the block is a complete block whose body is a single store; it reads exactly
        one buffer written in its scope (the intermediate), loading it everywhere at the same
        indices, which are its iterators, each once, covering the whole buffer; it has no
        predicate and no other block reads the intermediate; the producer is a complete block
        (not a reduction) whose body is a single store to the intermediate, which is allocated in
        the scope.

        Parameters: block (BlockRV).
        Raises (all InlineError): NotCompleteBlockError, BodyNotSingleStoreError,
        NotSingleWriterError, NotCompleteOrReductionBlockError, NotSingleIntermediateError,
        NotSingleConsumerError, OutputBlockError, NonTrivialPredicateError,
        InconsistentLoadIndicesError, IndicesNotIteratorsError, PartialConsumerError,
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
        p_store = _single_store(producer, fail)
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
        first = loads[0].indices
        if any(not _same_exprs(load.indices, first) for load in loads[1:]):
            fail(errors.InconsistentLoadIndicesError, f"it loads {buffer.name} at different indices",
                 store)
        index_vars = _plain_iter_vars(first, consumer)
        if index_vars is None or len(index_vars) != len(consumer.iter_vars):
            fail(errors.IndicesNotIteratorsError,
                 f"it does not load {buffer.name} at its block iterators, each used once "
                 f"({buffer.name}[{', '.join(str(i) for i in first)}])", store)
        for var, dim in zip(index_vars, buffer.shape):
            iv = next(iv for iv in consumer.iter_vars if iv.var is var)
            if not (_is_zero(iv.dom.min) and _same_exprs((iv.dom.extent,), (dim,))):
                fail(errors.PartialConsumerError,
                     f"iterator {var.name} covers [{iv.dom.min}, {iv.dom.min} + {iv.dom.extent}) but "
                     f"{buffer.name} has extent {dim} there; the consumer must read all of it",
                     consumer)

        mapping = dict(zip(index_vars, p_store.indices))
        value = _LoadInliner(buffer, (), p_store.value).visit(substitute(store.value, mapping))
        new_store = S.BufferStore(store.buffer, value,
                                  tuple(substitute(i, mapping) for i in store.indices))
        new_producer = producer_realize.replace(block=_with_regions(producer.replace(body=new_store)))
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
    from ....ir import structural_equal
    return len(a) == len(b) and all(structural_equal(simplify(x), simplify(y)) for x, y in zip(a, b))


def _is_zero(e) -> bool:
    e = simplify(e)
    return isinstance(e, E.IntImm) and e.value == 0


class _LoadInliner(StmtExprMutator):
    """Replaces every load of ``buffer`` by ``value`` with ``index_vars`` set to the load's
    indices, and recomputes the access regions of every block it changes."""

    def __init__(self, buffer, index_vars, value):
        super().__init__()
        self.buffer, self.index_vars, self.value = buffer, index_vars, value

    def visit_BufferLoad(self, load):
        load = self.generic_visit(load)
        if load.buffer is not self.buffer:
            return load
        return substitute(self.value, dict(zip(self.index_vars, load.indices)))

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
