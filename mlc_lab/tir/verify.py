"""Well-formedness of PrimFuncs: every variable and buffer is defined where it is used, indices
match buffer ranks, block bindings fit their iterators, and blocks write only what they declare."""
from __future__ import annotations

from typing import Any, Optional

from ..ir.module import IRModule
from . import dtype as dt
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc
from .functor import StmtExprVisitor
from .stmt_functor import free_vars, post_order_visit


class VerifyError(ValueError):
    """A PrimFunc breaks a well-formedness rule; ``func_name``, ``node`` and ``rule`` say which."""

    def __init__(self, message: str, func_name: str = "", node: Any = None, rule: str = ""):
        super().__init__(message)
        self.func_name, self.node, self.rule = func_name, node, rule


def verify(func_or_mod) -> bool:
    """Return True when every PrimFunc in ``func_or_mod`` is well formed, else raise VerifyError.

    Rules: variables are defined (parameters, shape variables of parameter buffers, enclosing
    loops, block iterators, LetStmts); buffers are parameters, allocated by an enclosing block or
    Allocate, or match_buffers; each load/store has one index per dimension; block bindings have
    their iterator's dtype and stay inside its domain; a block stores only to buffers it lists in
    its writes.
    """
    if isinstance(func_or_mod, IRModule):
        for gv, func in func_or_mod.functions.items():
            if isinstance(func, PrimFunc):
                _Verifier(gv.name_hint).verify(func)
        return True
    if isinstance(func_or_mod, PrimFunc):
        _Verifier(func_or_mod.name or "<unnamed>").verify(func_or_mod)
        return True
    raise TypeError(f"verify expects a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")


