"""The three memories a kernel sees, for a batch of blocks simulated together.

The threads of a batch are *lanes*: lane ``b * T + t`` is thread ``t`` (linear, ``x`` fastest)
of the batch's block ``b``. A value that differs between threads is an array with the lane axis
last; a value all threads share (a loop counter, a constant) stays a numpy scalar.

* ``GlobalMemory``: the caller's flat array, one for the whole grid.
* ``SharedMemory``: one array per block, stored as rows of a ``(blocks, size)`` array.
* ``LocalMemory``: one array per thread, stored as a ``(size, lanes)`` array, so that an element
  all threads index alike (``C_local[i * 8 + j]`` with ``i, j`` loop counters) is one contiguous
  row: loading it is a view and storing it one vector assignment, with no gather.

Every memory exposes ``flat`` and ``address(position)``: where in ``flat`` a lane's element is.
Shared and local memory start as NaN (or the smallest integer), so a read of an element nothing
wrote shows up in the results.
"""
from __future__ import annotations

import numpy as np

from ...tir import dtype as dt
from ..interpreter.expr import _poison, np_dtype


class Lanes:
    """The blocks of one batch and their threads, with the index arrays every thread sees."""

    def __init__(self, kernel, block_ids: np.ndarray):
        self.kernel = kernel
        self.block_ids = block_ids
        self.blocks = len(block_ids)
        self.threads = kernel.threads_per_block
        self.size = self.blocks * self.threads
        lane = np.arange(self.size, dtype=np.int64)
        self.slot = lane // self.threads                 # which block of the batch
        self.tid = (lane % self.threads).astype(np.int32)
        self.index = lane
        bx, by, _ = kernel.block
        gx, gy, _ = kernel.grid
        block = block_ids[self.slot].astype(np.int32)
        self.thread_xyz = (self.tid % bx, self.tid // bx % by, self.tid // (bx * by))
        self.block_xyz = (block % gx, block // gx % gy, block // (gx * gy))
        coords = dict(zip(("threadIdx.x", "threadIdx.y", "threadIdx.z", "blockIdx.x", "blockIdx.y",
                           "blockIdx.z"), self.thread_xyz + self.block_xyz))
        self.values = {var: coords[tag] for tag, var in kernel.thread_vars.items()}

    def thread_of(self, tid: int) -> tuple:
        bx, by, _ = self.kernel.block
        return (tid % bx, tid // bx % by, tid // (bx * by))

    def block_of(self, slot: int) -> tuple:
        gx, gy, _ = self.kernel.grid
        b = int(self.block_ids[slot])
        return (b % gx, b // gx % gy, b // (gx * gy))

    def where(self, lane: int) -> tuple:
        """(thread, block) coordinates of ``lane``."""
        return self.thread_of(int(lane % self.threads)), self.block_of(int(lane // self.threads))


class Memory:
    scope = "global"

    def __init__(self, buffer, flat: np.ndarray, size: int, counters=None):
        self.buffer, self.name, self.flat, self.size = buffer, buffer.name, flat, size
        self.itemsize = flat.itemsize
        self.counters = counters
        # counted positions repeat every `period` elements (a sector, or the 32 banks)
        self.period = 32 // self.itemsize if 32 % self.itemsize == 0 else None

    def address(self, position):
        return position

    def load(self, position):
        return self.flat.take(self.address(position))   # take: faster than flat[...] for gathers

    def store(self, position, value, mask) -> None:
        address = self.address(position)
        if mask is True:
            if np.ndim(value) <= np.ndim(address):
                self.flat[address] = value
                return
            mask = np.True_   # every thread stores to one address: the last one's value stays
        address, value, mask = np.broadcast_arrays(address, value, mask)
        self.flat[address[mask]] = value[mask]


class GlobalMemory(Memory):
    """A kernel parameter: the caller's array, seen flat."""


class SharedMemory(Memory):
    scope = "shared"

    def __init__(self, buffer, lanes: Lanes, counters=None):
        size = buffer_size(buffer)
        dtype = np_dtype(buffer.dtype)
        rows = np.full((lanes.blocks, size), _poison(dtype), dtype)
        super().__init__(buffer, rows.reshape(-1), size, counters)
        self.lane_base = lanes.slot * size
        self.period = 128 // self.itemsize if 128 % self.itemsize == 0 else None

    def address(self, position):
        return self.lane_base + position

    def load_at(self, block_base, offset):
        """Load at ``block_base + offset``, where ``block_base`` already holds ``lane_base``."""
        return self.flat.take(block_base + offset if offset else block_base)


class LocalMemory(Memory):
    scope = "local"

    def __init__(self, buffer, lanes: Lanes, counters=None):
        size = buffer_size(buffer)
        self.rows = np.full((size, lanes.size), _poison(np_dtype(buffer.dtype)),
                            np_dtype(buffer.dtype))
        super().__init__(buffer, self.rows.reshape(-1), size, counters)
        self.lanes = lanes.size
        self.lane_index = lanes.index
        self.period = 1   # only how many elements are counted, always the same

    def address(self, position):
        return position * self.lanes + self.lane_index

    def load(self, position):
        if np.ndim(position) == 0:
            return self.rows[position]
        return super().load(position)

    def store(self, position, value, mask) -> None:
        if np.ndim(position) == 0 and np.ndim(value) <= 1:
            np.copyto(self.rows[position], value, where=mask)
        else:
            super().store(position, value, mask)


def buffer_size(buffer) -> int | None:
    """Elements of ``buffer``; None when its shape is symbolic."""
    size = 1
    for d in buffer.shape:
        if not hasattr(d, "value"):
            return None
        size *= int(d.value)
    return size


def itemsize(dtype: str) -> int:
    return max(8, dt.bits(dtype)) // 8
