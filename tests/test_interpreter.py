"""The reference interpreter: programs built directly from IR nodes, checked against numpy and
against the interpreter's own per-element stepping mode (two ways to compute the same thing)."""
import numpy as np
import pytest

from mlc_lab import tir
from mlc_lab.runtime import run
from mlc_lab.runtime.interpreter import grid as interpreter_grid
from mlc_lab.tir import (Block, BlockRealize, BufferStore, For, IfThenElse, IterVar, LetStmt,
                         PrimFunc, Range, SeqStmt, Var, call_intrin, const)

F32 = "float32"


# ---------------------------------------------------------------------------------------------
# A few builders over the IR constructors, so each test reads like the loop nest it builds.
def buffers(names, shape, dtype=F32):
    return [tir.decl_buffer(shape, dtype, name) for name in names]


def loops(pairs, body):
    """``for v0 in range(n0): for v1 in range(n1): ... body`` from [(v0, n0), (v1, n1), ...]."""
    for var, extent in reversed(pairs):
        body = For(var, const(0, var.dtype), const(extent, var.dtype) if isinstance(extent, int)
                   else extent, "serial", body)
    return body


def block(name, iters, body, init=None, predicate=None):
    """A BlockRealize; ``iters`` holds (block var, "S" or "R", extent, bound value)."""
    iter_vars = tuple(IterVar(v, Range(const(0), const(n) if isinstance(n, int) else n),
                              "reduce" if kind == "R" else "spatial") for v, kind, n, _ in iters)
    block_node = Block(name, iter_vars, (), (), body, init)
    return BlockRealize(tuple(value for *_, value in iters),
                        const(True) if predicate is None else predicate, block_node)


def prim_func(params, body, allocs=(), name="main"):
    root = BlockRealize((), const(True), Block("root", (), (), (), body, None, tuple(allocs)))
    return PrimFunc(tuple(params), root, (("global_symbol", name),))


def fvar(*names):
    return [Var(n) for n in names]


