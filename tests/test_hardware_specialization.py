"""What chapter 08 and its homework rely on: the float16 matmul scheduled onto the wmma intrinsics
(mlc_lab.testing.gpu_schedules) computes A @ B on the simulator with every multiply-add on
tensor cores, replays from its trace, and a tensorized module prints as script that parses back
(the stride variables of its tile views declared) and still computes the same."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import te, tir
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from mlc_lab.testing import gpu_schedules as gs
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip


def fp16_inputs(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype("float16")
    b = rng.standard_normal((k, n)).astype("float16")
    return a, b, a.astype("float32") @ b.astype("float32")


@pytest.mark.parametrize("m, n, k, warps", [(64, 64, 32, (1, 1, 2)), (64, 128, 48, (2, 2, 2))])
def test_wmma_schedule_runs_on_tensor_cores_only(m, n, k, warps):
    wi, wj, tj = warps
    sch = gs.matmul_wmma(gs.matmul_fp16_func(m, n, k), warps_i=wi, warps_j=wj, tiles_j=tj)
    a, b, expected = fp16_inputs(m, n, k)
    c = np.zeros((m, n), "float32")
    (run,) = mlc_lab.build(sch.mod, target="cuda-sim").simulate(a, b, c)
    out = mlc_lab.nd.array(np.zeros((m, n), "float32"))
    mlc_lab.build(sch.mod, target="cuda-sim")["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-4)
    assert run.counters.tensor_instructions == (m // 16) * (n // 16) * (k // 16)
    assert run.counters.flops == 0


def test_wmma_schedule_replays_from_its_trace():
    func = gs.matmul_fp16_func(64, 64, 32)
    verify_trace_roundtrip(gs.matmul_wmma(func, warps_i=1, warps_j=1), func)


def test_tensorized_wmma_module_prints_as_script_that_parses_back_and_runs():
    sch = gs.matmul_wmma(gs.matmul_fp16_func(64, 64, 32), warps_i=1, warps_j=1)
    text = sch.mod.script()
    assert "s1 = T.int32()" in text          # the tile views' stride variables are declared
    parsed = from_source(text)
    a, b, expected = fp16_inputs(64, 64, 32, seed=3)
    out = mlc_lab.nd.array(np.zeros((64, 64), "float32"))
    mlc_lab.build(parsed, target="cuda-sim")["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-4)


# -- a CPU "accelerator": its instruction modelled in loops ----------------------------------------
@T.prim_func
def tile_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (4, 4), "float32", offset_factor=1, scope="global.test_a")
    B = T.match_buffer(b, (4, 4), "float32", offset_factor=1, scope="global.test_b")
    C = T.match_buffer(c, (4, 4), "float32", offset_factor=1, scope="global.test_acc")
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.block(""):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def tile_model(a: T.handle, b: T.handle, c: T.handle) -> None:
    sa = T.int32()
    sb = T.int32()
    sc = T.int32()
    A = T.match_buffer(a, (4, 4), "float32", offset_factor=1, strides=[sa, 1], scope="global.test_a")
    B = T.match_buffer(b, (4, 4), "float32", offset_factor=1, strides=[sb, 1], scope="global.test_b")
    C = T.match_buffer(c, (4, 4), "float32", offset_factor=1, strides=[sc, 1], scope="global.test_acc")
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        with T.block("test_tile_instruction"):
            T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
            T.writes(C[0:4, 0:4])
            for i, j, k in T.grid(4, 4, 4):
                C[i, j] = C[i, j] + A[i, k] * B[k, j]


def test_a_matmul_tensorized_onto_a_modelled_instruction_round_trips_and_computes():
    tir.TensorIntrin.register("test_hw_tile_4x4x4", tile_desc, tile_model, override=True)
    A = te.placeholder((12, 8), "float32", "A")
    B = te.placeholder((8, 16), "float32", "B")
    r = te.reduce_axis((0, 8), name="r")
    C = te.compute((12, 16), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    func = te.create_prim_func([A, B, C]).with_attr("global_symbol", "main")
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 4])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    tile = sch.blockize(i1)
    sch.compute_at(sch.cache_read(tile, 0, "global.test_a"), k0)
    sch.compute_at(sch.cache_read(tile, 1, "global.test_b"), k0)
    sch.reverse_compute_at(sch.cache_write(tile, 0, "global.test_acc"), j0)
    sch.decompose_reduction(tile, k0)
    sch.tensorize(tile, "test_hw_tile_4x4x4")
    text = sch.mod.script()
    assert text.count('T.block("test_tile_instruction")') == 1
    rng = np.random.default_rng(0)
    a, b = rng.random((12, 8), dtype="float32"), rng.random((8, 16), dtype="float32")
    for mod in (sch.mod, from_source(text)):
        out = mlc_lab.nd.array(np.zeros((12, 16), "float32"))
        mlc_lab.build(mod, target="llvm")["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), out)
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5)
