"""Where ``mlc_lab.cuda(0)`` runs: a real GPU through pycuda, or the cuda-sim simulator on the CPU.

    MLC_LAB_CUDA=gpu    always the GPU (an error when none can be opened)
    MLC_LAB_CUDA=sim    always the simulator
    (unset)             the GPU when pycuda opens one, else the simulator, with a notice once

On the simulator, memory of ``cuda(0)`` is host memory (numpy arrays), kernels run on the CPU with
the exact results a GPU computes, and ``time_evaluator`` reports the simulator's time *estimate*
for the target GPU instead of a measurement. On a GPU, memory is device memory (pycuda
``GPUArray``) that ``.numpy()`` copies back.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from .device import Allocator, HostAllocator, _cuda_device_count, register_allocator

_MODES = ("gpu", "sim")
_mode: str | None = None


class SimulatedGPUNotice(UserWarning):
    """cuda(0) runs on the simulator because no GPU could be opened."""


def mode() -> str:
    """``"gpu"`` or ``"sim"``: what runs the kernels of ``cuda(0)`` in this process (decided on
    first use, from ``MLC_LAB_CUDA`` or by looking for a GPU)."""
    global _mode
    if _mode is None:
        wanted = os.environ.get("MLC_LAB_CUDA", "").strip().lower()
        if wanted and wanted not in _MODES:
            raise ValueError(f"MLC_LAB_CUDA={wanted!r}: use 'gpu' or 'sim' (or leave it unset)")
        if wanted == "gpu" and _cuda_device_count() == 0:
            raise RuntimeError("MLC_LAB_CUDA=gpu but no CUDA GPU can be opened (pycuda is missing, "
                               "or the driver reports no device); unset it to use the simulator")
        if wanted:
            _mode = wanted
        else:
            _mode = "gpu" if _cuda_device_count() > 0 else "sim"
            if _mode == "sim":
                warnings.warn("no CUDA GPU here (pycuda found none), so mlc_lab.cuda(0) runs "
                              "kernels on the cuda-sim simulator on the CPU: results are exact, "
                              "and time_evaluator reports the simulator's time estimates for the "
                              "target GPU, not measurements. Set MLC_LAB_CUDA=sim to say that is "
                              "what you want.", SimulatedGPUNotice, stacklevel=3)
        register_allocator("cuda", SimulatorMemory() if _mode == "sim" else PyCUDAMemory())
    return _mode


class SimulatorMemory(HostAllocator):
    """The memory of a simulated GPU: host numpy arrays."""


class PyCUDAMemory(Allocator):
    """Device memory through pycuda: storage is a ``pycuda.gpuarray.GPUArray``."""

    def __init__(self):
        import pycuda.autoprimaryctx  # noqa: F401  (opens the GPU's primary context)
        import pycuda.gpuarray as gpuarray
        self.gpuarray = gpuarray

    def allocate(self, device, shape, dtype):
        return self.gpuarray.zeros(shape, dtype)

    def free(self, storage) -> None:
        storage.gpudata.free()

    def copy_from_host(self, storage, array):
        storage.set(np.ascontiguousarray(array, dtype=storage.dtype))

    def copy_to_host(self, storage):
        return storage.get()


def install_allocator() -> None:
    """Make ``cuda`` arrays allocatable (called when the first one is made)."""
    mode()