def rand(*shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def both_ways(func, arrays):
    """Run vectorised and stepped on copies; check they agree exactly; return the vectorised."""
    fast = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    slow = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    run(func, fast)
    run(func, slow, vectorize=False)
    for x, y in zip(fast, slow):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
    return fast


@pytest.fixture
def grid_runs(monkeypatch):
    """Counts loop nests that ran as one grid, and how many were tried."""
    counts = {"grid": 0, "tried": 0}
    real = interpreter_grid.run_nest

    def counting(*args):
        ok = real(*args)
        counts["tried"] += 1
        counts["grid"] += ok
        return ok
    monkeypatch.setattr(interpreter_grid, "run_nest", counting)
    return counts


# ---------------------------------------------------------------------------------------------
# Programs
def vector_add(n=1024):
    A, B, C = buffers("ABC", (n,))
    i, vi = fvar("i", "vi")
    body = loops([(i, n)], block("C", [(vi, "S", n, i)], BufferStore(C, A[vi] + B[vi], (vi,))))
    return prim_func((A, B, C), body)


def mm_relu(n=128):
    A, B, C, Y = buffers("ABCY", (n, n))
    i, j, k, vi, vj, vk = fvar("i", "j", "k", "vi", "vj", "vk")
    y = block("Y", [(vi, "S", n, i), (vj, "S", n, j), (vk, "R", n, k)],
              BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
              init=BufferStore(Y, const(0.0, F32), (vi, vj)))
    i2, j2, vi2, vj2 = fvar("i", "j", "vi", "vj")
    c = block("C", [(vi2, "S", n, i2), (vj2, "S", n, j2)],
              BufferStore(C, tir.Max(Y[vi2, vj2], const(0.0, F32)), (vi2, vj2)))
    body = SeqStmt((loops([(i, n), (j, n), (k, n)], y), loops([(i2, n), (j2, n)], c)))
    return prim_func((A, B, C), body, allocs=(Y,), name="mm_relu")


def batch_matmul_relu(b=16, n=128):
    A, B, C, Y = buffers("ABCY", (b, n, n))
    p, i, j, k, vp, vi, vj, vk = fvar("p", "i", "j", "k", "vp", "vi", "vj", "vk")
    y = block("Y", [(vp, "S", b, p), (vi, "S", n, i), (vj, "S", n, j), (vk, "R", n, k)],
              BufferStore(Y, Y[vp, vi, vj] + A[vp, vi, vk] * B[vp, vk, vj], (vp, vi, vj)),
              init=BufferStore(Y, const(0.0, F32), (vp, vi, vj)))
    p2, i2, j2, vp2, vi2, vj2 = fvar("p", "i", "j", "vp", "vi", "vj")
    c = block("C", [(vp2, "S", b, p2), (vi2, "S", n, i2), (vj2, "S", n, j2)],
              BufferStore(C, tir.Max(Y[vp2, vi2, vj2], const(0.0, F32)), (vp2, vi2, vj2)))
    body = SeqStmt((loops([(p, b), (i, n), (j, n), (k, n)], y),
                    loops([(p2, b), (i2, n), (j2, n)], c)))
    return prim_func((A, B, C), body, allocs=(Y,))


def conv2d_nchw(n=1, c=3, h=8, k=4, r=3):
    """Convolution with padding 1, written with T.if_then_else so the border reads are masked."""
    (X,) = buffers("X", (n, c, h, h))
    (W,) = buffers("W", (k, c, r, r))
    (O,) = buffers("O", (n, k, h, h))
    names = ("bn", "bk", "bh", "bw", "bc", "br", "bs")
    lv = fvar(*(x[1] for x in names))
    bv = fvar(*names)
    vn, vk, vh, vw, vc, vr, vs = bv
    hh, ww = vh + vr - 1, vw + vs - 1
    inside = (hh >= 0) & (hh < h) & (ww >= 0) & (ww < h)
    padded = call_intrin("if_then_else", inside, X[vn, vc, hh, ww], const(0.0, F32))
    kinds = "SSSSRRR"
    extents = (n, k, h, h, c, r, r)
    body = block("conv", [(b, kd, e, l) for b, kd, e, l in zip(bv, kinds, extents, lv)],
                 BufferStore(O, O[vn, vk, vh, vw] + padded * W[vk, vc, vr, vs], (vn, vk, vh, vw)),
                 init=BufferStore(O, const(0.0, F32), (vn, vk, vh, vw)))
    return prim_func((X, W, O), loops(list(zip(lv, extents)), body))


def conv2d_reference(x, w):
    n, c, h, _ = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, h), np.float64)
    for r in range(w.shape[2]):
        for s in range(w.shape[3]):
            out += np.einsum("nchw,kc->nkhw", padded[:, :, r:r + h, s:s + h], w[:, :, r, s])
    return out


def softmax(m=16, n=64):
    A, B = buffers("AB", (m, n))
    (row_max,) = buffers(["row_max"], (m,))
    (row_sum,) = buffers(["row_sum"], (m,))
    (E,) = buffers("E", (m, n))
    stages = []
    i, j, vi, vj = fvar("i", "j", "vi", "vj")
    stages.append(loops([(i, m), (j, n)], block(
        "max", [(vi, "S", m, i), (vj, "R", n, j)],
        BufferStore(row_max, tir.Max(row_max[vi], A[vi, vj]), (vi,)),
        init=BufferStore(row_max, const(-3.0e38, F32), (vi,)))))
    i, j, vi, vj = fvar("i", "j", "vi", "vj")
    stages.append(loops([(i, m), (j, n)], block(
        "exp", [(vi, "S", m, i), (vj, "S", n, j)],
        BufferStore(E, call_intrin("exp", A[vi, vj] - row_max[vi]), (vi, vj)))))
    i, j, vi, vj = fvar("i", "j", "vi", "vj")
    stages.append(loops([(i, m), (j, n)], block(
        "sum", [(vi, "S", m, i), (vj, "R", n, j)],
        BufferStore(row_sum, row_sum[vi] + E[vi, vj], (vi,)),
        init=BufferStore(row_sum, const(0.0, F32), (vi,)))))
    i, j, vi, vj = fvar("i", "j", "vi", "vj")
    stages.append(loops([(i, m), (j, n)], block(
        "div", [(vi, "S", m, i), (vj, "S", n, j)],
        BufferStore(B, E[vi, vj] / row_sum[vi], (vi, vj)))))
    return prim_func((A, B), SeqStmt(tuple(stages)), allocs=(row_max, row_sum, E))


