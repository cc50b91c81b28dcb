"""Frontends: the numpy model builder, from_sklearn and from_fx. Each module is evaluated by a
small numpy walker over its high-level ops (written independently of the layers' own numpy code)
and compared with the model's reference: forward_numpy, predict/predict_proba, or torch."""
import functools
import operator
import warnings

import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.frontend import from_fx, from_sklearn, nn

try:
    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier, MLPRegressor
except ImportError:
    MLPClassifier = None
needs_sklearn = pytest.mark.skipif(MLPClassifier is None, reason="scikit-learn is not installed")
needs_vm = pytest.mark.skipif(not hasattr(relax, "VirtualMachine"), reason="no relax VirtualMachine")

RNG = np.random.default_rng(0)


# -- a reference evaluator of high-level relax ops (a test helper) ----------------------------
def _shifted_windows(x, padding, size, strides, fill):
    """For each kernel offset (i, j), the padded input sampled at that offset of every window."""
    top, left, bottom, right = padding
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill)
    oh, ow = ((x.shape[2 + a] - size[a]) // strides[a] + 1 for a in (0, 1))
    for i in range(size[0]):
        for j in range(size[1]):
            yield i, j, x[:, :, i:i + strides[0] * (oh - 1) + 1:strides[0],
                          j:j + strides[1] * (ow - 1) + 1:strides[1]]


def _conv2d(attrs, x, w):
    assert attrs.groups == 1 and tuple(attrs.dilation) == (1, 1)
    return sum(np.einsum("nchw,oc->nohw", s, w[:, :, i, j])
               for i, j, s in _shifted_windows(x, attrs.padding, w.shape[2:], attrs.strides, 0))


def _max_pool2d(attrs, x):
    assert tuple(attrs.dilation) == (1, 1) and not attrs.ceil_mode
    windows = _shifted_windows(x, attrs.padding, attrs.pool_size, attrs.strides, -np.inf)
    return functools.reduce(np.maximum, (s for _, _, s in windows))


def _softmax(attrs, x):
    e = np.exp(x - x.max(axis=attrs.axis, keepdims=True))
    return e / e.sum(axis=attrs.axis, keepdims=True)


OPS = {
    "relax.matmul": lambda attrs, a, b: a @ b,
    "relax.add": lambda attrs, a, b: a + b,
    "relax.subtract": lambda attrs, a, b: a - b,
    "relax.multiply": lambda attrs, a, b: a * b,
    "relax.nn.relu": lambda attrs, x: np.maximum(x, 0),
    "relax.tanh": lambda attrs, x: np.tanh(x),
    "relax.sigmoid": lambda attrs, x: 1 / (1 + np.exp(-x)),
    "relax.permute_dims": lambda attrs, x: np.transpose(x, attrs.axes),
    "relax.nn.softmax": _softmax,
    "relax.nn.conv2d": _conv2d,
    "relax.nn.max_pool2d": _max_pool2d,
    "relax.flatten": lambda attrs, x: x.reshape(x.shape[0], -1),
    "relax.reshape": lambda attrs, x, shape: x.reshape(shape),
}


def evaluate(mod, *args, func_name="main"):
    """Run ``mod[func_name]`` on numpy arrays, binding by binding, with numpy for each op."""
    func = mod[func_name]
    env = {id(p): np.asarray(a) for p, a in zip(func.params, args, strict=True)}

    def value(expr):
        if isinstance(expr, relax.Constant):
            return expr.data
        if isinstance(expr, relax.Var):
            return env[id(expr)]
        if isinstance(expr, relax.ShapeExpr):
            return tuple(int(d.value) for d in expr.values)
        if isinstance(expr, relax.Tuple):
            return tuple(value(e) for e in expr.elements)
        assert isinstance(expr, relax.Call) and isinstance(expr.op, relax.Op), expr
        return OPS[expr.op.name](expr.attrs, *(value(a) for a in expr.args))

    for block in func.body.blocks:
        for binding in block.bindings:
            env[id(binding.var)] = value(binding.value)
    return value(func.body.body)


def op_names(mod, func_name="main"):
    return [b.value.op.name for block in mod[func_name].body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call)]


