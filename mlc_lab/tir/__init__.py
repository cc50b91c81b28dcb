"""The loop IR (TensorIR-style): expressions, statements, buffers, blocks and PrimFuncs; above them
``tir.Schedule`` (mlc_lab.tir.schedule) and the lowering passes (``tir.transform``)."""
import importlib as _importlib

from .buffer import Buffer, decl_buffer
from .expr import (EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, Broadcast, BufferLoad, Call, Cast,
                   CmpOp, Div, FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul, Not, Or,
                   PrimExpr, Ramp, Select, SizeVar, StringImm, Sub, Var, call_intrin, const, convert)
from .extern import call_extern
from .function import PrimFunc
from .functor import StmtExprMutator, StmtExprVisitor
from .stmt import (Allocate, AllocateConst, Block, BlockRealize, BufferRegion, BufferStore,
                   Evaluate, For, IfThenElse, IterVar, LetStmt, MatchBufferRegion, Range, SeqStmt, Stmt)
from .expr import floordiv, floormod, truncdiv, truncmod
from .stmt import ForKind
from .verify import VerifyError, verify

# The schedule, the analyses and the lowering passes use mlc_lab.arith, which is itself written
# over the expressions above: importing them here would make `import mlc_lab.arith` re-enter a
# half-made arith. So they are bound on first use: name -> (submodule, attribute or None).
_UPPER_LAYER = {
    "BlockScope": ("schedule", "BlockScope"),
    "IndexMap": ("index_map", "IndexMap"),
    "Schedule": ("schedule", "Schedule"),
    "ScheduleError": ("schedule", "ScheduleError"),
    "ScheduleState": ("schedule", "ScheduleState"),
    "StmtSRef": ("schedule", "StmtSRef"),
    "TensorIntrin": ("schedule", "TensorIntrin"),
    "Trace": ("schedule", "Trace"),
    "analysis": ("analysis", None),
    "schedule": ("schedule", None),
    "transform": ("transform", None),
}


def __getattr__(name: str):
    if name not in _UPPER_LAYER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    submodule, attribute = _UPPER_LAYER[name]
    module = _importlib.import_module(f"{__name__}.{submodule}")
    return module if attribute is None else getattr(module, attribute)


def __dir__() -> list:
    return sorted(set(globals()) | set(_UPPER_LAYER))


__all__ = ["Add", "Allocate", "AllocateConst", "And", "BinaryOp", "Block", "BlockRealize",
           "Broadcast", "Buffer", "BufferLoad", "BufferRegion", "BufferStore", "Call", "Cast", "CmpOp", "Div", "EQ",
           "Evaluate", "FloatImm", "FloorDiv", "FloorMod", "For", "GE", "GT", "IfThenElse",
           "IntImm", "IterVar", "LE", "LT", "LetStmt", "MatchBufferRegion", "Max", "Min", "Mod",
           "Mul", "NE", "Not", "Or", "PrimExpr", "PrimFunc", "Ramp", "Range", "Schedule",
           "ScheduleError", "Select", "SeqStmt", "SizeVar", "Stmt", "StmtExprMutator",
           "StmtExprVisitor", "StringImm", "Sub", "TensorIntrin", "Trace", "Var", "VerifyError",
           "analysis", "call_extern", "call_intrin", "const", "convert", "decl_buffer", "schedule", "transform",
           "verify"]
__all__ += ["ForKind", "floordiv", "floormod", "truncdiv", "truncmod"]
__all__ += ["BlockScope", "ScheduleState", "StmtSRef"]