def symbolic_matmul(k=32):
    n = Var("n")
    A = tir.decl_buffer((n, k), F32, "A")
    B = tir.decl_buffer((k, k), F32, "B")
    C = tir.decl_buffer((n, k), F32, "C")
    i, j, r, vi, vj, vr = fvar("i", "j", "r", "vi", "vj", "vr")
    body = block("C", [(vi, "S", n, i), (vj, "S", k, j), (vr, "R", k, r)],
                 BufferStore(C, C[vi, vj] + A[vi, vr] * B[vr, vj], (vi, vj)),
                 init=BufferStore(C, const(0.0, F32), (vi, vj)))
    return prim_func((A, B, C), loops([(i, n), (j, k), (r, k)], body))


def split_with_predicate(n=30, inner=4):
    """``for io, ii in grid(8, 4)`` over 30 elements: T.where(io * 4 + ii < 30)."""
    A, B = buffers("AB", (n,))
    io, ii, v = fvar("io", "ii", "v")
    outer = (n + inner - 1) // inner
    body = block("B", [(v, "S", n, io * inner + ii)],
                 BufferStore(B, A[v] * const(2.0, F32), (v,)), predicate=io * inner + ii < n)
    return prim_func((A, B), loops([(io, outer), (ii, inner)], body))


def prefix_sum(n=100):
    A, B = buffers("AB", (n,))
    (i,) = fvar("i")
    body = SeqStmt((BufferStore(B, A[0], (const(0),)),
                    For(i, const(1), const(n - 1), "serial",
                        BufferStore(B, B[i - 1] + A[i], (i,)))))
    return prim_func((A, B), body)


# ---------------------------------------------------------------------------------------------
def test_vector_add():
    a, b, c = rand(1024), rand(1024, seed=1), np.zeros(1024, F32)
    run(vector_add(), [a, b, c])
    np.testing.assert_array_equal(c, a + b)


def test_broadcast_add_4x4():
    A, C = buffers("AC", (4, 4))
    (B,) = buffers("B", (4,))
    i, j, vi, vj = fvar("i", "j", "vi", "vj")
    body = block("C", [(vi, "S", 4, i), (vj, "S", 4, j)],
                 BufferStore(C, A[vi, vj] + B[vj], (vi, vj)))
    func = prim_func((A, B, C), loops([(i, 4), (j, 4)], body))
    a, b = rand(4, 4), rand(4, seed=1)
    c = both_ways(func, [a, b, np.zeros((4, 4), F32)])[2]
    np.testing.assert_array_equal(c, a + b)


def test_mm_relu_128_runs_as_two_grids(grid_runs):
    a, b, c = rand(128, 128), rand(128, 128, seed=1), np.zeros((128, 128), F32)
    run(mm_relu(), [a, b, c])
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
    assert grid_runs == {"grid": 2, "tried": 2}


def test_mm_relu_matches_sequential_float32_order_exactly():
    a, b = rand(8, 8), rand(8, 8, seed=1)
    c = both_ways(mm_relu(8), [a, b, np.zeros((8, 8), F32)])[2]
    y = np.zeros((8, 8), F32)
    for k in range(8):  # the interpreter accumulates k in order, in float32
        y = (y + a[:, k:k + 1] * b[k:k + 1, :]).astype(F32)
    np.testing.assert_array_equal(c, np.maximum(y, 0))


def test_batch_matmul_relu_steps_the_batch_loop_when_the_grid_is_too_large(grid_runs):
    a, b = rand(16, 128, 128), rand(16, 128, 128, seed=1)
    c = np.zeros((16, 128, 128), F32)
    run(batch_matmul_relu(), [a, b, c])
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-4)
    assert grid_runs["grid"] == 16 + 1  # 16 matmuls one batch at a time, then the relu at once


def test_conv2d_nchw_with_padding():
    x, w = rand(1, 3, 8, 8), rand(4, 3, 3, 3, seed=1)
    out = both_ways(conv2d_nchw(), [x, w, np.zeros((1, 4, 8, 8), F32)])[2]
    np.testing.assert_allclose(out, conv2d_reference(x, w), rtol=1e-5, atol=1e-5)


