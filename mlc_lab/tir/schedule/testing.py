"""Checks for schedule tests, named as the reference compiler names them (``tvm.tir.schedule.testing``):
replaying a schedule's trace, and comparing functions whatever their global symbol."""
from __future__ import annotations

import json

from ...ir.structural import assert_structural_equal
from ..function import PrimFunc
from . import Schedule
from .trace import Trace

FORMATS = ("trace", "json", "python")


def verify_trace_roundtrip(sch: Schedule, mod, *, debug_mask="all", text_format=FORMATS) -> Schedule:
    """Replay ``sch.trace`` on a fresh schedule of ``mod`` in each of ``text_format`` (the trace
    itself, its JSON text, its Python text) and check that each replay gives ``sch.mod``
    exactly. Returns the last replayed schedule. ``debug_mask`` is accepted for compatibility:
    every replay here is checked in full."""
    formats = (text_format,) if isinstance(text_format, str) else tuple(text_format)
    replayed = None
    for form in formats:
        replayed = Schedule(mod)
        if form == "trace":
            sch.trace.apply_to_schedule(replayed)
        elif form == "json":
            Trace.apply_json_to_schedule(json.loads(json.dumps(sch.trace.as_json())), replayed)
        elif form == "python":
            exec("\n".join(sch.trace.as_python()), {"sch": replayed})   # noqa: S102 (our own trace)
        else:
            raise ValueError(f"verify_trace_roundtrip: text_format {form!r} is not one of {FORMATS}")
        assert_structural_equal(replayed.mod, sch.mod)
    return replayed


def assert_structural_equal_ignore_global_symbol(func1, func2, *args, **kwargs) -> None:
    """``assert_structural_equal`` of two PrimFuncs (or modules) as if neither had a
    ``global_symbol`` attribute: a function renamed by a schedule compares equal to its
    expected form."""
    assert_structural_equal(_without_symbol(func1), _without_symbol(func2), *args, **kwargs)


def _without_symbol(func):
    if isinstance(func, PrimFunc):
        return func.replace(attrs=tuple((k, v) for k, v in func.attrs if k != "global_symbol"))
    return func


__all__ = ["assert_structural_equal_ignore_global_symbol", "verify_trace_roundtrip"]
