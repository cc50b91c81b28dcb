"""Helpers shared by schedule primitives: substitution that keeps block bindings simple, loop
ranges, block classification. The block and loop predicates here are the ones every schedule
decides by (``tir.schedule.policy.blocks`` offers them to the rules)."""
from __future__ import annotations

from ...linear_index import simplify
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...stmt_functor import Substitute, uses_var
from ..func_index import StmtReplacer, child_blocks


class SimplifyingSubstitute(Substitute):
    """Replace variables by expressions; the bindings and predicate of every block that changes
    are re-simplified, knowing the ranges of the loops passed on the way down."""

    def __init__(self, mapping: dict, var_ranges: dict | None = None):
        super().__init__(mapping)
        self.var_ranges = var_ranges or {}

    def visit_BlockRealize(self, realize):
        new = self.generic_visit(realize)
        if new is realize:
            return realize
        values = tuple(simplify(v, self.var_ranges) for v in new.iter_values)
        return new.replace(iter_values=values, predicate=simplify(new.predicate, self.var_ranges))

    def visit_For(self, loop):
        self.var_ranges[loop.loop_var] = S.Range(loop.min, loop.extent)
        return self.generic_visit(loop)


def substitute_and_simplify(stmt, mapping: dict, var_ranges: dict | None = None):
    """``stmt`` with the variables of ``mapping`` replaced, and the bindings of the blocks that
    changed simplified (``var_ranges``: Var -> Range of the loops around ``stmt``)."""
    return SimplifyingSubstitute(mapping, dict(var_ranges or {})).visit(stmt)


def loop_ranges(loops) -> dict:
    """Var -> Range for a list of For nodes."""
    return {loop.loop_var: S.Range(loop.min, loop.extent) for loop in loops}


def const_int(e):
    return e.value if isinstance(e, E.IntImm) else None


def first_loop_feeding_reduction(realize, loops):
    """The first of ``loops`` whose variable appears in a binding of one of the block's reduce
    iterators, or None."""
    return next((lp for lp in loops if "reduce" in fed_iter_types(lp.loop_var, [realize])), None)


def add_predicate(stmt, condition_of):
    """Conjoin ``condition_of(realize)`` into the predicate of every block directly under stmt."""
    replacements = {}
    for realize in [stmt] if isinstance(stmt, S.BlockRealize) else child_blocks(stmt):
        extra = condition_of(realize)
        if extra is not None:
            replacements[id(realize)] = realize.replace(predicate=simplify(realize.predicate & extra))
    return StmtReplacer(replacements).visit(stmt)


def all_blocks_under(stmt) -> list:
    """Every BlockRealize inside ``stmt`` (at any depth)."""
    out, todo = [], list(child_blocks(stmt))
    while todo:
        realize = todo.pop(0)
        out.append(realize)
        todo.extend(child_blocks(realize))
    return out


def writers_in_scope(scope_realize, buffer) -> list:
    """Blocks inside ``scope_realize`` (at any depth) that write ``buffer``."""
    return [r for r in all_blocks_under(scope_realize)
            if any(w.buffer is buffer for w in r.block.writes)]


def is_spatial(block: S.Block) -> bool:
    """A complete block by its iterators: all spatial, no init (elementwise, broadcast, injective
    blocks; what the inlining primitives accept)."""
    return all(iv.iter_type == "spatial" for iv in block.iter_vars) and block.init is None


def is_reduction(block: S.Block) -> bool:
    """The block has a reduce iterator (with or without an init)."""
    return any(iv.iter_type == "reduce" for iv in block.iter_vars)


def is_reduction_block(block: S.Block) -> bool:
    """A reduction block: reduce iterators and a T.init (what decompose_reduction and rfactor
    take)."""
    return block.init is not None and is_reduction(block)


def dataflow_violation(realize, scope_realize) -> tuple[type, str] | None:
    """(the error class of the broken rule, why) when ``realize`` is neither a complete nor a
    reduction block in its scope, or None.

    Complete: only spatial iterators, sole writer of its outputs, does not read what it writes.
    Reduction: has an init, and is the sole writer of its outputs.
    """
    block = realize.block
    own = {id(r) for r in all_blocks_under(realize)}   # its own inner blocks write for it
    for w in block.writes:
        others = [r for r in writers_in_scope(scope_realize, w.buffer) if r is not realize
                  and id(r) not in own and w.buffer not in [b for b in r.block.alloc_buffers]]
        if others:
            names = ", ".join(f'"{r.block.name_hint}"' for r in others)
            return errors.NotSingleWriterError, (
                f'block "{block.name_hint}" is not the only writer of buffer {w.buffer.name} '
                f"(also written by {names})")
    if is_reduction_block(block):
        return None
    if any(iv.iter_type != "spatial" for iv in block.iter_vars):
        return errors.NotCompleteOrReductionBlockError, (
            f'block "{block.name_hint}" has reduce iterators but no init, so it is not a '
            "complete reduction")
    written = {id(w.buffer) for w in block.writes}
    for r in block.reads:
        if id(r.buffer) in written:
            return errors.NotCompleteOrReductionBlockError, (
                f'block "{block.name_hint}" reads buffer {r.buffer.name}, which it also writes')
    return None


def fed_iter_types(loop_var, realizes) -> set[str]:
    """The kinds ("spatial", "reduce") of the block iterators of ``realizes`` whose bindings use
    ``loop_var``."""
    return {"spatial" if iv.iter_type == "spatial" else "reduce"
            for realize in realizes
            for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if uses_var(value, loop_var)}


def feeds_only_spatial(loop: S.For) -> bool:
    """Whether every block under ``loop`` uses its variable only in spatial iterators (running the
    loop's iterations apart, on cores or GPU threads, carries no reduction)."""
    return fed_iter_types(loop.loop_var, all_blocks_under(loop)) <= {"spatial"}


def loop_iter_type(loop_var, realize) -> str | None:
    """What ``loop_var`` feeds in the bindings of ``realize``: "spatial", "reduce", "mixed" (both
    kinds of iterator, as after fusing a spatial loop with a reduce loop), or None (neither)."""
    kinds = fed_iter_types(loop_var, [realize])
    return None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"


def mixed_loop_of_reduction(loops, realize):
    """The first of ``loops`` that feeds both spatial and reduce iterators of the reduction block
    ``realize``, or None: reordering such a loop would run the init after some of the updates it
    must precede."""
    if not is_reduction_block(realize.block):
        return None
    return next((lp for lp in loops if loop_iter_type(lp.loop_var, realize) == "mixed"), None)
