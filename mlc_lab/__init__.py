"""mlc_lab: a small machine-learning compiler and the course material that teaches with it."""
import sys as _sys

from . import arith, frontend, ir, relax, runtime, te, tir, topi
from . import script  # installs the printer that every IR node prints through (see ir.node)
from . import meta_schedule, viz  # the top layers: they provide services to lower ones (ir.hooks)
from .driver import build
from .compiler import compile  # noqa: A004  (tvm.compile: PrimFuncs -> build, graphs -> relax.build)
from .ir import IRModule, TVMError, transform
from .runtime import ndarray as nd
from .runtime.device import Device, cpu, cuda
from .runtime.device import device
from .runtime.packed import get_global_func, register_func, register_global_func
from .tir.transform import lower

# `from mlc_lab.transform import PassContext` works as with the course's `tvm.transform`.
_sys.modules[__name__ + ".transform"] = transform

__version__ = "0.1.0"
# mlc_lab.codegen (which loads llvmlite) and mlc_lab.testing are imported where they are used.
__all__ = ["arith", "frontend", "ir", "meta_schedule", "relax", "runtime", "script", "te", "tir", "topi", "viz",
           "transform", "build", "lower", "IRModule", "nd", "Device", "cpu", "cuda", "register_func",
           "get_global_func"]
__all__ += ["device", "TVMError"]
# The reference compiler's current names (`mlc_lab.compile` stays out of `import *`, which
# would hide Python's builtin compile).
__all__ += ["register_global_func"]


def __getattr__(name: str):
    # mlc_lab.testing and mlc_lab.contrib load on first use, so `mlc_lab.testing.assert_allclose`
    # works after a plain `import mlc_lab`, as `tvm.testing` does in the course.
    if name in ("testing", "contrib"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
