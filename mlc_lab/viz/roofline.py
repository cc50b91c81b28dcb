"""The roofline of this machine: how fast a kernel can possibly run, given how many floating-point
operations it does per byte it moves, and where measured kernels sit below that limit.

    peaks = measure_peaks(num_cores=1)                      # measured once, then read from a cache
    print(peaks)                                            # the two roofs and the ridge point
    roofline({"matmul": (2 * n**3, 3 * n * n * 4, seconds)}, num_cores=1)

A kernel doing F flops and moving B bytes has arithmetic intensity I = F / B. It runs at most at
``min(peak FLOP/s, bandwidth * I)``: the flat compute roof, or the slanted memory roof where
there are too few operations per byte to keep the arithmetic units busy. The roofs meet at the
ridge point, I = peak / bandwidth.

Both roofs are measured here by two small kernels that mlc_lab compiles itself for "llvm":

* peak FLOP/s: each core repeats ``acc = acc * a + b`` on ``chains`` independent vectors held in
  registers (one fused multiply-add each), enough chains to hide the FMA latency;
* bandwidth: the STREAM triad ``A[i] = B[i] + 3 * C[i]`` over three 64 MiB arrays (beyond the
  last-level cache), counted as STREAM counts it, 12 bytes per element.

Each is timed with ``mlc_lab.testing.timing.best_seconds`` (the fastest of several runs). The
result is cached in ``~/.cache/mlc_lab/roofline.json`` (``$XDG_CACHE_HOME`` if set), keyed by the
CPU's name and core count and by ``num_cores``; ``refresh=True`` measures again, and roofs
measured while the machine was busy are measured again once it is quiet. Measuring takes about a
second.

Roofs belong to a number of cores: compare them with code built for ``-num-cores=num_cores`` and
with numpy timed under ``timing.blas_threads(num_cores)``, or the comparison is not fair.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

CACHE_VERSION = 1            # bump when the kernels change, so older measurements are redone
TRIAD_ELEMENTS = 1 << 24     # three float32 arrays of 64 MiB: beyond the caches of most CPUs
TRIAD_BYTES_PER_ELEMENT = 12  # STREAM's count: read B[i] and C[i], write A[i]
FMA_FLOPS_PER_CALL = 1 << 26  # per core: about a millisecond, so the call's own cost is noise


@dataclass(frozen=True)
class Peaks:
    """The two roofs measured on ``machine`` with ``num_cores`` cores."""
    flops_per_second: float
    bytes_per_second: float
    num_cores: int
    machine: str
    vector_lanes: int = 0
    fma_chains: int = 0
    busy_tasks: int = 0          # other tasks that wanted a CPU while this was measured
    measured_at: str = ""

    @property
    def ridge_intensity(self) -> float:
        """FLOP per byte where the memory roof meets the compute roof."""
        return self.flops_per_second / self.bytes_per_second

    def attainable(self, intensity: float) -> float:
        """The highest FLOP/s the roofline allows at ``intensity`` FLOP/byte."""
        return min(self.flops_per_second, self.bytes_per_second * intensity)

    def __str__(self) -> str:
        cores = f"{self.num_cores} core" + ("s" if self.num_cores > 1 else "")
        lines = [f"{self.machine}, {cores}: compute roof {self.flops_per_second / 1e9:.1f} GFLOP/s "
                 f"({self.vector_lanes}-lane FMAs), memory roof {self.bytes_per_second / 1e9:.1f} GB/s "
                 f"(triad); ridge at {self.ridge_intensity:.1f} FLOP/byte",
                 f"compare with code built for -num-cores={self.num_cores} and numpy timed under "
                 f"timing.blas_threads({self.num_cores})"]
        if self.busy_tasks:
            lines.append(f"note: measured while {self.busy_tasks} other task(s) wanted a CPU, so the "
                         "roofs may be low; they are measured again once the machine is quiet")
        return "\n".join(lines)


def measure_peaks(num_cores: int = 1, refresh: bool = False, cache_file=None) -> Peaks:
    """This machine's roofs on ``num_cores`` cores, from the cache or, the first time (or with
    ``refresh``), measured and saved there. ``cache_file`` defaults to ``cache_path()``.

    Roofs measured while other tasks wanted the CPU are measured again the next time the machine
    is quiet, keeping the higher of each roof: a roof is the best the machine can do."""
    from ..testing import timing
    if not isinstance(num_cores, int) or num_cores < 1:
        raise ValueError(f"num_cores must be a positive int, got {num_cores!r}")
    path = Path(cache_file) if cache_file is not None else cache_path()
    machine = machine_name()
    cache = _read_cache(path)
    entry = cache.get(machine, {}).get(str(num_cores))
    cached = None
    if isinstance(entry, dict) and entry.get("version") == CACHE_VERSION and not refresh:
        cached = Peaks(**{k: v for k, v in entry.items() if k != "version"})
        if not cached.busy_tasks or timing.other_runnable_tasks():
            return cached
    peaks = _measure(num_cores, machine)
    if cached is not None:
        peaks = replace(peaks, flops_per_second=max(peaks.flops_per_second, cached.flops_per_second),
                        bytes_per_second=max(peaks.bytes_per_second, cached.bytes_per_second))
    cache.setdefault(machine, {})[str(num_cores)] = {"version": CACHE_VERSION, **asdict(peaks)}
    _write_cache(path, cache)
    return peaks


def cache_path() -> Path:
    """Where measured roofs are kept: ``$XDG_CACHE_HOME/mlc_lab/roofline.json``, by default
    ``~/.cache/mlc_lab/roofline.json``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "mlc_lab" / "roofline.json"


