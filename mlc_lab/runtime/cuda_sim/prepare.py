"""What the simulator works out once per kernel, before running any thread.

* **Launch-invariant expressions.** An integer expression that depends only on ``threadIdx``,
  ``blockIdx`` and scalar parameters has the same value, thread by thread, at every execution:
  the simulator computes its array once per batch of blocks and reuses it. To expose such parts,
  integer sums are regrouped: ``A[k * 8 + tx * 64 + i]`` becomes ``A[tx * 64 + (k * 8 + i)]``,
  the thread part (cached) plus a part that is the same for every thread (a scalar). Integer
  arithmetic is associative, so the regrouping changes no value.
* **Register reuse.** nvcc unrolls small constant loop nests and keeps a loaded value in a
  register while its address stays the same: each load gets a weight (``reuse``), and the
  counters report both the loads the loop IR executes and those the compiled kernel would issue.
  Such a nest also waits for its global loads once (``rounds``).
* **Uniform expressions.** Integer expressions all threads evaluate alike (loop counters and
  what they compute) are compiled to one Python function each (``uniform``).
* **Arithmetic.** The floating-point operations of each store's value, counted once.
"""
from __future__ import annotations

from ...tir import dtype as dt
from ...tir import expr as E
from ...tir.functor import StmtExprMutator, StmtExprVisitor
from ...tir.stmt_functor import loads_in
from .errors import SimulatorError
from .reuse import find_unrolled
from .uniform import children, compile_uniform, uniform_vars

