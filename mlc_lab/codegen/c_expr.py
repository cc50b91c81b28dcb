"""Expression half of the C-family printer (``c_source``): PrimExpr -> C text.

Every ``visit_<Node>`` returns ``(text, precedence)``; ``expr(e, least)`` parenthesises the text
when it binds less tightly than its place needs. So ``(a + b) * c`` keeps its parentheses and
``a + b * c`` gets none. Integer floor division and modulo become plain ``/`` and ``%`` where
both operands are provably non-negative (``mlc_lab.arith.int_bound`` under the loop and thread
ranges), and a helper such as ``floordiv_int32(a, b)``, exact for negative values, elsewhere.
"""
from __future__ import annotations

from ..arith import int_bound
from ..tir import dtype as dt
from ..tir import expr as E
from ..tir.buffer import Buffer
from .llvm import CodegenError


class CSourceError(CodegenError):
    """The kernel has something C source cannot say; the message names it."""


# C operator precedence, higher binds tighter.
PRIMARY, UNARY, MUL, ADD, REL, EQUAL, AND, OR, COND = 16, 14, 13, 12, 10, 9, 5, 4, 3
_BINARY = {E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL), E.Div: ("/", MUL),
           E.Mod: ("%", MUL), E.LT: ("<", REL), E.LE: ("<=", REL), E.GT: (">", REL),
           E.GE: (">=", REL), E.EQ: ("==", EQUAL), E.NE: ("!=", EQUAL), E.And: ("&&", AND),
           E.Or: ("||", OR)}
# The least precedence an operand may have unparenthesised, where it is more than C requires.
_OPERAND = {EQUAL: REL + 1, OR: AND + 1}
_MATH_OPS = (E.FloorDiv, E.FloorMod, E.Mod, E.Min, E.Max)   # float ones call math functions
# Floor division and modulo from C's truncating ones: a non-zero remainder whose sign differs
# from the divisor's means C rounded up (toward zero), one step past the floor.
_HELPER = {"floordiv": "{t} q = a / b;\n  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;",
           "floormod": "{t} r = a % b;\n  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;"}


