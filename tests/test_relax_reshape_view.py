"""RewriteDataflowReshape: kernels that only reshape become R.reshape, which the VirtualMachine runs
as a view of the same memory; the memory plan keeps a viewed tensor alive as long as its views."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, te
from mlc_lab.relax import op as R
from mlc_lab.relax.lifetime import tensor_sites
from mlc_lab.relax.transform.rewrite_dataflow_reshape import is_reshape


def tensor(name, shape):
    return relax.Var(name, relax.TensorStructInfo(shape, "float32"))


def module(body, *shapes):
    params = [tensor(f"a{k}", s) for k, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def calls(mod):
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and hasattr(b.value.op, "name")]


def prim(body, *shapes):
    mod = relax.transform.LegalizeOps()(module(lambda bb, *xs: body(*xs), *shapes))
    (func,) = [f for f in mod.functions.values() if isinstance(f, mlc_lab.tir.PrimFunc)]
    return func


def test_reshape_kernels_are_recognised_and_others_are_not():
    assert is_reshape(prim(R.flatten, (2, 3, 4, 5)))
    assert is_reshape(prim(lambda x: R.reshape(x, (6, 20)), (2, 3, 4, 5)))
    assert not is_reshape(prim(lambda x: R.permute_dims(x, (1, 0)), (6, 20)))   # moves elements
    assert not is_reshape(prim(R.relu, (6, 20)))                                  # computes
    x = te.placeholder((8,), name="x")
    flip = te.compute((8,), lambda i: x[7 - i], name="flip")
    assert not is_reshape(te.create_prim_func([x, flip]))                          # reverses


def chain(bb, x, y):
    # relu(x) is viewed as y's shape; relu(y) may not take relu(x)'s storage while the view lives
    a = bb.emit(R.relu(x))
    view = bb.emit(R.reshape(a, (12, 2)))
    b = bb.emit(R.relu(y))
    return bb.emit(R.add(view, b))


def test_the_view_keeps_its_tensor_alive_in_the_plan_and_the_vm():
    mod = module(chain, (4, 6), (12, 2))
    T = relax.transform   # unfused, so that the view sits between kernels
    ex = relax.build(mod, "llvm", pipeline=[T.LegalizeOps(), T.RewriteDataflowReshape(),
                                            T.DeadCodeElimination(), T.StaticPlanBlockMemory()])
    assert "relax.reshape" in calls(ex.mod) and len([c for c in calls(ex.mod) if c == "relax.call_tir"]) == 3
    sites = {s.name: s for s in tensor_sites(ex.mod["main"])}
    viewed = next(s for s in sites.values() if s.kind == "relax.call_tir" and s.sinfo.static_shape == (4, 6))
    add_at = max(s.binding for s in sites.values())
    assert viewed.last_use == add_at   # the add reads the view
    x = np.random.default_rng(0).standard_normal((4, 6)).astype("float32")
    y = np.random.default_rng(1).standard_normal((12, 2)).astype("float32")
    want = np.maximum(x, 0).reshape(12, 2) + np.maximum(y, 0)
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    for _ in range(4):   # stepping, then the native sequence
        np.testing.assert_allclose(vm["main"](x, y).numpy(), want, rtol=1e-6)
    assert vm._programs["main"].sequence is not None


def test_a_returned_view_escapes_and_shares_nothing_with_the_next_call():
    mod = module(lambda bb, x: bb.emit(R.flatten(bb.emit(R.relu(x)))), (2, 3, 4))
    T = relax.transform
    ex = relax.build(mod, "llvm", pipeline=[T.LegalizeOps(), T.RewriteDataflowReshape(),
                                            T.DeadCodeElimination(), T.StaticPlanBlockMemory()])
    assert calls(ex.mod)[-1] == "relax.reshape"
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    xs = [np.random.default_rng(k).standard_normal((2, 3, 4)).astype("float32") for k in range(4)]
    outs = [vm["main"](x) for x in xs]
    for x, out in zip(xs, outs):
        assert out.shape == (2, 12)
        np.testing.assert_array_equal(out.numpy(), np.maximum(x, 0).reshape(2, 12))


def test_a_view_of_the_wrong_size_is_a_clear_error():
    x = tensor("x", (4, 6))
    shape = relax.Var("s", relax.ShapeStructInfo(ndim=2))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, shape]):
        out = bb.emit(relax.Call(relax.Op.get("relax.reshape"), [x, shape]))
        bb.emit_func_output(out)
    vm = relax.VirtualMachine(relax.build(bb.get(), "llvm", pipeline=[]), mlc_lab.cpu())
    np.testing.assert_array_equal(vm["main"](np.ones((4, 6), "float32"), (3, 8)).numpy(), np.ones((3, 8)))
    with pytest.raises(ValueError, match=r"cannot view a tensor of shape \(4, 6\) \(24 elements\) as shape \(5, 5\)"):
        vm["main"](np.ones((4, 6), "float32"), (5, 5))
