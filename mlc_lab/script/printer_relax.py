"""Printing graph-level IR as TVMScript (``R.`` namespace)::

    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32"), w: R.Tensor((128, 784), dtype="float32")) -> R.Tensor((1, 128), dtype="float32"):
        cls = Module
        with R.dataflow():
            lv: R.Tensor((1, 128), dtype="float32") = R.call_tir(cls.linear0, (x, w), out_sinfo=R.Tensor((1, 128), dtype="float32"))
            gv: R.Tensor((1, 128), dtype="float32") = R.nn.relu(lv)
            R.output(gv)
        return gv

Every binding is annotated with its structure info, as TVM prints it. A symbolic dimension is
written as a string where a parameter defines it (``R.Tensor(("n", 784))``) and declared as
``n = T.int64()`` at the top of the body. Constants of up to ``SMALL_CONSTANT`` elements print as
``R.const(...)``; larger ones as ``metadata["relax.expr.Constant"][i]``.
"""
from __future__ import annotations

import json

import numpy as np

from ..ir.module import GlobalVar
from ..relax.expr import (Call, Constant, DataflowBlock, DataflowVar, ExternFunc, Function, Op,
                          PrimValue, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var, VarBinding)
from ..relax.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                 StructInfo, TensorStructInfo, TupleStructInfo)
from ..tir import expr as E
from .printer_expr import P_ATOM, ExprPrinter, caret_line, strip_marks

INDENT = "    "
SMALL_CONSTANT = 16


def script(node, name: str | None = None, underline=(), line_numbers: bool = False,
           constants: list | None = None) -> str:
    """The script text of a relax Function, expression, binding or structure info; large
    constants are numbered in (and appended to) ``constants`` when given."""
    printer = RelaxPrinter(underline, constants)
    if isinstance(node, Function):
        printer.function(node, name or node.attrs.get("global_symbol") or "main")
        return printer.render(line_numbers)
    if isinstance(node, StructInfo):
        return printer.sinfo(node)
    if isinstance(node, VarBinding):
        printer.binding(node, 0)
        return printer.render(line_numbers)
    if hasattr(node, "bindings"):
        printer.block(node, 0)
        return printer.render(line_numbers)
    try:
        return strip_marks(printer.rexpr(node))
    except TypeError:
        return f"<{type(node).__name__}>"


