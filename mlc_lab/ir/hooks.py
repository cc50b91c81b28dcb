"""Calls from a lower layer up to a higher one, without importing it.

The packages of mlc_lab are layered (``ARCHITECTURE.md``; ``tests/test_layering.py`` enforces the
order, imports inside functions included): a package imports only packages below it. A few
services of a low layer need a high one: ``sch.stepper()`` draws with ``viz``, a schedule error
prints the IR with ``script``'s printer, ``check_numerics`` runs ``runtime``'s interpreter. The
high layer *provides* the service here when it is imported (``import mlc_lab`` imports every
layer), and the low layer *needs* it by name when it is called.

    hooks.provide("viz.stepper", Stepper)      # in mlc_lab/viz/stepper.py, at import
    hooks.need("viz.stepper")(sch)             # in mlc_lab/tir/schedule/schedule.py, when called

Every name is listed in ``SERVICES`` with the module that provides it, so a reader can find the
other end, and a test checks that each is provided after ``import mlc_lab``.
"""
from __future__ import annotations

SERVICES = {
    "script.printer": "mlc_lab.script.printer",             # node.script(), node.show(), str(node)
    "script.display_code": "mlc_lab.script.highlight",      # highlighted code in Jupyter
    "script.tir": "mlc_lab.script.tir",                     # the T namespace, for index-map lambdas
    "runtime.interpreter": "mlc_lab.runtime.interpreter",   # run a PrimFunc on numpy arrays
    "runtime.evaluator": "mlc_lab.runtime.interpreter.expr",   # evaluate TIR expressions with numpy
    "relax.Op": "mlc_lab.relax.expr",                       # mlc_lab.ir.Op (an Op is a relax Expr)
    "tir.verify": "mlc_lab.tir.verify",                     # well-formedness after each pass
    "viz.ir_diff": "mlc_lab.viz.ir_diff",                   # IRDiff, PassDiff, PipelineView
    "viz.graph": "mlc_lab.viz.graph",                       # mod.show_graph()
    "viz.stepper": "mlc_lab.viz.stepper",                   # sch.stepper()
}

_provided: dict[str, object] = {}


def provide(name: str, value) -> None:
    """Register ``value`` as the service ``name`` (one of SERVICES)."""
    if name not in SERVICES:
        raise KeyError(f"unknown service {name!r}: list it in mlc_lab.ir.hooks.SERVICES")
    _provided[name] = value


def need(name: str):
    """The service ``name``; RuntimeError naming the module that provides it when none has."""
    try:
        return _provided[name]
    except KeyError:
        raise RuntimeError(f"nothing provides {name!r} yet: import mlc_lab (or {SERVICES.get(name, name)}), "
                           "which registers it") from None


def provided() -> set[str]:
    return set(_provided)
