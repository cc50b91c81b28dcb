"""Lowering: from scheduled block-form PrimFuncs to flat loop code (one file per pass; the order is
in pipeline.PASSES)."""
from .flatten_buffer import flatten_buffer
from .lower_blocks import lower_blocks
from .lower_init_block import lower_init_block
from .pipeline import PASSES, LoweringError, lower
from .plan_and_compact_allocations import plan_and_compact_allocations
from .simplify import simplify
from .unroll_loop import unroll_loop
from .vectorize_loop import vectorize_loop
from .verify_lowered import verify_lowered

__all__ = ["PASSES", "lower", "LoweringError", "verify_lowered", "lower_init_block",
           "plan_and_compact_allocations", "lower_blocks", "flatten_buffer", "simplify", "unroll_loop",
           "vectorize_loop"]
