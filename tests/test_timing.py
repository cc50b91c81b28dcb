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
