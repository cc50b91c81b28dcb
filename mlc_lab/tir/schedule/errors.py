"""Schedule errors: one class per broken rule. Each message names the primitive, the loop or block,
the rule, and shows the function with the culprit underlined."""
from __future__ import annotations

import contextlib
import contextvars

from ...ir.errors import TVMError
from ...ir.node import printer

RENDER_LEVELS = ("detail", "fast", "none")
_render_level = contextvars.ContextVar("schedule_error_render_level", default="detail")


@contextlib.contextmanager
def render_level(level: str):
    """Errors raised inside render at ``level`` (``tir.Schedule(error_render_level=...)``):
    "detail" names the rule and prints the function with the culprit underlined, "fast" gives the
    error class's one-line summary without printing anything, "none" says "(not rendered)"."""
    if level not in RENDER_LEVELS:
        raise ValueError(f'error_render_level can be "detail", "fast", or "none", got {level!r}')
    token = _render_level.set(level)
    try:
        yield
    finally:
        _render_level.reset(token)


class ScheduleError(TVMError):
    """Base class of every error a schedule primitive raises on misuse (a ``TVMError``, as in
    the reference compiler)."""

    def __init__(self, primitive: str, rule: str, func=None, culprits=(), func_name: str | None = None):
        self.primitive, self.rule, self.func, self.culprits = primitive, rule, func, tuple(culprits)
        self.func_name = func_name
        super().__init__(self._format(_render_level.get()))

    def _format(self, level: str = "detail") -> str:
        head = f"{type(self).__name__} in sch.{self.primitive}: "
        if level == "none":
            return head + "(not rendered)"
        if level == "fast":
            return head + " ".join((type(self).__doc__ or "").strip().split("\n\n")[0].split())
        text = head + self.rule
        if self.func is not None:
            shown = printer().script(self.func, underline=self.culprits, name=self.func_name)
            text += "\n" + "\n".join("    " + line for line in shown.splitlines())
        return text


class InvalidHandleError(ScheduleError):
    """A BlockRV/LoopRV no longer names anything (e.g. the loop was split or fused away)."""


class UnknownHandleError(InvalidHandleError, IndexError):
    """The handle is not one of this schedule's: made by another schedule (or by a copy after
    the copy was made), removed with sch.remove_rv, or a BlockRV()/LoopRV() that no instruction
    bound. An IndexError too, as the reference compiler's symbol-table miss is."""


class BlockNotFoundError(ScheduleError):
    """Cannot find a block with the specified name."""


class UnknownFunctionError(BlockNotFoundError, ValueError):
    """The schedule does not know which function to be working on: the module has several
    functions and none is called "main" (call sch.work_on(func_name), or pass func_name)."""


class NumericsChangedError(ScheduleError):
    """check_numerics=True found that a step changed the program's results."""


class InvalidDecisionError(ScheduleError):
    """A decision given for a sampling instruction (e.g. by trace replay) does not fit."""


class AnnotationNotFoundError(ScheduleError):
    """unannotate: the block or loop has no annotation with that key."""


# -- the families: each primitive's errors derive from its family's class, so ``except
# InlineError`` catches every reason compute_inline can refuse. A rule shared by several families
# derives from each of them.

class FactorError(ScheduleError):
    """split/sample_perfect_tile factors are malformed or do not fit the loop."""


class NotAdjacentError(ScheduleError):
    """fuse: the loops are not directly nested one inside the other."""


class LoopsNotChainError(ScheduleError):
    """reorder: the loops are not one chain of single-child nested loops."""


class WrongLoopKindError(ScheduleError):
    """The loop's kind or binding does not allow this (e.g. parallelising a reduction loop)."""


class ComputeAtError(ScheduleError):
    """compute_at/reverse_compute_at cannot move the block under the given loop."""


class InlineError(ScheduleError):
    """The block cannot be inlined into its consumers/producer."""


class CacheError(ScheduleError):
    """cache_read/cache_write/set_scope got a buffer or scope that does not apply."""


class LayoutError(ScheduleError):
    """transform_layout got an index map or buffer that does not fit."""


class RFactorError(ScheduleError):
    """rfactor cannot factor the reduction over the given loop."""


