"""How fast is the CUDA simulator (mlc_lab.runtime.cuda_sim), and what does it report?

For the course's GPU programs (vector add and window sum on 2^20 elements; matmul at 256 and
1024: naive one-thread-per-element, matmul_blocked, matmul_shared with vector 4 and 1 fetches):

* the simulator's wall time (median of ``--repeat`` runs, counters and race checks on), checked
  against numpy once;
* what it counts: sectors per global request, shared-memory conflict degree, and the time model's
  estimate on an A100 (``estimate_seconds``, an estimate, not a measurement);
* the same kernels written by hand for Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), which
  runs every GPU thread as a Python thread. It is far too slow for whole grids, so it runs a few
  blocks and its time is scaled up to the whole grid (blocks are independent and alike); the
  table says how many blocks ran. Ratios are Numba's (extrapolated) time / mlc_lab's.

Run: python bench/gpu.py [--quick] [--repeat N] [--no-numba]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")   # before numba is imported

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab.runtime.cuda_sim import estimate, simulate  # noqa: E402
from mlc_lab.target import Target  # noqa: E402
from mlc_lab.testing import gpu_schedules as gs  # noqa: E402
from mlc_lab.tir.transform.split_host_device import split_host_device  # noqa: E402

VECTOR_N = 1 << 20
TARGET = "nvidia/a100"


def cases(quick: bool):
    """(name, schedule, arrays kind, size, numba kernel name) for every benchmarked program."""
    out = [("vector_add", gs.vector_add(VECTOR_N), "vector_add", VECTOR_N, "vector_add"),
           ("window_sum (shared)", gs.window_sum(VECTOR_N), "window_sum", VECTOR_N, "window_sum")]
    for n in ((256,) if quick else (256, 1024)):
        out += [(f"matmul naive {n}", gs.matmul_naive(n), "matmul", n, "matmul_naive"),
                (f"matmul_blocked {n}", gs.matmul_blocked(n), "matmul", n, "matmul_blocked"),
                (f"matmul_shared {n}", gs.matmul_shared(n), "matmul", n, "matmul_shared"),
                (f"matmul_shared v1 {n}", gs.matmul_shared(n, vector=1), "matmul", n,
                 "matmul_shared")]
    return out


def time_simulator(kernel, kind, n, repeat):
    arrays, want = gs.arrays(kind, n)
    times, run = [], None
    for _ in range(repeat):
        arrays[-1][:] = 0
        start = time.perf_counter()
        run = simulate(kernel, arrays, target=TARGET)
        times.append(time.perf_counter() - start)
    ok = np.allclose(arrays[-1], want, rtol=1e-3, atol=1e-3)
    return statistics.median(times), run, ok


def counters_summary(run) -> str:
    parts = []
    for c in run.counters.buffers.values():
        if c.scope == "global" and c.requests:
            parts.append(f"{c.name} {c.sectors / c.requests:.1f} sect/req")
        elif c.scope == "shared" and c.requests:
            parts.append(f"{c.name} {c.conflict_degree:.1f}-way")
    return ", ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="matmul at 256 only, one repeat")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-numba", action="store_true")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    numba = None if args.no_numba else _numba()
    rows, medians = [], {}
    print(f"{'program':24} {'sim s':>8} {'ok':>3} {'est. ' + TARGET:>18}  {'numba s (blocks)':>22} "
          f"{'numba/sim':>9}  counters")
    for name, sch, kind, n, numba_name in cases(args.quick):
        kernel = split_host_device(mlc_lab.lower(sch.mod)["main"], Target(TARGET)).kernels[0]
        seconds, run, ok = time_simulator(kernel, kind, n, repeat)
        medians[name] = seconds
        numba_text, ratio = "", ""
        if numba is not None:
            numba_seconds, ran = numba.time(numba_name, kind, n, kernel)
            numba_text = f"{numba_seconds:10.1f} ({ran}/{kernel.num_blocks})"
            ratio = f"{numba_seconds / seconds:9.0f}x"
        est = estimate(run, TARGET)
        print(f"{name:24} {seconds:8.3f} {'yes' if ok else 'NO':>3} {est.seconds * 1e3:15.3f} ms"
              f"  {numba_text:>22} {ratio:>9}  {counters_summary(run)}", flush=True)
        rows.append((name, est))
    print("\nTime model (estimates on the A100, not measurements):")
    for name, est in rows:
        print(f"  {name:24} {est}")
    _targets(medians, rows)
    if _gpu_present():
        on_gpu(rows)
    else:
        print("\nNo CUDA GPU here: the real-GPU section (GFLOPS vs cuBLAS, estimate vs measurement) "
              "runs on a machine with one.")


def _gpu_present() -> bool:
    from mlc_lab.runtime.device import _cuda_device_count
    return _cuda_device_count() > 0


def _cublas_seconds(n: int):
    """cuBLAS SGEMM through torch (or cupy) on the same GPU; None when neither is installed."""
    try:
        import torch
        a, b = (torch.rand(n, n, device="cuda") for _ in range(2))
        sync, mm = torch.cuda.synchronize, lambda: a @ b
    except Exception:
        try:
            import cupy
            a, b = (cupy.random.rand(n, n, dtype=cupy.float32) for _ in range(2))
            sync, mm = cupy.cuda.Device().synchronize, lambda: a @ b
        except Exception:
            return None
    mm()
    sync()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10):
            mm()
        sync()
        times.append((time.perf_counter() - start) / 10)
    return min(times)


def on_gpu(rows):
    """GFLOPS of the course's schedules and the best hand schedule at 1024 and 4096 on the real
    GPU, against cuBLAS in the same run, and the time model's estimate against the measurement."""
    os.environ["MLC_LAB_CUDA"] = "gpu"
    estimates = {name: e.seconds for name, e in rows}
    print("\nOn the GPU (CUDA events; cuBLAS through torch or cupy):")
    print(f"{'program':24} {'ms':>9} {'GFLOPS':>9} {'x cuBLAS':>9} {'estimate/real':>14}")
    dev = mlc_lab.cuda(0)
    for n in (1024, 4096):
        flops = 2 * n ** 3
        cublas = _cublas_seconds(n)
        programs = [("matmul naive", gs.matmul_naive(n)), ("matmul_blocked", gs.matmul_blocked(n)),
                    ("matmul_shared", gs.matmul_shared(n)),
                    ("best hand (16x16, tile 8)", gs.matmul_shared(n, local=8, block=16, tile_k=8))]
        for label, sch in programs:
            lib = mlc_lab.build(sch.mod, target="cuda")
            arrays, _ = gs.arrays("matmul", n)
            nds = [mlc_lab.nd.array(x, dev) for x in arrays]
            seconds = lib.time_evaluator("main", dev, number=10, repeat=3)(*nds).min
            name = f"{label} {n}"
            est = estimates.get(name)
            print(f"{name:24} {seconds * 1e3:9.3f} {flops / seconds / 1e9:9.0f} "
                  f"{(cublas / seconds if cublas else float('nan')):9.2f} "
                  f"{(est / seconds if est else float('nan')):14.2f}", flush=True)
        if cublas:
            print(f"{'cuBLAS ' + str(n):24} {cublas * 1e3:9.3f} {flops / cublas / 1e9:9.0f}")
    print("Target: the best schedule at 4096 >= 0.5x cuBLAS.")


