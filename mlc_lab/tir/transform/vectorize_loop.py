# Turns a "vectorized" loop of constant extent over straight-line stores into vector code (Ramp
# indices, Broadcast scalars, Select for lane-dependent ifs); loops it cannot prove safe stay loops.
# Expects flat, block-free PrimFuncs (after flatten_buffer).
from __future__ import annotations

import functools

from ...arith.bound import int_bound
from ...ir.structural import structural_equal
from .. import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator, StmtExprVisitor
from ..stmt_functor import loads_in
from .prim_func_pass import is_const, loop_range, prim_func_pass

# dtype string -> lane count, parsed once per dtype (asked for every node)
_lanes = functools.lru_cache(maxsize=None)(dt.lanes)


@prim_func_pass
def vectorize_loop(func: PrimFunc) -> PrimFunc:
    """``for j in T.vectorized(8): B[i * 8 + j] = A[i * 8 + j] * T.float32(2)`` becomes
    ``B[T.Ramp(i * 8, 1, 8)] = A[T.Ramp(i * 8, 1, 8)] * T.Broadcast(T.float32(2), 8)``."""
    return func.replace(body=_Loops().visit(func.body))


class NotVectorizable(Exception):
    """The loop body has a shape this pass does not turn into vector code (the message says why)."""


class _Loops(StmtExprMutator):
    def __init__(self):
        super().__init__()
        self.ranges: dict = {}

    def visit_PrimExpr(self, e):
        return e   # no loop inside an expression: nothing to look for there

    def visit_For(self, loop):
        self.ranges[loop.loop_var] = loop_range(loop)
        new = self.generic_visit(loop)
        try:
            if new.kind == "vectorized" and is_const(new.extent) and new.extent.value > 1:
                return _Vectorizer(new, self.ranges).run()
            return new
        except NotVectorizable:
            return new
        finally:
            del self.ranges[loop.loop_var]