def ret_shape(mod, func_name="main"):
    return mod[func_name].ret_struct_info.static_shape


# -- the numpy model builder -------------------------------------------------------------------
def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10, seed=1), nn.Softmax())


def cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10, seed=1))


def test_builder_mlp_structure_and_numerics():
    model = mlp()
    mod = model.to_relax((4, 20))
    func = mod["main"]
    assert [p.name_hint for p in func.params] == ["x"]
    assert ret_shape(mod) == (4, 10) and func.ret_struct_info.dtype == "float32"
    assert op_names(mod) == ["relax.permute_dims", "relax.matmul", "relax.add", "relax.nn.relu",
                             "relax.permute_dims", "relax.matmul", "relax.add", "relax.nn.softmax"]
    x = RNG.standard_normal((4, 20)).astype("float32")
    expected = model.forward_numpy(x)
    np.testing.assert_allclose(evaluate(mod, x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(expected.sum(axis=1), 1, rtol=1e-5)


def test_builder_cnn_structure_and_numerics():
    model = cnn()
    mod = model.to_relax((2, 3, 8, 8))
    shapes = [b.var.struct_info.static_shape for b in mod["main"].body.blocks[0].bindings]
    assert shapes[:5] == [(2, 8, 8, 8), (1, 8, 1, 1), (2, 8, 8, 8), (2, 8, 8, 8), (2, 8, 4, 4)]
    assert ret_shape(mod) == (2, 10)
    assert "relax.nn.conv2d" in op_names(mod) and "relax.flatten" in op_names(mod)
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    np.testing.assert_allclose(evaluate(mod, x), model.forward_numpy(x), rtol=1e-4, atol=1e-5)


def test_builder_strided_conv_and_padded_pool():
    model = nn.Sequential(nn.Conv2d(2, 4, (3, 2), stride=2, padding=(1, 0)), nn.MaxPool2d(3, 1, 1))
    mod = model.to_relax((1, 2, 9, 7))
    x = RNG.standard_normal((1, 2, 9, 7)).astype("float32")
    expected = model.forward_numpy(x)
    assert ret_shape(mod) == expected.shape == (1, 4, 5, 3)
    np.testing.assert_allclose(evaluate(mod, x), expected, rtol=1e-5, atol=1e-6)


def test_builder_keeps_weights_as_parameters():
    model = cnn()
    mod, params = model.to_relax((2, 3, 8, 8), keep_params_in_input=True)
    names = ["conv2d0_weight", "conv2d0_bias", "linear4_weight", "linear4_bias"]
    assert [p.name_hint for p in mod["main"].params] == ["x"] + names
    assert list(params) == names == list(model.parameters())
    assert not any(isinstance(b.value, relax.Constant) for b in mod["main"].body.blocks[0].bindings)
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    np.testing.assert_allclose(evaluate(mod, x, *params.values()), model.forward_numpy(x),
                               rtol=1e-4, atol=1e-5)


def test_builder_given_weights_and_errors():
    w, b = np.arange(6, dtype="float32").reshape(3, 2), np.ones(3, "float32")
    layer = nn.Linear(2, 3, weight=w, bias=b)
    np.testing.assert_array_equal(layer(np.array([[1.0, 2.0]], "float32")), [[3, 9, 15]])
    assert ret_shape(layer.to_relax((5, 2), name="linear"), "linear") == (5, 3)
    with pytest.raises(ValueError, match=r"Linear: weight must have shape \(3, 2\)"):
        nn.Linear(2, 3, weight=w.T)
    with pytest.raises(TypeError, match="layer 1 must be an nn layer"):
        nn.Sequential(nn.ReLU(), lambda x: x)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        nn.Sequential(nn.Linear(4, 8), nn.Linear(9, 2)).to_relax((1, 4))


@needs_vm
def test_builder_cnn_runs_on_the_vm():
    model = cnn()
    x = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
    vm = relax.VirtualMachine(relax.build(model.to_relax(x.shape), "llvm"), mlc_lab.cpu())
    np.testing.assert_allclose(vm["main"](x).numpy(), model.forward_numpy(x), rtol=1e-4, atol=1e-5)


# -- from_sklearn ----------------------------------------------------------------------------
def fit_quietly(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.fixture(scope="module")
def digits():
    if MLPClassifier is None:
        pytest.skip("scikit-learn is not installed")
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype("float32")
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    model = fit_quietly(MLPClassifier(hidden_layer_sizes=(64,), max_iter=30, random_state=0),
                        X_train, y_train)
    return model, X_test


@needs_sklearn
def test_sklearn_digits_predictions_match(digits):
    model, X_test = digits
    mod = from_sklearn(model, batch_size=len(X_test))
    assert mod["main"].params[0].struct_info.static_shape == (len(X_test), 64)
    assert ret_shape(mod) == (len(X_test), 10)
    assert op_names(mod) == ["relax.matmul", "relax.add", "relax.nn.relu", "relax.matmul",
                             "relax.add", "relax.nn.softmax"]
    scores = evaluate(mod, X_test)
    np.testing.assert_array_equal(model.classes_[scores.argmax(axis=1)], model.predict(X_test))
    np.testing.assert_allclose(scores, model.predict_proba(X_test), atol=1e-5)


@needs_sklearn
def test_sklearn_keep_params_and_symbolic_batch(digits):
    model, X_test = digits
    n = tir.Var("n", "int64")
    mod, params = from_sklearn(model, batch_size=n, keep_params_in_input=True)
    assert [p.name_hint for p in mod["main"].params] == ["x", "layer0_weight", "layer0_bias",
                                                         "layer1_weight", "layer1_bias"]
    assert mod["main"].ret_struct_info.shape[0] is n
    assert all(a.dtype == np.float32 for a in params.values())
    scores = evaluate(mod, X_test[:7], *params.values())
    np.testing.assert_array_equal(model.classes_[scores.argmax(axis=1)], model.predict(X_test[:7]))


@needs_sklearn
@pytest.mark.parametrize("activation", ["tanh", "logistic", "identity"])
def test_sklearn_binary_classifier_and_other_activations(activation):
    X = RNG.standard_normal((200, 5)).astype("float32")
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, "yes", "no")
    model = fit_quietly(MLPClassifier(hidden_layer_sizes=(8, 6), activation=activation, max_iter=200,
                                      random_state=0), X, y)
    mod = from_sklearn(model, batch_size=len(X))
    assert ret_shape(mod) == (len(X), 2)
    scores = evaluate(mod, X)
    np.testing.assert_array_equal(model.classes_[scores.argmax(axis=1)], model.predict(X))
    np.testing.assert_allclose(scores, model.predict_proba(X), atol=1e-5)


@needs_sklearn
def test_sklearn_regressor():
    X = RNG.standard_normal((100, 3)).astype("float32")
    y = np.stack([X.sum(axis=1), X[:, 0] ** 2], axis=1)
    model = fit_quietly(MLPRegressor(hidden_layer_sizes=(16,), max_iter=100, random_state=0), X, y)
    mod = from_sklearn(model, batch_size=100)
    assert op_names(mod)[-1] == "relax.add"
    np.testing.assert_allclose(evaluate(mod, X), model.predict(X), rtol=1e-4, atol=1e-5)


@needs_sklearn
def test_sklearn_errors():
    with pytest.raises(TypeError, match="LogisticRegression is not supported; supported: "
                                        "sklearn.neural_network.MLPClassifier"):
        from_sklearn(LogisticRegression())
    with pytest.raises(ValueError, match="not fitted yet"):
        from_sklearn(MLPClassifier())
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        tiny = fit_quietly(MLPRegressor(hidden_layer_sizes=(2,), max_iter=2), np.ones((4, 2)), np.ones(4))
        from_sklearn(tiny, batch_size=0)


@needs_vm
def test_sklearn_module_runs_on_the_vm(digits):
    model, X_test = digits
    vm = relax.VirtualMachine(relax.build(from_sklearn(model, batch_size=len(X_test)), "llvm"),
                              mlc_lab.cpu())
    scores = vm["main"](mlc_lab.nd.array(X_test)).numpy()
    np.testing.assert_array_equal(model.classes_[scores.argmax(axis=1)], model.predict(X_test))
    np.testing.assert_allclose(scores, model.predict_proba(X_test), atol=1e-5)


# -- from_fx ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def run_torch(torch, model, *arrays):
    with torch.no_grad():
        return model(*(torch.from_numpy(a) for a in arrays)).numpy()


def test_fx_mlp_of_modules(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4),
                                torch.nn.Softmax(dim=1)).eval()
    mod = from_fx(torch.fx.symbolic_trace(model), [((3, 16), "float32")])
    assert ret_shape(mod) == (3, 4)
    x = RNG.standard_normal((3, 16)).astype("float32")
    np.testing.assert_allclose(evaluate(mod, x), run_torch(torch, model, x), rtol=1e-5, atol=1e-6)


class Net:
    """A CNN mixing modules, functions, methods, a get_attr parameter and Python scalars."""

    @staticmethod
    def make(torch):
        class CNN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
                self.pool = torch.nn.MaxPool2d(2)
                self.flat = torch.nn.Flatten()
                self.fc = torch.nn.Linear(4 * 4 * 4, 10)
                self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 10))

            def forward(self, x, y):
                h = self.pool(torch.relu(self.conv(x)))
                a = self.fc(self.flat(h))
                b = h.view(h.size(0), -1) @ self.fc.weight.T
                c = torch.flatten(torch.nn.functional.relu(a + b), 1) * self.scale + 1.0
                return torch.nn.functional.softmax(c.reshape(-1, 10) + torch.matmul(y @ y.T, y), dim=-1)

        torch.manual_seed(0)
        return CNN().eval()


