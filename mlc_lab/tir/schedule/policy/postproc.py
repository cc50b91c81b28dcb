"""Postprocessors: run on every sampled schedule before it is measured. They turn the rules'
annotations into loop kinds, decompose reductions, and verify the result; a candidate whose
postprocessing fails is dropped (``Postproc.apply`` returns False).

Postprocessing is deterministic and traced like any other step, so a tuning record's trace is
the design (what the space sampled) followed by what postprocessing did.
"""
from __future__ import annotations

from ... import stmt as S
from ..errors import ScheduleError
from ..primitives.scope import all_blocks_under, const_int, feeds_only_spatial
from ...stmt_functor import uses_var
from ...verify import VerifyError, verify
from .blocks import ANN_PARALLEL, ANN_UNROLL, ANN_VECTORIZE


class Postproc:
    """Base class: ``apply(sch)`` changes ``sch`` in place and says whether it is still valid."""

    def apply(self, sch) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def block_names(sch, func_name: str) -> list[str]:
    """Names of every block in the function, in program order (the root excluded)."""
    return [block.name_hint for block in blocks(sch, func_name)]


def blocks(sch, func_name: str) -> list:
    """Every Block of the function, in program order (the root excluded)."""
    root = sch.mod[func_name].body
    return [r.block for r in all_blocks_under(root) if r.block.name_hint != "root"]


def prim_func_names(mod) -> list[str]:
    from ...function import PrimFunc
    return [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, PrimFunc)]


class RewriteParallelVectorizeUnroll(Postproc):
    """Apply ``ParallelVectorizeUnroll``'s annotations: vectorize the block's innermost loop when
    it is spatial and short enough, fuse the leading spatial loops of its nest (up to the parallel
    extent) and parallelise them, and mark inner loops unrolled while the product of their extents
    stays within the sampled unroll depth. A primitive that is not legal here is skipped."""

    def apply(self, sch) -> bool:
        for func_name in prim_func_names(sch.mod):
            for block in blocks(sch, func_name):
                ann = dict(block.annotations)
                keys = [k for k in (ANN_PARALLEL, ANN_VECTORIZE, ANN_UNROLL) if k in ann]
                if not keys:
                    continue
                block_rv = sch.get_block(block.name_hint, func_name)
                for key in keys:
                    sch.unannotate(block_rv, key)
                if ann.get(ANN_VECTORIZE):
                    self._vectorize(sch, block_rv, int(ann[ANN_VECTORIZE]))
                if ann.get(ANN_PARALLEL):
                    self._parallel(sch, block_rv, int(ann[ANN_PARALLEL]))
                if ann.get(ANN_UNROLL):
                    self._unroll(sch, block_rv, int(ann[ANN_UNROLL]))
        return True

    @staticmethod
    def _vectorize(sch, block_rv, max_extent: int) -> None:
        loops = sch.get_loops(block_rv)
        if not loops:
            return
        node = sch.get(loops[-1])
        extent = const_int(node.extent)
        if node.kind != "serial" or extent is None or not 1 < extent <= max_extent:
            return
        if len(all_blocks_under(node)) != 1 or not _contiguous(sch, block_rv, node):
            return
        try:
            sch.vectorize(loops[-1])
        except ScheduleError:
            pass

    @staticmethod
    def _parallel(sch, block_rv, max_extent: int) -> None:
        loops = sch.get_loops(block_rv)
        chosen, product, symbolic = [], 1, False
        for loop in loops:
            node = sch.get(loop)
            extent = const_int(node.extent)
            if node.kind != "serial" or not feeds_only_spatial(node):
                break
            if extent is None:   # a symbolic extent: parallel, after unit loops only (alone:
                symbolic = product == 1   # fused with them, its bindings would not be affine)
                chosen = [loop] if symbolic else chosen
                break
            if chosen and product * extent > max_extent:
                break
            chosen.append(loop)
            product *= extent
        if not chosen or (product == 1 and not symbolic):
            return
        try:
            sch.parallel(sch.fuse(*chosen) if len(chosen) > 1 else chosen[0])
        except ScheduleError:
            pass

    @staticmethod
    def _unroll(sch, block_rv, max_steps: int) -> None:
        product = 1
        for loop in reversed(sch.get_loops(block_rv)):
            node = sch.get(loop)
            extent = const_int(node.extent)
            if node.kind == "vectorized" or (node.kind == "serial" and extent == 1):
                continue
            if node.kind != "serial" or extent is None or product * extent > max_steps:
                break
            product *= extent
            sch.unroll(loop)


def _contiguous(sch, block_rv, loop: S.For) -> bool:
    """Whether the loop walks the last dimension of what the block writes (stride-1 stores)."""
    index = sch._index(block_rv.func_name)
    realize = index.blocks[block_rv.name]
    fed = [iv.var for iv, value in zip(realize.block.iter_vars, realize.iter_values)
           if uses_var(value, loop.loop_var)]
    if len(fed) != 1:
        return False
    return all(w.region and uses_var(w.region[-1].min, fed[0]) for w in realize.block.writes)


class RewriteReductionBlock(Postproc):
    """``decompose_reduction`` every block that still has an init, at its outermost loop over a
    reduction iterator, so the initialisation leaves the inner loops (and they vectorize)."""

    def apply(self, sch) -> bool:
        for func_name in prim_func_names(sch.mod):
            for block in blocks(sch, func_name):
                if block.init is None:
                    continue
                block_rv = sch.get_block(block.name_hint, func_name)
                for loop in sch.get_loops(block_rv):
                    if not feeds_only_spatial(sch.get(loop)):
                        sch.decompose_reduction(block_rv, loop)
                        break
        return True


class VerifyModule(Postproc):
    """The scheduled module passes ``tir.verify``."""

    def apply(self, sch) -> bool:
        try:
            verify(sch.mod)
        except VerifyError:
            return False
        return True


def default_postprocs() -> list:
    from .pack import RewritePackedOperands
    return [RewritePackedOperands(), RewriteParallelVectorizeUnroll(), RewriteReductionBlock(),
            VerifyModule()]
