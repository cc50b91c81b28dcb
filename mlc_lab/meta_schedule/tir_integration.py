"""From a tuning database back to a schedule: ``compile_tir`` replays the best record."""
from __future__ import annotations

from ..tir.schedule import Schedule
from .tune import as_module


def compile_tir(database, mod, target) -> Schedule:
    """A ``tir.Schedule`` of ``mod`` whose trace replays the fastest correct record the database
    holds for ``mod`` on ``target``. Raises LookupError when it holds none."""
    mod = as_module(mod)
    best = database.best(mod, target)
    if best is None:
        measured = len(database.records(mod, target))
        raise LookupError(f"the database has no successful tuning record of this module for target "
                          f"{target!r} ({measured} record(s) for it, all failed or none); run "
                          "ms.tune_tir first")
    return best.as_schedule(mod)
