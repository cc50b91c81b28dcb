"""C-family source for GPU kernels: the part CUDA C and OpenCL C share.

A ``CSourcePrinter`` turns one kernel of a ``DeviceProgram`` (flat lowered TIR, see
``mlc_lab.tir.transform.split_host_device``) into C text. Dialects subclass it and fill in the
hooks: type names, the kernel signature, thread indices, barriers, vector accesses, math names.

Rules the printer keeps:

* Operators get C's precedence; parentheses appear only where C needs them (``(a + b) * c``),
  plus around ``&&`` inside ``||`` and around ``?:``, for the reader.
* ``//`` and ``%`` on integers round toward minus infinity in the IR but toward zero in C.
  Where bound analysis (``mlc_lab.arith.int_bound``, given the loop and thread ranges) proves
  both operands non-negative the two agree, and plain ``/`` ``%`` are printed; elsewhere a
  small helper (``floordiv_int32(a, b)``) defined at the top of the source gives the exact
  answer for negative values too.
* A vector store (its index a ``Ramp``) becomes one ``float4``/``float2`` access when its lanes
  are contiguous (stride 1) and its base is provably a multiple of the lane count, so the
  address is aligned; otherwise it is written lane by lane. Vector loads follow the same rule.
* Names come from the IR; a name already visible in the current C scope gets a ``_1`` suffix.
"""
from __future__ import annotations

from ..arith import int_bound, linear_form, simplify
from ..tir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.functor import StmtExprMutator, StmtExprVisitor
from ..tir.stmt_functor import loads_in, stores_in
from ..tir.transform.inject_sync import is_sync
from .llvm import CodegenError

# C operator precedence, higher binds tighter.
PRIMARY, UNARY, MUL, ADD, REL, EQUAL, AND, OR, COND = 16, 14, 13, 12, 10, 9, 5, 4, 3
_BINARY = {E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL), E.Div: ("/", MUL),
           E.Mod: ("%", MUL), E.LT: ("<", REL), E.LE: ("<=", REL), E.GT: (">", REL),
           E.GE: (">=", REL), E.EQ: ("==", EQUAL), E.NE: ("!=", EQUAL), E.And: ("&&", AND),
           E.Or: ("||", OR)}
# The least precedence an operand may have unparenthesised, where it is more than C requires.
_OPERAND = {EQUAL: REL + 1, OR: AND + 1}
# Floor division and modulo from C's truncating ones: a non-zero remainder whose sign differs
# from the divisor's means C rounded up (toward zero), one step past the floor.
_HELPER = {"floordiv": "{t} q = a / b;\n  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;",
           "floormod": "{t} r = a % b;\n  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;"}
_RESERVED = frozenset("auto break case char const continue default do double else enum extern float "
                      "for goto if inline int long register restrict return short signed sizeof "
                      "static struct switch typedef union unsigned void volatile while bool true "
                      "false half main min max kernel global local".split())
_LANE_FIELDS = "xyzw"


