"""Whether the iterations of a loop touch disjoint data, so they may run side by side.

parallel, vectorize and bind accept a loop whose blocks are each the sole writer of their outputs
in their scope (complete or reduction blocks). A loop whose blocks share an output with blocks
elsewhere in the scope (two halves of a scatter, the init block after decompose_reduction) is
accepted too when its dataflow is compact under the loop itself (each block directly under it is
a complete or reduction block and the only one there writing its outputs), as the reference
compiler accepts such "locally compact" loops, and this module also proves that no iteration
writes an element another iteration reads or writes. An update block left by
decompose_reduction (reduce iterators, no init) is neither, so its loops stay refused.
"""
from __future__ import annotations

from ....arith import simplify
from ....arith.simplify import linear_form
from ... import stmt as S
from ...stmt_functor import post_order_visit, substitute, uses_var
from ..func_index import child_blocks
from .block_domain import enclosing_ranges, loops_between
from .region import relax_region
from .scope import const_int, is_spatial


def local_problem(loop: S.For, index) -> str | None:
    """None when ``loop`` has locally compact dataflow and independent iterations: each block
    directly under it (blocks nested in those count as part of them) is the only one of them
    that writes its outputs, and is a
    complete block (spatial iterators only, reads none of its outputs) or a reduction block (with
    its T.init, reduce iterators not indexing its outputs), and ``unproven_overlap`` finds nothing.
    Else why not."""
    children = child_blocks(loop)
    for realize in children:
        block = realize.block
        for w in block.writes:
            others = [r.block.name_hint for r in children if r is not realize
                      and any(x.buffer is w.buffer for x in r.block.writes)]
            if others:
                return (f'block "{block.name_hint}" shares its output {w.buffer.name} with block '
                        f'"{others[0]}" under loop {loop.loop_var.name}')
        if block.init is not None:   # a reduction block, even with spatial iterators only
            outputs = [w.buffer for w in block.writes]
            reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type != "spatial"]
            if _indexes_output_with(block.body, outputs, reduce_vars):
                return f'block "{block.name_hint}" indexes its output with a reduce iterator'
        elif not is_spatial(block):
            return (f'block "{block.name_hint}" has reduce iterators but no T.init (it is neither '
                    "a complete nor a reduction block)")
        elif any(r.buffer is w.buffer for r in block.reads for w in block.writes):
            return f'block "{block.name_hint}" reads a buffer it writes'
    return unproven_overlap(loop, index)


def _indexes_output_with(stmt, outputs, variables) -> bool:
    found = []

    def visit(node):
        if isinstance(node, S.BufferStore) and any(node.buffer is b for b in outputs) \
                and any(uses_var(i, variables) for i in node.indices):
            found.append(node)
    post_order_visit(stmt, visit)
    return bool(found)


def unproven_overlap(loop: S.For, index) -> str | None:
    """None when two different iterations of ``loop`` never touch one element that either of them
    writes; else a sentence naming the buffer and blocks that could not be shown apart. Buffers
    allocated by blocks under the loop are private to an iteration and are not compared."""
    if const_int(loop.extent) == 1:
        return None
    known = enclosing_ranges(index, loop)
    accesses, private = [], set()
    for realize, binding in _blocks_with_bindings(loop, {}):
        private.update(id(b) for b in realize.block.alloc_buffers)
        relaxed = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops_between(index, realize, loop)}
        guard = substitute(realize.predicate, binding)
        for writes, regions in ((True, realize.block.writes), (False, realize.block.reads)):
            for region in regions:
                accesses.append((region.buffer, relax_region(region, relaxed, known, binding, [guard]),
                                 writes, realize.block.name_hint))
    for buf, region, writes, name in accesses:
        if not writes or id(buf) in private:
            continue
        for other_buf, other, other_writes, other_name in accesses:
            if other_buf is buf and not _apart(region, other, loop.loop_var, known):
                how = "writes" if other_writes else "reads"
                return (f'block "{other_name}" {how} part of buffer {buf.name} that block "{name}" '
                        f"writes in another iteration of loop {loop.loop_var.name} (or this could not "
                        "be ruled out)")
    return None


def _blocks_with_bindings(stmt, outer: dict):
    """Every block under ``stmt`` with its iterators bound in terms of loop variables (the
    iterators of the blocks around it substituted)."""
    for realize in child_blocks(stmt):
        binding = dict(outer)
        binding.update({iv.var: substitute(v, outer)
                        for iv, v in zip(realize.block.iter_vars, realize.iter_values)})
        yield realize, binding
        yield from _blocks_with_bindings(realize, binding)


def _apart(a: list, b: list, var, known) -> bool:
    """Region ``a`` at iteration ``var = x`` and region ``b`` at ``var = y`` are disjoint whenever
    x != y: some dimension moves by ``c * var`` in both, and each spans less than ``|c|`` together
    with the other."""
    for ia, ib in zip(a, b):
        if ia is None or ib is None:
            continue
        coefs = {_coefficient(e, var) for e in (ia.lo, ia.hi, ib.lo, ib.hi)}
        if len(coefs) != 1:
            continue
        c = abs(coefs.pop() or 0)
        if c == 0:
            continue
        gap1 = const_int(simplify(ib.hi - ia.lo, known))
        gap2 = const_int(simplify(ia.hi - ib.lo, known))
        if gap1 is not None and gap2 is not None and c > gap1 and c > gap2:
            return True
    return False


def _coefficient(e, var) -> int | None:
    """c when ``e`` is ``c * var`` plus terms free of ``var``; None otherwise."""
    coef = 0
    for atom, k in linear_form(simplify(e)).terms.values():
        if atom is var:
            coef += k
        elif uses_var(atom, var):
            return None
    return coef
