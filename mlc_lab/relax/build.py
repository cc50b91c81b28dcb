"""``relax.build``: compile a graph-level module into an Executable for the VirtualMachine.

    ex = relax.build(mod, target="llvm")       # the default pipeline, then every PrimFunc compiled
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    out = vm["main"](x, w0, b0, w1, b1)

The pipeline is ``relax.transform.default_pipeline(target)`` by default (``opt_level=1``):
legalization, fusion, default schedules for the kernels (``DefaultSchedule``) and static memory
planning. ``opt_level=0`` runs ``relax.transform.LegalizeOps()`` alone: one unscheduled kernel
per op, as legalization writes it, for teaching. ``pipeline=`` replaces either with any callable
from IRModule to IRModule (a pass, a Sequential, or a list of them).
"""
from __future__ import annotations

from typing import Optional

from ..driver import build as build_prim_funcs
from ..ir.module import IRModule
from ..runtime.module import Module
from ..target import Target, get_backend
from ..tir.function import PrimFunc
from ..tir.transform.func_memo import FuncMemo
from .analysis import References
from .expr import Function
from .vm import RUNNABLE_OPS, Executable


def build(mod, target="llvm", params: Optional[dict] = None, opt_level: int = 1,
          pipeline=None) -> Executable:
    """Compile ``mod`` (an IRModule, or a lone relax Function taken as "main") for ``target``.

    ``params`` ({parameter name: array}) binds those parameters of "main" to constants.
    Returns an Executable: ``.mod`` is the module after the pipeline, ``.lib`` the runtime Module
    holding all its PrimFuncs compiled together. For a CPU target, kernels compiled before in
    this process (the same printed PrimFuncs, the same target) are not compiled again: the
    Executables share that runtime Module (``tir.transform.func_memo``)."""
    target = Target("python" if target is None else target)
    get_backend(target.kind.name)   # an unavailable target fails before the passes run
    if isinstance(mod, Function):
        mod = IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"relax.build expects an IRModule or a relax.Function, got "
                        f"{type(mod).__name__}")
    if params:
        mod = _bind_params(mod, "main", params)
    passes = _default_passes(opt_level, target) if pipeline is None else pipeline
    legalized = pipeline is None and bool(passes)
    for pass_ in (passes if isinstance(passes, (list, tuple)) else [passes]):
        mod = pass_(mod)
        if not isinstance(mod, IRModule):
            raise TypeError(f"relax.build: pass {pass_!r} returned {type(mod).__name__}, not an "
                            "IRModule")
    _check_runnable(mod, legalized)
    prim_funcs = IRModule({gv: f for gv, f in mod.functions.items() if isinstance(f, PrimFunc)})
    if len(prim_funcs) and target.capabilities.device_type == "cpu":
        # the same kernels built again (a cell run twice) share the compiled module
        lib = _BUILT.compute(prim_funcs, target, lambda: build_prim_funcs(prim_funcs, target))
    elif len(prim_funcs):
        lib = build_prim_funcs(prim_funcs, target)
    else:
        lib = Module({}, target.kind.name)
    return Executable(mod, lib, str(target))


# Runtime modules of the kernels of modules built before in this process (CPU targets), by the
# printed kernels and the target; a compiled module holds machine code, so few are kept.
_BUILT = FuncMemo("relax.build kernels", capacity=16)


def _transform_package():
    """``mlc_lab.relax.transform`` (its passes import this package, so it is taken when needed)."""
    from . import transform
    return transform


def _default_passes(opt_level: int, target: Target) -> list:
    if not isinstance(opt_level, int) or opt_level < 0:
        raise ValueError(f"relax.build: opt_level must be an int >= 0, got {opt_level!r}")
    transform = _transform_package()
    if opt_level >= 1:
        return [transform.default_pipeline(target)]
    return [transform.LegalizeOps()]


def _check_runnable(mod: IRModule, legalized: bool) -> None:
    """Fail when ``mod`` calls Ops the VirtualMachine cannot run (named in order of appearance)."""
    unknown = [name for name in References.of_module(mod).ops if name not in RUNNABLE_OPS]
    if not unknown:
        return
    ops = ", ".join(unknown)
    if legalized:
        raise ValueError(f"relax.build: the module still calls {ops} after "
                         "relax.transform.LegalizeOps(): no legalization is registered for it")
    raise ValueError(f"relax.build: the module still calls {ops}; apply "
                     "relax.transform.LegalizeOps() first")


def _bind_params(mod: IRModule, func_name: str, params: dict) -> IRModule:
    return _transform_package().BindParams(func_name, params)(mod)


__all__ = ["build"]
