"""Causal attention on a GPU, two ways, as PrimFuncs ready for ``mlc_lab.build(..., "cuda-sim")``.

``O = softmax(Q K^T * scale + causal mask) V`` for ``heads`` heads at once, Q, K, V and O of
shape ``(heads, n, d)`` in float32, ``scale = 1 / sqrt(d)`` unless given:

* ``flash_attention(heads, n, d, tile)``: one kernel in the flash-attention style. A block of
  ``tile`` threads owns one head and ``tile`` query rows (one row per thread). It copies its Q
  tile into shared memory once, then walks over the K/V tiles up to the diagonal (the causal
  tiles past it are never loaded), copying each into shared memory with all its threads, and
  keeps per row a running maximum ``m``, a running sum ``l`` and an accumulator of ``d`` floats
  that is rescaled by ``exp(m_old - m_new)`` whenever the maximum grows (the *online softmax*).
  The ``n x n`` scores never exist in global memory: each thread holds one row of one tile of
  them, ``tile`` floats. O is written once, at the end.
* ``naive_attention(heads, n, d, tile)``: three kernels the straightforward way, the scores
  ``S`` and the probabilities ``P`` going through global memory (``n x n`` per head each):
  tiled scores (Q and K tiles in shared memory), a softmax with a warp per row, and a tiled
  ``P @ V``. Its matmuls reuse their inputs as the flash kernel does, so what it moves in
  addition is the round trips of ``S`` and ``P``.

``n`` need not be a multiple of ``tile``: the loads past the last row are guarded (zeros go into
shared memory) and the causal mask hides keys past a row anyway. ``attention_reference`` is the
numpy version, in float64.

>>> import numpy as np, mlc_lab
>>> from mlc_lab.testing import gpu_attention as ga
>>> q, k, v = ga.random_qkv(heads=2, n=40, d=32, seed=0)
>>> out = np.zeros_like(q)
>>> mlc_lab.build(ga.flash_attention(2, 40, 32, tile=16), target="cuda-sim")(q, k, v, out)
>>> bool(np.abs(out - ga.attention_reference(q, k, v)).max() < 1e-5)
True
"""
from __future__ import annotations

import math

import numpy as np

from ..script import tir as T

NEG = -1e30          # a masked score: exp(NEG - m) is 0 for any real maximum m


def _check(heads: int, n: int, d: int, tile: int) -> None:
    for name, value in (("heads", heads), ("n", n), ("d", d), ("tile", tile)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"attention kernels: {name} must be a positive int, got {value!r}")
    if tile % 32 and tile not in (1, 2, 4, 8, 16):
        raise ValueError(f"attention kernels: tile (threads per block) must be a power of two "
                         f"below 32 or a multiple of 32, got {tile}")
    if tile > 1024:
        raise ValueError(f"attention kernels: tile {tile} gives more than 1024 threads per block")


