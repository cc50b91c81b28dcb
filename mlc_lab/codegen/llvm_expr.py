"""Expression half of the LLVM code generator: PrimExpr -> llvmlite values.

Integer semantics follow TVM: Div/Mod truncate, FloorDiv/FloorMod round toward minus infinity;
a division by a zero integer yields 0 (numpy's answer) instead of trapping. Bools are i1 in
registers and one byte in memory.
"""
from __future__ import annotations

import contextlib
import functools

import llvmlite.ir as ir

from ..tir import dtype as dt
from ..tir import expr as E
from .llvm_vmath import erf_f32, exp_f32, tanh_f32
from ..tir.buffer import BUFFER_DATA
from ..tir.extern import extern_math
from .llvm_extern import POINTER_BUILTINS, ExternCalls

_FLOATS = {"float16": ir.HalfType(), "float32": ir.FloatType(), "float64": ir.DoubleType()}

# float32 vector functions computed lane by lane in LLVM IR (llvm_vmath), not by a libm call per lane
VECTOR_MATH = {"exp": exp_f32, "tanh": tanh_f32, "erf": erf_f32}


def scalar_type(dtype: str, in_memory: bool = False) -> ir.Type:
    elem = dt.element_of(dtype)
    if elem in _FLOATS:
        return _FLOATS[elem]
    if elem == "bool":
        return ir.IntType(8 if in_memory else 1)
    if elem == "handle":
        return ir.PointerType()
    return ir.IntType(dt.bits(elem))


def value_type(dtype: str, in_memory: bool = False) -> ir.Type:
    elem = scalar_type(dtype, in_memory)
    lanes = dt.lanes(dtype)
    return elem if lanes == 1 else ir.VectorType(elem, lanes)


def _unsigned(dtype: str) -> bool:
    return dt.element_of(dtype).startswith("uint") or dt.is_bool(dtype)


# Float intrinsics that LLVM knows (vector forms included); the rest call libm per lane.
_LLVM_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
              "floor": "floor", "ceil": "ceil", "fabs": "fabs", "round": "roundeven", "pow": "pow"}
_LIBM = {"tanh": "tanh", "erf": "erf"}
_CMP = {"LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==", "NE": "!="}


def _mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    return {"float": "f32", "double": "f64", "half": "f16"}.get(str(t), str(t))


