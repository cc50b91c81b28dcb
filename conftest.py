"""Names available to the doctests in mlc_lab's docstrings (schedule primitive examples)."""
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    import mlc_lab
    from mlc_lab import te, tir
    from mlc_lab.script import ir as I
    from mlc_lab.script import tir as T
    doctest_namespace.update(np=np, mlc_lab=mlc_lab, tir=tir, te=te, T=T, I=I)
