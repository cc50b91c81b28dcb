"""rolling_buffer: keep only a sliding window of a tiled intermediate buffer, indexed modulo the
window, and skip recomputing the part each tile shares with the previous one."""
from __future__ import annotations

from itertools import product

from ....arith import can_prove, simplify
from .. import errors
from ... import expr as E
from ... import stmt as S
from ..func_index import child_blocks
from ..instruction import instruction
from ...functor import StmtExprMutator
from ...intervals import Interval as _Interval, relax
from ...stmt_functor import conjuncts, loads_in, stores_in, substitute, uses_var
from .cache import _nth_buffer
from .scope import all_blocks_under, const_int

_ORDERED_KINDS = ("serial", "unrolled")
_ENUMERATION_LIMIT = 1 << 14


class RollingBufferPrimitives:

    @instruction
    def rolling_buffer(self, block, write_buffer_index: int) -> None:
        """Turn the buffer a tiled producer writes into a rolling (circular) buffer.

        The producer must sit under a loop shared with its consumers (after ``compute_at``),
        writing per iteration a tile that overlaps the previous iteration's tile on some axes
        (the index has the form ``loop * stride + offset``, the tile extent exceeding the stride).
        The outermost such loop becomes the rolling loop: the buffer keeps only one tile along its
        axis, accessed at ``index % extent``, and that axis's block iterators become opaque. On
        every overlapping axis the producer gets a ``T.where`` that skips the elements the
        previous iteration already computed, as the reference compiler does.

        Requires: the buffer is allocated in the block's scope and the block is its only writer,
        storing nothing else, always at the same plain iterators; the lowest common ancestor of
        the block and its consumers is a loop; the loops of the producer and its consumers are
        serial; consumers run after the producer and read, per iteration, only inside the tile
        it writes; successive tiles move forward by at most their stride; an element's value
        depends only on which element it is (a skipped element was computed one iteration
        earlier with the same result): no iterator bound to the shared loops but the stored
        ones, and each input written in the scope has one writer that runs earlier in the same
        iteration, covers what the block reads, and obeys the same rule. The reference compiler
        checks only the dependence kinds; the other rules are ours, so that an accepted rolling
        buffer never computes something else.

        Parameters: block (BlockRV or name), write_buffer_index (int, among the block's writes).
        Raises: RollingBufferNotAllocatedError, RollingBufferDependencyError,
        RollingBufferInsertionError, RollingBufferMatchError, RollingBufferUnsafeError (all
        RollingBufferError), BufferIndexOutOfRangeError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((10,), "int32"), C: T.Buffer((8,), "int32")):
        ...     B = T.alloc_buffer((10,), "int32")
        ...     for i_0 in range(2):
        ...         for ax0 in range(6):
        ...             with T.block("B"):
        ...                 vi = T.axis.spatial(10, i_0 * 4 + ax0)
        ...                 B[vi] = A[vi] + 1
        ...         for i_1 in range(4):
        ...             with T.block("C"):
        ...                 vi = T.axis.spatial(8, i_0 * 4 + i_1)
        ...                 C[vi] = B[vi] + B[vi + 2]
        >>> sch = tir.Schedule(f)
        >>> sch.rolling_buffer(sch.get_block("B"), 0)
        >>> print(sch.mod["main"].body.block.body.body[0])
        for ax0 in range(6):
            with T.block("B"):
                vi = T.axis.opaque(10, i_0 * 4 + ax0)
                T.where(i_0 < 1 or ax0 >= 2)
                T.reads(A[vi])
                T.writes(B[vi % 6])
                B[vi % 6] = A[vi] + 1
        """
        p = "rolling_buffer"
        func_name, realize, index = self._resolve_block(block, p)
        func = self._func(func_name)
        buffer = _nth_buffer(realize, write_buffer_index, "write", p, func)
        blk = realize.block
        scope = index.parent_block(realize)
        if scope is None or not any(b is buffer for b in scope.block.alloc_buffers):
            raise errors.RollingBufferNotAllocatedError(
                p, f"buffer {buffer.name} is not allocated by the block enclosing block "
                f'"{blk.name_hint}" (a parameter or a buffer of another scope cannot roll)',
                func, [blk])
        siblings = child_blocks(scope)
        _check_dependencies(p, func, realize, buffer, siblings)
        consumers = [r for r in siblings if r is not realize
                     and any(reg.buffer is buffer for reg in r.block.reads)]
        lca = _lowest_common_loop(index, [realize] + consumers)
        if not consumers or not isinstance(lca, S.For):
            raise errors.RollingBufferInsertionError(
                p, f'the lowest common ancestor of block "{blk.name_hint}" and the consumers of '
                f"buffer {buffer.name} is not a loop; compute the block at a loop of its consumer "
                "first", func, [blk])
        loops = index.loops_above(realize)
        depth = loops.index(lca) + 1
        outer, inner = loops[:depth], loops[depth:]
        known = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in outer}
        relaxed = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in inner}
        binding = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
        axes = _write_axes(p, func, realize, buffer, binding)
        info = [_match_axis(binding[w], relaxed, known, outer) for w in axes]
        if any(item is False for item in info):
            raise errors.RollingBufferMatchError(
                p, f"the tile of buffer {buffer.name} written per iteration of loop "
                f"{lca.loop_var.name} has a dimension whose start is not loop * stride", func, [blk])
        rolling = next((lp for lp in loops if any(it and it[0] is lp for it in info)), None)
        if rolling is None:
            raise errors.RollingBufferMatchError(
                p, f"no dimension of the tile of buffer {buffer.name} written per iteration "
                f"overlaps the previous iteration's tile (loop * stride + offset with an extent "
                "above the stride)", func, [blk])
        axis = next(d for d, it in enumerate(info) if it and it[0] is rolling)
        window = info[axis][2]
        checker = _Checker(p, func, blk, known)
        checker.serial(loops, consumers, index, lca)
        conditions = checker.overlaps(realize, axes, info, binding, relaxed)
        checker.consumers_in_tile(index, lca, realize, consumers, buffer)
        checker.inputs(index, lca, realize, siblings)
        new_buffer = buffer.replace(shape=tuple(E.const(window, s.dtype) if d == axis else s
                                                for d, s in enumerate(buffer.shape)))
        touched = {id(realize)} | {id(r) for r in consumers}
        rewriter = _Roll(buffer, new_buffer, axis, window, touched, id(realize), conditions)
        new_scope = rewriter.visit(scope.block)
        new_scope = new_scope.replace(alloc_buffers=tuple(
            new_buffer if b is buffer else b for b in new_scope.alloc_buffers))
        self._replace(func_name, {id(scope.block): new_scope}, p)


