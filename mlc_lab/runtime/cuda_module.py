"""What ``mlc_lab.build(mod, target="cuda")`` returns: functions that launch their kernels on a GPU
(pycuda) or on the cuda-sim simulator (``mlc_lab.runtime.cuda.mode()``), the CUDA source, and a
profile of the simulated run.

    lib = mlc_lab.build(sch.mod, target="cuda")
    lib["main"](A_nd, B_nd, C_nd)                      # arrays on mlc_lab.cuda(0)
    print(lib.imported_modules[0].get_source())        # CUDA C (also lib.get_source("cuda"))
    lib.profile(A_nd, B_nd, C_nd)                      # the simulator's counters, as a table

Target "cuda-sim" always simulates and takes CPU arrays (or cuda ones) as well.
"""
from __future__ import annotations

import numpy as np

from ..tir.buffer import Buffer
from .device import Device
from .module import BenchmarkResult, Module, bind_arguments
from .ndarray import NDArray


class CUDASourceModule:
    """The device code of a GPU build, as ``rt_mod.imported_modules[0]``."""

    def __init__(self, source: str, ptx: str | None):
        self.source, self.ptx = source, ptx
        self.type_key = "cuda"

    def get_source(self, fmt: str = "cuda") -> str:
        """"cuda" (or ""): the CUDA C; "ptx": NVRTC's PTX (None where NVRTC is missing)."""
        if fmt in ("cuda", "cu", ""):
            return self.source
        if fmt == "ptx":
            if self.ptx is None:
                raise ValueError("no PTX: NVRTC was not found when this module was built "
                                 "(pip install nvidia-cuda-nvrtc-cu12)")
            return self.ptx
        raise ValueError(f"get_source: unknown format {fmt!r} for CUDA device code; use 'cuda' or 'ptx'")

    def __repr__(self) -> str:
        return "<mlc_lab CUDA device module>"


class CUDAFunction:
    """One PrimFunc built for a GPU: checks its arguments, then launches its kernels in order."""

    def __init__(self, program, signature, target, simulate_only: bool, cubin=None):
        self.program, self.signature, self.target = program, signature, target
        self.name = program.name
        self.simulate_only = simulate_only
        self._ptx, self._gpu_functions = cubin, None

    @property
    def device(self) -> Device:
        return Device("cpu" if self.simulate_only else "cuda", 0)

    def __call__(self, *args):
        """Run every kernel, on the GPU or the simulator (without counting: see CUDAModule.profile)."""
        from .cuda_device import mode
        if not self.simulate_only and mode() == "gpu":
            self._launch_on_gpu(args)
        else:
            self._simulate(self._host_arrays(args), counters=False)

    # -- simulator --------------------------------------------------------------------------
    def _host_arrays(self, args) -> list:
        if self.simulate_only:   # cuda arrays of a simulated GPU are host arrays too
            args = _host_visible(args)
        values, _ = bind_arguments(self.signature, self.name, args, self.device)
        return values

    def _simulate(self, values: list, counters: bool, trace: bool = False, blocks=None) -> list:
        from .cuda_sim import simulate_program
        arrays = [v.reshape(-1) if isinstance(p, Buffer) else v
                  for p, v in zip(self.program.func.params, values)]
        return simulate_program(self.program, arrays, target=self.target, counters=counters,
                                trace=trace, blocks=blocks)

    # -- GPU ----------------------------------------------------------------------------------
    def _launch_on_gpu(self, args):
        import pycuda.driver as driver
        if self._gpu_functions is None:
            if self._ptx is None:
                raise RuntimeError(f"{self.name}(): no PTX to load: NVRTC was not found when this "
                                   "module was built (pip install nvidia-cuda-nvrtc-cu12)")
            module = driver.module_from_buffer(self._ptx.encode())
            self._gpu_functions = [module.get_function(k.name) for k in self.program.kernels]
        bound = self._device_arguments(args)
        for kernel, function in zip(self.program.kernels, self._gpu_functions):
            function(*[bound[p] for p in kernel.params], block=kernel.block, grid=kernel.grid)

    def _device_arguments(self, args) -> dict:
        from .module import _scalar
        func = self.signature
        if len(args) != len(func.params):
            raise TypeError(f"{self.name}() takes {len(func.params)} argument(s) but {len(args)} "
                            "were given")
        bound = {}
        for param, lowered, arg in zip(func.params, self.program.func.params, args):
            if isinstance(param, Buffer):
                bound[lowered] = _gpu_pointer(self.name, param, arg)
            else:
                bound[lowered] = _scalar(self.name, param, arg)
        import pycuda.gpuarray as gpuarray
        for buffer in self.program.scratch:
            bound[buffer] = gpuarray.zeros(_elements(buffer), buffer.dtype).gpudata
        return bound


