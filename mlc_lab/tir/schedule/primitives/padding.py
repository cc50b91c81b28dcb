"""decompose_padding (and can_decompose_padding): split a padding block, which stores
``T.if_then_else(in_bounds, value, constant)``, into a block filling the constant and a block
copying the in-bound values over it."""
from __future__ import annotations

from ....arith import can_prove, simplify
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...analysis import block_access_regions
from ..func_index import child_blocks
from ..instruction import instruction
from ..rv import BlockRV
from ...functor import StmtExprMutator
from ...intervals import relax
from ...stmt_functor import conjuncts, substitute, uses_var
from .cache import unique_block_name
from .scope import all_blocks_under, const_int

_P = "decompose_padding"


class PaddingPrimitives:

    @instruction
    def decompose_padding(self, block, loop):
        """Split a padding block into a block that fills the padding constant everywhere and a
        block that then writes the in-bound values, so the in-bound part has no condition.

        The constant fill (``<name>_pad_const``) runs the loops from ``loop`` down to the block,
        placed just before ``loop``; the original block keeps its loops, shrunk to the in-bound
        range where a loop drives one iterator alone (a ``T.where`` keeps the rest in bounds).

        Requires: the block is complete, its body one store ``B[v...] = T.if_then_else(cond,
        value, constant)`` at each of its iterators once; ``cond`` is a conjunction of constant
        bounds on the iterators and neither always nor never true; ``loop`` is an ancestor of the
        block; the block is the only writer of ``B`` in its scope; no other block under ``loop``
        accesses ``B``, unless ``loop`` is outermost in the scope and ``B`` is allocated there
        (so the early constant fill is never seen where the original would show other values).
        The reference compiler does not check the writers and observers; we do, so the split
        never changes what is computed.

        Parameters: block (BlockRV or name), loop (LoopRV, an ancestor of the block).
        Returns: the constant-filling block.
        Raises: PaddingPatternError, PaddingConditionError, PaddingTrivialError,
        PaddingEmptyError, PaddingStoreIndicesError, PaddingLoopNotAncestorError,
        PaddingNotSingleWriterError, PaddingObservedError (all DecomposePaddingError).

        Example:

        >>> @T.prim_func
        ... def f(x: T.Buffer((6,), "int32"), y: T.Buffer((8,), "int32")):
        ...     for i in range(8):
        ...         with T.block("pad"):
        ...             vi = T.axis.spatial(8, i)
        ...             y[vi] = T.if_then_else(1 <= vi and vi < 7, x[vi - 1], 0)
        >>> sch = tir.Schedule(f)
        >>> pad = sch.get_block("pad")
        >>> fill = sch.decompose_padding(pad, sch.get_loops(pad)[0])
        >>> print(sch.mod["main"].body.block.body)
        for i in range(8):
            with T.block("pad_pad_const"):
                vi = T.axis.remap("S", [i])
                T.reads()
                T.writes(y[vi])
                y[vi] = 0
        for i in range(6):
            with T.block("pad"):
                vi = T.axis.remap("S", [i])
                T.reads(x[vi])
                T.writes(y[vi + 1])
                y[vi + 1] = x[vi]
        """
        func_name, realize, index = self._resolve_block(block, _P)
        _, loop_node, _ = self._resolve_loop(loop, _P)
        plan = _Plan(self._func(func_name), index, realize, loop_node)
        fill_name = unique_block_name(index, realize.block.name_hint + "_pad_const")
        new_root = plan.rewrite(fill_name)
        self._replace(func_name, {id(plan.scope.block): new_root}, _P)
        return BlockRV(fill_name, func_name)

    @instruction
    def pad_einsum(self, block, padding) -> None:
        """Pad the iteration space of an einsum block so each iterator's extent is a multiple of
        its padding factor (e.g. to fit a tensor intrinsic's tile).

        Inputs indexed by a padded iterator are first copied into zero-padded buffers
        (``<name>_pad`` blocks before the block's loops); the block writes a padded copy of its
        output, copied back for the original extents after its loops.

        Requires: one factor per iterator; the block is an einsum (one store, every buffer
        always accessed at the same plain iterators, the spatial iterators exactly those of the
        output, no predicate or inner blocks); its loops form one chain, one plain loop from 0
        over each iterator's domain; a padded reduction iterator only adds zero terms (the update
        is ``out + a * b * ...`` with a factor loaded from a buffer indexed by it); a block that
        reads its output initialises it.

        Parameters: block (BlockRV or name), padding (list of int, one per block iterator).
        Raises: PadEinsumFactorError, PadEinsumNotEinsumError, PadEinsumLoopsError,
        PadEinsumReductionError, PadEinsumOutputReadError, PadEinsumNothingError (all
        PadEinsumError).

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32")):
        ...     for i in range(6):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(6, i)
        ...             B[vi] = A[vi] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> sch.pad_einsum(sch.get_block("B"), [4])
        >>> print(sch.mod["main"].body.block.body[1])
        for i in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                T.reads(A_pad[vi])
                T.writes(B_pad[vi])
                B_pad[vi] = A_pad[vi] * T.float32(2)
        """
        from .pad_einsum import pad_einsum_scope
        func_name, realize, index = self._resolve_block(block, "pad_einsum")
        old, new = pad_einsum_scope(self._func(func_name), index, realize, padding)
        self._replace(func_name, {id(old): new}, "pad_einsum")

    def can_decompose_padding(self, block, loop) -> bool:
        """Whether ``decompose_padding(block, loop)`` would succeed (nothing changes).

        >>> @T.prim_func
        ... def f(x: T.Buffer((8,), "int32"), y: T.Buffer((8,), "int32")):
        ...     for i in range(8):
        ...         with T.block("copy"):
        ...             vi = T.axis.spatial(8, i)
        ...             y[vi] = T.if_then_else(vi < 8, x[vi], 0)
        >>> sch = tir.Schedule(f)
        >>> sch.can_decompose_padding(sch.get_block("copy"), sch.get_loops(sch.get_block("copy"))[0])
        False
        """
        try:
            func_name, realize, index = self._resolve_block(block, _P)
            _, loop_node, _ = self._resolve_loop(loop, _P)
            _Plan(self._func(func_name), index, realize, loop_node)
        except errors.ScheduleError:
            return False
        return True