def _check_dependencies(p, func, realize, buffer, siblings) -> None:
    blk = realize.block
    others = [r for r in siblings if r is not realize
              and any(reg.buffer is buffer for reg in r.block.writes)]
    if others:
        raise errors.RollingBufferDependencyError(
            p, f'buffer {buffer.name} is also written by block "{others[0].block.name_hint}"; '
            "a rolling buffer needs a single writer", func, [blk, others[0].block])
    stored = stores_in(blk.body) + (stores_in(blk.init) if blk.init is not None else [])
    if (any(r.buffer is not buffer for r in blk.writes) or any(s.buffer is not buffer for s in stored)
            or all_blocks_under(blk.body)):
        raise errors.RollingBufferDependencyError(
            p, f'block "{blk.name_hint}" writes more than buffer {buffer.name} (or holds inner '
            "blocks); skipping its recomputed iterations would skip those writes", func, [blk])
    if any(mb.source.buffer is buffer for r in siblings for b in all_blocks_under(r) + [r]
           for mb in b.block.match_buffers):
        raise errors.RollingBufferUnsafeError(
            p, f"buffer {buffer.name} is viewed through a match_buffer", func, [blk])


def _lowest_common_loop(index, realizes):
    paths = [index.path(r) + [r] for r in realizes]
    common = None
    for nodes in zip(*paths):
        if any(n is not nodes[0] for n in nodes):
            break
        common = nodes[0]
    return common


def _write_axes(p, func, realize, buffer, binding) -> list:
    """The iterator the block stores ``buffer`` at, per dimension (every store the same)."""
    blk = realize.block
    stored = stores_in(blk.body) + (stores_in(blk.init) if blk.init is not None else [])
    first = stored[0].indices if stored else ()
    for store in stored:
        if (len(store.indices) != len(first) or any(a is not b for a, b in zip(store.indices, first))
                or not all(isinstance(i, E.Var) and i in binding for i in store.indices)
                or len({id(i) for i in store.indices}) != len(store.indices)):
            raise errors.RollingBufferUnsafeError(
                p, f'block "{blk.name_hint}" stores buffer {buffer.name} at indices other than '
                "one distinct block iterator per dimension", func, [blk])
    for load in loads_in(blk.body):
        if load.buffer is buffer and any(a is not b for a, b in zip(load.indices, first)):
            raise errors.RollingBufferUnsafeError(
                p, f'block "{blk.name_hint}" reads buffer {buffer.name} elsewhere than where it '
                "stores", func, [blk])
    return list(first)


