"""Timing that stays honest on a shared laptop or server, for the chapters and benchmarks.

    with timing.blas_threads(1):               # numpy's BLAS on as many cores as the compiled code
        seconds = timing.best_seconds(lambda: x @ w)
    print(timing.busy_note())                   # "" or a warning that other tasks want the CPU

A comparison is fair only when both sides use the same number of cores: ``blas_threads`` limits
numpy's BLAS (OpenBLAS, MKL) through threadpoolctl, which scikit-learn brings along; without it
the limit is skipped and ``busy_note`` says so.
"""
from __future__ import annotations

import contextlib
import time


@contextlib.contextmanager
def blas_threads(n: int):
    """Run the block with numpy's BLAS limited to ``n`` threads (unlimited without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=n, user_api="blas"):
        yield


def best_seconds(fn, repeat: int = 5, min_seconds: float = 0.05) -> float:
    """The fastest of ``repeat`` measurements of ``fn()``'s mean time, each at least
    ``min_seconds`` long (after one warm-up call): the minimum is the least disturbed by other
    work on the machine."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < min_seconds:
            fn()
            calls += 1
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def other_runnable_tasks() -> int:
    """Tasks other than this one running or ready to run (Linux /proc/loadavg), 0 elsewhere."""
    try:
        with open("/proc/loadavg") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return 0


def busy_note() -> str:
    """A line warning that other tasks compete for the CPU (the timings then vary between
    runs), or "" when the machine looks quiet."""
    busy = other_runnable_tasks()
    if not busy:
        return ""
    return (f"note: {busy} other task(s) wanted a CPU while this ran, so these timings are noisy; "
            "run the cell again on a quiet machine to compare")
