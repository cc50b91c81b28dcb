"""Tensor cores: float16 matmuls tensorized onto the wmma intrinsics and written with mma.sync +
ldmatrix run on the cuda-sim simulator with the numbers a GPU computes, their CUDA C compiles
with NVRTC (and runs on a real GPU when there is one), the simulator really uses the PTX fragment
layouts (a wrong one gives wrong numbers), and the counters and time estimate see the tensor
cores."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.codegen.cuda import render_cuda
from mlc_lab.runtime import nvrtc
from mlc_lab.runtime.cuda_sim import GPUS, simulate_program
from mlc_lab.runtime.cuda_sim.mma_layout import SHAPES, fragment_map, owner_grid
from mlc_lab.runtime.cuda_sim.tensor_core import FragmentError, WarpDivergenceError
from mlc_lab.script import tir as T
from mlc_lab.testing import gpu_schedules
from mlc_lab.target import Target
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip
from mlc_lab.tir.tensor_intrin import cuda as tc
from mlc_lab.tir.tensor_intrin.wmma import (get_wmma_fill_intrin, get_wmma_load_intrin,
                                            get_wmma_store_intrin, get_wmma_sync_intrin)
from mlc_lab.tir.transform.split_host_device import split_host_device

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not found")


def _has_gpu() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


needs_gpu = pytest.mark.skipif(not _has_gpu(), reason="no CUDA GPU (with cupy) here")


# -- the programs ------------------------------------------------------------------------------
def matmul(M, N, K, trans_b=False):
    """C = A @ B (A @ B.T with ``trans_b``), float16 inputs, float32 accumulation."""
    if trans_b:
        @T.prim_func
        def main_t(A: T.Buffer((M, K), "float16"), B: T.Buffer((N, K), "float16"),
                   C: T.Buffer((M, N), "float32")):
            T.func_attr({"global_symbol": "main"})
            for i, j, k in T.grid(M, N, K):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vj, vk])
        return main_t

    @T.prim_func
    def main(A: T.Buffer((M, K), "float16"), B: T.Buffer((K, N), "float16"),
             C: T.Buffer((M, N), "float32")):
        T.func_attr({"global_symbol": "main"})
        for i, j, k in T.grid(M, N, K):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])
    return main


def wmma_intrinsics(m, n, k, trans_b=False):
    """Names of the five intrinsics of an m x n x k wmma schedule (registered on first use)."""
    if (m, n, k) == (16, 16, 16):
        return tc.get_wmma_intrin_group("shared", "global", "float16", "float32", trans_b)
    names = {}
    for role, (desc, impl) in {
            "load_a": get_wmma_load_intrin(m, n, k, "float16", "shared", False, False),
            "load_b": get_wmma_load_intrin(m, n, k, "float16", "shared", True, trans_b),
            "init": get_wmma_fill_intrin(m, n, k, "float32"),
            "compute": get_wmma_sync_intrin(m, n, k, "float16", "float32", trans_b),
            "store": get_wmma_store_intrin(m, n, k, "float32", "global")}.items():
        names[role] = f"test_wmma_{role}_{m}x{n}x{k}{'_trans' if trans_b else ''}"
        tir.TensorIntrin.register(names[role], desc, impl, override=True)
    return names


def wmma_schedule(func, tile=(16, 16, 16), warps_i=2, warps_j=1, tiles_j=2, trans_b=False,
                  intrinsics=None):
    """The library's tensor-core schedule (gpu_schedules.matmul_wmma) with this file's
    intrinsic groups, so that each tile shape is tried."""
    return gpu_schedules.matmul_wmma(func, tile, warps_i, warps_j, tiles_j, trans_b=trans_b,
                                     intrinsics=intrinsics or wmma_intrinsics(*tile, trans_b))


def inputs(M, N, K, trans_b=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype("float16")
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype("float16")
    expected = a.astype("float32") @ (b.T if trans_b else b).astype("float32")
    return a, b, expected


def program_of(sch):
    (func,) = mlc_lab.lower(sch.mod).functions.values()
    return split_host_device(func, Target("nvidia/a100"))


def run_sim(sch, M, N, K, trans_b=False):
    a, b, expected = inputs(M, N, K, trans_b)
    c = np.zeros((M, N), "float32")
    runs = simulate_program(program_of(sch), [a, b, c])
    return c, expected, runs


# -- wmma ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("M, N, K, warps", [(64, 64, 64, (2, 1, 2)), (128, 128, 64, (2, 2, 2)),
                                            (32, 64, 48, (1, 2, 1))])
def test_wmma_matmul_matches_numpy_on_the_simulator(M, N, K, warps):
    wi, wj, tj = warps
    c, expected, _ = run_sim(wmma_schedule(matmul(M, N, K), warps_i=wi, warps_j=wj, tiles_j=tj),
                             M, N, K)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


def test_wmma_with_b_column_major_and_a_built_module():
    sch = wmma_schedule(matmul(64, 64, 32, trans_b=True), trans_b=True)
    a, b, expected = inputs(64, 64, 32, trans_b=True)
    lib = mlc_lab.build(sch.mod, target="cuda-sim")
    out = mlc_lab.nd.array(np.zeros((64, 64), "float32"))
    lib["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("tile", [(32, 8, 16), (8, 32, 16)])
def test_the_other_wmma_tile_shapes(tile):
    m, n, k = tile
    sch = wmma_schedule(matmul(64, 64, 32), tile=tile, warps_i=1, warps_j=1, tiles_j=64 // n)
    c, expected, _ = run_sim(sch, 64, 64, 32)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


def test_wmma_products_are_exact_and_accumulate_in_float32():
    # 1 + 2^-11 squared needs 23 bits: exact in float32, not in float16
    a = np.full((16, 16), 1 + 2.0 ** -10, "float16")
    b = np.full((16, 16), 1 + 2.0 ** -10, "float16")
    c = np.zeros((64, 64), "float32")
    big_a, big_b = np.tile(a, (4, 4)), np.tile(b, (4, 4))
    simulate_program(program_of(wmma_schedule(matmul(64, 64, 64))), [big_a, big_b, c])
    exact = 64 * (1 + 2.0 ** -10) ** 2
    assert np.all(c == np.float32(exact))


def test_the_schedule_replays_from_its_trace():
    func = matmul(64, 64, 64)
    verify_trace_roundtrip(wmma_schedule(func), func)


@needs_nvrtc
@pytest.mark.parametrize("trans_b", [False, True])
def test_wmma_cuda_source_compiles_with_nvrtc(trans_b):
    source = render_cuda(program_of(wmma_schedule(matmul(64, 64, 32, trans_b), trans_b=trans_b)))
    assert "#include <mma.h>" in source
    layout = "col_major" if trans_b else "row_major"
    assert f"nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::{layout}>" in source
    for call in ("fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync"):
        assert f"nvcuda::wmma::{call}(" in source
    assert "mma.sync" in nvrtc.compile_ptx(source, "sm_80") or "wmma.mma.sync" in \
        nvrtc.compile_ptx(source, "sm_80")


def test_counters_and_the_tensor_core_roof():
    _, _, (run,) = run_sim(wmma_schedule(matmul(128, 128, 64), warps_j=2), 128, 128, 64)
    counters = run.counters
    assert counters.tensor_instructions == (128 // 16) * (128 // 16) * (64 // 16)
    assert counters.tensor_flops == 2 * 128 * 128 * 64
    assert counters.flops == 0            # no arithmetic left on the CUDA cores
    est = run.estimate("nvidia/a100")
    assert GPUS["a100"].tensor_flops == 312e12
    sms = min(108, run.kernel.num_blocks)   # the SMs the grid can use
    assert est.tensor == pytest.approx(counters.tensor_flops / (312e12 * sms / 108))
    assert est.seconds >= est.tensor
    assert "tensor cores" in str(run.report())


# -- what the simulator refuses --------------------------------------------------------------
def fragment_kernel(condition_on_tx: bool, threads: int = 32, element_access: bool = False):
    @T.prim_func
    def main(A: T.Buffer((16, 16), "float16"), C: T.Buffer((16, 16), "float32")):
        T.func_attr({"global_symbol": "main"})
        for tx in T.thread_binding(threads, thread="threadIdx.x"):
            with T.block("frag"):
                T.reads(A[0:16, 0:16])
                T.writes(C[0:16, 0:16])
                C_f = T.alloc_buffer((16, 16), "float32", scope="wmma.accumulator")
                if tx < (16 if condition_on_tx else threads):
                    T.evaluate(T.tvm_fill_fragment(C_f.data, 16, 16, 16, 0, T.float32(0)))
                if element_access:
                    C[0, 0] = C_f[0, 0]
                T.evaluate(T.tvm_store_matrix_sync(C_f.data, 16, 16, 16, 0, C.data, 16, "row_major"))
    return main


def simulate_func(func, *arrays):
    (lowered,) = mlc_lab.lower(func).functions.values()
    return simulate_program(split_host_device(lowered, Target("nvidia/a100")), list(arrays))


def test_a_wmma_instruction_run_by_part_of_a_warp_is_refused():
    a, c = np.zeros((16, 16), "float16"), np.zeros((16, 16), "float32")
    with pytest.raises(WarpDivergenceError, match=r"tvm_fill_fragment .*lanes 0-15 execute it and "
                                                  r"lanes 16-31 do not"):
        simulate_func(fragment_kernel(True), a, c)
    with pytest.raises(WarpDivergenceError, match="48 threads, so its last warp has only 16"):
        simulate_func(fragment_kernel(False, threads=48), a, c)


def test_fragments_have_no_elements_for_threads():
    a, c = np.zeros((16, 16), "float16"), np.zeros((16, 16), "float32")
    simulate_func(fragment_kernel(False), a, c)     # the same kernel, all lanes: fine
    assert np.all(c == 0)
    with pytest.raises(FragmentError, match="only wmma instructions"):
        simulate_func(fragment_kernel(False, element_access=True), a, c)


# -- mma.sync and ldmatrix -----------------------------------------------------------------------
def mma_kernel(a_trans=False, b_trans=True, c_layout=True):
    """One warp: A (16 x 16) and B (16 x 8) staged in shared memory, loaded into registers by
    ldmatrix (A: x4, B: x2.trans), one mma.sync, C written back by the documented C layout (or a
    wrong one)."""

    @T.prim_func
    def main(A: T.Buffer((16, 16), "float16"), B: T.Buffer((16, 8), "float16"),
             C: T.Buffer((16, 8), "float32")):
        T.func_attr({"global_symbol": "main"})
        A_s = T.alloc_buffer((256,), "float16", scope="shared")
        B_s = T.alloc_buffer((128,), "float16", scope="shared")
        A_r = T.alloc_buffer((8,), "float16", scope="local")
        B_r = T.alloc_buffer((4,), "float16", scope="local")
        C_r = T.alloc_buffer((4,), "float32", scope="local")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for i in range(8):
                A_s[tx * 8 + i] = A[(tx * 8 + i) // 16, (tx * 8 + i) % 16]
            for i in range(4):
                B_s[tx * 4 + i] = B[(tx * 4 + i) // 8, (tx * 4 + i) % 8]
            for i in range(4):
                C_r[i] = T.float32(0)
            for i in range(8):
                A_r[i] = T.float16(0)
            for i in range(4):
                B_r[i] = T.float16(0)
            T.evaluate(T.call_extern("handle", "ptx_ldmatrix", a_trans, 4, ".b16", A_r.data, 0,
                                     A_s.data, tx % 16 * 16 + tx // 16 * 8))
            T.evaluate(T.call_extern("handle", "ptx_ldmatrix", b_trans, 2, ".b16", B_r.data, 0,
                                     B_s.data, tx % 16 * 8))
            T.evaluate(T.call_extern("handle", "ptx_mma", "m16n8k16", "row", "col", "fp16", "fp16",
                                     "fp32", A_r.data, 0, B_r.data, 0, C_r.data, 0, False))
            for i in range(4):
                if c_layout:
                    C[tx // 4 + i // 2 * 8, tx % 4 * 2 + i % 2] = C_r[i]
                else:   # rows and register pairs swapped: not where the hardware puts them
                    C[tx // 4 + i % 2 * 8, tx % 4 * 2 + i // 2] = C_r[i]
    return main


def test_mma_sync_with_ldmatrix_matches_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 16)).astype("float16")
    b = rng.standard_normal((16, 8)).astype("float16")
    c = np.zeros((16, 8), "float32")
    (run,) = simulate_func(mma_kernel(), a, b, c)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-5, atol=1e-5)
    assert run.counters.tensor_instructions == 1 and run.counters.tensor_flops == 2 * 16 * 8 * 16


@pytest.mark.parametrize("wrong", [dict(a_trans=True), dict(b_trans=False), dict(c_layout=False)])
def test_a_wrong_fragment_layout_gives_wrong_numbers(wrong):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 16)).astype("float16")
    b = rng.standard_normal((16, 8)).astype("float16")
    c = np.zeros((16, 8), "float32")
    simulate_func(mma_kernel(**wrong), a, b, c)
    assert np.abs(c - a.astype("float32") @ b.astype("float32")).max() > 0.1


@pytest.mark.parametrize("num, trans", [(1, False), (2, False), (4, False), (1, True), (4, True)])
def test_ldmatrix_gives_each_lane_its_documented_elements(num, trans):
    @T.prim_func
    def main(M: T.Buffer((8 * num, 8), "float16"), out: T.Buffer((32, 2 * num), "float16")):
        T.func_attr({"global_symbol": "main"})
        M_s = T.alloc_buffer((64 * num,), "float16", scope="shared")
        R = T.alloc_buffer((2 * num,), "float16", scope="local")
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            for i in range(2 * num):
                M_s[tx * 2 * num + i] = M[(tx * 2 * num + i) // 8, (tx * 2 * num + i) % 8]
            for i in range(2 * num):
                R[i] = T.float16(0)
            T.evaluate(T.call_extern("handle", "ptx_ldmatrix", trans, num, ".b16", R.data, 0,
                                     M_s.data, tx % (8 * num) * 8))
            for i in range(2 * num):
                out[tx, i] = R[i]

    m = np.arange(64 * num).reshape(8 * num, 8).astype("float16")
    out = np.zeros((32, 2 * num), "float16")
    simulate_func(main, m, out)
    for lane in range(32):
        for q in range(num):
            block = m[8 * q:8 * q + 8]
            block = block.T if trans else block
            expected = block[lane // 4, 2 * (lane % 4):2 * (lane % 4) + 2]
            np.testing.assert_array_equal(out[lane, 2 * q:2 * q + 2], expected)


@needs_nvrtc
def test_mma_sync_cuda_source_is_inline_ptx_and_compiles():
    (func,) = mlc_lab.lower(mma_kernel()).functions.values()
    source = render_cuda(split_host_device(func, Target("nvidia/a100")))
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in source
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in source
    assert "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in source
    assert "mma.sync.aligned.m16n8k16" in nvrtc.compile_ptx(source, "sm_80")


# -- the layout picture --------------------------------------------------------------------------
def test_each_fragment_element_has_exactly_one_owner():
    for operand, (rows, cols, per_lane) in SHAPES.items():
        r, c = fragment_map(operand)
        cells = set(zip(r.ravel().tolist(), c.ravel().tolist()))
        assert len(cells) == rows * cols == 32 * per_lane
    lanes, slots = owner_grid("A")
    assert lanes[0, :8].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert slots[8, 8] == 6


def test_the_fragment_layout_picture():
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    from mlc_lab.viz.fragments import fragment_layout
    fig = fragment_layout()
    assert [ax.get_title() for ax in fig.axes] == ["A (16 x 16, row)", "B (16 x 8, k x n, col)",
                                                   "C / D (16 x 8)"]
    assert any(t.get_text() == "0:0" for t in fig.axes[0].texts)
    with pytest.raises(ValueError, match="'A', 'B' and 'C'"):
        fragment_layout("D")


# -- a real GPU --------------------------------------------------------------------------------
def run_on_gpu(program, arrays):
    """Each kernel of ``program`` compiled by cupy from mlc_lab's CUDA source and launched."""
    import cupy
    source = render_cuda(program)
    headers = nvrtc.include_dirs(("cuda_fp16.h", "crt/mma.h"))   # <mma.h> includes crt/mma.h
    module = cupy.RawModule(code=source, options=("--std=c++17", *(f"-I{d}" for d in headers)))
    bound = dict(zip(program.func.params, [cupy.asarray(a) for a in arrays]))
    for kernel in program.kernels:
        module.get_function(kernel.name)(kernel.grid, kernel.block, [bound[p] for p in kernel.params])
    cupy.cuda.Device().synchronize()
    return [cupy.asnumpy(bound[p]) for p in program.func.params]


@needs_gpu
@pytest.mark.parametrize("M, N, K, trans_b", [(64, 64, 64, False), (128, 128, 64, False),
                                              (64, 64, 32, True)])
def test_wmma_matmul_on_a_gpu(M, N, K, trans_b):
    sch = wmma_schedule(matmul(M, N, K, trans_b), warps_j=1 + (M == 128), trans_b=trans_b)
    a, b, expected = inputs(M, N, K, trans_b)
    *_, c = run_on_gpu(program_of(sch), [a, b, np.zeros((M, N), "float32")])
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


@needs_gpu
def test_mma_sync_on_a_gpu():
    (func,) = mlc_lab.lower(mma_kernel()).functions.values()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 16)).astype("float16")
    b = rng.standard_normal((16, 8)).astype("float16")
    *_, c = run_on_gpu(split_host_device(func, Target("nvidia/a100")),
                       [a, b, np.zeros((16, 8), "float32")])
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-4, atol=1e-3)
