"""What transform_layout does with the padding a map leaves when a ``pad_value`` is given.

Three plans, in the order they are tried (as the reference compiler has them):

* the buffer has writers, and one writes every element in a row-major loop nest of its own: that
  nest is replaced by one over the new shape, storing ``T.if_then_else(padding, pad_value,
  value)``. "Of its own" is exact (``_Replacer`` checks it): the nest is a statement of the
  scope itself (no loop or block around it), its loops run from 0 over each dimension, in order,
  one directly in the other (nothing beside the inner ones), and what they hold stores nothing but
  that element of the buffer, reads the buffer only there, evaluates nothing, and has no block
  whose binding or ``T.where`` uses those loops, except the writer's own block when the store's
  indices are consecutive spatial iterators of it (they become iterators over the new shape; its
  other iterators do not use the loops) and it has no ``T.where``; some store of the element runs on every iteration (loops of constant
  extent, no condition), so the padding is certainly written. A reduction's loops inside the
  nest are fine (its init and update both store the element);
* the buffer has writers but none fits: a new block after the last writer (after the statement
  of the scope that holds it) fills the padding;
* nothing writes the buffer (an input parameter): a block at the start of the function states
  with ``T.assume`` that the caller's padding holds the value.

Every function here works on statements that still use the old buffer, except the stores they
create, which use the new one; the layout rewrite that follows maps the rest.
"""
from __future__ import annotations

from ....ir.structural import structural_equal
from ...analysis import expr_deep_equal
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprMutator, StmtExprVisitor
from ...stmt_functor import Freshen, StmtReplacer, free_vars, substitute


class _Write:
    __slots__ = ("store", "realize", "loops", "row_major", "top")

    def __init__(self, store, realize, loops, row_major, top):
        self.store, self.realize, self.loops, self.row_major = store, realize, loops, row_major
        self.top = top   # the statement of the scope (not a sequence) that holds the store


class _WriteScan(StmtExprVisitor):
    """Every store to ``buffer`` with the loops its indices depend on."""

    def __init__(self, buffer):
        self.buffer = buffer
        self.loops, self.bindings, self.realize = [], {}, None
        self.path = []   # the statements from the scope's body down to the node visited
        self.writes: list[_Write] = []

    def visit(self, node):
        if not isinstance(node, S.Stmt):
            return super().visit(node)
        self.path.append(node)
        try:
            return super().visit(node)
        finally:
            self.path.pop()

    def visit_For(self, loop):
        self.loops.append(loop)
        self.generic_visit(loop)
        self.loops.pop()

    def visit_BlockRealize(self, realize):
        saved_realize, saved = self.realize, dict(self.bindings)
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            self.bindings[iv.var] = substitute(value, self.bindings)
        self.realize = realize
        self.generic_visit(realize)
        self.realize, self.bindings = saved_realize, saved

    def visit_BufferStore(self, store):
        if store.buffer is not self.buffer:
            return self.generic_visit(store)
        indices = [substitute(i, self.bindings) for i in store.indices]
        depths = [k for k, lp in enumerate(self.loops)
                  if any(v is lp.loop_var for i in indices for v in free_vars(i))]
        loops = self.loops[min(depths):max(depths) + 1] if depths else []
        row_major = bool(loops) and len(loops) == len(indices) == self.buffer.ndim and all(
            i is lp.loop_var and isinstance(lp.min, E.IntImm) and lp.min.value == 0
            and structural_equal(lp.extent, dim) and lp.kind == "serial"
            for i, lp, dim in zip(indices, loops, self.buffer.shape))
        top = next(s for s in self.path if not isinstance(s, S.SeqStmt))
        self.writes.append(_Write(store, self.realize, loops, row_major, top))


