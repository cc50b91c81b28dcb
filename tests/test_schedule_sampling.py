"""Sampling instructions: seeded reproducibility, valid samples, decisions recorded in the trace,
overridden on replay and kept through JSON."""
import collections
import json

import pytest

from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import InvalidDecisionError

from corpus import mm_relu


def tile_and_split(seed):
    sch = tir.Schedule(mm_relu, seed=seed)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    factors = sch.sample_perfect_tile(j, n=3, max_innermost_factor=8)
    sch.split(j, factors=factors)
    return sch, factors


def test_perfect_tile_is_reproducible_and_valid():
    runs = [tile_and_split(seed)[1] for seed in (7, 7, 8)]
    assert runs[0] == runs[1]
    for factors in runs:
        assert len(factors) == 3 and factors[0] * factors[1] * factors[2] == 128
        assert factors[-1] <= 8
    other_seeds = {tuple(tile_and_split(seed)[1]) for seed in range(12)}
    assert len(other_seeds) > 1


def test_perfect_tile_is_uniform():
    sch = tir.Schedule(mm_relu, seed=0)
    i, _, _ = sch.get_loops(sch.get_block("Y"))
    counts = collections.Counter(tuple(sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
                                 for _ in range(2500))
    assert set(counts) == {(128, 1), (64, 2), (32, 4), (16, 8), (8, 16)}
    assert min(counts.values()) > 400


def test_perfect_tile_edge_cases():
    sch = tir.Schedule(mm_relu, seed=0)
    i, _, _ = sch.get_loops(sch.get_block("Y"))
    assert sch.sample_perfect_tile(i, n=1) == [128]
    assert sch.sample_perfect_tile(i, n=4, max_innermost_factor=1)[-1] == 1
    tiles = sch.sample_perfect_tile(i, n=2, max_innermost_factor=None)
    assert tiles[0] * tiles[1] == 128
    with pytest.raises(TypeError, match="parameter 'n'"):
        sch.sample_perfect_tile(i, n=0)
    before = sch.mod
    with pytest.raises(InvalidDecisionError, match="not 2 positive factors of the extent 128"):
        sch.sample_perfect_tile(i, n=2, decision=[3, 5])
    assert sch.mod is before


def test_decision_is_recorded_and_overridden_on_replay():
    sch, factors = tile_and_split(seed=3)
    inst = sch.trace.insts[2]
    assert inst.kind == "sample_perfect_tile" and inst.decision == list(factors)
    assert "decision=" in sch.trace.as_python()[2]
    replayed = sch.trace.apply_to_schedule(tir.Schedule(mm_relu))
    assert_structural_equal(replayed.mod, sch.mod)
    # there are no postprocessing instructions to remove, so remove_postproc replays the same
    no_postproc = sch.trace.apply_to_schedule(tir.Schedule(mm_relu), remove_postproc=True)
    assert_structural_equal(no_postproc.mod, sch.mod)
    # a new decision changes what the sampling instruction returns on replay
    fresh = tir.Trace(sch.trace.insts[:3]).apply_to_schedule(tir.Schedule(mm_relu),
                                                           decisions={2: [2, 8, 8]})
    assert fresh.trace.insts[2].decision == [2, 8, 8]


def test_json_round_trip_keeps_decisions():
    sch, factors = tile_and_split(seed=5)
    choice = sch.sample_categorical([1, 2, 4, 8], probs=[0.1, 0.2, 0.3, 0.4])
    saved = json.loads(json.dumps(sch.trace.as_json()))
    trace = tir.Trace.from_json(saved)
    for seed in (0, 1, 2):
        replayed = trace.apply_to_schedule(tir.Schedule(mm_relu, seed=seed))
        assert_structural_equal(replayed.mod, sch.mod)
        assert replayed.trace.insts[2].decision == list(factors)
        assert replayed.trace.insts[-1].decision == [1, 2, 4, 8].index(choice)


def test_sample_categorical():
    sch = tir.Schedule(mm_relu, seed=11)
    draws = [sch.sample_categorical(["a", "b", "c"], probs=[0.0, 1.0, 3.0]) for _ in range(400)]
    counts = collections.Counter(draws)
    assert counts["a"] == 0 and 40 < counts["b"] < 160
    assert sch.sample_categorical(["a", "b"], probs=[1, 1], decision=0) == "a"
    again = tir.Schedule(mm_relu, seed=11)
    assert [again.sample_categorical(["a", "b", "c"], probs=[0.0, 1.0, 3.0]) for _ in range(400)] == draws
    with pytest.raises(ValueError, match="need as many probabilities"):
        sch.sample_categorical([1, 2], probs=[1.0])
    with pytest.raises(InvalidDecisionError, match="not an index"):
        sch.sample_categorical([1, 2], probs=[1, 1], decision=5)


@T.prim_func
def producer_consumer(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    B = T.alloc_buffer((64, 64))
    for i, j in T.grid(64, 64):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)


def test_sample_compute_location():
    sch = tir.Schedule(producer_consumer, seed=0)
    block = sch.get_block("B")
    seen = set()
    for _ in range(40):
        loc = sch.sample_compute_location(block)
        seen.add(None if loc is None else loc.var.name)
        decision = sch.trace.insts[-1].decision
        assert decision == (-1 if loc is None else ["i", "j"].index(loc.var.name))
    assert seen == {None, "i", "j"}
    assert sch.sample_compute_location(block, decision=1).var.name == "j"
    assert sch.sample_compute_location(block, decision=7).var.name == "j"   # nearest above
    assert sch.sample_compute_location(sch.get_block("C")) is None         # no consumers
    assert len(sch.history) == 1                                              # module unchanged


def test_sampled_compute_location_replays_with_compute_at():
    if not hasattr(tir.Schedule, "compute_at"):
        pytest.skip("compute_at is not available")
    sch = tir.Schedule(producer_consumer, seed=4)
    block = sch.get_block("B")
    loc = sch.sample_compute_location(block, decision=0)
    sch.compute_at(block, loc)
    saved = tir.Trace.from_json(json.loads(json.dumps(sch.trace.as_json())))
    replayed = saved.apply_to_schedule(tir.Schedule(producer_consumer, seed=99))
    assert_structural_equal(replayed.mod, sch.mod)


def test_new_tile_decision_flows_into_the_split_that_uses_it():
    from corpus import mm_relu
    sch = tir.Schedule(mm_relu, seed=3)
    i, j, k = sch.get_loops(sch.get_block("Y"))
    tiles = sch.sample_perfect_tile(j, n=2, max_innermost_factor=16)
    sch.split(j, factors=tiles)
    assert "sch.split(loop=l2, factors=[v4, v5])" in str(sch.trace)
    sample_index = next(n for n, inst in enumerate(sch.trace.insts) if inst.kind == "sample_perfect_tile")
    for trace in (sch.trace, tir.Trace.from_json(sch.trace.as_json())):
        replayed = trace.apply_to_schedule(tir.Schedule(mm_relu), decisions={sample_index: [8, 16]})
        _, j_outer, j_inner, _ = replayed.get_loops(replayed.get_block("Y"))
        extents = [_loop_extent(replayed, lp) for lp in (j_outer, j_inner)]
        assert extents == [8, 16]


def _loop_extent(sch, loop_rv):
    from mlc_lab.tir.schedule.func_index import FuncIndex
    return FuncIndex(sch.mod["main"]).loops[id(loop_rv.var)].extent.value


@pytest.mark.parametrize("bad, message", [
    ("not json", "the text is not JSON"),
    ({"kind": "split"}, "expects \\[instructions, decisions\\]"),
    ([["split"]], "instruction 0 should be a dict"),
    ([{"kind": "get_block", "args": ["Y"], "kwargs": {}}], "instruction 0 \\(get_block\\) lacks 'outputs'"),
    ([{"kind": "get_block", "args": "Y", "kwargs": {}, "outputs": None}], "'args' should be a list"),
    ([{"kind": "get_loops", "args": [{"rv": "b0"}], "kwargs": {}, "outputs": None}],
     "uses 'b0', which no earlier instruction outputs"),
])
def test_trace_from_malformed_json(bad, message):
    with pytest.raises(tir.schedule.TraceError, match=message):
        tir.Trace.from_json(bad)


def test_trace_with_unknown_instruction_kind():
    trace = tir.Trace.from_json([{"kind": "spilt", "args": [], "kwargs": {}, "outputs": None}])
    with pytest.raises(tir.schedule.TraceError, match="'spilt' is not a schedule primitive"):
        trace.apply_to_schedule(tir.Schedule(mm_relu))


def test_compute_at_the_sampled_root_leaves_the_block_where_it_is():
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("Y")
    before = sch.mod
    location = sch.sample_compute_location(block, decision=-1)
    assert location is None
    sch.compute_at(block, location)
    assert_structural_equal(sch.mod, before)


def test_annotation_with_a_sampled_value_round_trips():
    from mlc_lab.script import from_source
    sch = tir.Schedule(mm_relu)
    block = sch.get_block("Y")
    sch.annotate(block, "pragma_auto_unroll_max_step", sch.sample_categorical([0, 16], [0.5, 0.5], decision=1))
    assert_structural_equal(from_source(sch.mod.script()), sch.mod)
