"""Graph-level passes (one file each), called on a module: ``relax.transform.LegalizeOps()(mod)``.

``pipeline.py`` lists the default order. ``MetaScheduleApplyDatabase`` is the tuner's
(``mlc_lab.meta_schedule.apply_database``, which publishes it here when imported).
"""
from .annotate_tir_op_pattern import OP_PATTERN, AnnotateTIROpPattern, analyze_op_pattern
from .bind_params import BindParams
from .canonicalize_bindings import CanonicalizeBindings
from .dead_code_elimination import DeadCodeElimination
from .default_schedule import DefaultSchedule, default_schedule_report
from .fold_constant import FoldConstant
from .fuse_ops import FuseOps
from .fuse_tir import FuseTIR, FuseTIRError
from .legalize_ops import LegalizeError, LegalizeOps
from .pipeline import PASSES, default_pipeline
from .quantize import QuantizeError, QuantizeWeights
from .rewrite_dataflow_reshape import RewriteDataflowReshape
from .static_plan_block_memory import PLAN_ATTR, StaticPlanBlockMemory, memory_stats

__all__ = ["OP_PATTERN", "PASSES", "PLAN_ATTR", "AnnotateTIROpPattern", "BindParams",
           "CanonicalizeBindings", "DeadCodeElimination", "DefaultSchedule", "FoldConstant",
           "FuseOps", "FuseTIR", "FuseTIRError", "LegalizeError", "LegalizeOps",
           "MetaScheduleApplyDatabase", "QuantizeError", "QuantizeWeights", "RewriteDataflowReshape", "StaticPlanBlockMemory", "analyze_op_pattern",
           "default_pipeline", "default_schedule_report", "memory_stats"]
