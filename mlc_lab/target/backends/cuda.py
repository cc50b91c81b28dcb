"""Targets "cuda" and "cuda-sim": lower like the CPU targets, then split each function into
kernels and add their barriers (``tir.transform.gpu_passes``: "split_host_device", "inject_sync"),
render CUDA C (``codegen.cuda``), compile it to PTX with NVRTC where available (no GPU needed),
and load functions that launch the kernels on a GPU or on the cuda-sim simulator
(``runtime.cuda_module``).

"cuda" always builds: with no GPU, ``cuda(0)`` arrays and kernels run on the simulator.
"cuda-sim" always simulates.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..backend import Backend, Capabilities, register_backend


@dataclass
class CompiledCUDA:
    programs: dict       # name -> DeviceProgram
    source: str          # CUDA C of every kernel
    ptx: str | None      # NVRTC's output; None where NVRTC is not installed


class CUDABackend(Backend):
    kind = "cuda"
    capabilities = Capabilities(device_type="cuda", supports_vector=True, vector_lanes=(2, 4),
                                supports_thread_binding=True, max_threads_per_block=1024,
                                gpu=True, dialect="cuda")
    simulate_only = False

    def lower(self, mod, target):
        from ...tir.transform import gpu_passes, lower
        return lower(mod, extra_passes=gpu_passes(target))

    def lowered_functions(self, lowered, names) -> dict:
        from ...tir.transform import device_programs
        programs = device_programs(lowered)
        return {name: programs[name] for name in names}

    def programs(self, functions: dict, target) -> dict:
        """Each function's kernels: DevicePrograms (from ``lower``) as they are; lowered PrimFuncs
        (given to ``render``) go through the GPU passes first."""
        from ...tir.transform.split_host_device import DeviceProgram
        if all(isinstance(f, DeviceProgram) for f in functions.values()):
            return dict(functions)
        from ...ir import IRModule
        from ...ir.transform import Sequential
        from ...tir.transform import device_programs, gpu_passes
        mod = Sequential(gpu_passes(target), name="gpu_passes")(IRModule(functions))
        return device_programs(mod)

    def render(self, functions, target=None) -> str:
        from ...codegen.cuda import render_cuda
        return render_cuda(list(self.programs(functions, target).values()))

    def compile(self, functions, target):
        programs = self.programs(functions, target)
        from ...codegen.cuda import render_cuda
        from ...runtime import nvrtc
        source = render_cuda(list(programs.values()))
        ptx = nvrtc.compile_ptx(source, arch=target.attrs.get("arch") or "sm_80") \
            if nvrtc.available() else None
        return CompiledCUDA(programs, source, ptx)

    def load(self, compiled, target, signatures):
        from ...runtime.cuda_module import CUDAFunction, CUDAModule, CUDASourceModule
        functions = {name: CUDAFunction(program, signatures[name], target, self.simulate_only,
                                        compiled.ptx)
                     for name, program in compiled.programs.items()}
        return CUDAModule(functions, target, CUDASourceModule(compiled.source, compiled.ptx))


class CUDASimBackend(CUDABackend):
    kind = "cuda-sim"
    capabilities = replace(CUDABackend.capabilities, device_type="cpu")   # runs on this CPU
    simulate_only = True


class OpenCLBackend(CUDABackend):
    """Target "opencl": the same kernels as OpenCL C, source only (no OpenCL runtime)."""
    kind = "opencl"
    capabilities = replace(CUDABackend.capabilities, device_type="opencl", dialect="opencl")

    def render(self, functions, target=None) -> str:
        from ...codegen.opencl import render_opencl
        return render_opencl(list(self.programs(functions, target).values()))

    def compile(self, functions, target):
        from ...codegen.opencl import render_opencl
        programs = self.programs(functions, target)
        return CompiledCUDA(programs, render_opencl(list(programs.values())), None)

    def load(self, compiled, target, signatures):
        from ...runtime.cuda_module import SourceOnlyModule
        return SourceOnlyModule(list(compiled.programs), compiled.source, "opencl")


register_backend(CUDABackend())
register_backend(CUDASimBackend())
register_backend(OpenCLBackend())
