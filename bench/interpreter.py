"""How fast is the reference interpreter on mm_relu 128x128x128 (blocks with init and a reduce
axis, an intermediate buffer)? Compared in the same run with a per-element Python triple loop
over numpy arrays (what a naive interpreter would do) and with numpy's own matmul.

Run: python bench/interpreter.py
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mlc_lab  # noqa: E402
from mlc_lab import nd, tir  # noqa: E402
from mlc_lab.tir import (  # noqa: E402
    Block, BlockRealize, BufferStore, For, IterVar, PrimFunc, Range, SeqStmt, Var, const)

N = 128
LOOP_ROWS = 8  # rows the per-element loop computes; its time is scaled up to all N rows


def mm_relu(n: int) -> PrimFunc:
    A, B, C, Y = (tir.decl_buffer((n, n), "float32", name) for name in "ABCY")

    def nest(names, kinds, make_store, init=None):
        loop_vars = [Var(x) for x in names]
        block_vars = [Var("v" + x) for x in names]
        iter_vars = tuple(IterVar(v, Range(const(0), const(n)), "reduce" if k == "R" else "spatial")
                          for v, k in zip(block_vars, kinds))
        body = BlockRealize(tuple(loop_vars), const(True),
                            Block(names, iter_vars, (), (), make_store(*block_vars),
                                  init and init(*block_vars)))
        for var in reversed(loop_vars):
            body = For(var, const(0), const(n), "serial", body)
        return body

    update = nest("ijk", "SSR", lambda i, j, k: BufferStore(Y, Y[i, j] + A[i, k] * B[k, j], (i, j)),
                  init=lambda i, j, k: BufferStore(Y, const(0.0, "float32"), (i, j)))
    relu = nest("ij", "SS", lambda i, j: BufferStore(C, tir.Max(Y[i, j], const(0.0, "float32")),
                                                      (i, j)))
    root_block = Block("root", (), (), (), SeqStmt((update, relu)), None, (Y,))
    root = BlockRealize((), const(True), root_block)
    return PrimFunc((A, B, C), root, (("global_symbol", "mm_relu"),))


def per_element_loop(a, b, c, rows):
    """The loop nest executed one element at a time, as a plain Python loop over numpy arrays."""
    y = np.empty_like(c)
    for i in range(rows):
        for j in range(N):
            y[i, j] = 0
            for k in range(N):
                y[i, j] = y[i, j] + a[i, k] * b[k, j]
    for i in range(rows):
        for j in range(N):
            c[i, j] = max(y[i, j], np.float32(0))


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.random((N, N)).astype("float32") for _ in range(2))
    a, b, c = nd.array(a_np), nd.array(b_np), nd.empty((N, N), "float32")
    lib = mlc_lab.build(mm_relu(N), target="python")
    interp = lib.time_evaluator("mm_relu", mlc_lab.cpu(), number=5, repeat=3)(a, b, c).median
    np.testing.assert_allclose(c.numpy(), np.maximum(a_np @ b_np, 0), rtol=1e-5)

    c_loop = np.zeros((N, N), "float32")
    loop = best_of(1, lambda: per_element_loop(a_np, b_np, c_loop, LOOP_ROWS)) * N / LOOP_ROWS
    numpy_time = best_of(20, lambda: np.maximum(a_np @ b_np, 0))

    print(f"mm_relu {N}x{N}x{N} (float32), reference interpreter")
    print(f"  interpreter, vectorised      : {interp * 1e3:9.2f} ms")
    print(f"  per-element Python loop      : {loop * 1e3:9.2f} ms  "
          f"(timed on {LOOP_ROWS} of {N} rows, scaled by {N // LOOP_ROWS})")
    print(f"  numpy matmul + maximum       : {numpy_time * 1e3:9.2f} ms")
    print(f"  speed-up over per-element    : {loop / interp:9.1f}x")
    print(f"  slower than numpy by         : {interp / numpy_time:9.1f}x")


if __name__ == "__main__":
    main()
