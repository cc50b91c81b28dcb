# The analysis behind feature.py: the stores of lowered loop code, each with its enclosing loops, how
# often it runs, its operations and its accesses (innermost stride, footprint under every loop level).
from __future__ import annotations

import math

from ..arith.simplify import linear_form
from ..tir import dtype as dt
from ..tir import expr as E
from ..tir.functor import StmtExprVisitor
from ..tir.stmt_functor import free_vars

UNKNOWN_SIZE = 32
LINE_BYTES = 64

# Binary operators by the kind a float (first) or integer (second) operand makes them count as.
_BINARY_KIND = {
    "Add": ("float_add", "int_arith"), "Sub": ("float_add", "int_arith"),
    "Mul": ("float_mul", "int_arith"), "Min": ("float_cmp", "int_arith"),
    "Max": ("float_cmp", "int_arith"), "Div": ("float_div", "int_divmod"),
    "Mod": ("float_div", "int_divmod"), "FloorDiv": ("float_div", "int_divmod"),
    "FloorMod": ("float_div", "int_divmod"), "And": ("select_cmp", "select_cmp"),
    "Or": ("select_cmp", "select_cmp"),
}
_COMPARE_KIND = ("float_cmp", "select_cmp")   # EQ, LT, ...: the binary operators not listed
FLOAT_KINDS = ("float_add", "float_mul", "float_div", "float_cmp", "float_math")
OP_KINDS = FLOAT_KINDS + ("int_arith", "int_divmod", "select_cmp")


def _size(e) -> int:
    return e.value if isinstance(e, E.IntImm) else UNKNOWN_SIZE


class Loop:
    __slots__ = ("var", "extent", "kind")

    def __init__(self, var, extent: int, kind: str):
        self.var, self.extent, self.kind = var, extent, kind


class Store:
    """A store with its loops (outer to inner), executions, flops per execution and accesses."""

    def __init__(self, loops, count, guarded, flops, accesses):
        self.loops, self.count, self.guarded, self.flops = loops, count, guarded, flops
        self.accesses = [Access(buf, idx, is_write, loops) for buf, idx, is_write in accesses]
        trip = 1
        self.trips = [1] * (len(loops) + 1)   # trips[l]: iterations of the loops from l inwards
        for level in range(len(loops) - 1, -1, -1):
            trip *= loops[level].extent
            self.trips[level] = trip

    @property
    def inner_runs(self) -> float:
        """How many times the innermost loop runs through (the executions when there are no loops)."""
        return self.count / self.trips[len(self.loops) - 1] if self.loops else self.count

    def working_set(self, level: int) -> float:
        """Bytes the accesses touch under ``level`` (accesses to one buffer overlap: the largest)."""
        largest: dict = {}
        for a in self.accesses:
            largest[id(a.buffer)] = max(largest.get(id(a.buffer), 0.0), a.footprint[level] * a.elem_bytes)
        return sum(largest.values())


class Access:
    """One buffer access of a store: its innermost stride and its footprint under each loop level."""

    def __init__(self, buffer, indices, is_write: bool, loops):
        self.buffer, self.is_write = buffer, is_write
        self.elem_bytes = dt.bits(buffer.dtype) * dt.lanes(buffer.dtype) / 8
        position = {id(loop.var): n for n, loop in enumerate(loops)}
        shape = [_size(s) for s in buffer.shape]
        coefs = [[0.0] * len(loops) for _ in indices]
        for dim, index in enumerate(indices):
            for var, coef in _coefficients(index).items():
                if var in position:
                    coefs[dim][position[var]] += abs(coef)
        row_strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        self.flat = [sum(row_strides[d] * coefs[d][n] for d in range(len(indices)))
                     for n in range(len(loops))]
        self.stride = self.flat[-1] if loops else 0.0
        self.footprint = _footprints(coefs, [loop.extent for loop in loops], shape)

    def lines(self, loops) -> float:
        """64-byte lines touched per run of the innermost loop."""
        if not loops or self.stride == 0:
            return 1.0
        extent = loops[-1].extent
        if self.stride * self.elem_bytes >= LINE_BYTES:
            return float(extent)
        return math.ceil(((extent - 1) * self.stride + 1) * self.elem_bytes / LINE_BYTES)


def _footprints(coefs, extents, shape) -> list:
    """Elements touched under each loop level (index l: loops l.. run; the last entry: none run)."""
    spans = [1.0] * len(shape)
    products = [1.0] * len(shape)
    used = 1.0
    out = [1.0]
    for level in range(len(extents) - 1, -1, -1):
        extent = extents[level]
        if any(row[level] for row in coefs):
            used *= extent
        for dim, row in enumerate(coefs):
            if row[level]:
                spans[dim] = min(spans[dim] + row[level] * (extent - 1), shape[dim])
                products[dim] *= extent
        out.append(min(used, math.prod(min(s, p) for s, p in zip(spans, products))))
    return out[::-1]


