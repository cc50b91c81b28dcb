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


# -- the printed and saved forms of a trace -------------------------------------------------------------
def test_printed_trace_is_a_function_that_replays_it():
    sch = scheduled()
    text = str(sch.trace)
    lines = text.splitlines()
    assert lines[:2] == ["# from mlc_lab import tir", "def apply_trace(sch: tir.Schedule) -> None:"]
    assert all(line.startswith("  ") for line in lines[2:])
    assert lines[2:] == ["  " + line for line in sch.trace.as_python()]
    namespace = {}
    exec(text.replace("# from", "from"), namespace)                # noqa: S102 (our own trace)
    replayed = tir.Schedule(scale)
    namespace["apply_trace"](replayed)
    assert replayed.mod["main"].script() == sch.mod["main"].script()
    assert str(Trace()).splitlines()[-1] == "  pass"


def test_trace_json_nests_instructions_and_decisions():
    sch = scheduled()
    insts, decisions = sch.trace.as_json()
    assert insts[0] == ["GetBlock", [], ["B", "main"], ["b0"]]
    assert insts[1] == ["GetLoops", ["b0"], [], ["l1", "l2"]]
    assert insts[2] == ["Split", ["l1", "None", 4], [True], ["l3", "l4"]]   # default attr filled in
    assert insts[3] == ["Reorder", ["l2", "l3"], [], []]
    sample = next(k for k, inst in enumerate(insts) if inst[0] == "SamplePerfectTile")
    assert insts[sample][2] == [2, 16] and decisions == [[sample, sch.trace.insts[sample].decision]]
    # a string input is quoted, so it cannot be taken for a random variable's name
    layout = insts[-1]
    assert layout[0] == "TransformLayout" and layout[1][1] == '"B"'


@pytest.mark.parametrize("value", ["SSRSSR", "", '"', '""', "b0", "None"])
def test_annotation_strings_survive_json(value):
    sch = tir.Schedule(scale)
    sch.annotate(sch.get_block("B"), "note", value)
    saved = json.loads(json.dumps(sch.trace.as_json()))
    again = Trace.apply_json_to_schedule(saved, tir.Schedule(scale))
    assert dict(again.get(again.get_block("B")).annotations)["note"] == value


def test_traces_saved_in_the_older_form_still_load():
    older = [
        {"kind": "get_block", "args": [], "kwargs": {"name": "B"}, "outputs": {"rv": "b0"}},
        {"kind": "get_loops", "args": [], "kwargs": {"block": {"rv": "b0"}},
         "outputs": [{"rv": "l1"}, {"rv": "l2"}]},
        {"kind": "sample_perfect_tile", "args": [], "kwargs": {"loop": {"rv": "l2"}, "n": 2},
         "outputs": [{"rv": "v3"}, {"rv": "v4"}], "decision": [4, 4]},
        {"kind": "split", "args": [], "kwargs": {"loop": {"rv": "l2"},
                                                  "factors": [{"rv": "v3"}, {"rv": "v4"}]},
         "outputs": [{"rv": "l5"}, {"rv": "l6"}]},
    ]
    trace = Trace.from_json(older)
    assert trace.as_python()[-1] == "l5, l6 = sch.split(loop=l2, factors=[v3, v4])"
    replayed = trace.apply_to_schedule(tir.Schedule(scale))
    expected = tir.Schedule(scale)
    expected.split(expected.get_loops(expected.get_block("B"))[1], [4, 4])
    assert replayed.mod["main"].script() == expected.mod["main"].script()
    # and it can be saved again, in the reference form (which spells out every default)
    resaved = trace.as_json()
    assert resaved[0][3] == ["Split", ["l2", "v3", "v4"], [True], ["l5", "l6"]]
    assert Trace.from_json(resaved).as_json() == resaved
    assert [str(kind) for kind in Trace.json_kinds(older)] == \
        [str(kind) for kind in Trace.json_kinds(trace.as_json())]
    assert Trace.json_prefix(older, 2) == older[:2]


def test_json_prefix_keeps_the_decisions_of_the_instructions_it_keeps():
    sch = scheduled()
    saved = sch.trace.as_json()
    sample = saved[1][0][0]
    assert Trace.json_prefix(saved, sample)[1] == [] and Trace.json_prefix(saved, sample + 1)[1] == saved[1]
    assert len(Trace.json_prefix(saved, 3)[0]) == 3


def test_instruction_inputs_and_attrs_in_the_reference_layout():
    sch = scheduled()
    split = sch.trace.insts[2]
    assert split.inputs[1:] == [None, 4] and split.attrs == [True]
    assert str(split) == "_, _ = sch.split(loop=_, factors=[None, 4])"


def test_numbers_print_as_the_reference_prints_them():
    sch = tir.Schedule(scale, seed=0)
    sch.sample_categorical([3, 5], probs=[1.0, 0.25])
    assert sch.trace.as_python()[-1].startswith("v0 = sch.sample_categorical(candidates=[3, 5], "
                                                "probs=[1, 0.25], decision=")


@pytest.mark.parametrize("bad, message", [
    ([[["Nope", [], [], []]], []], "no instruction kind 'Nope'"),
    ([[["GetLoops", ["b0"], [], ["l1"]]], []], "uses 'b0', which no earlier instruction outputs"),
    ([[["GetBlock", [], ["B"], "b0"]], []], "should be \\[kind, inputs, attrs, outputs\\]"),
    ([[["GetBlock", [], ["B"], ["b0"]]], [[5, 1]]], "each decision should be"),
])
def test_malformed_reference_json_is_refused(bad, message):
    with pytest.raises(tir.schedule.TraceError, match=message):
        Trace.from_json(bad)


def test_the_import_line_of_the_printed_trace_can_be_changed(monkeypatch):
    monkeypatch.setattr(Trace, "python_import", "from tvm import tir")
    assert str(scheduled().trace).splitlines()[0] == "# from tvm import tir"
