"""Square matrix multiplication, C = A @ B (optionally followed by ReLU), and three ways to run it:
unscheduled (``naive``), the course's first hand schedule (``course_schedule``) and the fastest
hand schedule built from the public primitives (``best_schedule``).

>>> import numpy as np, mlc_lab
>>> from mlc_lab.testing import matmul_schedules as mm
>>> sch = mm.best_schedule(64)
>>> lib = mlc_lab.build(sch.mod, target="python")   # or "llvm -num-cores=2"
>>> a, b = np.random.rand(64, 64).astype("float32"), np.random.rand(64, 64).astype("float32")
>>> c = mlc_lab.nd.empty((64, 64), "float32")
>>> lib["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), c)
>>> np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4)

Every program here is an IRModule whose one function is called "main", with parameters
(A, B, C), all n x n.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import te, tir
from ..ir import IRModule
from ..runtime.llvm_runtime import min_parallel_flops
from ..tir.function import PrimFunc

VECTOR_LANES = 16  # float32 lanes in one AVX-512 register


def matmul(n: int, dtype: str = "float32") -> PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``: one reduction block "C" with an init."""
    A, B, C, _ = _matmul_tensors(n, dtype)
    return te.create_prim_func([A, B, C], name="matmul")


def mm_relu(n: int, dtype: str = "float32") -> PrimFunc:
    """``C = relu(A @ B)``, the course's running example: reduction block "Y" into an
    intermediate buffer Y, then the element-wise block "C"."""
    A, B, Y, zero = _matmul_tensors(n, dtype, out_name="Y")
    C = te.compute((n, n), lambda i, j: te.max(Y[i, j], zero), name="C")
    return te.create_prim_func([A, B, C], name="mm_relu")


def _matmul_tensors(n: int, dtype: str, out_name: str = "C"):
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"matrix size n must be a positive int, got {n!r}")
    A = te.placeholder((n, n), dtype, "A")
    B = te.placeholder((n, n), dtype, "B")
    k = te.reduce_axis((0, n), "k")
    out = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=out_name)
    return A, B, out, te.const(0, dtype)


def naive(n: int, dtype: str = "float32", relu: bool = False) -> IRModule:
    """The unscheduled program as a module with one function, "main"."""
    return IRModule({"main": (mm_relu if relu else matmul)(n, dtype)})


def _reduction_block(relu: bool) -> str:
    return "Y" if relu else "C"


def course_schedule(n: int, relu: bool = False) -> tir.Schedule:
    """The course's first hand schedule: split j by 4, reorder to (i, j0, k, j1) so the inner
    loop walks four neighbouring outputs, move the ReLU (if any) under j0, and separate the init.
    """
    sch = tir.Schedule(naive(n, relu=relu))
    block = sch.get_block(_reduction_block(relu))
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    if relu:
        sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(block, k)
    return sch


@dataclass(frozen=True)
class Tiles:
    """Tile sizes of ``best_schedule``.

    rows x cols is the register tile of C: its rows * cols / 16 vector accumulators must fit in
    the 32 AVX-512 registers with room for the B vectors and the broadcast A value. cols is
    also the width of a packed B panel; k_unroll is how many k steps one unrolled body does;
    pack_a also packs A into row panels (measured slower: the 8 rows of A a tile reads are
    8 sequential streams the prefetcher already handles, and the copy is extra work).
    """
    rows: int = 8
    cols: int = 32
    k_unroll: int = 4
    pack_a: bool = False


