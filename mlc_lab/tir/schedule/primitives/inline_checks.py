"""The legality checks of reverse_compute_inline beyond the shape of the two blocks: the
consumer runs its whole domain once, nothing reads its output before it is written, and a
consumer that loads conditionally is fed by a producer that writes everything it may load."""
from __future__ import annotations

import numpy as np

from ....arith import simplify
from ....arith.bound import int_bound
from ....ir import structural_equal
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...functor import StmtExprVisitor
from ....ir import hooks
from .injective import MAX_ENUMERATED, repeated_points
from .inline_affine import ranges_of
from .scope import const_int


def is_true(cond) -> bool:
    return isinstance(cond, E.IntImm) and cond.value == 1


def _same(a, b) -> bool:
    return structural_equal(simplify(a), simplify(b))


def runs_whole_domain(realize, loops) -> bool:
    """Whether ``loops`` (from the scope down to ``realize``) run every point of the block's
    iteration domain exactly once: each iterator bound to its own loop of the same range (unit
    iterators to their one value, other loops of extent 1), or, for constant extents, as many
    loop points as domain points, each binding inside its domain and no point repeated."""
    if not is_true(realize.predicate):
        return False
    used = []
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if const_int(iv.dom.extent) == 1 and _same(value, iv.dom.min):
            continue
        loop = next((lp for lp in loops if lp.loop_var is value), None)
        if loop is None or any(loop is u for u in used) or not (
                _same(loop.min, iv.dom.min) and _same(loop.extent, iv.dom.extent)):
            break
        used.append(loop)
    else:
        if all(any(lp is u for u in used) or const_int(lp.extent) == 1 for lp in loops):
            return True
    points, wanted = 1, 1
    for lp in loops:
        if const_int(lp.extent) is None:
            return False
        points *= const_int(lp.extent)
    ranges = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        low, ext = const_int(iv.dom.min), const_int(iv.dom.extent)
        if low is None or ext is None:
            return False
        wanted *= ext
        lo, hi = int_bound(value, ranges)
        if lo is None or hi is None or lo < low or hi >= low + ext:
            return False
    return points == wanted and repeated_points(realize, loops) is False


def check_runs_whole_domain(idx, realize, fail) -> None:
    """The folded consumer runs wherever the producer's elements land, that is on its whole
    domain; refuse a consumer whose loops run only part of it (or repeat points)."""
    if not runs_whole_domain(realize, idx.loops_above(realize)):
        fail(errors.PartialConsumerError,
             "its loops are not shown to run every point of its iteration domain exactly once, "
             "so computing it at the producer's iterations could write elements it never wrote",
             realize.block)


def check_output_not_read_between(idx, siblings, realize, producer_realize, out, fail) -> None:
    """No block reads the consumer's output before the consumer writes it: neither the producer
    (which now writes it) nor a block placed before the consumer or sharing loops with the two."""
    if any(r.buffer is out for r in producer_realize.block.reads):
        fail(errors.OutputReadBetweenError,
             f'the producer "{producer_realize.block.name_hint}" reads {out.name}, which it would '
             "now also write", producer_realize.block)
    shared = {id(lp) for lp in idx.loops_above(realize) + idx.loops_above(producer_realize)}
    position = next(k for k, s in enumerate(siblings) if s is realize)
    for k, other in enumerate(siblings):
        if other is realize or not any(r.buffer is out for r in other.block.reads):
            continue
        if k < position or any(id(lp) in shared for lp in idx.loops_above(other)):
            fail(errors.OutputReadBetweenError,
                 f'block "{other.block.name_hint}" reads {out.name} before the consumer has '
                 "written it; if the producer wrote it, that block would see new values",
                 other.block)


class _BranchLoads(StmtExprVisitor):
    """Finds loads of a buffer inside a branch: of a select, of T.if_then_else, or the second
    operand of ``and`` / ``or``."""

    def __init__(self, buffer):
        super().__init__()
        self.buffer, self.depth, self.found = buffer, 0, False

    def _branch(self, guard, *branches):
        self.visit(guard)
        self.depth += 1
        for b in branches:
            self.visit(b)
        self.depth -= 1

    def visit_Select(self, e):
        self._branch(e.condition, e.true_value, e.false_value)

    def visit_Call(self, e):
        if e.op == "if_then_else":
            self._branch(e.args[0], *e.args[1:])
        else:
            self.generic_visit(e)

    def visit_And(self, e):
        self._branch(e.a, e.b)

    visit_Or = visit_And

    def visit_BufferLoad(self, e):
        if e.buffer is self.buffer and self.depth:
            self.found = True
        self.generic_visit(e)


def loads_conditionally(value, buffer) -> bool:
    """Whether some load of ``buffer`` in ``value`` sits in a branch."""
    finder = _BranchLoads(buffer)
    finder.visit(value)
    return finder.found


def producer_writes_all(idx, producer_realize, p_store, load_indices, consumer) -> str | None:
    """Why the producer is not shown to write every element the consumer's loads can reach, or
    None. Needed when a load sits in a branch: the consumer then has iterations that read
    nothing, which the folded block still has to run. Shown when the producer runs its whole
    domain and either stores at its own iterators, whose ranges hold every load index, or, for
    constant domains of at most MAX_ENUMERATED points, by listing the elements on both sides."""
    producer = producer_realize.block
    if not runs_whole_domain(producer_realize, idx.loops_above(producer_realize)):
        return "the producer's loops are not shown to run its whole domain"
    guard = producer.body.condition if isinstance(producer.body, S.IfThenElse) else None
    if guard is None and _plain_covers(producer, p_store, load_indices, consumer):
        return None
    written = _element_keys(p_store.indices, producer.iter_vars, guard)
    read = _element_keys(load_indices, consumer.iter_vars)
    if written is None or read is None:
        return "the elements it writes could not be listed to compare"
    missing = read - written
    if missing:
        return f"{len(missing)} element(s) the consumer may read are never written"
    return None


