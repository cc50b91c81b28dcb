# DefaultSchedule: schedule every PrimFunc by deterministic rules chosen from its block structure,
# so a model compiles fast without tuning. Expects kernels as LegalizeOps / FuseTIR write them.
"""``relax.transform.DefaultSchedule(target)``: fast kernels without tuning.

Each kernel gets the rule of its most demanding block (``default_schedule_rules``):

    a reduction with data reuse      "matmul" / "conv"   register tile, packed operand,
                                                         vector columns, fused epilogue
    a reduction without reuse        "reduction"         vector outputs or rfactor
    one row over packed int weights  "dequant_gemv"      parallel column strips, reduction
                                                         outside the vectors (a batch-1
                                                         quantized matmul: default_schedule_dequant)
    one row over a float matrix      "gemv"              the same loops (a layer at batch 1)
    only spatial blocks              "elementwise"       vector inner loop

First every spatial intermediate with one spatial consumer is inlined into it (a bias add into
its ReLU); the loops are parallel only when the target has several cores and the kernel enough work to
pay for the fork (the target's ``capabilities.parallel_threshold``: 5e4 flops with the native pool). The rule's name is stored in the kernel's "default_schedule"
attribute; ``default_schedule_report(mod)`` lists them.

A kernel a rule cannot handle (a symbolic shape, an index read from memory, loops already
transformed, a primitive refusing) is left exactly as it was, still correct, with
"unscheduled: <reason>". Kernels marked "tir.is_scheduled" (tuned ones, from
MetaScheduleApplyDatabase) or already carrying "default_schedule" are not touched. Targets
without CPU vector units (the "python" interpreter) leave the module unchanged. A kernel
scheduled before in this process (the same script, the same machine) is taken as it was then
(``tir.transform.func_memo``).

Before: ``fused_matmul_add_relu`` of a 784-256 layer at batch 64 as FuseTIR writes it, a
``T_matmul`` loop nest (64 x 256 x 784) into ``lv1``, then the bias add and ReLU. After (the
block bodies left out; ``lv1_local`` shrinks to the 8 x 32 tile when lowered)::

    T.func_attr({"default_schedule": "matmul", "global_symbol": "fused_matmul_add_relu", ...})
    lv1_local = T.alloc_buffer((T.int64(64), T.int64(256)), scope="local")
    for ax1_0_ax0_0_fused in range(T.int64(64)):                  # 8 x 32 tiles
        for ax0_1_init in T.unroll(T.int64(8)):
            for ax1_1_0_init in T.unroll(T.int64(2)):
                for ax1_1_1_init in T.vectorized(T.int64(16)):
                    with T.block("T_matmul_init"): ...
        for k_0 in range(T.int64(196)):
            for k_1 in T.unroll(T.int64(4)):
                for ax0_1 in T.unroll(T.int64(8)):
                    for ax1_1_0 in T.unroll(T.int64(2)):
                        for ax1_1_1 in T.vectorized(T.int64(16)):
                            with T.block("T_matmul_update"): ...   # into lv1_local
        for ax0 in T.unroll(T.int64(8)):
            for ax1_0 in T.unroll(T.int64(2)):
                for ax1_1 in T.vectorized(T.int64(16)):
                    with T.block("T_relu"): ...   # max(lv1_local + bias, 0) into the output
"""
from __future__ import annotations

import math

from ...ir.module import IRModule
from ...ir.transform import Pass, PassInfo
from ...runtime.parallel import default_threads
from ...target import Target, get_backend
from ...tir.schedule.policy.blocks import has_data_reuse, is_reduction, is_spatial
from ...tir.schedule.policy.flops import TYPICAL_LENGTH, estimate_flops
from ...tir.schedule.policy.postproc import (RewriteParallelVectorizeUnroll, RewriteReductionBlock, VerifyModule,
                                             blocks)
from ...tir.function import PrimFunc
from ...tir.schedule import Schedule, ScheduleError
from ...tir.transform.func_memo import FuncMemo
from ...tir.expr import IntImm
from ...tir.stmt_functor import post_order_visit, uses_var
from ...tir import dtype, stmt as S
from .default_schedule_dequant import schedule_dequant_gemvs
from .default_schedule_rules import (Unschedulable, contiguous, inline_elementwise,
                                     reduce, tile_reduction, vectorize_spatial, window_consumer)

