"""mlc_lab.tir.schedule.testing, the helpers schedule tests written for the reference compiler
import: a trace replayed three ways must rebuild the schedule's module, and a comparison that
ignores the global symbol."""
import json

import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import Trace
from mlc_lab.tir.schedule.testing import assert_structural_equal_ignore_global_symbol, verify_trace_roundtrip


@T.prim_func
def scale(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)


def scheduled():
    sch = tir.Schedule(scale, seed=3)
    i, j = sch.get_loops(sch.get_block("B"))
    io, _ = sch.split(i, [None, 4])
    sch.reorder(j, io)
    sch.split(j, sch.sample_perfect_tile(j, n=2))
    sch.transform_layout(sch.get_block("B"), "B", "lambda a, b: (b, a)")
    return sch


@pytest.mark.parametrize("text_format", ["trace", "json", "python"])
def test_each_replay_rebuilds_the_module(text_format):
    sch = scheduled()
    replayed = verify_trace_roundtrip(sch, scale, text_format=text_format)
    assert replayed is not sch and replayed.mod["main"].script() == sch.mod["main"].script()


def test_a_replay_that_differs_fails():
    sch = scheduled()
    other = tir.Schedule(scale)
    other.split(other.get_loops(other.get_block("B"))[0], [None, 8])
    sch.trace.insts[:] = other.trace.insts     # a trace that no longer gives sch.mod
    with pytest.raises(ValueError, match="structural equality failed"):
        verify_trace_roundtrip(sch, scale, text_format="trace")


def test_json_replay_takes_the_saved_text():
    sch = scheduled()
    again = Trace.apply_json_to_schedule(json.dumps(sch.trace.as_json()), tir.Schedule(scale))
    assert again.mod["main"].script() == sch.mod["main"].script()


def test_comparison_ignores_only_the_global_symbol():
    renamed = scale.with_attr("global_symbol", "other")
    assert_structural_equal_ignore_global_symbol(scale, renamed)
    with pytest.raises(ValueError):
        assert_structural_equal_ignore_global_symbol(scale, renamed.with_attr("tir.noalias", True))
