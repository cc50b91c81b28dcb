"""NDArray: a tensor handed to compiled functions; it owns storage on its device that they write
into. On the CPU the storage is a numpy array; ``nd.array`` and ``nd.empty`` get it from the
device's allocator (``mlc_lab.runtime.device``), so other devices plug in there.

``nd.array(x)`` copies ``x``; ``a.numpy()`` returns a copy, so results read out are never changed
behind the reader's back by a later call.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..tir import dtype as dt
from .device import Device, cpu


class NDArray:
    __slots__ = ("_array", "device", "_address")

    def __init__(self, array, device: Device | None = None):
        """Wrap ``array``: a numpy array (shared, not copied), or storage ``device`` allocated."""
        if isinstance(array, np.ndarray) and not array.flags.c_contiguous:
            array = np.require(array, requirements="C")   # keeps 0-d arrays 0-d
        self._array = array
        self.device = device or cpu()
        self._address = None

    @classmethod
    def wrap_new(cls, array: np.ndarray, device: Device) -> "NDArray":
        """Wrap a C-contiguous numpy array just allocated (no checks: for hot paths)."""
        self = cls.__new__(cls)
        self._array, self.device, self._address = array, device, None
        return self

    @property
    def address(self) -> int:
        """The address of the first element in host memory, as compiled code takes it. An
        NDArray keeps its storage for life, so the address is worked out once."""
        if self._address is None:
            array = self.numpy_view()
            try:
                self._address = ctypes.addressof(ctypes.c_char.from_buffer(array))
            except (TypeError, ValueError):   # read-only or empty: the slower, general way
                self._address = array.ctypes.data
        return self._address

    @property
    def shape(self) -> tuple:
        return tuple(self._array.shape)

    @property
    def dtype(self) -> str:
        return np.dtype(self._array.dtype).name

    @property
    def ndim(self) -> int:
        return len(self._array.shape)

    def numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array."""
        if isinstance(self._array, np.ndarray):
            return self._array.copy()
        return self.device.copy_to_host(self._array)

    asnumpy = numpy  # the older course notebooks call it this

    def __dlpack__(self, **kwargs):
        """Share the memory with other frameworks: ``torch.from_dlpack(nd_array)``."""
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def to_dlpack(self):
        """A DLPack capsule of this array's memory (``torch.from_dlpack(a.to_dlpack())`` or
        ``torch.utils.dlpack.from_dlpack``); the capsule can be consumed once."""
        return self.__dlpack__()

    def numpy_view(self) -> np.ndarray:
        """The wrapped array itself, without copying: backends write results into it."""
        if not isinstance(self._array, np.ndarray):
            raise ValueError(f"this array lives on {self.device}, not in host memory; read it "
                             "with .numpy()")
        return self._array

    def copyfrom(self, source) -> "NDArray":
        """Overwrite the contents with ``source`` (an NDArray, numpy array or nested list)."""
        src = _host_contents(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match this array's shape "
                             f"{self.shape}")
        if isinstance(self._array, np.ndarray):
            np.copyto(self._array, src, casting="same_kind")
        else:
            self.device.copy_from_host(self._array, src)
        return self

    def copyto(self, target) -> "NDArray":
        """Copy into another NDArray, or to a device (returns the new NDArray)."""
        if isinstance(target, Device):
            return array(self, target)
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        raise TypeError(f"copyto expects an NDArray or a Device, got {type(target).__name__}")

    def __array__(self, dtype=None, copy=None):
        host = self.numpy_view()
        if copy:
            return host.astype(dtype) if dtype else host.copy()
        return host if dtype is None else host.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<mlc_lab.nd.NDArray shape={self.shape}, {self.device}>\n{self._array!r}"


def array(data, device: Device | None = None, dtype: str | None = None) -> NDArray:
    """An NDArray on ``device`` (default: the CPU) holding a copy of ``data`` (numpy array,
    NDArray, or nested list)."""
    np_dtype = None if dtype is None else dt.to_numpy(dt.check_dtype(dtype))
    host = np.asarray(_host_contents(data), dtype=np_dtype)
    device = device or cpu()
    storage = device.allocate(host.shape, host.dtype)
    device.copy_from_host(storage, host)
    return NDArray(storage, device)


def empty(shape, dtype: str = "float32", device: Device | None = None) -> NDArray:
    """A new NDArray of ``shape`` on ``device`` (default: the CPU); its contents are zero, so
    runs are reproducible."""
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    device = device or cpu()
    return NDArray(device.allocate(shape, dt.to_numpy(dt.check_dtype(dtype))), device)


def tensor(data, device: Device | None = None, mem_scope: str | None = None) -> NDArray:
    """``mlc_lab.runtime.tensor(x, dev)``: the reference compiler's current name for
    :func:`array` (an NDArray holding a copy of ``x`` on ``device``, the CPU by default).

    >>> import numpy as np
    >>> tensor(np.arange(3, dtype="int32")).numpy()
    array([0, 1, 2], dtype=int32)
    """
    if mem_scope not in (None, "global"):
        raise ValueError(f"runtime.tensor: memory scope {mem_scope!r} is not supported; arrays live "
                         "in global memory (leave mem_scope out)")
    return array(data, device)


# The reference compiler's current name for the class (``tvm.runtime.Tensor`` in annotations).
Tensor = NDArray


def _host_contents(data):
    """``data``'s contents readable by numpy, without copying what is in host memory already."""
    if isinstance(data, NDArray):
        return data.numpy_view() if isinstance(data._array, np.ndarray) else data.numpy()
    return data


def from_dlpack(tensor) -> NDArray:
    """An NDArray sharing memory with another framework's CPU tensor: an object with
    ``__dlpack__`` (``nd.from_dlpack(torch_tensor)``) or a DLPack capsule
    (``nd.from_dlpack(torch.utils.dlpack.to_dlpack(t))``). Writes through either side are seen
    by the other, so the tensor must be contiguous (compiled code assumes row-major storage)."""
    if type(tensor).__name__ == "PyCapsule":
        tensor = _Capsule(tensor)
    elif not hasattr(tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack expects a tensor with __dlpack__ (torch, numpy, ...) or a DLPack "
                        f"capsule, got {type(tensor).__name__}")
    host = np.from_dlpack(tensor)
    if not host.flags.c_contiguous:
        raise ValueError(f"from_dlpack: the tensor of shape {host.shape} is not contiguous (e.g. a "
                         "transposed view), so compiled code could not share its memory; pass "
                         "tensor.contiguous() instead")
    return NDArray(host)


class _Capsule:
    """A bare DLPack capsule dressed as the producer numpy's from_dlpack expects. The device
    claimed here only gets numpy to read the capsule: numpy then checks the device recorded in
    the capsule itself and refuses one that is not host memory."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)   # kDLCPU


__all__ = ["NDArray", "Tensor", "array", "empty", "from_dlpack", "tensor"]