class BlockizeError(ScheduleError):
    """blockize/tensorize cannot wrap the subtree under the loop in an outer block."""


# -- loops: split, fuse, reorder ----------------------------------------------------------------

class NonPositiveFactorError(FactorError):
    """split: a factor is neither a positive int nor None."""


class TooManyInferredFactorsError(FactorError):
    """split: more than one factor is None; only one can be inferred."""


class WrongFactorProductError(FactorError):
    """split: the factors multiply to less than the loop's extent, so iterations would be lost."""


class SymbolicExtentError(FactorError, WrongLoopKindError):
    """The loop's extent is symbolic where the primitive needs a constant (split with an inferred
    factor, sample_perfect_tile, vectorize)."""


class LoopNotStartingAtZeroError(ScheduleError):
    """fuse: a loop does not start at 0."""


class NotOnlyChildError(NotAdjacentError, LoopsNotChainError):
    """A loop is not the only statement in the body of the loop above it (fuse, reorder)."""


class DuplicateLoopError(LoopsNotChainError):
    """reorder: a loop is given more than once."""


class DependentLoopError(LoopsNotChainError, NotAdjacentError):
    """reorder/fuse: the range of a loop of the chain depends on another loop of the chain."""


class AnnotatedLoopError(FactorError, NotAdjacentError):
    """split/fuse: the loop carries annotations (pragmas, unroll hints), which would be dropped:
    they are not defined for the new loops. Split or fuse first, then annotate."""


class LoopNotAncestorError(ScheduleError):
    """A loop is not an ancestor of the block (or of the loops) it must enclose."""


class MixedIterTypeLoopError(ScheduleError):
    """A loop that feeds both spatial and reduce iterators of a reduction block cannot be moved
    (reorder) or factored (rfactor): the block's init would no longer precede its updates."""


# -- loop kinds: parallel, vectorize, unroll, bind ------------------------------------------------

class ThreadBoundLoopError(WrongLoopKindError):
    """The loop is already bound to a thread axis (fuse and re-kinding need an unbound loop)."""


class WrongBlockIterTypeError(WrongLoopKindError, ComputeAtError):
    """parallel/vectorize/bind: the loop feeds a reduce iterator of a block under it;
    compute_at/reverse_compute_at: the block would take a reduce iterator from such a loop."""


class NestedParallelError(WrongLoopKindError):
    """A parallel loop would enclose or sit inside another parallel loop."""


class NotAffineBindingError(RFactorError, WrongLoopKindError, LoopsNotChainError):
    """rfactor/parallel/vectorize/bind/reorder: a block under the loops binds an iterator to an
    expression that is not affine in them (a dense sum of constant multiples of loop variables
    and of their ``// c`` and ``% c``), or its T.where bounds none of its bindings, so its
    iterations cannot be regrouped, reordered or run side by side."""


class NotCompactDataflowError(ScheduleError):
    """The subtree under a loop is not a compact dataflow (a block there is not its buffers'
    only writer, e.g. after decompose_reduction), so it cannot be parallelised/vectorised/bound."""


class ThreadBindingError(ScheduleError):
    """bind: an unknown thread axis."""


# -- block classification, shared by compute_at, inlining and caching --------------------------

class RootBlockError(ComputeAtError, InlineError):
    """The root block cannot be moved or inlined; only blocks inside it."""


class NotSingleWriterError(ComputeAtError, InlineError, CacheError):
    """Another block of the scope also writes a buffer the block writes."""


class NotCompleteOrReductionBlockError(ComputeAtError, InlineError, CacheError):
    """The block reads a buffer it writes without being a reduction (init + reduce iterators),
    or has reduce iterators but no init."""


class NotCompleteBlockError(InlineError):
    """Inlining needs a complete block (spatial iterators, no init); the block or its producer is
    a reduction."""


class OutputBlockError(ComputeAtError, InlineError):
    """The block writes a buffer that is not allocated in its scope (an output of the function), so
    it cannot be moved under a consumer's loop or inlined away."""


# -- compute_at / reverse_compute_at ------------------------------------------------------------

class NotInSameScopeError(ComputeAtError):
    """The loop and the block are not in the same block scope (or the same function)."""


