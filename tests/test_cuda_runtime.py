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
