"""partition_tail: a loop whose vector lanes are guarded against a symbolic size runs its whole
vectors unguarded (and vectorized) and keeps the guard for the rest; results never change."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir.transform import PassContext
from mlc_lab.script import tir as T
from mlc_lab.tir import stmt as S
from mlc_lab.tir.stmt_functor import post_order_visit
from mlc_lab.tir.transform.pipeline import lower

SIZES = list(range(0, 19)) + [64, 1001]


@T.prim_func
def scaled_exp(a: T.handle, b: T.handle):
    T.func_attr({"global_symbol": "scaled_exp", "tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (3, n), "float32")
    B = T.match_buffer(b, (3, n), "float32")
    for i, j in T.grid(3, n):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.exp(A[vi, vj]) * T.float32(2)


@T.prim_func
def shifted(a: T.handle, b: T.handle):
    """B[j] = A[j + 3] for j < n - 5: the guard holds a size expression and a constant."""
    T.func_attr({"global_symbol": "shifted", "tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for o, v in T.grid((n + 3) // 4, T.int64(4)):
        with T.block("B"):
            vj = T.axis.spatial(n, o * 4 + v)
            T.where(o * 4 + v < n - 5)
            B[vj] = A[vj + 3] + T.float32(1)


@T.prim_func
def capped(a: T.handle, b: T.handle):
    """Only the first 3 vectors of 8 are computed, however long the buffer: the loop's own extent
    stops before the guard does."""
    T.func_attr({"global_symbol": "capped", "tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for o, v in T.grid(T.int64(3), T.int64(8)):
        with T.block("B"):
            vj = T.axis.spatial(n, o * 8 + v)
            T.where(o * 8 + v < n)
            B[vj] = A[vj] * T.float32(3)


def scheduled_exp(parallel: bool):
    sch = tir.Schedule(scaled_exp)
    i, j = sch.get_loops(sch.get_block("B"))
    if parallel:
        sch.parallel(i)
    _, inner = sch.split(j, [None, 8])
    sch.vectorize(inner)
    return sch.mod


def vectorized(func) -> tuple[list, list]:
    """The lowered function's vectorized loops that remain loops, and its stores of vectors."""
    loops, vector_stores = [], []

    def visit(node):
        if isinstance(node, S.For) and node.kind == "vectorized":
            loops.append(node)
        if isinstance(node, S.BufferStore) and "x" in node.value.dtype:
            vector_stores.append(node)

    post_order_visit(func.body, visit)
    return loops, vector_stores


def run(mod, inputs, out_shape):
    f = mlc_lab.build(mod, "llvm")
    args = [mlc_lab.nd.array(x) for x in inputs] + [mlc_lab.nd.array(np.full(out_shape, -7, "float32"))]
    f(*args)
    return args[-1].numpy()


@pytest.mark.parametrize("parallel", [False, True])
def test_whole_vectors_lose_the_guard_and_vectorize(parallel):
    lowered = lower(scheduled_exp(parallel))["main"]
    loops, stores = vectorized(lowered)
    assert len(stores) == 1 and len(loops) == 1             # the whole vectors, then the tail loop
    assert isinstance(loops[0].body, S.IfThenElse)          # the tail keeps its guard
    with PassContext(disabled_pass=["partition_tail"]):
        loops, stores = vectorized(lower(scheduled_exp(parallel))["main"])
    assert not stores and len(loops) == 1


@pytest.mark.parametrize("parallel", [False, True])
def test_results_match_numpy_for_every_length(parallel):
    mod = scheduled_exp(parallel)
    for n in SIZES:
        a = np.random.default_rng(n).standard_normal((3, n)).astype("float32")
        np.testing.assert_allclose(run(mod, [a], (3, n)), np.exp(a) * 2, rtol=1e-6)


def test_a_guard_with_a_size_expression_and_a_constant():
    sch = tir.Schedule(shifted)
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    assert len(vectorized(lower(sch.mod)["main"])[1]) == 1
    for n in SIZES:
        a = np.arange(n, dtype="float32")
        want = np.full(n, -7, "float32")
        want[:max(n - 5, 0)] = a[3:max(n - 2, 3)] + 1
        np.testing.assert_array_equal(run(sch.mod, [a], (n,)), want)


def test_the_loop_extent_still_bounds_the_whole_vectors():
    sch = tir.Schedule(capped)
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    for n in (0, 5, 8, 20, 24, 25, 100):
        a = np.arange(n, dtype="float32")
        want = np.full(n, -7, "float32")
        want[:min(n, 24)] = 3 * a[:min(n, 24)]
        np.testing.assert_array_equal(run(sch.mod, [a], (n,)), want)


def test_a_guard_with_an_else_branch_is_left_alone():
    """The else branch runs on the lanes past the end: the loop stays as it was, and right."""
    @T.prim_func
    def two_sided(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"global_symbol": "two_sided", "tir.noalias": True})
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, ((n + 7) // 8 * 8,), "float32")
        for o in range((n + 7) // 8):
            for v in T.vectorized(T.int64(8)):
                if o * 8 + v < n:
                    B[o * 8 + v] = A[o * 8 + v]
                else:
                    C[o * 8 + v] = T.float32(1)

    assert not vectorized(lower(two_sided)["two_sided"])[1]
    f = mlc_lab.build(two_sided, "llvm")
    for n in (0, 3, 16, 21):
        a, b, c = np.arange(n, dtype="float32"), np.zeros(n, "float32"), np.zeros((n + 7) // 8 * 8, "float32")
        args = [mlc_lab.nd.array(x) for x in (a, b, c)]
        f(*args)
        np.testing.assert_array_equal(args[1].numpy(), a)
        np.testing.assert_array_equal(args[2].numpy(), (np.arange(len(c)) >= n).astype("float32"))