def test_softmax_rows():
    a = rand(16, 64)
    b = both_ways(softmax(), [a, np.zeros((16, 64), F32)])[1]
    e = np.exp(a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(b, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("n", [1, 5, 19])
def test_symbolic_shape_matmul(n):
    a, b = rand(n, 32), rand(32, 32, seed=1)
    c = both_ways(symbolic_matmul(), [a, b, np.zeros((n, 32), F32)])[2]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_block_predicate_guards_the_overhanging_tile():
    a = rand(30)
    b = both_ways(split_with_predicate(), [a, np.zeros(30, F32)])[1]
    np.testing.assert_array_equal(b, a * 2)


def test_if_then_else_statement():
    A, B = buffers("AB", (30,))
    (i,) = fvar("i")
    body = IfThenElse(tir.FloorMod(i, const(2)) == const(0), BufferStore(B, A[i], (i,)),
                      BufferStore(B, const(0.0, F32) - A[i], (i,)))
    a = rand(30)
    b = both_ways(prim_func((A, B), loops([(i, 30)], body)), [a, np.zeros(30, F32)])[1]
    np.testing.assert_array_equal(b, np.where(np.arange(30) % 2 == 0, a, -a))


def test_prefix_sum_is_not_vectorised_and_gives_the_sequential_result(grid_runs):
    a = rand(100)
    b = np.zeros(100, F32)
    run(prefix_sum(), [a, b])
    np.testing.assert_array_equal(b, np.cumsum(a, dtype=F32))
    assert grid_runs["grid"] == 0


def test_dependence_on_the_outer_loop_steps_it_and_vectorises_the_inner_loop(grid_runs):
    A, B = buffers("AB", (8, 16))
    i, j, t = fvar("i", "j", "t")
    # the let exercises bindings that are arrays over the grid
    body = LetStmt(t, j, BufferStore(B, B[i - 1, t] + A[i, t], (i, t)))
    func = prim_func((A, B), For(i, const(1), const(7), "serial", loops([(j, 16)], body)))
    a = rand(8, 16)
    b = both_ways(func, [a, a.copy()])[1]
    np.testing.assert_array_equal(b, np.cumsum(a, axis=0, dtype=F32))
    assert grid_runs == {"grid": 7, "tried": 8}


def test_cross_iteration_dependence_between_two_stores_falls_back(grid_runs):
    A, B = buffers("AB", (9,))
    (i,) = fvar("i")
    # A[i] reads B[i], which the previous iteration's second store wrote.
    body = SeqStmt((BufferStore(A, B[i] + const(1.0, F32), (i,)),
                    BufferStore(B, A[i] * const(2.0, F32), (i + 1,))))
    func = prim_func((A, B), loops([(i, 8)], body))
    a, b = np.zeros(9, F32), np.zeros(9, F32)
    both_ways(func, [a, b])
    run(func, [a, b])
    expected_b = np.zeros(9, F32)
    for k in range(8):
        expected_b[k + 1] = (expected_b[k] + 1) * 2
    np.testing.assert_array_equal(b, expected_b)
    assert grid_runs["grid"] == 0


def test_fused_producer_consumer_runs_as_one_grid(grid_runs):
    A, Y, C = buffers("AYC", (64,))
    (i,) = fvar("i")
    body = SeqStmt((BufferStore(Y, A[i] * const(2.0, F32), (i,)),
                    BufferStore(C, Y[i] + const(1.0, F32), (i,))))
    a = rand(64)
    c = both_ways(prim_func((A, Y, C), loops([(i, 64)], body)),
                  [a, np.zeros(64, F32), np.zeros(64, F32)])[2]
    np.testing.assert_array_equal(c, a * 2 + 1)
    assert grid_runs["grid"] == 1


@pytest.mark.parametrize("dtype, init, op, ref", [
    ("float32", 0.0, "sum", np.sum), ("int32", 0, "sum", np.sum),
    ("float32", -1e30, "max", np.max), ("int32", 1 << 30, "min", np.min)])
def test_row_reductions_with_init(dtype, init, op, ref):
    (A,) = buffers("A", (8, 16), dtype)
    (B,) = buffers("B", (8,), dtype)
    i, j, vi, vj = fvar("i", "j", "vi", "vj")
    update = {"sum": lambda: B[vi] + A[vi, vj], "max": lambda: tir.Max(B[vi], A[vi, vj]),
              "min": lambda: tir.Min(B[vi], A[vi, vj])}[op]()
    body = block("R", [(vi, "S", 8, i), (vj, "R", 16, j)], BufferStore(B, update, (vi,)),
                 init=BufferStore(B, const(init, dtype), (vi,)))
    a = (rand(8, 16) * 100).astype(dtype)
    b = both_ways(prim_func((A, B), loops([(i, 8), (j, 16)], body)), [a, np.full(8, 7, dtype)])[1]
    np.testing.assert_allclose(b, ref(a, axis=1).astype(dtype), rtol=1e-5)
    assert b.dtype == np.dtype(dtype)


def test_integer_division_truncates_and_floor_division_floors():
    A, B, T, F, M = buffers("ABTFM", (6,), "int32")
    (i,) = fvar("i")
    body = SeqStmt((BufferStore(T, tir.Div(A[i], B[i]), (i,)),
                    BufferStore(F, tir.FloorDiv(A[i], B[i]), (i,)),
                    BufferStore(M, tir.Mod(A[i], B[i]), (i,))))
    a = np.array([7, -7, 7, -7, 0, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4], np.int32)
    outs = both_ways(prim_func((A, B, T, F, M), loops([(i, 6)], body)),
                     [a, b] + [np.zeros(6, np.int32) for _ in range(3)])
    np.testing.assert_array_equal(outs[2], np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(outs[3], a // b)
    np.testing.assert_array_equal(outs[4], np.fmod(a, b))


def test_float32_math_stays_float32():
    A, B = buffers("AB", (5,))
    (i,) = fvar("i")
    value = call_intrin("sqrt", A[i] * const(1.1, F32)) + const(0.1, F32)
    a = np.abs(rand(5))
    b = both_ways(prim_func((A, B), loops([(i, 5)], BufferStore(B, value, (i,)))),
                  [a, np.zeros(5, F32)])[1]
    expected = np.sqrt(a * np.float32(1.1)) + np.float32(0.1)
    assert expected.dtype == np.float32
    np.testing.assert_array_equal(b, expected)


@pytest.mark.parametrize("op, reference", [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("rsqrt", lambda x: 1 / np.sqrt(x)),
    ("tanh", np.tanh), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("round", np.rint),
    ("erf", lambda x: np.vectorize(__import__("math").erf)(x)), ("floor", np.floor)])
def test_intrinsics(op, reference):
    A, B = buffers("AB", (6,))
    (i,) = fvar("i")
    func = prim_func((A, B), loops([(i, 6)], BufferStore(B, call_intrin(op, A[i]), (i,))))
    a = np.array([0.1, 0.5, 1.5, 2.5, 3.7, 9.0], F32)
    b = both_ways(func, [a, np.zeros(6, F32)])[1]
    np.testing.assert_allclose(b, reference(a.astype(np.float64)), rtol=1e-6)


def test_vector_lanes_ramp_and_broadcast():
    A, B = buffers("AB", (16,))
    (i,) = fvar("i")
    lanes = tir.Ramp(i * 4, const(1), 4)
    body = BufferStore(B, A[lanes] + tir.Broadcast(const(1.0, F32), 4), (lanes,))
    a = rand(16)
    b = both_ways(prim_func((A, B), loops([(i, 4)], body)), [a, np.zeros(16, F32)])[1]
    np.testing.assert_array_equal(b, a + 1)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("shift", [1, -1])
def test_out_of_bounds_read_raises_naming_the_buffer(vectorize, shift):
    A, B = buffers("AB", (8,))
    (i,) = fvar("i")
    func = prim_func((A, B), loops([(i, 8)], BufferStore(B, A[i + shift], (i,))))
    b = np.zeros(8, F32)
    with pytest.raises(IndexError, match=r"buffer A: index \((8|-1),\) is out of bounds"):
        run(func, [rand(8), b], vectorize=vectorize)
    if vectorize:
        assert not b.any()  # checked before anything in the nest ran


def test_out_of_bounds_write_raises():
    A, B = buffers("AB", (8,))
    (i,) = fvar("i")
    func = prim_func((A, B), loops([(i, 9)], BufferStore(B, A[0], (i,))))
    message = r"buffer B: index \(8,\) is out of bounds for shape \(8,\)"
    with pytest.raises(IndexError, match=message):
        run(func, [rand(8), np.zeros(8, F32)])


# ---------------------------------------------------------------------------------------------
# Random loop nests whose stores overlap in every way (repeats, reductions, cross-iteration
# dependences): the grid path must either reproduce the stepped result exactly or step itself.
def random_nest(rng, size=12):
    bufs = buffers(["X", "Y", "Z"], (size,))
    i, j = fvar("i", "j")
    outer, inner = int(rng.integers(1, 5)), int(rng.integers(1, 5))

    def index():
        a, b, c = (int(x) for x in rng.integers(-2, 3, size=3))
        return tir.FloorMod(i * a + j * b + const(c), const(size))

    stores = []
    for _ in range(int(rng.integers(1, 4))):
        target = bufs[int(rng.integers(3))]
        idx = index()
        term = bufs[int(rng.integers(3))][index()] * const(0.5, F32) + const(1.0, F32)
        kind = int(rng.integers(3))
        value = (target[idx] + term if kind == 0 else tir.Max(target[idx], term) if kind == 1
                 else term)
        store = BufferStore(target, value, (idx,))
        if rng.random() < 0.3:
            store = IfThenElse(tir.FloorMod(i + j, const(2)) == const(0), store)
        stores.append(store)
    body = loops([(i, outer), (j, inner)], SeqStmt(tuple(stores)) if len(stores) > 1 else stores[0])
    return prim_func(bufs, body)


def test_random_nests_agree_with_stepping(grid_runs):
    rng = np.random.default_rng(2024)
    for _ in range(300):
        func = random_nest(rng)
        both_ways(func, [rand(12, seed=k) for k in range(3)])
    assert 0 < grid_runs["grid"] < grid_runs["tried"]  # some nests vectorise, some must not


# ---------------------------------------------------------------------------------------------
# Reads of never-written elements of intermediate buffers.
from mlc_lab.runtime import UninitializedReadError  # noqa: E402
from mlc_lab.script import from_source  # noqa: E402

from corpus import CORPUS  # noqa: E402

_PARTIAL_PRODUCER = '''
@T.prim_func
def main(A: T.Buffer((16,), "{dtype}"), B: T.Buffer((16,), "{dtype}")):
    Y = T.alloc_buffer((16,), "{dtype}")
    for i in range({written}):
        with T.block("Y"):
            vi = T.axis.remap("S", [i])
            Y[vi] = A[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = Y[vi]
'''


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_reading_an_unwritten_intermediate_element_raises(vectorize, dtype):
    func = from_source(_PARTIAL_PRODUCER.format(dtype=dtype, written=12))
    a, b = np.arange(16).astype(dtype), np.zeros(16, dtype)
    with pytest.raises(UninitializedReadError, match=r"buffer Y: element \(12,\) .* block B"):
        run(func, [a, b], vectorize=vectorize)
    fully_written = from_source(_PARTIAL_PRODUCER.format(dtype=dtype, written=16))
    run(fully_written, [a, b], vectorize=vectorize)
    np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("vectorize", [True, False])
def test_reduction_into_an_intermediate_without_init_raises(vectorize):
    src = '''
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
    S = T.alloc_buffer((4,), "float32")
    for i, k in T.grid(4, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            S[vi] = S[vi] + A[vi, vk]
    for i in range(4):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = S[vi]
'''
    with pytest.raises(UninitializedReadError, match="buffer S: .* block S"):
        run(from_source(src), [np.ones((4, 8), "float32"), np.zeros(4, "float32")],
            vectorize=vectorize)


def test_padding_reads_only_in_the_taken_branch_are_checked():
    src = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    P = T.alloc_buffer((8,), "float32")
    for i in range(6):
        with T.block("P"):
            vi = T.axis.remap("S", [i])
            P[vi] = A[vi]
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.if_then_else(vi < 6, P[vi], T.float32(-1))
'''
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    run(from_source(src), [a, b])
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 4, 5, -1, -1])


# Stepping every loop of the 128x128(x16) matmuls would take minutes: those run as grids only.
_SMALL = [name for name in sorted(CORPUS) if name not in ("mm_relu", "bmm_relu")]


@pytest.mark.parametrize("name, vectorize", [(name, True) for name in sorted(CORPUS)]
                         + [(name, False) for name in _SMALL])
def test_corpus_programs_never_read_unwritten_elements(name, vectorize):
    case = CORPUS[name]
    inputs = case.inputs(np.random.default_rng(0))
    outputs = [np.full(shape, np.nan if "float" in dtype else 0, dtype) for shape, dtype in case.outputs]
    run(case.func, [*inputs, *outputs], vectorize=vectorize)
    for got, want in zip(outputs, case.reference(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
