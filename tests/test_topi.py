"""topi operators: each one built with te.create_prim_func, run on the reference interpreter and on
LLVM, and compared with numpy; then the errors for bad shapes, dtypes and attributes."""
import re

import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd, te, topi

TARGETS = ["python", "llvm"]
RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32", low=-1.0, high=1.0):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(int(low), int(high), size=shape).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def run(target, inputs, output, arrays, out_shape=None):
    """Build ``inputs -> output`` for ``target``, run it on ``arrays``, return the output array."""
    lib = mlc_lab.build(te.create_prim_func(list(inputs) + [output]), target=target)
    if out_shape is None:
        out_shape = tuple(int(s.value) for s in output.shape)
    out = np.zeros(out_shape, output.dtype)
    result = out if out.ndim == 0 else nd.array(out)   # nd.array turns a 0-d array into 1-d
    lib(*[nd.array(a) for a in arrays], result)
    return out if out.ndim == 0 else result.numpy()


def names_of(inputs, output):
    """The block names of the PrimFunc computing ``output``, in order (the root block left out)."""
    script = te.create_prim_func(list(inputs) + [output]).script()
    return [name for name in re.findall(r'T\.block\("(\w+)"\)', script) if name != "root"]


# ----------------------------------------------------------------------------------------------
# Elementwise
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op, ref", [("add", np.add), ("subtract", np.subtract),
                                     ("multiply", np.multiply), ("divide", np.divide)])
@pytest.mark.parametrize("lhs_shape, rhs_shape", [((4, 1), (1, 3)), ((2, 3, 4), (4,)),
                                                  ((8, 16), (8, 16)), ((5,), (3, 1, 5))])