class ExprEmitter(ExternCalls):
    """Mixin of FunctionEmitter: ``expr(e)`` emits ``e`` at the builder's position.

    A pure expression (no load, no call) is emitted once per scope: unrolled and vectorized
    bodies repeat the same index arithmetic many times, and emitting it again would only give
    LLVM more to parse and to fold back together. The value of such an expression is kept
    until the end of the innermost scope (``cse_scope``: a loop body, a branch, a let body)
    that was open when it was emitted, so a cached value always dominates its uses and a
    variable bound again (a sibling loop over the same variable) never sees a stale value."""

    _cse_values: dict = None   # structural id -> llvmlite value, for the open scopes

    def cse_values(self) -> dict:
        """The values remembered in the open scopes (key -> llvmlite value)."""
        values = self._cse_values
        if values is None:
            values = self._cse_values = {}
            self._cse_log, self._cse_ids, self._cse_memo = [], {}, {}
        return values

    def expr(self, e: E.PrimExpr):
        values = self._cse_values
        if values is None:
            values = self.cse_values()
        key = self._cse_key(e)
        if key is not None:
            value = values.get(key)
            if value is not None:
                return value
        method = _EXPR_METHODS.get((type(self), type(e)))
        if method is None:
            method = _expr_method(type(self), type(e))
            if method is None:
                raise NotImplementedError(f"the llvm backend cannot compile {type(e).__name__} "
                                          f"expressions ({e})")
        value = method(self, e)
        if key is not None and not isinstance(e, E.Var):
            values[key] = value
            self._cse_log.append(key)
        return value

    @contextlib.contextmanager
    def cse_scope(self):
        """Values of expressions first emitted inside the ``with`` are forgotten after it."""
        self.cse_values()
        mark = len(self._cse_log)
        try:
            yield
        finally:
            values, log = self._cse_values, self._cse_log
            for key in log[mark:]:
                values.pop(key, None)
            del log[mark:]

    def forget_expressions(self) -> None:
        """Emit every expression anew from here on (until it is cached again)."""
        if self._cse_values is not None:
            self._cse_values.clear()

    def _cse_key(self, e):
        """A small int naming ``e``'s structure (equal for equal pure expressions), or None
        when ``e`` reads memory or calls a function. Variables are named by identity."""
        memo = self._cse_memo
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        cls = type(e)
        if cls is E.Var or cls is E.SizeVar:
            parts = (0, id(e))
        elif cls is E.IntImm:
            parts = (cls, e.dtype, int(e.value))
        elif cls is E.FloatImm:
            parts = (cls, e.dtype, float(e.value).hex())   # tells -0.0 from 0.0
        elif cls in _CSE_OPERANDS:
            parts = [cls]
            for name in _CSE_OPERANDS[cls]:
                child = self._cse_key(getattr(e, name))
                if child is None:
                    parts = None
                    break
                parts.append(child)
            if parts is not None:
                parts.extend(getattr(e, name) for name in _CSE_ATTRS.get(cls, ()))
                parts = tuple(parts)
        else:
            parts = None
        key = None
        if parts is not None:
            key = self._cse_ids.setdefault(parts, len(self._cse_ids))
        memo[id(e)] = (e, key)   # holds ``e``, so its id is not reused while the memo lives
        return key

    def fast(self, instr):
        # Multiply-add pairs may fuse into FMA instructions (one rounding instead of two), as
        # TVM's LLVM backend and C compilers allow by default; -fast-math also reassociates.
        instr.flags.append("fast" if self.options["fast-math"] else "contract")
        return instr

    # -- leaves ----------------------------------------------------------------------------
    def expr_Var(self, e):
        return self.lookup_var(e)

    def expr_IntImm(self, e):
        value = e.value
        if _unsigned(e.dtype) and value < 0:
            value &= (1 << dt.bits(e.dtype)) - 1
        return ir.Constant(scalar_type(e.dtype), int(value))

    def expr_FloatImm(self, e):
        return ir.Constant(scalar_type(e.dtype), e.value)

    def expr_Cast(self, e):
        return self.cast(self.expr(e.value), e.value.dtype, e.dtype)

    def cast(self, value, src: str, dst: str):
        """Convert ``value`` from dtype ``src`` to ``dst`` (same lane count)."""
        b, target = self.builder, value_type(dst)
        if value.type == target and dt.element_of(src) == dt.element_of(dst):
            return value
        if dt.is_bool(dst):
            zero = ir.Constant(value.type, None)
            return (b.fcmp_unordered("!=", value, zero) if dt.is_float(src)
                    else b.icmp_unsigned("!=", value, zero))
        if dt.is_float(src) and dt.is_float(dst):
            if value.type == target:
                return value
            return (b.fpext if dt.bits(dst) > dt.bits(src) else b.fptrunc)(value, target)
        if dt.is_float(src):
            return (b.fptoui if _unsigned(dst) else b.fptosi)(value, target)
        if dt.is_float(dst):
            return (b.uitofp if _unsigned(src) else b.sitofp)(value, target)
        if dt.bits(dst) == dt.bits(src):   # int <-> uint of one width: same bits
            return value
        if dt.bits(dst) > dt.bits(src):
            return (b.zext if _unsigned(src) else b.sext)(value, target)
        return b.trunc(value, target)

    # -- arithmetic -------------------------------------------------------------------------
    def _operands(self, e):
        return self.expr(e.a), self.expr(e.b)

    def expr_Add(self, e):
        a, b = self._operands(e)
        return self.fast(self.builder.fadd(a, b)) if dt.is_float(e.dtype) else self.builder.add(a, b)

    def expr_Sub(self, e):
        a, b = self._operands(e)
        return self.fast(self.builder.fsub(a, b)) if dt.is_float(e.dtype) else self.builder.sub(a, b)

    def expr_Mul(self, e):
        a, b = self._operands(e)
        return self.fast(self.builder.fmul(a, b)) if dt.is_float(e.dtype) else self.builder.mul(a, b)

    def expr_Div(self, e):
        a, b = self._operands(e)
        if dt.is_float(e.dtype):
            return self.fast(self.builder.fdiv(a, b))
        return self._int_division(e, a, b)[0]

    def expr_Mod(self, e):
        a, b = self._operands(e)
        if dt.is_float(e.dtype):
            return self.fast(self.builder.frem(a, b))
        return self._int_division(e, a, b)[1]

    def expr_FloorDiv(self, e):
        a, b = self._operands(e)
        if dt.is_float(e.dtype):
            return self.math("floor", [self.fast(self.builder.fdiv(a, b))], e.dtype)
        q, r = self._int_division(e, a, b)
        if _unsigned(e.dtype):
            return q
        return self.builder.sub(q, self.builder.zext(self._floor_adjust(r, b), q.type))

    def expr_FloorMod(self, e):
        a, b = self._operands(e)
        bld = self.builder
        if dt.is_float(e.dtype):
            floor = self.math("floor", [self.fast(bld.fdiv(a, b))], e.dtype)
            return self.fast(bld.fsub(a, self.fast(bld.fmul(floor, b))))
        q, r = self._int_division(e, a, b)
        if _unsigned(e.dtype):
            return r
        return bld.select(self._floor_adjust(r, b), bld.add(r, b), r)

    def _floor_adjust(self, r, b):
        """True where truncating division rounded up: a non-zero remainder of the other sign."""
        bld, zero = self.builder, ir.Constant(r.type, None)
        opposite = bld.icmp_signed("<", bld.xor(r, b), zero)
        return bld.and_(bld.icmp_signed("!=", r, zero), opposite)

    def _int_division(self, e, a, b):
        """(quotient, remainder), truncating; 0 and 0 where the divisor is 0, so a stray zero
        does not kill the process."""
        bld, unsigned = self.builder, _unsigned(e.dtype)
        if isinstance(e.b, E.IntImm) and e.b.value not in (0, -1):
            div, rem = (bld.udiv, bld.urem) if unsigned else (bld.sdiv, bld.srem)
            return div(a, b), rem(a, b)
        zero = ir.Constant(b.type, None)
        is_zero = bld.icmp_unsigned("==", b, zero)
        bad = is_zero
        if not unsigned:   # INT_MIN / -1 traps too; divide by 1 and negate instead
            is_minus_one = bld.icmp_signed("==", b, self._splat_const(b.type, -1))
            bad = bld.or_(is_zero, is_minus_one)
        safe = bld.select(bad, self._splat_const(b.type, 1), b)
        div, rem = (bld.udiv, bld.urem) if unsigned else (bld.sdiv, bld.srem)
        q, r = div(a, safe), rem(a, safe)   # r is already 0 wherever the divisor was replaced
        if not unsigned:
            q = bld.select(is_minus_one, bld.sub(zero, a), q)
        return bld.select(is_zero, zero, q), r

    @staticmethod
    def _splat_const(typ, value):
        if isinstance(typ, ir.VectorType):
            return ir.Constant(typ, [ir.Constant(typ.element, value)] * typ.count)
        return ir.Constant(typ, value)

    def expr_Min(self, e):
        return self._min_max(e, "<")

    def expr_Max(self, e):
        return self._min_max(e, ">")

    def _min_max(self, e, op):
        a, b = self._operands(e)
        return self.builder.select(self._compare(op, a, b, e.a.dtype), a, b)

    def _compare(self, op, a, b, dtype):
        if dt.is_float(dtype):
            if op == "!=":
                return self.builder.fcmp_unordered(op, a, b)
            return self.builder.fcmp_ordered(op, a, b)
        if _unsigned(dtype):
            return self.builder.icmp_unsigned(op, a, b)
        return self.builder.icmp_signed(op, a, b)

    def expr_CmpOp(self, e):
        a, b = self._operands(e)
        return self._compare(_CMP[type(e).__name__], a, b, e.a.dtype)

    def expr_And(self, e):
        return self.builder.and_(*self._operands(e))

    def expr_Or(self, e):
        return self.builder.or_(*self._operands(e))

    def expr_Not(self, e):
        return self.builder.not_(self.expr(e.a))

    def expr_Select(self, e):
        cond = self.expr(e.condition)
        return self.builder.select(cond, self.expr(e.true_value), self.expr(e.false_value))

    # -- vectors ----------------------------------------------------------------------------
    def splat(self, value, lanes: int):
        b = self.builder
        vec_type = ir.VectorType(value.type, lanes)
        one = b.insert_element(undef(vec_type), value, ir.Constant(ir.IntType(32), 0))
        return b.shuffle_vector(one, undef(vec_type), _zero_mask(lanes))

    def expr_Broadcast(self, e):
        return self.splat(self.expr(e.value), e.lanes)

    def expr_Ramp(self, e):
        base, stride = self.expr(e.base), self.expr(e.stride)
        elem = base.type
        steps = ir.Constant(ir.VectorType(elem, e.lanes), [ir.Constant(elem, i) for i in range(e.lanes)])
        return self.builder.add(self.splat(base, e.lanes),
                                self.builder.mul(self.splat(stride, e.lanes), steps))

    # -- calls ------------------------------------------------------------------------------
    def expr_Call(self, e):
        if e.op == "if_then_else":
            return self._if_then_else(e)
        if e.op == "call_extern":
            return self._call_extern(e)
        if e.op == "likely":   # a hint only: the value is the condition's
            return self.expr(e.args[0])
        if e.op == BUFFER_DATA:
            return self.data_pointer(e)
        if e.op == "reinterpret":
            return self.reinterpret(e)
        args = [self.expr(a) for a in e.args]
        if e.op == "abs" and not dt.is_float(e.dtype):
            (x,) = args
            if _unsigned(e.dtype):
                return x
            negative = self.builder.icmp_signed("<", x, ir.Constant(x.type, None))
            return self.builder.select(negative, self.builder.sub(ir.Constant(x.type, None), x), x)
        if not dt.is_float(e.dtype):
            raise TypeError(f"the llvm backend computes T.{e.op} on floats only, got {e.dtype} "
                            f"({e}); cast the argument with T.float32(...)")
        return self.math(e.op, args, e.dtype)

    def math(self, op: str, args: list, dtype: str):
        """A float math function on scalars or vectors of ``dtype``."""
        b = self.builder
        if dt.element_of(dtype) == "float16":   # compute in float32
            wide = dt.with_lanes("float32", dt.lanes(dtype))
            return self.cast(self.math(op, [self.cast(a, dtype, wide) for a in args], wide), wide, dtype)
        typ = args[0].type
        if op == "abs":
            op = "fabs"
        if op in VECTOR_MATH and isinstance(typ, ir.VectorType) and str(typ.element) == "float":
            vector_math = VECTOR_MATH[op]
            return vector_math(b, args[0], lambda v: self.math("floor", [v], dtype),
                               ("fast",) if self.options["fast-math"] else ("contract",))
        if op in _LLVM_MATH:
            fn = self.codegen.extern(f"llvm.{_LLVM_MATH[op]}.{_mangle(typ)}", typ, [typ] * len(args))
            return b.call(fn, args)
        if op == "rsqrt":
            one = self._splat_const(typ, 1.0)
            return self.fast(b.fdiv(one, self.math("sqrt", args, dtype)))
        if op == "sigmoid":
            one = self._splat_const(typ, 1.0)
            denominator = self.fast(b.fadd(one, self.math("exp", [self.fast(b.fneg(args[0]))], dtype)))
            return self.fast(b.fdiv(one, denominator))
        if op in _LIBM:
            return self._libm(op, args[0], dtype)
        raise NotImplementedError(f"the llvm backend has no lowering for T.{op}")

    def _call_extern(self, e):
        name = e.args[0].value
        if name in POINTER_BUILTINS:
            return POINTER_BUILTINS[name](self, e)
        math = extern_math(name)
        if math is None:
            return self.call_function(e)
        _, param, count = math
        param_type = scalar_type(param)
        fn = self.codegen.extern(name, param_type, [param_type] * count)
        args = [self.cast(self.expr(a), a.dtype, param) for a in e.args[1:]]
        return self.cast(self.builder.call(fn, args), param, e.dtype)

    def _libm(self, op: str, x, dtype: str):
        elem_type = scalar_type(dtype)
        name = _LIBM[op] + ("f" if dt.element_of(dtype) == "float32" else "")
        fn = self.codegen.extern(name, elem_type, [elem_type])
        lanes = dt.lanes(dtype)
        if lanes == 1:
            return self.builder.call(fn, [x])
        out = undef(x.type)
        for lane in range(lanes):
            index = ir.Constant(ir.IntType(32), lane)
            value = self.builder.call(fn, [self.builder.extract_element(x, index)])
            out = self.builder.insert_element(out, value, index)
        return out

    def _if_then_else(self, e):
        cond, then_value, else_value = e.args
        if not (_has_load(then_value) or _has_load(else_value)) or dt.lanes(cond.dtype) > 1:
            return self.builder.select(self.expr(cond), self.expr(then_value), self.expr(else_value))
        # A guarded load (e.g. padding) must not run when its guard is false.
        b = self.builder
        with b.if_else(self.expr(cond)) as (then, otherwise):
            with then, self.cse_scope():
                a = self.expr(then_value)
                a_block = b.block
            with otherwise, self.cse_scope():
                c = self.expr(else_value)
                c_block = b.block
        phi = b.phi(a.type)
        phi.add_incoming(a, a_block)
        phi.add_incoming(c, c_block)
        return phi

    def expr_BufferLoad(self, e):
        return self.load(e.buffer, e.indices, e.dtype)


