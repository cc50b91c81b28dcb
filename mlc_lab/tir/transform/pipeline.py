# The lowering pipeline: the passes, in order, that turn a scheduled block-form PrimFunc into the
# flat loop code the code generators take (and, for a GPU, its kernels). Expects IRModules of
# PrimFuncs (or a lone PrimFunc).
from __future__ import annotations

import contextlib

from ..._gc import paused as gc_paused
from ...arith.simplify_memo import shared_memo
from ...ir.module import IRModule
from ...ir.transform import Pass, PassContext, Sequential
from ..function import PrimFunc
from ..verify import VerifyError, verify
from .device_passes import InjectSync, SplitHostDevice
from .flatten_buffer import flatten_buffer
from .func_memo import FuncMemo, memo_enabled
from .lower_blocks import lower_blocks
from .lower_init_block import lower_init_block
from .partition_tail import partition_tail
from .plan_and_compact_allocations import plan_and_compact_allocations
from .simplify import simplify
from .unroll_loop import unroll_loop
from .vectorize_loop import vectorize_loop
from .verify_lowered import verify_lowered
from .verify_memory import verify_memory

PASSES = [
    lower_init_block,
    plan_and_compact_allocations,
    lower_blocks,
    flatten_buffer,
    simplify,
    unroll_loop,
    partition_tail,
    vectorize_loop,
    simplify,
]

# The verify_lowered stage that holds once a pass has run (later passes keep it).
STAGE_AFTER = {"lower_blocks": "no_blocks", "flatten_buffer": "flat"}

# Passes whose output the code generators need; the others are optimizations that
# PassContext(disabled_pass=[...]) may turn off.
REQUIRED = ("lower_init_block", "plan_and_compact_allocations", "lower_blocks", "flatten_buffer",
            "split_host_device")


def gpu_passes(target=None) -> list:
    """The passes a GPU backend runs after PASSES (``lower(mod, extra_passes=gpu_passes(t))``):
    each function's kernels, checked against ``target``, then their barriers. The kernels are in
    ``device_passes.device_programs`` of the result."""
    return [SplitHostDevice(target), InjectSync()]


# PrimFuncs lowered by PASSES alone (no extra passes, not in debug mode), by printed script.
_LOWERED = FuncMemo("lower")


class LoweringError(VerifyError):
    """A lowering pass produced ill-formed IR; ``pass_name`` says which."""

    def __init__(self, pass_name: str, cause: VerifyError):
        super().__init__(f"lowering pass {pass_name} broke the IR: {cause}", cause.func_name,
                         cause.node, cause.rule)
        self.pass_name = pass_name


def lowering_sequence(extra_passes=()) -> Sequential:
    """PASSES, then ``extra_passes`` (a backend's own), as one Sequential named "lower", each
    member checked in debug mode against the lowered-IR stage reached once it has run (a failure
    is a LoweringError naming it)."""
    members: list[Pass] = []
    stage = "blocks"
    for lowering_pass in [*PASSES, *extra_passes]:
        stage = STAGE_AFTER.get(lowering_pass.info.name, stage)
        members.append(lowering_pass.with_verify(_stage_check(stage)))
    return Sequential(members, name="lower")


def lower(mod_or_func, debug: bool = False, extra_passes=()) -> IRModule:
    """Run PASSES over every PrimFunc and return the lowered IRModule (a lone PrimFunc is named by
    its global_symbol, else "main"); ``extra_passes`` run after them (a GPU backend gives
    ``gpu_passes(target)``). The input must pass ``tir.verify``. The passes run under the
    current PassContext, whose instruments see each of them. With ``debug=True`` (or
    MLC_LAB_DEBUG=1, or the context's ``config={"debug": True}``) the IR is verified after every
    pass and a failure names the pass that broke it, and every access to a buffer the function
    allocates must be proved in bounds (``verify_memory``; its prover is conservative, so it is
    not run outside debug mode). The result is always checked against the lowered-IR contract.
    A function lowered before in this process is not lowered again (``func_memo``: not with
    ``extra_passes``, in debug mode or under a PassContext with instruments)."""
    if isinstance(mod_or_func, PrimFunc):
        mod = IRModule({mod_or_func.name or "main": mod_or_func})
    elif isinstance(mod_or_func, IRModule):
        mod = mod_or_func
    else:
        raise TypeError(f"lower expects an IRModule or a PrimFunc, got {type(mod_or_func).__name__}")
    ctx = PassContext.current()
    names = {p.info.name for p in [*PASSES, *extra_passes]}
    refused = [name for name in REQUIRED if name in ctx.disabled_pass and name in names]
    if refused:
        optional = sorted(names - set(REQUIRED))
        raise ValueError(f"lowering pass {refused[0]} cannot be disabled: the code generators need "
                         f"its output (those that can be: {', '.join(optional)})")
    # Each PrimFunc is lowered on its own by PASSES: one lowered before (the same script) is
    # taken as it was then, and only the others run through the passes.
    keys = {gv: _LOWERED.key(f, tuple(PASSES)) for gv, f in mod.functions.items() if isinstance(f, PrimFunc)} \
        if not debug and not extra_passes and memo_enabled() else {}
    known = {gv: found for gv, key in keys.items() if (found := _LOWERED.get(key)) is not None}
    todo = IRModule({gv: f for gv, f in mod.functions.items() if gv not in known}, mod.attrs)
    if known and not len(todo):
        return IRModule({gv: known[gv] for gv in mod.functions}, mod.attrs)
    verify(todo)   # ill-formed input is the caller's error, reported before any pass runs
    # The passes simplify the same subexpressions again and again: they share what is learnt
    # about each node (the memo lives as long as this call). Their allocations are almost all
    # acyclic: the cyclic garbage collector waits until they are done (mlc_lab._gc).
    with ctx.with_config(debug=True) if debug else contextlib.nullcontext(), shared_memo(), \
            gc_paused():
        todo = lowering_sequence(extra_passes)(todo)
        if PassContext.current().debug:
            verify_memory(todo)
    _check(todo, PASSES[-1].info.name, "flat")
    for gv, key in keys.items():
        if gv not in known:
            _LOWERED.put(key, todo[gv])
    if not known:
        return todo
    return IRModule({gv: known[gv] if gv in known else todo[gv] for gv in mod.functions}, todo.attrs)


def _stage_check(stage: str):
    return lambda mod, info: _check(mod, info.name, stage)


def _check(mod: IRModule, pass_name: str, stage: str) -> None:
    try:
        verify_lowered(mod, stage)
    except VerifyError as err:
        raise LoweringError(pass_name, err) from None
