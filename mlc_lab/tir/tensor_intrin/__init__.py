"""The library of registered tensor intrinsics: importing this package registers, under the
names the reference compiler uses, the dot-product and matrix instructions of x86, Arm, Hexagon,
NVIDIA and AMD hardware, each as a (description, implementation) pair for ``sch.tensorize``. The
name constants live in the module of each target (``x86.VNNI_DOT_16x4_INTRIN``, ...).

The descriptions are ordinary prim_funcs: they parse, verify, run on the interpreter and say
exactly what the instruction computes. The implementations stand for the instruction as an
opaque call, which mlc_lab's backends do not execute: a tensorized program prints and schedules,
and building it is refused with a message naming the call.

>>> from mlc_lab.tir import TensorIntrin
>>> TensorIntrin.get(x86.VNNI_DOT_16x4_INTRIN).desc.buffer_params[1].shape
(16, 4)
"""
from . import arm_cpu, cuda, dot_product_common, hexagon, rocm, x86  # noqa: F401  (registers)

__all__ = ["arm_cpu", "cuda", "dot_product_common", "hexagon", "rocm", "x86"]
