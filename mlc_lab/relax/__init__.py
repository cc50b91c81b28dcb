"""Graph-level IR (Relax-style): structure info, expressions, ops, BlockBuilder, visitor/mutator.

    from mlc_lab import relax
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.nn.relu(x))
        bb.emit_func_output(gv)
    bb.get().show()

The 2022 course text runs too: ``relax.Var("x", (1, 784), relax.DynTensorType(2, "float32"))``,
``relax.call_tir(f, args, (1, 128), dtype="float32")`` (a str ``f`` is a registered function,
today's ``call_dps_packed``), ``relax.op.dense``, ``expr.shape_`` / ``expr.checked_type``,
``relax.analysis.remove_all_unused`` and ``relax.vm.build``; each is turned into today's IR.
"""
from . import functor
from . import functor as expr_functor
from . import op
from .block_builder import BlockBuilder, BlockBuilderError
from .expr import (Attrs, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr,
                   ExternFunc, Function, Op, PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem,
                   Var, VarBinding, const)
from .functor import ExprMutator, ExprVisitor, PyExprMutator, PyExprVisitor
from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                          StructInfo, TensorStructInfo, TupleStructInfo)
from .ty import DynTensorType, ObjectType, ShapeType, TupleType
from .op.call import call_tir
from ..ir.module import GlobalVar

__all__ = ["Attrs", "BindingBlock", "BlockBuilder", "BlockBuilderError", "Call", "Constant",
           "DataflowBlock", "DataflowVar", "Expr", "ExprMutator", "ExprVisitor", "ExternFunc",
           "FuncStructInfo", "Function", "GlobalVar", "ObjectStructInfo", "Op", "PrimStructInfo",
           "PrimValue", "PyExprMutator", "PyExprVisitor", "SeqExpr", "ShapeExpr", "ShapeStructInfo",
           "StructInfo", "TensorStructInfo", "Tuple", "TupleGetItem", "TupleStructInfo", "Var",
           "VarBinding", "const", "expr_functor", "functor", "op", "transform", "build",
           "VirtualMachine", "Executable", "analysis", "vm", "vm_build", "call_tir",
           "call_dps_packed", "DynTensorType", "ObjectType", "ShapeType", "TupleType"]
from . import transform  # noqa: E402  (passes import the IR above)
from .build import build  # noqa: E402
from .vm import Executable, VirtualMachine  # noqa: E402
from . import analysis, vm, vm_build  # noqa: E402
from .op import call_dps_packed  # noqa: E402  (TVM also spells it relax.call_dps_packed)
