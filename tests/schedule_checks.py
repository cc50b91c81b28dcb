"""Checks shared by the schedule tests: a scheduled program must compute what the original
computes, replay from its saved trace, print and parse back, and a failed primitive must leave
the schedule untouched."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script.parser import from_source
from mlc_lab.tir.schedule import numerics


def assert_same_numerics(before, after, tol=1e-4):
    args = numerics.random_arguments(before)
    for want, got in zip(numerics.run(before, args), numerics.run(after, args)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def assert_replays(sch, original):
    replayed = tir.Trace.from_json(sch.trace.as_json()).apply_to_schedule(tir.Schedule(original))
    assert_structural_equal(replayed.mod, sch.mod)


def assert_schedule_ok(sch, original, expected=None, check_numerics=True):
    """Well formed, equal to ``expected`` (ignoring the function's name), round-trips through
    the printer, computes what ``original`` computes, and replays from JSON."""
    func = sch.mod["main"]
    assert tir.verify(func)
    if expected is not None:
        assert_structural_equal(func, expected.with_attr("global_symbol", func.name))
    assert_structural_equal(from_source(func.script()), func)
    if check_numerics:
        assert_same_numerics(original, func)
    assert_replays(sch, original)


def unchanged_after(sch, action, error, *fragments) -> str:
    """``action`` raises ``error`` naming every fragment, and the schedule is as it was."""
    before, steps = sch.mod, len(sch.trace.insts)
    with pytest.raises(error) as info:
        action()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    assert sch.mod is before
    assert all(inst.kind.startswith("get_") for inst in sch.trace.insts[steps:]), \
        "a failed primitive must not be recorded in the trace"
    return message


def assert_runs_like(original, sch, outputs):
    """``sch.mod`` gives on every target what ``original`` gives on the interpreter; ``outputs``
    are the indices of the parameters the program writes."""
    args = numerics.random_arguments(original)
    for k in outputs:
        args[k] = np.full_like(args[k], np.nan)
    want = numerics.run(original, args)
    for target in ("python", "llvm", "llvm -bounds-check"):
        got = [a.copy() for a in args]
        mlc_lab.build(sch.mod, target=target)["main"](*got)
        for k in outputs:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-4, err_msg=target)
