"""CUDA C for the kernels of a GPU function.

    program = split_host_device(lowered_func, Target("nvidia/a100"))
    print(render_cuda(program))

gives, for the course's vector add (one thread per element, blocks of 128)::

    // main: 1 kernel(s), launched one after another
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
vector accesses ``float4``/``float2`` loads and stores.
"""
from __future__ import annotations

import struct

from .c_source import CSourcePrinter

_TYPES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
          "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int",
          "int64": "long long", "uint64": "unsigned long long", "float16": "half",
          "float32": "float", "float64": "double"}


class CUDASource(CSourcePrinter):
    TYPES = _TYPES
    INT_SUFFIX = {"int64": "LL", "uint32": "U", "uint64": "ULL"}
    FLOAT32_SUFFIX = "f"
    HELPER_QUALIFIER = "__device__ __forceinline__"

    def kernel_open(self, kernel, params) -> str:
        args = ", ".join(f"{ctype}* __restrict__ {name}" if is_buffer else f"{ctype} {name}"
                         for ctype, name, is_buffer in params)
        return (f'extern "C" __global__ void __launch_bounds__({kernel.threads_per_block}) '
                f"{kernel.name}({args}) {{")

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

    def float_special(self, value, dtype) -> str:
        if dtype == "float64":
            bits = struct.unpack("<q", struct.pack("<d", value))[0]
            return f"__longlong_as_double({bits}LL)"
        bits = struct.unpack("<i", struct.pack("<f", value))[0]
        text = f"__int_as_float({bits})"
        return text if dtype == "float32" else f"({self.ctype(dtype)}){text}"


def render_cuda_kernel(kernel, printer: CUDASource | None = None) -> str:
    """One kernel's CUDA C (a source compiling it also needs the helpers ``printer`` collected:
    use ``render_cuda`` for a whole program)."""
    return (printer or CUDASource()).kernel(kernel)


def render_cuda(program) -> str:
    """The CUDA C of every kernel of ``program`` (a ``DeviceProgram``), as one source file."""
    printer = CUDASource()
    kernels = [printer.kernel(k) for k in program.kernels]
    header = [f"// {program.name}: {len(program.kernels)} kernel(s), launched one after another"]
    header += [f"//   {k.name}: grid {k.grid}, block {k.block}, {k.shared_bytes} bytes of shared "
               "memory" for k in program.kernels]
    if "float16" in printer.features:
        header.append("#include <cuda_fp16.h>")
    return "\n\n".join(["\n".join(header), *printer.helpers.values(), *kernels]) + "\n"
