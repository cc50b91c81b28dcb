"""Queries about a block that both the automatic tuning space (``meta_schedule``) and the
default schedules of ``relax.build`` (``relax.transform.DefaultSchedule``) decide by, and the
annotation keys through which rules ask the postprocessors for parallel, vector and unroll
loops."""
from __future__ import annotations

from ... import expr as E
from ...stmt_functor import uses_var

ANN_PARALLEL = "meta_schedule.parallel"
ANN_VECTORIZE = "meta_schedule.vectorize"
ANN_UNROLL = "meta_schedule.unroll_explicit"


def is_reduction(block) -> bool:
    return any(iv.iter_type == "reduce" for iv in block.iter_vars)


def is_spatial(block) -> bool:
    return all(iv.iter_type == "spatial" for iv in block.iter_vars) and block.init is None


def writes_param(sch, block_rv, block) -> bool:
    """Whether the block writes a buffer the function takes as a parameter (an output)."""
    params = {id(p) for p in sch.mod[block_rv.func_name].buffer_params}
    return any(id(w.buffer) in params for w in block.writes)


def loops_match_iters(sch, block_rv) -> list | None:
    """The block's loops when each iterator is bound to exactly its own loop, in order."""
    loops = sch.get_loops(block_rv)
    realize_values = _iter_values(sch, block_rv)
    block = sch.get(block_rv)
    if len(loops) != len(block.iter_vars):
        return None
    for loop, value in zip(loops, realize_values):
        if not isinstance(value, E.Var) or sch.get(loop).loop_var is not value:
            return None
    return loops


def _iter_values(sch, block_rv) -> tuple:
    index = sch._index(block_rv.func_name)
    return index.blocks[block_rv.name].iter_values


def has_data_reuse(block) -> bool:
    """Some buffer the block reads is indexed by fewer than all of its iterators (each element is
    read by several iterations), so tiling it keeps data in cache."""
    for region in block.reads:
        if any(w.buffer is region.buffer for w in block.writes):
            continue
        used = [iv for iv in block.iter_vars
                if any(uses_var(r.min, iv.var) or uses_var(r.extent, iv.var) for r in region.region)]
        if len(used) < len(block.iter_vars):
            return True
    return False


def tileable_loops(sch, block_rv) -> list | None:
    """The loops of a reduction with data reuse (matmul, conv) that a tiling rule splits: one per
    iterator, in order; None for any other block."""
    block = sch.get(block_rv)
    if not is_reduction(block) or block.init is None or not has_data_reuse(block):
        return None
    return loops_match_iters(sch, block_rv)