class _Verifier(StmtExprVisitor):
    def __init__(self, func_name: str):
        self.func_name = func_name
        self.vars: dict[int, int] = {}       # id(var) -> how many enclosing scopes define it
        self.buffers: dict[int, int] = {}
        self.loop_ranges: dict[int, tuple[int, int]] = {}   # id(loop var) -> (min, max) when constant
        self.scopes: list[str] = []          # 'block "Y"' / 'loop i', innermost last
        self.blocks: list[tuple[S.Block, set]] = []   # enclosing blocks, each with the ids of
        # the buffers it may store to: its writes, its own allocations and buffers matched to its writes
        self.root: Optional[S.Block] = None

    # -- helpers -----------------------------------------------------------------------------
    def fail(self, message: str, node: Any, rule: str) -> None:
        where = f", {self.scopes[-1]}" if self.scopes else ""
        raise VerifyError(f"verify: in function {self.func_name}{where}: {message} ({rule})",
                          self.func_name, node, rule)

    def define(self, table: dict, item: Any) -> None:
        table[id(item)] = table.get(id(item), 0) + 1

    def undefine(self, table: dict, item: Any) -> None:
        table[id(item)] -= 1
        if not table[id(item)]:
            del table[id(item)]

    def define_shape_vars(self, buffer: Buffer) -> list[E.Var]:
        """Define the variables in ``buffer``'s shape/strides not yet defined (they are bound by
        the buffer itself, as a parameter or match_buffer is)."""
        new = [v for v in free_vars(buffer.shape + buffer.strides) if id(v) not in self.vars]
        for v in new:
            self.define(self.vars, v)
        return new

    def check_buffer(self, buffer: Buffer, node: Any) -> None:
        if id(buffer) not in self.buffers:
            self.fail(f"buffer {buffer.name} is used but not allocated or passed in", node,
                      "a buffer must be a parameter, an alloc_buffer of an enclosing block, an "
                      "Allocate in scope, or a match_buffer")

    def check_indices(self, buffer: Buffer, indices: tuple, node: Any) -> None:
        if len(indices) != buffer.ndim:
            kind = "stored to" if isinstance(node, S.BufferStore) else "loaded from"
            self.fail(f"buffer {buffer.name} has {buffer.ndim} dimension(s) but is {kind} with "
                      f"{len(indices)} index(es)", node, "one index per buffer dimension")

    # -- function and scopes -----------------------------------------------------------------
    def verify(self, func: PrimFunc) -> None:
        for p in func.params:
            if isinstance(p, Buffer):
                self.define(self.buffers, p)
            elif isinstance(p, E.Var):
                self.define(self.vars, p)
        for p in func.params:
            if isinstance(p, Buffer):
                self.define_shape_vars(p)
        body = func.body
        if isinstance(body, S.BlockRealize) and not body.iter_values:
            self.root = body.block
        self.visit(body)

    def visit_Var(self, var: E.Var) -> None:
        if id(var) not in self.vars:
            self.fail(f"variable {var.name} is used but not defined here", var,
                      "a variable must be a parameter, a shape variable of a parameter buffer, or "
                      "bound by an enclosing loop, block iterator or LetStmt")

    def visit_For(self, loop: S.For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        if isinstance(loop.min, E.IntImm) and isinstance(loop.extent, E.IntImm):
            self.loop_ranges[id(loop.loop_var)] = (loop.min.value, loop.min.value + loop.extent.value - 1)
        self.define(self.vars, loop.loop_var)
        self.scopes.append(f"loop {loop.loop_var.name}")
        self.visit(loop.body)
        self.scopes.pop()
        self.undefine(self.vars, loop.loop_var)
        self.loop_ranges.pop(id(loop.loop_var), None)

    def visit_LetStmt(self, let: S.LetStmt) -> None:
        self.visit(let.value)
        self.define(self.vars, let.var)
        self.visit(let.body)
        self.undefine(self.vars, let.var)

    def visit_Allocate(self, alloc: S.Allocate) -> None:
        self.visit(alloc.buffer.shape)
        self.define(self.buffers, alloc.buffer)
        if self.blocks:
            self.blocks[-1][1].add(id(alloc.buffer))
        self.visit(alloc.body)
        self.undefine(self.buffers, alloc.buffer)

    def visit_BlockRealize(self, realize: S.BlockRealize) -> None:
        block = realize.block
        self.visit(realize.iter_values)
        self.visit(realize.predicate)
        self.scopes.append(f'block "{block.name_hint}"')
        if len(realize.iter_values) != len(block.iter_vars):
            self.fail(f"block {block.name_hint} has {len(block.iter_vars)} iterator(s) but "
                      f"{len(realize.iter_values)} binding value(s)", realize,
                      "one binding per block iterator")
        guarded = not (isinstance(realize.predicate, E.IntImm) and realize.predicate.value)
        for iv, value in zip(block.iter_vars, realize.iter_values):
            self.check_binding(iv, value, guarded)
        self.scopes.pop()
        self.visit_Block(block)

    def check_binding(self, iv: S.IterVar, value: E.PrimExpr, guarded: bool) -> None:
        if iv.var.dtype != value.dtype:
            self.fail(f"iterator {iv.var.name} is {iv.var.dtype} but its binding {_text(value)} is "
                      f"{value.dtype}", iv, "a block iterator and its binding share one dtype")
        dom_min, dom_ext = iv.dom.min, iv.dom.extent
        if guarded or not (isinstance(dom_min, E.IntImm) and isinstance(dom_ext, E.IntImm)):
            return  # a predicate may legally guard an overhanging binding
        bounds = _value_bounds(value, self.loop_ranges)
        if bounds is None:
            return
        lo, hi = bounds
        if lo < dom_min.value or hi > dom_min.value + dom_ext.value - 1:
            self.fail(f"iterator {iv.var.name} has domain [{dom_min.value}, "
                      f"{dom_min.value + dom_ext.value}) but its binding {_text(value)} takes values "
                      f"in [{lo}, {hi}]", iv, "a block binding must stay inside its iterator's domain")

    def visit_Block(self, block: S.Block) -> None:
        for iv in block.iter_vars:
            self.visit(iv.dom)
        self.scopes.append(f'block "{block.name_hint}"')
        for iv in block.iter_vars:
            self.define(self.vars, iv.var)
        for buf in block.alloc_buffers:
            self.visit(buf.shape)
            self.define(self.buffers, buf)
        shape_vars = []
        for match in block.match_buffers:
            self.visit(match.source)
            shape_vars += self.define_shape_vars(match.buffer)
            self.define(self.buffers, match.buffer)
        self.visit(block.reads)
        self.visit(block.writes)
        written = {id(w.buffer) for w in block.writes}
        writable = written | {id(b) for b in block.alloc_buffers}
        writable |= {id(m.buffer) for m in block.match_buffers if id(m.source.buffer) in written}
        self.blocks.append((block, writable))
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)
        self.blocks.pop()
        for match in block.match_buffers:
            self.undefine(self.buffers, match.buffer)
        for v in shape_vars:
            self.undefine(self.vars, v)
        for buf in block.alloc_buffers:
            self.undefine(self.buffers, buf)
        for iv in block.iter_vars:
            self.undefine(self.vars, iv.var)
        self.scopes.pop()

    # -- accesses ----------------------------------------------------------------------------
    def visit_BufferRegion(self, region: S.BufferRegion) -> None:
        self.check_buffer(region.buffer, region)
        if len(region.region) != region.buffer.ndim:
            self.fail(f"region of buffer {region.buffer.name} has {len(region.region)} range(s) for "
                      f"{region.buffer.ndim} dimension(s)", region, "one range per buffer dimension")
        self.visit(region.region)

    def visit_BufferLoad(self, load: E.BufferLoad) -> None:
        self.check_buffer(load.buffer, load)
        self.check_indices(load.buffer, load.indices, load)
        self.visit(load.indices)

    def visit_BufferStore(self, store: S.BufferStore) -> None:
        self.check_buffer(store.buffer, store)
        self.check_indices(store.buffer, store.indices, store)
        block, writable = self.blocks[-1] if self.blocks else (None, set())
        if block is not None and block is not self.root:
            if id(store.buffer) not in writable:
                self.fail(f"block {block.name_hint} stores to buffer {store.buffer.name}, which is "
                          "not in its writes", store,
                          "a block may only write the buffers listed in T.writes")
        self.visit(store.value)
        self.visit(store.indices)

    def visit_Buffer(self, buffer: Buffer) -> None:
        self.check_buffer(buffer, buffer)