class ExprPrinter:
    """Mixin of CSourcePrinter: C text of expressions. Dialects set the class attributes; the
    printer holds ``names`` (Var/Buffer -> (text, precedence)), ``ranges`` (Var -> Range),
    ``helpers`` (name -> C definition) and ``features`` (dtypes needing a header)."""

    TYPES: dict = {}                 # IR scalar dtype -> C type
    MEMORY_TYPES: dict = {}          # where a type stored in memory differs (OpenCL's bool)
    INT_SUFFIX: dict = {}            # dtype -> literal suffix ("LL"); other narrow ints are cast
    FLOAT32_SUFFIX = ""              # "f" where float32 math has its own names (expf)
    HELPER_QUALIFIER = "static inline"
    # Intrinsic -> C math function (generic name; FLOAT32_SUFFIX is added for float32).
    MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
            "fabs": "fabs", "abs": "fabs", "floor": "floor", "ceil": "ceil", "round": "rint",
            "sin": "sin", "cos": "cos", "erf": "erf", "pow": "pow", "fmod": "fmod", "min": "fmin",
            "max": "fmax"}

    def float_special(self, value: float, dtype: str) -> str:
        """inf, -inf or nan as a ``dtype`` constant."""
        raise NotImplementedError

    def ctype(self, dtype: str, in_memory: bool = False) -> str:
        elem = dt.element_of(dtype)
        if dt.lanes(dtype) > 1:
            raise CSourceError(f"a {dtype} value has no scalar C type; vector values appear only "
                               "in stores and lets, which are printed lane by lane")
        if elem not in self.TYPES:
            raise CSourceError(f"no C type for {dtype} values")
        if elem in ("float16", "float64"):
            self.features.add(elem)
        return (in_memory and self.MEMORY_TYPES.get(elem)) or self.TYPES[elem]

    def math_call(self, op: str, args: list, dtype: str) -> str:
        suffix = self.FLOAT32_SUFFIX if dt.element_of(dtype) == "float32" else ""
        return f"{self.MATH[op]}{suffix}({', '.join(args)})"

    # -- expressions --------------------------------------------------------------------------
    def expr(self, e, precedence: int = 0) -> str:
        """``e`` as C, parenthesised when it binds less tightly than ``precedence``."""
        text, own = self.visit(e)
        return f"({text})" if own < precedence else text

    def buffer(self, buffer: Buffer) -> str:
        return self.names[buffer][0]

    def visit_Var(self, e):
        if e not in self.names:
            what = "vector variable" if dt.lanes(e.dtype) > 1 else "variable"
            raise CSourceError(f"the kernel uses the {what} {e.name} where C has no value for it")
        return self.names[e]

    def visit_IntImm(self, e):
        if dt.is_bool(e.dtype):
            return ("true" if e.value else "false"), PRIMARY
        elem, value = dt.element_of(e.dtype), e.value
        if elem == "int32" and value == -2 ** 31:
            text = "(-2147483647 - 1)"
        elif elem in ("int32", *self.INT_SUFFIX):
            text = f"{value}{self.INT_SUFFIX.get(elem, '')}"
        else:
            text = f"({self.ctype(e.dtype)}){value}"
        return text, (UNARY if text.startswith(("-", "(")) else PRIMARY)

    def visit_FloatImm(self, e):
        v = e.value
        if v != v or v in (float("inf"), float("-inf")):
            text = self.float_special(v, e.dtype)
        else:
            text = repr(float(v)) + ("f" if dt.element_of(e.dtype) == "float32" else "")
            if dt.element_of(e.dtype) == "float16":
                text = f"({self.ctype(e.dtype)}){text}f"
        return text, (UNARY if text.startswith(("-", "(")) else PRIMARY)

    def visit_StringImm(self, e):
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"') + '"', PRIMARY

    def visit_Cast(self, e):
        return f"({self.ctype(e.dtype)}){self.expr(e.value, UNARY)}", UNARY

    def visit_BinaryOp(self, e):
        if dt.lanes(e.dtype) > 1:
            raise CSourceError(f"the vector expression {e} is used outside a store")
        if dt.element_of(e.dtype) == "float16" and type(e) in _MATH_OPS:   # through float
            wide = type(e)(E.Cast("float32", e.a), E.Cast("float32", e.b))
            return self.visit_Cast(E.Cast(e.dtype, wide))
        if type(e) in (E.FloorDiv, E.FloorMod):
            return self.floor_op(e)
        if type(e) in (E.Min, E.Max):
            op, args = ("min" if type(e) is E.Min else "max"), [self.expr(e.a), self.expr(e.b)]
            if dt.is_float(e.dtype):
                return self.math_call(op, args, e.dtype), PRIMARY
            return f"{op}({', '.join(args)})", PRIMARY
        if type(e) is E.Mod and dt.is_float(e.dtype):
            return self.math_call("fmod", [self.expr(e.a), self.expr(e.b)], e.dtype), PRIMARY
        op, own = _BINARY[type(e)]
        if type(e) is E.Sub and isinstance(e.a, (E.IntImm, E.FloatImm)) and e.a.value == 0:
            operand = self.expr(e.b, UNARY)
            return ("-" + (f"({operand})" if operand.startswith("-") else operand)), UNARY
        least = _OPERAND.get(own, own)
        return f"{self.expr(e.a, least)} {op} {self.expr(e.b, max(least, own + 1))}", own

    def floor_op(self, e):
        name = "floordiv" if type(e) is E.FloorDiv else "floormod"
        if dt.is_float(e.dtype):
            quotient = self.math_call("floor", [self.expr(E.Div(e.a, e.b))], e.dtype)
            if name == "floordiv":
                return quotient, PRIMARY
            return f"{self.expr(e.a, ADD)} - {quotient} * {self.expr(e.b, MUL + 1)}", ADD
        a_low, b_low = int_bound(e.a, self.ranges)[0], int_bound(e.b, self.ranges)[0]
        unsigned = dt.element_of(e.dtype).startswith("uint")
        if unsigned or (a_low is not None and a_low >= 0 and b_low is not None and b_low > 0):
            op = "/" if name == "floordiv" else "%"
            return f"{self.expr(e.a, MUL)} {op} {self.expr(e.b, MUL + 1)}", MUL
        helper = f"{name}_{dt.element_of(e.dtype)}"
        if helper not in self.helpers:
            ctype = self.ctype(e.dtype)
            signature = f"{self.HELPER_QUALIFIER} {ctype} {helper}({ctype} a, {ctype} b)"
            self.helpers[helper] = f"{signature} {{\n  {_HELPER[name].format(t=ctype)}\n}}"
        return f"{helper}({self.expr(e.a)}, {self.expr(e.b)})", PRIMARY

    def visit_Not(self, e):
        return "!" + self.expr(e.a, UNARY), UNARY

    def visit_Select(self, e):
        return (f"{self.expr(e.condition, OR)} ? {self.expr(e.true_value, COND + 1)} : "
                f"{self.expr(e.false_value, COND)}"), COND

    def visit_BufferLoad(self, e):
        if dt.lanes(e.indices[0].dtype) > 1:
            raise CSourceError(f"the vector load {e} is used outside a store")
        return f"{self.buffer(e.buffer)}[{self.expr(e.indices[0])}]", PRIMARY

    def visit_Call(self, e):
        if e.op == "if_then_else":   # C's ?: evaluates only the chosen side, as a guard needs
            return self.visit_Select(E.Select(*e.args))
        if e.op == "call_extern":
            return f"{e.args[0].value}({', '.join(self.expr(a) for a in e.args[1:])})", PRIMARY
        if e.op == "likely":   # a hint only: the value is the condition's
            return self.visit(e.args[0])
        if e.op not in E.INTRINSICS:
            raise CSourceError(f"no C spelling for the intrinsic T.{e.op} ({e})")
        if dt.element_of(e.dtype) == "float16":   # half math goes through float
            wide = E.Call("float32", e.op, tuple(E.Cast("float32", a) for a in e.args))
            return self.visit_Cast(E.Cast(e.dtype, wide))
        if e.op == "abs" and not dt.is_float(e.dtype):
            x = e.args[0]
            return self.visit_Select(E.Select(x < E.const(0, x.dtype), E.const(0, x.dtype) - x, x))
        if e.op == "sigmoid":
            one = self.expr(E.const(1.0, e.dtype))
            exp = self.math_call("exp", [self.expr(E.Sub(E.const(0, e.dtype), e.args[0]))], e.dtype)
            return f"{one} / ({one} + {exp})", MUL
        return self.math_call(e.op, [self.expr(a) for a in e.args], e.dtype), PRIMARY

    def visit_Ramp(self, e):
        raise CSourceError(f"the vector index {e} is used outside a load or store")

    visit_Broadcast = visit_Ramp
