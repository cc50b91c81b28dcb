"""The traversal tool for graph-level IR: ExprVisitor and ExprMutator, with TVM's method names
(``visit_call_``, ``visit_var_binding_``, ``visit_dataflow_var_`` ...), so rewrites written for
the course run unchanged::

    @relax.expr_functor.mutator
    class EwiseFMARewriter(relax.PyExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)       # children first
            if call.op != Op.get("relax.add"):
                return call
            value = self.lookup_binding(call.args[0])     # what the first operand was bound to
            if not isinstance(value, relax.Call) or value.op != Op.get("relax.multiply"):
                return call
            return relax.Call(Op.get("relax.ewise_fma"), [*value.args, call.args[1]])

The mutator re-emits every binding through ``self.builder_`` (a BlockBuilder), which normalizes
new expressions (fills in structure info) and records bindings for ``lookup_binding``. A binding
whose value is unchanged is kept as the very same object.
"""
from __future__ import annotations

from typing import Any, Optional

from ..ir.module import GlobalVar
from .block_builder import BlockBuilder
from .expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
                   Function, Op, PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var,
                   VarBinding)
from .struct_info import StructInfo, struct_info_equal

_KIND = {Constant: "constant", Tuple: "tuple", Var: "var", DataflowVar: "dataflow_var",
         ShapeExpr: "shape_expr", ExternFunc: "extern_func", GlobalVar: "global_var",
         Function: "function", Call: "call", SeqExpr: "seq_expr", TupleGetItem: "tuple_getitem",
         PrimValue: "prim_value", Op: "op"}


def _kind(expr: Any) -> str:
    for cls in type(expr).__mro__:
        if cls in _KIND:
            return _KIND[cls]
    raise TypeError(f"not a relax expression: {type(expr).__name__}: {expr!r}")


class ExprVisitor:
    """Walks a graph-level expression; override ``visit_<kind>_`` methods and call the base
    method (or ``visit_expr`` on children) to keep walking."""

    def visit_expr(self, expr) -> None:
        return getattr(self, f"visit_{_kind(expr)}_")(expr)

    def visit_binding(self, binding: VarBinding) -> None:
        return self.visit_var_binding_(binding)

    def visit_binding_block(self, block: BindingBlock) -> None:
        if isinstance(block, DataflowBlock):
            return self.visit_dataflow_block_(block)
        return self.visit_binding_block_(block)

    def visit_var_def(self, var: Var) -> None:
        if isinstance(var, DataflowVar):
            return self.visit_dataflow_var_def_(var)
        return self.visit_var_def_(var)

    # -- leaves ----------------------------------------------------------------------------
    def visit_constant_(self, op: Constant) -> None: pass
    def visit_var_(self, op: Var) -> None: pass
    def visit_dataflow_var_(self, op: DataflowVar) -> None: pass
    def visit_shape_expr_(self, op: ShapeExpr) -> None: pass
    def visit_prim_value_(self, op: PrimValue) -> None: pass
    def visit_extern_func_(self, op: ExternFunc) -> None: pass
    def visit_global_var_(self, op: GlobalVar) -> None: pass
    def visit_op_(self, op: Op) -> None: pass
    def visit_var_def_(self, var: Var) -> None: pass
    def visit_dataflow_var_def_(self, var: DataflowVar) -> None: pass

    # -- composites ------------------------------------------------------------------------
    def visit_tuple_(self, op: Tuple) -> None:
        for f in op.elements:
            self.visit_expr(f)

    def visit_tuple_getitem_(self, op: TupleGetItem) -> None:
        self.visit_expr(op.tuple_value)

    def visit_call_(self, op: Call) -> None:
        self.visit_expr(op.op)
        for arg in op.args:
            self.visit_expr(arg)

    def visit_seq_expr_(self, op: SeqExpr) -> None:
        for block in op.blocks:
            self.visit_binding_block(block)
        self.visit_expr(op.body)

    def visit_function_(self, op: Function) -> None:
        for p in op.params:
            self.visit_var_def(p)
        self.visit_expr(op.body)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_binding_block_(self, block: BindingBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)