class LoopInsideBlockError(ComputeAtError):
    """The loop lies inside the block; a block cannot move under its own loop."""


class LoopEnclosesBlockError(ComputeAtError):
    """The loop already encloses the block."""


class NotAllRequiredBlocksVisitedError(ComputeAtError):
    """The loop does not enclose every consumer (compute_at) or producer (reverse_compute_at)."""


class ConsumerBeforeLoopError(ComputeAtError):
    """reverse_compute_at: a consumer left outside the loop runs before it."""


class ProducerAfterConsumerError(ComputeAtError):
    """Under the loop, a producer of the block does not come before its consumers."""


class InvalidIndexError(ComputeAtError):
    """The index does not lie after the producers and before the consumers in the loop body."""


class ReductionNotFinishedError(ComputeAtError):
    """reverse_compute_at: a reduction producer does not run its whole reduction inside the loop."""


class RegionNotCoverableError(ComputeAtError):
    """reverse_compute_at: the block reads a window of a produced buffer per iteration, so no set
    of its iterations consumes exactly what the producers under the loop write."""


class NoDependenceUnderLoopError(ComputeAtError):
    """compute_at's block has no consumer under the loop (reverse_compute_at's: no producer), so
    nothing there decides which of its iterations to run: it would run them all each time."""


class UncoveredIterationsError(ComputeAtError):
    """reverse_compute_at: the producers under the loop feed only part of the block's iterations
    (e.g. not the border of a padding stage), so the others would never run."""


class PredicateNotInIteratorsError(ComputeAtError):
    """compute_at/reverse_compute_at: the block's own T.where uses a loop it leaves in a way that
    cannot be rewritten in its iterators, so the moved block could not skip the same iterations."""


# -- compute_inline / reverse_compute_inline ----------------------------------------------------

class BodyNotSingleStoreError(InlineError):
    """The body of the block (or of its producer) is not a single store ``B[...] = value``."""


class IndicesNotIteratorsError(InlineError):
    """The intermediate buffer is not accessed at distinct block iterators (stored at them by
    compute_inline's block, loaded at all of them by reverse_compute_inline's)."""


class ValueUsesOtherIteratorError(InlineError):
    """compute_inline: the stored value uses an iterator that is not an index of the buffer."""


class OpaqueAccessError(InlineError):
    """A block still accesses the buffer other than through loads (match_buffer, a region)."""


class NotSingleIntermediateError(InlineError):
    """reverse_compute_inline: the block does not read exactly one buffer another block writes."""


class NotSingleConsumerError(InlineError):
    """reverse_compute_inline: another block also reads the intermediate buffer."""


class NonTrivialPredicateError(InlineError):
    """reverse_compute_inline: the block has a T.where, so it skips elements."""


class InconsistentLoadIndicesError(InlineError):
    """reverse_compute_inline: the block loads the intermediate at different indices."""


class PartialConsumerError(InlineError):
    """reverse_compute_inline: the block's loops are not shown to run every point of its
    iteration domain exactly once (the folded block runs on the whole domain)."""


class ProducerNotCoverConsumerError(InlineError):
    """reverse_compute_inline: the producer does not write every element the block may read."""


class NonInjectiveStoreError(InlineError):
    """reverse_compute_inline: the block's store is not shown to write each element once, so
    running it in the producer's order could change which write lands last."""


class InputWrittenBetweenError(InlineError):
    """compute_inline: a buffer the block reads is written again before a consumer runs, so the
    inlined value would read other contents."""


class OutputReadBetweenError(InlineError):
    """reverse_compute_inline: the block's output is read (by the producer, or by a block
    placed before the block) before the block writes it."""


# -- cache_read / cache_write / set_scope / transform_layout ------------------------------------

class BufferIndexOutOfRangeError(CacheError, LayoutError):
    """The read/write buffer index is not one of the block's read/write regions."""


class UnknownStorageScopeError(CacheError):
    """The storage scope is not one of the known scopes."""


class BufferWrittenByBlockError(CacheError):
    """cache_read: the block also writes the buffer it should read through a cache."""


