# StaticPlanBlockMemory: plan storage for the outputs of R.call_tir in each relax function, reusing the
# storage of tensors whose last use has passed; the plan is the function attr "relax.memory_plan".
"""``relax.transform.StaticPlanBlockMemory()``: let short-lived tensors share memory.

Walking a function's bindings in order, each ``R.call_tir`` output (one tensor of static shape)
requests a storage: a free storage of the same dtype is reused (the smallest big enough, else the
largest, which grows to fit), otherwise a new one is made. A tensor's storage is freed after the
binding that uses it last (uses through ``lv1 = lv``, tuples and tuple items count), never
during its own last use, so a kernel never writes the storage it reads. Tensors the function
returns are not planned (they outlive the call).

The plan, in the function attr ``"relax.memory_plan"``, is a tuple of entries
``(var_name, storage_id, nbytes)``: the binding of ``var_name`` writes its output into storage
``storage_id``; a storage's size is the largest ``nbytes`` among its entries. Bindings not
listed (returned tensors, tuple outputs, symbolic shapes, repeated names) allocate as usual;
a function with nothing to plan gets no attr.

``memory_stats(mod)`` -> ``{"naive_bytes", "planned_bytes", "tensors", "storages"}``: bytes of
all planned tensors allocated one by one, and of the storages the plan uses instead.
"""
from __future__ import annotations

from ...ir.transform import Pass, PassInfo
from ...tir import dtype as dt
from ..expr import Function, Tuple, TupleGetItem, Var
from ..struct_info import TensorStructInfo
from .dead_code_elimination import used_vars
from .fuse_ops import is_call_tir

PLAN_ATTR = "relax.memory_plan"


def tensor_bytes(sinfo) -> int | None:
    """The bytes of a tensor of static shape, else None."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.static_shape is None:
        return None
    count = 1
    for d in sinfo.static_shape:
        count *= d
    return count * dt.lanes(sinfo.dtype) * dt.to_numpy(sinfo.dtype).itemsize


def plan_function(func: Function) -> list:
    """The plan entries ``(var_name, storage_id, nbytes)`` for ``func``."""
    bindings = [b for block in func.body.blocks for b in block.bindings]
    names = [b.var.name_hint for b in bindings]
    tensors = {}  # var -> (nbytes, dtype)
    for b in bindings:
        nbytes = tensor_bytes(b.value.struct_info) if is_call_tir(b.value) else None
        if nbytes is not None and names.count(b.var.name_hint) == 1:
            tensors[b.var] = (nbytes, b.value.struct_info.dtype)
    # aliases: a binding that only renames or packs planned tensors keeps them alive
    holders = {v: {v} for v in tensors}
    last_use = {v: i for i, b in enumerate(bindings) for v in [b.var] if v in tensors}
    for i, b in enumerate(bindings):
        for used in used_vars(b.value):
            for t, hold in holders.items():
                if used in hold:
                    last_use[t] = i
                    if isinstance(b.value, (Var, Tuple, TupleGetItem)):
                        hold.add(b.var)
    escaping = {t for t, hold in holders.items() if used_vars(func.body.body) & hold}
    free: list = []   # [storage_id, size, dtype]
    sizes: list = []
    plan, releases = [], {}
    for i, b in enumerate(bindings):
        if b.var in tensors and b.var not in escaping:
            nbytes, dtype = tensors[b.var]
            sid = _request(free, sizes, nbytes, dtype)
            plan.append((b.var.name_hint, sid, nbytes))
            releases.setdefault(last_use[b.var], []).append((sid, dtype))
        for sid, dtype in releases.pop(i, []):
            free.append((sid, dtype))
    return plan


def _request(free: list, sizes: list, nbytes: int, dtype: str) -> int:
    same = [(sid, d) for sid, d in free if d == dtype]
    fits = [s for s in same if sizes[s[0]] >= nbytes]
    if fits:
        choice = min(fits, key=lambda s: sizes[s[0]])
    elif same:
        choice = max(same, key=lambda s: sizes[s[0]])
    else:
        sizes.append(nbytes)
        return len(sizes) - 1
    free.remove(choice)
    sizes[choice[0]] = max(sizes[choice[0]], nbytes)
    return choice[0]


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
    storages of the plan (``planned_bytes``), with the counts of tensors and storages. Uses the
    plan attached by StaticPlanBlockMemory, or plans on the fly."""
    naive = planned = tensors = storages = 0
    for _, func in _planned_functions(mod):
        plan = func.attrs.get(PLAN_ATTR)
        plan = plan_function(func) if plan is None else plan
        sizes = storage_sizes(plan)
        naive += sum(nbytes for _, _, nbytes in plan)
        planned += sum(sizes.values())
        tensors += len(plan)
        storages += len(sizes)
    return {"naive_bytes": naive, "planned_bytes": planned, "tensors": tensors, "storages": storages}


class StaticPlanBlockMemory(Pass):
    def __init__(self):
        self.info = PassInfo(0, "StaticPlanBlockMemory")

    def transform_module(self, mod, ctx):
        out = type(mod)(mod.functions, mod.attrs)
        for gv, func in _planned_functions(mod):
            plan = tuple(plan_function(func))
            if plan:
                out[gv] = func.with_attr(PLAN_ATTR, plan)
        return out