def apply_padding(scope_block, old, new, inverse, padding, pad_map, taken=frozenset()):
    """``scope_block`` (the block that allocates ``old``, or the root block) with the padding of
    ``new`` given its value: one of the three plans above. ``taken``: the names of the
    function's blocks, which a new block's name must avoid (a second padding of the buffer)."""
    scan = _WriteScan(old)
    scan.visit(scope_block.body)
    if not scan.writes:
        body = _assumption(new, inverse, padding, pad_map, taken)
        return scope_block.replace(body=S.seq(body, scope_block.body))
    replacements = {}
    for write in scan.writes:
        if write.row_major and id(write.loops[0]) not in replacements:
            nest = _Replacer(write, new, inverse, padding, pad_map).nest()
            if nest is not None:
                replacements[id(write.loops[0])] = nest
    if replacements:
        return StmtReplacer(replacements).visit(scope_block)
    # After the statement of the scope holding the last writer: inside it, under a loop or a
    # block of its own, the fill would run again and again or escape the block's regions.
    anchor = scan.writes[-1].top
    fill = _fill_block(new, inverse, padding, pad_map, taken)
    return _Flatten().visit(StmtReplacer({id(anchor): S.SeqStmt((anchor, fill))}).visit(scope_block))


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and bool(expr.value)


def _fills(stmt, buffer) -> bool:
    """Whether ``stmt`` certainly stores into ``buffer`` each time it runs: through sequences,
    loops of constant positive extent and blocks without ``T.where`` only."""
    if isinstance(stmt, S.BufferStore):
        return stmt.buffer is buffer
    if isinstance(stmt, S.SeqStmt):
        return any(_fills(s, buffer) for s in stmt.seq)
    if isinstance(stmt, S.For):
        return isinstance(stmt.extent, E.IntImm) and stmt.extent.value > 0 and _fills(stmt.body, buffer)
    if isinstance(stmt, S.BlockRealize):
        return _is_true(stmt.predicate) and _fills(stmt.block.body, buffer)
    if isinstance(stmt, S.LetStmt):
        return _fills(stmt.body, buffer)
    return False


class _Flatten(StmtExprMutator):
    """Sequences inside sequences become one sequence."""

    def visit_SeqStmt(self, node):
        node = self.generic_visit(node)
        if any(isinstance(s, S.SeqStmt) for s in node.seq):
            return S.seq(*node.seq)
        return node


def _grid(new, inverse, block_realize):
    """Serial loops over the new shape (the inverse's inputs as loop variables) around
    ``block_realize``."""
    stmt = block_realize
    for var, dim in reversed(list(zip(inverse.initial_indices, new.shape))):
        stmt = S.For(var, E.const(0, dim.dtype), dim, "serial", stmt)
    return stmt


def _block_iters(new, inverse, padding):
    """Block iterators over the new shape bound to the loop variables, and the padding
    condition in terms of those iterators."""
    iters = [S.IterVar(E.Var(f"v_{var.name}", var.dtype), S.Range(E.const(0, dim.dtype), dim), "spatial")
             for var, dim in zip(inverse.initial_indices, new.shape)]
    mapping = {var: iv.var for var, iv in zip(inverse.initial_indices, iters)}
    return iters, substitute(padding, mapping)


def _pad_at(pad_map, indices):
    return pad_map.map_indices(indices)[0]


def _unique(base, taken) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _fill_block(new, inverse, padding, pad_map, taken):
    iters, _ = _block_iters(new, inverse, padding)
    indices = tuple(iv.var for iv in iters)
    store = S.BufferStore(new, _pad_at(pad_map, indices), indices)
    block = S.Block(_unique(f"buffer_{new.name}_padding", taken), tuple(iters), (),
                    (S.BufferRegion(new, tuple(S.Range(i, E.const(1, i.dtype)) for i in indices)),),
                    store)
    return _grid(new, inverse, S.BlockRealize(tuple(inverse.initial_indices), padding, block))


def _assumption(new, inverse, padding, pad_map, taken):
    iters, inside = _block_iters(new, inverse, padding)
    indices = tuple(iv.var for iv in iters)
    holds = E.Or(E.Not(inside), E.EQ(E.BufferLoad(new, indices), _pad_at(pad_map, indices)))
    body = S.Evaluate(E.Call("bool", "assume", (holds,)))
    block = S.Block(_unique(f"buffer_{new.name}_assumption", taken), tuple(iters),
                    (S.BufferRegion(new, tuple(S.Range(i, E.const(1, i.dtype)) for i in indices)),),
                    (), body)
    return _grid(new, inverse, S.BlockRealize(tuple(inverse.initial_indices), E.const(True), block))