def _scale(d: int, scale) -> float:
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def flash_attention(heads: int, n: int, d: int, tile: int = 32, scale: float | None = None):
    """The fused kernel (see the module's docstring): one block per (head, tile of query rows),
    ``tile`` threads, K/V tiles of ``tile`` rows streamed through shared memory."""
    _check(heads, n, d, tile)
    scale, tiles = _scale(d, scale), (n + tile - 1) // tile

    @T.prim_func
    def flash(Q: T.Buffer((heads, n, d), "float32"), K: T.Buffer((heads, n, d), "float32"),
              V: T.Buffer((heads, n, d), "float32"), O: T.Buffer((heads, n, d), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        # Row r of the Q tile starts at word r * (d + 1): thread t reads row t, and rows d + 1
        # words apart fall in different banks (d words apart, they would all share one bank).
        Q_shared = T.alloc_buffer((tile * (d + 1),), "float32", scope="shared")
        K_shared = T.alloc_buffer((tile, d), "float32", scope="shared")
        V_shared = T.alloc_buffer((tile, d), "float32", scope="shared")
        O_shared = T.alloc_buffer((tile * (d + 1),), "float32", scope="shared")   # padded too
        s = T.alloc_buffer((tile,), "float32", scope="local")     # this row's scores in a tile
        acc = T.alloc_buffer((d,), "float32", scope="local")      # this row of O, unnormalized
        m = T.alloc_buffer((1,), "float32", scope="local")        # running maximum of the row
        m_new = T.alloc_buffer((1,), "float32", scope="local")
        l = T.alloc_buffer((1,), "float32", scope="local")        # running sum of exp(s - m)
        for h in T.thread_binding(heads, thread="blockIdx.y"):
            for qb in T.thread_binding(tiles, thread="blockIdx.x"):
                for t in T.thread_binding(tile, thread="threadIdx.x"):    # query row qb*tile + t
                    # the Q tile, copied by all threads together (the inner loop bound to the
                    # same threadIdx.x is this thread's share): element e * tile + f, coalesced
                    for e in range(d):
                        for f in T.thread_binding(tile, thread="threadIdx.x"):
                            if qb * tile + (e * tile + f) // d < n:
                                Q_shared[(e * tile + f) // d * (d + 1) + (e * tile + f) % d] = \
                                    Q[h, qb * tile + (e * tile + f) // d, (e * tile + f) % d]
                            else:
                                Q_shared[(e * tile + f) // d * (d + 1) + (e * tile + f) % d] = \
                                    T.float32(0)
                    m[0] = T.float32(NEG)
                    l[0] = T.float32(0)
                    for c in range(d):
                        acc[c] = T.float32(0)
                    for kb in range(qb + 1):    # causal: the K/V tiles up to the diagonal only
                        for e in range(d):   # the K and V tiles, copied as the Q tile was
                            for f in T.thread_binding(tile, thread="threadIdx.x"):
                                if kb * tile + (e * tile + f) // d < n:
                                    K_shared[(e * tile + f) // d, (e * tile + f) % d] = \
                                        K[h, kb * tile + (e * tile + f) // d, (e * tile + f) % d]
                                    V_shared[(e * tile + f) // d, (e * tile + f) % d] = \
                                        V[h, kb * tile + (e * tile + f) // d, (e * tile + f) % d]
                                else:
                                    K_shared[(e * tile + f) // d, (e * tile + f) % d] = T.float32(0)
                                    V_shared[(e * tile + f) // d, (e * tile + f) % d] = T.float32(0)
                        m_new[0] = m[0]
                        for j in range(tile):   # scores of the row against this K tile
                            s[j] = T.float32(0)
                            for c in range(d):
                                s[j] = s[j] + Q_shared[t * (d + 1) + c] * K_shared[j, c]
                            s[j] = T.if_then_else(kb * tile + j <= qb * tile + t,
                                                  s[j] * T.float32(scale), T.float32(NEG))
                            m_new[0] = T.max(m_new[0], s[j])
                        # the online softmax: what was summed under the old maximum is rescaled
                        l[0] = l[0] * T.exp(m[0] - m_new[0])
                        for c in range(d):
                            acc[c] = acc[c] * T.exp(m[0] - m_new[0])
                        for j in range(tile):
                            s[j] = T.exp(s[j] - m_new[0])
                            l[0] = l[0] + s[j]
                            for c in range(d):
                                acc[c] = acc[c] + s[j] * V_shared[j, c]
                        m[0] = m_new[0]
                    # the finished row goes to shared memory, and the whole tile to O with
                    # coalesced stores (thread t storing row t would write d floats apart)
                    for c in range(d):
                        O_shared[t * (d + 1) + c] = acc[c] / l[0]
                for f in T.thread_binding(tile, thread="threadIdx.x"):
                    for e in range(d):
                        if qb * tile + (e * tile + f) // d < n:
                            O[h, qb * tile + (e * tile + f) // d, (e * tile + f) % d] = \
                                O_shared[(e * tile + f) // d * (d + 1) + (e * tile + f) % d]

    return flash


def naive_attention(heads: int, n: int, d: int, tile: int = 32, scale: float | None = None):
    """Three kernels (see the module's docstring), the scores ``S`` and probabilities ``P``
    (``heads x n x n`` each) in global memory between them:

    1. ``S = Q K^T * scale``, masked: a block per (head, tile of query rows), a thread per key
       column of a K tile, the Q and K tiles in shared memory; every tile of S is written;
    2. ``P = softmax(S)`` along rows: a warp per row; each thread keeps a running maximum and
       sum over every 32nd element (the same online rescaling), the 32 pairs are combined
       through shared memory, and a second pass over the row writes P;
    3. ``O = P V``: a block per (head, tile of rows), a thread per column of O, each P tile
       and V tile copied into shared memory."""
    _check(heads, n, d, tile)
    scale, tiles, warps = _scale(d, scale), (n + tile - 1) // tile, (n + 31) // 32
    p_rounds = (tile * tile + d - 1) // d

    @T.prim_func
    def naive(Q: T.Buffer((heads, n, d), "float32"), K: T.Buffer((heads, n, d), "float32"),
              V: T.Buffer((heads, n, d), "float32"), O: T.Buffer((heads, n, d), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        S = T.alloc_buffer((heads, n, n), "float32")
        P = T.alloc_buffer((heads, n, n), "float32")
        Q_shared = T.alloc_buffer((tile, d), "float32", scope="shared")
        K_shared = T.alloc_buffer((tile * (d + 1),), "float32", scope="shared")   # padded rows
        P_shared = T.alloc_buffer((tile, tile), "float32", scope="shared")
        V_shared = T.alloc_buffer((tile, d), "float32", scope="shared")
        part_m = T.alloc_buffer((32,), "float32", scope="shared")
        part_l = T.alloc_buffer((32,), "float32", scope="shared")
        dot = T.alloc_buffer((1,), "float32", scope="local")
        run = T.alloc_buffer((4,), "float32", scope="local")   # maximum, sum, new maximum, S[i, j]
        out = T.alloc_buffer((tile,), "float32", scope="local")
        # kernel 1: the scores, every tile of them
        for h in T.thread_binding(heads, thread="blockIdx.y"):
            for qb in T.thread_binding(tiles, thread="blockIdx.x"):
                for t in T.thread_binding(tile, thread="threadIdx.x"):     # key column of a tile
                    for e in range(d):
                        for f in T.thread_binding(tile, thread="threadIdx.x"):
                            if qb * tile + (e * tile + f) // d < n:
                                Q_shared[(e * tile + f) // d, (e * tile + f) % d] = \
                                    Q[h, qb * tile + (e * tile + f) // d, (e * tile + f) % d]
                            else:
                                Q_shared[(e * tile + f) // d, (e * tile + f) % d] = T.float32(0)
                    for kb in range(tiles):
                        for e in range(d):
                            for f in T.thread_binding(tile, thread="threadIdx.x"):
                                if kb * tile + (e * tile + f) // d < n:
                                    K_shared[(e * tile + f) // d * (d + 1) + (e * tile + f) % d] = \
                                        K[h, kb * tile + (e * tile + f) // d, (e * tile + f) % d]
                                else:
                                    K_shared[(e * tile + f) // d * (d + 1) + (e * tile + f) % d] = \
                                        T.float32(0)
                        for i in range(tile):
                            dot[0] = T.float32(0)
                            for c in range(d):
                                dot[0] = dot[0] + Q_shared[i, c] * K_shared[t * (d + 1) + c]
                            if qb * tile + i < n and kb * tile + t < n:
                                S[h, qb * tile + i, kb * tile + t] = T.if_then_else(
                                    kb * tile + t <= qb * tile + i, dot[0] * T.float32(scale),
                                    T.float32(NEG))
        # kernel 2: the softmax of each row
        for h in T.thread_binding(heads, thread="blockIdx.y"):
            for i in T.thread_binding(n, thread="blockIdx.x"):
                for t in T.thread_binding(32, thread="threadIdx.x"):
                    for f in T.thread_binding(32, thread="threadIdx.x"):
                        run[0] = T.float32(NEG)
                        run[1] = T.float32(0)
                        for w in range(warps):
                            if w * 32 + f < n:
                                run[3] = S[h, i, w * 32 + f]
                                run[2] = T.max(run[0], run[3])
                                run[1] = run[1] * T.exp(run[0] - run[2]) + T.exp(run[3] - run[2])
                                run[0] = run[2]
                        part_m[f] = run[0]
                        part_l[f] = run[1]
                    run[0] = T.float32(NEG)
                    run[1] = T.float32(0)
                    for f in range(32):
                        run[2] = T.max(run[0], part_m[f])
                        run[1] = run[1] * T.exp(run[0] - run[2]) + \
                            part_l[f] * T.exp(part_m[f] - run[2])
                        run[0] = run[2]
                    for w in range(warps):
                        if w * 32 + t < n:
                            P[h, i, w * 32 + t] = T.exp(S[h, i, w * 32 + t] - run[0]) / run[1]
        # kernel 3: O = P V
        for h in T.thread_binding(heads, thread="blockIdx.y"):
            for qb in T.thread_binding(tiles, thread="blockIdx.x"):
                for c in T.thread_binding(d, thread="threadIdx.x"):       # a column of O
                    for i in range(tile):
                        out[i] = T.float32(0)
                    for kb in range(tiles):
                        for e in range(p_rounds):
                            for f in T.thread_binding(d, thread="threadIdx.x"):
                                if e * d + f < tile * tile:
                                    if qb * tile + (e * d + f) // tile < n and \
                                            kb * tile + (e * d + f) % tile < n:
                                        P_shared[(e * d + f) // tile, (e * d + f) % tile] = \
                                            P[h, qb * tile + (e * d + f) // tile,
                                              kb * tile + (e * d + f) % tile]
                                    else:
                                        P_shared[(e * d + f) // tile, (e * d + f) % tile] = \
                                            T.float32(0)
                        for e in range(tile):
                            for f in T.thread_binding(d, thread="threadIdx.x"):
                                if kb * tile + e < n:
                                    V_shared[e, f] = V[h, kb * tile + e, f]
                                else:
                                    V_shared[e, f] = T.float32(0)
                        for j in range(tile):
                            for i in range(tile):
                                out[i] = out[i] + P_shared[i, j] * V_shared[j, c]
                    for i in range(tile):
                        if qb * tile + i < n:
                            O[h, qb * tile + i, c] = out[i]

    return naive


def random_qkv(heads: int, n: int, d: int, seed: int = 0):
    """Q, K and V of shape ``(heads, n, d)``, float32, standard normal."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((heads, n, d)).astype("float32") for _ in range(3))


def attention_reference(q, k, v, scale: float | None = None) -> np.ndarray:
    """Causal attention in numpy, computed in float64: ``softmax(q k^T * scale, masked) v``."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if not (q.ndim == 3 and q.shape == k.shape == v.shape):
        raise ValueError(f"attention_reference: q, k and v must share one (heads, n, d) shape, "
                         f"got {q.shape}, {k.shape}, {v.shape}")
    n = q.shape[1]
    scores = q @ k.transpose(0, 2, 1) * _scale(q.shape[2], scale)
    scores[:, np.triu(np.ones((n, n), bool), 1)] = -np.inf
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def simulate_traffic(lib, q, k, v, target: str = "nvidia/a100") -> dict:
    """Run a built attention kernel (``flash_attention`` or ``naive_attention``) once on cuda-sim
    with its counters: ``{"out": O, "bytes": global bytes moved (32-byte sectors, all kernels),
    "by_buffer": {name: bytes}, "seconds": the time model's estimate on ``target``, summed over
    the kernels, "runs": the KernelRuns}``."""
    out = np.zeros_like(q)
    runs = lib.simulate(q, k, v, out)
    by_buffer: dict = {}
    for run in runs:
        for buf in run.counters.buffers.values():
            if buf.scope == "global":
                by_buffer[buf.name] = by_buffer.get(buf.name, 0) + 32 * buf.sectors
    return {"out": out, "bytes": sum(by_buffer.values()), "by_buffer": by_buffer,
            "seconds": sum(run.estimate(target).seconds for run in runs), "runs": runs}