def test_binary_broadcast(target, op, ref, lhs_shape, rhs_shape):
    A = te.placeholder(lhs_shape, name="A")
    B = te.placeholder(rhs_shape, name="B")
    C = getattr(topi, op)(A, B)
    assert C.name == f"T_{op}"
    a, b = rand(*lhs_shape), rand(*rhs_shape, low=0.5, high=2.0)
    np.testing.assert_allclose(run(target, [A, B], C, [a, b]), ref(a, b), rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_add_multiply_and_scalars(target):
    A = te.placeholder((6, 4), "int32", name="A")
    B = te.placeholder((4,), "int32", name="B")
    a, b = rand(6, 4, dtype="int32", low=-50, high=50), rand(4, dtype="int32", low=-50, high=50)
    np.testing.assert_array_equal(run(target, [A, B], topi.add(A, B), [a, b]), a + b)
    np.testing.assert_array_equal(run(target, [A, B], topi.multiply(A, B), [a, b]), a * b)
    np.testing.assert_array_equal(run(target, [A], topi.subtract(3, A), [a]), 3 - a)
    X = te.placeholder((8,), name="X")
    x = rand(8)
    np.testing.assert_allclose(run(target, [X], topi.multiply(X, 2.5), [x]), x * 2.5, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op, ref", [
    ("relu", lambda x: np.maximum(x, 0)), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    ("tanh", np.tanh), ("exp", np.exp), ("negative", np.negative),
])
def test_unary(target, op, ref):
    X = te.placeholder((4, 8), name="X")
    Y = getattr(topi, op)(X)
    assert Y.name == f"T_{op}" and Y.shape[1].value == 8
    x = rand(4, 8, low=-3, high=3)
    np.testing.assert_allclose(run(target, [X], Y, [x]), ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_relu_on_integers_and_symbolic_batch(target):
    n = te.var("n")
    X = te.placeholder((n, 8), "int32", name="X")
    Y = topi.relu(X)
    x = rand(5, 8, dtype="int32", low=-9, high=9)
    np.testing.assert_array_equal(run(target, [X], Y, [x], out_shape=(5, 8)), np.maximum(x, 0))


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_broadcast_with_a_vector(target):
    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((16,), name="B")
    C = topi.add(A, B)
    assert C.shape[0] is n
    a, b = rand(3, 16), rand(16)
    np.testing.assert_allclose(run(target, [A, B], C, [a, b], out_shape=(3, 16)), a + b)


def test_broadcast_errors_name_both_shapes():
    A = te.placeholder((4, 3), name="A")
    with pytest.raises(ValueError, match=r"shapes \(4, 3\) and \(4,\) do not broadcast"):
        topi.add(A, te.placeholder((4,), name="B"))
    with pytest.raises(TypeError, match=r"A is float32 with shape \(4, 3\), B is int32"):
        topi.multiply(A, te.placeholder((4, 3), "int32", name="B"))
    n, m = te.var("n"), te.var("m")
    with pytest.raises(ValueError, match="dimension n meets m"):
        topi.add(te.placeholder((n,), name="P"), te.placeholder((m,), name="Q"))
    with pytest.raises(TypeError, match="at least one operand"):
        topi.add(1, 2)
    with pytest.raises(TypeError, match="cannot use 0.5 with a int32 tensor"):
        topi.add(te.placeholder((2,), "int32", name="I"), 0.5)


def test_float_only_ops_reject_integers():
    with pytest.raises(TypeError, match="topi.sigmoid: data X must have a float dtype, got int32"):
        topi.sigmoid(te.placeholder((4,), "int32", name="X"))
    with pytest.raises(TypeError, match="must be a te.Tensor"):
        topi.relu(np.zeros(4))


# ----------------------------------------------------------------------------------------------
# dense / matmul
@pytest.mark.parametrize("target", TARGETS)
def test_dense_with_bias_and_symbolic_batch(target):
    n = te.var("n")
    X = te.placeholder((n, 32), name="X")
    W = te.placeholder((16, 32), name="W")
    B = te.placeholder((16,), name="B")
    Y = topi.dense(X, W, B)
    assert names_of([X, W, B], Y) == ["T_matmul_NT", "T_add"]
    x, w, b = rand(6, 32), rand(16, 32), rand(16)
    np.testing.assert_allclose(run(target, [X, W, B], Y, [x, w, b], out_shape=(6, 16)),
                               x @ w.T + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("a_shape, b_shape", [((8, 16), (16, 12)), ((3, 8, 16), (3, 16, 4)),
                                              ((2, 1, 4, 8), (3, 8, 5)), ((16,), (16, 4)),
                                              ((2, 4, 16), (16,))])
def test_matmul_follows_numpy(target, a_shape, b_shape):
    A = te.placeholder(a_shape, name="A")
    B = te.placeholder(b_shape, name="B")
    C = topi.matmul(A, B)
    a, b = rand(*a_shape), rand(*b_shape)
    assert tuple(s.value for s in C.shape) == (a @ b).shape
    np.testing.assert_allclose(run(target, [A, B], C, [a, b]), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_int8_matmul_accumulates_in_int32(target):
    A = te.placeholder((8, 32), "int8", name="A")
    B = te.placeholder((32, 8), "int8", name="B")
    C = topi.matmul(A, B, out_dtype="int32")
    a, b = rand(8, 32, dtype="int8", low=-100, high=100), rand(32, 8, dtype="int8", low=-100, high=100)
    np.testing.assert_array_equal(run(target, [A, B], C, [a, b]),
                                  a.astype("int32") @ b.astype("int32"))


def test_dense_and_matmul_errors():
    X = te.placeholder((4, 32), name="X")
    with pytest.raises(ValueError, match=r"in_dim differs: data X has shape \(4, 32\), weight W "
                                         r"has shape \(16, 8\)"):
        topi.dense(X, te.placeholder((16, 8), name="W"))
    with pytest.raises(ValueError, match=r"weight W must be 2-D \(units, in_dim\)"):
        topi.dense(X, te.placeholder((16, 32, 1), name="W"))
    with pytest.raises(ValueError, match=r"bias B must have shape \(16,\)"):
        topi.dense(X, te.placeholder((16, 32), name="W"), te.placeholder((8,), name="B"))
    with pytest.raises(ValueError, match=r"a A has shape \(4, 32\) \(k=32\) and b B has shape "
                                         r"\(16, 8\) \(k=16\)"):
        topi.matmul(te.placeholder((4, 32), name="A"), te.placeholder((16, 8), name="B"))
    with pytest.raises(ValueError, match="do not broadcast"):
        topi.matmul(te.placeholder((2, 4, 8), name="A"), te.placeholder((3, 8, 4), name="B"))


# ----------------------------------------------------------------------------------------------
# conv2d and pooling
def conv2d_reference(x, w, stride, padding, dilation):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, f, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            rows = i * stride + dilation * np.arange(kh)
            cols = j * stride + dilation * np.arange(kw)
            window = xp[:, :, rows][:, :, :, cols]            # n, c, kh, kw
            out[:, :, i, j] = np.einsum("nckl,fckl->nf", window, w)
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stride, padding, dilation", [(2, 1, 1), (1, 0, 1), (1, 2, 2)])
def test_conv2d_nchw(target, stride, padding, dilation):
    X = te.placeholder((2, 3, 9, 9), name="X")
    W = te.placeholder((4, 3, 3, 3), name="W")
    Y = topi.conv2d_nchw(X, W, stride=stride, padding=padding, dilation=dilation)
    expected_stages = (["pad_temp"] if padding else []) + ["conv2d_nchw"]
    assert names_of([X, W], Y) == expected_stages
    x, w = rand(2, 3, 9, 9), rand(4, 3, 3, 3)
    np.testing.assert_allclose(run(target, [X, W], Y, [x, w]),
                               conv2d_reference(x, w, stride, padding, dilation),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_conv2d_symbolic_batch(target):
    n = te.var("n")
    X = te.placeholder((n, 2, 8, 8), name="X")
    W = te.placeholder((4, 2, 3, 3), name="W")
    Y = topi.nn.conv2d_nchw(X, W, 2, 1)
    x, w = rand(3, 2, 8, 8), rand(4, 2, 3, 3)
    np.testing.assert_allclose(run(target, [X, W], Y, [x, w], out_shape=(3, 4, 4, 4)),
                               conv2d_reference(x, w, 2, 1, 1), rtol=1e-5, atol=1e-5)


def pool_reference(x, size, stride, padding, kind, count_include_pad=True):
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)), constant_values=fill)
    ones = np.pad(np.ones((h, w)), padding)
    oh, ow = (h + 2 * padding - size) // stride + 1, (w + 2 * padding - size) // stride + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            rows, cols = slice(i * stride, i * stride + size), slice(j * stride, j * stride + size)
            window = xp[:, :, rows, cols]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                count = size * size if count_include_pad else ones[rows, cols].sum()
                out[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("size, stride, padding", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool2d(target, size, stride, padding):
    X = te.placeholder((2, 3, 8, 8), name="X")
    Y = topi.max_pool2d(X, size, stride, padding)
    assert names_of([X], Y) == (["pad_temp"] if padding else []) + ["pool_max"]
    x = rand(2, 3, 8, 8, low=-5, high=-1)   # all negative: a zero from padding would win
    np.testing.assert_allclose(run(target, [X], Y, [x]), pool_reference(x, size, stride, padding, "max"))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d(target, count_include_pad):
    X = te.placeholder((2, 3, 8, 8), name="X")
    Y = topi.avg_pool2d(X, 3, 2, 1, count_include_pad=count_include_pad)
    assert names_of([X], Y) == ["pad_temp", "pool_sum", "pool_avg"]
    x = rand(2, 3, 8, 8)
    np.testing.assert_allclose(run(target, [X], Y, [x]),
                               pool_reference(x, 3, 2, 1, "avg", count_include_pad),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_max_pool2d_ceil_mode(target):
    X = te.placeholder((1, 2, 7, 7), name="X")
    Y = topi.max_pool2d(X, 2, 2, ceil_mode=True)
    assert tuple(s.value for s in Y.shape) == (1, 2, 4, 4)
    x = rand(1, 2, 7, 7, low=-5, high=-1)
    padded = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-np.inf)
    expected = padded.reshape(1, 2, 4, 2, 4, 2).max(axis=(3, 5))
    np.testing.assert_allclose(run(target, [X], Y, [x]), expected)


def test_conv_and_pool_errors():
    X = te.placeholder((2, 3, 8, 8), name="X")
    with pytest.raises(ValueError, match=r"in_channel differs: data X has shape \(2, 3, 8, 8\), "
                                         r"kernel W has shape \(4, 5, 3, 3\)"):
        topi.conv2d_nchw(X, te.placeholder((4, 5, 3, 3), name="W"))
    with pytest.raises(ValueError, match=r"data X must be 4-D"):
        topi.conv2d_nchw(te.placeholder((3, 8, 8), name="X"), te.placeholder((4, 3, 3, 3), name="W"))
    with pytest.raises(ValueError, match="stride must be >= 1"):
        topi.conv2d_nchw(X, te.placeholder((4, 3, 3, 3), name="W"), stride=0)
    with pytest.raises(ValueError, match="output height would be"):
        topi.conv2d_nchw(X, te.placeholder((4, 3, 9, 9), name="W"))
    with pytest.raises(TypeError, match="padding must be an int or 2 ints"):
        topi.max_pool2d(X, 2, padding=(1, 1, 1))
    with pytest.raises(ValueError, match="must be smaller than the pool size"):
        topi.max_pool2d(X, 2, padding=2)
    with pytest.raises(ValueError, match="layout 'NHWC' is not supported"):
        topi.max_pool2d(X, 2, layout="NHWC")


# ----------------------------------------------------------------------------------------------
# softmax
@pytest.mark.parametrize("target", TARGETS)
def test_softmax_rows_sum_to_one(target):
    n = te.var("n")
    X = te.placeholder((n, 16), name="X")
    Y = topi.softmax(X)
    assert names_of([X], Y) == ["T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum",
                                "T_softmax_norm"]
    x = rand(5, 16, low=-20, high=20)
    y = run(target, [X], Y, [x], out_shape=(5, 16))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y.sum(axis=-1), np.ones(5), rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_and_log_softmax_over_a_middle_axis(target):
    X = te.placeholder((2, 8, 3), name="X")
    x = rand(2, 8, 3, low=-4, high=4)
    log_e = x - x.max(axis=1, keepdims=True)
    log_expected = log_e - np.log(np.exp(log_e).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(run(target, [X], topi.softmax(X, axis=1), [x]), np.exp(log_expected),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run(target, [X], topi.log_softmax(X, axis=-2), [x]), log_expected,
                               rtol=1e-5, atol=1e-5)


def test_softmax_errors():
    with pytest.raises(ValueError, match=r"axis 2 is out of range for a 2-D tensor of shape \(4, 5\)"):
        topi.softmax(te.placeholder((4, 5), name="X"), axis=2)
    with pytest.raises(TypeError, match="must have a float dtype"):
        topi.softmax(te.placeholder((4, 5), "int32", name="X"))


# ----------------------------------------------------------------------------------------------
# reshape, flatten, transpose, reductions
@pytest.mark.parametrize("target", TARGETS)
def test_reshape_and_flatten(target):
    X = te.placeholder((2, 3, 4, 4), name="X")
    x = rand(2, 3, 4, 4)
    R = topi.reshape(X, (6, -1))
    assert R.name == "T_reshape" and tuple(s.value for s in R.shape) == (6, 16)
    np.testing.assert_array_equal(run(target, [X], R, [x]), x.reshape(6, 16))
    np.testing.assert_array_equal(run(target, [X], topi.reshape(X, (4, 2, 12)), [x]),
                                  x.reshape(4, 2, 12))
    np.testing.assert_array_equal(run(target, [X], topi.flatten(X), [x]), x.reshape(2, 48))


@pytest.mark.parametrize("target", TARGETS)
def test_flatten_symbolic_batch(target):
    n = te.var("n")
    X = te.placeholder((n, 3, 4), name="X")
    Y = topi.flatten(X)
    assert Y.shape[0] is n and Y.shape[1].value == 12
    x = rand(5, 3, 4)
    np.testing.assert_array_equal(run(target, [X], Y, [x], out_shape=(5, 12)), x.reshape(5, 12))


@pytest.mark.parametrize("target", TARGETS)
def test_transpose(target):
    X = te.placeholder((2, 3, 4), name="X")
    x = rand(2, 3, 4)
    Y = topi.transpose(X, (1, 2, 0))
    assert Y.name == "T_transpose"
    np.testing.assert_array_equal(run(target, [X], Y, [x]), x.transpose(1, 2, 0))
    np.testing.assert_array_equal(run(target, [X], topi.permute_dims(X), [x]), x.T)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis, keepdims", [(1, False), ((0, 2), True), (-1, True), (None, False)])
def test_reductions(target, op, axis, keepdims):
    X = te.placeholder((3, 4, 5), name="X")
    Y = getattr(topi, op)(X, axis=axis, keepdims=keepdims)
    x = rand(3, 4, 5)
    expected = getattr(np, op)(x, axis=axis, keepdims=keepdims)
    assert tuple(s.value for s in Y.shape) == expected.shape
    np.testing.assert_allclose(run(target, [X], Y, [x]), expected, rtol=1e-5, atol=1e-6)


def test_reduction_stage_names():
    X = te.placeholder((3, 4), name="X")
    assert names_of([X], topi.sum(X, axis=1)) == ["X_red"]
    assert names_of([X], topi.mean(X, axis=1)) == ["X_red", "T_divide"]


def test_layout_errors():
    X = te.placeholder((2, 3, 4), name="X")
    with pytest.raises(ValueError, match=r"cannot reshape X of shape \(2, 3, 4\) \(24 elements\) "
                                         r"to \(5, 5\) \(25 elements\)"):
        topi.reshape(X, (5, 5))
    with pytest.raises(ValueError, match="cannot infer the -1"):
        topi.reshape(X, (5, -1))
    with pytest.raises(ValueError, match="more than one -1"):
        topi.reshape(X, (-1, -1))
    with pytest.raises(ValueError, match=r"not a permutation"):
        topi.transpose(X, (0, 0, 1))
    with pytest.raises(ValueError, match=r"axis 3 is out of range for a 3-D tensor"):
        topi.sum(X, axis=3)
    with pytest.raises(ValueError, match="repeats an axis"):
        topi.sum(X, axis=(1, -2))


def test_chained_network_verifies():
    n = te.var("n")
    X = te.placeholder((n, 1, 8, 8), name="X")
    W = te.placeholder((4, 1, 3, 3), name="W")
    D = te.placeholder((10, 64), name="D")
    h = topi.max_pool2d(topi.relu(topi.conv2d_nchw(X, W, padding=1)), 2, 2)
    Y = topi.softmax(topi.dense(topi.flatten(h), D))
    func = te.create_prim_func([X, W, D, Y])
    assert mlc_lab.tir.verify(func)
    x, w, d = rand(2, 1, 8, 8), rand(4, 1, 3, 3), rand(10, 64)
    conv = np.maximum(conv2d_reference(x, w, 1, 1, 1), 0)
    logits = conv.reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5)).reshape(2, 64) @ d.T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    for target in TARGETS:
        np.testing.assert_allclose(run(target, [X, W, D], Y, [x, w, d], out_shape=(2, 10)),
                                   e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
