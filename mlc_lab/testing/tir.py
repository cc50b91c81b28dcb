"""Schedules shared by tests: a GEMM tiled for a GPU's matrix units (tensor cores through MMA on
NVIDIA, matrix cores through MFMA on AMD), under the names the reference compiler's
``tvm.testing.tir`` gives them (``mma_schedule``, ``mfma_schedule``).

The recipe: 16 x 16 x ``k_inner`` tiles made into inner blocks; blocks of the grid over
output tiles, warps over sub-tiles; A and B staged through shared memory (copied by all threads,
vectorized) and then into per-warp fragments; C accumulated in fragments and written back per
warp; then the fragments' layouts are rewritten with the given index maps and each tile-sized loop
is replaced by its intrinsic. An index map or intrinsic given as None leaves that step out (the
schedule stays a plain loop program, which any backend runs)."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from ..ir import IRModule
from ..tir import PrimFunc
from ..tir.schedule import Schedule


def _gemm_for_matrix_units(workload: PrimFunc, k_inner: int, in_dtype: str, b_transposed: bool,
                           factors: tuple, index_maps: tuple, intrinsics: tuple,
                           warp_size: int, shared_scope: str, align_shared: bool) -> Schedule:
    """The recipe above for the block "C" of ``workload``. ``factors`` holds the 5 tile sizes of
    i and j and the 3 of k (over whole tiles); ``index_maps`` those of the A, B and C fragments;
    ``intrinsics`` the loads of A and B, the multiply-accumulate, the zero fill and the store."""
    i_factors, j_factors, k_factors = factors
    sch = Schedule(IRModule({"main": workload}))
    tile = sch.get_block("C")

    # One inner block per 16 x 16 x k_inner tile: what the multiply-accumulate intrinsic replaces.
    i, j, k = sch.get_loops(tile)
    i, i_tile = sch.split(i, factors=[None, 16])
    j, j_tile = sch.split(j, factors=[None, 16])
    k, k_tile = sch.split(k, factors=[None, k_inner])
    sch.reorder(i, j, k, i_tile, j_tile, k_tile)
    outer = sch.blockize(i_tile)

    # Tiles over the grid: blockIdx over (i0, j0) and (i1, j1), warps (threadIdx.y) over (j2, i2).
    i_loops = sch.split(i, factors=i_factors)
    j_loops = sch.split(j, factors=j_factors)
    k0, k1, k2 = sch.split(k, factors=k_factors)
    sch.reorder(i_loops[0], j_loops[0], i_loops[1], j_loops[1], j_loops[2], i_loops[2], k0, k1,
                i_loops[3], j_loops[3], k2, i_loops[4], j_loops[4])
    sch.bind(sch.fuse(i_loops[0], j_loops[0]), "blockIdx.x")
    sch.bind(sch.fuse(i_loops[1], j_loops[1]), "blockIdx.y")
    warp_loop = sch.fuse(j_loops[2], i_loops[2])
    sch.bind(warp_loop, "threadIdx.y")
    warps = i_factors[2] * j_factors[2]
    vector = 16 if in_dtype == "int8" else 8

    for operand in (0, 1):   # A and B into shared memory once per k0 step, by every thread
        copy = sch.cache_read(outer, operand, shared_scope)
        sch.compute_at(copy, k0)
        rows, cols = sch.get_loops(copy)[-2:]
        _, ty, tx, vec = sch.split(sch.fuse(rows, cols), factors=[None, warps, warp_size, vector])
        sch.bind(tx, "threadIdx.x")
        sch.bind(ty, "threadIdx.y")
        sch.vectorize(vec)
        if align_shared:   # pad rows so that the fragment loads avoid bank conflicts
            sch.storage_align(copy, 0, axis=-2, factor=32, offset=8 if in_dtype == "float16" else 16)

    a_frag = sch.cache_read(outer, 0, "warp")
    b_frag = sch.cache_read(outer, 1, "warp")
    sch.compute_at(a_frag, k1)
    sch.compute_at(b_frag, k1)
    c_frag = sch.cache_write(outer, 0, "warp")
    sch.reverse_compute_at(c_frag, warp_loop)
    _split_into_tiles(sch, c_frag, 16, 16)
    sch.decompose_reduction(outer, sch.get_loops(outer)[3])
    init = sch.get_block("C_init")

    a_loop = _split_into_tiles(sch, a_frag, 16, k_inner)
    b_loop = _split_into_tiles(sch, b_frag, *((16, k_inner) if b_transposed else (k_inner, 16)))

    index_map_a, index_map_b, index_map_c = index_maps
    for block, access, index_map in ((a_frag, ("write", 0), index_map_a),
                                     (b_frag, ("write", 0), index_map_b),
                                     (c_frag, ("read", 0), index_map_c)):
        if index_map is not None:
            sch.transform_layout(block, access, index_map)

    load_a, load_b, multiply, fill, store = intrinsics
    for loop, intrinsic in ((lambda: a_loop, load_a), (lambda: b_loop, load_b),
                            (lambda: sch.get_loops(tile)[-3], multiply),
                            (lambda: sch.get_loops(init)[-2], fill),
                            (lambda: sch.get_loops(c_frag)[-2], store)):
        if intrinsic is not None:
            sch.tensorize(loop(), intrinsic)
    return sch


def _split_into_tiles(sch: Schedule, block, height: int, width: int):
    """Split the two innermost loops of ``block`` into height x width tiles, the tile loops
    innermost; return the outer of the two tile loops."""
    rows, cols = sch.get_loops(block)[-2:]
    rows_outer, rows_inner = sch.split(rows, factors=[None, height])
    cols_outer, cols_inner = sch.split(cols, factors=[None, width])
    sch.reorder(rows_outer, cols_outer, rows_inner, cols_inner)
    return rows_inner


def mma_schedule(workload: PrimFunc, k_inner: int, in_dtype: str, b_transposed: bool,
                 i_factors: Sequence[int], j_factors: Sequence[int], k_factors: Sequence[int],
                 index_map_A: Optional[Callable], index_map_B: Optional[Callable],
                 index_map_C: Optional[Callable], ldmatrix_a_intrin: Optional[str],
                 ldmatrix_b_intrin: Optional[str], mma_intrin: Optional[str],
                 mma_fill_intrin: Optional[str], mma_store_intrin: Optional[str],
                 shared_scope: str = "shared") -> Schedule:
    """The GEMM ``workload`` (block "C", loops i, j, k) scheduled for NVIDIA tensor cores: warps of
    32 threads, shared-memory rows padded (``storage_align``) against bank conflicts."""
    return _gemm_for_matrix_units(
        workload, k_inner, in_dtype, b_transposed, (i_factors, j_factors, k_factors),
        (index_map_A, index_map_B, index_map_C),
        (ldmatrix_a_intrin, ldmatrix_b_intrin, mma_intrin, mma_fill_intrin, mma_store_intrin),
        warp_size=32, shared_scope=shared_scope, align_shared=True)


def mfma_schedule(workload: PrimFunc, k_inner: int, in_dtype: str, b_transposed: bool,
                  i_factors: Sequence[int], j_factors: Sequence[int], k_factors: Sequence[int],
                  index_map_A: Optional[Callable], index_map_B: Optional[Callable],
                  index_map_C: Optional[Callable], ldmatrix_a_intrin: Optional[str],
                  ldmatrix_b_intrin: Optional[str], mfma_intrin: Optional[str],
                  mfma_fill_intrin: Optional[str], mfma_store_intrin: Optional[str],
                  shared_scope: str = "shared") -> Schedule:
    """The GEMM ``workload`` (block "C", loops i, j, k) scheduled for AMD matrix cores: wavefronts
    of 64 threads, shared memory unpadded."""
    return _gemm_for_matrix_units(
        workload, k_inner, in_dtype, b_transposed, (i_factors, j_factors, k_factors),
        (index_map_A, index_map_B, index_map_C),
        (ldmatrix_a_intrin, ldmatrix_b_intrin, mfma_intrin, mfma_fill_intrin, mfma_store_intrin),
        warp_size=64, shared_scope=shared_scope, align_shared=False)


__all__ = ["mfma_schedule", "mma_schedule"]
