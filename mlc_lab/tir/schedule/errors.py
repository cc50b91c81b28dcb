"""Schedule errors: one class per broken rule. Each message names the primitive, the loop or block,
the rule, and shows the function with the culprit underlined."""
from __future__ import annotations


class ScheduleError(Exception):
    """Base class of every error a schedule primitive raises on misuse."""

    def __init__(self, primitive: str, rule: str, func=None, culprits=(), func_name: str | None = None):
        self.primitive, self.rule, self.func, self.culprits = primitive, rule, func, tuple(culprits)
        self.func_name = func_name
        super().__init__(self._format())

    def _format(self) -> str:
        text = f"{type(self).__name__} in sch.{self.primitive}: {self.rule}"
        if self.func is not None:
            from ...script.printer import script
            shown = script(self.func, underline=self.culprits, name=self.func_name)
            text += "\n" + "\n".join("    " + line for line in shown.splitlines())
        return text


class InvalidHandleError(ScheduleError):
    """A BlockRV/LoopRV no longer names anything (e.g. the loop was split or fused away)."""


class BlockNotFoundError(ScheduleError):
    """No block with the requested name."""


class FactorError(ScheduleError):
    """split factors are malformed or do not multiply to the loop extent."""


class WrongFactorProductError(FactorError):
    """split factors without a None cover fewer (or, for a constant extent, other) iterations than
    the loop has."""


class NotDivisibleError(FactorError):
    """The factors do not divide the extent and the primitive cannot add a predicate."""


class LoopNotAncestorError(ScheduleError):
    """A loop is not an ancestor of the block (or of the loops) it must enclose."""


class LoopsNotChainError(ScheduleError):
    """Loops are not in one chain of single-child nested loops (reorder)."""


class MixedIterTypeLoopError(ScheduleError):
    """A loop that feeds both spatial and reduce iterators of a reduction block cannot be moved
    (reorder) or factored (rfactor): the block's init would no longer precede its updates."""


class NotAdjacentError(ScheduleError):
    """Loops to fuse are not directly nested one inside the other."""


class WrongLoopKindError(ScheduleError):
    """The loop kind does not allow this (e.g. parallelising a reduction loop)."""


class NestedParallelError(WrongLoopKindError):
    """A parallel loop would enclose or sit inside another parallel loop."""


class NotCompactDataflowError(ScheduleError):
    """The subtree under a loop is not a compact dataflow (a block there is not its buffers'
    only writer, e.g. after decompose_reduction), so it cannot be parallelised/vectorised/bound."""


class ThreadBindingError(ScheduleError):
    """An unknown thread tag, or a binding that conflicts with existing ones."""


class ComputeAtError(ScheduleError):
    """compute_at/reverse_compute_at cannot move the block under the given loop."""


class NoDependenceUnderLoopError(ComputeAtError):
    """compute_at's block has no consumer under the loop (reverse_compute_at's: no producer), so
    nothing there decides which of its iterations to run: it would run them all each time."""


class UncoveredIterationsError(ComputeAtError):
    """reverse_compute_at: the producers under the loop feed only part of the block's iterations
    (e.g. not the border of a padding stage), so the others would never run."""


class PredicateNotInIteratorsError(ComputeAtError):
    """compute_at/reverse_compute_at: the block's own T.where uses a loop it leaves in a way that
    cannot be rewritten in its iterators, so the moved block could not skip the same iterations."""


class InlineError(ScheduleError):
    """The block cannot be inlined into its consumers/producer."""


class NotReductionBlockError(ScheduleError):
    """The primitive needs a reduction block (one with reduce iterators and an init)."""


class CacheError(ScheduleError):
    """cache_read/cache_write/set_scope got a buffer index or scope that does not apply."""


class LayoutError(ScheduleError):
    """transform_layout got an index map that does not fit the buffer."""


class TensorizeError(ScheduleError):
    """The block or loop does not match the tensor intrinsic's description."""


class NumericsChangedError(ScheduleError):
    """check_numerics=True found that a step changed the program's results."""


class LoopHeightError(ScheduleError):
    """decompose_reduction's loop lies inside a loop that a reduce iterator of the block uses,
    so the init would run more than once per output element."""


class RFactorError(ScheduleError):
    """rfactor's loop is not bound to exactly one reduce iterator, or the block is not a
    recognised reduction (x = x + e, x * e, max, min, with the matching identity as init)."""


class BlockizeError(ScheduleError):
    """The subtree under the loop cannot be wrapped in an outer block (not a single block under a
    chain of loops, or a binding that does not divide into an outer and an inner part)."""


class InvalidDecisionError(ScheduleError):
    """A decision given for a sampling instruction (e.g. by trace replay) does not fit."""
