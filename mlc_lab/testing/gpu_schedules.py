"""The GPU programs the course schedules, each as a ``tir.Schedule`` ready to build for "cuda" or
"cuda-sim": vector add, window sum (with and without shared memory), and matmul with block
one thread per element (``matmul_naive``), block tiling (``matmul_blocked``) and
shared-memory tiling (``matmul_shared``); a float16 matmul with float32 sums
(``matmul_fp16_func``) tensorized onto the wmma tensor-core intrinsics (``matmul_wmma``).

>>> import numpy as np, mlc_lab
>>> from mlc_lab.testing import gpu_schedules as gs
>>> lib = mlc_lab.build(gs.vector_add(1024).mod, target="cuda-sim")
>>> a, b = np.random.rand(1024).astype("float32"), np.random.rand(1024).astype("float32")
>>> c = mlc_lab.nd.empty((1024,), "float32")
>>> lib["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), c)
>>> np.testing.assert_allclose(c.numpy(), a + b)

Every function is called "main"; ``arrays(name, n)`` makes inputs and the expected output.
"""
from __future__ import annotations

import numpy as np

from .. import te, tir
from ..ir import IRModule
from .matmul_schedules import matmul


def vector_add_func(n: int = 1024):
    A = te.placeholder((n,), "float32", "A")
    B = te.placeholder((n,), "float32", "B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return te.create_prim_func([A, B, C], name="main")


def window_sum_func(n: int = 1024):
    A = te.placeholder((n + 2,), "float32", "A")
    B = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="C")
    return te.create_prim_func([A, B], name="main")


def _schedule(func) -> tir.Schedule:
    return tir.Schedule(IRModule({"main": func.with_attr("global_symbol", "main")}))


def vector_add(n: int = 1024, threads: int = 128) -> tir.Schedule:
    """One thread per element: blocks of ``threads``."""
    sch = _schedule(vector_add_func(n))
    i, = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, threads])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    return sch


def window_sum(n: int = 1024, threads: int = 128, shared: bool = True) -> tir.Schedule:
    """One thread per output; with ``shared`` the block first copies the ``threads + 2`` inputs it
    needs into shared memory, each thread fetching its share (a cooperative fetch)."""
    sch = _schedule(window_sum_func(n))
    block = sch.get_block("C")
    i, = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, threads])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    if shared:
        cached = sch.cache_read(block, 0, "shared")
        sch.compute_at(cached, i1)
        ax = sch.get_loops(cached)[-1]
        _, tx = sch.split(ax, [None, threads])
        sch.bind(tx, "threadIdx.x")
    return sch


def matmul_naive(n: int = 1024, threads: int = 16) -> tir.Schedule:
    """One thread per element of C, blocks of ``threads`` x ``threads``: each thread reads a whole
    row of A and column of B from global memory."""
    sch = _schedule(matmul(n))
    block_c = sch.get_block("C")
    i, j, _ = sch.get_loops(block_c)
    i0, i1 = sch.split(i, [None, threads])
    j0, j1 = sch.split(j, [None, threads])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch


def matmul_blocked(n: int = 1024, local: int = 8, block: int = 8, tile_k: int = 4) -> tir.Schedule:
    """Each thread computes a ``local`` x ``local`` tile of C in registers; a block of
    ``block`` x ``block`` threads covers ``local * block`` rows and columns."""
    sch, block_c, (i0, j0, i1, j1, k0, k1) = _register_tiles(n, local, block, tile_k)
    sch.unroll(k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_c, k0)
    return sch


def _register_tiles(n: int, local: int, block: int, tile_k: int):
    """The tiling both matmul schedules share: C in ``local`` x ``local`` tiles per thread (written
    through a "local" accumulator), ``block`` x ``block`` threads per block, k in steps of
    ``tile_k``. Returns the schedule, block "C" and the loops (i0, j0, i1, j1, k0, k1)."""
    sch = _schedule(matmul(n))
    block_c = sch.get_block("C")
    c_local = sch.cache_write(block_c, 0, "local")
    i, j, k = sch.get_loops(block_c)
    i0, i1, i2 = sch.split(i, [None, block, local])
    j0, j1, j2 = sch.split(j, [None, block, local])
    k0, k1 = sch.split(k, [None, tile_k])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(c_local, j1)
    return sch, block_c, (i0, j0, i1, j1, k0, k1)


def matmul_shared(n: int = 1024, local: int = 8, block: int = 8, tile_k: int = 8,
                  vector: int = 4) -> tir.Schedule:
    """``matmul_blocked`` plus shared memory: per step of k, the block's threads copy the
    ``tile_k``-wide strips of A and B it needs into shared memory (``vector`` elements per copy,
    1 for scalar copies) and compute from there."""
    sch, block_c, (i0, j0, i1, j1, k0, _) = _register_tiles(n, local, block, tile_k)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    for index in (0, 1):
        cached = sch.cache_read(block_c, index, "shared")
        sch.compute_at(cached, k0)
        inner = sch.fuse(*sch.get_loops(cached)[-2:])
        if vector > 1:
            _, fetch_tx, vec = sch.split(inner, [None, block * block, vector])
            sch.vectorize(vec)
        else:
            _, fetch_tx = sch.split(inner, [None, block * block])
        sch.bind(fetch_tx, "threadIdx.x")
    sch.decompose_reduction(block_c, k0)
    return sch


