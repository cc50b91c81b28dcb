"""Where cuda(0) runs (GPU or simulator), its memory, and builds for "cuda" / "cuda-sim" end to end."""
import warnings

import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd
from mlc_lab.runtime import cuda_device as cuda_runtime
from mlc_lab.runtime.device import _ALLOCATORS
from mlc_lab.testing import gpu_schedules as gs


@pytest.fixture
def fresh_mode(monkeypatch):
    """Forget the process's decision about cuda(0), and pretend there is no GPU."""
    monkeypatch.setattr(cuda_runtime, "_mode", None)
    monkeypatch.setattr(cuda_runtime, "_cuda_device_count", lambda: 0)
    monkeypatch.delenv("MLC_LAB_CUDA", raising=False)
    saved = _ALLOCATORS.pop("cuda", None)
    yield monkeypatch
    _ALLOCATORS.pop("cuda", None)
    if saved is not None:
        _ALLOCATORS["cuda"] = saved


def test_without_a_gpu_cuda_memory_is_simulated_with_one_notice(fresh_mode):
    with pytest.warns(cuda_runtime.SimulatedGPUNotice, match="runs kernels on the cuda-sim "
                                                             "simulator.*estimates"):
        a = nd.array(np.arange(4, dtype="float32"), mlc_lab.cuda(0))
    assert cuda_runtime.mode() == "sim" and a.device == mlc_lab.cuda(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # decided once: no second notice
        b = nd.empty((4,), "float32", mlc_lab.cuda(0))
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(b.numpy(), np.zeros(4))


def test_asking_for_the_simulator_gives_no_notice(fresh_mode):
    fresh_mode.setenv("MLC_LAB_CUDA", "sim")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cuda_runtime.mode() == "sim"


def test_asking_for_a_gpu_that_is_not_there_says_so(fresh_mode):
    fresh_mode.setenv("MLC_LAB_CUDA", "gpu")
    with pytest.raises(RuntimeError, match="MLC_LAB_CUDA=gpu but no CUDA GPU can be opened"):
        cuda_runtime.mode()
    fresh_mode.setenv("MLC_LAB_CUDA", "tpu")
    with pytest.raises(ValueError, match="MLC_LAB_CUDA='tpu': use 'gpu' or 'sim'"):
        cuda_runtime.mode()


# -- builds for "cuda-sim" and "cuda", end to end ----------------------------------------------
PROGRAMS = [("vector_add", lambda n: gs.vector_add(n)), ("window_sum", lambda n: gs.window_sum(n)),
            ("window_sum", lambda n: gs.window_sum(n, shared=False)),
            ("matmul", lambda n: gs.matmul_naive(n)), ("matmul", lambda n: gs.matmul_blocked(n)),
            ("matmul", lambda n: gs.matmul_shared(n)),
            ("matmul", lambda n: gs.matmul_shared(n, vector=1))]


@pytest.mark.parametrize("name, make", PROGRAMS)
def test_cuda_sim_target_computes_what_numpy_computes(name, make):
    n = 128 if name == "matmul" else 1024
    arrays, expected = gs.arrays(name, n)
    lib = mlc_lab.build(make(n).mod, target="cuda-sim")
    lib["main"](*arrays)
    np.testing.assert_allclose(arrays[-1], expected, rtol=1e-4, atol=1e-4)


def test_cuda_target_runs_on_cuda_arrays_and_shows_its_source():
    arrays, expected = gs.arrays("matmul", 128)
    lib = mlc_lab.build(gs.matmul_shared(128).mod, target="cuda")
    on_gpu = [nd.array(a, mlc_lab.cuda(0)) for a in arrays]
    lib["main"](*on_gpu)
    np.testing.assert_allclose(on_gpu[-1].numpy(), expected, rtol=1e-4, atol=1e-4)
    source = lib.imported_modules[0].get_source()
    assert source == lib.get_source("cuda") and "__syncthreads();" in source
    assert "__global__" in source and "main_kernel0" in source
    if lib.imported_modules[0].ptx is not None:            # NVRTC installed (the test extra)
        assert ".entry main_kernel0" in lib.get_source("ptx")
    assert "__kernel" in lib.get_source("opencl")


def test_cpu_arrays_for_a_cuda_build_say_how_to_copy_them():
    arrays, _ = gs.arrays("vector_add", 256)
    lib = mlc_lab.build(gs.vector_add(256).mod, target="cuda")
    with pytest.raises(ValueError, match=r"the array is on cpu\(0\) but this function runs on "
                                         r"cuda\(0\); copy it with arr.copyto\(mlc_lab.cuda\(\)\)"):
        lib["main"](*[nd.array(a) for a in arrays])


@pytest.mark.skipif(cuda_runtime._cuda_device_count() > 0,
                    reason="with a GPU, time_evaluator measures instead of estimating")
def test_time_evaluator_without_a_gpu_reports_the_model_estimate():
    arrays, _ = gs.arrays("matmul", 128)
    on_gpu = [nd.array(a, mlc_lab.cuda(0)) for a in arrays]
    lib = mlc_lab.build(gs.matmul_shared(128).mod, target="nvidia/a100")
    result = lib.time_evaluator("main", mlc_lab.cuda(0), number=3, repeat=2)(*on_gpu)
    assert result.results == (lib.estimate_seconds(*on_gpu),) * 2 and 0 < result.mean < 1e-3


def test_profile_reports_counters_and_estimate():
    arrays, _ = gs.arrays("matmul", 128)
    profile = mlc_lab.build(gs.matmul_shared(128).mod, target="cuda-sim").profile(*arrays)
    text = str(profile)
    assert text.startswith("main_kernel0") and "estimated" in text and "A_shared" in text
    assert "<table class='mlc-counters'>" in profile._repr_html_()


def test_who_wrote_names_each_elements_block_and_thread():
    arrays, _ = gs.arrays("vector_add", 1024)
    lib = mlc_lab.build(gs.vector_add(1024, threads=128).mod, target="cuda-sim")
    block_of, thread_of = lib.who_wrote("C", *arrays)
    np.testing.assert_array_equal(block_of, np.arange(1024) // 128)
    np.testing.assert_array_equal(thread_of, np.arange(1024) % 128)
    with pytest.raises(KeyError, match="no buffer parameter 'D'; it has A, B, C"):
        lib.who_wrote("D", *arrays)


def test_without_barriers_the_simulator_catches_the_race():
    from mlc_lab.ir.transform import PassContext
    from mlc_lab.runtime.cuda_sim import DataRaceError
    arrays, _ = gs.arrays("matmul", 64)
    with PassContext(config={"cuda.inject_sync": False}):
        racy = mlc_lab.build(gs.matmul_shared(64).mod, target="cuda-sim")
    assert "__syncthreads" not in racy.get_source("cuda")
    with pytest.raises(DataRaceError, match="A_shared|B_shared"):
        racy["main"](*arrays)


@pytest.mark.gpu
def test_on_a_real_gpu_results_and_event_timing():
    arrays, expected = gs.arrays("matmul", 256)
    lib = mlc_lab.build(gs.matmul_shared(256).mod, target="cuda")
    on_gpu = [nd.array(a, mlc_lab.cuda(0)) for a in arrays]
    lib["main"](*on_gpu)
    np.testing.assert_allclose(on_gpu[-1].numpy(), expected, rtol=1e-4, atol=1e-4)
    seconds = lib.time_evaluator("main", mlc_lab.cuda(0), number=5)(*on_gpu).mean
    assert 0 < seconds < 1
