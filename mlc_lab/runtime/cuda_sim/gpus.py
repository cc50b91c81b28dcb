"""The GPUs the simulator's occupancy and time estimates know, and occupancy itself.

The numbers are from NVIDIA's specification sheets and CUDA's occupancy calculator (boost
clocks; FP32 peak without tensor cores; the largest shared memory an SM can give its blocks).
The tensor-core peaks are dense float16 with float32 accumulation, without sparsity: A100 312
TFLOP/s (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020), H100 SXM 989 TFLOP/s
(NVIDIA H100 Tensor Core GPU datasheet, 2023), Tesla T4 65 TFLOP/s (T4 datasheet; mixed
precision), GeForce RTX 2080 Ti 53.8 TFLOP/s (Turing architecture whitepaper, FP16 with FP32
accumulate: half the FP16-accumulate rate on GeForce cards).
``Target("nvidia/a100")`` names the entry ``"a100"`` through its ``model`` attribute.

Occupancy is the fraction of an SM's warp slots that a kernel's blocks fill. An SM holds as
many blocks as the scarcest of its resources allows: warp slots, block slots, registers
(allocated per warp in units of 256) and shared memory (in units of 128 bytes)::

    >>> occ = occupancy(GPUS["a100"], threads_per_block=64, registers=80, shared_bytes=4096)
    >>> occ.blocks_per_sm, occ.limiter, round(occ.occupancy, 3)
    (12, 'registers', 0.375)
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_GPU = "a100"


@dataclass(frozen=True)
class GPUSpec:
    name: str
    sms: int                      # streaming multiprocessors
    clock_hz: float               # boost clock
    fp32_flops: float             # peak FP32 FLOP/s (an FMA counts 2)
    dram_bytes_per_s: float       # DRAM bandwidth
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_bytes_per_sm: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    shared_bytes_per_clock: int = 128   # per SM: 32 banks of 4 bytes, one wavefront a clock
    memory_latency_cycles: int = 500    # a global load that misses the caches
    launch_seconds: float = 3e-6        # launching a kernel
    schedulers_per_sm: int = 4          # warp schedulers, each issuing from its own warps
    tensor_flops: float = 0.0           # peak dense FP16 tensor-core FLOP/s (FP32 accumulate)

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // 32


_KB = 1024
GPUS: dict[str, GPUSpec] = {
    "a100": GPUSpec("a100", 108, 1.41e9, 19.5e12, 1555e9, 2048, 32, 164 * _KB,
                    tensor_flops=312e12),
    "h100": GPUSpec("h100", 132, 1.98e9, 67e12, 3350e9, 2048, 32, 228 * _KB, tensor_flops=989e12),
    "tesla-t4": GPUSpec("tesla-t4", 40, 1.59e9, 8.1e12, 320e9, 1024, 16, 64 * _KB,
                        tensor_flops=65e12),
    "geforce-rtx-2080-ti": GPUSpec("geforce-rtx-2080-ti", 68, 1.545e9, 13.4e12, 616e9, 1024, 16,
                                   64 * _KB, tensor_flops=53.8e12),
}


def gpu_spec(target=None) -> GPUSpec:
    """The spec of ``target``: a Target, a tag ("nvidia/h100"), a target string ("cuda
    -model=h100"), a model name ("h100"), or None for the A100 (also a Target without a model)."""
    if isinstance(target, GPUSpec):
        return target
    if isinstance(target, str) and target not in GPUS:
        from ...target import Target
        target = Target(target)
    model = target if isinstance(target, str) else \
        (getattr(target, "attrs", None) or {}).get("model") if target is not None else None
    model = model or DEFAULT_GPU
    if model not in GPUS:
        raise ValueError(f"the simulator has no numbers for the GPU {model!r}; it knows "
                         f"{', '.join(sorted(GPUS))} (add one to cuda_sim.gpus.GPUS)")
    return GPUS[model]


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float      # resident warps / the SM's warp slots
    limiter: str          # the resource that stops one more block: warps, blocks, registers, shared


def occupancy(spec: GPUSpec, threads_per_block: int, registers: int,
              shared_bytes: int) -> Occupancy:
    warps = -(-threads_per_block // 32)
    regs_per_warp = -(-min(registers, spec.max_registers_per_thread) * 32 // 256) * 256
    shared = -(-shared_bytes // 128) * 128
    limits = {
        "warps": spec.max_warps_per_sm // warps,
        "blocks": spec.max_blocks_per_sm,
        "registers": (spec.registers_per_sm // regs_per_warp) // warps,
        "shared": spec.shared_bytes_per_sm // shared if shared else spec.max_blocks_per_sm,
    }
    limiter = min(limits, key=limits.get)
    blocks = max(limits[limiter], 0)
    return Occupancy(blocks, blocks * warps, blocks * warps / spec.max_warps_per_sm, limiter)