def _targets(medians, rows):
    print("\nTargets (never asserted):")
    checks = [("vector_add under 1 s", medians.get("vector_add"), 1.0),
              ("window_sum under 1 s", medians.get("window_sum (shared)"), 1.0)]
    for n, limit in ((256, 2.0), (1024, 60.0)):
        for program in ("matmul_blocked", "matmul_shared"):
            checks.append((f"{program} {n} under {limit:g} s", medians.get(f"{program} {n}"),
                           limit))
    for label, value, limit in checks:
        if value is not None:
            print(f"  {label}: {value:.3f} s {'PASS' if value < limit else 'MISS'}")
    est = {name: e.seconds for name, e in rows}
    for n in (256, 1024):
        names = [f"matmul naive {n}", f"matmul_blocked {n}", f"matmul_shared {n}"]
        if all(x in est for x in names):
            ranked = est[names[0]] > est[names[1]] > est[names[2]]
            print(f"  time model ranks naive > blocked > shared at {n}: "
                  f"{'PASS' if ranked else 'MISS'}")


def _numba():
    if cuda is None:
        print("numba is not installed (pip install numba): its column stays empty")
        return None
    return NumbaKernels()


# The same programs for Numba's CUDA simulator, written by hand. (Kernels must be module-level
# functions that name the global ``cuda``: the simulator swaps in its own module for it.)
try:
    from numba import cuda, float32