def _coefficients(index) -> dict:
    """id(var) -> how far ``index`` moves per unit step of var (floordiv by c scales by 1/c;
    any other nonlinear part counts each of its variables once)."""
    out: dict = {}
    lin = linear_form(index)
    for atom, coef in lin.terms.values():
        if isinstance(atom, E.Var):
            parts = {id(atom): 1.0}
        elif isinstance(atom, (E.FloorDiv, E.FloorMod)) and isinstance(atom.b, E.IntImm) and atom.b.value:
            scale = 1.0 / atom.b.value if isinstance(atom, E.FloorDiv) else 1.0
            parts = {var: c * scale for var, c in _coefficients(atom.a).items()}
        else:
            parts = {id(var): 1.0 for var in free_vars(atom)}
        for var, c in parts.items():
            out[var] = out.get(var, 0.0) + coef * c
    return out


class _Ops(StmtExprVisitor):
    """Operation counts of one expression by kind, and the loads it makes."""

    def __init__(self):
        self.counts = dict.fromkeys(OP_KINDS, 0)
        self.loads = []
        self.in_index = False

    def visit_BinaryOp(self, op):
        float_kind, int_kind = _BINARY_KIND.get(type(op).__name__, _COMPARE_KIND)
        kind = float_kind if dt.is_float(op.a.dtype) else int_kind
        if kind != "int_arith" or not self.in_index:
            self.counts[kind] += 1
        self.generic_visit(op)

    def visit_Select(self, op):
        self.counts["select_cmp"] += 1
        self.generic_visit(op)

    def visit_Not(self, op):
        self.counts["select_cmp"] += 1
        self.generic_visit(op)

    def visit_Call(self, op):
        self.counts["select_cmp" if op.op == "if_then_else" else "float_math"] += 1
        self.generic_visit(op)

    def visit_BufferLoad(self, load):
        self.loads.append((load.buffer, load.indices, False))
        saved, self.in_index = self.in_index, True
        self.visit(load.indices)
        self.in_index = saved


class Walker(StmtExprVisitor):
    """Collects the stores of lowered loop code with their loops, and the allocations."""

    def __init__(self):
        self.loops: list = []
        self.fraction = 1.0   # share of iterations the enclosing ifs let through
        self.stores: list = []
        self.allocs: list = []
        self.num_loops = 0
        self.ops = dict.fromkeys(OP_KINDS, 0.0)
        self.conditions = 0.0
        self.guards = 0   # enclosing ifs
        self.allocation_bytes: list = []   # compacted sizes, once compact_allocations has run

    def count(self) -> float:
        return math.prod(loop.extent for loop in self.loops) * self.fraction

    def add_ops(self, expr) -> _Ops:
        ops = _Ops()
        ops.visit(expr)
        for kind, n in ops.counts.items():
            self.ops[kind] += n * self.count()
        return ops

    def visit_For(self, loop):
        self.num_loops += 1
        self.loops.append(Loop(loop.loop_var, _size(loop.extent), loop.kind))
        self.visit(loop.body)
        self.loops.pop()

    def visit_IfThenElse(self, node):
        self.add_ops(node.condition)
        self.conditions += self.count()
        saved = self.fraction
        self.fraction, self.guards = saved * self.pass_rate(node.condition), self.guards + 1
        self.visit(node.then_case)
        self.fraction = saved
        self.visit(node.else_case)
        self.guards -= 1

    def pass_rate(self, condition) -> float:
        """``k == c`` on a loop variable lets one iteration of that loop through; others, all."""
        if isinstance(condition, E.EQ):
            for loop in self.loops:
                if loop.var is condition.a or loop.var is condition.b:
                    return 1.0 / loop.extent
        return 1.0

    def visit_LetStmt(self, node):
        self.add_ops(node.value)
        self.visit(node.body)

    def visit_Evaluate(self, node):
        self.add_ops(node.value)

    def visit_Allocate(self, node):
        self.allocs.append(node.buffer)
        self.visit(node.body)

    def visit_BufferStore(self, store):
        ops = self.add_ops(store.value)
        index_ops = _Ops()
        index_ops.in_index = True
        index_ops.visit(store.indices)
        for kind, n in index_ops.counts.items():
            self.ops[kind] += n * self.count()
        flops = sum(ops.counts[k] for k in FLOAT_KINDS)
        accesses = [(store.buffer, store.indices, True)] + ops.loads + index_ops.loads
        self.stores.append(Store(tuple(self.loops), self.count(), self.guards > 0, flops, accesses))


    def compact_allocations(self) -> None:
        """Size every allocation as lowering compacts it (the footprint of its accesses under the
        innermost loop enclosing them all) and cap its accesses' footprints at that size: the
        same few bytes are reused by every iteration outside."""
        for buffer in self.allocs:
            uses = [(store, access) for store in self.stores for access in store.accesses
                    if access.buffer is buffer]
            if not uses:
                continue
            depth = _common_depth([store.loops for store, _ in uses])
            elements = max(access.footprint[depth] for _, access in uses)
            for _, access in uses:
                access.footprint = [min(f, elements) for f in access.footprint]
            self.allocation_bytes.append(elements * uses[0][1].elem_bytes)


def _common_depth(nests: list) -> int:
    """How many outer loops (the same loop objects) all of ``nests`` share."""
    depth = 0
    while all(len(n) > depth and n[depth] is nests[0][depth] for n in nests):
        depth += 1
    return depth
