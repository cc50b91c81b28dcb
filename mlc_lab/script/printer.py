"""The printer: turns IR into TVMScript-style Python that the parser reads back.

Everything a learner sees (modules, error messages, diffs, widgets) comes from here. Nodes listed
in ``underline`` get a caret line beneath them, so errors can point at the culprit.
"""
from __future__ import annotations

import json
import sys

from ..ir import hooks
from ..ir.module import IRModule
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.stmt_functor import free_vars
from .printer_expr import ExprPrinter, caret_line, strip_marks

INDENT = "    "

_LOOP_FUNCS = {"parallel": "T.parallel", "vectorized": "T.vectorized", "unrolled": "T.unroll",
               "serial": "T.serial"}


def script(node, underline=(), line_numbers: bool = False, name: str | None = None,
           constants: list | None = None) -> str:
    """The script text of an IRModule, PrimFunc, statement or expression. Relax constants too
    large to print are written ``metadata["relax.expr.Constant"][i]``, numbered across the whole
    module; pass a list as ``constants`` to get them (``from_source(text, extra_vars={"metadata":
    {"relax.expr.Constant": constants}})`` reads the text back)."""
    if type(node).__module__.startswith("mlc_lab.relax"):
        from .printer_relax import script as relax_script
        return relax_script(node, name=name, underline=underline, line_numbers=line_numbers,
                            constants=constants)
    printer = _Printer(underline)
    printer.constants = [] if constants is None else constants
    if isinstance(node, IRModule):
        printer.module(node)
    elif isinstance(node, PrimFunc):
        printer.prim_func(node, name or node.attr_dict.get("global_symbol", "main"))
    elif isinstance(node, S.Stmt):
        printer.stmt(node, 0)
    elif isinstance(node, E.PrimExpr):
        return strip_marks(printer.expr(node))
    else:
        return printer.other(node)
    return printer.render(line_numbers)


def show(node, underline=(), line_numbers: bool = False, name: str | None = None) -> None:
    """Print ``node``; inside Jupyter, display it as highlighted HTML instead."""
    text = script(node, underline=underline, line_numbers=line_numbers, name=name)
    from .highlight import display_code
    display_code(text)


