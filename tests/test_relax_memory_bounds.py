"""Memory planning with symbolic sizes: a function that bounds its sizes ("tir_var_upper_bound")
gets its growing tensors planned at their largest, sees them per call with the call's shape, and
refuses a call whose tensors would not fit; without bounds nothing symbolic is planned."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.relax.lifetime import UPPER_BOUND_ATTR, tensor_bytes, tensor_sites, upper_bounds
from mlc_lab.relax.transform import PLAN_ATTR, memory_stats
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R

BOUND = 48


@I.ir_module
class Chain:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 16), "float32")):
        R.func_attr({"tir_var_upper_bound": {"n": 48}})
        with R.dataflow():
            a = R.matmul(x, w)
            b = R.nn.relu(a)
            c = R.matmul(b, w)
            d = R.exp(R.negative(c))
            e = R.matmul(d, w)
            f = R.add(R.matmul(e, w), x)
            R.output(f)
        return f


def reference(x, w):
    d = np.exp(-(np.maximum(x @ w, 0) @ w))
    return d @ w @ w + x


def unbounded(mod):
    func = mod["main"]
    attrs = {k: v for k, v in func.attrs.items() if k != UPPER_BOUND_ATTR}
    out = type(mod)(mod.functions, mod.attrs)
    out[mod.get_global_var("main")] = relax.Function(func.params, func.body, func.ret_struct_info,
                                                     attrs=attrs)
    return out


@pytest.fixture(scope="module")
def built():
    return {"bounded": relax.build(Chain, "llvm"), "unbounded": relax.build(unbounded(Chain), "llvm")}


def test_sizes_of_symbolic_shapes_come_from_the_bounds():
    n, k = tir.Var("n", "int64"), tir.Var("k", "int64")
    padded = relax.TensorStructInfo(((n + 15) // 16 * 16, n * 2), "float32")
    assert tensor_bytes(padded, {"n": 100}) == 112 * 200 * 4
    assert tensor_bytes(relax.TensorStructInfo((n, 8), "int8"), {"n": 5}) == 40
    assert tensor_bytes(relax.TensorStructInfo((n, k), "float32"), {"n": 5}) is None   # k unbounded
    assert tensor_bytes(relax.TensorStructInfo((n, 8), "float32")) is None
    assert tensor_bytes(relax.TensorStructInfo((3, 8), "float16"), {"n": 5}) == 48


def test_a_bound_must_be_a_positive_integer():
    func = Chain["main"]
    assert upper_bounds(func) == {"n": BOUND}
    for bad in ({"n": 0}, {"n": 2.5}, {"n": True}, [("n", 4)]):
        with pytest.raises(ValueError, match="tir_var_upper_bound"):
            upper_bounds(func.with_attr(UPPER_BOUND_ATTR, bad))


def test_the_bound_survives_printing_and_parsing():
    text = Chain.script()
    assert '"tir_var_upper_bound": {"n": 48}' in text
    assert upper_bounds(mlc_lab.script.from_source(text)["main"]) == {"n": BOUND}


def test_bounded_tensors_are_planned_and_unbounded_ones_are_not(built):
    bounded, plain = built["bounded"].mod["main"], built["unbounded"].mod["main"]
    assert PLAN_ATTR not in plain.attrs
    plan = bounded.attrs[PLAN_ATTR]
    sites = {s.name: s for s in tensor_sites(bounded)}
    assert plan and all(sites[name].sinfo.static_shape is None for name, _, _ in plan)
    assert {nbytes for _, _, nbytes in plan} == {BOUND * 16 * 4}
    stats = memory_stats(built["bounded"].mod)   # three intermediates, the third in the first's storage
    assert (stats["tensors"], stats["storages"]) == (3, 2)
    assert stats["planned_bytes"] == 2 * BOUND * 16 * 4 < stats["naive_bytes"]


def test_each_call_sees_its_own_shape_in_the_planned_storage(built):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 16)).astype("float32") / 4
    vms = {k: relax.VirtualMachine(ex, mlc_lab.cpu()) for k, ex in built.items()}
    for n in (1, 37, BOUND, 5):
        x = rng.standard_normal((n, 16)).astype("float32")
        for _ in range(3):      # the first call steps, later ones run compiled segments
            got = {k: vm["main"](x, w).numpy() for k, vm in vms.items()}
            np.testing.assert_allclose(got["bounded"], reference(x, w), rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(got["bounded"], got["unbounded"])
        planned, plain = vms["bounded"].memory_stats(), vms["unbounded"].memory_stats()
        assert planned["memory_plan"] and planned["allocations"] == 1      # the result alone
        assert plain["allocations"] > 1
        assert planned["unplanned_bytes"] == plain["bytes_allocated"]


def test_sizes_past_the_bound_are_refused_and_the_function_still_runs(built):
    vm = relax.VirtualMachine(built["bounded"], mlc_lab.cpu())
    w = np.eye(16, dtype="float32")
    with pytest.raises(ValueError, match=r"of shape \(49, 16\) needs 3136 bytes.*n <= 48"):
        vm["main"](np.ones((BOUND + 1, 16), "float32"), w)
    x = np.ones((BOUND, 16), "float32")
    np.testing.assert_allclose(vm["main"](x, w).numpy(), reference(x, w), rtol=1e-5)
