"""How long the tensors a relax function allocates live: the one rule that StaticPlanBlockMemory
plans shared storage with, and that the VirtualMachine frees memory and checks plans with.

Every output of an ``R.call_tir`` or ``R.call_dps_packed`` binding is a *site*: a tensor the
call allocates (``kind`` names the op). So is the result of a call of a relax or extern
function (kind "call"), whose memory the callee made. A variable holds a site when it is bound
to the call, or to an alias of a holder: ``lv1 = lv``, a view ``lv1 = R.reshape(lv, shape)``, a tuple with it inside (``t = (lv, x)``),
or an item of such a tuple (``a = t[0]`` holds element 0 of a two-output call, and only that
element). A site lives until the last binding that uses one of its holders (``last_use``), never
less than its own binding. It *escapes* (``last_use`` is None: its memory must outlive the
call) when a holder is returned or passed to a relax or extern function, which may return or
keep it.

    for site in tensor_sites(func):
        site.name, site.nbytes, site.last_use    # "lv" or "lv_tuple[1]", 512 or None, 3 or None

A tensor whose shape is symbolic has a size (``nbytes``) when the function bounds the variables
of its shape, as the reference compiler's ``"tir_var_upper_bound"`` attribute does
(``R.func_attr({"tir_var_upper_bound": {"n": 1024}})``): the size is then the most bytes the
tensor can take for sizes up to those bounds, the size its planned storage needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..arith.bound import int_bound
from ..tir import dtype as dt
from ..tir.expr import IntImm
from ..tir.stmt import Range
from ..tir.stmt_functor import free_vars
from .analysis import call_to, used_vars
from .expr import Call, Function, Op, Tuple, TupleGetItem, Var
from .struct_info import StructInfo, TensorStructInfo, TupleStructInfo

DPS_OPS = ("relax.call_tir", "relax.call_dps_packed")
VIEW_OP = "relax.reshape"
_UNKNOWN = "?"   # a holder keeps the site somewhere inside it, at a place not tracked
UPPER_BOUND_ATTR = "tir_var_upper_bound"


@dataclass(frozen=True, eq=False)
class Site:
    """Output ``output`` (None: the call's only output) of binding number ``binding``."""
    binding: int
    output: Optional[int]
    name: str
    sinfo: StructInfo
    nbytes: Optional[int]        # None for a "call", or a symbolic shape without upper bounds
    last_use: Optional[int]      # None when the tensor escapes the function
    kind: str                    # "relax.call_tir", "relax.call_dps_packed" or "call"


def tensor_bytes(sinfo, upper_bounds: Optional[dict] = None) -> Optional[int]:
    """The bytes of a tensor of static shape; for a symbolic shape, the most bytes it takes when
    each variable named in ``upper_bounds`` (name -> int) is at most its bound; else None."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        return None
    dims = sinfo.static_shape
    if dims is None:
        if not upper_bounds:
            return None
        ranges = {}
        for var in free_vars(list(sinfo.shape)):
            if var.name not in upper_bounds:
                return None
            ranges[var] = Range(IntImm(var.dtype, 0), IntImm(var.dtype, upper_bounds[var.name] + 1))
        dims = [int_bound(d, ranges)[1] for d in sinfo.shape]
        if any(d is None for d in dims):
            return None
    count = 1
    for d in dims:
        count *= max(d, 0)
    return count * dt.lanes(sinfo.dtype) * dt.to_numpy(sinfo.dtype).itemsize


def upper_bounds(func: Function) -> dict:
    """``{name: bound}`` of the ``"tir_var_upper_bound"`` attribute of ``func`` (empty when it has
    none); a ValueError names a bound that is not a positive integer."""
    bounds = (func.attrs or {}).get(UPPER_BOUND_ATTR) if hasattr(func.attrs, "get") else None
    if bounds is None:
        return {}
    if not hasattr(bounds, "items"):
        raise ValueError(f'the "{UPPER_BOUND_ATTR}" attribute must map size names to integers, '
                         f"got {bounds!r}")
    out = {}
    for name, bound in bounds.items():
        value = bound.value if isinstance(bound, IntImm) else bound
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int) \
                or value < 1:
            raise ValueError(f'"{UPPER_BOUND_ATTR}": the bound of {name!r} must be a positive '
                             f"integer, got {bound!r}")
        out[name] = value
    return out


def function_bindings(func: Function) -> list:
    """The bindings of all of ``func``'s blocks, in order: their indices number sites and uses."""
    return [b for block in func.body.blocks for b in block.bindings]


def dps_call(value) -> Optional[Call]:
    """``value`` when it is an R.call_tir / R.call_dps_packed call, else None."""
    return call_to(value, *DPS_OPS)


def tensor_sites(func: Function) -> list[Site]:
    """Every site of ``func`` with its size and lifetime, in binding order."""
    born, last_use, escaping = [], {}, set()
    holds: dict = {}   # var -> {site number: path of the site inside the var's value}

    def held_by(expr) -> dict:
        if isinstance(expr, Var):
            return holds.get(expr, {})
        if isinstance(expr, Tuple):
            return {s: _UNKNOWN if path == _UNKNOWN else (k,) + path
                    for k, item in enumerate(expr.elements) for s, path in held_by(item).items()}
        if isinstance(expr, TupleGetItem):
            inner, index = held_by(expr.tuple_value).items(), _item_index(expr)
            return {s: path[1:] if path != _UNKNOWN and index is not None else _UNKNOWN
                    for s, path in inner
                    if path == _UNKNOWN or index is None or path[:1] == (index,)}
        return {s: _UNKNOWN for var in used_vars(expr) for s in holds.get(var, {})}

    for index, binding in enumerate(function_bindings(func)):
        call, value = dps_call(binding.value), binding.value
        if call is not None:
            for arg in call.args[1:]:
                last_use.update((s, index) for s in held_by(arg))
            outputs = call.sinfo_args
            single = len(outputs) == 1
            holds[binding.var] = {}
            for k, sinfo in enumerate(outputs):
                name = binding.var.name_hint if single else f"{binding.var.name_hint}[{k}]"
                last_use[len(born)] = index
                holds[binding.var][len(born)] = () if single else (k,)
                born.append((index, None if single else k, name, sinfo, call.op.name))
        elif isinstance(value, (Var, Tuple, TupleGetItem)) or call_to(value, VIEW_OP):
            # An alias; R.reshape too: the VirtualMachine runs it as a view of the same memory.
            holds[binding.var] = held_by(value if isinstance(value, (Var, Tuple, TupleGetItem))
                                         else value.args[0])
            last_use.update((s, index) for s in holds[binding.var])
        else:
            escaping.update(held_by(value))
            if isinstance(value, Call) and not isinstance(value.op, Op):
                last_use[len(born)] = index
                holds[binding.var] = {len(born): _UNKNOWN}
                born.append((index, None, binding.var.name_hint, binding.var.struct_info, "call"))
    escaping.update(held_by(func.body.body))
    bounds = upper_bounds(func)
    return [Site(index, output, name, sinfo, tensor_bytes(sinfo, bounds) if kind != "call" else None,
                 None if number in escaping else last_use[number], kind)
            for number, (index, output, name, sinfo, kind) in enumerate(born)]


def _item_index(item: TupleGetItem) -> Optional[int]:
    """The index ``item`` takes, counted from the front; None when that is not known."""
    if item.index >= 0:
        return item.index
    sinfo = item.tuple_value.struct_info
    return len(sinfo.elements) + item.index if isinstance(sinfo, TupleStructInfo) else None


def in_use(sites: list, storage_of: dict = None, sizes: dict = None) -> list:
    """The bytes in use at each binding when the sites in ``storage_of`` (site -> storage id)
    share the storages of ``sizes`` (id -> bytes) and every other site of static size has memory
    of its own. A site is in use from its binding to its last use (to the end when it escapes);
    a storage from the first binding of its sites to the last use among them."""
    storage_of, sizes = storage_of or {}, sizes or {}
    curve = [0] * (1 + max((s.binding for s in sites), default=-1))
    for sid, size in sizes.items():
        users = [s for s in sites if storage_of.get(s) == sid]
        if users:
            occupy(curve, min(s.binding for s in users), max(s.last_use for s in users), size)
    for s in sites:
        if s not in storage_of and s.nbytes is not None:
            occupy(curve, s.binding, s.last_use, s.nbytes)
    return curve


def occupy(curve: list, first: int, last: Optional[int], nbytes: int) -> None:
    """Add ``nbytes`` to ``curve`` from binding ``first`` to ``last`` (None: the end)."""
    for k in range(first, len(curve) if last is None else last + 1):
        curve[k] += nbytes


__all__ = ["DPS_OPS", "Site", "UPPER_BOUND_ATTR", "dps_call", "function_bindings", "in_use", "occupy",
           "tensor_bytes", "tensor_sites", "upper_bounds"]
