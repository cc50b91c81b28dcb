"""Devices: where arrays live and programs run (``mlc_lab.cpu()``, ``mlc_lab.cuda(0)``)."""
from __future__ import annotations

DEVICE_TYPES = ("cpu", "cuda")


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
    def exist(self) -> bool:
        """True when the device is really there (the CPU always is; a CUDA device needs pycuda
        and a driver that reports enough GPUs)."""
        if self.device_type == "cpu":
            return True
        return self.index < _cuda_device_count()

    def __eq__(self, other) -> bool:
        return isinstance(other, Device) and (self.device_type, self.index) == (
            other.device_type, other.index)

    def __hash__(self) -> int:
        return hash((self.device_type, self.index))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.index})"


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