def _match_axis(value, relaxed, known, outer):
    """(loop, stride, extent, start) when the values ``value`` takes per outer iteration start at
    ``loop * stride`` (or ``loop * s // d``) and overlap the previous iteration's; None when the
    dimension does not roll; False when its start has no recognised form."""
    interval = relax(value, relaxed, known)
    if interval is None:
        return False
    extent = const_int(simplify(interval.hi - interval.lo + 1))
    lo = interval.lo
    if extent is None:
        return False
    by_var = {id(lp.loop_var): lp for lp in outer}
    stride = None
    if isinstance(lo, E.Var):
        var, stride = lo, 1
    elif isinstance(lo, E.Mul) and isinstance(lo.a, E.Var) and const_int(lo.b) is not None:
        var, stride = lo.a, const_int(lo.b)
    elif (isinstance(lo, E.FloorDiv) and isinstance(lo.a, E.Mul) and isinstance(lo.a.a, E.Var)
          and const_int(lo.a.b) is not None and const_int(lo.b)):
        var, stride = lo.a.a, -(-const_int(lo.a.b) // const_int(lo.b))
    elif const_int(lo) is not None:
        return None
    else:
        return False
    if id(var) not in by_var:
        return False
    if extent - stride <= 0:
        return None
    return by_var[id(var)], stride, extent, lo


class _Checker:
    """The conditions under which the rolled program computes what the original computes."""

    def __init__(self, p, func, blk, known):
        self.p, self.func, self.blk, self.known = p, func, blk, known

    def fail(self, rule, culprits=None):
        raise errors.RollingBufferUnsafeError(self.p, rule, self.func, culprits or [self.blk])

    def serial(self, loops, consumers, index, lca) -> None:
        for lp in loops + [lp for r in consumers for lp in index.loops_above(r)]:
            if lp.kind not in _ORDERED_KINDS:
                self.fail(f"loop {lp.loop_var.name} is {lp.kind}; the loops of the producer and its "
                          "consumers must run in order (the window is shared by all iterations)", [lp])

    def holds(self, cond) -> bool:
        """``cond`` holds for every value of the outer loops (proved, or checked value by value)."""
        cond = simplify(cond, self.known)
        if const_int(cond) == 1 or can_prove(cond, self.known):
            return True
        free = [v for v in self.known if uses_var(cond, v)]
        ranges = [self.known[v] for v in free]
        if any(const_int(r.min) is None or const_int(r.extent) is None for r in ranges):
            return False
        total = 1
        for r in ranges:
            total *= const_int(r.extent)
        if total > _ENUMERATION_LIMIT:
            return False
        for values in product(*[range(const_int(r.min), const_int(r.min) + const_int(r.extent))
                                for r in ranges]):
            mapping = {v: E.const(x, v.dtype) for v, x in zip(free, values)}
            if const_int(simplify(substitute(cond, mapping))) != 1:
                return False
        return True

    def overlaps(self, realize, axes, info, binding, relaxed) -> list:
        """The skip condition of each overlapping dimension, after checking it skips only
        elements the previous iteration of its loop computed."""
        outer_vars = list(self.known)
        ids = {id(w) for w in axes}
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if id(iv.var) not in ids and uses_var(value, outer_vars):
                self.fail(f"iterator {iv.var.name} is not a dimension of the rolled buffer but its "
                          "binding uses a loop shared with the consumers")
        self._predicate_on_elements(realize, axes, binding)
        conditions = []
        for d, (w, it) in enumerate(zip(axes, info)):
            if not it:
                continue
            loop, stride, extent, lo = it
            overlap = extent - stride
            value = binding[w]
            offset = simplify(substitute(value, {loop.loop_var: E.const(0, loop.loop_var.dtype)}))
            inner = next((r for v, r in relaxed.items() if v is offset), None)
            if (inner is None or const_int(inner.min) != 0 or const_int(inner.extent) != extent
                    or const_int(simplify(value - lo - offset)) != 0):
                self.fail(f"dimension {d} of the tile is not start + one inner loop of extent {extent}")
            if any(uses_var(binding[x], loop.loop_var) for x in axes if x is not w) or any(
                    uses_var(v, offset) for iv, v in zip(realize.block.iter_vars, realize.iter_values)
                    if iv.var is not w):
                self.fail(f"loop {loop.loop_var.name} or {offset.name} feeds more than dimension {d}")
            var = loop.loop_var
            prev = substitute(lo, {var: var - 1})
            step = simplify(lo - prev)
            guard = E.LT(var, E.const(1, var.dtype))
            if not self.holds(E.Or(guard, E.And(E.GE(step, 0), E.LE(step, stride)))):
                self.fail(f"the tile start {lo} along dimension {d} does not move forward by at most "
                          f"{stride} per iteration of loop {var.name}")
            conditions.append(E.Or(guard, E.GE(offset, E.const(overlap, offset.dtype))))
        return conditions

    def _predicate_on_elements(self, realize, axes, binding) -> None:
        ids = {id(w) for w in axes}
        values = [binding[w] for w in axes]
        others = [v for iv, v in zip(realize.block.iter_vars, realize.iter_values)
                  if id(iv.var) not in ids]
        for c in conjuncts(realize.predicate):
            if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)) or const_int(c.b) is None:
                self.fail(f"the block's predicate {c} is not a bound on one of its iterators")
            if not any(_equal(c.a, v) for v in values + others):
                self.fail(f"the block's predicate {c} is not a bound on one of its iterators")

    def consumers_in_tile(self, index, lca, realize, consumers, buffer) -> None:
        for r in consumers:
            self.covers(index, lca, realize, r, buffer, "consumer")

    def covers(self, index, lca, writer, reader, buffer, role) -> None:
        """``reader`` runs after ``writer`` in each iteration of ``lca`` and loads, per iteration,
        only elements of ``buffer`` inside the tile ``writer`` stores in that iteration."""
        body = lca.body
        stmts = list(body.seq) if isinstance(body, S.SeqStmt) else [body]

        def position(r):
            ids = {id(x) for x in index.path(r)} | {id(r)}
            return next((k for k, st in enumerate(stmts) if id(st) in ids), None)
        name = reader.block.name_hint
        where_w, where_r = position(writer), position(reader)
        if where_w is None or where_r is None or where_r <= where_w:
            self.fail(f'{role} "{name}" does not run after block "{writer.block.name_hint}" '
                      f"inside loop {lca.loop_var.name}", [reader.block])
        tile = self._tile(index, lca, writer, buffer, stores=True)
        got = self._tile(index, lca, reader, buffer, stores=False)
        if tile is None or got is None:
            self.fail(f'{role} "{name}" accesses buffer {buffer.name} other than by plain loads '
                      f'of what block "{writer.block.name_hint}" stores', [reader.block])
        for d, (t, g) in enumerate(zip(tile, got)):
            if t is None or g is None or not (self.holds(E.GE(g.lo, t.lo))
                                              and self.holds(E.LE(g.hi, t.hi))):
                self.fail(f'{role} "{name}" reads buffer {buffer.name} outside the tile block '
                          f'"{writer.block.name_hint}" writes in the same iteration of loop '
                          f"{lca.loop_var.name} (dimension {d})", [reader.block])

    def _tile(self, index, lca, realize, buffer, stores: bool):
        """Per dimension, the Interval of ``buffer`` the block stores (or loads) in one iteration
        of ``lca``; None when it also touches the buffer otherwise."""
        blk = realize.block
        parts = [blk.body] + ([blk.init] if blk.init is not None else [])
        if stores:
            if any(r.buffer is buffer for r in blk.reads if not any(
                    ld.buffer is buffer for part in parts for ld in loads_in(part))):
                return None
            found = [st.indices for part in parts for st in stores_in(part) if st.buffer is buffer]
        else:
            if any(st.buffer is buffer for part in parts for st in stores_in(part)):
                return None
            found = [ld.indices for part in parts for ld in loads_in(part) if ld.buffer is buffer]
        if not found or all_blocks_under(blk.body):
            return None
        own = {iv.var: v for iv, v in zip(blk.iter_vars, realize.iter_values)}
        around = {id(x) for x in index.path(lca)} | {id(lca)}
        inner = {lp.loop_var: S.Range(lp.min, lp.extent)
                 for lp in index.path(realize) if isinstance(lp, S.For) and id(lp) not in around}
        tile = None
        for indices in found:
            box = [relax(substitute(i, own), inner, self.known) for i in indices]
            if tile is None:
                tile = box
                continue
            tile = [None if a is None or b is None else
                    _Interval(simplify(E.Min(a.lo, b.lo), self.known),
                              simplify(E.Max(a.hi, b.hi), self.known))
                    for a, b in zip(tile, box)]
        return tile

    def inputs(self, index, lca, realize, siblings, seen=()) -> None:
        """Each input of the block written in the scope is written, in every iteration of
        ``lca`` before the block runs, with what the block reads: computing an element one
        iteration early then reads the same values."""
        blk = realize.block
        around = {id(x) for x in index.path(lca)} | {id(lca)}
        outer = [lp.loop_var for lp in index.path(realize) if isinstance(lp, S.For) and id(lp) in around]
        parts = [blk.body] + ([blk.init] if blk.init is not None else [])
        stored = [st.indices for part in parts for st in stores_in(part)]
        plain = [_plain_index(i) for i in stored[0]] if stored else []
        same = all(len(ix) == len(plain) and all(_plain_index(a) is b for a, b in zip(ix, plain))
                   for ix in stored)
        distinct = all(x is not None for x in plain) and len({id(x) for x in plain}) == len(plain)
        if not stored or not same or not distinct or uses_var(parts, outer):
            self.fail(f'block "{blk.name_hint}" must store at the same distinct iterators every '
                      f"time and not use the loops around loop {lca.loop_var.name} in its body",
                      [blk])
        for iv, value in zip(blk.iter_vars, realize.iter_values):
            # an element's value may only depend on which element it is: an iterator bound to
            # a loop around the common loop must be one of the store's indices
            if uses_var(value, outer) and not any(iv.var is v for v in plain):
                self.fail(f'iterator {iv.var.name} of block "{blk.name_hint}" is bound to a loop '
                          f"around loop {lca.loop_var.name} but is no index of its store", [blk])
        mine = {id(st.buffer) for st in stores_in(blk.body)}
        for region in blk.reads:
            if id(region.buffer) in mine:
                continue
            writers = [r for r in siblings if r is not realize
                       and any(w.buffer is region.buffer for w in r.block.writes)]
            if not writers:
                continue
            if len(writers) > 1 or id(writers[0]) in seen:
                raise errors.RollingBufferDependencyError(
                    self.p, f'input {region.buffer.name} of block "{blk.name_hint}" has several '
                    "writers in the scope", self.func, [blk])
            self.covers(index, lca, writers[0], realize, region.buffer, "block")
            self.inputs(index, lca, writers[0], siblings, tuple(seen) + (id(realize),))


