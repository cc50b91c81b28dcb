"""Shared pytest set-up: headless matplotlib, and clean skips for GPU-only tests."""
import functools
import os

import pytest

from browser import chromium, page  # noqa: F401  (fixtures, defined once for the whole session)

# Set before anything imports matplotlib; notebook kernels started by the tests inherit them.
os.environ["MPLBACKEND"] = "Agg"
os.environ["MLC_LAB_DEMO_QUICK"] = "1"   # demos/ notebooks: short tuning settings


@functools.cache
def cuda_gpu_present() -> bool:
    """True when pycuda imports and the CUDA driver reports at least one device."""
    try:
        import pycuda.driver as cuda

        cuda.init()
        return cuda.Device.count() > 0
    except Exception:  # no pycuda, no driver, or a driver that cannot start: all mean "no GPU"
        return False


# `make test` runs the suite on two workers (pytest-xdist, --dist loadgroup). The tests of these
# files spread over the workers one by one; every other file stays on one worker, so that a
# module's fixture (a graded class, a tuned database, a built site) is made once.
SPREAD = {"test_notebooks.py", "test_browser_jupyterlab.py", "test_exercises.py"}


def pytest_collection_modifyitems(config, items):
    # tests/test_book.py builds the site from the chapters that tests/test_notebooks.py executed
    # (on its worker; it executes what it lacks itself).
    items.sort(key=lambda item: item.path.name == "test_book.py")
    for item in items:
        if item.path.name not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not cuda_gpu_present():
        skip = pytest.mark.skip(reason="no CUDA GPU present")
        for item in gpu_items:
            item.add_marker(skip)
