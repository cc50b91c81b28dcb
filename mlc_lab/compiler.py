"""``mlc_lab.compile``: one entry point for tensor programs and graph programs.

It sends its input where it belongs, as the reference compiler's ``tvm.compile`` does: a PrimFunc,
or an IRModule holding only PrimFuncs, goes to :func:`mlc_lab.build` and gives its runtime Module
(``lib["name"](...)``, ``lib.mod.time_evaluator(...)``); an IRModule with graph-level
(``R.function``) functions goes to :func:`mlc_lab.relax.build` and gives the Executable a
``relax.VirtualMachine`` runs. The course-era names stay: nothing here compiles on its own.
"""
from __future__ import annotations

from .driver import build as build_prim_funcs
from .ir import IRModule
from .relax.build import build as build_relax
from .relax.expr import Function
from .tir.function import PrimFunc

_DEFAULT = "default"


def compile(mod, target=None, *, relax_pipeline=_DEFAULT, tir_pipeline=_DEFAULT):  # noqa: A001
    """Compile ``mod`` for ``target`` (default ``"llvm"``).

    ``relax_pipeline`` (graph modules only): ``"default"`` runs the standard passes, ``None``
    none, and a pass, a callable taking and returning an IRModule, or a list of them runs those.
    ``tir_pipeline`` takes ``"default"`` only: PrimFuncs are always lowered by mlc_lab's pipeline.

    >>> import numpy as np, mlc_lab
    >>> from mlc_lab import te
    >>> A = te.placeholder((4,), name="A")
    >>> B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    >>> lib = mlc_lab.compile(te.create_prim_func([A, B]), target="llvm")
    >>> a = mlc_lab.runtime.tensor(np.arange(4, dtype="float32"))
    >>> b = mlc_lab.runtime.tensor(np.zeros(4, dtype="float32"))
    >>> lib(a, b); b.numpy()
    array([0., 2., 4., 6.], dtype=float32)
    """
    target = "llvm" if target is None else target
    if not isinstance(mod, (PrimFunc, IRModule)):
        raise TypeError(f"mlc_lab.compile expects a PrimFunc or an IRModule, got {type(mod).__name__}")
    if tir_pipeline != _DEFAULT:
        raise ValueError(f"mlc_lab.compile: tir_pipeline={tir_pipeline!r} is not supported; PrimFuncs "
                         "are lowered by mlc_lab's own pipeline (leave tir_pipeline out)")
    if isinstance(mod, IRModule) and any(isinstance(f, Function) for f in mod.functions.values()):
        return build_relax(mod, target, pipeline=_relax_passes(relax_pipeline))
    if relax_pipeline != _DEFAULT:
        raise ValueError("mlc_lab.compile: relax_pipeline applies to modules with R.function "
                         "functions; this one holds PrimFuncs only (leave relax_pipeline out)")
    return build_prim_funcs(mod, target)


def _relax_passes(pipeline):
    """relax.build's ``pipeline`` argument for ``relax_pipeline``."""
    if isinstance(pipeline, str):
        if pipeline != _DEFAULT:
            raise ValueError(f"mlc_lab.compile: unknown relax_pipeline {pipeline!r}; use \"default\", "
                             "None (no passes), or a list of passes")
        return None            # relax.build's standard passes
    if pipeline is None:
        return []
    if callable(pipeline) or isinstance(pipeline, (list, tuple)):
        return pipeline
    raise TypeError(f"mlc_lab.compile: relax_pipeline must be \"default\", None, a pass or a list of "
                    f"passes, got {type(pipeline).__name__}")


__all__ = ["compile"]
