"""Running compiled programs: devices, NDArrays, runtime Modules, and the reference interpreter."""
from . import ndarray
from .device import Device, cpu, cuda, device
from .interpreter import Program, run
from .interpreter.expr import UninitializedReadError
from .module import BenchmarkResult, Module, bind_arguments
from .ndarray import NDArray, Tensor, empty, from_dlpack, tensor

__all__ = ["BenchmarkResult", "Device", "Module", "NDArray", "Program", "UninitializedReadError",
           "bind_arguments", "cpu", "cuda", "device", "ndarray", "run"]
__all__ += ["Tensor", "empty", "from_dlpack", "tensor"]   # the reference compiler's current names
