"""Memory accounting for the VirtualMachine: tensor allocations, the bytes live at each moment,
and storages shared according to a function's "relax.memory_plan".

A tensor is live while a variable holding it (directly or in a tuple) is live; the VM releases a
variable after the last binding that uses it. A memory plan lists ``(var_name, storage_id,
bytes)``: the storages are allocated once per call and each planned tensor is a view into its
storage. A planned tensor whose storage is too small or still holds a live tensor gets its own
allocation instead (a ``plan_fallback``), so a wrong plan costs memory, never correctness.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..runtime.interpreter_expr import np_dtype
from ..runtime.ndarray import NDArray

PLAN_ATTR = "relax.memory_plan"


class MemoryPlan:
    """A function's memory plan, from a list of ``(var_name, storage_id, bytes)`` or a dict
    ``{var_name: (storage_id, bytes)}``: ``storage_of`` (variable name -> storage id) and ``sizes``
    (storage id -> bytes, the largest entry of each storage)."""

    def __init__(self, entries):
        self.storage_of: dict[str, object] = {}
        self.sizes: dict[object, int] = {}
        for name, storage_id, nbytes in entries:
            self.storage_of[name] = storage_id
            self.sizes[storage_id] = max(self.sizes.get(storage_id, 0), nbytes)

    @staticmethod
    def of(func) -> Optional["MemoryPlan"]:
        """The plan in ``func``'s attributes; None when there is none or it is not a list of
        ``(str, id, int)`` entries (then the VM allocates every tensor)."""
        entries = (func.attrs or {}).get(PLAN_ATTR) if hasattr(func.attrs, "get") else None
        if isinstance(entries, dict):   # {var_name: (storage_id, bytes)}
            entries = [(name, *value) if isinstance(value, (list, tuple)) else None
                       for name, value in entries.items()]
        if not isinstance(entries, (list, tuple)) or not entries:
            return None
        for entry in entries:
            if not (isinstance(entry, (list, tuple)) and len(entry) == 3
                    and isinstance(entry[0], str) and _is_int(entry[2])
                    and isinstance(entry[1], (int, str)) and not isinstance(entry[1], bool)):
                return None
        return MemoryPlan((name, sid, int(nbytes)) for name, sid, nbytes in entries)

    def describe(self) -> str:
        return (f"{len(self.storage_of)} tensor(s) in {len(self.sizes)} storage(s) of "
                f"{sum(self.sizes.values())} bytes")


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


class _Block:
    """One allocation: a tensor's own memory, or a planned storage shared by tensors."""
    __slots__ = ("nbytes", "users", "array", "planned")

    def __init__(self, nbytes: int, array: Optional[np.ndarray] = None, planned: bool = False):
        self.nbytes, self.array, self.planned, self.users = nbytes, array, planned, 0


class _Storages:
    def __init__(self, plan: MemoryPlan):
        self.plan = plan
        self.blocks: dict[object, _Block] = {}


class MemoryTracker:
    """Counts the allocations of one top-level call (and the calls it makes)."""

    def __init__(self):
        self._arrays: dict[int, list] = {}   # id(NDArray) -> [NDArray, _Block, references]
        self.allocations = self.bytes_allocated = self.live_bytes = self.peak_bytes = 0
        self.unplanned_bytes = self.planned_bytes = self.plan_fallbacks = 0
        self.used_plan = False

    def open_plan(self, plan: Optional[MemoryPlan]) -> Optional[_Storages]:
        if plan is None:
            return None
        self.used_plan = True
        return _Storages(plan)

    def close_plan(self, storages: Optional[_Storages]) -> None:
        if storages is not None:
            for block in storages.blocks.values():
                self.live_bytes -= block.nbytes

    def allocate(self, shape: tuple, dtype: str, storages: Optional[_Storages],
                 name: Optional[str]) -> NDArray:
        """A new tensor, placed in its planned storage when it has one that is free."""
        np_type = np_dtype(dtype)
        nbytes = math.prod(shape) * np_type.itemsize
        self.unplanned_bytes += nbytes
        if storages is not None and name in storages.plan.storage_of:
            view = self._planned_view(storages, name, shape, np_type, nbytes)
            if view is not None:
                return view
            self.plan_fallbacks += 1
        array = NDArray(np.zeros(shape, np_type))
        self._count(nbytes)
        self._arrays[id(array)] = [array, _Block(nbytes), 0]
        return array

    def _planned_view(self, storages: _Storages, name: str, shape, np_type, nbytes):
        storage_id = storages.plan.storage_of[name]
        block = storages.blocks.get(storage_id)
        if block is None:
            size = storages.plan.sizes[storage_id]
            block = _Block(size, np.zeros(size, np.uint8), planned=True)
            storages.blocks[storage_id] = block
            self._count(size)
            self.planned_bytes += size
        if block.users or nbytes > block.nbytes:
            return None
        view = NDArray(block.array[:nbytes].view(np_type).reshape(shape))
        self._arrays[id(view)] = [view, block, 0]
        return view

    def _count(self, nbytes: int) -> None:
        self.allocations += 1
        self.bytes_allocated += nbytes
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def retain(self, value) -> None:
        """One more variable holds ``value`` (a tensor, or a tuple of values)."""
        for entry in self._entries(value):
            if entry[2] == 0:
                entry[1].users += 1
            entry[2] += 1

    def release(self, value) -> None:
        """A variable holding ``value`` is gone; memory nothing holds any more is freed."""
        for entry in self._entries(value):
            entry[2] -= 1
            if entry[2] > 0:
                continue
            del self._arrays[id(entry[0])]
            block = entry[1]
            block.users -= 1
            if block.users == 0 and not block.planned:
                self.live_bytes -= block.nbytes

    def _entries(self, value):
        if isinstance(value, (tuple, list)):
            for item in value:
                yield from self._entries(item)
        elif isinstance(value, NDArray):
            entry = self._arrays.get(id(value))
            if entry is not None:
                yield entry

    def summary(self) -> dict:
        return {"allocations": self.allocations, "bytes_allocated": self.bytes_allocated,
                "peak_bytes": self.peak_bytes, "unplanned_bytes": self.unplanned_bytes,
                "planned_bytes": self.planned_bytes, "plan_fallbacks": self.plan_fallbacks,
                "memory_plan": self.used_plan}


__all__ = ["MemoryPlan", "MemoryTracker", "PLAN_ATTR"]