def best_schedule(n: int, num_cores: int = 2, relu: bool = False,
                  tiles: Tiles = Tiles()) -> tir.Schedule:
    """The fastest hand schedule here, for n x n float32 on an AVX-512 CPU with a few cores
    (tuned on a 2-core Xeon with 48 KiB L1d and 2 MiB L2 per core).

    It is the inner kernel of a BLAS library, written with schedule primitives:

    * Register tile. C is computed in rows x cols = 8 x 32 tiles. ``cache_write`` to "local"
      with ``reverse_compute_at`` at the tile loop makes the accumulator an 8 x 32 array that
      lowering compacts to 256 floats; unrolled, it is 16 zmm registers that live through the
      whole k loop and are written to C once. Per k step the kernel loads two 16-lane B
      vectors, broadcasts 8 A values and issues 16 multiply-adds: 10 loads per 16 FMAs keeps
      both FMA ports busy, where a 1 x 16 tile (1 B load + 1 broadcast per FMA) would be
      load-bound. 4 x 64 and 16 x 16 tiles measured 15-25% slower.
    * Packing B. ``cache_read`` + ``transform_layout`` copy B[k, j] to
      B_packed[j // 32, k, j % 32] at the root (O(n^2) work, vectorized), so the 32 columns a
      tile needs are one contiguous 128-byte line per k instead of two lines n floats apart.
    * Loop order. (j0, i0) outermost, fused: consecutive tiles share a B panel
      (32 * n * 4 bytes = 128 KiB at n = 1024), which stays in L2 while each tile's 8 rows of A
      (32 KiB) stream through L1. Blocking k as well (B panel 32 KiB, in L1) measured slower:
      the accumulator then round-trips through memory n / kc times.
      Inside the tile: k (split by k_unroll = 4, unrolled), rows (unrolled), columns as
      2 x 16 (outer unrolled, inner vectorized, one zmm register).
    * Cores. The fused tile loop has (n / 8) * (n / 32) iterations (4096 at n = 1024), so it
      splits evenly over num_cores; it is parallel only when the matmul is big enough
      (``min_parallel_flops()``) to pay for forking threads. The packing copy stays serial.
    * With relu=True the write-back of Y is inlined into the ReLU block, which moves under the
      tile loop: the ReLU reads the accumulator directly and Y is never stored.

    The multiply-adds reach FMA instructions only when the backend may contract a * b + c
    (LLVM's "contract" flag; "-fast-math" allows it); without that the kernel runs at about
    half speed whatever the schedule.

    Tile sizes shrink to powers of two that divide n when n is small or odd-sized.
    """
    rows, cols = _fit(n, tiles.rows), _fit(n, tiles.cols)
    k_unroll = _fit(n, tiles.k_unroll)
    lanes = min(VECTOR_LANES, cols)
    sch = tir.Schedule(naive(n, relu=relu))
    block = sch.get_block(_reduction_block(relu))

    b_packed = sch.cache_read(block, 1, "global")
    sch.transform_layout(b_packed, ("write", 0), f"lambda k, j: (j // {cols}, k, j % {cols})")
    _pack_loops(sch, b_packed, inner=1, width=cols, lanes=lanes)
    if tiles.pack_a:
        a_packed = sch.cache_read(block, 0, "global")
        sch.transform_layout(a_packed, ("write", 0), f"lambda i, k: (i // {rows}, k, i % {rows})")
        _pack_loops(sch, a_packed, inner=0, width=rows, lanes=None)

    write_back = sch.cache_write(block, 0, "local")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    j1_0, j1_1 = sch.split(j1, [None, lanes])
    k0, k1 = sch.split(k, [None, k_unroll])
    sch.reorder(j0, i0, k0, k1, i1, j1_0, j1_1)
    tile = sch.fuse(j0, i0)
    if num_cores > 1 and 2 * n ** 3 >= min_parallel_flops():
        sch.parallel(tile)
    sch.unroll(k1)
    sch.unroll(i1)
    sch.unroll(j1_0)
    sch.vectorize(j1_1)

    if relu:
        sch.compute_inline(write_back)
        write_back = sch.get_block("C")
    sch.reverse_compute_at(write_back, tile)
    w_i, w_j = sch.get_loops(write_back)[-2:]
    w_j0, w_j1 = sch.split(w_j, [None, lanes])
    sch.unroll(w_i)
    sch.unroll(w_j0)
    sch.vectorize(w_j1)

    sch.decompose_reduction(block, k0)
    return sch


def _pack_loops(sch, copy, inner: int, width: int, lanes) -> None:
    """Order a packing copy's loops as (panel, other axis, within panel) so the packed buffer is
    written contiguously; the within-panel loop is vectorized when it reads contiguous memory
    (``lanes``), else unrolled."""
    loops = sch.get_loops(copy)
    panel, within = sch.split(loops[inner], [None, width])
    sch.reorder(panel, loops[1 - inner], within)
    if lanes is None:
        sch.unroll(within)
    else:
        outer, vector = sch.split(within, [None, lanes])
        sch.unroll(outer)
        sch.vectorize(vector)


def _fit(n: int, want: int) -> int:
    """``want`` if it divides n, else the largest power of two below it that does."""
    size = want
    while size > 1 and n % size:
        size //= 2
    return size


def int8_matmul(m: int, n: int, k: int) -> PrimFunc:
    """``C[i, j] = sum_r A[i, r] * B[j, r]`` in int32, A uint8 (m x k), B int8 packed for the
    x86 dot products as ``(n // 16, k // 4, 16, 4)``: 16 output columns by 4 reduction steps,
    contiguous. One reduction block "matmul"."""
    A = te.placeholder((m, k), "uint8", name="A")
    B = te.placeholder((n // 16, k // 4, 16, 4), "int8", name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((m, n), lambda i, j: te.sum(
        A[i, r].astype("int32") * B[j // 16, r // 4, j % 16, r % 4].astype("int32"), axis=r),
        name="matmul")
    return te.create_prim_func([A, B, C]).with_attr("global_symbol", "main")


def dot_16x4_schedule(func: PrimFunc, tensorize: bool = True) -> tir.Schedule:
    """``int8_matmul`` with 16 columns by 4 reduction steps innermost, tensorized onto
    ``VNNI_DOT_16x4_INTRIN`` (vpdpbusd where the CPU has it), or left as loops."""
    from ..tir.tensor_intrin import x86
    sch = tir.Schedule(func)
    block = sch.get_block("matmul")
    _, j, r = sch.get_loops(block)
    j_outer, j_inner = sch.split(j, [None, 16])
    r_outer, r_inner = sch.split(r, [None, 4])
    sch.reorder(j_outer, r_outer, j_inner, r_inner)
    sch.decompose_reduction(block, r_outer)
    if tensorize:
        sch.tensorize(j_inner, x86.VNNI_DOT_16x4_INTRIN)
    return sch
