"""Queries about a block that both the automatic tuning space (``meta_schedule``) and the
default schedules of ``relax.build`` (``relax.transform.DefaultSchedule``) decide by, and the
annotation keys through which rules ask the postprocessors for parallel, vector and unroll
loops.

The predicates on a block's iterators (``is_spatial``, ``is_reduction``, ``is_reduction_block``)
and loops (``feeds_only_spatial``) are those the schedule primitives check, defined with them in
``primitives/scope.py`` and offered here."""
from __future__ import annotations

from ... import expr as E
from ... import stmt as S
from ...stmt_functor import post_order_visit, uses_var
from ..primitives.scope import feeds_only_spatial, is_reduction, is_reduction_block, is_spatial

__all__ = ["ANN_PARALLEL", "ANN_UNROLL", "ANN_VECTORIZE", "feeds_only_spatial", "has_data_reuse",
           "is_plain_store", "is_reduction", "is_reduction_block", "is_spatial", "loops_match_iters",
           "stores_conditional", "tileable_loops", "writes_param"]

ANN_PARALLEL = "meta_schedule.parallel"
ANN_VECTORIZE = "meta_schedule.vectorize"
ANN_UNROLL = "meta_schedule.unroll_explicit"


def is_plain_store(block) -> bool:
    """A complete block whose body is one store ``B[v...] = value``: what both inlining primitives
    start from."""
    return is_spatial(block) and isinstance(block.body, S.BufferStore)


def stores_conditional(block) -> bool:
    """A plain store whose value selects between values (T.if_then_else or T.Select), as padding
    does: inlined into a convolution, the condition would be tested in its innermost loop."""
    if not is_plain_store(block):
        return False
    found = []
    post_order_visit(block.body.value, lambda e: found.append(e) if isinstance(e, E.Select) or (
        isinstance(e, E.Call) and e.op == "if_then_else") else None)
    return bool(found)


def writes_param(sch, block_rv, block) -> bool:
    """Whether the block writes a buffer the function takes as a parameter (an output)."""
    params = {id(p) for p in sch.mod[block_rv.func_name].buffer_params}
    return any(id(w.buffer) in params for w in block.writes)


def loops_match_iters(sch, block_rv) -> list | None:
    """The block's loops when each iterator is bound to exactly its own loop, in order."""
    loops = sch.get_loops(block_rv)
    realize_values = iter_values(sch, block_rv)
    block = sch.get(block_rv)
    if len(loops) != len(block.iter_vars):
        return None
    for loop, value in zip(loops, realize_values):
        if not isinstance(value, E.Var) or sch.get(loop).loop_var is not value:
            return None
    return loops


def iter_values(sch, block_rv) -> tuple:
    """The values the block's iterators are bound to, in order."""
    index = sch._index(block_rv.func_name)
    return index.blocks[block_rv.name].iter_values


def has_data_reuse(block) -> bool:
    """Some buffer the block reads is indexed by fewer than all of its iterators (each element is
    read by several iterations), so tiling it keeps data in cache."""
    for region in block.reads:
        if any(w.buffer is region.buffer for w in block.writes) or not region.region:
            continue   # the accumulator; a scalar (a 0-d buffer) is no data to keep in cache
        used = [iv for iv in block.iter_vars
                if any(uses_var(r.min, iv.var) or uses_var(r.extent, iv.var) for r in region.region)]
        if len(used) < len(block.iter_vars):
            return True
    return False


def tileable_loops(sch, block_rv) -> list | None:
    """The loops of a reduction with data reuse (matmul, conv) that a tiling rule splits: one per
    iterator, in order; None for any other block."""
    block = sch.get(block_rv)
    if not is_reduction_block(block) or not has_data_reuse(block):
        return None
    return loops_match_iters(sch, block_rv)
