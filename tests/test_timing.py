"""mlc_lab.testing.timing: the helpers the chapters time with."""
import numpy as np

from mlc_lab.testing import timing


def test_blas_threads_limits_numpy_blas_inside_the_block_only():
    from threadpoolctl import threadpool_info
    before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    with timing.blas_threads(1):
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
    assert [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"] == before


def test_best_seconds_is_the_fastest_mean_of_its_repeats():
    calls = []
    seconds = timing.best_seconds(lambda: calls.append(np.ones(1000).sum()), repeat=3,
                                  min_seconds=0.01)
    assert 0 < seconds < 0.01 and len(calls) > 3


def test_busy_note_says_why_timings_are_noisy(monkeypatch):
    monkeypatch.setattr(timing, "other_runnable_tasks", lambda: 0)
    assert timing.busy_note() == ""
    monkeypatch.setattr(timing, "other_runnable_tasks", lambda: 3)
    assert "3 other task(s)" in timing.busy_note() and "noisy" in timing.busy_note()


def _add_one_lib():
    import mlc_lab
    from mlc_lab.script import tir as T

    @T.prim_func
    def add_one(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + T.float32(1)
    return mlc_lab.build(add_one, target="llvm")


def test_time_evaluator_checks_the_arguments_once_then_times_the_kernel(monkeypatch):
    import mlc_lab
    lib = _add_one_lib()
    checked = []
    cls = type(lib["add_one"])
    original = cls.__call__
    monkeypatch.setattr(cls, "__call__", lambda self, *args: (checked.append(1), original(self, *args))[1])
    a, b = mlc_lab.nd.array(np.arange(64, dtype="float32")), mlc_lab.nd.empty((64,), "float32")
    result = lib.time_evaluator("add_one", mlc_lab.cpu(), number=5, repeat=3)(a, b)
    assert len(result.results) == 3 and len(checked) == 1   # the warm-up call only
    np.testing.assert_array_equal(b.numpy(), np.arange(64) + 1)
    # an argument the bare call cannot take (a strided view) is checked on every call
    checked.clear()
    strided = np.zeros(128, "float32")[::2]
    lib.time_evaluator("add_one", mlc_lab.cpu(), number=2, repeat=2)(np.ones(64, "float32"), strided)
    assert len(checked) == 1 + 2 * 2
    np.testing.assert_array_equal(strided, 2)