def _gpu_pointer(name: str, param: Buffer, arg):
    if not isinstance(arg, NDArray) or arg.device.device_type != "cuda":
        raise ValueError(f"{name}(): parameter {param.name} must be an array on the GPU; copy it "
                         "with mlc_lab.nd.array(x, mlc_lab.cuda(0))")
    expected = tuple(int(d.value) for d in param.shape)
    if arg.shape != expected or arg.dtype != param.dtype:
        raise ValueError(f"{name}(): parameter {param.name} expects shape {expected} and dtype "
                         f"{param.dtype} but got {arg.shape} {arg.dtype}")
    return arg._array.gpudata


def _elements(buffer: Buffer) -> int:
    size = 1
    for dim in buffer.shape:
        size *= int(dim.value)
    return size


class CUDAModule(Module):
    """A GPU build: ``lib[name](*args)``, ``get_source("cuda" | "ptx" | "opencl")``,
    ``imported_modules[0].get_source()``, ``profile``, and ``time_evaluator`` (CUDA events on a
    GPU; the simulator's estimate for the target GPU otherwise)."""

    def __init__(self, functions: dict, target, device_module: CUDASourceModule):
        super().__init__(functions, target.kind.name, [device_module])
        self.target_obj = target

    def get_source(self, fmt: str = "cuda") -> str:
        if fmt == "opencl":   # the same kernels as OpenCL C, rendered when asked for
            from ..codegen.opencl import render_opencl
            return render_opencl([f.program for f in self._functions.values()])
        return self.imported_modules[0].get_source(fmt)

    def simulate(self, *args, func_name: str | None = None, trace: bool = False,
                 blocks=None) -> list:
        """Run ``func_name`` (the entry function by default) on the simulator with its counters
        (and a trace of who stored what, with ``trace=True``): one ``cuda_sim.KernelRun`` per
        kernel, in launch order. Arrays on a real GPU are copied for it and left untouched.
        ``blocks``: simulate only that many blocks of each kernel, spread over its grid (their
        outputs alone are written; estimates scale their counters to the whole grid)."""
        func = self.get_function(func_name or self.entry_name)
        runs = func._simulate(func._host_arrays(_host_visible(args)), counters=True, trace=trace,
                              blocks=blocks)
        for run in runs:   # occupancy from the compiler's register count where ptxas is at hand
            run.registers = self._ptxas_registers().get(run.kernel.name, run.registers)
        return runs

    def _ptxas_registers(self) -> dict:
        if not hasattr(self, "_registers"):
            from . import nvrtc
            device = self.imported_modules[0]
            found = None
            if device.ptx is not None:
                try:
                    found = nvrtc.ptxas_resources(device.ptx, self.target_obj)
                except nvrtc.NVRTCError:
                    found = None
            self._registers = {k: v["registers"] for k, v in (found or {}).items()}
        return self._registers

    def profile(self, *args, func_name: str | None = None):
        """The simulator's profile of one call: memory requests, sectors, bank conflicts,
        occupancy and the time estimate, as a table (text, HTML in a notebook) with ``plot()``;
        a list of them for a function that launches several kernels."""
        profiles = [run.report(self.target_obj) for run in self.simulate(*args, func_name=func_name)]
        return profiles[0] if len(profiles) == 1 else profiles

    def estimate_seconds(self, *args, func_name: str | None = None) -> float:
        """The simulator's time estimate of one call on the target GPU (not a measurement)."""
        from .cuda_sim import estimate_seconds
        return sum(estimate_seconds(run, self.target_obj)
                   for run in self.simulate(*args, func_name=func_name))

    def who_wrote(self, buffer: str, *args, func_name: str | None = None):
        """``(block_of, thread_of)``: for each element of the parameter ``buffer``, the linear
        index of the block and of the thread (within its block) that last stored it, -1 where
        nothing did; arrays of the parameter's shape, for ``viz.gpu.draw_thread_grid``."""
        func = self.get_function(func_name or self.entry_name)
        param = next((p for p in func.signature.params if getattr(p, "name", None) == buffer), None)
        if not isinstance(param, Buffer):
            names = ", ".join(p.name for p in func.signature.params if isinstance(p, Buffer))
            raise KeyError(f"{func.name} has no buffer parameter {buffer!r}; it has {names}")
        shape = tuple(int(d.value) for d in param.shape)
        block_of = np.full(int(np.prod(shape)), -1)
        thread_of = np.full(int(np.prod(shape)), -1)
        for run in self.simulate(*args, func_name=func_name, trace=True):
            if buffer not in run.trace.sizes:    # this kernel does not store to it
                continue
            writers = run.trace.writers(buffer)
            kernel = run.kernel
            blocks = _linear(writers["block"], kernel.grid)
            threads = _linear(writers["thread"], kernel.block)
            written = blocks >= 0
            block_of[written], thread_of[written] = blocks[written], threads[written]
        return block_of.reshape(shape), thread_of.reshape(shape)

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0):
        from .cuda_device import mode
        func = self.get_function(func_name)
        if not func.simulate_only and mode() == "gpu":
            return _event_timer(func, number, repeat)

        def estimate(*args) -> BenchmarkResult:
            return BenchmarkResult([self.estimate_seconds(*args, func_name=func_name)] * repeat)
        return estimate


