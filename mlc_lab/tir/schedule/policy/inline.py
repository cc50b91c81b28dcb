"""Automatic inlining: which complete blocks a schedule folds away, and in which direction.
FuseTIR, the default schedules of ``relax.build`` and the tuner's AutoInline rule all inline by
``InlinePolicy.inline_block``; their variants differ only in its named parameters:

    variant            into reductions  consumers  padding  reverse-inlines   blocks visited
    FUSE_TIR           yes              any (0+)   kept     any it can        top level, repeated
    DEFAULT_SCHEDULE   no               exactly 1  folded   none              all, one pass
    TUNER              yes              1 or more  folded   outputs           the rule's block

Every inline is still checked by the primitive (``compute_inline``, ``reverse_compute_inline``):
a refusal leaves the block where it is, so a policy only chooses among legal rewrites.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import ScheduleError
from ..func_index import child_blocks
from .blocks import is_plain_store, is_spatial, stores_conditional, writes_param
from .postproc import blocks


@dataclass(frozen=True)
class InlinePolicy:
    """When a complete block (spatial iterators, one store) is inlined. A block that does not
    write an output is offered to ``compute_inline`` (into its consumers) under these limits:

        into_reductions     a reduction may be among its consumers (False: all must be spatial,
                            so softmax's exp or a padding is not recomputed in a reduction's loop)
        min_consumers,      how many consumers it may have (max None: no limit; min 0: a block
        max_consumers       nobody reads is dropped too; with 0, None and into_reductions the
                            consumers are not asked for, which keeps the query out of the trace)
        inline_conditional  whether its value may select (T.if_then_else, T.Select: a padding)

    A block is offered to ``reverse_compute_inline`` (into its one producer) when it writes an
    output and ``reverse_outputs``, or when ``compute_inline`` refused it and
    ``reverse_intermediates``.

    ``inline_all`` offers the blocks of a function in program order: every block or, without
    ``nested``, those directly under the root; once (a list taken first), or with ``repeat``
    starting over after each inline until no block is inlined.
    """

    into_reductions: bool = True
    min_consumers: int = 1
    max_consumers: int | None = None
    inline_conditional: bool = True
    reverse_outputs: bool = True
    reverse_intermediates: bool = False
    nested: bool = True
    repeat: bool = False

    # FuseTIR: every intermediate of a fused kernel that can be, in either direction, except a
    # padding (a convolution would test its condition in the innermost loop).
    FUSE_TIR: ClassVar[InlinePolicy]
    # DefaultSchedule: a spatial block into its one spatial consumer (a bias add into its ReLU).
    DEFAULT_SCHEDULE: ClassVar[InlinePolicy]
    # The tuner's AutoInline rule: into any consumers; an output into its producer.
    TUNER: ClassVar[InlinePolicy]

    def inline_block(self, sch, block_rv) -> bool:
        """Inline the block where the policy and the primitive allow it; True when it is gone."""
        block = sch.get(block_rv)
        if not is_spatial(block):
            return False
        if writes_param(sch, block_rv, block):
            return self.reverse_outputs and _into_producer(sch, block_rv, block)
        return self._into_consumers(sch, block_rv, block) or (
            self.reverse_intermediates and _into_producer(sch, block_rv, block))

    def inline_all(self, sch, func_name: str = "main") -> None:
        """Offer the blocks of ``func_name`` to ``inline_block`` (see the class docstring)."""
        while True:
            for name in self._block_names(sch, func_name):
                if self.inline_block(sch, sch.get_block(name, func_name)) and self.repeat:
                    break
            else:
                return

    def _block_names(self, sch, func_name: str) -> list[str]:
        if self.nested:
            return [block.name_hint for block in blocks(sch, func_name)]
        return [realize.block.name_hint for realize in child_blocks(sch.mod[func_name].body)]

    def _into_consumers(self, sch, block_rv, block) -> bool:
        if not self.inline_conditional and stores_conditional(block):
            return False
        if self.min_consumers or self.max_consumers is not None or not self.into_reductions:
            consumers = sch.get_consumers(block_rv)
            if len(consumers) < self.min_consumers or (
                    self.max_consumers is not None and len(consumers) > self.max_consumers):
                return False
            if not self.into_reductions and not all(is_spatial(sch.get(c)) for c in consumers):
                return False
        return is_plain_store(block) and _accepted(sch.compute_inline, block_rv)


InlinePolicy.FUSE_TIR = InlinePolicy(
    into_reductions=True, min_consumers=0, max_consumers=None, inline_conditional=False,
    reverse_outputs=True, reverse_intermediates=True, nested=False, repeat=True)
InlinePolicy.DEFAULT_SCHEDULE = InlinePolicy(
    into_reductions=False, min_consumers=1, max_consumers=1, inline_conditional=True,
    reverse_outputs=False, reverse_intermediates=False, nested=True, repeat=False)
InlinePolicy.TUNER = InlinePolicy(
    into_reductions=True, min_consumers=1, max_consumers=None, inline_conditional=True,
    reverse_outputs=True, reverse_intermediates=False, nested=True, repeat=False)


def _into_producer(sch, block_rv, block) -> bool:
    producers = sch.get_producers(block_rv)
    return (len(producers) == 1 and is_plain_store(block) and is_plain_store(sch.get(producers[0]))
            and _accepted(sch.reverse_compute_inline, block_rv))


def _accepted(primitive, block_rv) -> bool:
    try:
        primitive(block_rv)
    except ScheduleError:
        return False
    return True
