"""Printing expressions and names: the half of the printer that statements build on."""
from __future__ import annotations

import json
import math

from ..tir import dtype as dt
from ..tir import expr as E
from ..tir.buffer import BUFFER_DATA, BUFFER_ELEM_OFFSET
from .tir import OPAQUE_BUILTINS

MARK_OPEN, MARK_CLOSE = "\x01", "\x02"

# Python operator precedence, lowest first.
P_OR, P_AND, P_NOT, P_CMP, P_ADD, P_MUL, P_UNARY, P_ATOM = range(1, 9)
_BINOPS = {E.Add: ("+", P_ADD), E.Sub: ("-", P_ADD), E.Mul: ("*", P_MUL),
           E.FloorDiv: ("//", P_MUL), E.FloorMod: ("%", P_MUL),
           E.LT: ("<", P_CMP), E.LE: ("<=", P_CMP), E.GT: (">", P_CMP), E.GE: (">=", P_CMP),
           E.EQ: ("==", P_CMP), E.NE: ("!=", P_CMP), E.And: ("and", P_AND), E.Or: ("or", P_OR)}


def strip_marks(text: str) -> str:
    return text.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")


class ExprPrinter:
    """Names variables uniquely within their scope and prints expressions with the fewest
    parentheses Python's precedence allows. Nodes in ``underline`` are wrapped in marks that the
    statement printer turns into caret lines."""

    def __init__(self, underline=()):
        self.underline = {id(n) for n in underline}
        self.names: dict[int, str] = {}
        self.used: set[str] = set()

    def mark(self, node, text: str) -> str:
        return f"{MARK_OPEN}{text}{MARK_CLOSE}" if id(node) in self.underline else text

    # -- names -----------------------------------------------------------------------------
    def define(self, obj, hint: str) -> str:
        base = hint if hint.isidentifier() else "v_" + "".join(c if c.isalnum() else "_" for c in hint)
        name, k = base, 0
        while name in self.used or name in ("T", "I", "R"):
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        self.names[id(obj)] = name
        return name

    def name_of(self, obj) -> str:
        if id(obj) not in self.names:
            return self.define(obj, obj.name)
        return self.names[id(obj)]

    def indices(self, idx) -> str:
        return ", ".join(self.expr(i) for i in idx) if idx else "()"   # A[()] for 0-d buffers

    def expr(self, e, parent_prec: int = 0) -> str:
        text, prec = self.expr_prec(e)
        if prec < parent_prec:
            text = f"({text})"
        return self.mark(e, text)

    def expr_prec(self, e) -> tuple[str, int]:
        if isinstance(e, E.Var):
            return self.name_of(e), P_ATOM
        if isinstance(e, E.IntImm):
            return _int_text(e)
        if isinstance(e, E.FloatImm):
            return _float_text(e), P_ATOM
        if isinstance(e, E.StringImm):
            return json.dumps(e.value), P_ATOM
        op = _BINOPS.get(type(e))
        if op is not None and not (isinstance(e, E.Div)):
            symbol, prec = op
            left_prec = prec + 1 if prec == P_CMP else prec
            return f"{self.expr(e.a, left_prec)} {symbol} {self.expr(e.b, prec + 1)}", prec
        if isinstance(e, E.Div):
            if dt.is_float(e.dtype):
                return f"{self.expr(e.a, P_MUL)} / {self.expr(e.b, P_MUL + 1)}", P_MUL
            return f"T.truncdiv({self.expr(e.a)}, {self.expr(e.b)})", P_ATOM
        if isinstance(e, E.Mod):
            return f"T.truncmod({self.expr(e.a)}, {self.expr(e.b)})", P_ATOM
        if isinstance(e, (E.Min, E.Max)):
            return f"T.{type(e).__name__.lower()}({self.expr(e.a)}, {self.expr(e.b)})", P_ATOM
        if isinstance(e, E.Not):
            return f"not {self.expr(e.a, P_NOT)}", P_NOT
        if isinstance(e, E.Select):
            args = ", ".join(self.expr(x) for x in (e.condition, e.true_value, e.false_value))
            return f"T.Select({args})", P_ATOM
        if isinstance(e, E.Cast):
            return f"T.Cast({json.dumps(e.dtype)}, {self.expr(e.value)})", P_ATOM
        if isinstance(e, E.BufferLoad):
            return f"{self.name_of(e.buffer)}[{self.indices(e.indices)}]", P_ATOM
        if isinstance(e, E.Call) and e.op in (BUFFER_DATA, BUFFER_ELEM_OFFSET):
            field = "data" if e.op == BUFFER_DATA else "elem_offset"
            return f"{self.name_of(e.args[0].buffer)}.{field}", P_ATOM
        if isinstance(e, E.Call) and e.op == "call_extern" and _builtin_name(e) == "type_annotation" \
                and len(e.args) == 1:
            return f"T.type_annotation({json.dumps(e.dtype)})", P_ATOM
        if isinstance(e, E.Call) and e.op == "call_extern" and _builtin_name(e) in OPAQUE_BUILTINS:
            args = [self.expr(a) for a in e.args[1:]]
            dtype = [] if e.dtype == "handle" else [f"dtype={json.dumps(e.dtype)}"]
            return f"T.{e.args[0].value}({', '.join(args + dtype)})", P_ATOM
        if isinstance(e, E.Call) and e.op == "reinterpret" and len(e.args) == 1:
            return f"T.reinterpret({self.expr(e.args[0])}, dtype={json.dumps(e.dtype)})", P_ATOM
        if isinstance(e, E.Call) and e.op == "call_extern":
            args = ", ".join(self.expr(a) for a in e.args)
            return f"T.call_extern({args}, dtype={json.dumps(e.dtype)})", P_ATOM
        if isinstance(e, E.Call):
            return f"T.{e.op}({', '.join(self.expr(a) for a in e.args)})", P_ATOM
        if isinstance(e, E.Ramp):
            return f"T.Ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", P_ATOM
        if isinstance(e, E.Broadcast):
            return f"T.Broadcast({self.expr(e.value)}, {e.lanes})", P_ATOM
        raise TypeError(f"the printer cannot print a {type(e).__name__}")


def _builtin_name(call: E.Call) -> str | None:
    """The function a ``T.call_extern`` calls, when given as a string."""
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, E.StringImm) else None


def _int_text(e: E.IntImm) -> tuple[str, int]:
    if e.dtype == "bool":
        return ("True" if e.value else "False"), P_ATOM
    if e.dtype == "int32":
        return str(e.value), (P_ATOM if e.value >= 0 else P_UNARY)
    return f"T.{e.dtype}({e.value})", P_ATOM


def _float_text(e: E.FloatImm) -> str:
    v = e.value
    if math.isnan(v) or math.isinf(v):
        return f'T.{e.dtype}("{"nan" if math.isnan(v) else "inf" if v > 0 else "-inf"}")'
    text = repr(v)
    return f"T.{e.dtype}({text[:-2] if text.endswith('.0') else text})"


def caret_line(line: str) -> str:
    if MARK_OPEN not in line:
        return ""
    marks, col, depth = [], 0, 0
    for ch in line:
        if ch == MARK_OPEN:
            depth += 1
        elif ch == MARK_CLOSE:
            depth -= 1
        else:
            marks.append("^" if depth else " ")
            col += 1
    return "".join(marks).rstrip()
