"""Every corpus program: printing round-trips, the verifier accepts it, and the reference
interpreter agrees with numpy."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import IRModule, tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import ir as I
from mlc_lab.script.parser import from_source

from corpus import CORPUS


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_print_parse_round_trip(name):
    func = CORPUS[name].func
    reparsed = from_source(func.script())
    assert_structural_equal(func, reparsed)
    assert reparsed.script() == func.script()


def test_module_round_trip():
    mod = IRModule({name: case.func for name, case in CORPUS.items()})
    assert_structural_equal(mod, from_source(mod.script()))


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_verifier_accepts(name):
    assert tir.verify(CORPUS[name].func)


# float32 results may differ from numpy's in the last bits (different summation order).
@pytest.mark.parametrize("target", ["python", "llvm"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_backend_matches_numpy(name, target):
    case = CORPUS[name]
    rng = np.random.default_rng(0)
    inputs = case.inputs(rng)
    outputs = [np.zeros(shape, dtype) for shape, dtype in case.outputs]
    lib = mlc_lab.build(case.func, target=target)
    lib(*[mlc_lab.nd.array(x) for x in inputs], *(out_nd := [mlc_lab.nd.array(o) for o in outputs]))
    for got, want in zip(out_nd, case.reference(*inputs)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


def test_ir_module_decorator_keeps_every_function():
    @I.ir_module
    class Two:
        vector_add = CORPUS["vector_add"].func
        softmax = CORPUS["softmax"].func
    assert sorted(gv.name_hint for gv in Two.functions) == ["softmax", "vector_add"]
