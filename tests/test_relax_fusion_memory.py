"""Fusion that removes intermediates, memory planned once per function, and the lean VM: FuseTIR
inlines elementwise work (no intermediate buffer left in a fused elementwise chain), kernels'
big intermediates become planned workspace, the plan never needs more than one allocation per
tensor, the VM reuses its storages from call to call and checks a kernel's arguments once.
Every model is checked fused against unfused against numpy."""
import threading

import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, te
from mlc_lab.frontend import nn
from mlc_lab.relax import op as R
from mlc_lab.relax import transform as T
from mlc_lab.relax.lifetime import tensor_sites

from test_relax_transform import block_names

RNG = np.random.default_rng(0)


def tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def chain(n=64):
    """add -> multiply -> relu on (n, n) tensors."""
    a, b = tensor("a", (n, n)), tensor("b", (n, n))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        with bb.dataflow():
            lv = bb.emit(R.multiply(bb.emit(R.add(a, b)), b))
            gv = bb.emit_output(R.nn.relu(lv))
        bb.emit_func_output(gv)
    return bb.get()


def fused(mod):
    return T.FuseTIR()(T.FuseOps()(T.AnnotateTIROpPattern()(T.LegalizeOps()(mod))))


def mlp():
    return nn.Sequential(nn.Linear(64, 64, seed=0), nn.ReLU(), nn.Linear(64, 10, seed=1))