class _Vectorizer:
    """Rewrites one loop body lane-wise. Statements are vectorized under a mask (a bool vector,
    or None for all lanes); expressions come back with 1 lane when they do not vary."""

    def __init__(self, loop: S.For, ranges: dict):
        self.loop, self.ranges = loop, ranges
        self.lanes = loop.extent.value
        self.ramp = E.Ramp(loop.min, E.const(1, loop.loop_var.dtype), self.lanes)
        self.lets: dict = {}
        self.guarded = False       # inside a lane-dependent condition: every access must be in bounds
        self.accesses: dict[int, list] = {}
        self.stored = _StoredBuffers.of(loop.body)

    def run(self) -> S.Stmt:
        body = self.stmt(self.loop.body, None)
        for key in self.stored:   # each lane must touch only its own elements of what is written
            first, *rest = self.accesses.get(key, [None])
            if any(not structural_equal(first, other) for other in rest):
                raise NotVectorizable("a written buffer is accessed at different indices")
        return body

    # -- statements --------------------------------------------------------------------------
    def stmt(self, s, mask):
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise NotVectorizable(f"{type(s).__name__} in the loop body")
        return method(s, mask)

    def stmt_SeqStmt(self, s, mask):
        return S.seq(*(self.stmt(x, mask) for x in s.seq))

    def stmt_BufferStore(self, s, mask):
        index = self.index(s.buffer, s.indices)
        if not (isinstance(index, E.Ramp) and is_const(index.stride) and index.stride.value != 0):
            raise NotVectorizable(f"the store to {s.buffer.name} is not at distinct lanes")
        value = self.broadcast(self.expr(s.value))
        if mask is not None:
            value = E.Select(mask, value, E.BufferLoad(s.buffer, (index,)))
        return S.BufferStore(s.buffer, value, (index,))

    def stmt_LetStmt(self, s, mask):
        value = self.expr(s.value)
        var = s.var
        if _lanes(value.dtype) > 1:
            var = E.Var(s.var.name, value.dtype)
            self.lets[s.var] = var
        return S.LetStmt(var, value, self.stmt(s.body, mask))

    def stmt_IfThenElse(self, s, mask):
        condition = self.expr(s.condition)
        if _lanes(condition.dtype) == 1:
            else_case = None if s.else_case is None else self.stmt(s.else_case, mask)
            return S.IfThenElse(condition, self.stmt(s.then_case, mask), else_case)
        if _reads(s.condition, self.stored):
            raise NotVectorizable("a lane-dependent condition reads a buffer the loop writes")
        outer, self.guarded = self.guarded, True
        self.check_bounds(s.condition)
        both = [self.stmt(s.then_case, condition if mask is None else E.And(mask, condition))]
        if s.else_case is not None:
            negated = E.Not(condition)
            both.append(self.stmt(s.else_case, negated if mask is None else E.And(mask, negated)))
        self.guarded = outer
        return S.seq(*both)

    def stmt_Evaluate(self, s, mask):
        if _lanes(self.expr(s.value).dtype) > 1:
            raise NotVectorizable("a lane-dependent T.evaluate")
        return s

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e):
        rule = _RULES.get(type(e))
        if rule is None:
            raise NotVectorizable(f"{type(e).__name__} in a vectorized loop")
        return rule(self, e)

    def broadcast(self, e):
        return e if _lanes(e.dtype) == self.lanes else E.Broadcast(e, self.lanes)

    def index(self, buffer, indices):
        if len(indices) != 1:
            raise NotVectorizable(f"buffer {buffer.name} is not flat")
        self.accesses.setdefault(id(buffer), []).append(indices[0])
        if self.guarded:
            self.check_bounds(indices[0], buffer)
        return self.expr(indices[0])

    def check_bounds(self, e, buffer=None):
        """Lanes whose condition is false are computed too: their loads must stay in bounds."""
        if buffer is None:
            for load in loads_in(e):
                self.check_bounds(load.indices[0], load.buffer)
            return
        size = buffer.shape[0]
        lo, hi = int_bound(e, self.ranges)
        if not is_const(size) or lo is None or hi is None or lo < 0 or hi >= size.value:
            raise NotVectorizable(f"an access to {buffer.name} may leave the buffer on masked lanes")

    def var(self, e):
        if e is self.loop.loop_var:
            return self.ramp
        return self.lets.get(e, e)

    def leaf(self, e):
        return e

    def binary(self, e):
        a, b = self.expr(e.a), self.expr(e.b)
        if _lanes(a.dtype) == 1 and _lanes(b.dtype) == 1:
            return e if a is e.a and b is e.b else type(e)(a, b)
        ramp = _ramp_arith(type(e), a, b)
        return ramp if ramp is not None else type(e)(self.broadcast(a), self.broadcast(b))

    def cast(self, e):
        v = self.expr(e.value)
        if isinstance(v, E.Ramp) and _widens(v.base.dtype, e.dtype):
            # an int32 lane variable indexing an int64 buffer: still consecutive lanes
            widen = lambda x: E.IntImm(e.dtype, x.value) if is_const(x) else E.Cast(e.dtype, x)
            return _ramp(widen(v.base), widen(v.stride), v.lanes)
        return E.Cast(dt.with_lanes(e.dtype, _lanes(v.dtype)), v)

    def not_(self, e):
        return E.Not(self.expr(e.a))

    def select(self, e):
        condition = self.expr(e.condition)
        return self.choose(condition, e.true_value, e.false_value,
                           lambda c, t, f: E.Select(c, t, f))

    def choose(self, condition, true_value, false_value, build):
        outer = self.guarded
        if _lanes(condition.dtype) > 1:
            self.guarded = True
            self.check_bounds(true_value)
            self.check_bounds(false_value)
        t, f = self.expr(true_value), self.expr(false_value)
        self.guarded = outer
        if _lanes(condition.dtype) == 1 and _lanes(t.dtype) == 1 and _lanes(f.dtype) == 1:
            return build(condition, t, f)
        return build(condition, self.broadcast(t), self.broadcast(f))

    def call(self, e):
        if e.op == "if_then_else":
            condition = self.expr(e.args[0])
            return self.choose(condition, e.args[1], e.args[2],
                               lambda c, t, f: E.Call(t.dtype, e.op, (c, t, f)))
        args = [self.expr(a) for a in e.args]
        if all(_lanes(a.dtype) == 1 for a in args):
            return e.replace(args=tuple(args))
        if e.op == "call_extern":
            raise NotVectorizable("an extern function takes scalars")
        return E.Call(dt.with_lanes(e.dtype, self.lanes), e.op, tuple(self.broadcast(a) for a in args))

    def load(self, e):
        index = self.index(e.buffer, e.indices)
        return E.BufferLoad(e.buffer, (index,))

    def vector(self, e):
        raise NotVectorizable("the body already holds vector expressions")


def _widens(source: str, target: str) -> bool:
    """A cast from integer type ``source`` to ``target`` keeps every value (same signedness,
    at least as wide)."""
    return dt.is_int(source) and dt.is_int(target) and dt.bits(target) >= dt.bits(source) \
        and source.startswith("u") == target.startswith("u")