ATTR = "default_schedule"


class DefaultSchedule(Pass):
    """``target``: what the kernels are compiled for (default: "llvm", the host CPU); its vector
    width comes from the backend's capabilities, its core count from "-num-cores"."""

    def __init__(self, target=None):
        self.target = Target("llvm" if target is None else target)
        self.info = PassInfo(0, "DefaultSchedule")

    def transform_module(self, mod, ctx):
        machine = vector_machine(self.target)
        if machine is None:
            return mod
        out = IRModule(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, PrimFunc) and ATTR not in func.attr_dict \
                    and not func.attr_dict.get("tir.is_scheduled"):
                out[gv] = _SCHEDULED.compute(func, machine, lambda f=func: schedule_kernel(f, *machine))
        return out


# Kernels scheduled before in this process (by printed script and vector machine).
_SCHEDULED = FuncMemo("DefaultSchedule")


def vector_machine(target) -> tuple[int, int, float] | None:
    """(32-bit vector lanes, cores, the least flops worth a parallel loop) of ``target``, or None
    for a target without CPU vector units (the "python" interpreter), which the rules leave
    alone."""
    target = Target(target)
    capabilities = get_backend(target.kind.name).capabilities
    if capabilities.device_type != "cpu" or not capabilities.vector_lanes:
        return None
    cores = target.attrs.get("num-cores") or default_threads()
    return max(capabilities.vector_lanes), cores, parallel_flops(target, cores)


def parallel_flops(target, cores: int) -> float:
    """The least work (flops) a parallel loop on ``cores`` cores pays for on ``target``; inf
    where there is one core or the backend runs no parallel loops."""
    threshold = Target(target).capabilities.parallel_threshold
    return threshold() if threshold is not None and cores > 1 else math.inf


def schedule_kernel(func: PrimFunc, lanes: int = 16, cores: int = 1,
                    min_flops: float | None = None) -> PrimFunc:
    """``func`` scheduled by its rule, with the rule's name in "default_schedule"; or ``func``
    unchanged with "unscheduled: <reason>" there."""
    try:
        rule, sch = default_schedule(func, lanes, cores, min_flops)
    except (ScheduleError, Unschedulable) as err:
        return func.with_attr(ATTR, "unscheduled: " + str(err).splitlines()[0])
    return sch.mod["main"].with_attr(ATTR, rule)


def default_schedule(func: PrimFunc, lanes: int = 16, cores: int = 1,
                     min_flops: float | None = None) -> tuple[str, Schedule]:
    """The rule's name and the ``tir.Schedule`` of ``func`` (as "main") it made, whose trace
    replays the default schedule (the tuner measures it as the starting point of a model's
    kernel). Loops are parallel with several ``cores`` and at least ``min_flops`` of work
    (default: the host CPU's threshold, ``parallel_flops("llvm", cores)``). Raises
    Unschedulable or ScheduleError where no rule applies."""
    sch = Schedule(func, debug_mask=0)
    _check_unscheduled(func)
    min_flops = parallel_flops("llvm", cores) if min_flops is None else min_flops
    parallel = cores > 1 and estimate_flops(func, assume=TYPICAL_LENGTH) >= min_flops
    rule = _apply_rules(sch, _lanes(func, lanes), parallel)
    RewriteParallelVectorizeUnroll().apply(sch)
    RewriteReductionBlock().apply(sch)
    if not VerifyModule().apply(sch):
        raise Unschedulable("the scheduled kernel fails tir.verify")
    return rule, sch


def _streams(block) -> bool:
    """A matrix-vector product (dense at batch 1): the operand that every output reads a
    different part of, the weights, is read once in all (its only unused iterators have extent
    1), along the reduction, contiguously. Dot products along that run, in vector partial sums
    (the ``reduce`` rule), stream it; a register tile over the outputs would copy it first."""
    k = block.iter_vars[-1]
    extents = {id(iv.var): iv.dom.extent.value if isinstance(iv.dom.extent, IntImm) else None
               for iv in block.iter_vars}   # None: symbolic, taken as more than one
    if k.iter_type == "spatial" or extents[id(k.var)] is None:
        return False

    def used(region):
        return [iv for iv in block.iter_vars if uses_var(region.region, iv.var)]
    operands = [r for r in block.reads if all(w.buffer is not r.buffer for w in block.writes)]
    if not operands:
        return False
    big = max(operands, key=lambda r: math.prod(extents[id(iv.var)] or TYPICAL_LENGTH
                                                for iv in used(r)))
    reads = used(big)
    return contiguous(big, k.var) and all(
        extents[id(iv.var)] == 1 for iv in block.iter_vars if iv not in reads)