def machine_name() -> str:
    """The CPU's name, the name LLVM gives its microarchitecture, and its logical CPU count,
    e.g. "AMD EPYC (znver4), 2 CPUs": measurements are valid for this and nothing else."""
    import llvmlite.binding as llvm
    return f"{_cpu_model()} ({llvm.get_host_cpu_name()}), {os.cpu_count()} CPUs"


def fma_kernel(num_cores: int, lanes: int, chains: int, iterations: int):
    """A PrimFunc ``fma(X, Y)`` (both ``(num_cores, lanes * chains)`` float32) in which each
    core loads its row of X into a local accumulator, applies ``acc = acc * 0.999 + 0.001``
    ``iterations`` times to its ``chains`` vectors of ``lanes`` values, and stores the result
    in Y. Lowering keeps the accumulator in registers; the multiply-add becomes one FMA
    instruction per vector. It does ``2 * num_cores * lanes * chains * iterations`` flops."""
    from ..script import tir as T
    width = lanes * chains

    @T.prim_func
    def fma(X: T.Buffer((num_cores, width), "float32"), Y: T.Buffer((num_cores, width), "float32")):
        T.func_attr({"global_symbol": "fma", "tir.noalias": True})
        acc = T.alloc_buffer((num_cores, width), "float32", scope="local")
        for core in T.parallel(num_cores):
            for v in T.vectorized(width):
                acc[core, v] = X[core, v]
            for _ in T.serial(iterations):
                for c in T.unroll(chains):
                    for lane in T.vectorized(lanes):
                        acc[core, c * lanes + lane] = (acc[core, c * lanes + lane] * T.float32(0.999)
                                                       + T.float32(0.001))
            for v in T.vectorized(width):
                Y[core, v] = acc[core, v]
    return fma


def triad_schedule(n: int, num_cores: int):
    """``A[i] = B[i] + 3 * C[i]`` over n float32 elements, written in te and scheduled as one
    chunk per core (parallel), each chunk a loop over vectors of 64 values."""
    from .. import te, tir
    from ..ir import IRModule
    B = te.placeholder((n,), "float32", "B")
    C = te.placeholder((n,), "float32", "C")
    A = te.compute((n,), lambda i: B[i] + te.const(3.0, "float32") * C[i], name="A")
    sch = tir.Schedule(IRModule({"main": te.create_prim_func([B, C, A])}))
    (i,) = sch.get_loops(sch.get_block("A"))
    per_core, _, vector = sch.split(i, [num_cores, None, 64])
    if num_cores > 1:
        sch.parallel(per_core)
    sch.vectorize(vector)
    return sch