class _Printer(ExprPrinter):
    def __init__(self, underline=()):
        super().__init__(underline)
        self.lines: list[tuple[int, str]] = []
        self.loop_ranges: dict[int, S.Range] = {}   # loop var id -> range, for T.axis.remap

    # -- output ----------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append((indent, text))

    def render(self, line_numbers: bool) -> str:
        out: list[str] = []
        width = len(str(len(self.lines)))
        for number, (indent, text) in enumerate(self.lines, start=1):
            line = INDENT * indent + text
            carets = caret_line(line)
            prefix = f"{number:>{width}} | " if line_numbers else ""
            out.append(prefix + strip_marks(line))
            if carets:
                out.append(" " * len(prefix) + carets)
        return "\n".join(out)

    # -- modules and functions --------------------------------------------------------------
    def module(self, mod: IRModule) -> None:
        self.emit(0, "# from mlc_lab.script import ir as I")
        self.emit(0, "# from mlc_lab.script import tir as T")
        if any(not isinstance(f, PrimFunc) for f in mod.functions.values()):
            self.emit(0, "# from mlc_lab.script import relax as R")
        self.emit(0, "")
        self.emit(0, "@I.ir_module")
        self.emit(0, "class Module:")
        for i, (gv, func) in enumerate(sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint)):
            if i:
                self.emit(1, "")
            start = len(self.lines)
            if isinstance(func, PrimFunc):
                self.prim_func(func, gv.name_hint)
            else:
                from .printer_relax import script as relax_script
                for line in relax_script(func, name=gv.name_hint, constants=self.constants).splitlines():
                    self.emit(0, line)
            self.lines[start:] = [(indent + 1, text) for indent, text in self.lines[start:]]

    def prim_func(self, func: PrimFunc, name: str) -> None:
        self.names, self.used = {}, set()
        params, preamble, defined = [], [], set()
        for p in func.params:
            if isinstance(p, E.Var):
                params.append(f"{self.define(p, p.name)}: T.{p.dtype}")
                defined.add(id(p))
            elif all(isinstance(s, E.IntImm) for s in (*p.shape, *p.strides)):
                params.append(f"{self.define(p, p.name)}: {self.buffer_decl('T.Buffer', p, True)}")
            else:   # symbolic shape or strides: a handle, its variables declared, a match_buffer
                handle = self.define(object(), "var_" + p.name)
                params.append(f"{handle}: T.handle")
                for v in free_vars((*p.shape, *p.strides)):
                    if id(v) not in defined and id(v) not in self.names:
                        preamble.append(f"{self.define(v, v.name)} = T.{v.dtype}()")
                    defined.add(id(v))
                buffer_name = self.define(p, p.name)
                preamble.append(f"{buffer_name} = {self.buffer_decl('T.match_buffer', p, True, handle)}")
        self.emit(0, "@T.prim_func")
        self.emit(0, f"def {name}({', '.join(params)}):")
        if func.attrs:
            attrs = ", ".join(f"{json.dumps(k)}: {self.value(v)}" for k, v in func.attrs)
            self.emit(1, f"T.func_attr({{{attrs}}})")
        for line in preamble:
            self.emit(1, line)
        body = func.body
        if _is_root(body):
            self.emit(1, '# with T.block("root"):')
            for buf in body.block.alloc_buffers:
                self.emit(1, f"{self.define(buf, buf.name)} = {self.buffer_decl('T.alloc_buffer', buf, False)}")
            body = body.block.body
        self.stmt(body, 1)

    def buffer_decl(self, fn: str, buf: Buffer, dtype_always: bool, handle: str | None = None) -> str:
        shape = self.shape(buf.shape)
        args = ([handle] if handle else []) + [shape]
        if dtype_always or buf.dtype != "float32":
            args.append(json.dumps(buf.dtype))
        if buf.strides:
            args.append(f"strides={self.shape(buf.strides)}")
        if buf.scope != "global":
            args.append(f"scope={json.dumps(buf.scope)}")
        if buf.axis_separators:
            args.append(f"axis_separators={list(buf.axis_separators)}")
        return f"{fn}({', '.join(args)})"

    def shape(self, dims) -> str:
        parts = [self.expr(d) for d in dims]
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"

    def value(self, v) -> str:
        if isinstance(v, bool) or v is None:
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, E.PrimExpr):
            return self.expr(v)
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {self.value(x)}" for k, x in v.items()) + "}"
        return repr(v)

    # -- statements ------------------------------------------------------------------------
    def stmt(self, s, indent: int) -> None:
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise TypeError(f"the printer cannot print a {type(s).__name__}")
        method(s, indent)

    def stmt_SeqStmt(self, s: S.SeqStmt, indent: int) -> None:
        for x in s.seq:
            self.stmt(x, indent)

    def stmt_BufferStore(self, s: S.BufferStore, indent: int) -> None:
        target = f"{self.name_of(s.buffer)}[{self.indices(s.indices)}]"
        self.emit(indent, self.mark(s, f"{target} = {self.expr(s.value)}"))

    def stmt_For(self, s: S.For, indent: int) -> None:
        outer_names = set(self.used)
        self.loop_nest(s, indent)
        self.used = outer_names   # names defined inside the loop are free again after it

    def loop_nest(self, s: S.For, indent: int) -> None:
        loops = [s]
        while _grid_candidate(loops[-1]) and _grid_candidate(loops[-1].body):
            loops.append(loops[-1].body)
        if len(loops) > 1:
            # An underlined loop of a grid underlines its own name and extent only.
            names = ", ".join(self.mark(l, self.define(l.loop_var, l.loop_var.name)) for l in loops)
            extents = ", ".join(self.mark(l, self.expr(l.extent)) for l in loops)
            self.emit(indent, f"for {names} in T.grid({extents}):")
            for loop in loops:
                self.loop_ranges[id(loop.loop_var)] = S.Range(loop.min, loop.extent)
            self.stmt(loops[-1].body, indent + 1)
            return
        var = self.define(s.loop_var, s.loop_var.name)
        self.loop_ranges[id(s.loop_var)] = S.Range(s.min, s.extent)
        bounds = self.loop_bounds(s)
        if s.kind == "thread_binding":
            call = f"T.thread_binding({bounds}, thread={json.dumps(s.thread_binding)}"
        elif s.kind == "serial" and not s.annotations:
            call = f"range({bounds}"
        else:
            call = f"{_LOOP_FUNCS[s.kind]}({bounds}"
        if s.annotations:
            call += f", annotations={self.value(dict(s.annotations))}"
        self.emit(indent, self.mark(s, f"for {var} in {call}):"))
        self.stmt(s.body, indent + 1)

    def loop_bounds(self, s: S.For) -> str:
        if isinstance(s.min, E.IntImm) and s.min.value == 0:
            return self.expr(s.extent)
        from ..arith import simplify
        return f"{self.expr(s.min)}, {self.expr(simplify(s.min + s.extent))}"

    def stmt_BlockRealize(self, s: S.BlockRealize, indent: int) -> None:
        outer_names = set(self.used)
        self.block(s, indent)
        self.used = outer_names

    def block(self, s: S.BlockRealize, indent: int) -> None:
        block = s.block
        self.emit(indent, self.mark(block, self.mark(s, f"with T.block({json.dumps(block.name_hint)}):")))
        inner = indent + 1
        self.block_iters(s, inner)
        if not (isinstance(s.predicate, E.IntImm) and s.predicate.value == 1):
            self.emit(inner, f"T.where({self.expr(s.predicate)})")
        self.emit(inner, f"T.reads({', '.join(self.region(r) for r in block.reads)})")
        self.emit(inner, f"T.writes({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            self.emit(inner, f"T.block_attr({self.value(dict(block.annotations))})")
        for buf in block.alloc_buffers:
            self.emit(inner, f"{self.define(buf, buf.name)} = {self.buffer_decl('T.alloc_buffer', buf, False)}")
        for m in block.match_buffers:
            source = self.region(m.source)
            for v in free_vars((*m.buffer.shape, *m.buffer.strides)):   # a view's stride variables
                if id(v) not in self.names:
                    self.emit(inner, f"{self.define(v, v.name)} = T.{v.dtype}()")
            name = self.define(m.buffer, m.buffer.name)
            self.emit(inner, f"{name} = {self.buffer_decl('T.match_buffer', m.buffer, True, source)}")
        if block.init is not None:
            self.emit(inner, "with T.init():")
            self.stmt(block.init, inner + 1)
        self.stmt(block.body, inner)

    def block_iters(self, s: S.BlockRealize, indent: int) -> None:
        ivs = s.block.iter_vars
        if not ivs:
            return
        if self.remappable(s):
            kinds = "".join("S" if iv.iter_type == "spatial" else "R" for iv in ivs)
            names = ", ".join(self.define(iv.var, iv.var.name) for iv in ivs)
            values = ", ".join(self.expr(v) for v in s.iter_values)
            self.emit(indent, f'{names} = T.axis.remap("{kinds}", [{values}])')
            return
        for iv, value in zip(ivs, s.iter_values):
            dom = iv.dom
            if isinstance(dom.min, E.IntImm) and dom.min.value == 0:
                dom_text = self.expr(dom.extent)
            else:
                from ..arith import simplify
                dom_text = f"({self.expr(dom.min)}, {self.expr(simplify(dom.min + dom.extent))})"
            value_text = self.expr(value)
            name = self.define(iv.var, iv.var.name)
            self.emit(indent, f"{name} = T.axis.{iv.iter_type}({dom_text}, {value_text})")

    def remappable(self, s: S.BlockRealize) -> bool:
        """T.axis.remap is faithful when every value is a distinct loop variable whose loop range
        equals the iterator's domain."""
        from ..ir import structural_equal
        seen = set()
        for iv, v in zip(s.block.iter_vars, s.iter_values):
            rng = self.loop_ranges.get(id(v)) if isinstance(v, E.Var) else None
            if (iv.iter_type not in ("spatial", "reduce") or rng is None or id(v) in seen
                    or not structural_equal(rng.min, iv.dom.min)
                    or not structural_equal(rng.extent, iv.dom.extent)):
                return False
            seen.add(id(v))
        return True

    def region(self, r: S.BufferRegion) -> str:
        from ..arith import simplify
        parts = []
        for rng in r.region:
            if isinstance(rng.extent, E.IntImm) and rng.extent.value == 1:
                parts.append(self.expr(rng.min))
            else:
                parts.append(f"{self.expr(rng.min)}:{self.expr(simplify(rng.min + rng.extent))}")
        return f"{self.name_of(r.buffer)}[{', '.join(parts) or '()'}]"

    def stmt_IfThenElse(self, s: S.IfThenElse, indent: int) -> None:
        self.emit(indent, self.mark(s, f"if {self.expr(s.condition)}:"))
        self.stmt(s.then_case, indent + 1)
        if s.else_case is not None:
            self.emit(indent, "else:")
            self.stmt(s.else_case, indent + 1)

    def stmt_LetStmt(self, s: S.LetStmt, indent: int) -> None:
        value = self.expr(s.value)
        self.emit(indent, self.mark(s, f"{self.define(s.var, s.var.name)}: T.{s.var.dtype} = {value}"))
        self.stmt(s.body, indent)

    def stmt_Evaluate(self, s: S.Evaluate, indent: int) -> None:
        text = self.expr(s.value)
        if not (isinstance(s.value, E.Call) and text.startswith("T.")):   # a call stands alone
            text = f"T.evaluate({text})"
        self.emit(indent, self.mark(s, text))

    def stmt_Allocate(self, s: S.Allocate, indent: int) -> None:
        b = s.buffer
        self.emit(indent, self.mark(s, f"{self.define(b, b.name)} = T.allocate({self.shape(b.shape)}, "
                                       f"{json.dumps(b.dtype)}, {json.dumps(b.scope)})"))
        self.stmt(s.body, indent)

    def stmt_AllocateConst(self, s: S.AllocateConst, indent: int) -> None:
        b = s.buffer
        values = ", ".join(repr(v) for v in s.data)
        self.emit(indent, self.mark(s, f"{self.define(b, b.name)} = T.allocate_const([{values}], "
                                       f"{json.dumps(b.dtype)}, {self.shape(b.shape)})"))
        self.stmt(s.body, indent)

    def other(self, node) -> str:
        if isinstance(node, S.BufferRegion):
            return strip_marks(self.region(node))
        if isinstance(node, Buffer):
            return strip_marks(f"{self.name_of(node)}: {self.buffer_decl('T.Buffer', node, True)}")
        if isinstance(node, S.Range):
            return strip_marks(f"range({self.expr(node.min)}, {self.expr(node.min + node.extent)})")
        if isinstance(node, S.IterVar):
            return strip_marks(f"T.axis.{node.iter_type}({self.other(node.dom)}) -> {self.name_of(node.var)}")
        return f"<{type(node).__name__}>"

    # -- expressions -----------------------------------------------------------------------
def _is_root(body) -> bool:
    return (isinstance(body, S.BlockRealize) and body.block.name_hint == "root"
            and not body.block.iter_vars and body.block.init is None and not body.block.annotations
            and not body.block.match_buffers and isinstance(body.predicate, E.IntImm)
            and body.predicate.value == 1)


def _grid_candidate(s) -> bool:
    return (isinstance(s, S.For) and s.kind == "serial" and not s.annotations
            and isinstance(s.min, E.IntImm) and s.min.value == 0)


# The IR nodes print through this module: mlc_lab.ir sits below the script package and knows it
# only through this hook.
hooks.provide("script.printer", sys.modules[__name__])
