"""cuda-sim: the CUDA execution model on the CPU, for kernels from ``split_host_device``.

    from mlc_lab.runtime.cuda_sim import simulate, estimate_seconds
    program = split_host_device(mlc_lab.lower(sch.mod)["main"], Target("nvidia/a100"))
    run = simulate(program.kernels[0], {A: a, B: b, C: c})   # results land in the arrays
    print(run.report())                                       # counters, occupancy, time estimate
    estimate_seconds(run, "nvidia/a100")

The simulator runs every thread of a grid, vectorised with numpy (``executor``), and reports
what a GPU would get wrong: data races on shared memory (``DataRaceError``), out-of-bounds
accesses (``OutOfBoundsError``) and barriers inside divergent control flow
(``BarrierDivergenceError``). It counts what makes a GPU kernel fast or slow (``counters``):
global memory requests and 32-byte sectors (coalescing), shared-memory bank conflicts, accesses
per thread, registers and occupancy (``gpus``), and estimates the time on a named GPU
(``timing``). ``trace`` records who wrote what, and one warp's addresses, for pictures.
"""
from .counters import BufferCounters, KernelCounters
from .errors import BarrierDivergenceError, DataRaceError, OutOfBoundsError, SimulatorError
from .gpus import GPUS, GPUSpec, Occupancy, gpu_spec, occupancy
from .report import Profile
from .simulate import KernelRun, simulate, simulate_program
from .timing import TimeEstimate, estimate, estimate_seconds
from .trace import Trace, WarpAccess

__all__ = ["simulate", "simulate_program", "KernelRun", "Profile", "estimate", "estimate_seconds",
           "TimeEstimate", "Trace", "WarpAccess", "BufferCounters", "KernelCounters", "GPUS",
           "GPUSpec", "Occupancy", "gpu_spec", "occupancy", "SimulatorError", "DataRaceError",
           "OutOfBoundsError", "BarrierDivergenceError"]