def roofline(points=None, ax=None, num_cores: int = 1, peaks: Peaks | None = None,
             refresh: bool = False, title: str | None = None):
    """Draw this machine's roofline on ``num_cores`` cores (log-log: arithmetic intensity in
    FLOP/byte on x, GFLOP/s on y) and each kernel of ``points``, a dict
    ``{name: (flops, bytes, seconds)}``, as a point at (flops / bytes, flops / seconds), listed
    in the legend with its share of the roof above it. ``peaks`` draws those roofs instead of
    measuring (or reading the cache). Returns the Axes: its two lines are the memory and the
    compute roof, its scatter collections the kernels, in the order given."""
    import matplotlib.pyplot as plt
    kernels = _check_points(points or {})
    peaks = peaks or measure_peaks(num_cores, refresh=refresh)
    if ax is None:   # constrained layout leaves room for the legend beside the axes
        _, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    peak, bandwidth = peaks.flops_per_second / 1e9, peaks.bytes_per_second / 1e9   # GFLOP/s, GB/s
    ridge = peaks.ridge_intensity
    intensities = [flops / nbytes for flops, nbytes, _ in kernels.values()]
    rates = [flops / seconds / 1e9 for flops, _, seconds in kernels.values()]
    low = min([ridge / 64] + [x / 4 for x in intensities])
    high = max([ridge * 64] + [x * 4 for x in intensities])
    roof = dict(color="#8c8c8c", linewidth=2.5, solid_capstyle="round")
    ax.plot([low, ridge], [bandwidth * low, peak], **roof, label=f"memory roof: {bandwidth:.1f} GB/s")
    ax.plot([ridge, high], [peak, peak], **roof, linestyle="--", label=f"compute roof: {peak:.1f} GFLOP/s")
    for name, intensity, rate, color in zip(kernels, intensities, rates, _point_colors()):
        share = rate / (peaks.attainable(intensity) / 1e9)
        ax.scatter([intensity], [rate], s=60, color=color, edgecolors="#8c8c8c", zorder=3,
                   label=f"{name}: {rate:.1f} GFLOP/s ({share:.0%} of its roof)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(min([bandwidth * low] + rates) / 2, max([peak] + rates) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    cores = f"{peaks.num_cores} core" + ("s" if peaks.num_cores > 1 else "")
    ax.set_title(title or f"roofline: {peaks.machine}, {cores}", fontsize="medium")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    return ax


def _check_points(points) -> dict:
    if not isinstance(points, dict):
        raise TypeError("points must be a dict {name: (flops, bytes, seconds)}, got "
                        f"{type(points).__name__}")
    kernels = {}
    for name, value in points.items():
        try:
            flops, nbytes, seconds = (float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(f"points[{name!r}] must be (flops, bytes, seconds), got {value!r}") from None
        if not all(math.isfinite(v) and v > 0 for v in (flops, nbytes, seconds)):
            raise ValueError(f"points[{name!r}]: flops, bytes and seconds must be positive and "
                             f"finite, got {value!r}")
        kernels[str(name)] = (flops, nbytes, seconds)
    return kernels


def _point_colors():
    """Colours that stand out on a white and on a dark background alike (matplotlib's tab10)."""
    import matplotlib
    return iter(matplotlib.colormaps["tab10"].colors * 3)


def _measure(num_cores: int, machine: str) -> Peaks:
    from ..testing import timing
    busy = timing.other_runnable_tasks()      # before: idle pool workers may spin afterwards
    flops_per_second, lanes, chains = _measure_fma(num_cores)
    return Peaks(flops_per_second=flops_per_second, bytes_per_second=_measure_triad(num_cores),
                 num_cores=num_cores, machine=machine, vector_lanes=lanes, fma_chains=chains,
                 busy_tasks=busy, measured_at=datetime.datetime.now().isoformat(timespec="seconds"))


def _measure_fma(num_cores: int) -> tuple[float, int, int]:
    from ..runtime import ndarray as nd
    from ..driver import build
    from ..testing.timing import best_seconds
    lanes, chains = _vector_shape()
    iterations = FMA_FLOPS_PER_CALL // (2 * lanes * chains)
    lib = build(fma_kernel(num_cores, lanes, chains, iterations), target=f"llvm -num-cores={num_cores}")
    x = nd.array(np.ones((num_cores, lanes * chains), "float32"))
    y = nd.empty((num_cores, lanes * chains), "float32")
    seconds = best_seconds(lambda: lib(x, y))
    return 2 * num_cores * lanes * chains * iterations / seconds, lanes, chains


def _measure_triad(num_cores: int) -> float:
    from ..runtime import ndarray as nd
    from ..driver import build
    from ..testing.timing import best_seconds
    n = TRIAD_ELEMENTS
    lib = build(triad_schedule(n, num_cores).mod, target=f"llvm -num-cores={num_cores}")
    b, c = nd.array(np.ones(n, "float32")), nd.array(np.full(n, 2.0, "float32"))
    a = nd.empty((n,), "float32")
    seconds = best_seconds(lambda: lib(b, c, a), repeat=3)
    return TRIAD_BYTES_PER_ELEMENT * n / seconds


def _vector_shape() -> tuple[int, int]:
    """(float32 lanes per vector register, independent FMA chains per core). Enough chains cover
    the FMA latency times the number of FMA units (4 x 2 on x86, 4 x 4 on Apple's cores) while
    the accumulators still fit in the registers (16 on AVX2, 32 with AVX-512 or on arm64)."""
    import llvmlite.binding as llvm
    if platform.machine().lower() in ("arm64", "aarch64"):
        return 4, 16
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 16, 16
    if features.get("avx"):
        return 8, 8
    return 4, 8


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        import subprocess
        try:
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                  text=True, timeout=5).stdout.strip() or platform.machine()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def _read_cache(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            cache = json.load(f)
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_cache(path: Path, cache: dict) -> None:
    """Replace the file whole, so another process reading it never sees half of it; a cache
    that cannot be written (a read-only home) only costs measuring again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:
        warnings.warn(f"could not save the roofline measurements to {path}: {error}", stacklevel=3)
