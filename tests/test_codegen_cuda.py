"""CUDA and OpenCL source for the course's GPU schedules: the source has the structure the
schedule asks for, NVRTC compiles it to PTX, and kernels without barriers, compiled for the host
with a few lines of shims, compute what numpy computes (the same program run two ways)."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import mlc_lab
from mlc_lab.arith import linear_form
from mlc_lab.codegen.c_source import CSourceError
from mlc_lab.codegen.cuda import render_cuda, render_cuda_kernel
from mlc_lab.codegen.opencl import render_opencl
from mlc_lab.runtime import nvrtc
from mlc_lab.script import tir as T
from mlc_lab.target import Target
from mlc_lab.testing import gpu_schedules as gs
from mlc_lab.tir import expr as E
from mlc_lab.tir import stmt as S
from mlc_lab.tir.buffer import Buffer
from mlc_lab.tir.stmt_functor import post_order_visit
from mlc_lab.tir.transform.inject_sync import is_sync
from mlc_lab.tir.transform.split_host_device import Kernel, split_host_device

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not found: pip install "
                                 "nvidia-cuda-nvrtc-cu12 (the test extra installs it)")
needs_cxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler (g++)")

SCHEDULES = {
    "vector_add": lambda n: gs.vector_add(n),
    "window_sum_shared": lambda n: gs.window_sum(n, shared=True),
    "window_sum_global": lambda n: gs.window_sum(n, shared=False),
    "matmul_blocked": lambda n: gs.matmul_blocked(n),
    "matmul_shared_vector4": lambda n: gs.matmul_shared(n, vector=4),
    "matmul_shared_scalar": lambda n: gs.matmul_shared(n, vector=1),
}
CASES = [(name, n) for name in SCHEDULES for n in (64, 1024)]


def program_of(func_or_sch, target="nvidia/a100"):
    mod = mlc_lab.lower(func_or_sch.mod if hasattr(func_or_sch, "mod") else func_or_sch)
    (func,) = mod.functions.values()
    return split_host_device(func, Target(target))


def vectorized_add(n=1024, lanes=4, threads=32, func=None):
    """Each thread handles ``lanes`` consecutive elements in one vectorized loop."""
    func = func or gs.vector_add_func(n)
    sch = mlc_lab.tir.Schedule(mlc_lab.IRModule({"main": func.with_attr("global_symbol", "main")}))
    (i,) = sch.get_loops(sch.get_block("C"))
    b, t, v = sch.split(i, [None, threads, lanes])
    sch.bind(b, "blockIdx.x")
    sch.bind(t, "threadIdx.x")
    sch.vectorize(v)
    return sch


def count_syncs(stmt) -> int:
    found = []
    post_order_visit(stmt, lambda node: found.append(node) if is_sync(node) else None)
    return len(found)


def aligned_to(ramp, lanes: int) -> bool:
    lin = linear_form(ramp.base)
    return ramp.stride.value == 1 and all(c % lanes == 0 for _, c in lin.terms.values()) \
        and lin.const % lanes == 0


def vector_stores(stmt) -> list:
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, S.BufferStore)
                     and isinstance(n.indices[0], E.Ramp) else None)
    return found


# -- structure -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,n", CASES)
def test_schedule_source_structure(name, n):
    program = program_of(SCHEDULES[name](n))
    (kernel,) = program.kernels
    source = render_cuda(program)
    params = ", ".join(f"float* __restrict__ {p.name}" for p in kernel.params)
    assert (f'extern "C" __global__ void __launch_bounds__({kernel.threads_per_block}) '
            f"main_kernel0({params}) {{") in source
    assert f"main_kernel0: grid {kernel.grid}, block {kernel.block}, " \
           f"{kernel.shared_bytes} bytes of shared memory" in source
    shared = re.findall(r"__shared__ (?:__align__\(16\) )?float (\w+)\[(\d+)\];", source)
    assert shared == [(b.name, str(b.shape[0].value)) for b in kernel.shared]
    for buffer in kernel.local:
        assert re.search(rf"^  float {buffer.name}\[{buffer.shape[0].value}\];", source, re.M)
    assert source.count("__syncthreads();") == count_syncs(kernel.body)
    # A vector store of 4 contiguous lanes from a multiple of 4 is one float4 store.
    aligned = [s for s in vector_stores(kernel.body) if s.indices[0].lanes == 4 and
               aligned_to(s.indices[0], 4)]
    assert len(re.findall(r"^ *\*\(float4\*\)\(\w+ \+ .*\) = ", source, re.M)) == len(aligned)
    assert "threadIdx.x" in source and "blockIdx.x" in source


def body_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.startswith("  ")]


def test_window_sum_barrier_sits_between_fetch_and_use():
    lines = body_lines(render_cuda(program_of(gs.window_sum(1024))))
    sync = lines.index("__syncthreads();")
    assert any(line.startswith("A_shared[") for line in lines[:sync])
    assert lines[sync + 1].startswith("C[") and "A_shared[(int)threadIdx.x + 2]" in lines[sync + 1]


@pytest.mark.parametrize("vector", [4, 1])
def test_matmul_shared_barriers_guard_each_tile(vector):
    lines = body_lines(render_cuda(program_of(gs.matmul_shared(1024, vector=vector))))
    loop = lines.index("for (int k_0 = 0; k_0 < 128; ++k_0) {")
    first, second = [i for i, line in enumerate(lines) if line == "__syncthreads();"]
    # The first barrier (top of the k loop) keeps the next fetch from overwriting a tile others
    # still read; the second makes the fetched tiles visible before anyone computes with them.
    assert first == loop + 1
    stores = [i for i, line in enumerate(lines) if re.match(r"(\*\(float4\*\)\()?[AB]_shared", line)]
    assert stores and all(first < i < second for i in stores)
    assert any("C_local[" in line and "A_shared[" in line for line in lines[second:])


def test_aligned_vector_access_uses_float4():
    source = render_cuda(program_of(vectorized_add()))
    base = "(int)blockIdx.x * 128 + (int)threadIdx.x * 4"
    assert f"float4 A_vec = *(float4*)(A + ({base}));" in source
    assert f"*(float4*)(C + ({base})) = make_float4(A_vec.x + B_vec.x, A_vec.y + B_vec.y, " \
           "A_vec.z + B_vec.z, A_vec.w + B_vec.w);" in source


def test_misaligned_vector_load_goes_lane_by_lane():
    source = render_cuda(program_of(vectorized_add(func=gs.window_sum_func(1024))))
    assert source.count("float4 ") == 1                      # only A[base:base+4] is aligned
    assert "A[(int)blockIdx.x * 128 + (int)threadIdx.x * 4 + 5]" in source   # lane 3 of A[i + 2]
    assert "*(float4*)(C + " in source


def test_vector_of_two_uses_float2():
    assert "*(float2*)(C + " in render_cuda(program_of(vectorized_add(lanes=2)))


# -- expressions ---------------------------------------------------------------------------------
def render_expr(value, *scalars) -> str:
    """The C text of ``value``, stored by a one-thread kernel with scalar parameters."""
    out = Buffer("Out", (E.const(1),), value.dtype)
    kernel = Kernel("k", (out, *scalars), (1, 1, 1), (1, 1, 1), {}, S.BufferStore(out, value, (E.const(0),)))
    (line,) = [line for line in render_cuda_kernel(kernel).splitlines() if "Out[0] =" in line]
    return line.split("Out[0] = ", 1)[1].rstrip(";")


def test_precedence_keeps_the_tree():
    a, b, c = E.Var("a"), E.Var("b"), E.Var("c")
    x, y = E.Var("x", "float32"), E.Var("y", "float32")
    assert render_expr((a + b) * c, a, b, c) == "(a + b) * c"
    assert render_expr(a + b * c, a, b, c) == "a + b * c"
    assert render_expr(a - (b - c), a, b, c) == "a - (b - c)"
    assert render_expr((a - b) - c, a, b, c) == "a - b - c"
    assert render_expr(E.Div(a, b * c), a, b, c) == "a / (b * c)"
    assert render_expr(E.Select(a < b, x, y - x), a, b, x, y) == "a < b ? x : y - x"
    assert render_expr(E.Select(a < b, x, y) * x, a, b, x, y) == "(a < b ? x : y) * x"
    assert render_expr(E.Cast("float32", a + b) * x, a, b, x) == "(float)(a + b) * x"
    assert render_expr(E.Or(E.And(a < b, b < c), a == c), a, b, c) == "(a < b && b < c) || a == c"
    assert render_expr(E.Not(a < b), a, b) == "!(a < b)"
    assert render_expr(E.const(0.0) - x, x) == "-x"
    assert render_expr(a - E.const(-3), a) == "a - -3"
    assert render_expr(E.Cast("int64", a) * E.const(1024, "int64"), a) == "(long long)a * 1024LL"


def test_floor_division_is_exact_for_negative_values_and_plain_when_provably_not():
    a, b = E.Var("a"), E.Var("b")
    assert render_expr(E.FloorDiv(a, b), a, b) == "floordiv_int32(a, b)"
    assert render_expr(E.FloorMod(a, E.const(8)), a) == "floormod_int32(a, 8)"
    tx = E.Var("tx")
    out = Buffer("Out", (E.const(32),), "int32")
    store = S.BufferStore(out, E.FloorDiv(tx * 4 + 3, E.const(8)) + E.FloorMod(tx, E.const(8)), (tx,))
    kernel = Kernel("k", (out,), (1, 1, 1), (32, 1, 1), {"threadIdx.x": tx}, store)
    assert "((int)threadIdx.x * 4 + 3) / 8 + (int)threadIdx.x % 8;" in render_cuda_kernel(kernel)


def test_unlowered_ir_is_refused_by_name():
    out = Buffer("Out", (E.const(1),), "float32")
    block = S.Block("B", (), (), (), S.BufferStore(out, E.const(1.0), (E.const(0),)))
    kernel = Kernel("k", (out,), (1, 1, 1), (1, 1, 1), {}, block)
    with pytest.raises(CSourceError, match="no rule for Block"):
        render_cuda_kernel(kernel)


@T.prim_func
def int_ops(A: T.Buffer((256,), "int32"), B: T.Buffer((256,), "int32"),
            C: T.Buffer((256,), "int32"), D: T.Buffer((T.int64(256),), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("C"):
                vi = T.axis.spatial(256, bx * 128 + tx)
                B[vi] = A[vi] // 7 + A[vi] % 5 * 100 + T.abs(A[vi]) * 10000
                C[vi] = T.max(A[vi], -3) + T.Select(A[vi] > 0, 1000, 2000) + vi // 7 * 100000
                D[T.Cast("int64", vi)] = T.exp(T.Cast("float32", A[vi]) * T.float32(0.01))


def test_int64_and_math_render_as_cuda():
    source = render_cuda(program_of(int_ops))
    assert "D[(long long)((int)blockIdx.x * 128 + (int)threadIdx.x)] = expf(" in source
    assert "floordiv_int32(A[" in source and "floormod_int32(A[" in source
    assert "((int)blockIdx.x * 128 + (int)threadIdx.x) / 7 * 100000" in source
    assert "__device__ __forceinline__ int floordiv_int32(int a, int b) {" in source


# -- compiling with NVRTC ------------------------------------------------------------------------
@needs_nvrtc
@pytest.mark.parametrize("name,n", CASES)
def test_schedule_compiles_to_ptx(name, n):
    program = program_of(SCHEDULES[name](n))
    ptx = nvrtc.compile_ptx(render_cuda(program), arch="sm_80")
    assert ".entry main_kernel0" in ptx and ".target sm_80" in ptx
    resources = nvrtc.ptxas_resources(ptx, "sm_80")
    if resources is not None:   # ptxas is on PATH
        assert resources["main_kernel0"]["shared_bytes"] == program.kernels[0].shared_bytes


@needs_nvrtc
def test_float4_becomes_128_bit_accesses_in_ptx():
    ptx = nvrtc.compile_ptx(render_cuda(program_of(vectorized_add())))
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32", ptx) and "st.global.v4.f32" in ptx


@needs_nvrtc
def test_int_ops_compile_and_arch_follows_the_target():
    assert nvrtc.target_arch(Target("nvidia/h100")) == "sm_90"
    ptx = nvrtc.compile_ptx(render_cuda(program_of(int_ops)), arch=Target("nvidia/h100"))
    assert ".entry int_ops_kernel0" in ptx and ".target sm_90" in ptx
    assert nvrtc.version() >= (11, 0)


@needs_nvrtc
def test_broken_source_raises_with_the_log_and_the_line():
    source = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_b;\n}\n'
    with pytest.raises(nvrtc.NVRTCError) as info:
        nvrtc.compile_ptx(source, name="broken.cu")
    message = str(info.value)
    assert 'identifier "undefined_b" is undefined' in info.value.log
    assert "broken.cu(2)" in message and "    2 |   a[0] = undefined_b;" in message


# -- the same kernels run on the host ------------------------------------------------------------
SHIM = r"""
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
using std::min; using std::max;
struct Index3 { unsigned x, y, z; };
static Index3 threadIdx, blockIdx;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
#define __align__(n) alignas(n)
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
static float2 make_float2(float x, float y) { return {x, y}; }
static float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
"""


def run_on_host(tmp_path, program, arrays: list) -> list:
    """Runs ``program``'s one barrier-free kernel thread by thread on the CPU (``__syncthreads``
    and ``__shared__`` are left undefined, so a kernel that needs them does not compile)."""
    (kernel,) = program.kernels
    ctypes = {"float32": "float", "int32": "int"}
    lines = [SHIM, render_cuda(program), "int main() {"]
    for i, (param, array) in enumerate(zip(kernel.params, arrays)):
        ctype = ctypes[param.dtype]
        lines.append(f"  static {ctype} p{i}[{array.size}]; FILE* f{i} = fopen(\"{tmp_path}/{i}\", \"rb\"); "
                     f"fread(p{i}, sizeof({ctype}), {array.size}, f{i}); fclose(f{i});")
        array.tofile(tmp_path / str(i))
    args = ", ".join(f"p{i}" for i in range(len(arrays)))
    (gx, gy, gz), (tx, ty, tz) = kernel.grid, kernel.block
    lines.append(f"  for (unsigned bz = 0; bz < {gz}; ++bz) for (unsigned by = 0; by < {gy}; ++by) "
                 f"for (unsigned bx = 0; bx < {gx}; ++bx) for (unsigned tz = 0; tz < {tz}; ++tz) "
                 f"for (unsigned ty = 0; ty < {ty}; ++ty) for (unsigned tx = 0; tx < {tx}; ++tx) {{"
                 f" blockIdx = {{bx, by, bz}}; threadIdx = {{tx, ty, tz}}; {kernel.name}({args}); }}")
    for i, (param, array) in enumerate(zip(kernel.params, arrays)):
        lines.append(f"  FILE* g{i} = fopen(\"{tmp_path}/{i}\", \"wb\"); "
                     f"fwrite(p{i}, sizeof({ctypes[param.dtype]}), {array.size}, g{i}); fclose(g{i});")
    (tmp_path / "kernel.cpp").write_text("\n".join(lines) + "\n  return 0;\n}\n")
    subprocess.run(["g++", "-O1", "-std=c++17", "-o", str(tmp_path / "kernel"),
                    str(tmp_path / "kernel.cpp")], check=True, capture_output=True, text=True)
    subprocess.run([str(tmp_path / "kernel")], check=True)
    return [np.fromfile(tmp_path / str(i), a.dtype).reshape(a.shape) for i, a in enumerate(arrays)]


@needs_cxx
@pytest.mark.parametrize("name,sch", [
    ("vector_add", lambda: gs.vector_add(1000)),
    ("window_sum", lambda: gs.window_sum(256, shared=False)),
    ("matmul", lambda: gs.matmul_blocked(64)),
    ("vector_add", lambda: vectorized_add(256)),
    ("window_sum", lambda: vectorized_add(func=gs.window_sum_func(256))),
])
def test_kernel_computes_what_numpy_does(tmp_path, name, sch):
    schedule = sch()
    n = schedule.mod["main"].params[-1].shape[0].value
    arrays, expected = gs.arrays(name, n)
    flat = [a.reshape(-1) for a in arrays]
    got = run_on_host(tmp_path, program_of(schedule), flat)
    np.testing.assert_allclose(got[-1].reshape(expected.shape), expected, rtol=1e-5)


@needs_cxx
def test_floor_division_of_negative_values_runs_like_python(tmp_path):
    a = np.arange(-128, 128, dtype="int32")
    b, c, d = np.zeros(256, "int32"), np.zeros(256, "int32"), np.zeros(256, "float32")
    _, got_b, got_c, got_d = run_on_host(tmp_path, program_of(int_ops), [a, b, c, d])
    vi = np.arange(256)
    np.testing.assert_array_equal(got_b, a // 7 + a % 5 * 100 + np.abs(a) * 10000)
    np.testing.assert_array_equal(got_c, np.maximum(a, -3) + np.where(a > 0, 1000, 2000) + vi // 7 * 100000)
    np.testing.assert_allclose(got_d, np.exp(a.astype("float32") * np.float32(0.01)), rtol=1e-6)


@needs_cxx
@pytest.mark.parametrize("offset", [0, 1])
def test_vector_let_and_masked_store_run_like_numpy(tmp_path, offset):
    """``x = A[4t:4t+4] * 2; B[4t+o:4t+o+4] = x where the index < 10, else B's old value``:
    aligned (one float4 store) for o = 0, lane by lane for o = 1."""
    A, B = Buffer("A", (E.const(36),), "float32"), Buffer("B", (E.const(36),), "float32")
    tx, x = E.Var("tx"), E.Var("x", "float32x4")
    at = E.Ramp(tx * 4 + offset if offset else tx * 4, E.const(1), 4)
    masked = E.Select(at < E.Broadcast(E.const(10), 4), x, E.BufferLoad(B, (at,)))
    body = S.LetStmt(x, E.BufferLoad(A, (E.Ramp(tx * 4, E.const(1), 4),)) * E.Broadcast(E.const(2.0), 4),
                     S.BufferStore(B, masked, (at,)))
    kernel = Kernel("k", (A, B), (1, 1, 1), (8, 1, 1), {"threadIdx.x": tx}, body)
    source = render_cuda_kernel(kernel)
    assert "float x_3 = A_vec.w * 2.0f;" in source
    assert ("*(float4*)(B + (int)threadIdx.x * 4) = make_float4(" in source) == (offset == 0)
    a, b = np.arange(36, dtype="float32"), np.full(36, -1.0, "float32")
    program = type("Program", (), {"name": "k", "kernels": (kernel,)})()
    _, got = run_on_host(tmp_path, program, [a, b])
    want = b.copy()
    for t in range(8):
        for lane in range(4):
            if t * 4 + offset + lane < 10:
                want[t * 4 + offset + lane] = a[t * 4 + lane] * 2
    np.testing.assert_array_equal(got, want)


# -- OpenCL --------------------------------------------------------------------------------------
def test_opencl_source_structure():
    source = render_opencl(program_of(gs.window_sum(1024)))
    assert ("__kernel __attribute__((reqd_work_group_size(128, 1, 1))) void main_kernel0("
            "__global float* restrict A, __global float* restrict C) {") in source
    assert "  __local float A_shared[130];" in source
    assert source.count("barrier(CLK_LOCAL_MEM_FENCE);") == 1 and "__syncthreads" not in source
    assert "(int)get_group_id(0) * 128" in source and "(int)get_local_id(0)" in source
    matmul = render_opencl(program_of(gs.matmul_shared(1024)))
    assert "(int)get_group_id(1) * 65536" in matmul and matmul.count("barrier(") == 2
    vector = render_opencl(program_of(vectorized_add()))
    assert "float4 A_vec = vload4(0, A + (" in vector and "vstore4((float4)(A_vec.x + B_vec.x" in vector
    assert "floordiv_int32" in render_opencl(program_of(int_ops))
    assert "(long)((int)get_group_id(0) * 128 + (int)get_local_id(0))" in render_opencl(program_of(int_ops))
