"""The llvm backend on hand-written lowered functions: every result is compared with numpy and
with the reference interpreter."""
import math
import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import mlc_lab

from mlc_lab.codegen import CodegenError, render
from mlc_lab.runtime import interpreter
from mlc_lab.runtime import llvm_runtime
from mlc_lab.runtime.llvm_runtime import VectorizeWarning, build_llvm
from mlc_lab.script import tir as T

RNG = np.random.default_rng(0)


def compile_one(func, **options):
    (compiled,) = build_llvm({"main": func}, {"kind": "llvm", **options}).values()
    return compiled


def run_both(func, arrays, **options):
    """Run ``func`` compiled and in the interpreter on copies of ``arrays``; return both results
    (the compiled ones first) after checking they agree."""
    compiled_arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    interpreted = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    compile_one(func, **options)(*compiled_arrays)
    interpreter.run(func, interpreted)
    for got, want in zip(compiled_arrays, interpreted):
        if isinstance(got, np.ndarray):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return compiled_arrays


def rand(n, dtype="float32"):
    return RNG.standard_normal(n).astype(dtype)


# -- basics ----------------------------------------------------------------------------------------
@T.prim_func
def vector_add(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32"),
               C: T.Buffer((1000,), "float32")):
    T.func_attr({"global_symbol": "vector_add", "tir.noalias": True})
    for i in range(1000):
        C[i] = A[i] + B[i]


def test_vector_add():
    a, b, c = rand(1000), rand(1000), np.zeros(1000, "float32")
    _, _, c = run_both(vector_add, [a, b, c])
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_render_is_llvm_ir_with_noalias_and_status():
    text = render(vector_add)
    assert 'define i32 @"vector_add"(ptr noalias %"A"' in text
    assert "fadd fast" not in text
    assert "fadd fast" in render(vector_add, target="llvm -fast-math")


@T.prim_func
def symbolic_scale(a: T.handle, b: T.handle, s: T.float32):
    n = T.int64()
    A = T.match_buffer(a, (n * 4,), "float32")
    B = T.match_buffer(b, (n * 4,), "float32")
    for i in range(n * 4):
        B[i] = A[i] * s


