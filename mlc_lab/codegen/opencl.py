"""OpenCL C for the kernels of a GPU function: the same printer as CUDA (``c_source``) in
OpenCL's words. Source only; mlc_lab runs no OpenCL.

    CUDA                          OpenCL
    __global__ void k(float* A)   __kernel void k(__global float* restrict A)
    blockIdx.x / threadIdx.x      get_group_id(0) / get_local_id(0)
    __shared__ float S[128];      __local float S[128];
    __syncthreads();              barrier(CLK_LOCAL_MEM_FENCE);
    *(float4*)(A + i)             vload4(0, A + i)

``reqd_work_group_size`` states the block size, as ``__launch_bounds__`` does in CUDA.
OpenCL wants ``__local`` arrays at the top of the kernel, which is where the printer puts them.
"""
from __future__ import annotations

from .c_source import CSourcePrinter

_TYPES = {"bool": "bool", "int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort",
          "int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong", "float16": "half",
          "float32": "float", "float64": "double"}
_DIMENSION = {"x": 0, "y": 1, "z": 2}


class OpenCLSource(CSourcePrinter):
    TYPES = _TYPES
    MEMORY_TYPES = {"bool": "uchar"}   # OpenCL keeps bool out of memory shared with the host
    INT_SUFFIX = {"int64": "L", "uint32": "U", "uint64": "UL"}
    HELPER_QUALIFIER = "inline"

    def kernel_open(self, kernel, params) -> str:
        args = ", ".join(f"__global {ctype}* restrict {name}" if is_buffer else f"{ctype} {name}"
                         for ctype, name, is_buffer in params)
        size = ", ".join(map(str, kernel.block))
        return (f"__kernel __attribute__((reqd_work_group_size({size}))) void "
                f"{kernel.name}({args}) {{")

    def thread_index(self, tag: str) -> str:
        kind, axis = tag.split(".")
        function = "get_group_id" if kind == "blockIdx" else "get_local_id"
        return f"(int){function}({_DIMENSION[axis]})"

    def barrier(self) -> str:
        return "barrier(CLK_LOCAL_MEM_FENCE);"

    def array(self, scope, ctype, name, size, aligned) -> str:
        return f"{'__local ' if scope == 'shared' else ''}{ctype} {name}[{size}];"

    def vector_load(self, vtype, pointer) -> str:
        return f"vload{vtype[-1]}(0, {pointer})"

    def vector_store(self, vtype, pointer, value) -> str:
        return f"vstore{vtype[-1]}({value}, 0, {pointer});"

    def vector_make(self, vtype, lanes) -> str:
        return f"({vtype})({', '.join(lanes)})"

    def preamble(self) -> list[str]:
        lines = ["// (OpenCL's global work size is grid * block)"]
        for dtype, extension in (("float64", "cl_khr_fp64"), ("float16", "cl_khr_fp16")):
            if dtype in self.features:
                lines.append(f"#pragma OPENCL EXTENSION {extension} : enable")
        return lines

    def float_special(self, value, dtype) -> str:
        text = "NAN" if value != value else "INFINITY" if value > 0 else "-INFINITY"
        return text if dtype == "float32" else f"({self.ctype(dtype)}){text}"


def render_opencl(programs) -> str:
    """The OpenCL C of every kernel of ``programs`` (a ``DeviceProgram`` or a list of them)."""
    return OpenCLSource().source(programs)