def _linear(xyz, dims) -> np.ndarray:
    """Linear ids of (x, y, z) rows (x fastest, as CUDA numbers threads); -1 rows stay -1."""
    xyz = np.asarray(xyz)
    ids = xyz[:, 0] + dims[0] * (xyz[:, 1] + dims[1] * xyz[:, 2])
    return np.where(xyz[:, 0] < 0, -1, ids)


def _host_visible(args) -> list:
    """Arrays of a simulated GPU as they are; arrays in real GPU memory copied to the host (a
    profile of a GPU build runs on the simulator, leaving the GPU's arrays untouched)."""
    out = []
    for a in args:
        if isinstance(a, NDArray) and a.device.device_type == "cuda":
            a = a.numpy_view() if isinstance(a._array, np.ndarray) else a.numpy()
        out.append(a)
    return out


def _event_timer(func: CUDAFunction, number: int, repeat: int):
    """Time ``number`` launches per repeat between two CUDA events."""
    import pycuda.driver as driver

    def evaluate(*args) -> BenchmarkResult:
        func(*args)
        results = []
        for _ in range(repeat):
            start, end = driver.Event(), driver.Event()
            start.record()
            for _ in range(number):
                func(*args)
            end.record()
            end.synchronize()
            results.append(start.time_till(end) / 1e3 / number)
        return BenchmarkResult(results)
    return evaluate


class SourceOnlyModule(Module):
    """A build for a target mlc_lab generates source for but cannot run ("opencl"):
    ``imported_modules[0].get_source()`` is the source; calling a function says what to do."""

    def __init__(self, names: list, source: str, kind: str):
        functions = {name: _NotRunnable(name, kind) for name in names}
        super().__init__(functions, kind, [_Source(source, kind)])

    def get_source(self, fmt: str = "") -> str:
        return self.imported_modules[0].get_source(fmt)


class _Source:
    def __init__(self, source: str, kind: str):
        self.source, self.type_key = source, kind

    def get_source(self, fmt: str = "") -> str:
        return self.source


class _NotRunnable:
    def __init__(self, name: str, kind: str):
        self.name, self.kind = name, kind

    def __call__(self, *args):
        raise RuntimeError(f"{self.name}(): target {self.kind!r} produces source only; build for "
                           "'cuda' to run the kernels (on a GPU, or on the cuda-sim simulator)")
