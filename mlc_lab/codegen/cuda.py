"""CUDA C for the kernels of a GPU function.

    program = split_host_device(lowered_func, Target("nvidia/a100"))
    print(render_cuda(program))

gives, for the course's vector add (one thread per element, blocks of 128)::

    // main: 1 kernel(s), launched in this order
    //   main_kernel0: grid (8, 1, 1), block (128, 1, 1), 0 bytes of shared memory

    extern "C" __global__ void __launch_bounds__(128) main_kernel0(float* __restrict__ A, ...) {
      if ((int)blockIdx.x * 128 + (int)threadIdx.x < 1000) {
        C[(int)blockIdx.x * 128 + (int)threadIdx.x] = A[...] + B[...];
      }
    }

``extern "C"`` keeps the kernel's name unmangled, so the PTX entry is ``main_kernel0``.
``__launch_bounds__`` tells the compiler the block size, so it can spend registers for it.
``threadIdx.x`` is unsigned in CUDA; the IR's thread indices are int32, hence ``(int)``.
``shared`` buffers become ``__shared__`` arrays, ``local`` ones per-thread arrays (registers,
when every index is a constant after unrolling), barriers ``__syncthreads()``, and aligned
vector accesses ``float4``/``float2`` loads and stores. Buffers in the ``wmma.*`` scopes become
arrays of tensor-core fragments, and the wmma builtins calls of ``<mma.h>`` (``cuda_wmma``).
"""
from __future__ import annotations

import struct

from .c_source import CSourcePrinter
from .cuda_wmma import WmmaPrinter, ptx_call, wmma_call

_TYPES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
          "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int",
          "int64": "long long", "uint64": "unsigned long long", "float16": "half",
          "float32": "float", "float64": "double"}


class CUDASource(WmmaPrinter, CSourcePrinter):
    TYPES = _TYPES
    INT_SUFFIX = {"int64": "LL", "uint32": "U", "uint64": "ULL"}
    FLOAT32_SUFFIX = "f"
    HELPER_QUALIFIER = "__device__ __forceinline__"

    def kernel_open(self, kernel, params) -> str:
        args = ", ".join(f"{ctype}* __restrict__ {name}" if is_buffer else f"{ctype} {name}"
                         for ctype, name, is_buffer in params)
        return (f'extern "C" __global__ void __launch_bounds__({kernel.threads_per_block}) '
                f"{kernel.name}({args}) {{")

    def kernel(self, kernel) -> str:
        self.scan_fragments(kernel.body)
        return super().kernel(kernel)

    def declare(self, buffer) -> None:
        if id(buffer) in self.aligned:   # registers of ptx instructions, read 32 bits at a time
            self.vectored.add(id(buffer))
        super().declare(buffer)

    def visit_Allocate(self, s):
        if s.buffer.scope.startswith("wmma."):   # an array of fragments (cuda_wmma)
            self.declare_fragment(s.buffer)
            self.visit(s.body)
            return
        super().visit_Allocate(s)

    def visit_Evaluate(self, s):
        if wmma_call(s.value) is not None:
            self.line(self.wmma_statement(s.value))
            return
        if ptx_call(s.value) is not None:
            self.line(self.ptx_statement(s.value))
            return
        super().visit_Evaluate(s)

    def thread_index(self, tag: str) -> str:
        return f"(int){tag}"

    def barrier(self) -> str:
        return "__syncthreads();"

    def array(self, scope, ctype, name, size, aligned) -> str:
        qualifier = "__shared__ " if scope == "shared" else ""
        return f"{qualifier}{'__align__(16) ' if aligned else ''}{ctype} {name}[{size}];"

    def vector_load(self, vtype, pointer) -> str:
        return f"*({vtype}*)({pointer})"

    def vector_store(self, vtype, pointer, value) -> str:
        return f"*({vtype}*)({pointer}) = {value};"

    def vector_make(self, vtype, lanes) -> str:
        return f"make_{vtype}({', '.join(lanes)})"

    def preamble(self) -> list[str]:
        lines = ["#include <cuda_fp16.h>"] if "float16" in self.features else []
        return lines + (["#include <mma.h>"] if "wmma" in self.features else [])

    def float_special(self, value, dtype) -> str:
        if dtype == "float64":
            bits = struct.unpack("<Q", struct.pack("<d", value))[0]
            return f"__longlong_as_double({bits:#x}ULL)"
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        text = f"__int_as_float({bits:#x})"
        return text if dtype == "float32" else f"({self.ctype(dtype)}){text}"


def render_cuda_kernel(kernel) -> str:
    """One kernel's CUDA C, after the helper functions it calls (no launch comment)."""
    printer = CUDASource()
    text = printer.kernel(kernel)
    return "\n\n".join([*printer.preamble(), *printer.helpers.values(), text]) + "\n"


def render_cuda(programs) -> str:
    """The CUDA C of every kernel of ``programs`` (a ``DeviceProgram`` or a list of them), as
    one source file whose header comment gives each kernel's launch configuration."""
    return CUDASource().source(programs)