class _Plan:
    """The checks, and what the two new blocks need."""

    def __init__(self, func, index, realize, loop):
        self.func, self.index, self.realize, self.loop = func, index, realize, loop
        blk = self.blk = realize.block
        loops = index.loops_above(realize)
        pos = next((k for k, lp in enumerate(loops) if lp is loop), None)
        if pos is None:
            raise errors.PaddingLoopNotAncestorError(
                _P, f'loop {loop.loop_var.name} is not an ancestor of block "{blk.name_hint}" '
                "(within its scope)", func, [loop, blk])
        self.loops, self.pos = loops, pos
        self.ranges = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops}
        self.binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
        self._pattern()
        self.scope = index.parent_block(realize)
        self._writers_and_observers()
        self._region()

    def fail(self, cls, rule, culprits=None):
        raise cls(_P, rule, self.func, culprits or [self.blk])

    def _pattern(self) -> None:
        blk = self.blk
        store = blk.body
        if (not isinstance(store, S.BufferStore) or not isinstance(store.value, E.Call)
                or store.value.op != "if_then_else" or blk.init is not None):
            self.fail(errors.PaddingPatternError, f'block "{blk.name_hint}" is not one store of '
                      "T.if_then_else(condition, value, pad_value)")
        cond, value, pad = store.value.args
        if not isinstance(pad, (E.IntImm, E.FloatImm)):
            self.fail(errors.PaddingPatternError, f"the pad value {pad} is not a constant")
        ivs = blk.iter_vars
        ids = [id(i) for i in store.indices]
        if (any(iv.iter_type != "spatial" for iv in ivs) or len(ids) != len(ivs)
                or len(set(ids)) != len(ids) or set(ids) != {id(iv.var) for iv in ivs}):
            self.fail(errors.PaddingStoreIndicesError, f'block "{blk.name_hint}" must be complete '
                      "and store at each of its iterators exactly once")
        self.store, self.cond, self.value, self.pad = store, cond, value, pad

    def _writers_and_observers(self) -> None:
        buffer, blk = self.store.buffer, self.blk
        siblings = child_blocks(self.scope) if self.scope is not None else []
        for r in siblings:
            if r is not self.realize and any(w.buffer is buffer for w in r.block.writes):
                self.fail(errors.PaddingNotSingleWriterError, f'block "{r.block.name_hint}" also '
                          f"writes buffer {buffer.name}", [blk, r.block])
        observers = [r for r in all_blocks_under(self.loop) if r is not self.realize and any(
            reg.buffer is buffer for reg in r.block.reads + r.block.writes)]
        allocated = self.scope is not None and any(b is buffer for b in self.scope.block.alloc_buffers)
        if observers and (self.pos > 0 or not allocated):
            self.fail(errors.PaddingObservedError, f'block "{observers[0].block.name_hint}" under '
                      f"loop {self.loop.loop_var.name} accesses buffer {buffer.name}; it could see the "
                      "constant fill before the in-bound values; decompose at a loop that does not "
                      "hold it", [self.loop, observers[0].block])

    def _region(self) -> None:
        """Per iterator, the in-bound (min, extent); the in-bound conditions in loop variables."""
        bounds = {}
        parts = []
        for c in conjuncts(self.cond):
            if isinstance(c, E.Call) and c.op == "likely":
                c = c.args[0]
            parts.append(c)
            var, lo, hi = _bound(c, self.binding)
            if var is None:
                self.fail(errors.PaddingConditionError, f"the padding condition {c} is not a "
                          "constant bound on one of the block's iterators")
            old = bounds.get(id(var), (None, None))
            lo = lo if old[0] is None or (lo is not None and lo > old[0]) else old[0]
            hi = hi if old[1] is None or (hi is not None and hi < old[1]) else old[1]
            bounds[id(var)] = (lo, hi)
        self.region = []
        for iv, value in zip(self.blk.iter_vars, self.realize.iter_values):
            interval = relax(value, self.ranges)
            blo = None if interval is None else const_int(interval.lo)
            bhi = None if interval is None else const_int(interval.hi)
            if blo is None or bhi is None:
                self.fail(errors.PaddingConditionError, f"the values of iterator {iv.var.name} "
                          "are not constant bounds")
            lo, hi = bounds.get(id(iv.var), (None, None))
            lo = blo if lo is None else max(lo, blo)
            hi = bhi if hi is None else min(hi, bhi)
            if hi < lo:
                self.fail(errors.PaddingEmptyError, f"no value of iterator {iv.var.name} satisfies "
                          "the padding condition")
            self.region.append((lo, hi - lo + 1))
        self.in_bounds = [substitute(c, self.binding) for c in parts]
        guard = conjuncts(self.realize.predicate)
        if all(can_prove(c, self.ranges) for c in self.in_bounds + guard):
            self.fail(errors.PaddingTrivialError, "the padding condition holds for every "
                      "iteration; there is no padding to decompose")
        self.guard = guard

    # -- the rewrite ---------------------------------------------------------------------------
    def rewrite(self, fill_name):
        fill = self._fill(fill_name)
        copy_top, copy = self._copy()
        loop = self.loop
        if copy_top is loop:
            replacement = S.seq(fill, copy)
        else:
            replacement = S.seq(fill, _Replace({id(copy_top): copy}).visit(loop))
        return _Replace({id(loop): replacement}).visit(self.scope.block)

    def _fill(self, name):
        copied = self.loops[self.pos:]
        lmap = {lp.loop_var: E.Var(lp.loop_var.name, lp.loop_var.dtype) for lp in copied}
        outer = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in self.loops[:self.pos]}
        ivs = [S.IterVar(E.Var(iv.var.name, iv.var.dtype), iv.dom, "spatial") for iv in self.blk.iter_vars]
        imap = {iv.var: new.var for iv, new in zip(self.blk.iter_vars, ivs)}
        body = S.BufferStore(self.store.buffer, self.pad, tuple(imap[i] for i in self.store.indices))
        block = S.Block(name, tuple(ivs), (), (), body)
        _, writes = block_access_regions(block)
        block = block.replace(writes=writes)
        unit = {v: r.min for v, r in outer.items() if const_int(r.extent) == 1}
        values = tuple(simplify(substitute(substitute(v, unit), lmap), outer)
                       for v in self.realize.iter_values)
        predicate = substitute(self.realize.predicate, lmap)
        stmt = S.BlockRealize(values, predicate, block)
        for lp in reversed(copied):
            stmt = S.For(lmap[lp.loop_var], lp.min, lp.extent, "serial", stmt)
        return stmt

    def _copy(self):
        if self.loops[-1].body is not self.realize:
            self.fail(errors.PaddingPatternError, f'block "{self.blk.name_hint}" is not the only '
                      "statement of its innermost loop")
        chain = []   # from the innermost loop up while each is a single-child chain
        for lp in reversed(self.loops):
            chain.append(lp)
            if lp is self.loop:
                break
            parent = self.loops[self.loops.index(lp) - 1] if self.loops.index(lp) > 0 else None
            if parent is None or parent.body is not lp:
                break
        top = chain[-1]
        in_chain = {id(lp.loop_var): lp for lp in chain}
        new_ranges, shift = {}, {}
        ivs, values, repl = [], [], {}
        for (iv, value), (lo, extent) in zip(zip(self.blk.iter_vars, self.realize.iter_values),
                                            self.region):
            dtype = iv.var.dtype
            var = E.Var(iv.var.name, dtype)
            ivs.append(S.IterVar(var, S.Range(E.const(0, dtype), E.const(extent, dtype)), "spatial"))
            repl[iv.var] = var + E.const(lo, dtype) if lo else var
            lp = in_chain.get(id(value)) if isinstance(value, E.Var) else None
            users = [v for v in self.realize.iter_values if uses_var(v, value)] if lp else []
            if lp is not None and len(users) == 1:
                new_ranges[id(lp)] = (E.const(0, lp.min.dtype), E.const(extent, lp.extent.dtype))
                if lo or const_int(lp.min) != 0:
                    shift[lp.loop_var] = value + E.const(lo, value.dtype)
                values.append(value)
            else:
                unit = {v: r.min for v, r in self.ranges.items() if const_int(r.extent) == 1}
                values.append(simplify(substitute(value, unit) - E.const(lo, value.dtype), self.ranges))
        ranges = dict(self.ranges)
        for lp in chain:
            if id(lp) in new_ranges:
                ranges[lp.loop_var] = S.Range(*new_ranges[id(lp)])
        predicate = None
        for c in self.in_bounds + self.guard:
            c = substitute(c, shift)
            if can_prove(c, ranges):
                continue
            predicate = c if predicate is None else E.And(predicate, c)
        body = S.BufferStore(self.store.buffer, simplify(substitute(self.value, repl)),
                             tuple(simplify(substitute(i, repl)) for i in self.store.indices))
        block = S.Block(self.blk.name_hint, tuple(ivs), (), (), body,
                        annotations=self.blk.annotations)
        reads, writes = block_access_regions(block)
        block = block.replace(reads=reads, writes=writes)
        stmt = S.BlockRealize(tuple(values), predicate if predicate is not None else E.const(True, "bool"),
                              block)
        for lp in chain:
            lo_ext = new_ranges.get(id(lp))
            stmt = lp.replace(body=stmt) if lo_ext is None else lp.replace(
                min=lo_ext[0], extent=lo_ext[1], body=stmt)
        return top, stmt