class ParameterBufferError(CacheError):
    """set_scope: the buffer is a parameter of the function, not an alloc_buffer."""


class ConsumerBlockError(CacheError):
    """cache_read/cache_write: a block of ``consumer_blocks`` is not in the scope of the cached
    block, does not read the buffer, or sits where one copy cannot serve it."""


class BufferNotAccessedError(LayoutError, CacheError):
    """transform_layout, cache_read, cache_write, set_scope: the block does not access that
    buffer (given by name or as a Buffer) the way the primitive needs."""


class NotParamOrAllocError(LayoutError):
    """transform_layout: the buffer is neither a parameter nor an alloc_buffer (e.g. a
    match_buffer view)."""


class NonCompactBufferError(LayoutError):
    """transform_layout: the buffer has explicit strides."""


class IndexMapArityError(LayoutError):
    """transform_layout: the index map takes a different number of arguments than the buffer has
    dimensions (reindex_cache_read/write: than the block has iterators)."""


class NegativeIndexError(LayoutError):
    """transform_layout: the index map can give a negative index."""


class UnboundedIndexError(LayoutError):
    """transform_layout: an output of the index map cannot be bounded over the buffer's shape."""


class NotInjectiveError(LayoutError):
    """transform_layout: the index map sends two elements to the same place."""


class TransformationPaddingError(LayoutError):
    """transform_layout: the index map leaves places of a parameter's new shape that no element
    reaches (padding), which nothing would write and the caller would see."""


class BufferHasViewsError(LayoutError):
    """transform_layout: the buffer is the source of a match_buffer view."""


class PadValueArityError(LayoutError):
    """transform_layout: the pad_value map gives more (or fewer) than one value per place."""


class PadValueTypeError(LayoutError):
    """transform_layout: pad_value is not of the buffer's dtype."""


class PadValueLoadError(LayoutError):
    """transform_layout: pad_value reads a buffer; it may use only the new indices."""


class PaddingNotAnalyzableError(LayoutError):
    """transform_layout: the index map pads the buffer, but it is not a split/fuse map whose
    unused places can be located, so pad_value cannot be written there."""


class BlockLayoutArityError(LayoutError):
    """transform_block_layout: the index map takes a different number of indices than the block
    has iterators."""


class BlockLayoutLoopsError(LayoutError):
    """transform_block_layout: the block is not alone under loops from 0 that bind its
    iterators one to one (loop variables as bindings, no predicate)."""


class NotBijectiveAffineMapError(LayoutError):
    """transform_block_layout: the index map is not a split/fuse map that is one-to-one and onto
    its output shape over the block's iteration domain."""


class MixedIterTypeError(LayoutError):
    """transform_block_layout: a new iterator combines spatial and reduction iterators."""


class IndexMapNameError(LayoutError):
    """transform_layout, transform_block_layout: the index map (or pad value) uses a name that
    is neither one of its arguments nor a parameter of the function, so it cannot be recorded
    and replayed."""


# -- reindex / reindex_cache_read / reindex_cache_write / cache_index ----------------------------

class ReindexError(ScheduleError):
    """reindex, reindex_cache_read, reindex_cache_write or cache_index refused the block."""


class NotLeafBlockError(ReindexError):
    """The block holds other blocks; the primitive rewrites the accesses of a leaf block only."""


class NoBufferAccessError(ReindexError):
    """The block lists the buffer in its regions but never loads or stores it."""


class NonUniqueAccessError(ReindexError):
    """The block accesses the buffer at different indices (``A[vi, vj]`` and ``A[vj, vi]``), so
    no single copy indexed by its iterators can stand for the buffer."""


class OpaqueBufferAccessError(ReindexError):
    """The block uses the buffer opaquely (its address, a match_buffer view), not only through
    loads and stores."""


class NotLoopChainError(ReindexError):
    """reindex: the block is not alone in a chain of loops under its enclosing block, so there is
    no place for the copy stage right next to its loop nest."""


class ReindexWritesReadBufferError(ReindexError):
    """A read of the buffer is redirected to a copy, but the block also writes the buffer: its
    writes would land in the copy and be lost."""


