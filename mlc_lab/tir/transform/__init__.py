"""Lowering: from scheduled block-form PrimFuncs to flat loop code (one file per pass; the order is
in pipeline.PASSES, then pipeline.gpu_passes for a GPU target). Every lowering pass runs under the
PassContext like the graph-level passes: a PrimFuncPass (``prim_func_pass``), or a module pass for
the GPU passes, which keep the kernels in the module (``device_passes``)."""
from .prim_func_pass import PrimFuncPass, prim_func_pass
from .flatten_buffer import flatten_buffer
from .lower_blocks import lower_blocks
from .lower_init_block import lower_init_block
from .device_passes import InjectSync, SplitHostDevice, device_programs
from .pipeline import (PASSES, REQUIRED, STAGE_AFTER, LoweringError, gpu_passes, lower,
                       lowering_sequence)
from .plan_and_compact_allocations import plan_and_compact_allocations
from .simplify import simplify
from .unroll_loop import unroll_loop
from .vectorize_loop import vectorize_loop
from .verify_lowered import verify_lowered
from .verify_memory import verify_memory

__all__ = ["InjectSync", "PASSES", "REQUIRED", "STAGE_AFTER", "LoweringError", "PrimFuncPass",
           "SplitHostDevice", "device_programs", "flatten_buffer", "gpu_passes",
           "lower", "lower_blocks", "lower_init_block", "lowering_sequence",
           "plan_and_compact_allocations", "prim_func_pass", "simplify", "unroll_loop",
           "vectorize_loop", "verify_lowered", "verify_memory"]
