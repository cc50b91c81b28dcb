"""The postprocessors (``ms.postproc``): they live with the schedule policy in
``mlc_lab.tir.schedule.policy.postproc``, which relax's default schedules use too."""
from ..tir.schedule.policy.postproc import (Postproc, RewriteParallelVectorizeUnroll, RewriteReductionBlock,
                                            VerifyModule, block_names, blocks, default_postprocs,
                                            feeds_only_spatial, prim_func_names)

__all__ = ["Postproc", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock", "VerifyModule", "block_names",
           "blocks", "default_postprocs", "feeds_only_spatial", "prim_func_names"]