def cnn():
    """bench/e2e.py's CNN: conv 3x3 (1 -> 8) - relu - maxpool 2x2 - flatten - linear to 10."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, seed=0), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 13 * 13, 10, seed=1))


def run(mod, target, *args, **build):
    vm = relax.VirtualMachine(relax.build(mod, target, **build), mlc_lab.cpu())
    out = vm["main"](*args)
    return out, vm


# -- FuseTIR inlines what it can -----------------------------------------------------------------
def test_fused_elementwise_chain_allocates_nothing():
    kernel = fused(chain(1024))["fused_add_multiply_relu"]
    assert kernel.body.block.alloc_buffers == ()
    assert block_names(kernel) == ["root", "T_relu"]


def test_matmul_epilogue_becomes_one_block_and_the_reduction_result_stays():
    x, w, b = tensor("x", (4, 16)), tensor("w", (16, 8)), tensor("b", (8,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            gv = bb.emit_output(R.nn.relu(bb.emit(R.add(bb.emit(R.matmul(x, w)), b))))
        bb.emit_func_output(gv)
    kernel = fused(bb.get())["fused_matmul_add_relu"]
    assert block_names(kernel) == ["root", "T_matmul", "T_relu"]
    assert len(kernel.body.block.alloc_buffers) == 1          # compute_inline refuses a reduction
    xs, ws, bs = (RNG.random(shape, "float32") for shape in ((4, 16), (16, 8), (8,)))
    out = np.zeros((4, 8), "float32")
    mlc_lab.build(kernel, "llvm")(xs, ws, bs, out)
    np.testing.assert_allclose(out, np.maximum(xs @ ws + bs, 0), rtol=1e-5)


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_chain_fused_matches_unfused_and_numpy(target):
    a, b = RNG.standard_normal((64, 64), "float32"), RNG.standard_normal((64, 64), "float32")
    want = np.maximum((a + b) * b, 0)
    for opt_level in (0, 1):
        out, _ = run(chain(), target, a, b, opt_level=opt_level)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("model, shape", [(mlp, (1, 64)), (mlp, (8, 64)), (cnn, (2, 1, 28, 28))],
                         ids=["mlp-b1", "mlp-b8", "cnn"])
def test_models_fused_match_unfused_and_numpy(model, shape):
    net, x = model(), RNG.random(shape, "float32")
    want = net.forward_numpy(x)
    unfused, _ = run(net.to_relax(shape), "llvm", x, opt_level=0)
    fused_out, vm = run(net.to_relax(shape), "llvm", x, opt_level=1)
    np.testing.assert_allclose(unfused.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fused_out.numpy(), unfused.numpy(), rtol=1e-4, atol=1e-5)
    assert vm.memory_stats()["plan_fallbacks"] == 0


# -- memory planning ---------------------------------------------------------------------------
def two_outputs():
    """A kernel with two outputs whose users die at different times, returned as a tuple."""
    x = te.placeholder((32, 32), name="x")
    double = te.compute(x.shape, lambda i, j: x[i, j] * 2.0, name="double")
    square = te.compute(x.shape, lambda i, j: x[i, j] * x[i, j], name="square")
    pair = te.create_prim_func([x, double, square])
    xv = tensor("x", (32, 32))
    bb = relax.BlockBuilder()
    gv = bb.add_func(pair, "pair")
    with bb.function("main", [xv]):
        with bb.dataflow():
            both = bb.emit(relax.call_tir(gv, [xv], [xv.struct_info] * 2), "both")
            first = bb.emit(relax.TupleGetItem(both, 0), "first")
            relu = bb.emit_output(R.nn.relu(first), "relu")
            second = bb.emit(relax.TupleGetItem(both, -1), "second")   # counted from the end
            out = bb.emit_output(R.add(second, bb.emit(R.exp(relu), "e")))
        bb.emit_func_output(relax.Tuple([out, relu]))
    return bb.get()


def test_lifetimes_follow_each_output_of_a_multi_output_call():
    sites = {s.name: s for s in tensor_sites(T.LegalizeOps()(two_outputs())["main"])}
    assert sites["both[0]"].last_use == 2            # read by relu only
    assert sites["both[1]"].last_use == 5            # read by the last add
    assert sites["relu"].last_use is None            # returned
    planned = T.StaticPlanBlockMemory()(T.LegalizeOps()(two_outputs()))
    plan = planned["main"].attrs["relax.memory_plan"]
    assert [entry[0] for entry in plan] == ["both[0]", "both[1]", "e"]
    assert plan[2][1] == plan[0][1]                  # e reuses the first output's storage


@pytest.mark.parametrize("model, shape", [(mlp, (1, 64)), (cnn, (8, 1, 28, 28)), (None, None)],
                         ids=["mlp", "cnn", "tuple-output"])
def test_planned_peak_is_no_higher_than_unplanned(model, shape):
    mod = two_outputs() if model is None else model().to_relax(shape)
    x = RNG.random((32, 32) if model is None else shape, "float32")
    built = relax.build(mod, "llvm")
    assert "relax.memory_plan" in built.mod["main"].attrs
    stats = T.memory_stats(built.mod)
    assert stats["planned_peak_bytes"] <= stats["unplanned_peak_bytes"]
    assert stats["planned_bytes"] <= stats["naive_bytes"]
    unplanned = built.mod.with_function("main", built.mod["main"].without_attr("relax.memory_plan"))
    peaks = {}
    for label, lowered in (("planned", built.mod), ("unplanned", unplanned)):
        out, vm = run(lowered, "llvm", x, pipeline=[])
        peaks[label] = vm.memory_stats()["peak_bytes"]
        first = out[0] if isinstance(out, tuple) else out
        want = model().forward_numpy(x) if model else np.exp(np.maximum(2 * x, 0)) + x * x
        np.testing.assert_allclose(first.numpy(), want, rtol=1e-4, atol=1e-5)
    assert peaks["planned"] <= peaks["unplanned"]
    assert peaks["planned"] == stats["planned_peak_bytes"]


def test_big_kernel_intermediates_become_planned_workspace():
    net, x = cnn(), RNG.random((8, 1, 28, 28), "float32")
    # unscheduled (as for the "python" target): the conv's 173 KB result stays at function level
    mod = T.StaticPlanBlockMemory()(fused(net.to_relax((8, 1, 28, 28))))
    kernel = mod["fused_conv2d_add_relu"]
    assert kernel.body.block.alloc_buffers == ()
    assert [p.name for p in kernel.params][-2:] == ["lv3", "lv"]      # output, then workspace
    plan = dict((name, sid) for name, sid, _ in mod["main"].attrs["relax.memory_plan"])
    assert {"lv3_tuple[0]", "lv3_tuple[1]"} <= set(plan)
    assert plan["lv4"] == plan["lv3_tuple[1]"]       # the workspace's storage is free again
    for target in ("python", "llvm"):
        out, _ = run(mod, target, x, pipeline=[])
        np.testing.assert_allclose(out.numpy(), net.forward_numpy(x), rtol=1e-4, atol=1e-5)


# -- the VM --------------------------------------------------------------------------------------
def test_repeated_calls_reuse_storage_and_keep_earlier_results():
    net = cnn()
    vm = relax.VirtualMachine(relax.build(net.to_relax((2, 1, 28, 28)), "llvm"), mlc_lab.cpu())
    x1, x2 = RNG.random((2, 1, 28, 28), "float32"), RNG.random((2, 1, 28, 28), "float32")
    out1 = vm["main"](x1)
    first = vm.memory_stats()
    assert first["planned_bytes"] > 0 and first["allocations"] > 1
    out2 = vm["main"](x2)
    second = vm.memory_stats()
    assert second["allocations"] == 1 and second["bytes_allocated"] == 2 * 10 * 4   # the result
    assert second["planned_bytes"] == first["planned_bytes"]
    assert second["peak_bytes"] == first["peak_bytes"]
    np.testing.assert_allclose(out1.numpy(), net.forward_numpy(x1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out2.numpy(), net.forward_numpy(x2), rtol=1e-4, atol=1e-5)


def test_kernel_arguments_are_checked_on_the_first_call_only(monkeypatch):
    from mlc_lab.runtime import llvm_runtime
    checks = []
    original = llvm_runtime.bind_arguments
    monkeypatch.setattr(llvm_runtime, "bind_arguments",
                        lambda *args, **kw: checks.append(args[1]) or original(*args, **kw))
    net, x = mlp(), RNG.random((1, 64), "float32")
    vm = relax.VirtualMachine(relax.build(net.to_relax((1, 64)), "llvm"), mlc_lab.cpu())
    vm["main"](x)
    assert len(checks) > 0
    seen = len(checks)
    for _ in range(3):
        out = vm["main"](mlc_lab.nd.array(x))
    assert len(checks) == seen
    np.testing.assert_allclose(out.numpy(), net.forward_numpy(x), rtol=1e-4, atol=1e-5)


def test_wrong_inputs_to_a_static_model_name_the_parameter():
    vm = relax.VirtualMachine(relax.build(mlp().to_relax((1, 64)), "llvm"), mlc_lab.cpu())
    with pytest.raises(ValueError, match=r"main\(\): parameter x expects a float32 tensor of "
                                         r"shape \(1, 64\) but got shape \(1, 63\): dimension 1 "
                                         r"should be 64"):
        vm["main"](np.zeros((1, 63), "float32"))
    with pytest.raises(TypeError, match=r"parameter x expects .* but got dtype float64"):
        vm["main"](np.zeros((1, 64)))
    with pytest.raises(TypeError, match=r"parameter x expects a tensor"):
        vm["main"]([[0.0] * 64])
    with pytest.raises(TypeError, match=r"main\(\) takes 1 argument"):
        vm["main"](np.zeros((1, 64), "float32"), np.zeros((1, 64), "float32"))


def test_concurrent_calls_get_workspaces_of_their_own():
    net = mlp()
    vm = relax.VirtualMachine(relax.build(net.to_relax((4, 64)), "llvm"), mlc_lab.cpu())
    inputs = [RNG.random((4, 64), "float32") for _ in range(4)]
    errors = []

    def work(x):
        for _ in range(30):
            if not np.allclose(vm["main"](x).numpy(), net.forward_numpy(x), rtol=1e-4, atol=1e-5):
                errors.append(x)
    threads = [threading.Thread(target=work, args=(x,)) for x in inputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
