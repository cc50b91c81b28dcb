"""meta_schedule: spaces, measurement, database, search and tune_tir/compile_tir, on small
matmuls so a tuning run takes seconds. Timings are never asserted; numerics always are."""
import os
import signal
import time

import numpy as np
import pytest

import mlc_lab
from mlc_lab import meta_schedule as ms
from mlc_lab import tir
from mlc_lab.ir import structural_equal
from mlc_lab.script import ir as I
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import numerics
from mlc_lab.tir.verify import verify

from corpus import mm_relu, softmax

TARGET = "llvm --num-cores=1"


@I.ir_module
class Matmul:
    @T.prim_func
    def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
             C: T.Buffer((64, 64), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(64, 64, 64):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def leaves_output_untouched(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
                            C: T.Buffer((64, 64), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i in range(1):
        with T.block("nothing"):
            vi = T.axis.spatial(1, i)
            A[vi, vi] = A[vi, vi]


def split_j(sch):
    """The course's space: the j loop split by a sampled factor, the reduction moved out."""
    block = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, factors=sch.sample_perfect_tile(j, n=2))
    sch.reorder(i, j0, k, j1)
    sch.decompose_reduction(block, k)


BEHAVIOURS = ["ok", "segfault", "hang", "raise", "wrong"]


def split_j_with_behaviour(sch):
    """split_j, plus a sampled note (a block annotation) telling misbehaving_build what to do."""
    behaviour = sch.sample_categorical(BEHAVIOURS, [1.0] * len(BEHAVIOURS))
    sch.annotate(sch.get_block("C", "main"), "test.behaviour", behaviour)
    block = sch.get_block("C", "main")
    i, j, k = sch.get_loops(block)
    sch.split(j, factors=[None, 4])


def misbehaving_build(mod, target):
    """Runs in the measurement worker: crash, hang, fail, miscompile or build, as noted."""
    behaviour = _behaviour(mod)
    if behaviour == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if behaviour == "hang":
        time.sleep(600)
    if behaviour == "raise":
        raise RuntimeError("this candidate does not build")
    if behaviour == "wrong":
        return mlc_lab.build(leaves_output_untouched, target)
    return mlc_lab.build(mod, target)


def _behaviour(mod) -> str:
    for behaviour in BEHAVIOURS:
        if f'"test.behaviour": "{behaviour}"' in mod.script():
            return behaviour
    raise AssertionError("no behaviour note")


@pytest.fixture(scope="module")
def runner():
    shared = ms.LocalRunner(number=1, repeat=2, timeout_sec=60)
    yield shared
    shared.close()


def _decisions(database) -> list:
    return [[decision for _, decision in r.trace[1]] for r in database.records()]


def _run(mod, func_name="main"):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    c = mlc_lab.nd.empty((64, 64), "float32")
    mlc_lab.build(mod, "llvm")[func_name](mlc_lab.nd.array(a), mlc_lab.nd.array(b), c)
    return a, b, c.numpy()


def test_schedule_fn_tuning_picks_a_correct_record(tmp_path, runner):
    database = ms.tune_tir(Matmul, TARGET, max_trials_global=8, num_trials_per_iter=4,
                           space=ms.space_generator.ScheduleFn(split_j), work_dir=str(tmp_path),
                           seed=0, cost_model="random", runner=runner, quiet=True)
    records = database.records(Matmul, TARGET)
    assert 0 < len(records) <= 8 and all(r.error is None for r in records)
    # the three fastest trials are measured again at the end; the best of those times decides
    retimed = [r for r in database.records(Matmul, TARGET, include_retimed=True)
               if r.search == "re-timed"]
    fastest = sorted(records, key=lambda r: r.seconds)[:3]
    assert [r.trace for r in retimed] == [r.trace for r in fastest]
    best = database.best(Matmul, TARGET)
    assert best.seconds == min(r.seconds for r in retimed) and best.gflops > 0
    assert len(database) == len(records)   # re-timings are not trials
    sch = ms.tir_integration.compile_tir(database, Matmul, TARGET)
    assert isinstance(sch, tir.Schedule)
    assert [i.kind for i in sch.trace.insts][:4] == ["get_block", "get_loops", "sample_perfect_tile",
                                                     "split"]
    a, b, c = _run(sch.mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_small_space_stops_when_exhausted(tmp_path, runner):
    # j = 64 splits with an innermost factor of at most 16 in five ways only
    database = ms.tune_tir(Matmul, TARGET, max_trials_global=32, num_trials_per_iter=8,
                           space=split_j, work_dir=str(tmp_path), seed=1, strategy="random",
                           runner=runner, quiet=True)
    assert sorted(d[0][1] for d in _decisions(database)) == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("strategy", ["random", "evolutionary"])
def test_same_seed_same_candidates(tmp_path, runner, strategy):
    def tune(where, seed):
        search = ms.RandomSearch() if strategy == "random" else ms.EvolutionarySearch(
            population_size=6, genetic_num_iters=1)
        return ms.tune_tir(Matmul, TARGET, max_trials_global=4, num_trials_per_iter=4,
                           work_dir=str(tmp_path / where), seed=seed, strategy=search,
                           cost_model="random", runner=runner, quiet=True)
    first, second = tune("a", 5), tune("b", 5)
    assert _decisions(first) == _decisions(second)
    assert [r.trace for r in first.records()] == [r.trace for r in second.records()]
    assert _decisions(tune("c", 6)) != _decisions(first)


def test_failing_and_wrong_candidates_are_recorded_never_chosen(tmp_path):
    runner = ms.LocalRunner(number=1, repeat=1, timeout_sec=5, build_func=misbehaving_build)
    try:
        database = ms.tune_tir(Matmul, TARGET, max_trials_global=10, num_trials_per_iter=5,
                               space=split_j_with_behaviour, work_dir=str(tmp_path), seed=0,
                               strategy="random", runner=runner, quiet=True)
    finally:
        runner.close()
    errors = {_behaviour(r.as_schedule(Matmul).mod): r.error for r in database.records()}
    assert set(errors) == set(BEHAVIOURS)
    assert errors["ok"] is None
    assert errors["segfault"].startswith("worker crashed")
    assert errors["hang"].startswith("timeout")
    assert errors["raise"].startswith("build error: RuntimeError: this candidate does not build")
    assert errors["wrong"].startswith("wrong result: buffer C[")
    best = database.best(Matmul, TARGET)
    assert _behaviour(best.as_schedule(Matmul).mod) == "ok"
    sch = ms.tir_integration.compile_tir(database, Matmul, TARGET)
    a, b, c = _run(sch.mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_database_round_trip_and_targets(tmp_path, runner):
    database = ms.tune_tir(Matmul, TARGET, max_trials_global=4, num_trials_per_iter=4,
                           space=split_j, work_dir=str(tmp_path), seed=2, strategy="random",
                           runner=runner, quiet=True)
    reloaded = ms.JSONDatabase(str(tmp_path))
    assert [r.to_json() for r in reloaded.records()] == [r.to_json() for r in database.records()]
    assert reloaded.best(Matmul, TARGET).to_json() == database.best(Matmul, TARGET).to_json()
    # the target's spelling does not matter, another target's records are never used
    assert len(reloaded.records(Matmul, "llvm -num-cores=1")) == 4
    assert reloaded.records(Matmul, "llvm -num-cores=2") == []
    assert reloaded.best(Matmul, "llvm -num-cores=2") is None
    with pytest.raises(LookupError, match="no successful tuning record"):
        ms.tir_integration.compile_tir(reloaded, Matmul, "llvm -num-cores=2")
    before = ms.tir_integration.compile_tir(database, Matmul, TARGET)
    after = ms.tir_integration.compile_tir(reloaded, Matmul, TARGET)
    assert structural_equal(before.mod, after.mod)
    assert before.trace.as_json() == after.trace.as_json()
    # another workload has no records
    other = mlc_lab.IRModule({"main": mm_relu})
    assert reloaded.records(other) == [] and reloaded.best(other, TARGET) is None


def test_database_plot_draws_one_curve_per_search(tmp_path, runner):
    import matplotlib
    matplotlib.use("Agg")
    for strategy in ("random", "evolutionary"):
        database = ms.tune_tir(Matmul, TARGET, max_trials_global=2, num_trials_per_iter=2,
                               space=split_j, work_dir=str(tmp_path), seed=0, strategy=strategy,
                               cost_model="random", runner=runner, quiet=True)
    assert [r.search for r in database.records()] == ["random"] * 2 + ["evolutionary/random"] * 2
    ax = database.plot()
    assert ax.get_xlabel() == "trial" and ax.get_ylabel() == "GFLOPS"
    labels = [line.get_label() for line in ax.get_lines()]
    assert [label.split(":")[0] for label in labels] == ["random", "evolutionary/random"]
    for line, search in zip(ax.get_lines(), ("random", "evolutionary/random")):
        best_line = list(line.get_ydata())
        records = [r for r in database.records() if r.search == search]
        assert best_line == sorted(best_line) and len(best_line) == 2
        assert best_line[-1] == pytest.approx(max(r.gflops for r in records))
    colors = {line.get_color() for line in ax.get_lines()}
    database.plot(ax=ax, label="again")   # a second database's curves take the next colours
    assert len(ax.get_lines()) == 4 and not colors & {line.get_color() for line in ax.get_lines()[2:]}


def test_live_curve_renders_the_records_as_svg(tmp_path, runner):
    from mlc_lab.meta_schedule.progress import LiveCurve, curves
    database = ms.tune_tir(Matmul, TARGET, max_trials_global=2, num_trials_per_iter=2,
                           space=split_j, work_dir=str(tmp_path), seed=1, strategy="random",
                           runner=runner, quiet=True)
    series = curves(database.records())
    assert list(series) == ["random"] and series["random"] == [r.gflops for r in database.records()]
    assert list(curves(database.records(), label="mine")) == ["mine"]
    svg = LiveCurve("tuning main")._render(series)
    assert svg.lstrip().startswith("<?xml") and "tuning main" in svg and "<svg" in svg


def test_timing_budget_gives_a_slow_candidate_one_call(tmp_path):
    """A candidate whose checked call takes half the budget or more is not called again; a fast
    one gets every repeat."""
    for budget, repeats in ((1e-6, 1), (5.0, 3)):
        runner = ms.LocalRunner(number=1, repeat=3, timing_budget_sec=budget, timeout_sec=60)
        try:
            database = ms.tune_tir(Matmul, TARGET, max_trials_global=1, num_trials_per_iter=1,
                                   space=split_j, work_dir=str(tmp_path / str(budget)), seed=0,
                                   strategy="random", runner=runner, quiet=True)
        finally:
            runner.close()
        (record,) = database.records()
        assert record.error is None and len(record.run_secs) == repeats


@T.prim_func
def row_sum(A: T.Buffer((4, 2048), "float32"), S: T.Buffer((4,), "float32")):
    T.func_attr({"global_symbol": "row_sum", "tir.noalias": True})
    for i, k in T.grid(4, 2048):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]


@pytest.mark.parametrize("func", [mm_relu, softmax, row_sum], ids=["mm_relu", "softmax", "row_sum"])
def test_automatic_space_gives_verified_correct_schedules(func):
    mod = mlc_lab.IRModule({func.attr_dict["global_symbol"]: func})
    name = func.attr_dict["global_symbol"]
    space = ms.PostOrderApply(num_cores=2)
    cache: dict = {}
    kinds = set()
    for seed in range(4):
        candidate = space.sample(mod, seed)
        verify(candidate.sch.mod)
        assert numerics.compare_with_reference(func, candidate.sch.mod[name], cache, name) is None
        kinds |= {inst.kind for inst in candidate.sch.trace.insts}
        # the trace replays to the same module
        replayed = tir.Schedule(mod)
        tir.schedule.Trace.from_json(candidate.sch.trace.as_json()).apply_to_schedule(replayed)
        assert structural_equal(replayed.mod, candidate.sch.mod)
    assert {"sample_categorical", "annotate", "unannotate", "decompose_reduction"} <= kinds
    if func is mm_relu:
        assert {"sample_perfect_tile", "split", "reorder", "reverse_compute_at", "parallel"} <= kinds
    elif func is row_sum:   # a long reduction into 4 elements: some designs factor it
        assert {"sample_perfect_tile", "split", "rfactor", "vectorize"} <= kinds
    else:
        assert "compute_inline" in kinds


def test_tune_with_automatic_space_and_evolutionary_search(tmp_path, runner):
    strategy = ms.EvolutionarySearch(population_size=6, genetic_num_iters=1)
    database = ms.tune_tir(Matmul, TARGET, max_trials_global=6, num_trials_per_iter=3,
                           work_dir=str(tmp_path), seed=0, strategy=strategy, cost_model="random",
                           runner=runner, quiet=True)
    records = database.records()
    assert len(records) == 6
    assert len({str(r.trace) for r in records}) == 6       # never the same candidate twice
    sch = ms.tir_integration.compile_tir(database, Matmul, TARGET)
    assert "sample_perfect_tile" in [i.kind for i in sch.trace.insts]
    a, b, c = _run(sch.mod)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_flop_counter():
    assert ms.estimate_flops(Matmul) == 2 * 64 ** 3
    assert ms.estimate_flops(mm_relu) == 2 * 128 ** 3 + 128 * 128
    # softmax: max, exp(a - m) (2), sum, divide, per element
    assert ms.estimate_flops(softmax) == 8 * 16 * (1 + 2 + 1 + 1)


def test_bad_arguments():
    with pytest.raises(TypeError, match="ScheduleFn expects a function"):
        ms.ScheduleFn(3)
    with pytest.raises(ValueError, match="unknown search strategy"):
        ms.tune_tir(Matmul, TARGET, 1, strategy="annealing", quiet=True)
    with pytest.raises(ValueError, match="one PrimFunc"):
        ms.tune_tir(mlc_lab.IRModule({"a": mm_relu, "b": softmax}), TARGET, 1, quiet=True)


def test_a_candidate_far_slower_than_the_best_is_timed_by_its_checked_call():
    from mlc_lab.meta_schedule.runner import Reference, default_build, measure
    from mlc_lab.testing import matmul_schedules as mm
    mod = mm.naive(320)   # unscheduled: tens of milliseconds a call
    for best_secs, calls in ((1e-4, 1), (float("inf"), 3)):
        reference = Reference.of(mod, "main")
        reference.best_secs = best_secs
        result = measure(reference, default_build, mod, TARGET, number=1, repeat=3,
                         min_repeat_ms=0, budget_sec=60, rtol=1e-3, atol=1e-3)
        assert result.error is None and len(result.run_secs) == calls
        assert reference.best_secs == min(best_secs, *result.run_secs)


def test_the_2022_form_with_a_tune_config_returns_the_best_schedule(tmp_path, runner):
    config = ms.TuneConfig(max_trials_global=3, num_trials_per_iter=3, strategy="replay_trace")
    sch = ms.tune_tir(mod=Matmul, target=TARGET, config=config, work_dir=str(tmp_path / "kw"),
                      space=split_j, task_name="main", runner=runner, quiet=True)
    assert isinstance(sch, tir.Schedule)
    database = ms.JSONDatabase(str(tmp_path / "kw"))
    assert len(database) == 3 and {r.search for r in database.records()} == {"random"}
    assert structural_equal(sch.mod, database.best(Matmul, TARGET).as_schedule(Matmul).mod)
    # positionally, as (mod, target, config, work_dir)
    again = ms.tune_tir(Matmul, TARGET, config, str(tmp_path / "pos"), space=split_j,
                        runner=runner, quiet=True)
    assert isinstance(again, tir.Schedule) and len(ms.JSONDatabase(str(tmp_path / "pos"))) == 3
    assert "sch.split" in repr(sch.trace)    # a trace shows as its script, also as a cell's value


def test_the_2022_form_returns_none_when_no_trial_succeeds(tmp_path):
    broken = ms.LocalRunner(number=1, repeat=1, timeout_sec=5, build_func=_raising_build)
    try:
        sch = ms.tune_tir(Matmul, TARGET, config=ms.TuneConfig(2, 2), work_dir=str(tmp_path),
                          space=split_j, runner=broken, quiet=True)
    finally:
        broken.close()
    assert sch is None
    with pytest.raises(TypeError, match="needs max_trials_global"):
        ms.tune_tir(Matmul, TARGET)


def _raising_build(mod, target):
    raise RuntimeError("no build today")


def test_runner_measures_in_process_where_no_process_may_start(monkeypatch, tmp_path):
    """In a graded notebook's sandbox no process may be started: the runner measures in its own
    process instead, with the same checks, and says so once."""
    from mlc_lab.meta_schedule import runner as runner_module

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(runner_module, "start_worker", refuse)
    with pytest.warns(RuntimeWarning, match="measured in this process"):
        database = ms.tune_tir(Matmul, TARGET, max_trials_global=4, num_trials_per_iter=2,
                               space=ms.space_generator.ScheduleFn(split_j), work_dir=str(tmp_path), seed=0,
                               quiet=True)
    sch = ms.tir_integration.compile_tir(database, Matmul, TARGET)
    assert sch is not None and sch.trace.as_json()


@T.prim_func
def _rows_by_weights(a: T.handle, B: T.Buffer((16, 16), "float32"), c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 16), "float32")
    C = T.match_buffer(c, (n, 16), "float32")
    for i, j, k in T.grid(n, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_a_kernel_over_a_symbolic_length_is_tuned_and_runs_for_any_length(tmp_path, runner):
    from mlc_lab.tir.schedule.policy.flops import TYPICAL_LENGTH
    mod = mlc_lab.IRModule({"main": _rows_by_weights})
    database = ms.tune_tir(mod, "llvm", max_trials_global=4, num_trials_per_iter=4,
                           work_dir=str(tmp_path), seed=3, quiet=True, runner=runner)
    records = database.records(mod, "llvm")
    assert len(records) == 4 and all(r.error is None for r in records)
    best = ms.tir_integration.compile_tir(database, mod, "llvm")
    text = best.mod["main"].script()
    assert "(n + T.int64(15)) // T.int64(16) * T.int64(16)" in text   # padded to whole tiles
    lib = mlc_lab.build(best.mod, "llvm")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 16)).astype("float32")
    for n in (1, 17, TYPICAL_LENGTH + 3):
        a, c = rng.standard_normal((n, 16)).astype("float32"), np.zeros((n, 16), "float32")
        lib["main"](a, w, c)
        np.testing.assert_allclose(c, a @ w, rtol=1e-4, atol=1e-4)