def _bound(c, binding):
    """(iterator, lo, hi) when ``c`` bounds one block iterator by a constant (lo/hi inclusive,
    None when open); (None, None, None) otherwise."""
    if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)):
        return None, None, None
    a, b = c.a, c.b
    kind = type(c)
    if isinstance(b, E.Var) and const_int(a) is not None:
        a, b = b, a
        kind = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE}[kind]
    k = const_int(b)
    if not isinstance(a, E.Var) or not any(a is v for v in binding) or k is None:
        return None, None, None
    if kind is E.LT:
        return a, None, k - 1
    if kind is E.LE:
        return a, None, k
    if kind is E.GT:
        return a, k + 1, None
    return a, k, None


class _Replace(StmtExprMutator):
    """Statements replaced by identity; sequences flattened where a replacement is one."""

    def __init__(self, replacements):
        super().__init__()
        self.replacements = replacements

    def visit(self, node):
        if id(node) in self.replacements:
            return self.replacements[id(node)]
        return super().visit(node)

    def visit_SeqStmt(self, node):
        items = [self.visit(s) for s in node.seq]
        if all(a is b for a, b in zip(items, node.seq)):
            return node
        return S.seq(*items)

    def generic_visit(self, node):
        return super().generic_visit(node) if isinstance(node, (S.Stmt, S.Block)) else node