def _plain_covers(producer, p_store, load_indices, consumer) -> bool:
    plain = []
    for index in p_store.indices:
        iv = next((iv for iv in producer.iter_vars if iv.var is index), None)
        if iv is None or any(iv is p for p in plain):
            return False
        plain.append(iv)
    if len(plain) != len(producer.iter_vars):
        return False
    c_ranges = ranges_of(consumer)
    for iv, index in zip(plain, load_indices):
        low, high = int_bound(index, c_ranges)
        start, ext = const_int(iv.dom.min), const_int(iv.dom.extent)
        if None in (low, high, start, ext) or low < start or high >= start + ext:
            return False
    return True


def _element_keys(indices, iter_vars, guard=None):
    """The elements ``indices`` reach over the whole domain of ``iter_vars`` (where ``guard``
    holds), as a set of index tuples, or None when the domain is symbolic or too big."""
    lows = [const_int(iv.dom.min) for iv in iter_vars]
    exts = [const_int(iv.dom.extent) for iv in iter_vars]
    if None in lows or None in exts or int(np.prod(exts, dtype=np.int64)) > MAX_ENUMERATED:
        return None
    grids = np.meshgrid(*[np.arange(lo, lo + ext, dtype=np.int64) for lo, ext in zip(lows, exts)],
                        indexing="ij")
    count = grids[0].size if grids else 1
    evaluator = hooks.need("runtime.evaluator")(
        {iv.var: g.ravel() for iv, g in zip(iter_vars, grids)}, {})
    try:
        cols = [np.broadcast_to(np.asarray(evaluator.eval(i), np.int64), (count,)) for i in indices]
        keep = np.ones(count, bool) if guard is None else \
            np.broadcast_to(np.asarray(evaluator.eval(guard), bool), (count,))
    except RuntimeError:
        return None
    if not cols:
        return {()}
    return set(map(tuple, np.stack(cols, axis=1)[keep].tolist()))


def check_inputs_not_rewritten(idx, siblings, realize, buffer, fail, state=None) -> None:
    """compute_inline: the buffers the producer reads keep, until its consumers run, the values
    it read. A block that writes one of them must run wholly before the producer or wholly
    after every consumer of ``buffer`` (sharing no loop with them), or, with ``state``, run
    before the producer within loops that every consumer shares, where each consumer reads only
    what the producer writes in the same iteration (an accumulator written back under a tile,
    then read by the epilogue of that tile)."""
    reads = {id(r.buffer): r.buffer for r in realize.block.reads}
    consumers = [s for s in siblings
                 if s is not realize and any(r.buffer is buffer for r in s.block.reads)]
    position = {id(s): k for k, s in enumerate(siblings)}
    mine = {id(lp) for lp in idx.loops_above(realize)}
    theirs = {id(lp) for c in consumers for lp in idx.loops_above(c)}
    last = max((position[id(c)] for c in consumers), default=position[id(realize)])
    for k, other in enumerate(siblings):
        hit = next((reads[id(w.buffer)] for w in other.block.writes if id(w.buffer) in reads), None)
        if other is realize or hit is None:
            continue
        loops = {id(lp) for lp in idx.loops_above(other)}
        before = k < position[id(realize)] and not loops & mine
        after = k > last and not loops & (mine | theirs)
        within = k < position[id(realize)] and state is not None and \
            _read_in_the_same_iteration(idx, state, realize, consumers, buffer, loops & mine, position)
        if not (before or after or within):
            fail(errors.InputWrittenBetweenError,
                 f'block "{other.block.name_hint}" writes {hit.name}, which the block reads, '
                 f"before a consumer of {buffer.name} runs: the inlined value would read the "
                 "new contents", other.block)


def _read_in_the_same_iteration(idx, state, realize, consumers, buffer, shared, position) -> bool:
    """Whether every consumer runs after the producer inside the loops ``shared`` (ids) and, in
    each iteration of them, reads of ``buffer`` only elements the producer writes in it."""
    from ..region_cover import covers, read_upper_bound, written_lower_bound
    chain = [lp for lp in idx.loops_above(realize) if id(lp) in shared]
    if not chain or not consumers:
        return False
    lca = state.get_sref(chain[-1])
    producer_sref = state.get_sref(realize.block)
    store = next((w for w in realize.block.writes if w.buffer is buffer), None)
    if lca is None or producer_sref is None or store is None:
        return False
    written = written_lower_bound(store, realize, producer_sref, lca)
    if written is None:
        return False
    for consumer in consumers:
        c_loops = {id(lp) for lp in idx.loops_above(consumer)}
        c_sref = state.get_sref(consumer.block)
        if not shared <= c_loops or position[id(consumer)] < position[id(realize)] or c_sref is None:
            return False
        for region in consumer.block.reads:
            if region.buffer is buffer and not covers(
                    buffer, [written], read_upper_bound(region, consumer, c_sref, lca)):
                return False
    return True