class ReindexReadsWrittenBufferError(ReindexError):
    """A write of the buffer is redirected to a copy, but the block also reads the buffer without
    being a reduction whose T.init writes it first: it would read the copy before anything was
    stored there."""


class ReindexOutOfBoundsError(ReindexError):
    """The copy stage runs over the block's whole iterator domain, where the buffer's indices may
    leave the buffer (the block guards the access, or its domain is larger than the buffer)."""


class PartialWriteError(ReindexError):
    """The copy back writes every point of the block's iterator domain, but the block may not
    write every point (a T.where, a store under a condition, bindings that skip values)."""


class NotSinglePointAccessError(ReindexError):
    """reindex_cache_read/write: the block reads (or writes) more than one element of the buffer
    per iteration, or loads it at indices other than its region."""


class IndexMapNotMatchError(ReindexError):
    """reindex_cache_read/write: the block iterators the index map uses differ from those the
    buffer's indices use."""


class IndexMapNotInjectiveError(ReindexError):
    """reindex_cache_read/write: the index map may send two iterations of the block to one element
    of the cache (or cannot be shown not to), so one would overwrite the other."""


class StageSiteError(ReindexError):
    """reindex_cache_read/write: the block shares its innermost loop body with another block that
    writes (or uses) the buffer, so no place separates the copy from it."""


# -- decompose_reduction / rfactor --------------------------------------------------------------

class NotReductionBlockError(ScheduleError):
    """The primitive needs a reduction block (one with reduce iterators and an init)."""


class LoopHeightError(ScheduleError):
    """decompose_reduction's loop lies inside a loop that a reduce iterator of the block uses,
    so the init would run more than once per output element."""


class RepeatedIterationError(ScheduleError):
    """The loops between the place and a block visit some of its iterations more than once, so
    hoisting its init there would make its update accumulate again."""


class LoopHoldsOtherBlocksError(RFactorError):
    """rfactor: the loop, or an outer loop feeding the reduction, holds blocks other than the
    reduction block."""


class NotSingleReduceIterError(RFactorError):
    """rfactor: the loop feeds a spatial iterator of the block, or no iterator at all while it
    runs more than once (it may feed one or several reduce iterators)."""


class ReducerNotRecognizedError(RFactorError):
    """rfactor: the block's init and update are not a known reducer: ``x = x op e`` (op one of +,
    *, max, min) with op's identity as init, for one output or several, or an argmax/argmin pair
    whose new values are computed in LetStmts before being stored."""


class NotStagePipelineError(RFactorError):
    """rfactor: a block of the scope reads a part of the reduction's output that the reduction
    does not write (the scope is not a stage pipeline)."""


class NotSerialLoopError(RFactorError):
    """rfactor: a loop feeding the reduction is parallel, vectorized or bound to a thread."""


class PredicateNotFactorableError(RFactorError):
    """rfactor: the block's T.where constrains the factored loops in a way the write-back block
    cannot be given."""


class FactorAxisOutOfRangeError(RFactorError):
    """rfactor: factor_axis is not a dimension of the rfactor buffer."""


# -- blockize / tensorize -----------------------------------------------------------------------

class BlockizePredicateError(BlockizeError):
    """blockize: the block's T.where cannot be divided between the outer and the inner block (it
    uses an outer loop no iterator is bound to, or mixes spatial and reduce iterators in a way
    the outer init cannot keep)."""


class NotSingleBlockChainError(BlockizeError):
    """Under the loop there is not a chain of loops ending in a single block."""


class NotDivisibleError(BlockizeError):
    """A binding of the block does not divide into an outer part and an inner part using only the
    loops under the blockized loop (``outer * c + inner``)."""


class TensorizeError(ScheduleError):
    """The block or loop does not match the tensor intrinsic's description."""


class UnknownTensorIntrinError(TensorizeError):
    """tensorize was given a name no TensorIntrin is registered under."""


# -- merge --------------------------------------------------------------------------------------

class MergeError(ScheduleError):
    """merge cannot fuse the given loop nests into one."""


class MergeTooFewLoopsError(MergeError):
    """merge: fewer than two distinct loops were given."""


class MergeDifferentScopeError(MergeError):
    """merge: the loops are not under the same block (one scope)."""