class ExprMutator:
    """Rebuilds a graph-level expression. ``visit_<kind>_`` methods return the new expression;
    bindings are re-emitted through ``self.builder_``; uses of a variable whose binding got a new
    variable are redirected to it (``var_remap_``)."""

    def __init__(self, mod=None):
        self.builder_ = BlockBuilder(mod)
        self.var_remap_: dict[Var, Var] = {}

    def visit_expr(self, expr) -> Expr:
        return self.builder_.normalize(getattr(self, f"visit_{_kind(expr)}_")(expr))

    def visit_expr_post_order(self, expr) -> Expr:
        """``expr`` with its children visited, skipping this class's override for ``expr`` itself
        (call it first thing in ``visit_call_`` to rewrite bottom-up)."""
        return self.builder_.normalize(getattr(ExprMutator, f"visit_{_kind(expr)}_")(self, expr))

    def lookup_binding(self, var: Var) -> Optional[Expr]:
        """The value bound to ``var`` (among the bindings emitted so far), or None."""
        return self.builder_.lookup_binding(var) if isinstance(var, Var) else None

    def set_var_remap(self, var: Var, new_var: Var) -> None:
        self.var_remap_[var] = new_var

    def get_var_remap(self, var: Var) -> Var:
        return self.var_remap_.get(var, var)

    @staticmethod
    def with_struct_info(var: Var, sinfo: StructInfo) -> Var:
        """``var`` itself when it already has ``sinfo``, else a new variable of the same kind."""
        if var.struct_info is not None and struct_info_equal(var.struct_info, sinfo):
            return var
        return type(var)(var.name_hint, sinfo)

    # -- leaves ----------------------------------------------------------------------------
    def visit_constant_(self, op: Constant) -> Expr: return op
    def visit_shape_expr_(self, op: ShapeExpr) -> Expr: return op
    def visit_prim_value_(self, op: PrimValue) -> Expr: return op
    def visit_extern_func_(self, op: ExternFunc) -> Expr: return op
    def visit_global_var_(self, op: GlobalVar) -> GlobalVar: return op
    def visit_op_(self, op: Op) -> Expr: return op
    def visit_var_(self, op: Var) -> Expr: return self.var_remap_.get(op, op)
    def visit_dataflow_var_(self, op: DataflowVar) -> Expr: return self.var_remap_.get(op, op)
    def visit_var_def_(self, var: Var) -> Var: return var
    def visit_dataflow_var_def_(self, var: DataflowVar) -> Var: return var

    def visit_var_def(self, var: Var) -> Var:
        if isinstance(var, DataflowVar):
            return self.visit_dataflow_var_def_(var)
        return self.visit_var_def_(var)

    # -- composites ------------------------------------------------------------------------
    def visit_tuple_(self, op: Tuple) -> Expr:
        fields = tuple(self.visit_expr(f) for f in op.elements)
        return op if _same(fields, op.elements) else Tuple(fields)

    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        value = self.visit_expr(op.tuple_value)
        return op if value is op.tuple_value else TupleGetItem(value, op.index)

    def visit_call_(self, call: Call) -> Expr:
        new_op = self.visit_expr(call.op) if isinstance(call.op, Expr) else call.op
        args = tuple(self.visit_expr(a) for a in call.args)
        if new_op is call.op and _same(args, call.args):
            return call
        return call.replace(op=new_op, args=args, struct_info=None)

    def visit_seq_expr_(self, op: SeqExpr) -> Expr:
        blocks = []
        for block in op.blocks:
            new_block = self.visit_binding_block(block)
            if new_block.bindings:
                blocks.append(new_block)
        body = self.visit_expr(op.body)
        if body is op.body and _same(blocks, op.blocks):
            return op
        return SeqExpr(blocks, body)

    def visit_function_(self, op: Function) -> Expr:
        params = tuple(self.visit_var_def(p) for p in op.params)
        body = self.visit_expr(op.body)
        if body is op.body and _same(params, op.params):
            return op
        ret = op.ret_struct_info if body.struct_info is None else body.struct_info
        return Function(params, body, ret, op.attrs, op.is_pure)

    # -- bindings --------------------------------------------------------------------------
    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        if isinstance(block, DataflowBlock):
            return self.visit_dataflow_block_(block)
        return self.visit_binding_block_(block)

    def visit_binding_block_(self, block: BindingBlock) -> BindingBlock:
        self.builder_.begin_binding_block()
        return self._visit_bindings(block)

    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        self.builder_.begin_dataflow_block()
        return self._visit_bindings(block)

    def _visit_bindings(self, block: BindingBlock) -> BindingBlock:
        for binding in block.bindings:
            self.visit_binding(binding)
        new_block = self.builder_.end_block()
        return block if _same(new_block.bindings, block.bindings) else new_block

    def visit_binding(self, binding: VarBinding) -> None:
        self.visit_var_binding_(binding)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.re_emit_binding(binding, self.visit_expr(binding.value))

    def re_emit_binding(self, binding: VarBinding, new_value: Expr) -> None:
        """Emit ``binding`` with ``new_value``; its variable is replaced (and later uses remapped)
        only when the structure info of the value changed."""
        new_var = self.visit_var_def(binding.var)
        if new_value is binding.value and new_var is binding.var:
            self.builder_.emit_normalized(binding)
            return
        if new_value.struct_info is not None:
            new_var = self.with_struct_info(new_var, new_value.struct_info)
        if new_var is not binding.var:
            self.var_remap_[binding.var] = new_var
        self.builder_.emit_normalized(VarBinding(new_var, new_value))


def _same(new, old) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


class PyExprVisitor(ExprVisitor):
    """The course-era name of ExprVisitor (subclass it and override ``visit_*_`` methods)."""


class PyExprMutator(ExprMutator):
    """The course-era name of ExprMutator; ``self.builder_`` is its BlockBuilder (pass ``mod`` to
    start from a module, e.g. to add fused functions and return ``self.builder_.get()``)."""


def visitor(cls):
    """Course-era decorator for PyExprVisitor subclasses; here subclassing is enough."""
    return cls


def mutator(cls):
    """Course-era decorator for PyExprMutator subclasses; here subclassing is enough."""
    return cls