def _ramp(base, stride, lanes):
    return E.Ramp(base, stride.astype(base.dtype), lanes)


def _ramp_arith(op, a, b):
    """Ramp arithmetic that stays a Ramp: ramp +- scalar, ramp +- ramp, ramp * scalar, and
    ``Ramp // c``, ``Ramp % c`` whose lanes stay in one group of c. A Broadcast counts as its
    scalar; two Broadcasts combine into one."""
    if op in _SCALAR_OPS and not isinstance(a, E.Ramp) and not isinstance(b, E.Ramp) and \
            (isinstance(a, E.Broadcast) or isinstance(b, E.Broadcast)):
        lanes = a.lanes if isinstance(a, E.Broadcast) else b.lanes
        scalar = [x.value if isinstance(x, E.Broadcast) else x for x in (a, b)]
        if all(_lanes(x.dtype) == 1 for x in scalar):
            return E.Broadcast(op(*scalar), lanes)
    a = a.value if isinstance(a, E.Broadcast) and isinstance(b, E.Ramp) else a
    b = b.value if isinstance(b, E.Broadcast) and isinstance(a, E.Ramp) else b
    ra, rb = isinstance(a, E.Ramp), isinstance(b, E.Ramp)
    la, lb = _lanes(a.dtype), _lanes(b.dtype)
    if op is E.Add and (ra or rb) and (ra or la == 1) and (rb or lb == 1):
        if ra and rb:
            return _ramp(a.base + b.base, a.stride + b.stride, a.lanes)
        ramp, other = (a, b) if ra else (b, a)
        return _ramp(ramp.base + other, ramp.stride, ramp.lanes)
    if op is E.Sub and ra and (rb or lb == 1):
        return _ramp(a.base - b.base, a.stride - b.stride, a.lanes) if rb else _ramp(a.base - b, a.stride, a.lanes)
    if op is E.Sub and rb and la == 1:
        return _ramp(a - b.base, E.const(0, b.stride.dtype) - b.stride, b.lanes)
    if op is E.Mul and (ra and lb == 1 or rb and la == 1):
        ramp, other = (a, b) if ra else (b, a)
        return _ramp(ramp.base * other, ramp.stride * other, ramp.lanes)
    if op in (E.FloorDiv, E.FloorMod) and ra and _lanes_stay_in_one_group(a, b):
        if op is E.FloorDiv:
            return E.Broadcast(E.FloorDiv(a.base, b), a.lanes)
        return _ramp(E.FloorMod(a.base, b), a.stride, a.lanes)
    return None


_SCALAR_OPS = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def _lanes_stay_in_one_group(ramp, divisor) -> bool:
    """``Ramp(base, 1, L) // c`` is one value when L divides c and base: the L consecutive
    values never cross a multiple of c (a fused loop split by 4 inside rows of 8)."""
    from ...arith import is_multiple_of
    c, lanes = (divisor.value if isinstance(divisor, E.IntImm) else None), ramp.lanes
    return bool(is_const(ramp.stride, 1) and c and c > 0 and c % lanes == 0
                and is_multiple_of(ramp.base, lanes))


class _StoredBuffers(StmtExprVisitor):
    """The ids of the buffers a statement stores to (``stores_in`` without looking into
    expressions, which hold no stores)."""

    @staticmethod
    def of(stmt) -> set:
        finder = _StoredBuffers()
        finder.visit(stmt)
        return finder.ids

    def __init__(self):
        self.ids: set = set()

    def visit_PrimExpr(self, e):
        pass

    def visit_BufferStore(self, store):
        self.ids.add(id(store.buffer))


def _reads(e, buffers: set) -> bool:
    return any(id(load.buffer) in buffers for load in loads_in(e))


_RULES = {
    E.Var: _Vectorizer.var, E.SizeVar: _Vectorizer.var,
    E.IntImm: _Vectorizer.leaf, E.FloatImm: _Vectorizer.leaf, E.StringImm: _Vectorizer.leaf,
    E.Cast: _Vectorizer.cast, E.Not: _Vectorizer.not_, E.Select: _Vectorizer.select,
    E.Call: _Vectorizer.call, E.BufferLoad: _Vectorizer.load,
    E.Ramp: _Vectorizer.vector, E.Broadcast: _Vectorizer.vector,
    **{op: _Vectorizer.binary for op in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod,
                                         E.Min, E.Max, E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or)},
}
