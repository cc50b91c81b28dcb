# The default graph-level pipeline: the passes, in order, that take a module of high-level ops to
# one of fused, scheduled PrimFuncs with planned memory. Expects relax functions (weights bound).
from __future__ import annotations

from ...ir.transform import Sequential
from .annotate_tir_op_pattern import AnnotateTIROpPattern
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .default_schedule import DefaultSchedule
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR
from .legalize_ops import LegalizeOps
from .rewrite_dataflow_reshape import RewriteDataflowReshape
from .static_plan_block_memory import StaticPlanBlockMemory

def FuseOpsAndPooling():   # noqa: N802 (a pass, named as the others)
    """FuseOps with a pooling fused into the convolution before it."""
    return FuseOps(windows=True)


PASSES = [
    LegalizeOps,
    AnnotateTIROpPattern,
    FoldConstant,
    CanonicalizeBindings,
    DeadCodeElimination,
    FuseOpsAndPooling,
    FuseTIR,
    RewriteDataflowReshape,
    DeadCodeElimination,
    DefaultSchedule,
    StaticPlanBlockMemory,
]

# Passes that depend on what the kernels are compiled for: made with the target as argument.
TARGET_PASSES = (DefaultSchedule,)


def default_pipeline(target=None) -> Sequential:
    """``Sequential`` of PASSES, for ``relax.build`` and for trying the whole flow at once;
    ``target`` (default "llvm") reaches the TARGET_PASSES."""
    return Sequential([make(target) if make in TARGET_PASSES else make() for make in PASSES],
                      name="relax.default_pipeline")
