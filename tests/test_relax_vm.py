"""relax.build and the VirtualMachine: the course MLP end to end, packed functions, symbolic
batch sizes, argument errors and memory statistics; every result is checked against numpy."""

import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, te, tir, topi
from mlc_lab.relax import op as R
from mlc_lab.runtime.packed import remove_global_func

TARGETS = ["python", "llvm"]


def tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def te_relu(X):
    return te.compute(X.shape, lambda i, j: te.max(X[i, j], tir.const(0, X.dtype)), name="relu")


def build_mlp(batch=1):
    """784 -> 128 -> relu -> 10, every layer a call_tir to a PrimFunc made with emit_te."""
    x = tensor("x", (batch, 784))
    w0, b0 = tensor("w0", (128, 784)), tensor("b0", (128,))
    w1, b1 = tensor("w1", (10, 128)), tensor("b1", (10,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit_te(topi.dense, x, w0, b0, primfunc_name_hint="linear0")
            lv1 = bb.emit_te(te_relu, lv0, primfunc_name_hint="relu0")
            out = bb.emit_te(topi.dense, lv1, w1, b1, primfunc_name_hint="linear1")
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def mlp_weights(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"w0": (128, 784), "b0": (128,), "w1": (10, 128), "b1": (10,)}
    return {k: (rng.standard_normal(s) * 0.1).astype("float32") for k, s in shapes.items()}


def mlp_numpy(x, p):
    return np.maximum(x @ p["w0"].T + p["b0"], 0) @ p["w1"].T + p["b1"]


@pytest.fixture
def linear_packed():
    @mlc_lab.register_func("test.env.linear", override=True)
    def linear(x, w, b, out):
        out.copyfrom(x.numpy() @ w.numpy().T + b.numpy())
    yield "test.env.linear"
    remove_global_func("test.env.linear")


# -- the course MLP ----------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_mlp_matches_numpy(target):
    ex = relax.build(build_mlp(), target=target)
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    p = mlp_weights()
    x = np.random.default_rng(1).random((1, 784), dtype="float32")
    out = vm["main"](mlc_lab.nd.array(x), *(mlc_lab.nd.array(p[k]) for k in ("w0", "b0", "w1", "b1")))
    assert isinstance(out, mlc_lab.nd.NDArray) and out.shape == (1, 10)
    np.testing.assert_allclose(out.numpy(), mlp_numpy(x, p), rtol=1e-4, atol=1e-5)


def test_executable_exposes_module_library_and_stats():
    ex = relax.build(build_mlp(), target="llvm")   # the default pipeline fuses linear0 and relu0
    assert isinstance(ex.mod, mlc_lab.IRModule) and "main" in ex.mod
    assert sorted(ex.lib.function_names) == ["fused_linear0_relu0", "linear1"]
    assert ex.lib.target == "llvm" and ex.function_names == ["main"]
    text = ex.stats()
    assert "main(x, w0, b0, w1, b1): 2 call_tir" in text and "2 PrimFunc(s)" in text
    unfused = relax.build(build_mlp(), target="llvm", opt_level=0)
    assert sorted(unfused.lib.function_names) == ["linear0", "linear1", "relu0"]


def test_numpy_arguments_and_bound_params():
    p = mlp_weights()
    x = np.random.default_rng(2).random((1, 784), dtype="float32")
    ex = relax.build(build_mlp(), target="python", params=p)
    assert [v.name_hint for v in ex.mod["main"].params] == ["x"]
    out = relax.VirtualMachine(ex, mlc_lab.cpu())["main"](x)
    np.testing.assert_allclose(out.numpy(), mlp_numpy(x, p), rtol=1e-4, atol=1e-5)
    assert "4 constant(s)" in ex.stats()
    with pytest.raises((TypeError, ValueError), match=r"b1.* float64"):
        relax.build(build_mlp(), target="python", params={"b1": np.zeros(10)})


# -- packed functions --------------------------------------------------------------------------
def build_packed_mlp(n):
    x = tensor("x", (n, 784))
    w0, b0 = tensor("w0", (128, 784)), tensor("b0", (128,))
    w1, b1 = tensor("w1", (10, 128)), tensor("b1", (10,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(R.call_dps_packed("test.env.linear", [x, w0, b0],
                                            relax.TensorStructInfo((n, 128), "float32")))
            lv1 = bb.emit_te(te_relu, lv0)
            out = bb.emit(R.call_dps_packed("test.env.linear", [lv1, w1, b1],
                                            relax.TensorStructInfo((n, 10), "float32")))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize("target", TARGETS)
def test_call_dps_packed_mixed_with_call_tir(target, linear_packed):
    vm = relax.VirtualMachine(relax.build(build_packed_mlp(3), target), mlc_lab.cpu())
    p = mlp_weights()
    x = np.random.default_rng(3).random((3, 784), dtype="float32")
    out = vm["main"](x, p["w0"], p["b0"], p["w1"], p["b1"])
    np.testing.assert_allclose(out.numpy(), mlp_numpy(x, p), rtol=1e-4, atol=1e-5)


def test_packed_function_that_returns_instead_of_writing(linear_packed):
    mlc_lab.register_func("test.env.linear", lambda x, w, b, out: x.numpy() @ w.numpy().T,
                          override=True)
    vm = relax.VirtualMachine(relax.build(build_packed_mlp(1), "python"), mlc_lab.cpu())
    p = mlp_weights()
    with pytest.raises(TypeError, match="must write its result into the output"):
        vm["main"](np.zeros((1, 784), "float32"), p["w0"], p["b0"], p["w1"], p["b1"])


def test_missing_packed_function():
    vm = relax.VirtualMachine(relax.build(build_packed_mlp(1), "python"), mlc_lab.cpu())
    p = mlp_weights()
    with pytest.raises(KeyError, match=r"no packed function is registered as 'test.env.linear'"):
        vm["main"](np.zeros((1, 784), "float32"), p["w0"], p["b0"], p["w1"], p["b1"])


def test_register_func_forms():
    @mlc_lab.register_func
    def test_double(x, out):
        out.numpy_view()[:] = 2 * x.numpy_view()
    try:
        assert mlc_lab.get_global_func("test_double") is test_double
        with pytest.raises(ValueError, match="override=True"):
            mlc_lab.register_func("test_double", lambda x, out: None)
        assert mlc_lab.get_global_func("test.nothing", allow_missing=True) is None
    finally:
        remove_global_func("test_double")


def test_torch_backed_packed_function():
    torch = pytest.importorskip("torch")

    @mlc_lab.register_func("test.torch.linear", override=True)
    def linear(x, w, b, out):
        x_t, w_t, b_t, out_t = (torch.from_dlpack(a.numpy_view()) for a in (x, w, b, out))
        torch.add(torch.mm(x_t, w_t.T), b_t, out=out_t)

    x, w, b = tensor("x", (2, 8)), tensor("w", (4, 8)), tensor("b", (4,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        gv = bb.emit(R.call_dps_packed("test.torch.linear", [x, w, b],
                                       relax.TensorStructInfo((2, 4), "float32")))
        bb.emit_func_output(gv)
    rng = np.random.default_rng(4)
    xs, ws, bs = (rng.random(s, dtype="float32") for s in ((2, 8), (4, 8), (4,)))
    out = relax.VirtualMachine(relax.build(bb.get(), "python"), mlc_lab.cpu())["main"](xs, ws, bs)
    np.testing.assert_allclose(out.numpy(), xs @ ws.T + bs, rtol=1e-5)
    remove_global_func("test.torch.linear")


# -- symbolic shapes, tuples, calls between functions -------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_batch_runs_with_two_batch_sizes(target):
    n = tir.Var("n", "int64")
    mod = build_mlp(batch=n)
    vm = relax.VirtualMachine(relax.build(mod, target), mlc_lab.cpu())
    p = mlp_weights()
    for batch in (1, 5):
        x = np.random.default_rng(batch).random((batch, 784), dtype="float32")
        out = vm["main"](x, p["w0"], p["b0"], p["w1"], p["b1"])
        assert out.shape == (batch, 10)
        np.testing.assert_allclose(out.numpy(), mlp_numpy(x, p), rtol=1e-4, atol=1e-5)
        # fused into one kernel, linear0 and relu0 leave one intermediate of (batch, 128)
        assert vm.memory_stats()["bytes_allocated"] == batch * (128 + 10) * 4


def test_tuple_output_and_call_of_another_relax_function():
    x = tensor("x", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("relu_twice", [x]):
        a = bb.emit_te(te_relu, x)
        b = bb.emit_te(te_relu, a)
        bb.emit_func_output(relax.Tuple([a, b]))
    mod = bb.get()
    y = tensor("y", (2, 3))
    bb = relax.BlockBuilder(mod)
    with bb.function("main", [y]):
        pair = bb.emit(relax.Call(mod.get_global_var("relu_twice"), [y]))
        second = bb.emit(relax.TupleGetItem(pair, 1))
        bb.emit_func_output(relax.Tuple([second, pair[0]]))
    vm = relax.VirtualMachine(relax.build(bb.get(), "python"), mlc_lab.cpu())
    data = np.array([[-1, 2, -3], [4, -5, 6]], "float32")
    out = vm["main"](data)
    assert isinstance(out, tuple) and len(out) == 2
    for item in out:
        np.testing.assert_array_equal(item.numpy(), np.maximum(data, 0))
    stats = vm.memory_stats()
    assert stats["allocations"] == 2 and stats["peak_bytes"] == 2 * 24


def test_tir_vars_take_sizes_from_a_shape_argument():
    m = tir.Var("m", "int64")

    def tile(X):
        return te.compute((m, X.shape[0]), lambda i, j: X[j], name="tile")

    x = tensor("x", (4,))
    shape = relax.Var("shape", relax.ShapeStructInfo([m]))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, shape]):
        gv = bb.emit_te(tile, x)
        bb.emit_func_output(gv)
    for target in TARGETS:
        vm = relax.VirtualMachine(relax.build(bb.get(), target), mlc_lab.cpu())
        data = np.arange(4, dtype="float32")
        np.testing.assert_array_equal(vm["main"](data, (3,)).numpy(), np.tile(data, (3, 1)))
    with pytest.raises(TypeError, match=r"parameter shape expects a shape \(a tuple of ints\)"):
        vm["main"](data, 3)


# -- errors ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlp_vm():
    return relax.VirtualMachine(relax.build(build_mlp(batch=tir.Var("n", "int64")), "python"),
                                mlc_lab.cpu())


def test_wrong_argument_count(mlp_vm):
    with pytest.raises(TypeError, match=r"main\(\) takes 5 argument\(s\) \(x, w0, b0, w1, b1\) "
                                        r"but 1 were given"):
        mlp_vm["main"](np.zeros((1, 784), "float32"))


def test_wrong_dtype_names_the_parameter(mlp_vm):
    p = mlp_weights()
    with pytest.raises(TypeError, match=r"main\(\): parameter x expects a float32 tensor of shape "
                                        r"\(n, 784\) but got dtype float64"):
        mlp_vm["main"](np.zeros((1, 784)), p["w0"], p["b0"], p["w1"], p["b1"])


def test_wrong_shape_names_the_parameter(mlp_vm):
    p = mlp_weights()
    with pytest.raises(ValueError, match=r"parameter w0 expects a float32 tensor of shape "
                                         r"\(128, 784\) but got shape \(128, 783\): dimension 1 "
                                         r"should be 784"):
        mlp_vm["main"](np.zeros((1, 784), "float32"), p["w0"][:, :783].copy(), p["b0"],
                       p["w1"], p["b1"])
    with pytest.raises(ValueError, match=r"parameter b1 expects .* but got a 2-d array"):
        mlp_vm["main"](np.zeros((1, 784), "float32"), p["w0"], p["b0"], p["w1"],
                       p["b1"][None])


def test_inconsistent_symbolic_size():
    n = tir.Var("n", "int64")
    x, y = tensor("x", (n, 2)), tensor("y", (n, 2))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        bb.emit_func_output(bb.emit_te(topi.add, x, y))
    vm = relax.VirtualMachine(relax.build(bb.get(), "python"), mlc_lab.cpu())
    with pytest.raises(ValueError, match=r"parameter y .* dimension 0 is n, which is 3 from "
                                         r"parameter x"):
        vm["main"](np.zeros((3, 2), "float32"), np.zeros((4, 2), "float32"))


def test_not_a_tensor_and_unknown_function(mlp_vm):
    with pytest.raises(TypeError, match="parameter x expects a tensor"):
        mlp_vm["main"]([[0.0] * 784], *mlp_weights().values())
    with pytest.raises(KeyError, match="no relax function named 'mian'"):
        mlp_vm["mian"]


def build_add_relu():
    x, y = tensor("x", (2, 3)), tensor("y", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            gv = bb.emit_output(R.nn.relu(R.add(x, y)))
        bb.emit_func_output(gv)
    return bb.get()


def test_high_level_op_without_legalization_is_a_clear_error():
    with pytest.raises(ValueError, match=r"relax.build: the module still calls relax.add, "
                                         r"relax.nn.relu; apply relax.transform.LegalizeOps\(\) first"):
        relax.build(build_add_relu(), "python", pipeline=[])


@pytest.mark.parametrize("opt_level", [0, 1])
def test_high_level_ops_are_legalized(opt_level):
    ex = relax.build(build_add_relu(), "llvm", opt_level=opt_level)
    assert ex.lib.function_names
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    a = np.array([[1, -2, 3], [-4, 5, -6]], "float32")
    b = np.full((2, 3), 0.5, "float32")
    np.testing.assert_array_equal(vm["main"](a, b).numpy(), np.maximum(a + b, 0))


def test_build_rejects_non_modules():
    with pytest.raises(TypeError, match="relax.build expects an IRModule"):
        relax.build("main", "python")
    with pytest.raises(TypeError, match="expects the Executable"):
        relax.VirtualMachine(build_mlp(), mlc_lab.cpu())


def build_high_level_mlp(batch):
    x = tensor("x", (batch, 784))
    w0, b0 = tensor("w0", (128, 784)), tensor("b0", (128,))
    w1, b1 = tensor("w1", (10, 128)), tensor("b1", (10,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit(R.add(R.matmul(x, R.permute_dims(w0)), b0))
            lv1 = bb.emit(R.nn.relu(lv0))
            gv = bb.emit_output(R.add(R.matmul(lv1, R.permute_dims(w1)), b1))
        bb.emit_func_output(gv)
    return bb.get()


@pytest.mark.parametrize("target", TARGETS)
def test_optimizing_pipeline_fuses_and_plans_memory(target):
    transform = pytest.importorskip("mlc_lab.relax.transform")
    if not hasattr(transform, "default_pipeline"):
        pytest.skip("no default pipeline yet")
    mod = build_high_level_mlp(batch=2)
    p = mlp_weights()
    x = np.random.default_rng(8).random((2, 784), dtype="float32")
    stats = {}
    for opt_level in (0, 1):
        ex = relax.build(mod, target, opt_level=opt_level)
        vm = relax.VirtualMachine(ex, mlc_lab.cpu())
        np.testing.assert_allclose(vm["main"](x, *p.values()).numpy(), mlp_numpy(x, p),
                                   rtol=1e-4, atol=1e-5)
        stats[opt_level] = vm.memory_stats()
    assert stats[0]["memory_plan"] is False and stats[1]["plan_fallbacks"] == 0
    assert stats[1]["allocations"] < stats[0]["allocations"]
    assert stats[1]["bytes_allocated"] == stats[1]["planned_bytes"] + 2 * 10 * 4
    assert stats[1]["bytes_allocated"] < stats[0]["bytes_allocated"] == stats[0]["unplanned_bytes"]


# -- memory statistics and timing --------------------------------------------------------------
def test_memory_stats_without_plan():
    vm = relax.VirtualMachine(relax.build(build_mlp(batch=4), "python", opt_level=0), mlc_lab.cpu())
    with pytest.raises(RuntimeError, match="no function has been called"):
        vm.memory_stats()
    p = mlp_weights()
    vm["main"](np.zeros((4, 784), "float32"), p["w0"], p["b0"], p["w1"], p["b1"])
    stats = vm.memory_stats()
    assert stats["allocations"] == 3
    assert stats["bytes_allocated"] == stats["unplanned_bytes"] == 4 * (128 + 128 + 10) * 4
    # lv0 dies once relu has read it: at most two of the three tensors are live together
    assert stats["peak_bytes"] == 4 * (128 + 128) * 4
    assert stats["memory_plan"] is False and stats["planned_bytes"] == 0


def with_memory_plan(mod, plan):
    return mod.with_function("main", mod["main"].with_attr("relax.memory_plan", plan))


def test_memory_plan_shares_storage():
    ex = relax.build(build_mlp(batch=4), "python", opt_level=0)
    main = ex.mod["main"]
    names = [b.var.name_hint for b in main.body.blocks[0].bindings]
    planned = with_memory_plan(ex.mod, [(names[0], 0, 4 * 128 * 4), (names[1], 1, 4 * 128 * 4)])
    vm = relax.VirtualMachine(relax.build(planned, "python", opt_level=0), mlc_lab.cpu())
    p = mlp_weights()
    x = np.random.default_rng(5).random((4, 784), dtype="float32")
    np.testing.assert_allclose(vm["main"](x, *p.values()).numpy(), mlp_numpy(x, p),
                               rtol=1e-4, atol=1e-5)
    stats = vm.memory_stats()
    assert stats["memory_plan"] is True and stats["planned_bytes"] == 2 * 4 * 128 * 4
    assert stats["bytes_allocated"] == stats["planned_bytes"] + 4 * 10 * 4
    assert stats["plan_fallbacks"] == 0
    assert "memory plan: 2 tensor(s) in 2 storage(s)" in relax.build(planned, "python",
                                                                   opt_level=0).stats()


def test_memory_plan_that_would_overwrite_a_live_tensor_falls_back():
    ex = relax.build(build_mlp(batch=2), "python", opt_level=0)
    names = [b.var.name_hint for b in ex.mod["main"].body.blocks[0].bindings]
    bad = with_memory_plan(ex.mod, [(names[0], 0, 2 * 128 * 4), (names[1], 0, 2 * 128 * 4)])
    vm = relax.VirtualMachine(relax.build(bad, "python", opt_level=0), mlc_lab.cpu())
    p = mlp_weights()
    x = np.random.default_rng(6).random((2, 784), dtype="float32")
    np.testing.assert_allclose(vm["main"](x, *p.values()).numpy(), mlp_numpy(x, p),
                               rtol=1e-4, atol=1e-5)
    assert vm.memory_stats()["plan_fallbacks"] == 1


def test_memory_plan_as_a_dict():
    ex = relax.build(build_mlp(batch=1), "python", opt_level=0)
    names = [b.var.name_hint for b in ex.mod["main"].body.blocks[0].bindings]
    planned = with_memory_plan(ex.mod, {names[0]: (0, 512), names[1]: (1, 512), names[2]: (0, 40)})
    vm = relax.VirtualMachine(relax.build(planned, "python", opt_level=0), mlc_lab.cpu())
    p = mlp_weights()
    x = np.random.default_rng(7).random((1, 784), dtype="float32")
    np.testing.assert_allclose(vm["main"](x, *p.values()).numpy(), mlp_numpy(x, p),
                               rtol=1e-4, atol=1e-5)
    stats = vm.memory_stats()
    # the returned tensor outlives the call, so it may not live in storage 0, which the VM
    # keeps for the next call: it falls back to an allocation of its own
    assert stats["planned_bytes"] == 1024 and stats["bytes_allocated"] == 1024 + 40
    assert stats["plan_fallbacks"] == 1
    assert stats["unplanned_bytes"] == (128 + 128 + 10) * 4 and stats["peak_bytes"] == 1024


def test_malformed_memory_plan_is_ignored():
    ex = relax.build(build_mlp(batch=2), "python", opt_level=0)
    vm = relax.VirtualMachine(relax.build(with_memory_plan(ex.mod, {"storage": 3}), "python",
                                          opt_level=0), mlc_lab.cpu())
    vm["main"](np.zeros((2, 784), "float32"), *mlp_weights().values())
    assert vm.memory_stats()["memory_plan"] is False


def test_time_evaluator():
    vm = relax.VirtualMachine(relax.build(build_mlp(), "llvm"), mlc_lab.cpu())
    args = [np.zeros((1, 784), "float32"), *mlp_weights().values()]
    result = vm.time_evaluator("main", mlc_lab.cpu(), number=2, repeat=2)(*args)
    assert len(result.results) == 2 and result.mean > 0
    assert vm.memory_stats()["calls"] == 5
