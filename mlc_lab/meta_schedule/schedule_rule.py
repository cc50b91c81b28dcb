"""Schedule rules: how the automatic space (``PostOrderApply``) schedules one block.

Each rule's ``apply(sch, block)`` changes ``sch`` in place with traced primitives, sampling the
choices a search should explore (tile sizes, where the accumulator is written back, unroll
depth, compute locations), or leaves the block alone when the rule does not fit it. The rules
for CPUs, in the order ``PostOrderApply`` runs them over every block:

1. ``AutoInline``: elementwise blocks disappear into their consumers (or producers).
2. ``MultiLevelTiling``: reductions with data reuse (matmul, conv) are tiled SSRSRS and write
   through a local accumulator (or carry their elementwise consumer) placed at a sampled tile;
   with ``pack=True``, an operand read along the tile's columns may (sampled) be packed.
3. ``AddRFactor``: a reduction over many elements into few (a row sum, a dot product) may
   (sampled) be split and ``rfactor``-ed, so its inner part becomes a vectorizable loop.
4. ``RandomComputeLocation``: the remaining blocks with consumers move under a sampled loop.
5. ``ParallelVectorizeUnroll``: every block is annotated with a sampled parallel width, the
   vector width and a sampled unroll depth; the ``RewriteParallelVectorizeUnroll``
   postprocessor applies them.
"""
from __future__ import annotations

from ..tir.schedule import ScheduleError
from ..tir.schedule.primitives.scope import all_blocks_under, const_int
from ..tir.schedule.policy.blocks import (ANN_PARALLEL, ANN_UNROLL, ANN_VECTORIZE, has_data_reuse,  # noqa: F401
                                          is_reduction, is_reduction_block, is_spatial, loops_match_iters,
                                          tileable_loops, writes_param)
from ..tir.schedule.policy.inline import InlinePolicy
from ..tir.schedule.policy.pack import (ANN_PACK, SYMBOLIC_K_PAD, SYMBOLIC_PAD, packable,
                                        pad_symbolic)


class ScheduleRule:
    """Base class: ``apply(sch, block)`` schedules one block in place (or does nothing)."""

    def apply(self, sch, block) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# -- the rules ----------------------------------------------------------------------------

class AutoInline(ScheduleRule):
    """Inline an elementwise block into its consumers (``compute_inline``); an elementwise block
    that writes an output goes into its producer instead (``reverse_compute_inline``). Either
    only where the primitive's legality checks pass (``InlinePolicy.TUNER``)."""

    def apply(self, sch, block_rv) -> None:
        InlinePolicy.TUNER.inline_block(sch, block_rv)


class MultiLevelTiling(ScheduleRule):
    """Tile a reduction with data reuse in the CPU structure "SSRSRS": every spatial loop is split
    in four by ``sample_perfect_tile``, every reduction loop in two, and the pieces reordered as
    S0 S1 R0 S2 R1 S3. Its single elementwise consumer is then moved under the S0 or S1 tile
    (sampled) with ``reverse_compute_at``; a block without one writes through a local cache
    placed there, so the tile's accumulator is a small local array. With ``pack``, it samples
    whether an operand read along the tile's columns is copied into panels as wide as the tile
    (``ANN_PACK``, applied by the postprocessor ``RewritePackedOperands`` once the tile sizes
    are final). Off by default: the copy's primitives make each packed sample about twice as
    costly to make, and the default schedule a model's tuning starts from packs already."""

    def __init__(self, structure: str = "SSRSRS", max_innermost_factor: int = 64,
                 write_levels=(1, 2), pack: bool = False):
        self.structure, self.pack = structure, pack
        self.max_innermost_factor = max_innermost_factor
        self.write_levels = list(write_levels)

    def apply(self, sch, block_rv) -> None:
        block = sch.get(block_rv)
        loops = tileable_loops(sch, block_rv)
        if loops is None:
            return
        if any(const_int(sch.get(loop).extent) is None for loop in loops):
            try:
                pad_symbolic(sch, block_rv)
            except ScheduleError:
                return   # refused before any change
            loops, block = tileable_loops(sch, block_rv), sch.get(block_rv)
        n_spatial = self.structure.count("S")
        n_reduce = self.structure.count("R")
        groups = {"S": [[] for _ in range(n_spatial)], "R": [[] for _ in range(n_reduce)]}
        for loop, iv in zip(loops, block.iter_vars):
            kind = "S" if iv.iter_type == "spatial" else "R"
            n = n_spatial if kind == "S" else n_reduce
            for level, piece in enumerate(self._tile(sch, loop, n, kind)):
                groups[kind][level].append(piece)
        order, tile_ends, seen = [], [], {"S": 0, "R": 0}
        for kind in self.structure:
            order += groups[kind][seen[kind]]
            seen[kind] += 1
            if kind == "S":
                tile_ends.append(len(order) - 1)
        sch.reorder(*order)
        if self.pack and packable(block) is not None:
            sch.annotate(block_rv, ANN_PACK, sch.sample_categorical([0, 1], [1.0, 1.0]))
        level = sch.sample_categorical(self.write_levels, [1.0] * len(self.write_levels))
        at = order[tile_ends[int(level) - 1]]
        consumers = sch.get_consumers(block_rv)
        if len(consumers) == 1 and is_spatial(sch.get(consumers[0])):
            try:
                sch.reverse_compute_at(consumers[0], at, preserve_unit_loops=True)
                return
            except ScheduleError:
                pass
        cache = sch.cache_write(block_rv, 0, "local")
        sch.reverse_compute_at(cache, at, preserve_unit_loops=True)


    def _tile(self, sch, loop, n: int, kind: str) -> list:
        """``n`` pieces of ``loop``: a perfect tiling sampled for a constant extent; for a
        symbolic one (padded by ``pad_symbolic``), the outermost piece takes the symbolic part and
        the others a sampled tiling of the multiple it was padded to."""
        if const_int(sch.get(loop).extent) is not None:
            tiles = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=self.max_innermost_factor)
            return list(sch.split(loop, factors=tiles))
        outer, inner = sch.split(loop, [None, SYMBOLIC_PAD if kind == "S" else SYMBOLIC_K_PAD])
        tiles = sch.sample_perfect_tile(inner, n=n - 1, max_innermost_factor=self.max_innermost_factor)
        return [outer, *sch.split(inner, factors=tiles)] if n > 2 else [outer, inner]