@T.prim_func
def symbolic_copy(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        B[i] = A[i] + T.float32(1)


def test_symbolic_shape_becomes_trailing_int64_argument():
    compiled = compile_one(symbolic_scale)
    assert [v.name for v in compiled.abi.shape_vars] == ["n"]
    assert re.search(r'define i32 @"main"\(ptr %"A", ptr %"B", float %"s", i64 %"n"\)',
                     compiled.get_source("rendered"))
    a, b = rand(36), np.zeros(36, "float32")
    compiled(a, b, 2.5)   # the interpreter cannot bind n from a size of n * 4: numpy only
    np.testing.assert_allclose(b, a * 2.5, rtol=1e-6)
    _, b = run_both(symbolic_copy, [a, np.zeros(36, "float32")])
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    with pytest.raises(ValueError, match="B should hold 36 elements but its array holds 40"):
        compiled(a, np.zeros(40, "float32"), 1.0)


def test_arguments_are_checked_and_non_contiguous_arrays_written_back():
    compiled = compile_one(vector_add)
    with pytest.raises(TypeError, match="expects dtype float32 but got float64"):
        compiled(np.zeros(1000), np.zeros(1000, "float32"), np.zeros(1000, "float32"))
    with pytest.raises(TypeError, match="takes 3 argument"):
        compiled(np.zeros(1000, "float32"))
    a, b = rand(2000)[::2], rand(1000)
    c = np.zeros(2000, "float32")[::2]
    compiled(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


@T.prim_func
def matmul(A: T.Buffer((64 * 32,), "float32"), B: T.Buffer((32 * 48,), "float32"),
           C: T.Buffer((64 * 48,), "float32")):
    T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
    for i, j in T.grid(64, 48):
        C[i * 48 + j] = T.float32(0)
        for k in range(32):
            C[i * 48 + j] = C[i * 48 + j] + A[i * 32 + k] * B[k * 48 + j]


def test_matmul_with_reduction_loop():
    a, b = rand(64 * 32), rand(32 * 48)
    _, _, c = run_both(matmul, [a, b, np.zeros(64 * 48, "float32")])
    np.testing.assert_allclose(c.reshape(64, 48), a.reshape(64, 32) @ b.reshape(32, 48),
                               rtol=1e-4, atol=1e-5)


# -- allocation ------------------------------------------------------------------------------------
@T.prim_func
def two_temporaries(A: T.Buffer((32768,), "float32"), B: T.Buffer((32768,), "float32")):
    small = T.allocate((16,), "float32", "local")
    large = T.allocate((32768,), "float32", "global")
    for i in range(32768):
        large[i] = A[i] * T.float32(2)
    for o in range(2048):
        for k in range(16):
            small[k] = large[o * 16 + k] + T.float32(1)
        for k in range(16):
            B[o * 16 + k] = small[15 - k]


def test_allocate_small_on_stack_large_on_heap():
    text = render(two_temporaries)
    entry = text.split("start:")[0]
    assert 'alloca [16 x float], align 64' in entry       # hoisted to the entry block
    assert re.search(r'call ptr @"malloc"\(i64 %', text) and 'call void @"free"' in text
    a = rand(32768)
    _, b = run_both(two_temporaries, [a, np.zeros(32768, "float32")])
    np.testing.assert_allclose(b, (a * 2 + 1).reshape(-1, 16)[:, ::-1].reshape(-1), rtol=1e-6)


# -- control flow ----------------------------------------------------------------------------------
@T.prim_func
def control(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32"),
            C: T.Buffer((100,), "int32")):
    for i in range(100):
        x: T.float32 = A[i] * T.float32(3)
        if x > T.float32(0):
            B[i] = x
        else:
            B[i] = T.Select(i % 2 == 0, T.float32(-1), x * x)
        C[i] = T.if_then_else(i < 50, i * 2, 0 - i)


def test_if_select_let():
    a = rand(100)
    _, b, c = run_both(control, [a, np.zeros(100, "float32"), np.zeros(100, "int32")])
    x = a * 3
    idx = np.arange(100)
    np.testing.assert_allclose(b, np.where(x > 0, x, np.where(idx % 2 == 0, -1, x * x)), rtol=1e-6)
    np.testing.assert_array_equal(c, np.where(idx < 50, idx * 2, -idx))


@T.prim_func
def padded_copy(A: T.Buffer((64,), "float32"), B: T.Buffer((66,), "float32")):
    for i in range(66):
        B[i] = T.if_then_else(1 <= i and i < 65, A[i - 1], T.float32(0))


def test_if_then_else_with_loads_branches_so_the_guard_protects_the_load():
    assert "phi" in render(padded_copy)
    a = rand(64)
    _, b = run_both(padded_copy, [a, np.zeros(66, "float32")], **{"bounds-check": True})
    np.testing.assert_array_equal(b, np.pad(a, 1))


# -- integer semantics and casts -------------------------------------------------------------------
@T.prim_func
def int_division(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32"), D: T.Buffer((64,), "int32"),
                 M: T.Buffer((64,), "int32"), FD: T.Buffer((64,), "int32"), FM: T.Buffer((64,), "int32"),
                 K: T.Buffer((64,), "int32")):
    for i in range(64):
        D[i] = T.truncdiv(A[i], B[i])
        M[i] = T.truncmod(A[i], B[i])
        FD[i] = T.floordiv(A[i], B[i])
        FM[i] = T.floormod(A[i], B[i])
        K[i] = T.floordiv(A[i], -3) * 100 + T.floormod(A[i], 4)


def test_integer_division_semantics_with_negative_operands():
    a = RNG.integers(-50, 50, 64).astype("int32")
    b = RNG.integers(1, 9, 64).astype("int32") * RNG.choice([-1, 1], 64).astype("int32")
    outs = [np.zeros(64, "int32") for _ in range(5)]
    _, _, d, m, fd, fm, k = run_both(int_division, [a, b, *outs])
    trunc = [int(x / y) if True else 0 for x, y in zip(a.tolist(), b.tolist())]
    np.testing.assert_array_equal(d, trunc)
    np.testing.assert_array_equal(m, np.fmod(a, b))
    np.testing.assert_array_equal(fd, a // b)
    np.testing.assert_array_equal(fm, a % b)
    np.testing.assert_array_equal(k, (a // -3) * 100 + a % 4)


def test_integer_division_by_zero_gives_zero_instead_of_a_crash():
    a = np.array([7, -7, np.iinfo("int32").min] + [1] * 61, "int32")
    b = np.array([0, 0, -1] + [1] * 61, "int32")
    outs = [np.zeros(64, "int32") for _ in range(5)]
    compile_one(int_division)(a, b, *outs)
    d, m, fd, fm, _ = outs
    assert d[:3].tolist() == [0, 0, np.iinfo("int32").min] and m[:3].tolist() == [0, 0, 0]
    assert fd[:2].tolist() == [0, 0] and fm[:2].tolist() == [0, 0]


@T.prim_func
def casts(F: T.Buffer((16,), "float32"), I: T.Buffer((16,), "int32"), U: T.Buffer((16,), "uint8"),
          OI: T.Buffer((16,), "int32"), OF: T.Buffer((16,), "float64"), O8: T.Buffer((16,), "int8"),
          OU: T.Buffer((16,), "int32"), OB: T.Buffer((16,), "bool"), O64: T.Buffer((16,), "int64")):
    for i in range(16):
        OI[i] = T.Cast("int32", F[i])
        OF[i] = T.Cast("float64", I[i]) + T.Cast("float64", F[i])
        O8[i] = T.Cast("int8", I[i])
        OU[i] = T.Cast("int32", U[i])
        OB[i] = T.Cast("bool", I[i])
        O64[i] = T.Cast("int64", T.Cast("int8", I[i])) * T.int64(1099511627776)


def test_casts():
    f = np.linspace(-3.7, 3.7, 16).astype("float32")
    i = np.array([0, 1, -1, 127, 128, 255, 256, -129, 300, -300, 7, 0, 5, -5, 1000, -1000], "int32")
    u = np.arange(240, 256).astype("uint8")
    outs = [np.zeros(16, t) for t in ("int32", "float64", "int8", "int32", "bool", "int64")]
    _, _, _, oi, of, o8, ou, ob, o64 = run_both(casts, [f, i, u, *outs])
    np.testing.assert_array_equal(oi, f.astype("int32"))
    np.testing.assert_allclose(of, i + f.astype("float64"))
    np.testing.assert_array_equal(o8, i.astype("int8"))
    np.testing.assert_array_equal(ou, u.astype("int32"))
    np.testing.assert_array_equal(ob, i != 0)
    np.testing.assert_array_equal(o64, i.astype("int8").astype("int64") * (1 << 40))


# -- intrinsics ------------------------------------------------------------------------------------
_ERF = np.vectorize(math.erf, otypes=["float64"])
UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "fabs": np.fabs, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "sin": np.sin, "cos": np.cos, "erf": _ERF,
}


def _unary_func(name, lanes):
    intrinsic = getattr(T, name)

    @T.prim_func
    def scalar(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            B[i] = intrinsic(A[i])

    @T.prim_func
    def vector(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(8):
            B[T.Ramp(i * 8, 1, 8)] = intrinsic(A[T.Ramp(i * 8, 1, 8)])
    return scalar if lanes == 1 else vector


@pytest.mark.parametrize("lanes", [1, 8])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_intrinsic_matches_numpy(name, lanes):
    positive = name in ("log", "sqrt", "rsqrt")
    a = (RNG.uniform(0.1, 4, 64) if positive else RNG.uniform(-4, 4, 64)).astype("float32")
    a[:4] = [0.5, 1.5, -2.5, 2.5] if not positive else a[:4]   # round: half to even
    _, b = run_both(_unary_func(name, lanes), [a, np.zeros(64, "float32")])
    np.testing.assert_allclose(b, UNARY[name](a.astype("float64")), rtol=1e-5, atol=1e-6)


@T.prim_func
def power(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    for i in range(64):
        C[i] = T.pow(A[i], B[i])


def test_pow():
    a, b = RNG.uniform(0.1, 3, 64).astype("float32"), RNG.uniform(-2, 2, 64).astype("float32")
    _, _, c = run_both(power, [a, b, np.zeros(64, "float32")])
    np.testing.assert_allclose(c, np.power(a.astype("float64"), b), rtol=1e-5)


# -- vectors -----------------------------------------------------------------------------------------
@T.prim_func
def vector_code(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32"),
                G: T.Buffer((256,), "float32"), S: T.Buffer((256,), "float32"),
                I: T.Buffer((8,), "int32"), s: T.float32):
    for i in range(32):
        B[T.Ramp(i * 8, 1, 8)] = A[T.Ramp(i * 8, 1, 8)] * T.Broadcast(s, 8) + T.Broadcast(T.float32(1), 8)
        G[T.Ramp(i * 8, 1, 8)] = A[T.Ramp(i, 32, 8)]                     # strided gather
        S[T.Ramp(i, 32, 8)] = A[T.Ramp(i * 8, 1, 8)]                     # strided scatter
    for i in range(8):
        B[T.Ramp(i * 8, 1, 8)] = B[T.Ramp(i * 8, 1, 8)] + A[I[T.Ramp(0, 1, 8)] + T.Broadcast(i, 8)]


def test_ramp_broadcast_gather_scatter():
    text = render(vector_code)
    assert "load <8 x float>" in text and "shufflevector" in text
    a = rand(256)
    idx = RNG.integers(0, 200, 8).astype("int32")
    outs = [np.zeros(256, "float32") for _ in range(3)]
    _, b, g, s, _, _ = run_both(vector_code, [a, *outs, idx, 0.5])
    expected_b = a * 0.5 + 1
    for i in range(8):
        expected_b[i * 8:i * 8 + 8] += a[idx + i]
    np.testing.assert_allclose(b, expected_b, rtol=1e-6)
    np.testing.assert_array_equal(g, a.reshape(8, 32).T.reshape(-1))
    np.testing.assert_array_equal(s, a.reshape(32, 8).T.reshape(-1))


@T.prim_func
def vectorized_saxpy(X: T.Buffer((4096,), "float32"), Y: T.Buffer((4096,), "float32"), a: T.float32):
    T.func_attr({"tir.noalias": True})
    for o in range(512):
        for v in T.vectorized(8):
            Y[o * 8 + v] = a * X[o * 8 + v] + Y[o * 8 + v]


def test_vectorized_loop_uses_vector_registers():
    compiled = compile_one(vectorized_saxpy)
    assert "llvm.loop.vectorize.enable" in compiled.get_source("rendered")
    assert re.search(r"%[yz]mm\d+", compiled.get_source("asm"))
    x, y = rand(4096), rand(4096)
    _, y2, _ = run_both(vectorized_saxpy, [x, y, 3.0])
    # A fused multiply-add rounds once where numpy rounds twice: an ulp apart near cancellation.
    np.testing.assert_allclose(y2, 3 * x + y, rtol=1e-6, atol=1e-6)


@T.prim_func
def unrolled(A: T.Buffer((64,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        B[i] = T.float32(0)
        for k in T.unroll(4):
            B[i] = B[i] + A[i * 4 + k] * T.float32(k + 1)


def test_unrolled_loop():
    assert "llvm.loop.unroll.full" in render(unrolled)
    a = rand(64)
    _, b = run_both(unrolled, [a, np.zeros(16, "float32")])
    np.testing.assert_allclose(b, a.reshape(16, 4) @ np.arange(1, 5, dtype="float32"), rtol=1e-5)


# -- parallel loops ----------------------------------------------------------------------------------
@T.prim_func
def parallel_rows(A: T.Buffer((100 * 64,), "float32"), B: T.Buffer((100,), "float32"), n: T.int32):
    T.func_attr({"tir.noalias": True})
    for i in T.parallel(100):
        acc = T.allocate((1,), "float32", "local")
        acc[0] = T.float32(0)
        for k in range(n):
            acc[0] = acc[0] + A[i * 64 + k]
        B[i] = acc[0]


def test_parallel_loop_results():
    text = render(parallel_rows)
    assert 'call i32 @"mlc_parallel_for"' in text and "define internal i32" in text
    a = rand(6400)
    _, b, _ = run_both(parallel_rows, [a, np.zeros(100, "float32"), 64], **{"num-cores": 2})
    np.testing.assert_allclose(b, a.reshape(100, 64).sum(1), rtol=1e-4, atol=1e-5)


def test_parallel_chunks_run_on_two_threads_at_once():
    # The first chunk to start waits until a chunk starts on another thread: passes only if
    # two threads run chunks of one loop at the same time.
    other_started, seen, lock = threading.Event(), [], threading.Lock()

    def hook(begin, end):
        me = threading.current_thread().name
        with lock:
            seen.append((begin, end, me))
            first = len(seen) == 1
            if any(name != seen[0][2] for _, _, name in seen):
                other_started.set()
        if first:
            assert other_started.wait(20), "no second thread ran a chunk"
    compiled = compile_one(parallel_rows, **{"num-cores": 2})
    llvm_runtime.set_chunk_hook(hook)
    try:
        a = rand(6400)
        b = np.zeros(100, "float32")
        compiled(a, b, 64)
    finally:
        llvm_runtime.set_chunk_hook(None)
    chunks = sorted((lo, hi) for lo, hi, _ in seen)
    assert chunks[0][0] == 0 and chunks[-1][1] == 100
    assert all(hi == lo for (_, hi), (lo, _) in zip(chunks, chunks[1:]))   # a partition of 0..100
    assert len({name for _, _, name in seen}) == 2
    np.testing.assert_allclose(b, a.reshape(100, 64).sum(1), rtol=1e-4, atol=1e-5)


def test_parallel_loops_run_on_the_native_pool():
    # POSIX threads are everywhere the course runs; the Python thread pool is the fallback.
    assert llvm_runtime.parallel_backend() == "native"


def test_a_failing_chunk_fails_the_call_and_names_the_cause():
    def hook(begin, end):
        if begin == 50:
            raise ValueError(f"chunk at {begin} refused")
    compiled = compile_one(parallel_rows, **{"num-cores": 2})
    llvm_runtime.set_chunk_hook(hook)
    try:
        with pytest.raises(RuntimeError, match="a parallel loop failed: ValueError..chunk at 50 refused"):
            compiled(rand(6400), np.zeros(100, "float32"), 64)
    finally:
        llvm_runtime.set_chunk_hook(None)


def test_parallel_loops_from_several_python_threads_at_once():
    # One caller has the pool at a time; the others run their loops on their own thread.
    compiled = compile_one(parallel_rows, **{"num-cores": 2})
    a = rand(6400)
    results = [np.zeros(100, "float32") for _ in range(4)]

    def work(out):
        for _ in range(200):
            compiled(a, out, 64)
    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in results:
        np.testing.assert_allclose(out, a.reshape(100, 64).sum(1), rtol=1e-4, atol=1e-5)


def test_a_forked_child_runs_parallel_loops_without_the_parents_workers():
    # After fork only the forking thread exists: the child starts workers of its own and never
    # waits for the parent's (nor for a lock one of them held).
    script = textwrap.dedent("""
        import os, numpy as np, tests.test_codegen_llvm as t
        f = t.compile_one(t.parallel_rows, **{"num-cores": 2})
        a = np.arange(6400, dtype="float32") / 6400
        b = np.zeros(100, "float32")
        f(a, b, 64)
        pid = os.fork()
        if pid == 0:
            b[:] = 0
            for _ in range(100):
                f(a, b, 64)
            os._exit(0 if np.allclose(b, a.reshape(100, 64).sum(1), rtol=1e-5) else 3)
        _, status = os.waitpid(pid, 0)
        print("ok" if os.waitstatus_to_exitcode(status) == 0 else f"child failed {status}")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_thread_pool_fallback_gives_the_same_results():
    script = textwrap.dedent("""
        import numpy as np, tests.test_codegen_llvm as t
        from mlc_lab.runtime import llvm_runtime
        assert llvm_runtime.parallel_backend() == "python"
        a = np.arange(6400, dtype="float32") / 6400
        b = np.zeros(100, "float32")
        t.compile_one(t.parallel_rows, **{"num-cores": 2})(a, b, 64)
        np.testing.assert_allclose(b, a.reshape(100, 64).sum(1), rtol=1e-5)
        print("ok")
    """)
    env = {**os.environ, "MLC_LAB_PARALLEL": "python"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@T.prim_func
def nested_parallel(A: T.Buffer((64,), "float32")):
    for i in T.parallel(8):
        for j in T.parallel(8):
            A[i * 8 + j] = T.float32(1)


def test_nested_parallel_loops_are_an_error_naming_both():
    with pytest.raises(CodegenError, match="parallel loop j is nested inside parallel loop i"):
        build_llvm({"f": nested_parallel})


@T.prim_func
def thread_bound(A: T.Buffer((64,), "float32")):
    for i in T.thread_binding(64, thread="threadIdx.x"):
        A[i] = T.float32(1)


def test_thread_binding_is_an_error():
    with pytest.raises(CodegenError, match="loop i is bound to threadIdx.x; the llvm target runs on "
                                           "the CPU: use target 'cuda' or 'cuda-sim'"):
        render(thread_bound)


# -- bounds checks, options, debugging ---------------------------------------------------------------
@T.prim_func
def off_by_two(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(130):
        B[i] = A[i % 128]


def test_bounds_check_raises_index_error_naming_buffer_and_index():
    compiled = compile_one(off_by_two, **{"bounds-check": True})
    with pytest.raises(IndexError, match=r"buffer B: index 128 is out of bounds for shape \(128,\)"):
        compiled(rand(128), np.zeros(128, "float32"))


def test_bounds_check_inside_a_parallel_loop():
    compiled = compile_one(parallel_rows, **{"bounds-check": True, "num-cores": 2})
    with pytest.raises(IndexError, match=r"buffer A: index 6400 is out of bounds for shape \(6400,\)"):
        compiled(rand(6400), np.zeros(100, "float32"), 65)


def test_unknown_option_and_debug_dump(monkeypatch, capsys):
    with pytest.raises(ValueError, match="no option -fast .*; known options: -num-cores"):
        build_llvm({"f": vector_add}, "llvm -fast")
    monkeypatch.setenv("MLC_LAB_DEBUG", "1")
    render(vector_add)
    assert 'define i32 @"vector_add"' in capsys.readouterr().err


def test_blocks_must_be_lowered_first():
    @T.prim_func
    def with_block(A: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                A[vi] = T.float32(0)
    with pytest.raises(CodegenError, match="still contains block 'root'; the llvm backend takes lowered"):
        render(with_block)


@T.prim_func
def parallel_captures(A: T.Buffer((4 * 30,), "float32"), B: T.Buffer((4 * 30,), "float32"),
                      scale: T.float32):
    T.func_attr({"tir.noalias": True})
    row = T.allocate((30,), "float32", "local")
    for o in range(4):
        base: T.int32 = o * 30
        for j in range(30):
            row[j] = A[base + j] * scale
        for i in T.parallel(10, 30):   # a start other than 0; uses o, base, row, scale, A, B
            B[base + i] = row[i] + T.Cast("float32", o)


def test_parallel_body_captures_outer_loop_let_and_allocation():
    a = rand(120)
    b = np.zeros(120, "float32")
    _, b, _ = run_both(parallel_captures, [a, b, 2.0], **{"num-cores": 2})
    expected = (a * 2).reshape(4, 30) + np.arange(4, dtype="float32")[:, None]
    expected[:, :10] = 0
    np.testing.assert_allclose(b, expected.reshape(-1), rtol=1e-6)


def test_build_llvm_through_the_driver_checks_arguments_and_shows_source():
    from corpus import loop_kinds
    lib = mlc_lab.build(loop_kinds, target="llvm")
    a = np.random.default_rng(1).standard_normal((64, 64)).astype("float32")
    b = mlc_lab.nd.empty((64, 64), "float32")
    lib(mlc_lab.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 0.5 + np.arange(64, dtype="float32"), rtol=1e-6)
    assert re.search(r"<(8|16|32|64) x float>", lib.get_source("ll"))
    assert any(reg in lib.get_source("asm") for reg in ("ymm", "zmm"))
    with pytest.raises(ValueError, match="parameter B: dimension 1 should be 64 but is 32"):
        lib(mlc_lab.nd.array(a), mlc_lab.nd.empty((64, 32), "float32"))
    with pytest.raises(TypeError, match="takes 2 argument"):
        lib(mlc_lab.nd.array(a))


@T.prim_func
def unrolled_long(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32")):
    for k in T.unroll(1000):
        B[k] = A[k] * T.float32(2)


def test_long_unrolled_loop_is_unrolled_by_a_bounded_count():
    source = render(unrolled_long)
    assert "llvm.loop.unroll.count" in source and "llvm.loop.unroll.full" not in source
    a = rand(1000)
    _, b = run_both(unrolled_long, [a, np.zeros(1000, "float32")])
    np.testing.assert_allclose(b, 2 * a)


@T.prim_func
def unrolled_outer(A: T.Buffer((40000,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.unroll(8):
        for k in range(5000):
            B[i] = B[i] + A[i * 5000 + k]


def test_an_unrolled_loop_whose_body_runs_too_many_statements_is_not_unrolled():
    # Copies of the outer loop's body would each carry 5000 statement runs; LLVM, unrolling the
    # inner loops of every copy too, would take minutes to compile, so the loop stays rolled.
    source = render(unrolled_outer)
    assert "llvm.loop.unroll.disable" in source and "llvm.loop.unroll.count" not in source
    a = rand(40000)
    _, b = run_both(unrolled_outer, [a, np.zeros(8, "float32")])
    np.testing.assert_allclose(b, a.reshape(8, 5000).sum(1), rtol=1e-4, atol=1e-3)


@T.prim_func
def _row_max_vectorized_rows(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32")):
    for i in T.vectorized(64):
        for k in range(64):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(-1e30)
                B[vi] = T.max(B[vi], T.exp(A[vi, vk]) / (A[vk, vi] + T.float32(2)))


def test_a_loop_llvm_cannot_vectorize_is_one_warning_not_stderr_noise(capfd):
    # The outer loop holds a 64-step reduction loop (too long to unroll away), and LLVM's loop
    # vectorizer takes innermost loops only.
    with pytest.warns(VectorizeWarning, match="1 loop.s. marked vectorized stayed scalar"):
        lib = mlc_lab.build(_row_max_vectorized_rows, target="llvm")
    assert "loop not vectorized" not in capfd.readouterr().err
    a = np.random.default_rng(0).random((64, 64), dtype="float32")
    b = np.zeros(64, "float32")
    lib["_row_max_vectorized_rows"](a, b)
    np.testing.assert_allclose(b, (np.exp(a) / (a.T + 2)).max(1), rtol=1e-6)


@T.prim_func
def exp_of_eight(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for k in range(8):
        B[k] = T.exp(A[k])


def test_bounds_checked_builds_unroll_only_the_loops_marked_unrolled():
    # LLVM unrolls a short loop on its own; with a check on every access that heuristic made some
    # nests take a minute to compile, so bounds-checked builds leave it off (the loop keeps its phi).
    plain = mlc_lab.build(exp_of_eight, target="llvm")["exp_of_eight"]
    checked = mlc_lab.build(exp_of_eight, target="llvm -bounds-check")["exp_of_eight"]
    assert " phi " not in plain.jit.optimized_ir and " phi " in checked.jit.optimized_ir
    a = rand(8)
    for fn in (plain, checked):
        b = np.zeros(8, "float32")
        fn(a, b)
        np.testing.assert_allclose(b, np.exp(a), rtol=1e-6)


# -- vectors of odd widths and short strides ---------------------------------------------------
@T.prim_func
def odd_width_rows(A: T.Buffer((8 * 28,), "float32"), B: T.Buffer((8 * 26,), "float32")):
    T.func_attr({"tir.noalias": True})
    for r in range(8):
        acc = T.allocate((26,), "float32", "local")
        acc[T.Ramp(0, 1, 26)] = T.Broadcast(T.float32(0), 26)
        for k in range(3):
            acc[T.Ramp(0, 1, 26)] = acc[T.Ramp(0, 1, 26)] + A[T.Ramp(r * 28 + k, 1, 26)]
        B[T.Ramp(r * 26, 1, 26)] = acc[T.Ramp(0, 1, 26)]


def test_odd_width_vectors_in_memory_are_masked_and_on_the_stack_plain():
    text = compile_one(odd_width_rows).get_source("rendered")
    assert '@"llvm.masked.load.v32f32.p0"' in text and '@"llvm.masked.store.v32f32.p0"' in text
    assert "load <26 x float>" in text   # the local accumulator: plain, kept in registers
    a = rand(8 * 28)
    _, b = run_both(odd_width_rows, [a, np.zeros(8 * 26, "float32")])
    rows = a.reshape(8, 28)
    np.testing.assert_allclose(b.reshape(8, 26), rows[:, :26] + rows[:, 1:27] + rows[:, 2:28],
                               rtol=1e-5, atol=1e-6)


@T.prim_func
def every_other(A: T.Buffer((64,), "float32"), B: T.Buffer((16,), "float32")):
    T.func_attr({"tir.noalias": True})
    for i in range(2):
        B[T.Ramp(i * 8, 1, 8)] = T.max(A[T.Ramp(i * 32, 2, 8)], A[T.Ramp(i * 32 + 1, 2, 8)])


def test_a_stride_two_load_is_one_run_and_a_shuffle():
    text = compile_one(every_other).get_source("rendered")
    assert "load <15 x float>" not in text and '@"llvm.masked.load.v16f32.p0"' in text
    assert "<8 x i32> <i32 0, i32 2, i32 4, i32 6, i32 8, i32 10, i32 12, i32 14>" in text
    a = rand(64)
    _, b = run_both(every_other, [a, np.zeros(16, "float32")])
    halves = a.reshape(2, 32)
    np.testing.assert_array_equal(b, np.maximum(halves[:, 0:16:2], halves[:, 1:16:2]).ravel())


@T.prim_func
def strided_past_the_end(A: T.Buffer((14,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(1):
        B[T.Ramp(0, 1, 8)] = A[T.Ramp(i, 2, 8)]


def test_a_strided_run_is_bounds_checked_at_its_last_element():
    with pytest.raises(IndexError, match="buffer A: index 14 is out of bounds"):
        compile_one(strided_past_the_end, **{"bounds-check": True})(np.zeros(14, "float32"),
                                                                    np.zeros(8, "float32"))


def test_a_loop_never_waits_for_the_pool_when_another_caller_holds_it():
    # Caller A's loop is stuck in a chunk; caller B, meanwhile, runs its whole loop on its own
    # thread and returns: the pool is never waited for.
    compiled = compile_one(parallel_rows, **{"num-cores": 2})
    a_started, release = threading.Event(), threading.Event()
    b_threads = set()

    def hook(begin, end):
        me = threading.current_thread().name
        if me == "caller-a" or me.startswith("mlc_lab-worker"):
            a_started.set()
            assert release.wait(20)
        else:
            b_threads.add(me)
    data = rand(6400)
    out_a, out_b = np.zeros(100, "float32"), np.zeros(100, "float32")
    llvm_runtime.set_chunk_hook(hook)
    try:
        caller_a = threading.Thread(target=compiled, args=(data, out_a, 64), name="caller-a")
        caller_a.start()
        assert a_started.wait(20)
        compiled(data, out_b, 64)          # returns while A is still blocked
        assert not release.is_set() and caller_a.is_alive()
        release.set()
        caller_a.join(20)
    finally:
        release.set()
        llvm_runtime.set_chunk_hook(None)
    assert b_threads == {threading.current_thread().name}
    for out in (out_a, out_b):
        np.testing.assert_allclose(out, data.reshape(100, 64).sum(1), rtol=1e-4, atol=1e-5)


def test_code_built_without_num_cores_runs_on_omp_num_threads():
    # The grader's sandbox sets OMP_NUM_THREADS=1: a student's parallel loop then runs on the
    # calling thread alone, as OpenMP code and numpy's BLAS do there.
    script = textwrap.dedent("""
        import threading, numpy as np, tests.test_codegen_llvm as t
        from mlc_lab.runtime import llvm_runtime, parallel
        assert parallel.default_threads() == 1
        names = set()
        llvm_runtime.set_chunk_hook(lambda lo, hi: names.add(threading.current_thread().name))
        a = np.arange(6400, dtype="float32") / 6400
        b = np.zeros(100, "float32")
        t.compile_one(t.parallel_rows)(a, b, 64)
        assert names == {threading.current_thread().name}, names
        assert threading.active_count() == 1
        np.testing.assert_allclose(b, a.reshape(100, 64).sum(1), rtol=1e-5)
        print("ok")
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("MLC_LAB_NUM_THREADS", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


@T.prim_func
def _exp_vectors(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
    for i0 in range(64):
        for i1 in T.vectorized(16):
            with T.block("B"):
                vi = T.axis.spatial(1024, i0 * 16 + i1)
                B[vi] = T.exp(A[vi])


def test_vector_exp_is_computed_in_vectors_within_one_ulp():
    lib = mlc_lab.build(_exp_vectors, "llvm")
    # no scalar expf per lane: LLVM has no vector exp to call on x86
    assert "expf" not in lib.get_source("asm") and "llvm.exp" not in lib.get_source("ll")
    rng = np.random.default_rng(3)
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 88.7, 88.72, 88.8, -87.0, -88.5, -1e9, 1e-30]
    a = np.concatenate([rng.uniform(-87, 88, 1000), specials, np.zeros(12)]).astype("float32")
    b = np.empty_like(a)
    lib["_exp_vectors"](a, b)
    with np.errstate(over="ignore"):
        want = np.exp(a.astype("float64")).astype("float32")
    normal = np.isfinite(want) & (want >= np.finfo("float32").tiny)
    ulps = np.abs(b[normal].astype("float64") - want[normal]) / np.spacing(want[normal])
    assert ulps.max() <= 1.0
    assert b[1000] == np.inf and b[1001] == 0 and np.isnan(b[1002]) and b[1003] == b[1004] == 1
    assert b[1007] == np.inf and b[1009] == 0 and b[1010] == 0   # overflow; below float32's range


@T.prim_func
def _tanh_vectors(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
    for i0 in range(64):
        for i1 in T.vectorized(16):
            with T.block("B"):
                vi = T.axis.spatial(1024, i0 * 16 + i1)
                B[vi] = T.tanh(A[vi])


def test_vector_tanh_is_computed_in_vectors_within_two_ulp():
    lib = mlc_lab.build(_tanh_vectors, "llvm")
    assert "tanhf" not in lib.get_source("asm")
    rng = np.random.default_rng(4)
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 0.62, 0.63, -0.63, 44.5, -50.0, 1e-20, -1e-7]
    a = np.concatenate([rng.uniform(-9, 9, 700), rng.uniform(-0.7, 0.7, 300), specials,
                        np.zeros(12)]).astype("float32")
    b = np.empty_like(a)
    lib["_tanh_vectors"](a, b)
    want = np.tanh(a.astype("float64"))
    finite = np.isfinite(want) & (want != 0)
    ulps = np.abs(b[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype("float32"))
    assert ulps.max() <= 2.0
    assert list(b[1000:1002]) == [1.0, -1.0] and np.isnan(b[1002]) and b[1008] == 1.0 and b[1009] == -1.0


def test_loops_of_different_chunk_counts_back_to_back_never_hang():
    # A worker that read the last job's ticket after its chunks ran out, then the next job's
    # (larger) chunk count, used to claim a chunk of the new job under the old generation: the
    # chunk ran twice, the finished count passed the number of chunks, and the caller waited
    # forever. Sixteen threads on few cores make such a late worker common within seconds.
    script = textwrap.dedent("""
        import time, numpy as np, mlc_lab
        from mlc_lab.script import from_source
        rows = from_source('''
        @T.prim_func
        def rows(a: T.handle, b: T.handle):
            T.func_attr({"global_symbol": "rows", "tir.noalias": True})
            n = T.int64()
            A = T.match_buffer(a, (n, 4), "float32")
            B = T.match_buffer(b, (n,), "float32")
            for i in T.parallel(n):
                for k in range(4):
                    with T.block("B"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        with T.init():
                            B[vi] = T.float32(0)
                        B[vi] = B[vi] + A[vi, vk]
        ''')
        f = mlc_lab.build(rows, target="llvm -num-cores=16")
        args = {n: (mlc_lab.nd.array(np.ones((n, 4), "float32")), mlc_lab.nd.empty((n,), "float32"))
                for n in (2, 3, 5, 8, 16)}
        deadline = time.time() + 3
        while time.time() < deadline:
            for n in (2, 16, 3, 8, 5, 16, 2, 8):
                f(*args[n])
        assert all((args[n][1].numpy() == 4).all() for n in args)
        print("ok")
    """)
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except subprocess.TimeoutExpired:
        pytest.fail("a parallel loop waited forever for a chunk that was counted twice")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@T.prim_func
def _erf_vectors(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n * 16,), "float32")
    B = T.match_buffer(b, (n * 16,), "float32")
    for i0 in range(n):
        for i1 in T.vectorized(16):
            with T.block("B"):
                vi = T.axis.spatial(n * 16, i0 * 16 + i1)
                B[vi] = T.erf(A[vi])


def test_vector_erf_is_computed_in_vectors_within_three_ulp():
    lib = mlc_lab.build(_erf_vectors, "llvm")
    assert "erff" not in lib.get_source("asm")
    specials = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 0.99999994, 3.925, -3.93, 1e-30, -2e-8,
                0.4749, 2.5, 9.0, -40.0]
    a = np.concatenate([np.linspace(-4.5, 4.5, 90_000), np.geomspace(1e-6, 1, 4_000), specials]
                       ).astype("float32")
    b = np.empty_like(a)
    lib["_erf_vectors"](a, b)
    want = np.vectorize(math.erf)(a.astype("float64"))
    finite = np.isfinite(a) & (want != 0)
    ulps = np.abs(b[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype("float32"))
    assert ulps.max() <= 3.0, (a[finite][ulps.argmax()], ulps.max())
    tail = b[-len(specials):]
    assert list(tail[:2]) == [1.0, -1.0] and np.isnan(tail[2]) and tail[3] == 0 and tail[4] == 0
    assert list(tail[-2:]) == [1.0, -1.0] and np.signbit(tail[4])