def _apply_rules(sch, lanes: int, parallel: bool) -> str:
    """Inline, then give each block the rule of its kind, the most demanding kinds first. The
    kernel's rule is that of the first block scheduled; when none is, the first reason."""
    inline_elementwise(sch)
    reductions = [b for b in blocks(sch, "main") if is_reduction(b)]
    decoded, reductions = schedule_dequant_gemvs(sch, reductions, lanes, parallel)   # int4/int8 GEMV
    reuse = [b for b in reductions if has_data_reuse(b) and not _streams(b)]
    # A pooling fused after a convolution (FuseOps(windows=True)) reads the bias too, which
    # counts as reuse: it goes with the convolution's tile, or else is scheduled on its own.
    pooling = {b.name_hint: window_consumer(sch, sch.get_block(b.name_hint, "main")) for b in reuse}
    pooled = {sch.get(rv).name_hint for b in reuse[:1]
              for rv in sch.get_consumers(sch.get_block(b.name_hint, "main"))}
    reuse = [b for b in reuse if b.name_hint not in pooled]
    if len(reuse) > 1:
        raise Unschedulable(f"{len(reuse)} reductions with data reuse in one kernel")
    rules, reasons, untiled = decoded, [], []
    for block in reuse:
        try:
            rules.append(tile_reduction(sch, sch.get_block(block.name_hint, "main"), lanes,
                                        parallel, pooling=pooling[block.name_hint]))
        except Unschedulable as err:   # before any change: scheduled as a plain reduction
            reasons.append(str(err))
            untiled.append(block)
    reuse = [b for b in reuse if all(b is not u for u in untiled)]
    if rules and rules[0].endswith("+pool"):   # the pooling is computed in the tile
        reuse += [b for b in reductions if b.name_hint in pooled]
    groups = [(reduce, [b for b in reductions if all(b is not r for r in reuse)]),
              (vectorize_spatial, None)]
    for rule, group in groups:
        if group is None:   # what is still at the root after the rules above moved blocks
            group = [b for b in blocks(sch, "main") if is_spatial(b) and not b.annotations]
        for block in group:
            try:
                rules.append(rule(sch, sch.get_block(block.name_hint, "main"), lanes, parallel))
            except Unschedulable as err:
                reasons.append(str(err))
    if not rules:
        raise Unschedulable(reasons[0] if reasons else "the kernel has no blocks")
    return rules[0]


def _lanes(func: PrimFunc, lanes: int) -> int:
    """Vector lanes for the kernel's widest data type (``lanes`` are 32-bit lanes)."""
    bits = max((dtype.bits(b.dtype) for b in func.buffer_params), default=32)
    return max(2, min(lanes, lanes * 32 // bits))


def _check_unscheduled(func: PrimFunc) -> None:
    """A kernel scheduled by hand (a parallel, vectorized, unrolled or bound loop) is kept."""
    found = []
    post_order_visit(func.body, lambda node: found.append(node)
                     if isinstance(node, S.For) and node.kind != "serial" else None)
    if found:
        raise Unschedulable(f"loop {found[0].loop_var.name} is already {found[0].kind}")


def default_schedule_report(mod: IRModule) -> dict[str, str]:
    """{kernel name: the rule DefaultSchedule gave it}, sorted by name: "matmul", "conv",
    "reduction", "elementwise", "unscheduled: <reason>", "already scheduled" (tuned), or "not
    scheduled" where DefaultSchedule did not run (opt_level=0, the python target)."""
    report = {}
    for gv, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        if isinstance(func, PrimFunc):
            attrs = func.attr_dict
            report[gv.name_hint] = attrs.get(ATTR) or (
                "already scheduled" if attrs.get("tir.is_scheduled") else "not scheduled")
    return report
