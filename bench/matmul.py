"""How close do hand schedules get to numpy's matmul (OpenBLAS)? For n x n float32 matmul at
n = 128, 512, 1024: GFLOPS and the ratio to np.matmul (timed in this process, on the same
inputs) of the unscheduled program, the course's first schedule and the best hand schedule,
compiled with "llvm -num-cores=2"; the best schedule again on one core, and the 1 -> 2 core
speed-up; and how long building mm_relu 128 for llvm takes. One extra row builds the best
schedule with "-fast-math", which lets LLVM fuse each multiply and add into one FMA instruction.

The host may be shared with other work: numpy is timed before and after each size and the
faster median kept, and a warning is printed when other tasks want a CPU, since a busy core
slows the 2-thread runs (numpy's included) far more than the 1-thread ones.

Run: python bench/matmul.py [--quick] [--sizes 128 512]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab import nd  # noqa: E402
from mlc_lab.testing import matmul_schedules as mm, timing  # noqa: E402

TARGET = "llvm -num-cores={cores}"
NAIVE_BUDGET_S = 20.0  # time the unscheduled program only once where repeats would take longer


def numpy_seconds(a, b, c, repeat, min_repeat_ms):
    """Median over ``repeat`` runs of the mean time of one np.matmul(a, b, out=c)."""
    np.matmul(a, b, out=c)
    calls, times = 1, []
    for _ in range(repeat):
        while True:
            start = time.perf_counter()
            for _ in range(calls):
                np.matmul(a, b, out=c)
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_repeat_ms:
                break
            calls *= 2
        times.append(elapsed / calls)
    return statistics.median(times)


def measure(mod, target, arrays, want, repeat, min_repeat_ms, budget_s=None):
    """Build, check once against numpy, time; returns (seconds per call, note). When the checked
    call shows that timing would take over ``budget_s``, that one call's time is returned."""
    lib = mlc_lab.build(mod, target=target)
    a, b, c = arrays
    start = time.perf_counter()
    lib["main"](a, b, c)
    once = time.perf_counter() - start
    try:
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-3, atol=1e-3)
        note = ""
    except AssertionError as error:
        note = "WRONG RESULT: " + str(error).strip().splitlines()[-1]
    if budget_s is not None and once * (repeat + 1) > budget_s:
        return once, (f"one call only: timing {repeat} repeats would take ~"
                      f"{once * (repeat + 1):.0f} s (> {budget_s:.0f} s) {note}")
    timer = lib.time_evaluator("main", mlc_lab.cpu(), number=1, repeat=repeat,
                               min_repeat_ms=min_repeat_ms)
    return timer(a, b, c).median, note


def build_latency(repeats=3):
    """Median seconds to build mm_relu 128 (unscheduled) for llvm."""
    func = mm.mm_relu(128)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        mlc_lab.build(func, target="llvm")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 128 only, fewer repeats")
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([128] if args.quick else [128, 512, 1024])
    repeat, min_repeat_ms = (3, 20) if args.quick else (7, 100)

    print(f"n x n x n float32 matmul; GFLOPS = 2 n^3 / median time; x numpy = numpy time / ours "
          f"(numpy threads: OpenBLAS default, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}); {repeat} repeats of >= "
          f"{min_repeat_ms} ms; {os.cpu_count()} cores")
    busy = timing.other_runnable_tasks()
    if busy:
        print(f"WARNING: {busy} other task(s) want a CPU right now; 2-thread timings (numpy's "
              "included) will be noisy")
    header = (f"{'n':>5} {'program':<22} {'ms':>10} {'GFLOPS':>8} {'x numpy':>8}  note")
    print(header)
    print("-" * len(header))
    for n in sizes:
        rng = np.random.default_rng(n)
        a_np, b_np = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
        c_np = np.empty((n, n), "float32")
        want = a_np.astype("float64") @ b_np.astype("float64")
        arrays = (nd.array(a_np), nd.array(b_np), nd.empty((n, n), "float32"))
        flops = 2.0 * n ** 3
        before = numpy_seconds(a_np, b_np, c_np, repeat, min_repeat_ms)
        results = []

        def row(program, seconds, note=""):
            print(f"{n:>5} {program:<22} {seconds * 1e3:>10.3f} {flops / seconds / 1e9:>8.2f} "
                  f"{base / seconds:>8.3f}  {note}", flush=True)

        two, one = TARGET.format(cores=2), TARGET.format(cores=1)
        variants = [("naive (2 cores)", lambda: mm.naive(n), two),
                    ("course (2 cores)", lambda: mm.course_schedule(n).mod, two),
                    ("best (2 cores)", lambda: mm.best_schedule(n, num_cores=2).mod, two),
                    ("best (1 core)", lambda: mm.best_schedule(n, num_cores=1).mod, one),
                    ("best (2c) -fast-math", lambda: mm.best_schedule(n, num_cores=2).mod,
                     two + " -fast-math")]
        timings = {}
        for label, make, target in variants:
            budget = NAIVE_BUDGET_S if label.startswith("naive") else None
            seconds, note = measure(make(), target, arrays, want, repeat, min_repeat_ms, budget)
            timings[label] = seconds
            results.append((label, seconds, note))
        after = numpy_seconds(a_np, b_np, c_np, repeat, min_repeat_ms)
        base = min(before, after)
        row("numpy np.matmul", base,
            f"(median before / after the others: {before * 1e3:.3f} / {after * 1e3:.3f} ms)")
        for label, seconds, note in results:
            row(label, seconds, note)
        print(f"{n:>5} {'best 1 -> 2 cores':<22} speed-up "
              f"{timings['best (1 core)'] / timings['best (2 cores)']:.2f}x"
              + ("  (best keeps n this small on one core)" if 2 * n ** 3 < mm.min_parallel_flops()
                 else ""), flush=True)
    print(f"\nbuild latency, mm_relu 128 for llvm (median of 3): {build_latency() * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
