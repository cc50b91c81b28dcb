"""Features of a scheduled PrimFunc for the learned cost models: one fixed-length vector per program.

``extract_features(func)`` lowers the function (blocks become their loop code, as
``mlc_lab.lower`` does, but buffers keep their dimensions and nothing is vectorized or unrolled
yet, so loop kinds are still visible), walks every store with its enclosing loops, and sums or
maxes what it finds over the stores. Counts are weighted by how often a store runs (the product
of its loop extents; an ``if k == 0`` guard on a loop variable divides by that loop's extent).
Values that span orders of magnitude are given as ``log2(1 + x)`` ("log" below). "Work" is the
number of float operations plus the number of store executions (a copy has no flops but still
work); per-work ratios make features comparable across shapes of one operator, which is what
lets a model trained on one workload rank the schedules of another.

"The main store" is the store with the most work (the update of a matmul). Its reads are taken
in order of decreasing innermost stride, leaving out the buffer it writes (an accumulator):
"read0" is its worst-strided read. The innermost loop of a store is the closest enclosing loop;
an access's stride is how many elements its address moves per step of that loop.
A working set under a loop level is the bytes the main store's accesses touch while the loops
from that level inwards run (per dimension the smaller of the index span and the product of the
extents it uses). Allocations are measured compacted: the footprint of the buffer's accesses
under the innermost loop enclosing all of them, as lowering will shrink them.

Features (FEATURE_NAMES, in order):

    float_add            log float additions and subtractions executed
    float_mul            log float multiplications executed
    float_div            log float divisions and modulos executed
    float_cmp            log float min/max/comparisons executed
    float_math           log math calls executed (exp, sqrt, tanh, ...)
    int_arith            log integer arithmetic executed in values (index arithmetic excluded)
    int_divmod           log integer floordiv/floormod/div/mod executed, indices included
    select_cmp           log selects, integer/boolean comparisons and if-conditions evaluated
    flops                log float operations executed (the first five kinds together)
    flops_per_store      float operations per store execution, averaged over executions
    arith_intensity      log flops per unique byte touched
    bytes_touched        log bytes read and written by all accesses
    unique_bytes         log distinct bytes touched (largest footprint per buffer, summed)
    reuse                log accesses-bytes per unique byte
    lines_per_work       log 64-byte cache lines touched per unit of work
    stride_broadcast     fraction of accesses whose innermost stride is 0
    stride_contiguous    fraction of accesses whose innermost stride is 1
    stride_strided       fraction of accesses whose innermost stride is larger than 1
    stride_mean          log innermost stride, averaged over accesses
    reg_traffic          log bytes per work moved into a 512-byte register tile
    l1_traffic           log bytes per work moved into a 32 KiB L1 tile
    l2_traffic           log bytes per work moved into a 1 MiB L2 tile
    l1_tile_work         log store executions of the main store per L1-sized tile
    write_unique_bytes   log footprint of the main store's written buffer
    write_reuse          log accesses per unique element of the main store's write
    write_stride         log innermost stride of the main store's write
    write_lines          cache lines per execution of the main store's write (0..1)
    read0_unique_bytes   log footprint of the main store's worst-strided read
    read0_reuse          log accesses per unique element of that read
    read0_stride         log innermost stride of that read
    read0_lines          cache lines per execution of that read (0..1)
    read1_unique_bytes   log footprint of the main store's next read
    read1_reuse          log accesses per unique element of that read
    read1_stride         log innermost stride of that read
    read1_lines          cache lines per execution of that read (0..1)
    loop_depth           loops around the main store
    num_loops            loops in the function
    num_stores           stores in the function
    inner_extent         log extent of the main store's innermost loop
    inner_extent_mean    log innermost-loop extent averaged over store executions
    outer_extent         log product of the main store's loop extents but the innermost
    parallel_extent      log product of the parallel loop extents around the main store
    parallel_work        fraction of store executions under a parallel loop
    parallel_outermost   1 if the main store's outermost loop is parallel
    vector_extent        log product of the vectorized loop extents around the main store
    vector_work          fraction of store executions under a vectorized loop
    vector_innermost     1 if the main store's innermost loop is vectorized
    vector_contiguous    fraction of vectorized accesses with stride 0 or 1 on the vector loop
    unroll_extent        log product of the unrolled loop extents around the main store
    unroll_work          fraction of store executions under an unrolled loop
    unroll_innermost     1 if the main store's innermost loop is unrolled
    guarded_work         fraction of store executions under an if
    conditions_per_work  log if-conditions evaluated per unit of work
    alloc_num            allocations in the function
    alloc_bytes          log compacted bytes of all allocations
    alloc_max_bytes      log compacted bytes of the largest allocation
    local_access         fraction of accesses to non-global buffers (caches)

Loop annotations (pragmas) are not features: the code generators ignore them. A loop or buffer
dimension whose size is not a constant counts as 32.
"""
from __future__ import annotations

