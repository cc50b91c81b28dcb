"""Working next to PyTorch, as the course's integration chapter does: sharing memory through
DLPack both ways, torch-backed packed functions called from compiled graphs, and relax modules
built from torch.fx graphs (the library's from_fx, and a translator written by hand with
BlockBuilder / emit_te / topi). Every result is compared with torch or numpy."""
import operator

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fx = pytest.importorskip("torch.fx")

import mlc_lab  # noqa: E402
from mlc_lab import nd, relax, te, topi  # noqa: E402
from mlc_lab.frontend import from_fx  # noqa: E402
from mlc_lab.runtime.packed import remove_global_func  # noqa: E402
from mlc_lab.script import ir as I  # noqa: E402
from mlc_lab.script import relax as R  # noqa: E402
from mlc_lab.script import tir as T  # noqa: E402

RNG = np.random.default_rng(7)


def run_vm(mod, *args):
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), mlc_lab.cpu())
    return vm["main"](*[nd.array(a) for a in args])


@pytest.fixture
def packed_names():
    """Names registered by a test, removed afterwards so tests stay independent."""
    names = []
    yield names
    for name in names:
        if mlc_lab.get_global_func(name, allow_missing=True) is not None:
            remove_global_func(name)


# -- DLPack --------------------------------------------------------------------------------------
def test_from_dlpack_shares_memory_with_a_torch_tensor():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    a = nd.from_dlpack(t)
    assert (a.shape, a.dtype) == ((3, 4), "float32")
    t[1, 2] = -5.0
    assert a.numpy()[1, 2] == -5.0
    a.copyfrom(np.full((3, 4), 2.5, "float32"))
    assert torch.all(t == 2.5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64])
def test_from_dlpack_keeps_the_dtype(dtype):
    t = torch.arange(5).to(dtype)
    a = mlc_lab.nd.from_dlpack(t)
    assert a.dtype == str(dtype).replace("torch.", "")
    np.testing.assert_array_equal(a.numpy(), t.numpy())


def test_from_dlpack_takes_a_capsule():
    t = torch.linspace(0, 1, 6)
    a = nd.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    t[0] = 9.0
    assert a.numpy()[0] == 9.0


def test_from_dlpack_refuses_a_strided_view_and_says_what_to_pass():
    t = torch.ones(4, 3).T
    with pytest.raises(ValueError, match=r"contiguous\(\)"):
        nd.from_dlpack(t)
    assert nd.from_dlpack(t.contiguous()).shape == (3, 4)


def test_from_dlpack_refuses_other_objects():
    with pytest.raises(TypeError, match="__dlpack__"):
        nd.from_dlpack([1.0, 2.0])


def test_torch_views_an_ndarray_both_ways():
    a = nd.array(RNG.random((2, 5)).astype("float32"))
    t = torch.from_dlpack(a)
    t.mul_(2)
    u = torch.utils.dlpack.from_dlpack(a.to_dlpack())
    np.testing.assert_array_equal(u.numpy(), a.numpy())
    np.testing.assert_array_equal(t.numpy(), a.numpy())
    u[0, 0] = 100.0
    assert a.numpy()[0, 0] == 100.0 and t[0, 0].item() == 100.0


