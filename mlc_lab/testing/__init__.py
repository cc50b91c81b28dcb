"""Example programs and schedules shared by the course notebooks, the benchmarks and the tests,
and ``assert_allclose`` as the course calls it (``tvm.testing.assert_allclose``)."""
import numpy as np

from . import matmul_schedules


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """numpy's assert_allclose on arrays, NDArrays or tensors (anything ``np.asarray`` reads)."""
    np.testing.assert_allclose(_numpy(actual), _numpy(desired), rtol=rtol, atol=atol, verbose=True)


def _numpy(value):
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


__all__ = ["assert_allclose", "matmul_schedules"]
