"""The roofline: its two measuring kernels compute what they claim, the measurement is cached per
machine and core count, and the plot puts each kernel at x = flops / bytes under two roofs."""
import json
import math

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import mlc_lab  # noqa: E402
from mlc_lab import nd  # noqa: E402
from mlc_lab.viz import roofline as rl  # noqa: E402


def test_fma_kernel_computes_the_multiply_add_chain():
    fma = rl.fma_kernel(num_cores=2, lanes=4, chains=2, iterations=5)
    lib = mlc_lab.build(fma, target="llvm -num-cores=2")
    x = np.random.default_rng(0).random((2, 8)).astype("float32")
    y = nd.empty((2, 8), "float32")
    lib(nd.array(x), y)
    expected = x.copy()
    for _ in range(5):
        expected = expected * np.float32(0.999) + np.float32(0.001)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)


def test_triad_schedule_computes_the_triad():
    lib = mlc_lab.build(rl.triad_schedule(1024, num_cores=2).mod, target="llvm -num-cores=2")
    rng = np.random.default_rng(1)
    b, c = rng.random(1024).astype("float32"), rng.random(1024).astype("float32")
    a = nd.empty((1024,), "float32")
    lib(nd.array(b), nd.array(c), a)
    np.testing.assert_allclose(a.numpy(), b + 3 * c, rtol=1e-6)


def test_measured_peaks_are_positive_and_saved(tmp_path):
    cache = tmp_path / "roofline.json"
    peaks = rl.measure_peaks(num_cores=1, cache_file=cache)
    for value in (peaks.flops_per_second, peaks.bytes_per_second, peaks.ridge_intensity):
        assert math.isfinite(value) and value > 0
    assert peaks.num_cores == 1 and peaks.machine == rl.machine_name()
    assert peaks.vector_lanes in (4, 8, 16) and peaks.fma_chains in (8, 16)
    assert "timing.blas_threads(1)" in str(peaks) and "-num-cores=1" in str(peaks)
    saved = json.loads(cache.read_text())
    assert saved[rl.machine_name()]["1"]["flops_per_second"] == peaks.flops_per_second


@pytest.fixture
def fake_measure(monkeypatch):
    """Replace measuring by a counter that returns made-up roofs, 1e11 FLOP/s and 2e10 B/s
    per core."""
    calls = []

    def measure(num_cores, machine):
        calls.append((num_cores, machine))
        return rl.Peaks(1e11 * num_cores, 2e10 * num_cores, num_cores, machine, 16, 16)
    monkeypatch.setattr(rl, "_measure", measure)
    return calls


def test_cache_round_trips_and_is_keyed_by_machine_and_cores(tmp_path, monkeypatch, fake_measure):
    cache = tmp_path / "sub" / "roofline.json"
    first = rl.measure_peaks(1, cache_file=cache)
    assert rl.measure_peaks(1, cache_file=cache) == first
    assert len(fake_measure) == 1                           # the second call read the file

    rl.measure_peaks(2, cache_file=cache)
    monkeypatch.setattr(rl, "machine_name", lambda: "Other CPU (other), 64 CPUs")
    other = rl.measure_peaks(1, cache_file=cache)
    assert other.machine == "Other CPU (other), 64 CPUs"
    assert len(fake_measure) == 3
    saved = json.loads(cache.read_text())
    assert sorted(saved) == sorted([first.machine, other.machine])
    assert sorted(saved[first.machine]) == ["1", "2"]

    rl.measure_peaks(1, cache_file=cache, refresh=True)
    assert len(fake_measure) == 4


def test_stale_or_broken_cache_is_measured_again(tmp_path, fake_measure):
    cache = tmp_path / "roofline.json"
    rl.measure_peaks(1, cache_file=cache)
    saved = json.loads(cache.read_text())
    saved[rl.machine_name()]["1"]["version"] = rl.CACHE_VERSION - 1
    cache.write_text(json.dumps(saved))
    rl.measure_peaks(1, cache_file=cache)
    cache.write_text("{not json")
    rl.measure_peaks(1, cache_file=cache)
    assert len(fake_measure) == 3


