"""mlc_lab: a small machine-learning compiler and the course material that teaches with it."""
from . import ir, tir
from .ir import IRModule

__version__ = "0.1.0"
from .runtime import ndarray as nd
from .runtime.device import cpu, cuda, Device
from .driver import build
from .tir.transform import lower