class PreparedKernel:
    """The kernel's body with sums regrouped, and the facts above. ``origin`` maps each rewritten
    statement back to the kernel's own (error messages show the original)."""

    def __init__(self, kernel):
        self.kernel, self.source = kernel, kernel.body
        self.index_vars = frozenset(kernel.thread_vars.values())
        launch = self.index_vars | {p for p in kernel.params if isinstance(p, E.Var)}
        self.deps = _Dependencies()
        rewrite = _Regroup(launch, self.deps)
        self.body = rewrite.visit(kernel.body)
        self.origin = rewrite.origin
        self.cacheable = _cacheable(self.body, launch, self.index_vars, self.deps)
        self.compiled = _compile_uniform(self.body, launch - self.index_vars)
        self.split = {}          # access -> (cached part or None, the rest or None)
        self.reuse = {}          # load -> weight of one execution after register reuse
        self.flops = {}          # store -> floating-point operations in its value
        self.rounds = {}         # store -> rounds of global-load latency one execution waits
        self.max_lanes = 1
        _Scan(self).visit(self.body)
        find_unrolled(self.body, self)
        # a wmma fragment is spread over the 32 threads of a warp: a thread holds 1/32 of it
        local_words = sum(-(-_words(b) // 32) if b.scope.startswith("wmma.") else _words(b)
                          for b in kernel.local)
        self.registers = min(255, 16 + local_words + self.max_lanes)

    def access_split(self, access):
        parts = self.split.get(access)
        if parts is None:
            if len(access.indices) != 1:
                raise SimulatorError(f"{self.kernel.name}: {access.buffer.name} is indexed with "
                                     f"{len(access.indices)} indices; the simulator runs lowered "
                                     "kernels, whose buffers are flat")
            index = access.indices[0]
            if index in self.cacheable:
                parts = (index, None)
            elif isinstance(index, E.Add) and index.a in self.cacheable:
                parts = (index.a, index.b)
            else:
                parts = (None, index)
            self.split[access] = parts
        return parts


class _Dependencies:
    """For each expression, the variables it uses and whether it loads memory (memoised)."""

    def __init__(self):
        self.memo = {}

    def __call__(self, e):
        found = self.memo.get(e)
        if found is None:
            if isinstance(e, E.Var):
                found = (frozenset((e,)), False)
            else:
                names, loads = frozenset(), isinstance(e, E.BufferLoad)
                for child in children(e):
                    child_vars, child_loads = self(child)
                    names, loads = names | child_vars, loads or child_loads
                found = (names, loads)
            self.memo[e] = found
        return found


class _Regroup(StmtExprMutator):
    def __init__(self, launch, deps):
        super().__init__()
        self.launch, self.deps, self.origin = launch, deps, {}

    def invariant(self, e) -> bool:
        names, loads = self.deps(e)
        return not loads and names <= self.launch

    def visit_Add(self, e):
        return self.regroup(e)

    def visit_Sub(self, e):
        return self.regroup(e)

    def regroup(self, e):
        if not dt.is_int(e.dtype):
            return self.generic_visit(e)
        terms = []
        _flatten(e, 1, terms)
        terms = [(sign, self.visit(t)) for sign, t in terms]
        fixed = [(s, t) for s, t in terms if self.invariant(t)]
        moving = [(s, t) for s, t in terms if not self.invariant(t)]
        if not fixed or not moving:
            return _sum(terms)
        return E.Add(_sum(fixed), _sum(moving))

    def visit_BufferStore(self, store):
        new = self.generic_visit(store)
        self.origin[new] = self.origin.get(store, store)
        return new


def _flatten(e, sign, out):
    if isinstance(e, E.Add):
        _flatten(e.a, sign, out)
        _flatten(e.b, sign, out)
    elif isinstance(e, E.Sub):
        _flatten(e.a, sign, out)
        _flatten(e.b, -sign, out)
    else:
        out.append((sign, e))


def _sum(terms):
    sign, total = terms[0]
    if sign < 0:
        total = E.Sub(E.const(0, total.dtype), total)
    for sign, term in terms[1:]:
        total = E.Add(total, term) if sign > 0 else E.Sub(total, term)
    return total


def _cacheable(body, launch, index_vars, deps) -> frozenset:
    found = set()

    def visit(e):
        if isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
            return
        names, loads = deps(e)
        if not loads and names <= launch and names & index_vars:
            found.add(e)
            return
        for child in children(e):
            visit(child)

    _EachExpr(visit).visit(body)
    return frozenset(found)


def _compile_uniform(body, scalars) -> dict:
    """expression -> compiled function, for the outermost uniform expressions of ``body``."""
    uniform, compiled = uniform_vars(body, scalars), {}

    def visit(e):
        if e in compiled or isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        function = compile_uniform(e, uniform)
        if function is not None:
            compiled[e] = function
            return
        for child in children(e):
            visit(child)

    _EachExpr(visit).visit(body)
    return compiled


class _EachExpr(StmtExprVisitor):
    """Calls ``fn`` on every outermost expression of the statements it walks."""

    def __init__(self, fn):
        self.fn = fn

    def visit(self, node):
        if isinstance(node, E.PrimExpr):
            self.fn(node)
        else:
            super().visit(node)


class _Scan(StmtExprVisitor):
    """Fills ``flops`` and ``max_lanes``; sets every load's reuse weight to 1."""

    def __init__(self, prepared):
        self.prepared = prepared

    def visit_BufferStore(self, store):
        self.prepared.flops[store] = _count_flops(store.value)
        self.prepared.rounds[store] = float(any(load.buffer.scope == "global"
                                                for load in loads_in(store.value)))
        self.prepared.max_lanes = max(self.prepared.max_lanes, dt.lanes(store.value.dtype))
        self.generic_visit(store)

    def visit_BufferLoad(self, load):
        self.prepared.reuse.setdefault(load, 1.0)
        self.generic_visit(load)

    def visit_For(self, loop):
        if loop.kind == "vectorized" and isinstance(loop.extent, E.IntImm):
            self.prepared.max_lanes = max(self.prepared.max_lanes, loop.extent.value)
        self.generic_visit(loop)


def _count_flops(e) -> int:
    if isinstance(e, E.BufferLoad):
        return 0
    own = 0
    if isinstance(e, E.BinaryOp) and not isinstance(e, (E.CmpOp, E.And, E.Or)):
        own = dt.is_float(e.dtype)
    elif isinstance(e, E.Call) and e.op not in ("if_then_else", "tir.if_then_else"):
        own = dt.is_float(e.dtype)
    return int(own) + sum(_count_flops(c) for c in children(e))


def _words(buffer) -> int:
    size = 1
    for d in buffer.shape:
        size *= int(d.value)
    return -(-size * max(32, dt.bits(buffer.dtype)) * dt.lanes(buffer.dtype) // 32)