class _Replacer(StmtExprMutator):
    """The row-major nest of one writer, rebuilt over the new shape."""

    def __init__(self, write, new, inverse, padding, pad_map):
        super().__init__()
        self.write, self.new, self.inverse, self.pad_map = write, new, inverse, pad_map
        self.remap = {id(lp.loop_var): e for lp, e in zip(write.loops, inverse.final_indices)}
        self.indices = tuple(inverse.initial_indices)
        self.padding = padding
        self.iters = self.values = self.kept_values = None
        self.all_replaced = True
        self._block_update()

    def _block_update(self):
        """When the store's indices are consecutive spatial iterators of its block, the block
        gets iterators over the new shape in their place."""
        realize = self.write.realize
        old = self.write.store.indices
        if realize is None or not old:
            return
        ivs = list(realize.block.iter_vars)
        start = next((k for k, iv in enumerate(ivs) if iv.var is old[0]), None)
        if start is None or start + len(old) > len(ivs) or any(
                ivs[start + k].var is not old[k] or ivs[start + k].iter_type != "spatial"
                for k in range(len(old))):
            return
        iters, padding = _block_iters(self.new, self.inverse, self.padding)
        self.iters = tuple(ivs[:start] + iters + ivs[start + len(old):])
        self.values = (realize.iter_values[:start] + tuple(self.inverse.initial_indices)
                       + realize.iter_values[start + len(old):])
        self.kept_values = realize.iter_values[:start] + realize.iter_values[start + len(old):]
        mapping = {self.inverse.initial_indices[k]: iv.var for k, iv in enumerate(iters)}
        for k, var in enumerate(old):
            self.remap[id(var)] = substitute(self.inverse.final_indices[k], mapping)
        self.indices = tuple(iv.var for iv in iters)
        self.padding = padding

    def nest(self):
        """The new nest, or None when the writer's nest is not one of its own (the module's
        docstring says what that means)."""
        loops = self.write.loops
        if loops[0] is not self.write.top:
            return None   # under a loop or a block of the scope, or beside other statements in it
        if any(outer.body is not inner for outer, inner in zip(loops, loops[1:])):
            return None   # another statement shares one of the loops (a consumer after compute_at)
        if not _fills(loops[-1].body, self.write.store.buffer):
            return None   # a condition, a T.where or a loop of unknown extent may skip the padding
        body = self.visit(loops[-1].body)
        if not self.all_replaced:
            return None
        # each rewritten writer (a reduction's init and update) gets loops of its own
        return Freshen({}, set()).visit(_grid(self.new, self.inverse, body))

    def _uses_remapped(self, expr) -> bool:
        return any(id(v) in self.remap for v in free_vars(expr))

    def visit_Var(self, var):
        return self.remap.get(id(var), var)

    def visit_IterVar(self, iv):
        return iv

    def visit_BufferStore(self, store):
        if store.buffer is not self.write.store.buffer or not self._same_indices(store.indices):
            self.all_replaced = False
            return self.generic_visit(store)
        value = self.visit(store.value)
        chosen = E.Call(value.dtype, "if_then_else",
                        (self.padding, _pad_at(self.pad_map, self.indices), value))
        return S.BufferStore(self.new, chosen, self.indices)

    def visit_BufferLoad(self, load):
        # A read of another element of the buffer could depend on the order of the iterations,
        # which the new nest changes.
        if load.buffer is self.write.store.buffer and not self._same_indices(load.indices):
            self.all_replaced = False
        return self.generic_visit(load)

    def visit_Evaluate(self, stmt):
        self.all_replaced = False   # it would also run at the padding
        return self.generic_visit(stmt)

    def _same_indices(self, indices) -> bool:
        old = self.write.store.indices
        return len(indices) == len(old) and all(expr_deep_equal(a, b) for a, b in zip(indices, old))

    def visit_BlockRealize(self, realize):
        # A block bound to the rebuilt loops would be bound out of its domain at the padding:
        # only the writer's own block, whose iterators are replaced, may be.
        updated = realize is self.write.realize and self.iters is not None
        bound = self.kept_values if updated else realize.iter_values
        if (any(self._uses_remapped(v) for v in bound) or self._uses_remapped(realize.predicate)
                or (updated and not _is_true(realize.predicate)) or realize.block.match_buffers):
            self.all_replaced = False
        out = self.generic_visit(realize)
        if realize is self.write.realize and self.iters is not None:
            out = out.replace(iter_values=tuple(self.visit(v) for v in self.values),
                              block=out.block.replace(iter_vars=self.iters))
        return out
