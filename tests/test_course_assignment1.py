"""End-to-end model execution as assignment 1 asks for it, in both eras of the API.

A small CNN (conv2d + bias, relu, 2x2 max pooling, flatten, two dense layers, softmax) is built
with ``BlockBuilder.emit_te`` over topi operators, once with the 2022 spellings
(``relax.Var(name, shape, relax.DynTensorType(...))``, ``relax.call_tir(name, args, shape,
dtype=...)`` for a registered function, ``relax.vm.build``) and once with today's; its conv2d
PrimFunc is then scheduled inside the module. Inputs are the scikit-learn digits (8x8 images,
bundled with the library), weights are random; every result is checked against numpy.
"""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.datasets import load_digits

import mlc_lab
import mlc_lab.testing
from mlc_lab import relax, te, tir, topi
from mlc_lab.ir import structural_equal

RNG = np.random.default_rng(11)
BATCH = 4
IMAGES = (load_digits().images[:BATCH, None] / 16.0).astype("float32")     # (4, 1, 8, 8)
PARAMS = {
    "conv_w": (RNG.standard_normal((6, 1, 3, 3)) * 0.5).astype("float32"),
    "conv_b": (RNG.standard_normal((1, 6, 1, 1)) * 0.1).astype("float32"),
    "fc0_w": (RNG.standard_normal((20, 54)) * 0.3).astype("float32"),
    "fc0_b": (RNG.standard_normal((1, 20)) * 0.1).astype("float32"),
    "fc1_w": (RNG.standard_normal((10, 20)) * 0.3).astype("float32"),
    "fc1_b": (RNG.standard_normal((1, 10)) * 0.1).astype("float32"),
}


def numpy_conv(images, kernels):
    windows = sliding_window_view(images, kernels.shape[2:], axis=(2, 3))   # n c y x ky kx
    return np.einsum("ncyxij,fcij->nfyx", windows, kernels)


def numpy_cnn(images):
    p = PARAMS
    h = np.maximum(numpy_conv(images, p["conv_w"]) + p["conv_b"], 0)
    n, c, hh, ww = h.shape
    h = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5)).reshape(n, -1)
    h = np.maximum(h @ p["fc0_w"].T + p["fc0_b"], 0)
    logits = h @ p["fc1_w"].T + p["fc1_b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(mod, *args, build=relax.build):
    vm = relax.VirtualMachine(build(mod, "llvm"), mlc_lab.cpu())
    return vm["main"](*[mlc_lab.nd.array(a, mlc_lab.cpu()) for a in args]).numpy()


def input_var(era, shape=(BATCH, 1, 8, 8)):
    if era == "2022":
        return relax.Var("x", shape, relax.DynTensorType(len(shape), "float32"))
    return relax.Var("x", relax.TensorStructInfo(shape, "float32"))


def constants(era):
    if era == "2022":
        return {k: relax.const(v, "float32") for k, v in PARAMS.items()}
    return {k: relax.const(v) for k, v in PARAMS.items()}


def emit_rest_of_cnn(bb, h, c):
    """Everything after the convolution: bias, relu, pooling, flatten, dense layers, softmax."""
    h = bb.emit_te(topi.add, h, c["conv_b"])
    h = bb.emit_te(topi.nn.relu, h)
    h = bb.emit_te(topi.nn.pool2d, h, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], "max")
    h = bb.emit_te(topi.nn.flatten, h)
    h = bb.emit_te(topi.nn.dense, h, c["fc0_w"])
    h = bb.emit_te(topi.add, h, c["fc0_b"])
    h = bb.emit_te(topi.nn.relu, h)
    h = bb.emit_te(topi.nn.dense, h, c["fc1_w"])
    h = bb.emit_te(topi.add, h, c["fc1_b"])
    return bb.emit_output(bb.call_te(topi.nn.softmax, h, axis=1))


def cnn_via_emit_te(era):
    bb = relax.BlockBuilder()
    x, c = input_var(era), constants(era)
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit_te(topi.nn.conv2d, x, c["conv_w"], 1, 0, 1)
            gv = emit_rest_of_cnn(bb, h, c)
        bb.emit_func_output(gv)
    return bb.get()


# -- emit_te on a hand-written tensor expression ------------------------------------------------
def clamp_below(a):
    return te.compute(a.shape, lambda i, j: te.max(a[i, j], 0), name="clamped")