def matmul_fp16_func(M: int, N: int, K: int):
    """C = A @ B with float16 A (M x K) and B (K x N), each product and sum taken in float32, as
    a tensor core does: one block "C" under the loops i, j, k."""
    A = te.placeholder((M, K), "float16", "A")
    B = te.placeholder((K, N), "float16", "B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k].astype("float32") * B[k, j].astype("float32"),
                                               axis=k), name="C")
    return te.create_prim_func([A, B, C], name="main").with_attr("global_symbol", "main")


def matmul_wmma(func, tile: tuple = (16, 16, 16), warps_i: int = 2, warps_j: int = 1, tiles_j: int = 2,
                intrinsics: dict | None = None, trans_b: bool = False) -> tir.Schedule:
    """``func`` (a ``matmul_fp16_func``, its sizes multiples of the tiles) scheduled onto the
    wmma intrinsics: a thread block of ``warps_i x warps_j`` warps, each warp computing
    ``tiles_j`` m x n tiles side by side; for every step of k, A and B are copied into shared
    memory by all the block's threads, then loaded into the warps' fragments
    (``wmma.matrix_a`` / ``wmma.matrix_b``); the sums live in a ``wmma.accumulator`` fragment,
    filled with zeros, multiplied into and stored to C. ``intrinsics`` maps the roles "load_a",
    "load_b", "init", "compute" and "store" to registered intrinsics (16x16x16 by default).
    ``trans_b``: B is stored transposed (N x K), C = A @ B.T."""
    from ..tir.tensor_intrin import cuda as tensor_cores
    m, n, k = tile
    names = intrinsics or tensor_cores.get_wmma_intrin_group("shared", "global", "float16", "float32",
                                                                    trans_b=trans_b)
    sch = _schedule(func)
    C = sch.get_block("C")
    i, j, kk = sch.get_loops(C)
    i0, i1, i2 = sch.split(i, [None, warps_i, m])
    j0, j1, j2, j3 = sch.split(j, [None, warps_j, tiles_j, n])
    k0, k1 = sch.split(kk, [None, k])
    sch.reorder(i0, j0, i1, j1, k0, j2, i2, j3, k1)
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i1, "threadIdx.y")            # one warp per (threadIdx.y, threadIdx.z):
    sch.bind(j1, "threadIdx.z")            # its 32 lanes are threadIdx.x, bound below
    C_frag = sch.cache_write(C, 0, "wmma.accumulator")
    sch.reverse_compute_at(C_frag, j1)
    A_shared, B_shared = sch.cache_read(C, 0, "shared"), sch.cache_read(C, 1, "shared")
    A_frag, B_frag = sch.cache_read(C, 0, "wmma.matrix_a"), sch.cache_read(C, 1, "wmma.matrix_b")
    for block in (A_frag, B_frag, A_shared, B_shared):
        sch.compute_at(block, k0)
    for block in (A_shared, B_shared):     # a cooperative fetch by every thread of the block
        fused = sch.fuse(*sch.get_loops(block)[-2:])
        _, ty, tz, tx = sch.split(fused, [None, warps_i, warps_j, 32])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tz, "threadIdx.z")
        sch.bind(tx, "threadIdx.x")

    def tiles_onto(block, rows, cols, intrinsic):
        outer, inner = sch.get_loops(block)[-2:]
        outer_0, outer_1 = sch.split(outer, [None, rows])
        inner_0, inner_1 = sch.split(inner, [None, cols])
        sch.reorder(outer_0, inner_0, outer_1, inner_1)
        sch.tensorize(outer_1, intrinsic)

    tiles_onto(A_frag, m, k, names["load_a"])
    tiles_onto(B_frag, *((n, k) if trans_b else (k, n)), names["load_b"])
    tiles_onto(C_frag, m, n, names["store"])
    init = sch.decompose_reduction(C, k0)
    sch.tensorize(sch.get_loops(init)[-2], names["init"])
    sch.tensorize(i2, names["compute"])
    return sch


def arrays(name: str, n: int, seed: int = 0) -> tuple[list, np.ndarray]:
    """(inputs and a zeroed output, expected output) for the program ``name``: "vector_add",
    "window_sum" or "matmul"."""
    rng = np.random.default_rng(seed)
    if name == "vector_add":
        a, b = rng.random(n, dtype="float32"), rng.random(n, dtype="float32")
        return [a, b, np.zeros(n, "float32")], a + b
    if name == "window_sum":
        a = rng.random(n + 2, dtype="float32")
        return [a, np.zeros(n, "float32")], a[:-2] + a[1:-1] + a[2:]
    if name == "matmul":
        a, b = rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32")
        return [a, b, np.zeros((n, n), "float32")], a @ b
    raise ValueError(f"unknown program {name!r}; use 'vector_add', 'window_sum' or 'matmul'")
