"""Shared pytest set-up: headless matplotlib, and clean skips for GPU-only tests."""
import functools
import os

import pytest

from browser import chromium, page  # noqa: F401  (fixtures, defined once for the whole session)

# Set before anything imports matplotlib; notebook kernels started by the tests inherit them.
os.environ["MPLBACKEND"] = "Agg"
os.environ["MLC_LAB_DEMO_QUICK"] = "1"   # demos/ notebooks: short tuning settings


@pytest.fixture(autouse=True)
def _fresh_compile_memos():
    """Every test compiles from scratch: what earlier tests compiled (tir.transform.func_memo)
    is forgotten, so a test that patches a compilation step sees it run."""
    from mlc_lab.tir.transform.func_memo import clear_memos
    clear_memos()


@functools.cache
def cuda_gpu_present() -> bool:
    """True when pycuda imports and the CUDA driver reports at least one device."""
    try:
        import pycuda.driver as cuda

        cuda.init()
        return cuda.Device.count() > 0
    except Exception:  # no pycuda, no driver, or a driver that cannot start: all mean "no GPU"
        return False


# `make test` runs the suite on two workers (pytest-xdist, --dist loadfile: a file's tests stay on
# one worker, so a module's fixture, such as a graded class or a built site, is made once). The
# longest files are handed out first so that neither worker is left with two of them at the end.
LONGEST_FIRST = ["test_browser_jupyterlab.py", "test_notebooks.py", "test_exercises.py",
                 "test_autograder_class.py"]


def pytest_collection_modifyitems(config, items):
    def order(item):
        name = item.path.name
        # tests/test_book.py builds the site from the chapters tests/test_notebooks.py executed
        # (on its worker; it executes those it lacks itself), so it comes last.
        return (name == "test_book.py",
                LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST))
    items.sort(key=order)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not cuda_gpu_present():
        skip = pytest.mark.skip(reason="no CUDA GPU present")
        for item in gpu_items:
            item.add_marker(skip)