def _plain_index(i):
    """The iterator of an index ``v`` or ``v % c`` (a rolled dimension), else None."""
    if isinstance(i, E.FloorMod) and const_int(i.b) is not None:
        i = i.a
    return i if isinstance(i, E.Var) else None


def _equal(a, b) -> bool:
    return const_int(simplify(a - b)) == 0


class _Roll(StmtExprMutator):
    """Accesses of ``old`` become accesses of ``new`` at ``index % window`` on the rolled axis;
    the producer's and consumers' iterators of that axis become opaque; the producer gets the
    skip conditions."""

    def __init__(self, old, new, axis, window, touched, producer, conditions):
        super().__init__()
        self.old, self.new, self.axis, self.window = old, new, axis, window
        self.touched, self.producer, self.conditions = touched, producer, conditions

    def _indices(self, indices):
        return tuple(E.FloorMod(i, E.const(self.window, i.dtype)) if d == self.axis else i
                     for d, i in enumerate(indices))

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        if node.buffer is self.new:
            node = node.replace(indices=self._indices(node.indices))
        return node

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        if node.buffer is self.new:
            node = node.replace(indices=self._indices(node.indices))
        return node

    def visit_Buffer(self, buffer):
        return self.new if buffer is self.old else buffer

    def visit_BufferRegion(self, node):
        if node.buffer is not self.old:
            return node
        region = list(node.region)
        rng = region[self.axis]
        if const_int(rng.extent) == 1:
            region[self.axis] = S.Range(E.FloorMod(rng.min, E.const(self.window, rng.min.dtype)),
                                        rng.extent)
        else:
            region[self.axis] = S.Range(E.const(0, rng.min.dtype), E.const(self.window, rng.min.dtype))
        return S.BufferRegion(self.new, tuple(region))

    def visit_BlockRealize(self, node):
        new = self.generic_visit(node)
        if id(node) not in self.touched:
            return new
        blk = new.block
        if self.axis < len(blk.iter_vars):
            ivs = list(blk.iter_vars)
            ivs[self.axis] = ivs[self.axis].replace(iter_type="opaque")
            blk = blk.replace(iter_vars=tuple(ivs))
        predicate = new.predicate
        if id(node) == self.producer:
            for cond in self.conditions:
                predicate = cond if const_int(predicate) == 1 else E.And(predicate, cond)
        return new.replace(block=blk, predicate=predicate)