def _text(node: Any) -> str:
    try:
        return node.script()
    except Exception:  # the printer is optional here: fall back to the node's type
        return f"<{type(node).__name__}>"


def _value_bounds(value: E.PrimExpr, loop_ranges: dict) -> Optional[tuple[int, int]]:
    """Exact (min, max) of an integer binding over constant-range loops, or None when unknown.

    Only expressions that use each loop variable once are handled: then the terms vary
    independently, and +, -, * by a constant, and floordiv/floormod by a positive constant
    give exact bounds by interval arithmetic.
    """
    uses: dict[int, int] = {}

    def count(node):
        if isinstance(node, E.Var):
            uses[id(node)] = uses.get(id(node), 0) + 1
    post_order_visit(value, count)
    if any(n > 1 for n in uses.values()):
        return None
    result = _interval(value, loop_ranges)
    return None if result is None else result[:2]


def _interval(e: E.PrimExpr, ranges: dict) -> Optional[tuple[int, int, bool]]:
    """(min, max, dense) where ``dense`` says every integer in between is taken."""
    if isinstance(e, E.IntImm):
        return e.value, e.value, True
    if isinstance(e, E.Var):
        r = ranges.get(id(e))
        return None if r is None else (r[0], r[1], True)
    if isinstance(e, E.Cast):
        return _interval(e.value, ranges) if dt.is_int(e.dtype) else None
    if not isinstance(e, (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod)):
        return None
    a, b = _interval(e.a, ranges), _interval(e.b, ranges)
    if a is None or b is None:
        return None
    if isinstance(e, E.Add):
        return a[0] + b[0], a[1] + b[1], a[2] and b[2]
    if isinstance(e, E.Sub):
        return a[0] - b[1], a[1] - b[0], a[2] and b[2]
    if isinstance(e, E.Mul):
        if b[0] != b[1]:
            a, b = b, a
        if b[0] != b[1]:
            return None
        c = b[0]
        lo, hi = sorted((a[0] * c, a[1] * c))
        return lo, hi, a[2] and abs(c) <= 1
    c = b[0]
    if b[0] != b[1] or c <= 0:
        return None
    if isinstance(e, E.FloorDiv):
        return a[0] // c, a[1] // c, a[2]
    if a[0] // c == a[1] // c:
        return a[0] % c, a[1] % c, a[2]
    if not a[2]:
        return None
    return 0, c - 1, a[1] - a[0] + 1 >= c