def test_compiled_code_writes_into_torch_memory():
    @T.prim_func
    def scale(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32")):
        for i in range(6):
            with T.block("B"):
                vi = T.axis.spatial(6, i)
                B[vi] = A[vi] * T.float32(3)

    x, y = torch.arange(6, dtype=torch.float32), torch.zeros(6)
    mlc_lab.build(scale, target="llvm")(nd.from_dlpack(x), nd.from_dlpack(y))
    np.testing.assert_allclose(y.numpy(), 3 * np.arange(6))


# -- torch-backed packed functions ----------------------------------------------------------------
def _register_torch_kernels(names):
    """A dense layer and a clamp-at-zero written with torch ops, writing into the output they
    are given (destination-passing style)."""
    @mlc_lab.register_func("demo.dense", override=True)
    def dense(x, w, b, out):
        assert isinstance(x, nd.NDArray) and isinstance(out, nd.NDArray)
        out_t = torch.from_dlpack(out)
        torch.mm(torch.from_dlpack(x), torch.from_dlpack(w).T, out=out_t)
        out_t.add_(torch.from_dlpack(b))

    @mlc_lab.register_func("demo.clamp0", override=True)
    def clamp0(x, out):
        torch.clamp(torch.from_dlpack(x), min=0.0, out=torch.from_dlpack(out))

    names += ["demo.dense", "demo.clamp0"]


@I.ir_module
class TorchBacked:
    @T.prim_func
    def halve(X: T.Buffer((2, 6), "float32"), Y: T.Buffer((2, 6), "float32")):
        for i, j in T.grid(2, 6):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = X[vi, vj] * T.float32(0.5)

    @R.function
    def main(x: R.Tensor((2, 8), "float32"), w: R.Tensor((6, 8), "float32"),
             b: R.Tensor((6,), "float32")):
        cls = TorchBacked
        with R.dataflow():
            h = R.call_dps_packed("demo.dense", (x, w, b), out_sinfo=R.Tensor((2, 6), "float32"))
            r = R.call_dps_packed("demo.clamp0", (h,), R.Tensor((2, 6), "float32"))
            out = R.call_tir(cls.halve, (r,), out_sinfo=R.Tensor((2, 6), "float32"))
            R.output(out)
        return out


def test_call_dps_packed_runs_torch_functions_next_to_tir(packed_names):
    _register_torch_kernels(packed_names)
    x, w, b = (RNG.standard_normal(s).astype("float32") for s in ((2, 8), (6, 8), (6,)))
    got = run_vm(TorchBacked, x, w, b).numpy()
    np.testing.assert_allclose(got, np.maximum(x @ w.T + b, 0) * 0.5, rtol=1e-5, atol=1e-6)


def test_override_replaces_a_registered_function(packed_names):
    _register_torch_kernels(packed_names)

    @mlc_lab.register_func("demo.clamp0", override=True)
    def clamp_to_one(x, out):
        torch.clamp(torch.from_dlpack(x), min=1.0, out=torch.from_dlpack(out))

    x, w, b = (RNG.standard_normal(s).astype("float32") for s in ((2, 8), (6, 8), (6,)))
    got = run_vm(TorchBacked, x, w, b).numpy()
    np.testing.assert_allclose(got, np.maximum(x @ w.T + b, 1) * 0.5, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="override=True"):
        mlc_lab.register_func("demo.clamp0", lambda x, out: None)


def test_relax_call_dps_packed_from_block_builder(packed_names):
    """relax.call_dps_packed with a name or a relax.ExternFunc, emitted through BlockBuilder."""
    _register_torch_kernels(packed_names)
    x = relax.Var("x", relax.TensorStructInfo((3, 4), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((5, 4), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((5,), "float32"))
    out_sinfo = relax.TensorStructInfo((3, 5), "float32")
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            h = bb.emit(relax.call_dps_packed("demo.dense", [x, w, b], out_sinfo))
            r = bb.emit(relax.op.call_dps_packed(relax.ExternFunc("demo.clamp0"), [h], out_sinfo))
            gv = bb.emit_output(r)
        bb.emit_func_output(gv)
    mod = bb.get()
    assert "R.call_dps_packed(\"demo.clamp0\"" in mod.script()
    xs, ws, bs = (RNG.standard_normal(s).astype("float32") for s in ((3, 4), (5, 4), (5,)))
    np.testing.assert_allclose(run_vm(mod, xs, ws, bs).numpy(), np.maximum(xs @ ws.T + bs, 0),
                               rtol=1e-5, atol=1e-6)


def test_call_packed_returns_what_the_torch_function_returns(packed_names):
    @mlc_lab.register_func("demo.softplus", override=True)
    def softplus(x):
        return nd.from_dlpack(torch.nn.functional.softplus(torch.from_dlpack(x)))
    packed_names.append("demo.softplus")

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            y = R.call_packed("demo.softplus", x, sinfo_args=(R.Tensor((4,), "float32"),))
            return y

    xs = RNG.standard_normal(4).astype("float32")
    np.testing.assert_allclose(run_vm(Module, xs).numpy(), np.log1p(np.exp(xs)), rtol=1e-5)


def test_a_dps_function_that_returns_its_result_is_reported(packed_names):
    @mlc_lab.register_func("demo.returns", override=True)
    def returns(x, out):
        return torch.from_dlpack(x) + 1
    packed_names.append("demo.returns")

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((3,), "float32")):
            with R.dataflow():
                y = R.call_dps_packed("demo.returns", (x,), out_sinfo=R.Tensor((3,), "float32"))
                R.output(y)
            return y

    with pytest.raises(TypeError, match="write its result into the output"):
        run_vm(Module, np.zeros(3, "float32"))


# -- from_fx ----------------------------------------------------------------------------------------
class Perceptron(torch.nn.Module):
    """Weights held as nn.Parameter and combined with torch functions."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(20, 12))
        self.shift = torch.nn.Parameter(torch.randn(12))

    def forward(self, x):
        return torch.relu(torch.add(torch.matmul(x, self.weight), self.shift))


class TwoLayer(torch.nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.fc_in = torch.nn.Linear(30, 16, bias=bias)
        self.act = torch.nn.ReLU()
        self.fc_out = torch.nn.Linear(16, 5, bias=bias)

    def forward(self, x):
        return self.fc_out(self.act(self.fc_in(x)))


@pytest.mark.parametrize("model, shape", [(Perceptron(), (3, 20)), (TwoLayer(), (2, 30)),
                                          (TwoLayer(bias=False), (1, 30))])
def test_library_from_fx_matches_torch(model, shape):
    x = torch.randn(*shape)
    mod = from_fx(fx.symbolic_trace(model), [(shape, "float32")])
    np.testing.assert_allclose(run_vm(mod, x.numpy()).numpy(), model(x).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_library_from_fx_keeps_parameters_as_inputs():
    model = TwoLayer()
    mod, params = from_fx(fx.symbolic_trace(model), [((4, 30), "float32")], keep_params_as_input=True)
    assert [p.name_hint for p in mod["main"].params][:2] == ["x", "fc_in_weight"]
    x = torch.randn(4, 30)
    got = run_vm(mod, x.numpy(), *params.values()).numpy()
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


# A translator written by hand, the way the chapter teaches it: walk the fx graph, map each
# node with a user-supplied converter, and emit TE-defined kernels through a BlockBuilder.
def te_matmul(a: te.Tensor, b: te.Tensor) -> te.Tensor:
    k = te.reduce_axis((0, a.shape[1]), name="k")
    return te.compute((a.shape[0], b.shape[1]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k),
                      name="matmul")


def te_relu(a: te.Tensor) -> te.Tensor:
    return te.compute(a.shape, lambda *i: te.max(a(*i), 0), name="relu")


def as_constant(param) -> relax.Constant:
    return relax.const(param.detach().cpu().numpy(), "float32")


def translate(graph_module, input_shapes, function_map, module_map):
    modules = dict(graph_module.named_modules())
    values, inputs = {}, []
    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            for node in graph_module.graph.nodes:
                if node.op == "placeholder":
                    var = relax.Var(node.target, relax.TensorStructInfo(input_shapes[len(inputs)], "float32"))
                    inputs.append(var)
                    values[node] = var
                elif node.op == "get_attr":
                    values[node] = as_constant(operator.attrgetter(node.target)(graph_module))
                elif node.op == "call_function":
                    values[node] = function_map[node.target](bb, values, node)
                elif node.op == "call_module":
                    module = modules[node.target]
                    values[node] = module_map[type(module)](bb, values, node, module)
                elif node.op == "output":
                    result = bb.emit_output(values[node.args[0]])
        bb.emit_func_output(result, inputs)
    return bb.get()


def te_functions():
    return {torch.matmul: lambda bb, v, n: bb.emit_te(te_matmul, v[n.args[0]], v[n.args[1]]),
            torch.add: lambda bb, v, n: bb.emit_te(topi.add, v[n.args[0]], v[n.args[1]]),
            torch.relu: lambda bb, v, n: bb.emit_te(te_relu, v[n.args[0]])}


def linear_with_topi(bb, values, node, module):
    y = bb.emit_te(topi.nn.dense, values[node.args[0]], as_constant(module.weight))
    return bb.emit_te(topi.add, y, as_constant(module.bias))


def test_hand_written_translator_with_te_kernels():
    model = Perceptron()
    mod = translate(fx.symbolic_trace(model), [(2, 20)], te_functions(), {})
    names = {gv.name_hint for gv in mod.functions}
    assert {"main", "te_matmul", "add", "te_relu"} <= names
    x = torch.randn(2, 20)
    np.testing.assert_allclose(run_vm(mod, x.numpy()).numpy(), model(x).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_hand_written_translator_with_topi_dense_and_high_level_ops():
    model = TwoLayer()
    relu = lambda bb, v, n, m: bb.emit_te(te_relu, v[n.args[0]])  # noqa: E731
    low = translate(fx.symbolic_trace(model), [(1, 30)], {},
                    {torch.nn.Linear: linear_with_topi, torch.nn.ReLU: relu})
    high = translate(
        fx.symbolic_trace(model), [(1, 30)], {},
        {torch.nn.Linear: lambda bb, v, n, m: bb.emit(relax.op.linear(v[n.args[0]], as_constant(m.weight),
                                                                      as_constant(m.bias))),
         torch.nn.ReLU: lambda bb, v, n, m: bb.emit(relax.op.nn.relu(v[n.args[0]]))})
    assert any(isinstance(f, mlc_lab.tir.PrimFunc) for f in low.functions.values())
    assert not any(isinstance(f, mlc_lab.tir.PrimFunc) for f in high.functions.values())
    x = torch.randn(1, 30)
    want = model(x).detach().numpy()
    for mod in (low, high):
        np.testing.assert_allclose(run_vm(mod, x.numpy()).numpy(), want, rtol=1e-5, atol=1e-5)


def test_te_shape_checks_in_user_kernels_see_equal_constants():
    """Kernels written for the chapter assert ``A.shape[1] == B.shape[0]``: equal constant
    dimensions compare equal, different ones do not."""
    a = te.placeholder((8, 16), name="a")
    b = te.placeholder((16, 4), name="b")
    assert a.shape[1] == b.shape[0]
    assert not (a.shape[0] == b.shape[0])
    assert a.shape[0] != b.shape[1]


def test_func_output_may_name_the_dataflow_value_that_was_exported():
    """Translators written for TVM pass the value they gave to emit_output on to
    emit_func_output; the function then returns the exported variable."""
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            y = bb.emit_te(te_relu, x)
            exported = bb.emit_output(y)
        assert bb.emit_func_output(y, [x]) is exported
    mod = bb.get()
    assert mod["main"].body.body is exported
    xs = RNG.standard_normal((2, 3)).astype("float32")
    np.testing.assert_array_equal(run_vm(mod, xs).numpy(), np.maximum(xs, 0))

    with pytest.raises(relax.BlockBuilderError, match="emit_output"):   # one never exported
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit_te(te_relu, x)
                bb.emit_output(bb.emit_te(te_relu, y))
            bb.emit_func_output(y)
