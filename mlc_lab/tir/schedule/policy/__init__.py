"""Schedule policy: what both ``relax.build``'s default schedules (``relax.transform.DefaultSchedule``)
and the tuner's automatic space (``meta_schedule``) decide by, kept below both so neither reaches
into the other.

    blocks.py     queries about a block (is_spatial, is_reduction, has_data_reuse, tileable_loops)
                  and the annotation keys rules use to ask for parallel/vector/unroll loops
    inline.py     InlinePolicy: which blocks are inlined, in which direction; its variants
                  FUSE_TIR, DEFAULT_SCHEDULE and TUNER are what FuseTIR, DefaultSchedule and the
                  tuner's AutoInline rule inline by
    postproc.py   postprocessors: annotations become loop kinds, reductions are decomposed, the
                  result is verified (``meta_schedule.postproc`` is this module)
    flops.py      floating-point operations of a program (``meta_schedule.flop_counter``)
    pack.py       an operand copied into panels as wide as a tile's columns (both decide it;
                  the tuner's postprocessor ``RewritePackedOperands`` applies its sample)
"""
from . import blocks, flops, inline, pack, postproc

__all__ = ["blocks", "flops", "inline", "pack", "postproc"]
