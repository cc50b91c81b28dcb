"""NDArray: a tensor handed to compiled functions; it owns a numpy array that they write into.

``nd.array(x)`` copies ``x``; ``a.numpy()`` returns a copy, so results read out are never changed
behind the reader's back by a later call.
"""
from __future__ import annotations

import numpy as np

from ..tir import dtype as dt
from .device import Device, cpu


class NDArray:
    __slots__ = ("_array", "device")

    def __init__(self, array: np.ndarray, device: Device | None = None):
        self._array = np.require(array, requirements="C")   # keeps 0-d arrays 0-d
        self.device = device or cpu()

    @property
    def shape(self) -> tuple:
        return tuple(self._array.shape)

    @property
    def dtype(self) -> str:
        return self._array.dtype.name

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array."""
        return self._array.copy()

    asnumpy = numpy  # the older course notebooks call it this

    def __dlpack__(self, **kwargs):
        """Share the memory with other frameworks: ``torch.from_dlpack(nd_array)``."""
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def numpy_view(self) -> np.ndarray:
        """The wrapped array itself, without copying: backends write results into it."""
        return self._array

    def copyfrom(self, source) -> "NDArray":
        """Overwrite the contents with ``source`` (an NDArray, numpy array or nested list)."""
        src = source.numpy_view() if isinstance(source, NDArray) else np.asarray(source)
        if src.shape != self._array.shape:
            raise ValueError(f"copyfrom: shape {src.shape} does not match this array's shape "
                             f"{self.shape}")
        np.copyto(self._array, src, casting="same_kind")
        return self

    def copyto(self, target) -> "NDArray":
        """Copy into another NDArray, or to a device (returns the new NDArray)."""
        if isinstance(target, Device):
            return NDArray(self._array.copy(), target)
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        raise TypeError(f"copyto expects an NDArray or a Device, got {type(target).__name__}")

    def __array__(self, dtype=None, copy=None):
        if copy:
            return self._array.astype(dtype) if dtype else self._array.copy()
        return self._array if dtype is None else self._array.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<mlc_lab.nd.NDArray shape={self.shape}, {self.device}>\n{self._array!r}"


def array(data, device: Device | None = None, dtype: str | None = None) -> NDArray:
    """An NDArray holding a copy of ``data`` (numpy array, NDArray, or nested list)."""
    if isinstance(data, NDArray):
        data = data.numpy_view()
    arr = np.array(data, dtype=None if dtype is None else dt.to_numpy(dt.check_dtype(dtype)))
    return NDArray(arr, device)


def empty(shape, dtype: str = "float32", device: Device | None = None) -> NDArray:
    """A new NDArray of ``shape`` (its contents are zero, so runs are reproducible)."""
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    return NDArray(np.zeros(shape, dt.to_numpy(dt.check_dtype(dtype))), device)


__all__ = ["NDArray", "array", "empty"]


def from_dlpack(tensor) -> NDArray:
    """An NDArray sharing memory with another framework's CPU tensor (e.g. a torch tensor)."""
    return NDArray(np.from_dlpack(tensor))
