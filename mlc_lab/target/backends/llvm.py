"""Target "llvm": lower with ``mlc_lab.tir.transform.lower``, render LLVM IR
(``mlc_lab.codegen.llvm``), JIT-compile and call it (``mlc_lab.runtime.llvm_runtime``).

llvmlite is imported on first use, so ``import mlc_lab`` stays light.
"""
from __future__ import annotations

from ..backend import Backend, Capabilities, register_backend

STACK_LIMIT_BYTES = 64 * 1024   # larger (or symbolic) allocations are malloc'd on every call


def _min_parallel_flops() -> float:
    from ...runtime.llvm_runtime import min_parallel_flops
    return min_parallel_flops()


class LLVMBackend(Backend):
    kind = "llvm"
    capabilities = Capabilities(
        device_type="cpu",
        supports_parallel=True,            # one level of T.parallel (the worker pool)
        supports_nested_parallel=False,
        supports_vector=True,
        vector_lanes=(2, 4, 8, 16),        # Ramp/Broadcast widths that map to SIMD registers
        supports_thread_binding=False,     # thread-bound loops need "cuda" or "cuda-sim"
        dialect="llvm",
        stack_limit_bytes=STACK_LIMIT_BYTES,
        parallel_threshold=_min_parallel_flops,   # 5e4 flops natively, more with the Python pool
    )

    def build(self, functions, target):
        from ..._gc import paused
        with paused():   # lowering and LLVM IR building allocate a burst of acyclic objects
            return super().build(functions, target)

    def lower(self, mod, target):
        from ...tir.transform import lower
        return lower(mod)

    def render(self, functions, target=None) -> str:
        from ...codegen.llvm import render_module
        return render_module(functions, target)[0]

    def compile(self, functions, target):
        from ...runtime.llvm_runtime import compile_llvm
        return (functions, *compile_llvm(functions, target))

    def load(self, compiled, target, signatures):
        from ...runtime.llvm_runtime import load_llvm
        from ...runtime.module import Module
        functions, jit, abis = compiled
        return Module(load_llvm(jit, abis, functions, target, signatures), self.kind)


register_backend(LLVMBackend())
