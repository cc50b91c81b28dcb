"""Schedule rules for GPU targets (those whose backend's capabilities say ``gpu``: "cuda",
"cuda-sim", "opencl", a tag such as "nvidia/a100"): every block
ends up bound to blocks and threads, with the choices a search should explore sampled.

1. ``AutoInline`` (shared with the CPU rules): elementwise blocks disappear into their neighbours.
2. ``MultiLevelTilingGPU``: a reduction with data reuse (matmul, conv) is tiled as the course's
   hand schedule is: every spatial loop split in three (block, thread, per-thread tile), every
   reduction loop in two, ordered block | thread | reduction outer | reduction inner | tile. The
   block pieces are fused and bound to ``blockIdx.x``, the thread pieces to ``threadIdx.x``; the
   accumulator is written through ``local`` memory at the thread level, and (sampled) each input
   is first fetched into ``shared`` memory by all threads of the block together, per step of the
   outer reduction loop, with a sampled vector width.
3. ``AutoBind``: whatever is still unbound (elementwise kernels) has its loops fused and split
   over a sampled number of threads per block.

Postprocessing decomposes reductions and rejects a schedule the GPU cannot launch
(``VerifyGPUCode``: too many threads or too much shared memory per block for the target).
"""
from __future__ import annotations

from ..target import Target, get_backend
from ..tir.schedule import ScheduleError
from ..tir.schedule.primitives.scope import const_int
from ..tir.schedule.policy.postproc import Postproc, RewriteReductionBlock, VerifyModule, feeds_only_spatial
from .schedule_rule import AutoInline, ScheduleRule, tileable_loops

THREAD_CHOICES = (32, 64, 128, 256, 512)
VECTOR_CHOICES = (1, 2, 4)


class MultiLevelTilingGPU(ScheduleRule):
    """See the module docstring. ``max_innermost_factor`` bounds the per-thread tile."""

    def __init__(self, max_innermost_factor: int = 16, max_threads: int = 1024):
        self.max_innermost_factor = max_innermost_factor
        self.max_threads = max_threads

    def apply(self, sch, block_rv) -> None:
        block = sch.get(block_rv)
        loops = tileable_loops(sch, block_rv)
        if loops is None:
            return
        levels = {"block": [], "thread": [], "tile": [], "r_outer": [], "r_inner": []}
        for loop, iv in zip(loops, block.iter_vars):
            if iv.iter_type == "spatial":
                tiles = sch.sample_perfect_tile(loop, n=3, max_innermost_factor=self.max_innermost_factor)
                b, t, tile = sch.split(loop, factors=tiles)
                levels["block"].append(b)
                levels["thread"].append(t)
                levels["tile"].append(tile)
            else:
                tiles = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=self.max_innermost_factor)
                outer, inner = sch.split(loop, factors=tiles)
                levels["r_outer"].append(outer)
                levels["r_inner"].append(inner)
        sch.reorder(*levels["block"], *levels["thread"], *levels["r_outer"], *levels["r_inner"],
                    *levels["tile"])
        accumulator = sch.cache_write(block_rv, 0, "local")
        sch.reverse_compute_at(accumulator, levels["thread"][-1])
        bx = _fused(sch, levels["block"])
        tx = _fused(sch, levels["thread"])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
        threads = const_int(sch.get(tx).extent)
        if levels["r_outer"] and sch.sample_categorical([0, 1], [0.5, 0.5]):
            for index in range(len(block.reads)):
                self._fetch_into_shared(sch, block_rv, index, levels["r_outer"][-1], threads)

    @staticmethod
    def _fetch_into_shared(sch, block_rv, index: int, at, threads: int) -> None:
        """The cooperative fetch: copy what a step of the reduction reads into shared memory,
        spread over the block's threads (``vector`` consecutive elements each)."""
        cached = sch.cache_read(block_rv, index, "shared")
        sch.compute_at(cached, at, preserve_unit_loops=True)
        loops = sch.get_loops(cached)
        at_var = sch.get(at).loop_var
        position = next(i for i, l in enumerate(loops) if sch.get(l).loop_var is at_var)
        own = loops[position + 1:]          # the copy's own loops, under the reduction step
        if not own:
            return
        fused = _fused(sch, own)
        vector = sch.sample_categorical(list(VECTOR_CHOICES), [1 / len(VECTOR_CHOICES)] * len(VECTOR_CHOICES))
        _, tx, vec = sch.split(fused, [None, threads, vector])
        sch.vectorize(vec)
        sch.bind(tx, "threadIdx.x")


class AutoBind(ScheduleRule):
    """Bind a block that no loop of which is bound yet: fuse its loops, split them over a sampled
    number of threads per block, bind ``blockIdx.x`` and ``threadIdx.x``."""

    def apply(self, sch, block_rv) -> None:
        loops = sch.get_loops(block_rv)
        if not loops or any(sch.get(l).kind == "thread_binding" for l in loops):
            return
        spatial = []
        for loop in loops:   # the leading loops that only feed spatial iterators
            if not feeds_only_spatial(sch.get(loop)):
                break
            spatial.append(loop)
        if not spatial:
            return
        fused = _fused(sch, spatial)
        extent = const_int(sch.get(fused).extent) or 1
        choices = [t for t in THREAD_CHOICES if t <= max(extent, THREAD_CHOICES[0])]
        threads = sch.sample_categorical(choices, [1 / len(choices)] * len(choices))
        bx, tx = sch.split(fused, [None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")


def _fused(sch, loops):
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


class VerifyGPUCode(Postproc):
    """The schedule lowers into kernels the target can launch: the backend's lowering pipeline
    (its "split_host_device" pass checks the GPU's rules and limits) accepts it."""

    def __init__(self, target):
        self.target = target

    def apply(self, sch) -> bool:
        from ..tir.transform.split_host_device import GPUError
        target = Target(self.target)
        try:
            get_backend(target.kind.name).lower(sch.mod, target)
        except (GPUError, ScheduleError, ValueError):
            return False
        return True


def gpu_rules() -> list:
    return [AutoInline(), MultiLevelTilingGPU(), AutoBind()]


def gpu_postprocs(target) -> list:
    return [RewriteReductionBlock(), VerifyModule(), VerifyGPUCode(target)]


def is_gpu_target(target) -> bool:
    """Whether code for ``target`` runs as GPU kernels (its backend's ``capabilities.gpu``)."""
    return target is not None and Target(target).capabilities.gpu


__all__ = ["MultiLevelTilingGPU", "AutoBind", "VerifyGPUCode", "gpu_rules", "gpu_postprocs",
           "is_gpu_target"]