class CSourcePrinter(StmtExprVisitor):
    """Prints kernels; one printer per source file, so helpers are defined once for all."""

    TYPES: dict = {}                 # IR scalar dtype -> C type
    MEMORY_TYPES: dict = {}          # where a type stored in memory differs (OpenCL's bool)
    INT_SUFFIX: dict = {}            # dtype -> literal suffix ("LL"); other narrow ints are cast
    FLOAT32_SUFFIX = ""              # "f" where float32 math has its own names (expf)
    VECTOR_LANES = {"float32": (2, 4), "int32": (2, 4), "float64": (2,)}
    HELPER_QUALIFIER = "static inline"
    INDENT = "  "
    # Intrinsic -> C math function (generic name; FLOAT32_SUFFIX is added for float32).
    MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
            "fabs": "fabs", "abs": "fabs", "floor": "floor", "ceil": "ceil", "round": "rint",
            "sin": "sin", "cos": "cos", "erf": "erf", "pow": "pow", "fmod": "fmod", "min": "fmin",
            "max": "fmax"}

    def __init__(self):
        self.helpers: dict[str, str] = {}
        self.features: set[str] = set()   # dtypes the source uses that need a header or pragma

    # -- what a dialect says ------------------------------------------------------------------
    def kernel_open(self, kernel, params: list) -> str:
        """The kernel's signature and ``{``; ``params`` holds (C type, name, is a buffer)."""
        raise NotImplementedError

    def thread_index(self, tag: str) -> str: raise NotImplementedError
    def barrier(self) -> str: raise NotImplementedError
    def array(self, scope: str, ctype: str, name: str, size: int, aligned: bool) -> str: raise NotImplementedError
    def vector_load(self, vtype: str, pointer: str) -> str: raise NotImplementedError
    def vector_store(self, vtype: str, pointer: str, value: str) -> str: raise NotImplementedError
    def vector_make(self, vtype: str, lanes: list) -> str: raise NotImplementedError
    def float_special(self, value: float, dtype: str) -> str: raise NotImplementedError

    def ctype(self, dtype: str, in_memory: bool = False) -> str:
        elem = dt.element_of(dtype)
        if dt.lanes(dtype) > 1:
            raise CodegenError(f"a {dtype} value has no scalar C type; vector values appear only "
                               "in stores and lets, which are printed lane by lane")
        if elem in ("float16", "float64"):
            self.features.add(elem)
        return (in_memory and self.MEMORY_TYPES.get(elem)) or self.TYPES[elem]

    def math_call(self, op: str, args: list, dtype: str) -> str:
        suffix = self.FLOAT32_SUFFIX if dt.element_of(dtype) == "float32" else ""
        return f"{self.MATH[op]}{suffix}({', '.join(args)})"

    # -- kernels ------------------------------------------------------------------------------
    def kernel(self, kernel) -> str:
        """The C text of one kernel: signature, shared arrays, body."""
        self.lines, self.depth, self.scopes = [], 1, [set()]
        self.names: dict = {}      # Var or Buffer (by identity) -> (C text, precedence)
        self.lane_vars: dict = {}  # id of a vector Var or load -> the scalar Vars of its lanes
        self.ranges: dict = {}     # Var -> Range, for bound analysis
        extents = dict(zip(("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x",
                            "threadIdx.y", "threadIdx.z"), kernel.grid + kernel.block))
        for tag, var in kernel.thread_vars.items():
            self.names[var] = (self.thread_index(tag), UNARY)
            self.ranges[var] = S.Range(E.const(0), E.const(extents[tag]))
        params = [(self.ctype(p.dtype, in_memory=isinstance(p, Buffer)), self.bind(p, p.name),
                   isinstance(p, Buffer)) for p in kernel.params]
        self.vectored = {id(x.buffer) for x in loads_in(kernel.body) + stores_in(kernel.body)
                         if self.vector_type(x.buffer, x.indices[0]) is not None}
        for buffer in kernel.shared:   # one per block: declared once, at the top of the kernel
            self.declare(buffer)
        self.visit(kernel.body)
        return "\n".join([self.kernel_open(kernel, params), *self.lines, "}"])

    def line(self, text: str) -> None:
        self.lines.append(self.INDENT * self.depth + text)

    def open(self, header: str) -> None:
        """``header {``, and a C scope for the names bound until ``close``."""
        self.line(header + " {")
        self.depth += 1
        self.scopes.append(set())

    def close(self, reopen: str | None = None) -> None:
        self.scopes.pop()
        self.depth -= 1
        if reopen is None:
            self.line("}")
        else:
            self.open(reopen)

    def bind(self, node, name: str) -> str:
        """A C name for ``node`` (a Var or Buffer), unique among the names in scope."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
        if base[0].isdigit() or base in _RESERVED or base in self.TYPES.values():
            base = "_" + base
        visible = set().union(*self.scopes)
        text, n = base, 0
        while text in visible:
            n += 1
            text = f"{base}_{n}"
        self.scopes[-1].add(text)
        self.names[node] = (text, PRIMARY)
        return text

    # -- statements ---------------------------------------------------------------------------
    def visit_SeqStmt(self, s):
        for stmt in s.seq:
            self.visit(stmt)

    def visit_For(self, loop):
        var = loop.loop_var
        self.ranges[var] = S.Range(loop.min, loop.extent)
        start, end = self.expr(loop.min), self.expr(simplify(loop.min + loop.extent))
        if loop.kind in ("unrolled", "vectorized"):
            self.line("#pragma unroll")
        self.scopes.append(set())   # the loop variable's scope, which the header opens
        name = self.bind(var, var.name)
        self.open(f"for ({self.ctype(var.dtype)} {name} = {start}; {name} < {end}; ++{name})")
        self.visit(loop.body)
        self.close()
        self.scopes.pop()

    def visit_IfThenElse(self, s):
        self.open(f"if ({self.expr(s.condition)})")
        self.visit(s.then_case)
        if s.else_case is not None:
            self.close(reopen="} else")
            self.visit(s.else_case)
        self.close()

    def visit_LetStmt(self, s):
        lanes = dt.lanes(s.value.dtype)
        if lanes == 1:
            value = self.expr(s.value)
            self.ranges[s.var] = S.Range(s.value, E.const(1, s.value.dtype))
            self.line(f"{self.ctype(s.var.dtype)} {self.bind(s.var, s.var.name)} = {value};")
        else:   # one scalar per lane, which lane reads of the vector Var find
            lane_vars = tuple(E.Var(f"{s.var.name}_{lane}", dt.element_of(s.var.dtype))
                              for lane in range(lanes))
            for lane, var in enumerate(lane_vars):
                value = self.expr(self.lane(s.value, lane))
                self.line(f"{self.ctype(var.dtype)} {self.bind(var, var.name)} = {value};")
            self.lane_vars[id(s.var)] = lane_vars
        self.visit(s.body)

    def visit_Allocate(self, s):
        buffer = s.buffer
        if not buffer.scope.startswith("shared"):   # shared arrays are declared at the top
            self.declare(buffer)
        self.visit(s.body)

    def declare(self, buffer: Buffer) -> None:
        name = self.bind(buffer, buffer.name)
        self.line(self.array(buffer.scope.partition(".")[0], self.ctype(buffer.dtype, True), name,
                             int(buffer.shape[0].value), id(buffer) in self.vectored))

    def visit_Evaluate(self, s):
        if is_sync(s):
            self.line(self.barrier())
        elif isinstance(s.value, E.Call):
            self.line(self.expr(s.value) + ";")

    def visit_BufferStore(self, s):
        index = s.indices[0]
        if dt.lanes(index.dtype) == 1:
            self.line(f"{self.buffer(s.buffer)}[{self.expr(index)}] = {self.expr(s.value)};")
            return
        vtype = self.vector_type(s.buffer, index)
        value = s.value
        if vtype is not None and isinstance(value, E.BufferLoad) and \
                self.vector_type(value.buffer, value.indices[0]) == vtype:   # a vector copy
            load = self.vector_load(vtype, self.pointer(value.buffer, value.indices[0].base))
            self.line(self.vector_store(vtype, self.pointer(s.buffer, index.base), load))
            return
        self.load_vectors(value)
        if vtype is not None:
            lanes = [self.expr(self.lane(value, lane)) for lane in range(index.lanes)]
            self.line(self.vector_store(vtype, self.pointer(s.buffer, index.base),
                                        self.vector_make(vtype, lanes)))
            return
        # Lane by lane. Each lane reads only its own element of the buffer it writes (the
        # vectorizer makes sure), so storing one lane cannot change what another computes.
        for lane in range(dt.lanes(index.dtype)):
            self.visit_BufferStore(S.BufferStore(s.buffer, self.lane(value, lane),
                                                 (self.lane(index, lane),)))

    # -- vectors ------------------------------------------------------------------------------
    def vector_type(self, buffer: Buffer, index) -> str | None:
        """``float4`` etc. where ``buffer[index]`` is one aligned vector access, else None."""
        if not (isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm)
                and index.stride.value == 1):
            return None
        elem = dt.element_of(buffer.dtype)
        if index.lanes not in self.VECTOR_LANES.get(elem, ()):
            return None
        lin = linear_form(index.base)
        if lin.const % index.lanes or any(c % index.lanes for _, c in lin.terms.values()):
            return None
        return f"{self.TYPES[elem]}{index.lanes}"

    def load_vectors(self, value) -> None:
        """Reads each aligned vector load in ``value`` into a vector temporary, whose fields
        (``A_vec.x`` ...) then stand for the load's lanes."""
        for load in loads_in(value):
            vtype = self.vector_type(load.buffer, load.indices[0])
            if vtype is None or id(load) in self.lane_vars:
                continue
            temp = E.Var(f"{load.buffer.name}_vec", load.dtype)
            text = self.vector_load(vtype, self.pointer(load.buffer, load.indices[0].base))
            self.line(f"{vtype} {self.bind(temp, temp.name)} = {text};")
            lane_vars = tuple(E.Var(temp.name, dt.element_of(load.dtype))
                              for _ in range(dt.lanes(load.dtype)))
            for lane, var in enumerate(lane_vars):
                self.names[var] = (f"{self.names[temp][0]}.{_LANE_FIELDS[lane]}", PRIMARY)
            self.lane_vars[id(load)] = lane_vars

    def lane(self, e, lane: int):
        """Lane ``lane`` of the vector expression ``e``, as a scalar expression."""
        return _Lane(lane, self.lane_vars).visit(e)

    def pointer(self, buffer: Buffer, base) -> str:
        offset = self.expr(base, MUL)
        return self.buffer(buffer) if offset == "0" else f"{self.buffer(buffer)} + {offset}"

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
            raise CodegenError(f"the kernel uses the {what} {e.name} where C has no value for it")
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
            raise CodegenError(f"the vector expression {e} is used outside a store")
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
            quotient = self.math_call("floor", [f"{self.expr(e.a, MUL)} / {self.expr(e.b, MUL + 1)}"], e.dtype)
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
            self.helpers[helper] = (f"{self.HELPER_QUALIFIER} {ctype} {helper}({ctype} a, {ctype} b) {{\n"
                                    f"  {_HELPER[name].format(t=ctype)}\n}}")
        return f"{helper}({self.expr(e.a)}, {self.expr(e.b)})", PRIMARY

    def visit_Not(self, e):
        return "!" + self.expr(e.a, UNARY), UNARY

    def visit_Select(self, e):
        return (f"{self.expr(e.condition, OR)} ? {self.expr(e.true_value, COND + 1)} : "
                f"{self.expr(e.false_value, COND)}"), COND

    def visit_BufferLoad(self, e):
        if dt.lanes(e.indices[0].dtype) > 1:
            raise CodegenError(f"the vector load {e} is used outside a store")
        return f"{self.buffer(e.buffer)}[{self.expr(e.indices[0])}]", PRIMARY

    def visit_Call(self, e):
        if e.op == "if_then_else":   # C's ?: evaluates only the chosen side, as a guard needs
            return self.visit_Select(E.Select(*e.args))
        if e.op == "call_extern":
            return f"{e.args[0].value}({', '.join(self.expr(a) for a in e.args[1:])})", PRIMARY
        if e.op not in E.INTRINSICS:
            raise CodegenError(f"no C spelling for the intrinsic T.{e.op} ({e})")
        if dt.element_of(e.dtype) == "float16":   # half math goes through float
            wide = E.Call("float32", e.op, tuple(E.Cast("float32", a) for a in e.args))
            return self.visit_Cast(E.Cast(e.dtype, wide))
        if e.op == "abs" and not dt.is_float(e.dtype):
            x = e.args[0]
            return self.visit_Select(E.Select(x < E.const(0, x.dtype), E.const(0, x.dtype) - x, x))
        if e.op == "sigmoid":
            one = self.expr(E.const(1.0, e.dtype))
            exp = self.math_call("exp", ["-" + self.expr(e.args[0], UNARY)], e.dtype)
            return f"{one} / ({one} + {exp})", MUL
        return self.math_call(e.op, [self.expr(a) for a in e.args], e.dtype), PRIMARY

    def visit_Ramp(self, e):
        raise CodegenError(f"the vector index {e} is used outside a load or store")

    visit_Broadcast = visit_Ramp


class _Lane(StmtExprMutator):
    """One lane of a vector expression. ``lane_vars`` maps a vector let variable or a vector load
    already read into a temporary (by id) to the scalar Vars that hold its lanes."""

    def __init__(self, lane: int, lane_vars: dict):
        super().__init__()
        self.lane, self.lane_vars = lane, lane_vars

    def visit_Var(self, e):
        return self.lane_vars[id(e)][self.lane] if id(e) in self.lane_vars else e

    def visit_Ramp(self, e):
        return simplify(self.visit(e.base) + self.visit(e.stride) * self.lane)

    def visit_Broadcast(self, e):
        return self.visit(e.value)

    def visit_BufferLoad(self, e):
        if id(e) in self.lane_vars:
            return self.lane_vars[id(e)][self.lane]
        return E.BufferLoad(e.buffer, tuple(self.visit(i) for i in e.indices))

    def visit_Cast(self, e):
        return E.Cast(dt.element_of(e.dtype), self.visit(e.value))

    def visit_Call(self, e):
        return E.Call(dt.element_of(e.dtype), e.op, tuple(self.visit(a) for a in e.args))
