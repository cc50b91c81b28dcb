"""mlc_lab: a small machine-learning compiler and the course material that teaches with it."""
from . import ir, tir
from .driver import build
from .ir import IRModule
from .runtime import ndarray as nd
from .runtime.device import Device, cpu, cuda
from .tir.transform import lower

__version__ = "0.1.0"
__all__ = ["ir", "tir", "build", "lower", "IRModule", "nd", "Device", "cpu", "cuda"]
