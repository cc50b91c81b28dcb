"""Well-formedness of PrimFuncs: every variable and buffer is defined where it is used, indices
match buffer ranks, block bindings fit their iterators, blocks write only what they declare, and
values have the dtypes their uses need."""
from __future__ import annotations

import sys
from typing import Any, Optional

from ..ir import hooks
from ..ir.errors import TVMError
from ..ir.module import IRModule
from . import dtype as dt
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc
from .binding_bounds import narrowed_by, value_bounds
from .functor import StmtExprVisitor
from .stmt_functor import free_vars, stores_in


class VerifyError(TVMError, ValueError):
    """A PrimFunc breaks a well-formedness rule; ``func_name``, ``node`` and ``rule`` say which."""

    def __init__(self, message: str, func_name: str = "", node: Any = None, rule: str = ""):
        super().__init__(message)
        self.func_name, self.node, self.rule = func_name, node, rule


def verify(func_or_mod) -> bool:
    """Return True when every PrimFunc in ``func_or_mod`` is well formed, else raise VerifyError.

    Rules: variables are defined (parameters, shape variables of parameter buffers, enclosing
    loops, block iterators, LetStmts), and the body of a block with iterators uses no loop
    variable from outside the block (it sees outer loops only through its bindings; an opaque
    block, without iterators, may use them); buffers are parameters, allocated by an
    enclosing block or Allocate, or match_buffers, and no dimension is negative; each load/store
    has one index per dimension; block bindings have their iterator's
    dtype and stay inside its domain; only a block with a reduce iterator has an init; a block
    stores only to buffers it lists in its writes, at indices free of its reduce iterators, values
    of the buffer's dtype; float math intrinsics (T.exp, ...) take floats.

    Two blocks may share a name, as in the reference compiler; ``tir.Schedule``, which finds blocks
    by name, requires unique names (:func:`verify_block_names`).
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


def verify_block_names(func_or_mod) -> bool:
    """Return True when no PrimFunc in ``func_or_mod`` has two blocks of one name, else raise
    VerifyError. The IR allows repeated names; ``tir.Schedule`` does not, since its handles
    (``sch.get_block("B")``, BlockRV) name blocks, and a repeated name would be ambiguous."""
    funcs = ([(gv.name_hint, f) for gv, f in func_or_mod.functions.items() if isinstance(f, PrimFunc)]
             if isinstance(func_or_mod, IRModule) else [(func_or_mod.name or "<unnamed>", func_or_mod)])
    for name, func in funcs:
        _BlockNames(name).visit(func.body)
    return True


class _BlockNames(StmtExprVisitor):
    def __init__(self, func_name: str):
        self.func_name, self.seen = func_name, set()

    def visit_Block(self, block: S.Block) -> None:
        if block.name_hint in self.seen:
            raise VerifyError(
                f"verify: in function {self.func_name}: two blocks are named {block.name_hint} (the "
                "schedule finds blocks by name: rename one of them in its T.block(...))", self.func_name,
                block, "block names are unique within a function that tir.Schedule works on")
        self.seen.add(block.name_hint)
        self.visit((block.init, block.body))

    def generic_visit(self, node) -> None:
        if isinstance(node, S.Stmt):   # blocks sit only under statements
            super().generic_visit(node)


class _Verifier(StmtExprVisitor):
    def __init__(self, func_name: str):
        self.func_name = func_name
        self.func: Optional[PrimFunc] = None
        self.vars: dict[int, int] = {}       # id(var) -> how many enclosing scopes define it
        self.buffers: dict[int, int] = {}
        self.loop_ranges: dict[int, tuple[int, int]] = {}   # id(loop var) -> (min, max) when constant
        self.scopes: list[str] = []          # 'block "Y"' / 'loop i', innermost last
        self.blocks: list[tuple[S.Block, set]] = []   # enclosing blocks, each with the ids of
        # the buffers it may store to: its writes, its own allocations and buffers matched to its writes
        self.root: Optional[S.Block] = None
        self.loop_depth: dict[int, int] = {}   # id(loop var) -> how many loops enclose its loop
        self.block_floor = 0                 # loops at a depth below this are outside the block
        self.allocates = 0                   # enclosing Allocates (lowering's compacted buffers)

    # -- helpers -----------------------------------------------------------------------------
    def fail(self, message: str, node: Any, rule: str) -> None:
        where = f", {self.scopes[-1]}" if self.scopes else ""
        raise VerifyError(f"verify: in function {self.func_name}{where}: {message} ({rule})"
                          f"{self.shown(node)}", self.func_name, node, rule)

    def shown(self, node: Any) -> str:
        """The function's script with ``node`` underlined, on the lines after the message."""
        try:
            text = self.func.script(underline=[node], name=self.func_name)
        except Exception:  # ill-formed IR may not print; the message alone still names the culprit
            return ""
        return "\n" + "\n".join("    " + line for line in text.splitlines())

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

    def check_shape(self, buffer: Buffer) -> None:
        for axis, dim in enumerate(buffer.shape):
            if isinstance(dim, E.IntImm) and dim.value < 0:
                self.fail(f"buffer {buffer.name} has dimension {axis} of size {dim.value}", buffer,
                          "buffer dimensions are not negative")

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
        self.func = func
        for p in func.params:
            if isinstance(p, Buffer):
                self.define(self.buffers, p)
            elif isinstance(p, E.Var):
                self.define(self.vars, p)
        for p in func.params:
            if isinstance(p, Buffer):
                self.check_shape(p)
                self.define_shape_vars(p)
        body = func.body
        if isinstance(body, S.BlockRealize) and not body.iter_values:
            self.root = body.block
        self.visit(body)

    def visit_Var(self, var: E.Var) -> None:
        if self.loop_depth.get(id(var), self.block_floor) < self.block_floor and not self.allocates:
            self.fail(f"loop variable {var.name} of a loop outside the block is used in its body",
                      var, "a block body sees enclosing loops only through its iterators: bind it "
                      "with T.axis.spatial/reduce and use the iterator")
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
        self.loop_depth[id(loop.loop_var)] = len(self.loop_depth)
        self.scopes.append(f"loop {loop.loop_var.name}")
        self.visit(loop.body)
        self.scopes.pop()
        del self.loop_depth[id(loop.loop_var)]
        self.undefine(self.vars, loop.loop_var)
        self.loop_ranges.pop(id(loop.loop_var), None)

    def visit_LetStmt(self, let: S.LetStmt) -> None:
        self.visit(let.value)
        self.define(self.vars, let.var)
        self.visit(let.body)
        self.undefine(self.vars, let.var)

    def visit_Allocate(self, alloc: S.Allocate) -> None:
        self.visit(alloc.buffer.shape)
        self.check_shape(alloc.buffer)
        self.define(self.buffers, alloc.buffer)
        if self.blocks:
            self.blocks[-1][1].add(id(alloc.buffer))
        # Compaction moves a buffer under a loop and indexes it relative to that loop, also
        # inside blocks: below an Allocate, block bodies may use outer loop variables (not below
        # the constants of a T.allocate_const, which compaction never makes).
        compacted = not isinstance(alloc, S.AllocateConst)
        self.allocates += compacted
        self.visit(alloc.body)
        self.allocates -= compacted
        self.undefine(self.buffers, alloc.buffer)

    def visit_BlockRealize(self, realize: S.BlockRealize) -> None:
        block = realize.block
        self.visit(realize.iter_values)
        # blockize leaves a nested block's predicate in the outer loops' variables; the
        # predicate is not part of the enclosing block's computation, so it may use them.
        outer_floor, self.block_floor = self.block_floor, 0
        self.visit(realize.predicate)
        self.block_floor = outer_floor
        self.scopes.append(f'block "{block.name_hint}"')
        if len(realize.iter_values) != len(block.iter_vars):
            self.fail(f"block {block.name_hint} has {len(block.iter_vars)} iterator(s) but "
                      f"{len(realize.iter_values)} binding value(s)", realize,
                      "one binding per block iterator")
        ranges = narrowed_by(realize.predicate, self.loop_ranges)
        for iv, value in zip(block.iter_vars, realize.iter_values):
            self.check_binding(iv, value, ranges)
        self.scopes.pop()
        self.visit_Block(block)

    def check_binding(self, iv: S.IterVar, value: E.PrimExpr, ranges: Optional[dict]) -> None:
        if iv.var.dtype != value.dtype:
            self.fail(f"iterator {iv.var.name} is {iv.var.dtype} but its binding {_text(value)} is "
                      f"{value.dtype}", iv, "a block iterator and its binding share one dtype")
        dom_min, dom_ext = iv.dom.min, iv.dom.extent
        if ranges is None or not (isinstance(dom_min, E.IntImm) and isinstance(dom_ext, E.IntImm)):
            return  # a predicate may legally guard an overhanging binding
        bounds = value_bounds(value, ranges)
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
        if block.init is not None:
            self.check_init(block)
        # A block with iterators sees the loops outside only through its bindings; an opaque
        # block (no iterators) sees what its enclosing scope sees, as in the reference compiler.
        outer_floor = self.block_floor
        if block.iter_vars:
            self.block_floor = len(self.loop_depth)
        for iv in block.iter_vars:
            self.define(self.vars, iv.var)
        for buf in block.alloc_buffers:
            self.visit(buf.shape)
            self.check_shape(buf)
            self.define(self.buffers, buf)
        shape_vars = []
        for match in block.match_buffers:
            self.visit(match.source)
            shape_vars += self.define_shape_vars(match.buffer)
            self.check_shape(match.buffer)
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
        self.block_floor = outer_floor
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
            self.check_store_indices(block, store)
        if dt.element_of(store.value.dtype) != dt.element_of(store.buffer.dtype):
            self.fail(f"a value of dtype {store.value.dtype} is stored into buffer {store.buffer.name} "
                      f"of dtype {store.buffer.dtype}", store,
                      "a stored value has its buffer's dtype: convert it with an explicit cast")
        self.visit(store.value)
        self.visit(store.indices)

    def check_init(self, block: S.Block) -> None:
        """An init without reduce iterators runs at every point (rfactor of a whole reduce loop
        makes such blocks); that is only sound when every iterator indexes what the init
        writes, else the iterator left out is a reduction axis declared spatial. A unit iterator
        (blockize of a whole rfactor'd loop makes one) takes one value, so it repeats nothing."""
        if any(iv.iter_type == "reduce" for iv in block.iter_vars):
            return
        indexed = free_vars([store.indices for store in stores_in(block.init)])
        culprit = next((iv for iv in block.iter_vars if all(v is not iv.var for v in indexed)
                        and not (isinstance(iv.dom.extent, E.IntImm) and iv.dom.extent.value == 1)),
                       None)
        if culprit is not None:
            self.fail(f"block {block.name_hint} has a T.init() but no reduce iterator, and its iterator "
                      f"{culprit.var.name} does not index what the init writes", block.init,
                      "an init belongs to a reduction: declare the iterators it reduces over with "
                      "T.axis.reduce (\"R\" in T.axis.remap)")

    def check_store_indices(self, block: S.Block, store: S.BufferStore) -> None:
        reduce_vars = {id(iv.var): iv.var for iv in block.iter_vars if iv.iter_type == "reduce"}
        if not reduce_vars:
            return
        culprit = next((v for v in free_vars(store.indices) if id(v) in reduce_vars), None)
        if culprit is not None:
            self.fail(f"block {block.name_hint} stores to {store.buffer.name} at an index that uses "
                      f"its reduce iterator {culprit.name}", store,
                      "a reduction writes each output once per spatial point: reduce iterators "
                      "may not appear in the indices it stores to")

    def visit_Call(self, call: E.Call) -> None:
        if call.op in E.FLOAT_INTRINSICS:
            culprit = next((a for a in call.args if not dt.is_float(a.dtype)), None)
            if culprit is not None:
                self.fail(f"T.{call.op} is given {_text(culprit)} of dtype {culprit.dtype}", call,
                          f"T.{call.op} computes on floats: cast its argument with T.float32(...)")
        self.visit(call.args)

    def visit_Buffer(self, buffer: Buffer) -> None:
        self.check_buffer(buffer, buffer)


def _text(node: Any) -> str:
    try:
        return node.script()
    except Exception:  # the printer is optional here: fall back to the node's type
        return f"<{type(node).__name__}>"


hooks.provide("tir.verify", sys.modules[__name__])   # checks after each pass in debug mode