def _has_load(e) -> bool:
    if isinstance(e, E.BufferLoad):
        return True
    if isinstance(e, E.PrimExpr):
        return any(_has_load(v) for _, v in e.fields() if isinstance(v, (E.PrimExpr, tuple)))
    if isinstance(e, tuple):
        return any(_has_load(v) for v in e)
    return False


_UNDEF: dict = {}


def undef(typ: ir.Type) -> ir.Constant:
    """The undefined value of ``typ``: one constant object per type, whose text llvmlite
    formats once however often it is used."""
    text = str(typ)
    constant = _UNDEF.get(text)
    if constant is None:
        constant = _UNDEF[text] = ir.Constant(typ, ir.Undefined)
    return constant


@functools.lru_cache(maxsize=None)
def _zero_mask(lanes: int) -> ir.Constant:
    """The shufflevector mask that repeats lane 0 ``lanes`` times (one constant for every use)."""
    return ir.Constant(ir.VectorType(ir.IntType(32), lanes), [ir.Constant(ir.IntType(32), 0)] * lanes)


# The operand fields (each an expression) and other fields (plain values) that make up the
# structure of a pure expression of each class; a class not here is never shared.
_CSE_OPERANDS = {cls: ("a", "b") for cls in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv,
                                             E.FloorMod, E.Min, E.Max, E.EQ, E.NE, E.LT, E.LE,
                                             E.GT, E.GE, E.And, E.Or)}
_CSE_OPERANDS.update({E.Not: ("a",), E.Cast: ("value",), E.Ramp: ("base", "stride"),
                      E.Broadcast: ("value",),
                      E.Select: ("condition", "true_value", "false_value")})
_CSE_ATTRS = {E.Cast: ("dtype",), E.Ramp: ("lanes",), E.Broadcast: ("lanes",)}

# (emitter class, expression class) -> the method that emits it (found through the bases)
_EXPR_METHODS: dict = {}


def _expr_method(emitter: type, cls: type):
    for base in cls.__mro__:
        method = getattr(emitter, "expr_" + base.__name__, None)
        if method is not None:
            _EXPR_METHODS[emitter, cls] = method
            return method
    return None
