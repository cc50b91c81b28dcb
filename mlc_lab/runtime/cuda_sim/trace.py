"""What a simulated launch can record for pictures of the thread grid and of warp accesses.

``simulate(kernel, args, trace=True)`` (or ``trace=Trace(warp=(block, warp), limit=...)``)
fills ``run.trace``:

* ``run.trace.writers("C")``: for every element of the global buffer C, the block and thread
  that last stored to it, as ``{"block": (n, 3) int array, "thread": (n, 3) int array}`` of
  ``(x, y, z)`` coordinates (-1 where nothing stored): colour an output by block to see the grid.
* ``run.trace.warp_accesses``: for one warp, ``warp=(block, w)`` (block linear or ``(x, y, z)``,
  ``w`` the warp's number in the block, threads ``32 w .. 32 w + 31``), its first ``limit``
  global and shared accesses, in order, each a ``WarpAccess``: buffer, scope, ``"load"`` or
  ``"store"``, the statement, and ``addresses``, a ``(32, lanes)`` array of element indices per
  thread (-1 for threads that were inactive or do not exist): the picture of a (non-)coalesced
  access.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .counters import WARP


@dataclass
class WarpAccess:
    buffer: str
    scope: str
    kind: str            # "load" or "store"
    statement: str
    addresses: np.ndarray


@dataclass
class Trace:
    warp: tuple = (0, 0)
    limit: int = 256
    warp_accesses: list = field(default_factory=list)
    stores: dict = field(default_factory=dict)   # buffer name -> [(blocks, threads, indices)]
    sizes: dict = field(default_factory=dict)

    def writers(self, name: str) -> dict:
        """Who last stored each element of the global buffer ``name``."""
        if name not in self.sizes:
            raise KeyError(f"the trace has no stores to a global buffer {name!r}; it has "
                           f"{', '.join(sorted(self.sizes)) or 'none'}")
        block = np.full((self.sizes[name], 3), -1, np.int64)
        thread = np.full((self.sizes[name], 3), -1, np.int64)
        for blocks, threads, indices in self.stores.get(name, []):
            block[indices] = blocks
            thread[indices] = threads
        return {"block": block, "thread": thread}

    def begin(self, kernel, lanes) -> None:
        """Prepare for a batch of blocks: find the traced warp's lanes in it."""
        self._lanes = lanes
        chosen, number = self.warp
        if isinstance(chosen, tuple):
            gx, gy, _ = kernel.grid
            chosen = chosen[0] + gx * (chosen[1] + gy * (chosen[2] if len(chosen) > 2 else 0))
        slots = np.flatnonzero(lanes.block_ids == chosen)
        self._warp_lanes = None
        if slots.size:
            first = int(slots[0]) * lanes.threads + number * WARP
            last = min(first + WARP, (int(slots[0]) + 1) * lanes.threads)
            self._warp_lanes = np.arange(first, last) if first < last else None

    def record_store(self, memory, position, mask) -> None:
        lanes = self._lanes
        self.sizes.setdefault(memory.name, memory.size)
        shape = np.broadcast_shapes(np.shape(position), (lanes.size,))
        position = np.broadcast_to(position, shape)
        lane = np.broadcast_to(lanes.index, shape)
        if mask is not True:
            keep = np.broadcast_to(mask, shape)
            position, lane = position[keep], lane[keep]
        position, lane = position.reshape(-1), lane.reshape(-1)
        block = np.stack([c[lane] for c in lanes.block_xyz], axis=1)
        thread = np.stack([c[lane] for c in lanes.thread_xyz], axis=1)
        self.stores.setdefault(memory.name, []).append((block, thread, position.astype(np.int64)))

    def record_warp(self, memory, kind: str, position, mask, stmt) -> None:
        if self._warp_lanes is None or len(self.warp_accesses) >= self.limit:
            return
        lanes = self._lanes
        shape = np.broadcast_shapes(np.shape(position), (lanes.size,))
        full = np.broadcast_to(position, shape).reshape(-1, lanes.size)
        if mask is not True:
            full = np.where(np.broadcast_to(mask, shape).reshape(-1, lanes.size), full, -1)
        addresses = np.full((WARP, full.shape[0]), -1, np.int64)
        addresses[:len(self._warp_lanes)] = full[:, self._warp_lanes].T
        self.warp_accesses.append(WarpAccess(memory.name, memory.scope, kind, str(stmt),
                                             addresses))

