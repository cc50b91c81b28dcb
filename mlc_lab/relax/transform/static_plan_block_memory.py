# StaticPlanBlockMemory: plan storage for the outputs of R.call_tir in each relax function, reusing the
# storage of tensors whose last use has passed; the plan is the function attr "relax.memory_plan".
"""``relax.transform.StaticPlanBlockMemory()``: let short-lived tensors share memory.

First the big intermediates kernels would allocate inside on every call become outputs of their
calls (``kernel_workspace.py``), so the plan covers them too. Then, walking a function's
bindings in order, each ``R.call_tir`` output of known size (every output of a multi-output
kernel on its own) requests a storage: a free storage of the same dtype is reused (the smallest
big enough, else the largest, which grows to fit), otherwise a new one is made. A static shape
has a known size; so has a symbolic one whose variables the function bounds, as in

    R.func_attr({"tir_var_upper_bound": {"n": 1024}})

whose tensors are planned at their size for n = 1024 (``relax.lifetime.tensor_bytes``): each
call then sees the start of the storage with its own shape, and a call whose tensors would not
fit is an error. A tensor's
storage is freed after the binding that uses it last (``relax.lifetime``: uses through
``lv1 = lv``, tuples and tuple items count), never during its own last use, so a kernel never
writes the storage it reads. Tensors that escape (returned, or passed to a relax or extern
function) are not planned: the VirtualMachine keeps planned storage from call to call.

The plan never needs more memory than giving each tensor its own allocation, freed after its
last use. A storage is in use from its first tensor's binding to its last tensor's last use,
at its full size (``relax.lifetime.in_use``), so reusing a big storage for a small tensor, or
across a gap, costs memory: a reuse that would raise the peak of bytes in use is refused, and the
tensor gets a new storage instead.

The plan, in the function attr ``"relax.memory_plan"``, is a tuple of entries
``(name, storage_id, nbytes)``: the binding of ``name`` (``lv``, or ``lv_tuple[1]`` for the
second output of a call) writes that output into storage ``storage_id``; a storage's size is the
largest ``nbytes`` among its entries. Outputs not listed (returned tensors, symbolic shapes
without bounds, repeated names) are allocated as usual; a function with nothing to plan gets no
attr.

``memory_stats(mod)`` -> ``{"naive_bytes", "planned_bytes", "tensors", "storages",
"unplanned_peak_bytes", "planned_peak_bytes"}``: bytes of the planned tensors allocated one by
one, and of the storages that replace them; the most bytes in use at once (every call output of
known size counted, symbolic ones at their bounds) with one allocation per tensor, and with the
plan.
"""
from __future__ import annotations

from ...ir.transform import Pass, PassInfo
from ..expr import Function
from ..lifetime import in_use, occupy, tensor_sites
from .kernel_workspace import lift_kernel_workspaces

PLAN_ATTR = "relax.memory_plan"


def plan_function(func: Function) -> list:
    """The plan entries ``(name, storage_id, nbytes)`` for ``func``."""
    sites = tensor_sites(func)
    names = [s.name for s in sites]
    plannable = [s for s in sites if s.kind == "relax.call_tir" and s.nbytes is not None
                 and s.last_use is not None and names.count(s.name) == 1]
    curve = in_use(sites)   # bytes in use at each binding, kept up to date with the plan
    peak = max(curve, default=0)
    storages, storage_of, free, dying = [], {}, [], {}   # storages: [first, last, bytes, dtype]
    for index in range(len(curve)):
        for site in (s for s in plannable if s.binding == index):
            sid = _reuse(storages, free, site, curve, peak)
            if sid is None:
                storages.append([site.binding, site.last_use, site.nbytes, site.sinfo.dtype])
                sid = len(storages) - 1
            storage_of[site] = sid
            dying.setdefault(site.last_use, []).append(sid)
        free.extend(dying.pop(index, []))
    return [(s.name, storage_of[s], s.nbytes) for s in plannable]


def _reuse(storages: list, free: list, site, curve: list, peak: int):
    """A free storage of the site's dtype it can take without raising the peak of ``curve``
    (then ``curve`` and the storage are updated), trying the smallest that fits first, then the
    largest; None when there is none."""
    same = [sid for sid in free if storages[sid][3] == site.sinfo.dtype]
    fits = sorted((sid for sid in same if storages[sid][2] >= site.nbytes),
                  key=lambda sid: storages[sid][2])
    grows = sorted((sid for sid in same if storages[sid][2] < site.nbytes),
                   key=lambda sid: -storages[sid][2])
    for sid in fits + grows:
        first, last, size, _ = storages[sid]
        grown = max(size, site.nbytes)
        trial = curve[:]
        occupy(trial, first, last, -size)
        occupy(trial, site.binding, site.last_use, -site.nbytes)
        occupy(trial, first, site.last_use, grown)
        if max(trial) <= peak:
            curve[:] = trial
            storages[sid][1:3] = [site.last_use, grown]
            free.remove(sid)
            return sid
    return None


def storage_sizes(plan) -> dict:
    """{storage_id: nbytes} of a plan."""
    sizes: dict = {}
    for _, sid, nbytes in plan:
        sizes[sid] = max(sizes.get(sid, 0), nbytes)
    return sizes


def _planned_functions(mod):
    return [(gv, f) for gv, f in mod.functions.items()
            if isinstance(f, Function) and "Primitive" not in f.attrs]


def memory_stats(mod) -> dict:
    """Bytes the planned tensors of ``mod`` take one allocation each (``naive_bytes``) and in the
    storages of the plan (``planned_bytes``), the counts of tensors and storages, and the peaks
    of bytes in use without and with the plan. Uses the plan attached by StaticPlanBlockMemory,
    or plans on the fly."""
    stats = dict.fromkeys(("naive_bytes", "planned_bytes", "tensors", "storages",
                           "unplanned_peak_bytes", "planned_peak_bytes"), 0)
    for _, func in _planned_functions(mod):
        plan = func.attrs.get(PLAN_ATTR)
        plan = plan_function(func) if plan is None else plan
        sizes = storage_sizes(plan)
        sites = tensor_sites(func)
        by_name = {s.name: s for s in sites}
        storage_of = {by_name[name]: sid for name, sid, _ in plan if name in by_name}
        stats["naive_bytes"] += sum(nbytes for _, _, nbytes in plan)
        stats["planned_bytes"] += sum(sizes.values())
        stats["tensors"] += len(plan)
        stats["storages"] += len(sizes)
        stats["unplanned_peak_bytes"] += max(in_use(sites), default=0)
        stats["planned_peak_bytes"] += max(in_use(sites, storage_of, sizes), default=0)
    return stats


class StaticPlanBlockMemory(Pass):
    """``target``: what the kernels are compiled for (default "llvm"), whose stack limit decides
    which of their intermediates are workspaces to plan."""

    def __init__(self, target=None):
        self.target = target
        self.info = PassInfo(0, "StaticPlanBlockMemory")

    def transform_module(self, mod, ctx):
        mod = lift_kernel_workspaces(mod, self.target)
        out = type(mod)(mod.functions, mod.attrs)
        for gv, func in _planned_functions(mod):
            plan = tuple(plan_function(func))
            if plan:
                out[gv] = func.with_attr(PLAN_ATTR, plan)
        return out
