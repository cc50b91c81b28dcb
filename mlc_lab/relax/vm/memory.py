"""Memory of the VirtualMachine: where each tensor a function allocates lives, and what a call used.

A function's plan (the "relax.memory_plan" attr that StaticPlanBlockMemory makes, or one written
by hand: ``(name, storage_id, bytes)`` entries) is checked once, when the VM prepares the
function, against the lifetimes of its tensors (``relax.lifetime``). An entry is kept (a
``Layout``) when its tensor has a static size that fits the storage, does not escape the call,
and finds the storage free, every tensor placed there before it dead. Other entries are
``plan_fallbacks``: their tensors are allocated on each call, so a wrong plan costs memory, never
correctness.

The storages of a layout are allocated once, as a ``Workspace``, the first time the function
runs, and every later call reuses them (a call made while the workspace is in use, by recursion
or from another thread, gets one of its own). Every other tensor is allocated by its call and
dies after its last use. A planned tensor of symbolic shape (its function bounds the sizes, see
``relax.lifetime``) is seen, on each call, with that call's shape at the start of its storage;
sizes past the bounds that no longer fit raise a ValueError naming the tensor and the bounds.

``CallStats`` counts one top-level call and the calls it makes. Its ``peak_bytes`` is the most
memory in use at once: tensors allocated by the call from their binding to their last use, and
each planned storage from the first binding of its tensors to the last use among them (as
``relax.transform.memory_stats`` computes it without running anything).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...runtime.interpreter.expr import np_dtype
from ...runtime.device import zeros
from ...runtime.ndarray import NDArray
from ..transform.static_plan_block_memory import PLAN_ATTR


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


class Layout:
    """The part of ``plan`` that is safe for the function whose tensors are ``sites`` (sizes
    bounded by ``bounds``, name -> int, where the shapes are symbolic):
    ``storage_of`` (site -> storage id), ``sizes`` (storage id -> bytes, ``nbytes`` in all),
    ``fallbacks`` (sites the plan names but cannot hold), and per binding the bytes of storages
    coming into use (``occupy``) and going out of use after it (``release``)."""

    def __init__(self, plan: Optional[MemoryPlan], sites: list, bounds: Optional[dict] = None):
        self.planned, self.bounds = plan is not None, bounds or {}
        self.storage_of, self.fallbacks = {}, set()
        self.occupy, self.release = {}, {}
        if plan is None:
            self.sizes, self.nbytes = {}, 0
            return
        count = {}
        for site in sites:
            count[site.name] = count.get(site.name, 0) + 1
        busy_until = {}
        for site in sites:
            sid = plan.storage_of.get(site.name)
            if sid is None or site.kind == "call":
                continue
            if (count[site.name] == 1 and site.nbytes is not None and site.last_use is not None
                    and site.nbytes <= plan.sizes[sid] and busy_until.get(sid, -1) < site.binding):
                self.storage_of[site] = sid
                busy_until[sid] = site.last_use
            else:
                self.fallbacks.add(site)
        self.sizes = {sid: plan.sizes[sid] for sid in set(self.storage_of.values())}
        self.nbytes = sum(self.sizes.values())
        for sid, size in self.sizes.items():
            users = [s for s in self.storage_of if self.storage_of[s] == sid]
            first, last = min(s.binding for s in users), max(s.last_use for s in users)
            self.occupy[first] = self.occupy.get(first, 0) + size
            self.release[last] = self.release.get(last, 0) + size


class Workspace:
    """The storages of a Layout: ``views`` holds a view of the right shape into them for each
    planned site of static shape; ``view`` sees a site of symbolic shape with a call's shape."""

    def __init__(self, layout: Layout, stats: "CallStats", device):
        storages = {sid: zeros(size, np.uint8) for sid, size in layout.sizes.items()}
        for size in layout.sizes.values():
            stats.count_allocation(size)
        self.views, self.storage, self.bounds, self.device = {}, {}, layout.bounds, device
        for site, sid in layout.storage_of.items():
            self.storage[site] = storages[sid]
            if site.sinfo.static_shape is not None:
                flat = storages[sid][:site.nbytes].view(np_dtype(site.sinfo.dtype))
                self.views[site] = NDArray(flat.reshape(site.sinfo.static_shape), device)

    def address(self, site) -> int:
        """Where ``site``'s planned memory starts, whatever its shape in a call."""
        return self.storage[site].ctypes.data

    def view(self, site, shape: tuple, np_type: np.dtype) -> NDArray:
        """``site``'s planned memory seen with ``shape``."""
        storage = self.storage[site]
        nbytes = math.prod(shape) * np_type.itemsize
        if nbytes > storage.nbytes:
            bounds = ", ".join(f"{name} <= {bound}" for name, bound in self.bounds.items())
            raise ValueError(
                f"{site.name} of shape {tuple(shape)} needs {nbytes} bytes, more than the "
                f"{storage.nbytes} bytes its storage was planned with for the sizes' upper bounds "
                f"({bounds}, the function's \"tir_var_upper_bound\" attribute): call it with sizes "
                "within the bounds, or raise them and build again")
        return NDArray.wrap_new(storage[:nbytes].view(np_type).reshape(shape), self.device)


class CallStats:
    """What one top-level call allocated; ``summary()`` is what ``vm.memory_stats()`` shows."""
    __slots__ = ("allocations", "bytes_allocated", "live_bytes", "peak_bytes", "unplanned_bytes",
                 "planned_bytes", "plan_fallbacks", "memory_plan", "same_as")

    def __init__(self):
        self.allocations = self.bytes_allocated = self.live_bytes = self.peak_bytes = 0
        self.unplanned_bytes = self.planned_bytes = self.plan_fallbacks = 0
        self.memory_plan = False
        self.same_as = None   # a CallStats of an identical call, whose counts these are

    def count_allocation(self, nbytes: int) -> None:
        self.allocations += 1
        self.bytes_allocated += nbytes

    def allocate(self, shape: tuple, np_type: np.dtype, device) -> NDArray:
        """A new zero-filled tensor, in use from now on."""
        nbytes = math.prod(shape) * np_type.itemsize
        self.count_allocation(nbytes)
        self.unplanned_bytes += nbytes
        self.occupy(nbytes)
        return NDArray(zeros(shape, np_type), device)

    def occupy(self, nbytes: int) -> None:
        self.live_bytes += nbytes
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes

    def fresh(self) -> bool:
        """Nothing counted yet: the statistics of a top-level call, before it starts."""
        return not (self.allocations or self.live_bytes or self.peak_bytes or self.planned_bytes
                    or self.same_as is not None)

    def copy(self) -> "CallStats":
        other = CallStats()
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        return other

    def replay(self, other: "CallStats") -> None:
        """Count what ``other``, an identical call, counted (see native_sequence)."""
        self.same_as = other

    def summary(self) -> dict:
        if self.same_as is not None:
            return self.same_as.summary()
        return {"allocations": self.allocations, "bytes_allocated": self.bytes_allocated,
                "peak_bytes": self.peak_bytes, "unplanned_bytes": self.unplanned_bytes,
                "planned_bytes": self.planned_bytes, "plan_fallbacks": self.plan_fallbacks,
                "memory_plan": self.memory_plan}


__all__ = ["CallStats", "Layout", "MemoryPlan", "PLAN_ATTR", "Workspace"]
