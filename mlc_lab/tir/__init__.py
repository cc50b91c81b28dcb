"""The loop IR (TensorIR-style): expressions, statements, buffers, blocks and PrimFuncs."""
from .buffer import Buffer, decl_buffer
from .expr import (EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, Broadcast, BufferLoad, Call, Cast,
                   CmpOp, Div, FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul, Not, Or,
                   PrimExpr, Ramp, Select, SizeVar, StringImm, Sub, Var, call_intrin, const, convert)
from .function import PrimFunc
from .stmt import (Allocate, Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
                   IfThenElse, IterVar, LetStmt, MatchBufferRegion, Range, SeqStmt, Stmt)
from .functor import StmtExprMutator, StmtExprVisitor
from .verify import VerifyError, verify

__all__ = [name for name in dir() if not name.startswith("_")]
from .schedule import Schedule, ScheduleError, TensorIntrin, Trace
