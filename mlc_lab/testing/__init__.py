"""Example programs and schedules shared by the course notebooks, the benchmarks and the tests,
honest timing helpers (``timing``), and ``assert_allclose`` (``tvm.testing.assert_allclose`` in the course).

Tests written for the reference compiler's ``tvm.testing`` find its pytest helpers here too
(``parameter``, ``fixture``, ``requires_cuda``, ``CompareBeforeAfter``, ... from ``utils``), and
its shared schedules in ``testing.tir``. The helpers need pytest, a test-only dependency, so they
load on first use: ``import mlc_lab.testing`` works without pytest."""
import numpy as np

from . import matmul_schedules, timing, tir

_PYTEST_HELPERS = ("CompareBeforeAfter", "Requirement", "fixture", "main", "parameter", "parameters",
                   "requires_cuda", "requires_cuda_compute_version", "requires_gpu",
                   "requires_matrixcore", "requires_rocm", "requires_tensorcore")


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` that also takes NDArrays (either side); the shapes must
    match exactly (no broadcasting), as in the course's ``tvm.testing.assert_allclose``."""
    actual, desired = _host(actual), _host(desired)
    np.testing.assert_equal(actual.shape, desired.shape,
                            err_msg="assert_allclose: the arrays' shapes differ")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


def _host(value) -> np.ndarray:
    from ..runtime.ndarray import NDArray
    return value.numpy() if isinstance(value, NDArray) else np.asarray(value)


def __getattr__(name: str):
    if name in _PYTEST_HELPERS:
        from . import utils
        return getattr(utils, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_PYTEST_HELPERS))


__all__ = ["assert_allclose", "matmul_schedules", "timing", "tir", *_PYTEST_HELPERS]
