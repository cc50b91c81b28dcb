"""Causal attention on cuda-sim: the flash-attention kernel (one fused kernel, K/V tiles streamed
through shared memory, online softmax) and the three-kernel version agree with numpy, run
without data races, compile with NVRTC, and the fused one moves fewer bytes; its picture."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd
from mlc_lab.codegen.cuda import render_cuda
from mlc_lab.runtime import nvrtc
from mlc_lab.target import Target
from mlc_lab.testing import gpu_attention as ga
from mlc_lab.tir.transform.split_host_device import split_host_device

needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not found: pip install "
                                 "nvidia-cuda-nvrtc-cu12 (the test extra installs it)")


@pytest.mark.parametrize("heads, n, d, tile", [(2, 32, 32, 16), (1, 40, 64, 16), (2, 20, 32, 8)])
def test_flash_kernel_matches_numpy_and_has_no_race(heads, n, d, tile):
    q, k, v = ga.random_qkv(heads, n, d, seed=n)
    out = np.zeros_like(q)
    # cuda-sim checks every shared-memory access for races and raises DataRaceError on one
    mlc_lab.build(ga.flash_attention(heads, n, d, tile), target="cuda-sim")(q, k, v, out)
    np.testing.assert_allclose(out, ga.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)


def test_naive_kernels_match_numpy_at_a_ragged_length():
    q, k, v = ga.random_qkv(2, 24, 32, seed=1)
    lib = mlc_lab.build(ga.naive_attention(2, 24, 32, tile=16), target="cuda-sim")
    out = np.zeros_like(q)
    lib(q, k, v, out)
    np.testing.assert_allclose(out, ga.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)
    assert lib.get_source("cuda").count("__global__") == 3


def test_the_reference_interpreter_agrees():
    # thread loops run as ordinary loops there: the cooperative copies inside a thread's loop
    # copy the whole tile, so the kernel means the same thing read sequentially
    q, k, v = ga.random_qkv(1, 16, 32, seed=2)
    out = np.zeros_like(q)
    mlc_lab.build(ga.flash_attention(1, 16, 32, tile=8), target="python")(q, k, v, out)
    np.testing.assert_allclose(out, ga.attention_reference(q, k, v), rtol=1e-4, atol=1e-5)


def test_a_missing_barrier_is_a_race():
    from mlc_lab.ir.transform import PassContext
    from mlc_lab.runtime.cuda_sim import DataRaceError
    with PassContext(config={"cuda.inject_sync": False}):
        racy = mlc_lab.build(ga.flash_attention(1, 16, 32, tile=8), target="cuda-sim")
    q, k, v = ga.random_qkv(1, 16, 32)
    with pytest.raises(DataRaceError, match="_shared"):
        racy(q, k, v, np.zeros_like(q))


def test_flash_moves_fewer_bytes_and_never_writes_scores():
    q, k, v = ga.random_qkv(1, 32, 32)
    flash = ga.simulate_traffic(mlc_lab.build(ga.flash_attention(1, 32, 32, 16), "cuda-sim"), q, k, v)
    naive = ga.simulate_traffic(mlc_lab.build(ga.naive_attention(1, 32, 32, 16), "cuda-sim"), q, k, v)
    expected = ga.attention_reference(q, k, v)
    for result in (flash, naive):
        np.testing.assert_allclose(result["out"], expected, rtol=1e-4, atol=1e-5)
    assert set(flash["by_buffer"]) == {"Q", "K", "V", "O"}
    assert len(flash["runs"]) == 1 and len(naive["runs"]) == 3
    # each of S and P is 32 x 32 floats: written once, read at least once
    assert naive["by_buffer"]["S"] >= 2 * 32 * 32 * 4 and naive["by_buffer"]["P"] >= 2 * 32 * 32 * 4
    assert naive["bytes"] > 2 * flash["bytes"]
    # causal: the block of the first query tile of two loads one K/V tile, the second two
    assert flash["by_buffer"]["K"] == (1 + 2) * 16 * 32 * 4
    assert naive["seconds"] > flash["seconds"]
    # every global access of both versions is fully coalesced
    for result in (flash, naive):
        for run in result["runs"]:
            for buf in run.counters.buffers.values():
                assert buf.scope != "global" or buf.efficiency == 1, (buf.name, buf.efficiency)
                assert buf.scope != "shared" or buf.conflict_degree == 1, buf.name


def test_bad_sizes_are_refused_with_the_culprit_named():
    with pytest.raises(ValueError, match="d must be a positive int"):
        ga.flash_attention(1, 64, 0)
    with pytest.raises(ValueError, match="tile .* power of two"):
        ga.naive_attention(1, 64, 32, tile=24)
    with pytest.raises(ValueError, match="share one"):
        ga.attention_reference(np.zeros((1, 4, 8)), np.zeros((1, 4, 8)), np.zeros((1, 5, 8)))


@needs_nvrtc
@pytest.mark.parametrize("make", [ga.flash_attention, ga.naive_attention])
def test_cuda_source_compiles_with_nvrtc(make):
    (func,) = mlc_lab.lower(make(2, 64, 64)).functions.values()
    ptx = nvrtc.compile_ptx(render_cuda(split_host_device(func, Target("nvidia/a100"))),
                            arch="sm_80")
    assert ".entry main_kernel0" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("make", [ga.flash_attention, ga.naive_attention])
def test_on_a_real_gpu(make):
    q, k, v = ga.random_qkv(2, 72, 64, seed=3)
    lib = mlc_lab.build(make(2, 72, 64), target="cuda")
    args = [nd.array(x, mlc_lab.cuda(0)) for x in (q, k, v, np.zeros_like(q))]
    lib["main"](*args)
    np.testing.assert_allclose(args[-1].numpy(), ga.attention_reference(q, k, v),
                               rtol=1e-4, atol=1e-5)


def test_the_picture_marks_the_loaded_and_the_skipped_tiles():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlc_lab.viz.gpu import draw_attention_tiles
    ax = draw_attention_tiles(128, 32, 2)
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t.startswith("step")] == ["step 1", "step 2", "step 3"]
    assert texts.count("skipped") == 1 and texts.count("never\nloaded") == 1
    with pytest.raises(ValueError, match="query_tile must be in"):
        draw_attention_tiles(128, 32, 4)
    plt.close("all")
