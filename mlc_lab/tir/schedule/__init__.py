"""tir.Schedule and its primitives (one mixin per family in primitives/)."""
from . import errors
from .errors import *  # noqa: F401,F403  (the error classes are part of the public API)
from .kinds import DepKind, InstructionKind
from .primitives.blockize import BlockizePrimitives
from .primitives.buffer_attrs import BufferAttrPrimitives
from .primitives.cache import CachePrimitives
from .primitives.compute_location import ComputeLocationPrimitives
from .primitives.for_kind import ForKindPrimitives
from .primitives.inline import InlinePrimitives
from .primitives.layout import LayoutPrimitives
from .primitives.loops import LoopPrimitives
from .primitives.merge import MergePrimitives
from .primitives.padding import PaddingPrimitives
from .primitives.read_write_at import ReadWriteAtPrimitives
from .primitives.rolling_buffer import RollingBufferPrimitives
from .primitives.reduction import ReductionPrimitives
from .primitives.reindex import ReindexPrimitives
from .primitives.sampling import SamplingPrimitives
from .rv import BlockRV, LoopRV
from .schedule import ScheduleBase, Step
from .state import BlockScope, Dependency, ScheduleDebugMask, ScheduleState, StmtSRef
from .tensor_intrin import TensorIntrin
from .trace import Instruction, Trace, TraceError


class Schedule(LoopPrimitives, ForKindPrimitives, ComputeLocationPrimitives, InlinePrimitives,
               CachePrimitives, ReductionPrimitives, LayoutPrimitives, BlockizePrimitives,
               ReindexPrimitives, SamplingPrimitives, MergePrimitives, BufferAttrPrimitives,
               RollingBufferPrimitives, PaddingPrimitives,
               ReadWriteAtPrimitives, ScheduleBase):
    """Transform an IRModule step by step with primitives; ``sch.mod`` is the current module,
    ``sch.trace`` the replayable record, ``sch.history`` every step with the module after it."""


__all__ = ["Schedule", "BlockRV", "LoopRV", "Trace", "TraceError", "Instruction", "Step",
           "TensorIntrin", "DepKind", "InstructionKind", "BlockScope", "Dependency",
           "ScheduleDebugMask", "ScheduleState", "StmtSRef"] + errors.__all__

from . import analysis  # noqa: E402,F401  (tvm.tir.schedule.analysis)
from . import transform  # noqa: E402,F401  (tvm.tir.schedule.transform)