class MergeNotSiblingsError(MergeError):
    """merge: the outermost loops of the nests are not statements of one sequence, or one loop
    encloses another."""


class MergeDepthMismatchError(MergeError):
    """merge: the nests from the common ancestor down to the given loops have different depths."""


class MergeExtentMismatchError(MergeError):
    """merge: loops merged together have different extents."""


class MergeNotOnlyChildError(MergeError, NotOnlyChildError):
    """merge: a loop of a nest is not the only statement of the loop around it."""


class MergeLoopNotStartingAtZeroError(MergeError, LoopNotStartingAtZeroError):
    """merge: a loop of a nest does not start at 0."""


class MergeAnnotatedLoopError(MergeError):
    """merge: a loop of a nest is bound to a thread or carries annotations."""


class MergeDependenceError(MergeError):
    """merge: interleaving the nests (or moving the statements between them) would reorder
    accesses to a buffer one of them writes."""


# -- rolling_buffer -----------------------------------------------------------------------------

class RollingBufferError(ScheduleError):
    """rolling_buffer cannot turn the written buffer into a circular one."""


class RollingBufferNotAllocatedError(RollingBufferError):
    """rolling_buffer: the buffer is not allocated in the block's scope (a parameter, or a buffer
    of another scope)."""


class RollingBufferDependencyError(RollingBufferError):
    """rolling_buffer: the buffer has other writers, or the block has dependencies other than
    read-after-write ones."""


class RollingBufferInsertionError(RollingBufferError):
    """rolling_buffer: the lowest common ancestor of the block and its consumers is not a loop
    (the block must be computed at a loop of its consumer first)."""


class RollingBufferMatchError(RollingBufferError):
    """rolling_buffer: no dimension of the region written per iteration has the rolling form
    (loop * stride + tile, overlapping the previous iteration's tile)."""


class RollingBufferUnsafeError(RollingBufferError):
    """rolling_buffer: the circular buffer could not be proven to compute what the full buffer
    computes (accesses outside the current window, loops other than serial ones between the
    rolling loop and the blocks, or a block iterator that does not follow the buffer axis)."""


# -- buffer attributes: storage_align, set_axis_separator, unsafe_set_dtype; add_unit_loop -------

class BufferAttrError(ScheduleError):
    """storage_align/set_axis_separator/unsafe_set_dtype cannot change the buffer's attribute."""


class NotAllocatedBufferError(BufferAttrError):
    """The buffer is not allocated by a block (it is a function parameter or a match_buffer
    view); only an alloc_buffer's storage can be aligned or retyped."""


class StorageAlignFactorError(BufferAttrError):
    """storage_align: the factor is not a positive integer."""


class StorageAlignOffsetError(BufferAttrError):
    """storage_align: the offset is not in 0 .. factor - 1, so no stride can leave it as the
    remainder of a division by the factor."""


class StorageAlignAxisError(BufferAttrError):
    """storage_align: the axis is outside [-ndim, ndim) of the buffer."""


class StorageAlignAnnotationError(BufferAttrError):
    """storage_align: the block's existing "buffer_dim_align" annotation is not a list of
    [buffer_index, axis, factor, offset] integer quadruples."""


class StridedBufferError(BufferAttrError):
    """The buffer declares explicit strides; its layout is fixed and cannot be aligned or split
    into physical axes."""


class SubregionBufferError(BufferAttrError):
    """set_axis_separator: the buffer is a match_buffer view of part of another buffer; set the
    separators of the buffer it views instead."""


class AxisSeparatorsError(BufferAttrError):
    """set_axis_separator: the separators are not strictly increasing axes in 1 .. ndim - 1."""


class AccessIndexOutOfRangeError(BufferIndexOutOfRangeError, AssertionError):
    """A ("read", n) or ("write", n) buffer is out of range of the block's regions (an
    AssertionError too, as the reference compiler's argument check is)."""


class InvalidDTypeError(BufferAttrError):
    """unsafe_set_dtype: the dtype is not a scalar dtype such as "float16"."""


class OpaqueBufferUseError(BufferAttrError):
    """unsafe_set_dtype: the buffer's storage is handed out whole (``B.data``,
    ``B.access_ptr``), so its elements cannot be converted at each load and store."""