except ImportError:
    cuda = None

if cuda is not None:
    @cuda.jit
    def numba_vector_add(a, b, c):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        c[i] = a[i] + b[i]

    @cuda.jit
    def numba_window_sum(a, c):
        tile = cuda.shared.array(130, float32)
        tx, base = cuda.threadIdx.x, cuda.blockIdx.x * 128
        tile[tx] = a[base + tx]
        if tx < 2:
            tile[128 + tx] = a[base + 128 + tx]
        cuda.syncthreads()
        c[base + tx] = tile[tx] + tile[tx + 1] + tile[tx + 2]

    @cuda.jit
    def numba_matmul_naive(a, b, c, n):
        i = cuda.blockIdx.y * 16 + cuda.threadIdx.y
        j = cuda.blockIdx.x * 16 + cuda.threadIdx.x
        acc = float32(0)
        for k in range(n):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc

    @cuda.jit
    def numba_matmul_blocked(a, b, c, n):
        acc = cuda.local.array((8, 8), float32)
        i0 = (cuda.blockIdx.y * 8 + cuda.threadIdx.y) * 8
        j0 = (cuda.blockIdx.x * 8 + cuda.threadIdx.x) * 8
        for x in range(8):
            for y in range(8):
                acc[x, y] = 0
        for k in range(n):
            for x in range(8):
                for y in range(8):
                    acc[x, y] += a[i0 + x, k] * b[k, j0 + y]
        for x in range(8):
            for y in range(8):
                c[i0 + x, j0 + y] = acc[x, y]

    @cuda.jit
    def numba_matmul_shared(a, b, c, n):
        a_tile = cuda.shared.array((64, 8), float32)
        b_tile = cuda.shared.array((8, 64), float32)
        acc = cuda.local.array((8, 8), float32)
        tx = cuda.threadIdx.x
        row0, col0 = cuda.blockIdx.y * 64, cuda.blockIdx.x * 64
        ty8, tx8 = tx // 8 * 8, tx % 8 * 8
        for x in range(8):
            for y in range(8):
                acc[x, y] = 0
        for k0 in range(0, n, 8):
            cuda.syncthreads()
            for f in range(8):
                e = f * 64 + tx
                a_tile[e // 8, e % 8] = a[row0 + e // 8, k0 + e % 8]
                b_tile[e // 64, e % 64] = b[k0 + e // 64, col0 + e % 64]
            cuda.syncthreads()
            for k1 in range(8):
                for x in range(8):
                    for y in range(8):
                        acc[x, y] += a_tile[ty8 + x, k1] * b_tile[k1, tx8 + y]
        for x in range(8):
            for y in range(8):
                c[row0 + ty8 + x, col0 + tx8 + y] = acc[x, y]


class NumbaKernels:
    """Runs the Numba kernels above on the first ``BLOCKS[name]`` blocks of the grid, and scales
    the time to the whole grid."""
    BLOCKS = {"vector_add": 8, "window_sum": 8, "matmul_naive": 1, "matmul_blocked": 1,
              "matmul_shared": 1}

    def time(self, name, kind, n, kernel):
        """(seconds for the whole grid, extrapolated; blocks that ran), after checking the blocks
        that ran against numpy."""
        arrays, want = gs.arrays(kind, n)
        ran = self.BLOCKS[name]
        grid = (ran,) if kind != "matmul" else (ran, 1)
        extra = (n,) if kind == "matmul" else ()
        launch = globals()[f"numba_{name}"][grid, kernel.block[:2] if kind == "matmul"
                                            else kernel.block[0]]
        start = time.perf_counter()
        launch(*arrays, *extra)
        seconds = time.perf_counter() - start
        done = np.flatnonzero(arrays[-1].reshape(-1))
        if not np.allclose(arrays[-1].reshape(-1)[done], want.reshape(-1)[done], rtol=1e-3):
            raise AssertionError(f"numba's {name} disagrees with numpy")
        return seconds * kernel.num_blocks / ran, ran


if __name__ == "__main__":
    main()
