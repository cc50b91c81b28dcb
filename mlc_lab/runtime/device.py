"""Devices: where arrays live and programs run (``mlc_lab.cpu()``, ``mlc_lab.cuda(0)``).

A device's memory is managed by the Allocator registered for its type: ``dev.allocate(shape,
dtype)`` returns storage (an object with ``shape`` and ``dtype``), ``copy_from_host`` /
``copy_to_host`` move numpy arrays in and out, ``free`` releases it. The host allocator (numpy)
serves "cpu"; a runtime for another device type registers its own with ``register_allocator``.
"""
from __future__ import annotations

import numpy as np

ALIGNMENT = 64   # bytes: a cache line, and the widest vector load (AVX-512)


def zeros(shape, dtype) -> np.ndarray:
    """A zero-filled numpy array whose data starts on an ALIGNMENT boundary. numpy's own start
    16 bytes into a cache line as often as not, and a kernel's vector loads from such an array
    each straddle two lines: measured, a whole model ran 10% slower from one build to the next
    as its constants happened to land."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.zeros(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``array`` on an ALIGNMENT boundary."""
    out = zeros(array.shape, array.dtype)
    np.copyto(out, array)
    return out

DEVICE_TYPES = ("cpu", "cuda")


class Allocator:
    """Memory of one device type. ``host_visible``: its storage is a numpy array the host can
    read and write directly (NDArray then shares it instead of copying)."""
    host_visible = False

    def allocate(self, device: "Device", shape: tuple, dtype: np.dtype):
        """Zero-filled storage (so runs are reproducible)."""
        raise NotImplementedError

    def free(self, storage) -> None:
        raise NotImplementedError

    def copy_from_host(self, storage, array: np.ndarray) -> None:
        raise NotImplementedError

    def copy_to_host(self, storage) -> np.ndarray:
        """A new host array holding the contents."""
        raise NotImplementedError


class HostAllocator(Allocator):
    host_visible = True

    def allocate(self, device, shape, dtype):
        return zeros(shape, dtype)

    def free(self, storage) -> None:
        """Nothing to do: numpy frees the array when the last reference goes."""

    def copy_from_host(self, storage, array):
        np.copyto(storage, array, casting="same_kind")

    def copy_to_host(self, storage):
        return storage.copy()


_ALLOCATORS: dict[str, Allocator] = {"cpu": HostAllocator()}


def register_allocator(device_type: str, allocator: Allocator) -> None:
    """Serve the memory of every ``device_type`` device with ``allocator`` (replacing any)."""
    if device_type not in DEVICE_TYPES:
        raise ValueError(f"unknown device type {device_type!r}; expected one of {DEVICE_TYPES}")
    _ALLOCATORS[device_type] = allocator


class Device:
    """A device named by type and index, e.g. ``cpu(0)``. Two devices with the same type and
    index are equal."""
    __slots__ = ("device_type", "index")

    def __init__(self, device_type: str, index: int = 0):
        if device_type not in DEVICE_TYPES:
            raise ValueError(f"unknown device type {device_type!r}; expected one of {DEVICE_TYPES}")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"device index must be a non-negative int, got {index!r}")
        self.device_type = device_type
        self.index = index

    @property
    def device_id(self) -> int:
        return self.index

    @property
    def exist(self) -> bool:
        """True when the device is really there (the CPU always is; a CUDA device needs pycuda
        and a driver that reports enough GPUs)."""
        if self.device_type == "cpu":
            return True
        return self.index < _cuda_device_count()

    @property
    def allocator(self) -> Allocator:
        if self.device_type == "cuda" and "cuda" not in _ALLOCATORS:
            from .cuda_device import install_allocator   # the GPU, or the simulator without one
            install_allocator()
        if self.device_type not in _ALLOCATORS:
            raise RuntimeError(f"no allocator is registered for {self.device_type} devices yet, "
                               f"so arrays cannot live on {self}; use mlc_lab.cpu()")
        return _ALLOCATORS[self.device_type]

    @property
    def host_visible(self) -> bool:
        return self.device_type in _ALLOCATORS and self.allocator.host_visible

    def allocate(self, shape, dtype):
        return self.allocator.allocate(self, tuple(shape), np.dtype(dtype))

    def free(self, storage) -> None:
        self.allocator.free(storage)

    def copy_from_host(self, storage, array: np.ndarray) -> None:
        self.allocator.copy_from_host(storage, array)

    def copy_to_host(self, storage) -> np.ndarray:
        return self.allocator.copy_to_host(storage)

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and (self.device_type, self.index) == (
            other.device_type, other.index)

    def __hash__(self) -> int:
        return hash((self.device_type, self.index))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.index})"


# What device runs the code of each target or device name that ``device()`` accepts.
_DEVICE_OF_NAME = {"cpu": "cpu", "llvm": "cpu", "c": "cpu", "python": "cpu", "numpy": "cpu",
                   "cuda-sim": "cpu", "cuda": "cuda", "gpu": "cuda", "nvptx": "cuda"}
_UNSUPPORTED_DEVICES = ("opencl", "cl", "vulkan", "metal", "rocm", "webgpu")


def device(dev_type, index: int = 0) -> Device:
    """The device that runs code for ``dev_type``, a device or target name: ``device("llvm", 0)``
    is ``cpu(0)``, ``device("cuda", 0)`` is ``cuda(0)``. A target string with options
    (``"llvm -num-cores=2"``) names the device of its kind."""
    if isinstance(dev_type, Device):
        return dev_type
    if not isinstance(dev_type, str) or not dev_type.split():
        raise TypeError(f"device() expects a device or target name such as 'llvm' or 'cuda', got "
                        f"{dev_type!r}")
    name = dev_type.split()[0]
    if name in _UNSUPPORTED_DEVICES:
        raise ValueError(f"mlc_lab has no {name} runtime; run on mlc_lab.cpu() (target 'llvm') "
                         "or mlc_lab.cuda() (target 'cuda') instead")
    if name not in _DEVICE_OF_NAME:
        raise ValueError(f"unknown device {dev_type!r}; expected one of "
                         f"{', '.join(sorted(_DEVICE_OF_NAME))}")
    return Device(_DEVICE_OF_NAME[name], index)


def cpu(n: int = 0) -> Device:
    return Device("cpu", n)


def cuda(n: int = 0) -> Device:
    return Device("cuda", n)


def _cuda_device_count() -> int:
    try:
        import pycuda.driver as driver

        driver.init()
        return driver.Device.count()
    except Exception:  # no pycuda, no driver, or a driver that cannot start: all mean "no GPU"
        return 0