class UnitLoopAboveRootError(ScheduleError):
    """add_unit_loop: the root block has no parent to hold a loop above it."""


# -- decompose_padding --------------------------------------------------------------------------

class DecomposePaddingError(ScheduleError):
    """decompose_padding cannot split the padding block into a constant fill and an in-bound
    copy."""


class PaddingPatternError(DecomposePaddingError):
    """decompose_padding: the block's body is not one store of
    ``T.if_then_else(condition, value, constant)``."""


class PaddingConditionError(DecomposePaddingError):
    """decompose_padding: the padding condition is not a conjunction of constant bounds on the
    block's iterators."""


class PaddingTrivialError(DecomposePaddingError):
    """decompose_padding: the padding condition holds for every iteration (nothing to pad)."""


class PaddingEmptyError(DecomposePaddingError):
    """decompose_padding: the padding condition holds for no iteration (no in-bound part)."""


class PaddingStoreIndicesError(DecomposePaddingError):
    """decompose_padding: the block is not complete (spatial iterators only) or does not store
    at each of its iterators exactly once."""


class PaddingLoopNotAncestorError(DecomposePaddingError, LoopNotAncestorError):
    """decompose_padding: the loop is not an ancestor of the block."""


class PaddingNotSingleWriterError(DecomposePaddingError):
    """decompose_padding: another block of the scope writes the padded buffer."""


class PaddingObservedError(DecomposePaddingError):
    """decompose_padding: another block under the loop accesses the padded buffer, so it could see
    the constant fill before the in-bound values are written back."""


# -- pad_einsum ---------------------------------------------------------------------------------

class PadEinsumError(ScheduleError):
    """pad_einsum cannot pad the block's iteration space."""


class PadEinsumFactorError(PadEinsumError):
    """pad_einsum: the padding list does not give one positive int per block iterator."""


class PadEinsumNotEinsumError(PadEinsumError):
    """pad_einsum: the block is not an einsum: one store, every buffer accessed at plain
    iterators (each dimension of a buffer always by the same iterator), no predicate, no inner
    blocks."""


class PadEinsumLoopsError(PadEinsumError):
    """pad_einsum: the block's loops are not one chain of loops, each from 0 over the whole
    domain of one iterator."""


class PadEinsumReductionError(PadEinsumError):
    """pad_einsum: a padded reduction iterator would add terms the update cannot be shown to
    ignore (the update must be ``out + product`` with a factor read from a buffer padded with
    zeros along that iterator)."""


class PadEinsumOutputReadError(PadEinsumError):
    """pad_einsum: the block reads its output without initialising it (the padded copy starts
    uninitialised)."""


class PadEinsumNothingError(PadEinsumError):
    """pad_einsum: no iterator's extent changes with the given padding."""


# -- read_at / write_at -------------------------------------------------------------------------

class ReadWriteAtError(ScheduleError):
    """read_at/write_at cannot stage the buffer through a copy at the loop."""


class ReadWriteAtLoopNotAncestorError(ReadWriteAtError, LoopNotAncestorError):
    """read_at/write_at: the loop is not an ancestor of the block."""


class ReadWriteAtRegionError(ReadWriteAtError):
    """read_at/write_at: the region the block touches per iteration of the loop has no constant
    extent or may leave the buffer."""


class ReadAtWrittenUnderLoopError(ReadWriteAtError):
    """read_at: a block under the loop writes the buffer, so a copy made at the loop's start
    could be stale."""


class WriteAtOtherAccessError(ReadWriteAtError):
    """write_at: another block of the scope accesses the buffer, so it could see values before
    they are copied back."""


class WriteAtReadWithoutInitError(ReadWriteAtError):
    """write_at: the block reads the buffer without initialising it (the staging copy starts
    uninitialised)."""


class WriteAtCoverageError(ReadWriteAtError):
    """write_at: the copied-back region is not shown to be exactly what the block writes under the
    loop (each dimension ``outer * c + dense inner loops``), so stale elements could be copied
    back last."""


__all__ = sorted(name for name, value in dict(globals()).items()
                 if isinstance(value, type) and issubclass(value, ScheduleError))
