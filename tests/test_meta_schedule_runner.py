"""The measurement side of tuning: built programs reused, expected outputs kept on disk, where
the time goes. Every reuse must leave the result check in place; timings are never asserted."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import meta_schedule as ms
from mlc_lab.meta_schedule import measure_cache
from mlc_lab.meta_schedule.measure_cache import BuildCache, ReferenceCache, reference_of
from mlc_lab.meta_schedule.measure_stats import MeasureStats
from mlc_lab.meta_schedule.runner import Reference, Workload, measure
from mlc_lab.script import tir as T
from mlc_lab.testing import matmul_schedules as mm
from mlc_lab.tir.schedule import numerics

TARGET = "llvm --num-cores=1"


def _tiled(n: int, factor: int):
    sch = mlc_lab.tir.Schedule(mm.naive(n))
    block = sch.get_block("C", "main")
    _, j, _ = sch.get_loops(block)
    sch.split(j, factors=[None, factor])
    return sch.mod


def _measure(reference, mod, builds, build_func=mlc_lab.build):
    return measure(reference, build_func, mod, TARGET, 1, 2, 0.1, 1.0, 1e-3, 1e-3, builds=builds)


def test_an_equal_module_reuses_its_build_and_a_changed_one_does_not():
    reference = Reference.of(mm.naive(32), "main")
    builds = (BuildCache(), "w")
    first = _measure(reference, _tiled(32, 4), builds)
    again = _measure(reference, _tiled(32, 4), builds)   # equal, but another object
    other = _measure(reference, _tiled(32, 8), builds)
    assert first.error is None and again.error is None and other.error is None
    assert "build" in first.phases and "cached build" not in first.phases
    assert "cached build" in again.phases and "build" not in again.phases
    assert "build" in other.phases and "cached build" not in other.phases
    assert builds[0].hits == 1
    assert len(again.run_secs) == len(first.run_secs) == 2


def test_a_reused_build_is_checked_again():
    """Reusing a program skips compiling only: its outputs are compared every time."""
    reference = Reference.of(mm.naive(32), "main")
    builds = (BuildCache(), "w")
    assert _measure(reference, _tiled(32, 4), builds).error is None
    reference.expected[2] = reference.expected[2] + 1.0
    result = _measure(reference, _tiled(32, 4), builds)
    assert "cached build" in result.phases
    assert result.run_secs is None and result.error.startswith("wrong result")


def test_build_cache_keeps_the_fastest_and_tells_build_functions_and_workloads_apart():
    cache = BuildCache(capacity=2)
    mods = [_tiled(16, f) for f in (1, 2, 4)]
    for mod, secs in zip(mods, (0.3, 0.1, 0.2)):
        cache.offer("w", mlc_lab.build, mod, TARGET, f"lib{secs}", secs)
    assert cache.get("w", mlc_lab.build, mods[0], TARGET) is None   # the slowest was dropped
    assert cache.get("w", mlc_lab.build, mods[1], TARGET) == "lib0.1"
    assert cache.get("w", _other_build, mods[1], TARGET) is None
    assert cache.get("w", mlc_lab.build, mods[1], "llvm --num-cores=2") is None
    assert cache.get("v", mlc_lab.build, mods[1], TARGET) is None
    cache.forget("w")
    assert cache.get("w", mlc_lab.build, mods[1], TARGET) is None


def _other_build(mod, target):
    return mlc_lab.build(mod, target)


def wrong_build(mod, target):
    """Runs in the measurement worker: a program that leaves C untouched."""
    return mlc_lab.build(_untouched, target)


@T.prim_func
def _untouched(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
               C: T.Buffer((32, 32), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i in range(1):
        with T.block("nothing"):
            vi = T.axis.spatial(1, i)
            A[vi, vi] = A[vi, vi]


def test_runner_reports_phases_and_still_catches_a_wrong_candidate(tmp_path):
    mod = mm.naive(32)
    runner = ms.LocalRunner(number=1, repeat=2, timeout_sec=60, reference_cache_dir=None)
    wrong = ms.LocalRunner(number=1, repeat=2, timeout_sec=60, reference_cache_dir=None,
                           build_func=wrong_build)
    try:
        workload = Workload(mod, "main")
        results = runner.run(TARGET, [_tiled(32, 4), _tiled(32, 4), _tiled(32, 2)], workload)
        bad = wrong.run(TARGET, [_tiled(32, 4)], workload)
    finally:
        runner.close()
        wrong.close()
    assert all(r.error is None for r in results)
    stats = runner.stats
    assert stats.count("build") == 2 and stats.count("cached build") == 1
    assert stats.count("check") == 3 and stats.count("transfer") == 3
    assert stats.count("reference") == 1
    assert bad[0].run_secs is None and bad[0].error.startswith("wrong result")
    assert "build" in stats.summary()


def test_expected_outputs_are_kept_on_disk_and_found_again(tmp_path, monkeypatch):
    monkeypatch.setattr(measure_cache, "REFERENCE_MIN_SECS", 0.0)
    mod = mm.naive(16)
    first = reference_of(mod, "main", 3, str(tmp_path))
    assert len(list(tmp_path.glob("*.npz"))) == 1

    def no_interpreter(func, args):
        raise AssertionError("the interpreter ran although the outputs were on disk")
    monkeypatch.setattr(numerics, "run", no_interpreter)
    again = reference_of(mod, "main", 3, str(tmp_path))
    for a, b in zip(first.expected, again.expected):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(again.expected[2], again.args[0] @ again.args[1], rtol=1e-4, atol=1e-4)
    with pytest.raises(AssertionError, match="interpreter ran"):   # another seed, another entry
        reference_of(mod, "main", 4, str(tmp_path))
    with pytest.raises(AssertionError, match="interpreter ran"):   # another function
        reference_of(mm.naive(16, relu=True), "main", 3, str(tmp_path))


def test_stored_outputs_for_other_inputs_are_not_used(tmp_path):
    cache = ReferenceCache(str(tmp_path))
    args = [np.ones((2, 2), "float32")]
    path = cache.path(mm.naive(2), "main", 0)
    cache.store(path, args, [np.full((2, 2), 7, "float32")], seconds=10.0)
    assert cache.load(path, args)[0][0, 0] == 7
    assert cache.load(path, [np.zeros((2, 2), "float32")]) is None
    assert cache.load(str(tmp_path / "missing.npz"), args) is None
    cache.store(cache.path(mm.naive(3), "main", 0), args, [args[0]], seconds=0.0)   # quick: not kept
    assert len(list(tmp_path.glob("*.npz"))) == 1


def test_measure_stats_sums_and_medians():
    stats = MeasureStats()
    stats.add({"build": (1.0, 0.5), "timing": (0.25, 0.25)})
    stats.add({"build": (3.0, 2.0)})
    other = MeasureStats()
    other.add({"build": (2.0, 2.0)})
    stats.merge(other)
    assert stats.wall("build") == 6.0 and stats.cpu("build") == 4.5 and stats.count("build") == 3
    assert stats.median_wall("build") == 2.0 and stats.median_wall("check") is None


class _ScriptedRunner:
    """Times the default schedule (the first trial) as the slowest, then, re-timed, as the
    fastest: what a worker still warming up does to the first candidate."""

    def __init__(self):
        self.calls, self.default = 0, None

    def prepare(self, workload):
        pass

    def run(self, target, mods, workload):
        from mlc_lab.ir import structural_equal
        from mlc_lab.meta_schedule.runner import RunResult
        self.calls += 1
        if self.calls == 1:                      # the default schedule, alone
            self.default = mods[0]
            return [RunResult([1.0])]
        retiming = self.calls > 2                # in rounds, each in another order
        return [RunResult([0.1 if retiming and structural_equal(mod, self.default)
                           else 0.5 + 0.01 * k]) for k, mod in enumerate(mods)]


def test_the_default_schedule_is_always_retimed_and_can_win(tmp_path):
    from mlc_lab.meta_schedule.tune import DEFAULT_SEARCH, RETIMED, RETIMED_ROUNDS
    from mlc_lab.testing import matmul_schedules as mm
    mod = mm.naive(64)
    database = ms.tune_tir(mod, "llvm", max_trials_global=9, num_trials_per_iter=8,
                           work_dir=str(tmp_path), seed=0, quiet=True, baseline=True,
                           runner=_ScriptedRunner())
    records = database.records(mod, "llvm", include_retimed=True)
    default = next(r for r in records if r.search == DEFAULT_SEARCH)
    retimed = [r for r in records if r.search == RETIMED]
    assert default.seconds == 1.0 and len(retimed) == 4   # the top 3, and the default
    assert retimed[-1].trace == default.trace
    assert [len(r.run_secs) for r in retimed] == [RETIMED_ROUNDS] * 4
    assert database.best(mod, "llvm").trace == default.trace


class _CloseRunner(_ScriptedRunner):
    """Re-timed, every other schedule is ``gain`` faster than the default."""

    def __init__(self, gain):
        super().__init__()
        self.gain = gain

    def run(self, target, mods, workload=None):
        from mlc_lab.ir import structural_equal
        from mlc_lab.meta_schedule.runner import RunResult
        self.calls += 1
        if self.calls == 1:
            self.default = mods[0]
            return [RunResult([1.0])]
        retiming = self.calls > 2
        return [RunResult([1.0 if retiming and structural_equal(mod, self.default)
                           else (1.0 - self.gain) if retiming else 0.5 + 0.01 * k])
                for k, mod in enumerate(mods)]


@pytest.mark.parametrize("gain, keeps_default", [(0.02, True), (0.2, False)])
def test_a_tuned_schedule_replaces_the_default_only_when_clearly_faster(tmp_path, gain, keeps_default):
    from mlc_lab.meta_schedule.database import MARGIN
    from mlc_lab.testing import matmul_schedules as mm
    assert (gain < MARGIN) == keeps_default
    mod = mm.naive(64)
    database = ms.tune_tir(mod, "llvm", max_trials_global=9, num_trials_per_iter=8,
                           work_dir=str(tmp_path), seed=0, quiet=True, baseline=True,
                           runner=_CloseRunner(gain))
    default = next(r for r in database.records(mod, "llvm") if r.search == "default schedule")
    assert (database.best(mod, "llvm").trace == default.trace) == keeps_default