def test_roofs_measured_on_a_busy_machine_are_measured_again_when_quiet(tmp_path, monkeypatch):
    from mlc_lab.testing import timing
    results = iter([rl.Peaks(5e10, 3e10, 1, rl.machine_name(), busy_tasks=3),
                    rl.Peaks(9e10, 2e10, 1, rl.machine_name(), busy_tasks=0)])
    monkeypatch.setattr(rl, "_measure", lambda num_cores, machine: next(results))
    cache = tmp_path / "roofline.json"
    assert "measured again once the machine is quiet" in str(rl.measure_peaks(1, cache_file=cache))
    monkeypatch.setattr(timing, "other_runnable_tasks", lambda: 2)
    assert rl.measure_peaks(1, cache_file=cache).busy_tasks == 3       # still busy: the cache
    monkeypatch.setattr(timing, "other_runnable_tasks", lambda: 0)
    quiet = rl.measure_peaks(1, cache_file=cache)
    assert (quiet.flops_per_second, quiet.bytes_per_second, quiet.busy_tasks) == (9e10, 3e10, 0)
    assert rl.measure_peaks(1, cache_file=cache) == quiet               # the higher roofs, kept


def test_default_cache_lives_in_the_user_cache_dir(tmp_path, monkeypatch, fake_measure):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert rl.cache_path() == tmp_path / "mlc_lab" / "roofline.json"
    rl.roofline({"k": (1e6, 1e6, 1e-3)}, num_cores=1)
    assert rl.machine_name() in json.loads(rl.cache_path().read_text())


def test_plot_has_two_roofs_and_one_point_per_kernel():
    peaks = rl.Peaks(flops_per_second=1e11, bytes_per_second=2e10, num_cores=1, machine="Test CPU")
    n = 128
    points = {"naive": (2 * n ** 3, 3 * n * n * 4, 2e-3),
              "tuned": (2 * n ** 3, 3 * n * n * 4, 1e-4),
              "relu": (n * n, 2 * n * n * 4, 1e-5)}
    ax = rl.roofline(points, peaks=peaks)

    memory, compute = ax.get_lines()
    (x0, ridge), (y0, top) = memory.get_xdata(), memory.get_ydata()
    assert ridge == pytest.approx(5.0) and top == pytest.approx(100.0)        # 1e11 / 2e10 FLOP/byte
    assert y0 / x0 == pytest.approx(20.0)                                      # 20 GB/s
    assert list(compute.get_ydata()) == pytest.approx([100.0, 100.0])
    assert ax.get_xscale() == ax.get_yscale() == "log"

    assert len(ax.collections) == len(points)
    for collection, (flops, nbytes, seconds) in zip(ax.collections, points.values()):
        [(x, y)] = collection.get_offsets()
        assert x == pytest.approx(flops / nbytes) and y == pytest.approx(flops / seconds / 1e9)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels[2].startswith("naive: 2.1 GFLOP/s (2% of its roof)")
    assert "Test CPU, 1 core" in ax.get_title()


def test_roofs_read_on_light_and_dark_backgrounds():
    peaks = rl.Peaks(1e11, 2e10, 1, "Test CPU")
    with plt.style.context("dark_background"):
        ax = rl.roofline({"k": (1e6, 1e5, 1e-4)}, peaks=peaks)
    grey = matplotlib.colors.to_rgb(ax.get_lines()[0].get_color())
    assert 0.35 < np.mean(grey) < 0.65                      # mid grey: neither white nor black
    assert ax.title.get_color() != "black"                  # text follows the style


def test_bad_points_are_refused_naming_the_kernel():
    peaks = rl.Peaks(1e11, 2e10, 1, "Test CPU")
    with pytest.raises(ValueError, match=r"points\['slow'\] must be \(flops, bytes, seconds\)"):
        rl.roofline({"slow": (1.0, 2.0)}, peaks=peaks)
    with pytest.raises(ValueError, match=r"points\['zero'\].*positive and finite"):
        rl.roofline({"zero": (1.0, 0.0, 1.0)}, peaks=peaks)
    with pytest.raises(ValueError, match="num_cores must be a positive int"):
        rl.measure_peaks(0)
