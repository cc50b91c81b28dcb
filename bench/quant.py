"""Weight-only quantized GEMV at batch 1: float32 vs int8 vs int4 weights, on the memory roofline.

For each (k, n) layer, ``y = x @ W`` with x of shape (1, k) is compiled with ``relax.build`` on
"llvm" three ways: the float32 weight bound as a constant (the default "matmul" schedule), and
``QuantizeWeights(bits=8)`` / ``(bits=4)`` (group size 32, float32 scales; the "dequant_gemv"
schedule); and a fourth row, the float32 kernel given dequant_gemv's loop order by hand
("strips"), which separates what the loop order gains from what the smaller bytes gain (the
"vs float" ratios are against the default float32 kernel; the last line gives both). numpy's ``x @ W`` (float32, OpenBLAS) is the baseline row. Each row prints the median
time, the bytes of weights it must read, the effective bandwidth (bytes / time), the time the
memory roofline allows (bytes / the measured copy bandwidth), and the speed-up over float32.

A GEMV does 2 flops per weight and reads each weight once: at 4 bytes a weight it can never be
compute-bound, so its time is the weight bytes over the memory bandwidth. int8 moves ~1/4 of
the bytes (plus scales), int4 ~1/8 (plus scales: 1 float32 per 32 weights, i.e. +1 bit a
weight). Once the bytes shrink the decoding work (shift, mask, convert, multiply) starts to
count: the gap between int4's time and its roofline is that work.

The copy bandwidth is measured with numpy on one thread (``np.copyto`` of 256 MiB: read + write);
the kernels run on all cores, so they can exceed it somewhat. Caveat: the same weights are read
call after call, so where the last-level cache is larger than them (cloud hosts with a few
hundred MiB of shared L3) the kernels stream from that cache, not from DRAM, and the roofline
column is only indicative; the smaller int4/int8 weights fit such a cache more easily.

Run: python bench/quant.py [--quick] [--repeat 15]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab import relax, te, tir, topi  # noqa: E402
from mlc_lab.relax.transform.default_schedule_dequant import dequant_gemv  # noqa: E402
from mlc_lab.runtime.parallel import default_threads  # noqa: E402
from mlc_lab.tir.schedule.policy.postproc import (RewriteParallelVectorizeUnroll,  # noqa: E402
                                                  RewriteReductionBlock)
from mlc_lab.relax import op as R  # noqa: E402
from mlc_lab.relax.transform import QuantizeWeights, default_schedule_report  # noqa: E402
from mlc_lab.testing import timing  # noqa: E402
from mlc_lab.topi.quantize import weight_bytes  # noqa: E402

SIZES = [(4096, 4096), (2048, 8192)]


def median_seconds(fn, repeat: int) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def copy_bandwidth() -> float:
    """Bytes per second of a large numpy copy (each byte read once and written once)."""
    src = np.ones(64 * 2 ** 20, "float32")
    dst = np.empty_like(src)
    seconds = median_seconds(lambda: np.copyto(dst, src), 5)
    return 2 * src.nbytes / seconds


def gemv_module(k: int, n: int, weight: np.ndarray):
    x = relax.Var("x", relax.TensorStructInfo((1, k), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((k, n), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(R.matmul(x, w))
        bb.emit_func_output(out)
    return relax.transform.BindParams("main", {"w": weight})(bb.get())


def float_strips(k: int, n: int, x: np.ndarray, weight: np.ndarray):
    """The float32 GEMV kernel scheduled with dequant_gemv's loop order (parallel column strips,
    the reduction outside each strip's vectors): what the float kernel gains from the loop order
    alone, apart from the bytes."""
    xt, wt = te.placeholder((1, k), "float32", "x"), te.placeholder((k, n), "float32", "w")
    sch = tir.Schedule(te.create_prim_func([xt, wt, topi.matmul(xt, wt)]))
    dequant_gemv(sch, sch.get_block("T_matmul"), 16, True, default_threads(), check=False)
    RewriteParallelVectorizeUnroll().apply(sch)
    RewriteReductionBlock().apply(sch)
    lib = mlc_lab.build(sch.mod["main"], "llvm")
    args = [mlc_lab.nd.array(x), mlc_lab.nd.array(weight), mlc_lab.nd.empty((1, n), "float32")]
    lib(*args)
    np.testing.assert_allclose(args[2].numpy(), x @ weight, rtol=1e-3, atol=1e-2)
    return lambda: lib(*args)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the first size only, fewer repeats")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    sizes, repeat = (SIZES[:1], 7) if args.quick else (SIZES, args.repeat)
    rng = np.random.default_rng(0)
    bandwidth = copy_bandwidth()
    print(f"copy bandwidth (numpy, 1 thread): {bandwidth / 1e9:.1f} GB/s   {timing.busy_note()}")
    header = (f"{'layer':>12} {'weights':>8} {'schedule':>12} {'median':>9} {'MB read':>8} "
              f"{'GB/s':>6} {'roofline':>9} {'vs float':>8}")
    for k, n in sizes:
        print("\n" + header)
        weight = rng.standard_normal((k, n)).astype("float32")
        x = rng.standard_normal((1, k)).astype("float32")
        rows = [("numpy", "OpenBLAS", k * n * 4, lambda: x @ weight)]
        for bits in (32, 8, 4):
            mod = gemv_module(k, n, weight)
            if bits != 32:
                mod = QuantizeWeights(bits=bits, group_size=32)(mod)
            ex = relax.build(mod, "llvm")
            rule = next(iter(default_schedule_report(ex.mod).values()))
            vm = relax.VirtualMachine(ex, mlc_lab.cpu())
            x_nd = mlc_lab.nd.array(x)
            nbytes = k * n * 4 if bits == 32 else weight_bytes(k, n, bits, 32)
            rows.append((f"float32" if bits == 32 else f"int{bits}", rule, nbytes,
                         lambda vm=vm, x_nd=x_nd: vm["main"](x_nd)))
        rows.insert(2, ("float32", "strips", k * n * 4, float_strips(k, n, x, weight)))
        times = {}
        for label, rule, nbytes, fn in rows:
            seconds = median_seconds(fn, repeat)
            times["strips" if rule == "strips" else label] = seconds
            ratio = times.get("float32", seconds) / seconds if label != "numpy" else float("nan")
            print(f"{f'{k}x{n}':>12} {label:>8} {rule:>12} {seconds * 1e6:>7.0f}us "
                  f"{nbytes / 1e6:>8.1f} {nbytes / seconds / 1e9:>6.1f} "
                  f"{nbytes / bandwidth * 1e6:>7.0f}us {ratio:>7.2f}x")
        print(f"{'':>12} int4 vs float32: {times['float32'] / times['int4']:.2f}x faster; "
              f"int8 vs float32: {times['float32'] / times['int8']:.2f}x; "
              f"int4 vs float32 strips: {times['strips'] / times['int4']:.2f}x; "
              f"int4 vs numpy float: {times['numpy'] / times['int4']:.2f}x")


if __name__ == "__main__":
    main()
