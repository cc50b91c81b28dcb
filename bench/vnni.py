"""An int8 matmul (uint8 x int8 -> int32) tensorized onto the x86 dot-product intrinsic, against
the same schedule left as loops and against numpy's float32 matmul of the same size.

    C[i, j] = sum_k int32(A[i, k]) * int32(B[j, k])

B is packed as (N // 16, K // 4, 16, 4), so each 16x4 tile the intrinsic reads is 64 consecutive
bytes. The schedule splits j by 16 and k by 4 and tensorizes the (16, 4) tile; the same schedule
without tensorize is the "loops" row. With AVX-512 VNNI the intrinsic is one ``vpdpbusd`` per
tile; without it, the portable implementation (``--portable`` forces it).

Run: python bench/vnni.py [--size 512] [--repeat 9] [--portable]
"""
import argparse
import sys
import time

import numpy as np

import mlc_lab as tvm
from mlc_lab.tir.tensor_intrin import x86
from mlc_lab.testing import matmul_schedules as mm


int8_matmul, schedule = mm.int8_matmul, mm.dot_16x4_schedule


def median_seconds(run, repeat: int) -> float:
    run()   # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="M = N = K (a multiple of 16)")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--portable", action="store_true",
                        help="use the portable implementation even where the CPU has VNNI")
    args = parser.parse_args(argv)
    size = args.size
    kind = x86.select_dot_16x4("portable" if args.portable else None)

    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (size, size), dtype=np.uint8)
    b = rng.integers(-128, 128, (size, size), dtype=np.int8)
    packed = np.ascontiguousarray(b.reshape(size // 16, 16, size // 4, 4).transpose(0, 2, 1, 3))
    expected = a.astype(np.int32) @ b.astype(np.int32).T

    func = int8_matmul(size, size, size)
    rows = []
    for label, tensorize in ((f"tensorized ({kind})", True), ("same schedule, loops", False)):
        lib = tvm.build(schedule(func, tensorize).mod, target="llvm")
        a_nd, b_nd = tvm.nd.array(a), tvm.nd.array(packed)
        c_nd = tvm.nd.empty((size, size), "int32")
        seconds = median_seconds(lambda: lib["main"](a_nd, b_nd, c_nd), args.repeat)
        if not np.array_equal(c_nd.numpy(), expected):
            print(f"{label}: WRONG RESULT", file=sys.stderr)
            return 1
        rows.append((label, seconds))
    af, bf = a.astype(np.float32), b.astype(np.float32)
    rows.append(("numpy float32 matmul", median_seconds(lambda: af @ bf.T, args.repeat)))

    ops = 2.0 * size ** 3
    print(f"int8 matmul {size}x{size}x{size}; VNNI on this CPU: {x86.host_has_vnni()}; "
          f"implementation: {kind}; median of {args.repeat}")
    base = rows[0][1]
    for label, seconds in rows:
        print(f"  {label:28s} {seconds * 1e3:9.3f} ms  {ops / seconds / 1e9:8.2f} Gop/s  "
              f"x{seconds / base:6.2f} the tensorized time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
