"""Example programs and schedules shared by the course notebooks, the benchmarks and the tests,
honest timing helpers (``timing``), and ``assert_allclose`` (``tvm.testing.assert_allclose`` in the course)."""
import numpy as np

from . import matmul_schedules, timing


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


__all__ = ["assert_allclose", "matmul_schedules", "timing"]