class AddRFactor(ScheduleRule):
    """For a reduction block whose spatial extent is small (at most ``max_spatial``) and whose
    innermost loop is its only reduction, much longer than that (at least ``min_reduce``),
    sample whether to factor it: the reduction loop is split by ``sample_perfect_tile`` and the
    inner piece ``rfactor``-ed, so the partial sums ``<buffer>_rf`` are indexed by it and
    accumulate as a vector; a second block adds them up. A reduction with data reuse (matmul)
    is left to MultiLevelTiling."""

    def __init__(self, max_spatial: int = 64, min_reduce: int = 64, max_innermost_factor: int = 64):
        self.max_spatial = max_spatial
        self.min_reduce = min_reduce
        self.max_innermost_factor = max_innermost_factor

    def apply(self, sch, block_rv) -> None:
        block = sch.get(block_rv)
        if not is_reduction_block(block) or has_data_reuse(block):
            return
        loops = loops_match_iters(sch, block_rv)
        if loops is None or block.iter_vars[-1].iter_type != "reduce" or \
                sum(iv.iter_type == "reduce" for iv in block.iter_vars) != 1:
            return
        extents = [const_int(sch.get(loop).extent) for loop in loops]
        if None in extents:
            return
        spatial = 1
        for extent in extents[:-1]:
            spatial *= extent
        if spatial > self.max_spatial or extents[-1] < max(self.min_reduce, spatial):
            return
        if not sch.sample_categorical([0, 1], [1.0, 1.0]):
            return
        tiles = sch.sample_perfect_tile(loops[-1], n=2, max_innermost_factor=self.max_innermost_factor)
        _, inner = sch.split(loops[-1], factors=tiles)
        try:
            sch.rfactor(inner, -1)
        except ScheduleError:   # not a recognised reducer (x = x + e, max, min, *)
            pass


class RandomComputeLocation(ScheduleRule):
    """Move a block that still sits at the root and has consumers under a sampled loop of its
    first consumer (``sample_compute_location``; the root is one of the choices)."""

    def apply(self, sch, block_rv) -> None:
        loops = sch.get_loops(block_rv)
        if not loops or not sch.get_consumers(block_rv):
            return
        index = sch._index(block_rv.func_name)
        realize = index.blocks[block_rv.name]
        if index.parent_block(realize) is not index.blocks.get("root") or \
                len(index.loops_above(realize)) != len(loops) or _shares_loops(index, realize):
            return
        location = sch.sample_compute_location(block_rv)
        if location is not None:
            try:
                sch.compute_at(block_rv, location)
            except ScheduleError:
                pass


def _shares_loops(index, realize) -> bool:
    """Whether the block's outermost loop also holds other blocks (it was tiled or fused with
    them already), so moving it alone would break that structure."""
    loops = index.loops_above(realize)
    return len(all_blocks_under(loops[0])) > 1 if loops else False


class ParallelVectorizeUnroll(ScheduleRule):
    """Annotate the block for ``RewriteParallelVectorizeUnroll``: parallelise up to a sampled
    ``jobs_per_core`` (one of ``parallel_jobs_per_core``) times ``cores`` outer iterations,
    vectorize an innermost loop of up to ``max_vectorize_extent``, and unroll inner loops up to
    a sampled number of steps."""

    def __init__(self, parallel_jobs_per_core=(1, 4, 16, 64), max_vectorize_extent: int = 64,
                 unroll_max_steps=(0, 16, 64, 512), num_cores: int = 1):
        self.parallel_jobs_per_core = list(parallel_jobs_per_core)
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = list(unroll_max_steps)
        self.num_cores = num_cores

    def apply(self, sch, block_rv) -> None:
        if not sch.get_loops(block_rv):
            return
        if self.num_cores > 1 and self.parallel_jobs_per_core:
            jobs = sch.sample_categorical([n * self.num_cores for n in self.parallel_jobs_per_core],
                                          [1.0] * len(self.parallel_jobs_per_core))
            sch.annotate(block_rv, ANN_PARALLEL, jobs)
        if self.max_vectorize_extent > 1:
            sch.annotate(block_rv, ANN_VECTORIZE, self.max_vectorize_extent)
        if self.unroll_max_steps:
            steps = sch.sample_categorical(self.unroll_max_steps, [1.0] * len(self.unroll_max_steps))
            sch.annotate(block_rv, ANN_UNROLL, steps)


def default_rules(num_cores: int = 1) -> list:
    """The rules ``PostOrderApply`` uses for a CPU target with ``num_cores`` cores."""
    return [AutoInline(), MultiLevelTiling(), AddRFactor(), RandomComputeLocation(),
            ParallelVectorizeUnroll(num_cores=num_cores)]
