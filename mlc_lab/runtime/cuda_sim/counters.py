"""Memory counters, the numbers Nsight Compute reports, counted per warp-level access.

A GPU executes each load or store instruction for a whole warp (32 threads) at once; that is one
**request**. What it costs depends on the addresses of the warp's active threads:

* **Global memory** moves whole 32-byte **sectors**. A warp reading 32 consecutive float32
  (128 bytes) touches 4 sectors; with a stride of 32 floats every thread needs its own sector,
  32 sectors for the same 128 useful bytes. Coalescing efficiency = bytes requested / bytes
  moved (100% and 12.5% here; threads of a warp reading one address ask for it once).
* **Shared memory** has 32 banks, 4-byte words, word ``w`` in bank ``w % 32``. A request takes
  one **wavefront** per 128 bytes when every bank serves one word; threads reading the same word
  share it (broadcast), but distinct words in one bank are served one after another: stride 2
  puts two words in each even bank, a 2-way conflict, 2 wavefronts. 8- and 16-byte accesses are
  split into 2 and 4 phases (half or quarter warps) that each take at least one wavefront.

Both are counted with numpy on all warps at once: addresses are laid out as one row per warp,
sorted along the row, and distinct sectors (or words per bank) counted from the sorted rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SECTOR_BYTES = 32
BANKS = 32
WARP = 32


@dataclass
class BufferCounters:
    """Counters of one buffer over a whole launch. ``reads``/``writes`` are elements, summed over
    threads. ``issued_*`` count what the compiled kernel would issue once loads repeated in fully
    unrolled loops are kept in registers (see ``prepare``); the time estimate uses those."""
    name: str
    scope: str            # "global", "shared" or "local"
    itemsize: int
    reads: int = 0
    writes: int = 0
    requests: int = 0             # warp-level load/store instructions (global, shared)
    sectors: int = 0              # 32-byte sectors those requests move (global)
    wavefronts: int = 0           # shared-memory passes those requests take (shared)
    ideal_wavefronts: int = 0     # wavefronts without bank conflicts
    distinct: int = 0             # distinct elements per global request, summed over requests
    issued_requests: float = 0.0
    issued_sectors: float = 0.0
    issued_wavefronts: float = 0.0

    def measure(self, position, mask, lanes) -> tuple:
        """(elements, requests, sectors or wavefronts, conflict-free wavefronts, distinct
        elements per warp) of one access by the lanes of a batch."""
        elements = _elements(position, mask, lanes.size)
        if self.scope == "local":
            return elements, 0, 0, 0, 0
        rows = warp_rows(position, mask, lanes.blocks, lanes.threads)
        if self.scope == "global":
            requests, sectors, distinct = global_sectors(rows, self.itemsize)
            return elements, requests, sectors, 0, distinct
        return (elements, *shared_wavefronts(rows, self.itemsize), 0)

    def add(self, measured: tuple, write: bool, weight: float) -> int:
        """Add one access as ``measure`` gave it; ``weight`` is its register-reuse weight."""
        elements, requests, moved, ideal, distinct = measured
        self.distinct += distinct
        if write:
            self.writes += elements
        else:
            self.reads += elements
        if requests:
            self.requests += requests
            self.issued_requests += requests * weight
            if self.scope == "global":
                self.sectors += moved
                self.issued_sectors += moved * weight
            else:
                self.wavefronts += moved
                self.ideal_wavefronts += ideal
                self.issued_wavefronts += moved * weight
        return elements

    @property
    def bytes_requested(self) -> int:
        return (self.reads + self.writes) * self.itemsize

    @property
    def bytes_moved(self) -> int:
        return self.sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float | None:
        """Coalescing efficiency of global accesses: the bytes the warps asked for (an address
        several threads of a warp share counted once) / the bytes moved."""
        return self.distinct * self.itemsize / self.bytes_moved if self.sectors else None

    @property
    def sectors_per_request(self) -> float | None:
        return self.sectors / self.requests if self.requests and self.scope == "global" else None

    @property
    def conflict_degree(self) -> float | None:
        """Shared memory: wavefronts per conflict-free wavefront (1.0: no bank conflicts)."""
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else None

    @property
    def bank_conflicts(self) -> int:
        return self.wavefronts - self.ideal_wavefronts


@dataclass
class KernelCounters:
    """Counters of one launch: per buffer (by name), floating-point operations, barriers and
    rounds of global-load latency (summed over threads and blocks), the threads launched, and
    the tensor-core instructions and their operations (``flops`` counts the CUDA cores' only)."""
    threads: int
    buffers: dict = field(default_factory=dict)
    flops: int = 0
    barriers: int = 0   # barrier instructions executed, per block, summed over blocks
    load_rounds: float = 0.0   # waits for global loads, summed over threads (see prepare)
    tensor_instructions: int = 0   # warp-wide tensor-core multiply-accumulates (mma_sync, mma.sync)
    tensor_flops: int = 0          # their floating-point (or integer) operations, 2 per product

    def scope_total(self, scope: str, name: str) -> float:
        return sum(getattr(c, name) for c in self.buffers.values() if c.scope == scope)

    def per_thread(self) -> dict:
        """Average accesses per thread: global/shared/local reads and writes (elements)."""
        out = {}
        for scope in ("global", "shared", "local"):
            for kind in ("reads", "writes"):
                out[f"{scope} {kind}"] = self.scope_total(scope, kind) / max(self.threads, 1)
        return out


def _elements(position, mask, lanes: int) -> int:
    """How many elements an access touches: lanes (active ones) times vector lanes."""
    shape = np.shape(position)
    if mask is True:
        return lanes * int(np.prod(shape[:-1], dtype=np.int64)) if shape else lanes
    return int(np.count_nonzero(np.broadcast_to(mask, np.broadcast_shapes(shape, np.shape(mask)))))


def warp_rows(positions, mask, blocks: int, threads: int) -> np.ndarray:
    """Element positions laid out one row per warp: ``positions`` has the thread axis last (lane
    = block * threads + thread) and any vector lanes before it; row ``r`` holds warp ``r % W`` of
    block ``r // W``, thread by thread, each thread's vector lanes together. Inactive threads (and
    the padding of a last partial warp) are -1."""
    lanes = blocks * threads
    shape = np.broadcast_shapes(np.shape(positions), (lanes,),
                                () if mask is True else np.shape(mask))
    pos = np.broadcast_to(positions, shape).astype(np.int64)
    if mask is not True:
        pos = np.where(np.broadcast_to(mask, shape), pos, -1)
    pos = pos.reshape(-1, blocks, threads)
    pad = -threads % WARP
    if pad:
        pos = np.pad(pos, ((0, 0), (0, 0), (0, pad)), constant_values=-1)
    vector = pos.shape[0]
    return pos.transpose(1, 2, 0).reshape(-1, WARP * vector)


def global_sectors(rows: np.ndarray, itemsize: int) -> tuple[int, int, int]:
    """(requests, sectors, distinct elements) of global accesses given as ``warp_rows``."""
    rows = np.sort(rows, axis=1)
    sectors = np.where(rows >= 0, rows * itemsize // SECTOR_BYTES, -1)
    return int((rows[:, -1] >= 0).sum()), _distinct(sectors), _distinct(rows)


def _distinct(sorted_rows: np.ndarray) -> int:
    """Distinct non-negative values, summed over rows sorted along axis 1."""
    first = (sorted_rows[:, 0] >= 0).sum()
    later = ((sorted_rows[:, 1:] != sorted_rows[:, :-1]) & (sorted_rows[:, 1:] >= 0)).sum()
    return int(first + later)


def shared_wavefronts(rows: np.ndarray, itemsize: int) -> tuple[int, int, int]:
    """(requests, wavefronts, conflict-free wavefronts) of shared accesses, as ``warp_rows``."""
    per_thread = rows.shape[1] // WARP * itemsize       # bytes one thread accesses
    phases = min(4, max(1, per_thread // 4))
    words = _words(rows, itemsize).reshape(rows.shape[0] * phases, -1)
    words.sort(axis=1)
    first = np.empty(words.shape, dtype=bool)
    first[:, 0] = True
    np.not_equal(words[:, 1:], words[:, :-1], out=first[:, 1:])
    first &= words >= 0
    row = np.broadcast_to(np.arange(words.shape[0])[:, None], words.shape)
    key = row[first] * BANKS + words[first] % BANKS
    per_bank = np.bincount(key, minlength=words.shape[0] * BANKS).reshape(-1, BANKS)
    waves = per_bank.max(axis=1)
    requests = int((rows >= 0).any(axis=1).sum())
    return requests, int(waves.sum()), int((waves > 0).sum())


def _words(rows: np.ndarray, itemsize: int) -> np.ndarray:
    """The 4-byte words each element covers (an 8-byte element covers two), -1 kept for inactive."""
    if itemsize <= 4:
        return np.where(rows >= 0, rows * itemsize // 4, -1)
    span = itemsize // 4
    words = rows[..., None] * span + np.arange(span)
    words[rows < 0] = -1
    return words.reshape(rows.shape[0], -1)
