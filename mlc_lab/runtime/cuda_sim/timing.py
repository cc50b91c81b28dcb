"""A simple time model: an *estimate* of how long a simulated launch takes on a named GPU.

It is a roofline with a latency roof. Each resource gives a time if the kernel were limited by
it alone, and the kernel takes the longest of them, plus the launch:

    seconds = launch + max(compute, tensor, dram, shared, latency)

* ``compute = flops / peak FP32 FLOP/s`` (of the SMs the grid can use);
* ``tensor = tensor-core flops / peak tensor-core FLOP/s`` (of those SMs): the multiply-accumulates
  of wmma ``mma_sync`` and PTX ``mma.sync`` run on the tensor cores, whose roof is far higher
  than the FP32 one (312 against 19.5 TFLOP/s on an A100), so they count there and not in
  ``compute``;
* ``dram = sectors x 32 bytes / DRAM bandwidth``: every global sector a request moves comes
  from DRAM. Caches are ignored, so this is the traffic of a kernel without reuse, an upper
  bound: uncoalesced and unblocked kernels pay for it, which is the lesson.
* ``shared = wavefronts / (SMs x clock)``: an SM's shared memory serves one 128-byte wavefront
  per clock; bank conflicts add wavefronts.
* ``latency = waves x rounds x memory latency``: a warp waits for its global loads once per
  statement, or once per fully unrolled loop nest, whose loads are issued together
  (``rounds`` per thread); warps resident at the same time wait together, and a grid that does
  not fit on the GPU at once (occupancy) runs in several ``waves``.

Counters of a run that simulated only some blocks are scaled up to the whole grid. Sectors,
wavefronts and rounds are those the compiled kernel would issue, with loads repeated
in unrolled loops kept in registers (``issued_*`` counters). The numbers of each GPU are in
``gpus.GPUS``. The model ranks kernels as a GPU does for the course's matmuls (naive, blocked,
shared memory); absolute times are within a small factor at best.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .gpus import Occupancy, gpu_spec


@dataclass(frozen=True)
class TimeEstimate:
    """An estimate, in seconds, with each term of the model; ``bound`` names the largest."""
    gpu: str
    seconds: float
    launch: float
    compute: float
    dram: float
    shared: float
    latency: float
    waves: int
    occupancy: Occupancy
    tensor: float = 0.0

    @property
    def bound(self) -> str:
        terms = {"compute": self.compute, "tensor": self.tensor, "dram": self.dram,
                 "shared": self.shared, "latency": self.latency}
        return max(terms, key=terms.get)

    def __str__(self) -> str:
        return (f"estimated {self.seconds * 1e3:.3f} ms on {self.gpu} ({self.bound} bound: "
                f"compute {self.compute * 1e3:.3f}, "
                + (f"tensor cores {self.tensor * 1e3:.3f}, " if self.tensor else "")
                + f"DRAM {self.dram * 1e3:.3f}, shared "
                f"{self.shared * 1e3:.3f}, latency {self.latency * 1e3:.3f} ms; {self.waves} "
                f"wave(s) at {self.occupancy.occupancy:.0%} occupancy)")


def estimate(run, target=None) -> TimeEstimate:
    """The time model's estimate for the launch ``run`` (a KernelRun) on ``target`` (a Target,
    a tag such as "nvidia/h100", or a model name; default: the run's target, else the A100)."""
    spec = gpu_spec(target if target is not None else run.target)
    kernel, counters = run.kernel, run.counters
    occ = run.occupancy(spec)
    if occ.blocks_per_sm == 0:
        raise ValueError(f"{kernel.name}: a block of {kernel.threads_per_block} threads with "
                         f"{run.registers} registers per thread and {run.shared_bytes} bytes of "
                         f"shared memory does not fit on one SM of the {spec.name} "
                         f"({occ.limiter} run out)")
    sms = min(spec.sms, kernel.num_blocks)
    scale = kernel.num_blocks / max(run.blocks_run, 1)   # when only some blocks were simulated
    compute = scale * counters.flops / (spec.fp32_flops * sms / spec.sms)
    tensor = 0.0
    if counters.tensor_flops:
        if not spec.tensor_flops:
            raise ValueError(f"{kernel.name} uses tensor cores, but the simulator has no "
                             f"tensor-core peak for the {spec.name} (cuda_sim.gpus.GPUS)")
        tensor = scale * counters.tensor_flops / (spec.tensor_flops * sms / spec.sms)
    dram = scale * counters.scope_total("global", "issued_sectors") * 32 / spec.dram_bytes_per_s
    shared = scale * counters.scope_total("shared", "issued_wavefronts") / (sms * spec.clock_hz)
    waves = math.ceil(kernel.num_blocks / (spec.sms * occ.blocks_per_sm))
    rounds = counters.load_rounds / max(counters.threads, 1)
    latency = waves * rounds * spec.memory_latency_cycles / spec.clock_hz
    seconds = spec.launch_seconds + max(compute, tensor, dram, shared, latency)
    return TimeEstimate(spec.name, seconds, spec.launch_seconds, compute, dram, shared, latency,
                        waves, occ, tensor)


def estimate_seconds(run, target=None) -> float:
    """``estimate(run, target).seconds``: the estimated time of one launch on a GPU."""
    return estimate(run, target).seconds