INPUT_INFO = [((2, 1, 8, 8), "float32"), ((2, 10), "float32")]


def test_fx_cnn_with_functions_and_methods(torch):
    model = Net.make(torch)
    mod = from_fx(torch.fx.symbolic_trace(model), INPUT_INFO)
    assert [p.name_hint for p in mod["main"].params] == ["x", "y"]
    assert ret_shape(mod) == (2, 10)
    x = RNG.standard_normal((2, 1, 8, 8)).astype("float32")
    y = RNG.standard_normal((2, 10)).astype("float32")
    np.testing.assert_allclose(evaluate(mod, x, y), run_torch(torch, model, x, y), rtol=1e-5, atol=1e-6)


def test_fx_keeps_params_as_input(torch):
    model = Net.make(torch)
    mod, params = from_fx(model, INPUT_INFO, keep_params_as_input=True)  # traced by from_fx
    assert list(params) == ["conv_weight", "conv_bias", "fc_weight", "fc_bias", "scale"]
    assert [p.name_hint for p in mod["main"].params] == ["x", "y"] + list(params)
    x = RNG.standard_normal((2, 1, 8, 8)).astype("float32")
    y = RNG.standard_normal((2, 10)).astype("float32")
    np.testing.assert_allclose(evaluate(mod, x, y, *params.values()), run_torch(torch, model, x, y),
                               rtol=1e-5, atol=1e-6)


def test_fx_errors(torch):
    class Act(torch.nn.Module):
        def __init__(self, act=None):
            super().__init__()
            self.act = act

        def forward(self, x):
            return torch.sigmoid(x) if self.act is None else self.act(x)

    info = [((2, 3), "float32")]
    with pytest.raises(NotImplementedError, match=r"node 'sigmoid' \(call_function torch.sigmoid\) "
                                                  r"is not supported; supported: .*F.relu"):
        from_fx(Act(), info)
    with pytest.raises(NotImplementedError, match=r"node 'act' \(call_module act "
                                                  r"\(torch.nn.modules.activation.GELU\)\) is not supported"):
        from_fx(Act(torch.nn.GELU()), info)
    with pytest.raises(ValueError, match=r"the graph has 1 input\(s\) \(x\) but input_info describes 2"):
        from_fx(Act(torch.nn.ReLU()), info * 2)
    with pytest.raises(TypeError, match="expected a torch.fx.GraphModule"):
        from_fx(lambda x: x, info)
