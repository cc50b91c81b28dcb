"""Random GPU schedules of the course's programs, run on cuda-sim, against numpy and against the
reference interpreter running the same scheduled module (thread loops as ordinary loops)."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.script import from_source
from mlc_lab.testing import gpu_schedules as gs
from mlc_lab.testing.fuzz.runner import gpu_bound

RNG = np.random.default_rng(20261125)


def _matmul_cases(per_kind):
    cases = []
    for kind in ("naive", "blocked", "shared") * 40:
        if sum(c[0] == kind for c in cases) == per_kind:
            continue
        local, block = int(RNG.choice([1, 2, 4])), int(RNG.choice([2, 4, 8]))
        tile_k = int(RNG.choice([1, 2, 4, 8]))
        n = local * block * int(RNG.integers(1, 3)) * 4
        if n % tile_k:
            continue
        vector = int(RNG.choice([1, 2, 4])) if kind == "shared" else 1
        if kind == "shared" and (local * block * tile_k) % (block * block * vector):
            continue    # the cooperative fetch splits evenly over the block's threads
        cases.append((kind, n, local, block, tile_k, vector))
    return cases


def _schedule(kind, n, local, block, tile_k, vector):
    if kind == "naive":
        return gs.matmul_naive(n, threads=block)
    if kind == "blocked":
        return gs.matmul_blocked(n, local=local, block=block, tile_k=tile_k)
    return gs.matmul_shared(n, local=local, block=block, tile_k=tile_k, vector=vector)


EXTRA = [("shared", 64, 4, 8, 8, 4), ("shared", 128, 8, 8, 8, 4), ("shared", 64, 2, 8, 16, 4),
         ("shared", 24, 2, 4, 3, 1),     # 24 elements per tile for 16 threads: a guarded fetch
         ("shared", 48, 2, 4, 6, 2)]


@pytest.mark.parametrize("case", _matmul_cases(6) + EXTRA, ids=lambda c: "-".join(map(str, c)))
def test_random_matmul_schedules_agree_everywhere(case):
    sch = _schedule(*case)
    arrays, expected = gs.arrays("matmul", case[1], seed=3)
    on_sim = [a.copy() for a in arrays]
    mlc_lab.build(sch.mod, target="cuda-sim")["main"](*on_sim)
    np.testing.assert_allclose(on_sim[-1], expected, rtol=1e-4, atol=1e-4)
    reference = [a.copy() for a in arrays]
    mlc_lab.build(sch.mod, target="python")["main"](*reference)
    np.testing.assert_allclose(on_sim[-1], reference[-1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n, threads, shared", [(1000, 128, True), (1000, 128, False), (96, 32, True),
                                                (33, 16, True), (4096, 256, True)])
def test_window_sum_at_sizes_the_threads_do_not_divide(n, threads, shared):
    arrays, expected = gs.arrays("window_sum", n, seed=n)
    mlc_lab.build(gs.window_sum(n, threads, shared).mod, target="cuda-sim")["main"](*arrays)
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-5)


TRANSPOSE_ADD = '''
@T.prim_func
def main(A: T.Buffer(({m}, {n}), "float32"), b: T.Buffer(({m},), "float32"),
         C: T.Buffer(({n}, {m}), "float32")):
    for i, j in T.grid({n}, {m}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vj, vi] * 2.0 + b[vj]
'''


@pytest.mark.parametrize("n, m, lanes", [(10, 4, 2), (16, 4, 4), (13, 4, 2), (8, 2, 4)])
def test_two_nested_vectorized_loops_under_bound_threads(n, m, lanes):
    # vectorize(j), then split i and vectorize its inner part: `for i_1 in T.vectorized(lanes):
    # for j in T.vectorized(m)` under threadIdx.x. cuda-sim runs the inner loop as a vector (a
    # Ramp) inside the outer loop's lanes; it must agree with llvm and the interpreter, which run
    # the same schedule unbound (13: the split leaves a guarded tail; 4 x 4: both loops as long).
    sch = tir.Schedule(from_source(TRANSPOSE_ADD.format(n=n, m=m)))
    sch.vectorize(sch.get_loops(sch.get_block("C"))[1])
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, lanes])
    sch.vectorize(sch.get_loops(sch.get_block("C"))[1])
    bound = gpu_bound(sch.mod)
    rng = np.random.default_rng(n * m)
    a, b = rng.random((m, n), dtype="float32"), rng.random(m, dtype="float32")
    for target, mod in (("cuda-sim", bound), ("llvm", sch.mod), ("python", sch.mod)):
        c = np.full((n, m), np.nan, "float32")
        mlc_lab.build(mod, target=target)["main"](a, b, c)
        np.testing.assert_allclose(c, a.T * 2 + b, rtol=1e-6, err_msg=target)