import math

import numpy as np

from ..tir.function import PrimFunc
from ..tir.transform.lower_blocks import lower_blocks
from ..tir.transform.simplify import simplify
from .store_analysis import FLOAT_KINDS, OP_KINDS, Store, Walker

# The names are read off the table above, so the documentation and the vector cannot drift apart.
FEATURE_NAMES = [line.split()[0] for line in
                 __doc__.split("(FEATURE_NAMES, in order):\n\n")[1].split("\n\n")[0].splitlines()]

_CAPACITIES = {"reg": 512, "l1": 32 * 1024, "l2": 1024 * 1024}


def extract_features(func: PrimFunc) -> np.ndarray:
    """The feature vector (float64, ``len(FEATURE_NAMES)`` entries) of a block-form or lowered
    PrimFunc; see the module docstring for what each entry means.

    >>> from mlc_lab import te
    >>> A = te.placeholder((64, 64), name="A")
    >>> B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    >>> features = dict(zip(FEATURE_NAMES, extract_features(te.create_prim_func([A, B]))))
    >>> bool(features["float_mul"] == math.log2(1 + 64 * 64)), float(features["stride_contiguous"])
    (True, 1.0)
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"extract_features expects a PrimFunc, got {type(func).__name__}")
    if not func.attr_dict.get("tir.lowered", False):
        # The two rewrites without the pass machinery: no instruments, no verification, and
        # allocations are measured compacted here instead of by the (slower) compaction pass.
        func = simplify.pass_func(lower_blocks.pass_func(func))
    walker = Walker()
    walker.visit(func.body)
    walker.compact_allocations()
    values = _aggregate(walker)
    return np.array([values[name] for name in FEATURE_NAMES], dtype=np.float64)


def _log(x: float) -> float:
    return math.log2(1.0 + max(x, 0.0))


def _aggregate(walker: Walker) -> dict:
    stores = walker.stores
    out = {kind: _log(walker.ops[kind]) for kind in OP_KINDS}
    flops = sum(walker.ops[k] for k in FLOAT_KINDS)
    executions = sum(s.count for s in stores)
    work = max(flops + executions, 1.0)
    out.update(flops=_log(flops), flops_per_store=flops / max(executions, 1.0),
               num_stores=len(stores), num_loops=walker.num_loops,
               conditions_per_work=_log(walker.conditions / work))
    out.update(_memory(stores, flops, work))
    out.update(_loop_kinds(stores, executions))
    out.update(_allocations(walker, stores))
    main = max(stores, key=lambda s: s.count * (s.flops + 1), default=None)
    out.update(_main_store(main, stores, executions))
    return out


def _memory(stores: list, flops: float, work: float) -> dict:
    touched = lines = total = 0.0
    strides = {"broadcast": 0.0, "contiguous": 0.0, "strided": 0.0}
    log_stride = 0.0
    unique: dict = {}
    traffic = dict.fromkeys(_CAPACITIES, 0.0)
    for store in stores:
        for access in store.accesses:
            touched += store.count * access.elem_bytes
            lines += store.inner_runs * access.lines(store.loops)
            total += store.count
            kind = "broadcast" if access.stride == 0 else "contiguous" if access.stride == 1 else "strided"
            strides[kind] += store.count
            log_stride += store.count * _log(access.stride)
            key = id(access.buffer)
            unique[key] = max(unique.get(key, 0.0), access.footprint[0] * access.elem_bytes)
        for name, capacity in _CAPACITIES.items():
            level = _fitting_level(store, capacity)
            traffic[name] += store.count / store.trips[level] * store.working_set(level)
    unique_bytes = sum(unique.values())
    total = max(total, 1.0)
    out = {f"stride_{kind}": n / total for kind, n in strides.items()}
    out.update({f"{name}_traffic": _log(traffic[name] / work) for name in _CAPACITIES})
    out.update(bytes_touched=_log(touched), unique_bytes=_log(unique_bytes),
               reuse=_log(touched / max(unique_bytes, 1.0)), lines_per_work=_log(lines / work),
               stride_mean=log_stride / total, arith_intensity=_log(flops / max(unique_bytes, 1.0)))
    return out


def _fitting_level(store: Store, capacity: float) -> int:
    """The outermost loop level whose working set fits in ``capacity`` bytes (the innermost
    level, no loops at all, when none does)."""
    return next((level for level in range(len(store.loops) + 1)
                 if store.working_set(level) <= capacity), len(store.loops))


def _loop_kinds(stores: list, executions: float) -> dict:
    under = {"parallel": 0.0, "vector": 0.0, "unroll": 0.0, "guarded": 0.0}
    vector_accesses = vector_contiguous = inner_extent = 0.0
    for store in stores:
        kinds = {loop.kind for loop in store.loops}
        under["parallel"] += store.count * bool(kinds & {"parallel", "thread_binding"})
        under["vector"] += store.count * ("vectorized" in kinds)
        under["unroll"] += store.count * ("unrolled" in kinds)
        under["guarded"] += store.count * store.guarded
        inner_extent += store.count * _log(store.loops[-1].extent if store.loops else 1)
        lane = next((n for n in range(len(store.loops) - 1, -1, -1)
                     if store.loops[n].kind == "vectorized"), None)
        if lane is not None:
            vector_accesses += store.count * len(store.accesses)
            vector_contiguous += store.count * sum(a.flat[lane] <= 1 for a in store.accesses)
    executions = max(executions, 1.0)
    out = {f"{kind}_work": n / executions for kind, n in under.items()}
    out.update(vector_contiguous=vector_contiguous / max(vector_accesses, 1.0),
               inner_extent_mean=inner_extent / executions)
    return out


def _allocations(walker: Walker, stores: list) -> dict:
    sizes = walker.allocation_bytes
    accesses = sum(store.count * len(store.accesses) for store in stores)
    local = sum(store.count for store in stores for access in store.accesses
                if access.buffer.scope != "global")
    return {"alloc_num": len(walker.allocs), "alloc_bytes": _log(sum(sizes)),
            "alloc_max_bytes": _log(max(sizes, default=0.0)),
            "local_access": local / max(accesses, 1.0)}


def _main_store(main, stores: list, executions: float) -> dict:
    names = ("loop_depth", "inner_extent", "outer_extent", "parallel_extent", "parallel_outermost",
             "vector_extent", "vector_innermost", "unroll_extent", "unroll_innermost",
             "l1_tile_work")
    out = dict.fromkeys(names, 0.0)
    out.update({f"{slot}_{part}": 0.0 for slot in ("write", "read0", "read1")
                for part in ("unique_bytes", "reuse", "stride", "lines")})
    if main is None:
        return out
    loops = main.loops
    extents = {kind: math.prod(loop.extent for loop in loops if loop.kind in kinds)
               for kind, kinds in (("parallel", ("parallel", "thread_binding")),
                                   ("vector", ("vectorized",)), ("unroll", ("unrolled",)))}
    out.update({f"{kind}_extent": math.log2(n) for kind, n in extents.items()})
    if loops:
        out.update(loop_depth=len(loops), inner_extent=_log(loops[-1].extent),
                   outer_extent=_log(main.trips[0] / loops[-1].extent),
                   parallel_outermost=float(loops[0].kind in ("parallel", "thread_binding")),
                   vector_innermost=float(loops[-1].kind == "vectorized"),
                   unroll_innermost=float(loops[-1].kind == "unrolled"))
    out["l1_tile_work"] = _log(main.trips[_fitting_level(main, _CAPACITIES["l1"])])
    write = main.accesses[0]
    reads = sorted((a for a in main.accesses[1:] if a.buffer is not write.buffer),
                   key=lambda a: -a.stride)
    for slot, access in zip(("write", "read0", "read1"), [write] + reads[:2]):
        unique = access.footprint[0]
        out.update({f"{slot}_unique_bytes": _log(unique * access.elem_bytes),
                    f"{slot}_reuse": _log(main.count / unique),
                    f"{slot}_stride": _log(access.stride),
                    f"{slot}_lines": main.inner_runs * access.lines(loops) / max(main.count, 1.0)})
    return out