class RelaxPrinter(ExprPrinter):
    def __init__(self, underline=(), constants: list | None = None):
        super().__init__(underline)
        self.lines: list[tuple[int, str]] = []
        self.constants: list[Constant] = [] if constants is None else constants
        self.uses_module = False
        self.used.update({"cls", "metadata", "Module"})

    def emit(self, indent: int, text: str) -> None:
        self.lines.append((indent, text))

    def render(self, line_numbers: bool = False) -> str:
        out, width = [], len(str(len(self.lines)))
        for number, (indent, text) in enumerate(self.lines, start=1):
            line = INDENT * indent + text
            prefix = f"{number:>{width}} | " if line_numbers else ""
            out.append(prefix + strip_marks(line))
            if (carets := caret_line(line)):
                out.append(" " * len(prefix) + carets)
        if self.constants:
            out.append("")
            out.append("# Metadata omitted. Use show_meta=True in script() method to show it.")
        return "\n".join(out)

    # -- functions -------------------------------------------------------------------------
    def function(self, func: Function, name: str) -> None:
        symbolic: list = []
        params = [f"{self.define(p, p.name_hint)}: {self.sinfo(p.struct_info, symbolic)}"
                  for p in func.params]
        cast = self._cast_sizes(func, symbolic)
        ret = self.sinfo(func.ret_struct_info)
        options = [text for text, on in (("private=True", "global_symbol" not in func.attrs),
                                         ("pure=False", not func.is_pure)) if on]
        self.emit(0, f"@R.function({', '.join(options)})" if options else "@R.function")
        self.emit(0, f"def {name}({', '.join(params)}) -> {ret}:")
        for var in symbolic + cast:
            self.emit(1, f"{self.names[id(var)]} = T.{var.dtype}()")
        attrs = {k: v for k, v in func.attrs if not (k == "global_symbol" and v == name)}
        if attrs:
            self.emit(1, f"R.func_attr({self.value(attrs)})")
        body_start = len(self.lines)
        self.seq_body(func.body, 1)
        if self.uses_module:
            self.lines.insert(body_start, (1, "cls = Module"))

    def seq_body(self, seq, indent: int) -> None:
        if not isinstance(seq, SeqExpr):
            self.emit(indent, f"return {self.rexpr(seq)}")
            return
        for block in seq.blocks:
            self.block(block, indent)
        self.emit(indent, f"return {self.rexpr(seq.body)}")

    def block(self, block, indent: int) -> None:
        if isinstance(block, DataflowBlock):
            self.emit(indent, "with R.dataflow():")
            for b in block.bindings:
                self.binding(b, indent + 1)
            outputs = [self.name_of_var(b.var) for b in block.bindings
                       if not isinstance(b.var, DataflowVar)]
            self.emit(indent + 1, f"R.output({', '.join(outputs)})")
        else:
            for b in block.bindings:
                self.binding(b, indent)

    def binding(self, b: VarBinding, indent: int) -> None:
        value = self.rexpr(b.value)
        name = self.define(b.var, b.var.name_hint)
        annotation = f": {self.sinfo(b.var.struct_info)}" if b.var.struct_info is not None else ""
        self.emit(indent, self.mark(b, f"{name}{annotation} = {value}"))

    def name_of_var(self, var: Var) -> str:
        return self.names.get(id(var)) or self.define(var, var.name_hint)

    # -- expressions -----------------------------------------------------------------------
    def rexpr(self, e) -> str:
        return self.mark(e, self._rexpr(e))

    def _rexpr(self, e) -> str:
        if isinstance(e, Var):
            return self.name_of_var(e)
        if isinstance(e, GlobalVar):
            self.uses_module = True
            return f"cls.{e.name_hint}"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Tuple):
            items = [self.rexpr(f) for f in e.elements]
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if isinstance(e, TupleGetItem):
            return f"{self.rexpr(e.tuple_value)}[{e.index}]"
        if isinstance(e, Constant):
            return self.constant(e)
        if isinstance(e, ShapeExpr):
            return f"R.shape([{', '.join(self.expr(v) for v in e.values)}])"
        if isinstance(e, PrimValue):
            return f"R.prim_value({self.expr(e.value)})"
        if isinstance(e, Op):
            return "R." + e.name[len("relax."):] if e.name.startswith("relax.") else json.dumps(e.name)
        if isinstance(e, ExternFunc):
            return json.dumps(e.global_symbol)
        if isinstance(e, SeqExpr):
            return f"<SeqExpr returning {self.rexpr(e.body)}>"
        if isinstance(e, Function):
            return f"<Function {e.attrs.get('global_symbol', '')}>"
        raise TypeError(f"the relax printer cannot print a {type(e).__name__}")

    def call(self, c: Call) -> str:
        op = c.op
        if isinstance(op, Op) and op.name in ("relax.call_tir", "relax.call_dps_packed"):
            callee = self.rexpr(c.args[0])
            parts = [callee, self.rexpr(c.args[1]), f"out_sinfo={self.out_sinfo(c.sinfo_args)}"]
            if len(c.args) > 2:
                parts.append(f"tir_vars={self.rexpr(c.args[2])}")
            return f"{self.rexpr(op)}({', '.join(parts)})"
        if isinstance(op, Op) and op.name == "relax.match_cast":
            return f"R.match_cast({self.rexpr(c.args[0])}, {self.sinfo(c.sinfo_args[0])})"
        args = [self.rexpr(a) for a in c.args]
        args += [f"{k}={self.value(v)}" for k, v in c.attrs]
        if isinstance(op, ExternFunc):
            sinfo = ", ".join(self.sinfo(s) for s in c.sinfo_args)
            return f"R.call_packed({', '.join([json.dumps(op.global_symbol)] + args)}, sinfo_args=({sinfo},))"
        if c.sinfo_args and not isinstance(op, Op):
            args.append(f"sinfo_args=({', '.join(self.sinfo(s) for s in c.sinfo_args)},)")
        return f"{self.rexpr(op)}({', '.join(args)})"

    def out_sinfo(self, sinfos) -> str:
        if len(sinfos) == 1:
            return self.sinfo(sinfos[0])
        return "[" + ", ".join(self.sinfo(s) for s in sinfos) + "]"

    def constant(self, c: Constant) -> str:
        data = c.data
        if data.size <= SMALL_CONSTANT:
            value = data.item() if data.ndim == 0 else data.tolist()
            if isinstance(value, float) and not np.isfinite(value):
                value = f'float("{value}")'
            return f"R.const({value}, {json.dumps(data.dtype.name)})"
        if all(c is not k for k in self.constants):
            self.constants.append(c)
        index = next(i for i, k in enumerate(self.constants) if k is c)
        return f'metadata["relax.expr.Constant"][{index}]'

    def value(self, v) -> str:
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {self.value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, E.PrimExpr):
            return self.expr(v)
        return repr(v)

    def expr_prec(self, e):
        if isinstance(e, E.IntImm) and e.dtype == "int64":
            return str(e.value), P_ATOM
        return super().expr_prec(e)

    # -- structure info --------------------------------------------------------------------
    def _cast_sizes(self, func: Function, known: list) -> list:
        """The symbolic sizes that ``R.match_cast``s of ``func`` introduce (named here)."""
        found = []
        for block in getattr(func.body, "blocks", ()):
            for binding in block.bindings:
                value = binding.value
                if isinstance(value, Call) and isinstance(value.op, Op) \
                        and value.op.name == "relax.match_cast":
                    shape = getattr(value.sinfo_args[0], "shape", None) or ()
                    found += [d for d in shape if isinstance(d, E.Var)
                              and all(d is not k for k in known + found)]
        for var in found:
            self.dims((var,), None)   # names it
        return found

    def sinfo(self, s, symbolic: list | None = None) -> str:
        """``R.Tensor((1, n), dtype="float32")`` etc. With ``symbolic`` (a parameter's
        annotation), a symbolic dimension seen for the first time is defined and quoted."""
        if s is None or isinstance(s, ObjectStructInfo):
            return "R.Object"
        if isinstance(s, TensorStructInfo):
            if s.shape is None:
                ndim = f", ndim={s.ndim}" if s.ndim >= 0 else ""
                return f'R.Tensor(dtype="{s.dtype}"{ndim})'
            return f'R.Tensor({self.dims(s.shape, symbolic)}, dtype="{s.dtype}")'
        if isinstance(s, TupleStructInfo):
            return f"R.Tuple({', '.join(self.sinfo(f, symbolic) for f in s.elements)})"
        if isinstance(s, ShapeStructInfo):
            if s.values is None:
                return f"R.Shape(ndim={s.ndim})"
            return f"R.Shape({self.dims(s.values, symbolic, as_list=True)})"
        if isinstance(s, PrimStructInfo):
            return f'R.Prim("{s.dtype}")'
        if isinstance(s, FuncStructInfo):
            params = "None" if s.params is None else f"({', '.join(self.sinfo(p) for p in s.params)},)"
            return f"R.Callable({params}, {self.sinfo(s.ret)})"
        return f"<{type(s).__name__}>"

    def dims(self, dims, symbolic: list | None, as_list: bool = False) -> str:
        parts = []
        for d in dims:
            if symbolic is not None and isinstance(d, E.Var) and id(d) not in self.names:
                symbolic.append(d)
                parts.append(json.dumps(self.define(d, d.name)))
            else:
                parts.append(strip_marks(self.expr(d)))
        if as_list:
            return "[" + ", ".join(parts) + "]"
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