@pytest.mark.parametrize("era", ["2022", "today"])
def test_emit_te_makes_a_prim_func_and_a_call_tir(era):
    bb = relax.BlockBuilder()
    x = input_var(era, (6, 5))
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(bb.emit_te(clamp_below, x))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert isinstance(mod["clamp_below"], tir.PrimFunc)
    assert "R.call_tir(cls.clamp_below, (x,), out_sinfo=R.Tensor((6, 5), dtype=\"float32\"))" in mod.script()
    data = RNG.standard_normal((6, 5)).astype("float32")
    np.testing.assert_array_equal(run(mod, data), np.maximum(data, 0))


# -- the whole model -----------------------------------------------------------------------------
def test_cnn_via_emit_te_2022_and_today_agree_with_numpy():
    old, new = cnn_via_emit_te("2022"), cnn_via_emit_te("today")
    assert structural_equal(old, new)
    expected = numpy_cnn(IMAGES)
    mlc_lab.testing.assert_allclose(run(old, IMAGES, build=relax.vm.build), expected, rtol=1e-4, atol=1e-6)
    mlc_lab.testing.assert_allclose(run(new, IMAGES), expected, rtol=1e-4, atol=1e-6)


def test_cnn_matches_torch_model():
    torch = pytest.importorskip("torch")
    layers = torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, (3, 3)), torch.nn.ReLU(), torch.nn.MaxPool2d((2, 2)), torch.nn.Flatten(),
        torch.nn.Linear(54, 20), torch.nn.ReLU(), torch.nn.Linear(20, 10), torch.nn.Softmax(dim=1))
    weights = [PARAMS["conv_w"], PARAMS["conv_b"].reshape(6), PARAMS["fc0_w"], PARAMS["fc0_b"].reshape(20),
               PARAMS["fc1_w"], PARAMS["fc1_b"].reshape(10)]
    for param, value in zip(layers.parameters(), weights):
        param.data = torch.from_numpy(value)
    with torch.no_grad():
        expected = layers(torch.from_numpy(IMAGES)).numpy()
    vm = relax.VirtualMachine(relax.vm.build(cnn_via_emit_te("2022"), "llvm"), mlc_lab.cpu())
    # The course passes the torch tensor itself to nd.array.
    out = vm["main"](mlc_lab.nd.array(torch.from_numpy(IMAGES), mlc_lab.cpu())).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)


# -- a registered (vendor) convolution -----------------------------------------------------------
@mlc_lab.register_func("course.numpy_conv2d", override=True)
def _numpy_conv2d(images, kernels, out):
    out.copyfrom(numpy_conv(images.numpy(), kernels.numpy()).astype("float32"))


@pytest.mark.parametrize("era", ["2022", "today"])
def test_registered_conv_in_the_model(era):
    bb = relax.BlockBuilder()
    x, c = input_var(era), constants(era)
    conv_shape = (BATCH, 6, 6, 6)
    with bb.function("main", [x]):
        with bb.dataflow():
            if era == "2022":
                conv = relax.call_tir("course.numpy_conv2d", (x, c["conv_w"]), conv_shape, dtype="float32")
            else:
                conv = relax.op.call_dps_packed("course.numpy_conv2d", (x, c["conv_w"]),
                                                relax.TensorStructInfo(conv_shape, "float32"))
            gv = emit_rest_of_cnn(bb, bb.emit(conv), c)
        bb.emit_func_output(gv)
    mod = bb.get()
    assert 'R.call_dps_packed("course.numpy_conv2d"' in mod.script()
    assert "conv2d" not in [gv.name_hint for gv in mod.functions]
    np.testing.assert_allclose(run(mod, IMAGES), numpy_cnn(IMAGES), rtol=1e-4, atol=1e-6)


# -- scheduling the convolution inside the model ------------------------------------------------
def test_schedule_conv2d_inside_the_model():
    mod = cnn_via_emit_te("2022")
    sch = tir.Schedule(mod)
    block = sch.get_block("conv2d_nchw", func_name="conv2d")
    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    f0, f1 = sch.split(f, factors=[None, 2])
    y0, y1 = sch.split(y, factors=[None, 2])
    x0, x1 = sch.split(x, factors=[3, 2])
    sch.reorder(n, f0, y0, x0, rc, ry, rx, f1, y1, x1)
    sch.parallel(sch.fuse(n, f0, y0, x0))
    sch.unroll(f1)
    sch.vectorize(sch.fuse(y1, x1))
    sch.decompose_reduction(block, rc)
    scheduled = sch.mod
    conv = scheduled["conv2d"]
    assert "conv2d_nchw_init" in conv.script() and "T.parallel" in conv.script()
    assert isinstance(scheduled["main"], relax.Function)
    np.testing.assert_allclose(run(scheduled, IMAGES), numpy_cnn(IMAGES), rtol=1e-4, atol=1e-6)
