"""Graph-level ops: structure-info inference (static and symbolic shapes) and the errors."""
import pytest

from mlc_lab import relax, tir
from mlc_lab.ir import structural_equal
from mlc_lab.relax import op as R
from mlc_lab.relax.struct_info import dim_value

n = tir.Var("n", "int64")
m = tir.Var("m", "int64")


def t(shape, dtype="float32", name="x"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def shape_of(expr):
    """The inferred shape, static dims as ints and symbolic ones as the dims themselves."""
    sinfo = expr.struct_info
    assert isinstance(sinfo, relax.TensorStructInfo)
    if sinfo.shape is None:
        return None
    return tuple(v if (v := dim_value(d)) is not None else d for d in sinfo.shape)


# -- binary broadcasting -----------------------------------------------------------------------
@pytest.mark.parametrize("op", [R.add, R.subtract, R.multiply, R.divide])
@pytest.mark.parametrize("a, b, out", [
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), (2, 3)),
    ((4, 1, 3), (5, 1), (4, 5, 3)),
    ((1,), (7, 2), (7, 2)),
    ((), (2, 2), (2, 2)),
])
def test_binary_broadcasting(op, a, b, out):
    call = op(t(a), t(b, name="y"))
    assert shape_of(call) == out
    assert call.struct_info.dtype == "float32"
    assert call.op is relax.Op.get(f"relax.{op.__name__}")


def test_binary_symbolic_dims():
    assert shape_of(R.add(t((n, 4)), t((n, 4), name="y"))) == (n, 4)
    assert shape_of(R.add(t((n, 4)), t((1, 4), name="y"))) == (n, 4)
    assert shape_of(R.add(t((n, 4)), t((4,), name="y"))) == (n, 4)
    undecided = R.add(t((n, 4)), t((m, 4), name="y"))   # n == m cannot be decided: rank only
    assert undecided.struct_info.shape is None and undecided.struct_info.ndim == 2


def test_binary_broadcast_error_names_shapes_and_axis():
    with pytest.raises(ValueError) as err:
        R.add(t((2, 3)), t((4, 3), name="y"))
    assert str(err.value) == ("relax.op.add: cannot broadcast x1 (2, 3) with x2 (4, 3): at axis 0 "
                              "(counting from the left of the result) the sizes are 2 and 4; "
                              "broadcasting needs them equal or one of them 1")


def test_binary_dtype_error():
    with pytest.raises(TypeError, match=r"relax.op.multiply: the dtypes differ: x1 is float32, "
                                        r"x2 is int32"):
        R.multiply(t((2,)), t((2,), "int32", "y"))


def test_binary_needs_tensors():
    s = relax.Var("s", relax.ShapeStructInfo((2,)))
    with pytest.raises(TypeError, match=r"relax.op.add: argument x2 must be a tensor, got R.Shape"):
        R.add(t((2,)), s)


def test_python_operators_and_constants():
    x = t((2, 3))
    assert (x + x).op is relax.Op.get("relax.add")
    assert (x * relax.const(2.0)).struct_info.shape is not None
    assert shape_of(x @ t((3, 5), name="y")) == (2, 5)


def test_ewise_fma():
    assert shape_of(R.ewise_fma(t((2, 3)), t((2, 3)), t((2, 3)))) == (2, 3)
    with pytest.raises(ValueError, match="ewise_fma needs equal shapes"):
        R.ewise_fma(t((2, 3)), t((2, 3)), t((2, 4)))


# -- unary -------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [R.exp, R.sigmoid, R.tanh, R.log, R.sqrt, R.nn.relu])
def test_unary_keeps_shape(op):
    assert shape_of(op(t((n, 3)))) == (n, 3)


def test_float_only_unary():
    with pytest.raises(TypeError, match="relax.op.exp: x must have a float dtype, got int32"):
        R.exp(t((2,), "int32"))
    assert R.nn.relu(t((2,), "int32")).struct_info.dtype == "int32"


# -- matmul / linear ---------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, out", [
    ((2, 3), (3, 5), (2, 5)),
    ((3,), (3, 5), (5,)),
    ((2, 3), (3,), (2,)),
    ((3,), (3,), ()),
    ((7, 2, 3), (3, 5), (7, 2, 5)),
    ((7, 1, 2, 3), (4, 3, 5), (7, 4, 2, 5)),
])
def test_matmul_shapes(a, b, out):
    assert shape_of(R.matmul(t(a), t(b, name="y"))) == out


def test_matmul_symbolic():
    assert shape_of(R.matmul(t((n, 784)), t((784, 128), name="y"))) == (n, 128)
    assert shape_of(R.matmul(t((4, n)), t((n, 2), name="y"))) == (4, 2)


def test_matmul_inner_dimension_error():
    with pytest.raises(ValueError) as err:
        R.matmul(t((2, 3)), t((4, 5), name="y"))
    assert str(err.value) == ("relax.op.matmul: the inner dimensions differ: x is (2, 3), "
                              "y is (4, 5) (3 != 4)")


def test_matmul_batch_and_dtype_errors():
    with pytest.raises(ValueError, match=r"cannot broadcast the batch dimensions of x \(2,\) with "
                                         r"the batch dimensions of y \(3,\)"):
        R.matmul(t((2, 4, 3)), t((3, 3, 5)))
    with pytest.raises(TypeError, match="relax.op.matmul: the dtypes differ: x is float32, y is float16"):
        R.matmul(t((2, 3)), t((3, 5), "float16"))
    assert R.matmul(t((2, 3)), t((3, 5)), out_dtype="float64").struct_info.dtype == "float64"


def test_linear_is_x_times_w_transposed_plus_b():
    call = R.linear(t((1, 784)), t((128, 784), name="w"), t((128,), name="b"))
    assert call.op is relax.Op.get("relax.add")
    assert call.args[0].op is relax.Op.get("relax.matmul")
    assert call.args[0].args[1].op is relax.Op.get("relax.permute_dims")
    assert shape_of(call) == (1, 128)
    assert shape_of(R.linear(t((1, 784)), t((128, 784), name="w"))) == (1, 128)
    with pytest.raises(ValueError, match=r"inner dimensions differ: x is \(1, 784\), y is \(100, 128\)"):
        R.linear(t((1, 784)), t((128, 100), name="w"))


def test_dense():
    assert shape_of(R.nn.dense(t((4, 784)), t((128, 784), name="w"))) == (4, 128)


# -- nn ----------------------------------------------------------------------------------------
def test_softmax():
    assert shape_of(R.nn.softmax(t((2, 10)))) == (2, 10)
    assert shape_of(R.nn.log_softmax(t((2, 10)), axis=0)) == (2, 10)
    assert R.nn.softmax(t((2, 10))).attrs.axis == -1
    with pytest.raises(ValueError, match=r"relax.op.nn.softmax: axis 2 is out of range for data "
                                         r"with 2 dimension\(s\) \(valid: -2 .. 1\)"):
        R.nn.softmax(t((2, 10)), axis=2)


@pytest.mark.parametrize("kwargs, out", [
    ({}, (1, 8, 30, 30)),
    ({"padding": 1}, (1, 8, 32, 32)),
    ({"strides": 2}, (1, 8, 15, 15)),
    ({"strides": (2, 1), "padding": (1, 0)}, (1, 8, 16, 30)),
    ({"dilation": 2}, (1, 8, 28, 28)),
    ({"padding": (0, 1, 2, 3)}, (1, 8, 32, 34)),
])
def test_conv2d_shapes(kwargs, out):
    call = R.nn.conv2d(t((1, 3, 32, 32)), t((8, 3, 3, 3), name="w"), **kwargs)
    assert shape_of(call) == out


def test_conv2d_groups_and_symbolic_batch():
    assert shape_of(R.nn.conv2d(t((n, 4, 8, 8)), t((8, 2, 3, 3), name="w"), groups=2)) == (n, 8, 6, 6)


def test_conv2d_symbolic_spatial_size():
    h = tir.Var("h", "int64")
    call = R.nn.conv2d(t((1, 3, h, 16)), t((8, 3, 3, 3), name="w"), padding=1)
    out_h = call.struct_info.shape[2]
    assert structural_equal(out_h, h)


def test_conv2d_errors():
    with pytest.raises(ValueError, match=r"the input channels differ: data \(1, 3, 32, 32\) has 3 "
                                         r"\(axis 1\) but weight \(8, 4, 3, 3\) expects 4 \(axis 1\)"):
        R.nn.conv2d(t((1, 3, 32, 32)), t((8, 4, 3, 3), name="w"))
    with pytest.raises(ValueError, match=r"relax.op.nn.conv2d: data must be 4-D \(NCHW\), got \(3, 32, 32\)"):
        R.nn.conv2d(t((3, 32, 32)), t((8, 3, 3, 3), name="w"))
    with pytest.raises(ValueError, match="the height window .* is larger than the padded input"):
        R.nn.conv2d(t((1, 3, 2, 32)), t((8, 3, 3, 3), name="w"))
    with pytest.raises(NotImplementedError, match="only NCHW data and OIHW kernels"):
        R.nn.conv2d(t((1, 32, 32, 3)), t((8, 3, 3, 3), name="w"), data_layout="NHWC")


@pytest.mark.parametrize("op", [R.nn.max_pool2d, R.nn.avg_pool2d])
def test_pool2d(op):
    x = t((1, 8, 32, 32))
    assert shape_of(op(x, pool_size=2, strides=2)) == (1, 8, 16, 16)
    assert shape_of(op(x, pool_size=(3, 3), strides=(2, 2), padding=1)) == (1, 8, 16, 16)
    assert shape_of(op(t((1, 8, 5, 5)), pool_size=2, strides=2, ceil_mode=True)) == (1, 8, 3, 3)
    with pytest.raises(ValueError, match="data must be 4-D"):
        op(t((8, 32, 32)), pool_size=2)


# -- manipulation ------------------------------------------------------------------------------
def test_reshape():
    x = t((2, 3, 4))
    assert shape_of(R.reshape(x, (6, 4))) == (6, 4)
    assert shape_of(R.reshape(x, (-1, 12))) == (2, 12)
    assert shape_of(R.reshape(t((n, 4)), (n, 2, 2))) == (n, 2, 2)
    with pytest.raises(ValueError, match=r"cannot reshape x \(2, 3, 4\) \(24 elements\) to \(5, 5\) "
                                         r"\(25 elements\)"):
        R.reshape(x, (5, 5))
    with pytest.raises(ValueError, match="only one dimension of the new shape may be -1"):
        R.reshape(x, (-1, -1))


def test_flatten_keeps_axis_zero():
    assert shape_of(R.flatten(t((2, 3, 4, 5)))) == (2, 60)
    assert shape_of(R.flatten(t((2, 3)))) == (2, 3)
    symbolic = R.flatten(t((n, 3, 4)))
    assert shape_of(symbolic)[0] is n and dim_value(symbolic.struct_info.shape[1]) == 12
    inner = R.flatten(t((2, n, 4))).struct_info.shape[1]
    assert inner.script() in ("n * T.int64(4)", "n * 4")


def test_permute_dims():
    assert shape_of(R.permute_dims(t((2, 3)))) == (3, 2)
    assert shape_of(R.permute_dims(t((2, 3, 4)), axes=[0, 2, 1])) == (2, 4, 3)
    assert shape_of(R.permute_dims(t((2, 3, 4)), axes=[-1, 0, 1])) == (4, 2, 3)
    with pytest.raises(ValueError, match=r"axes \(0, 1\) must list each of the 3 axes of x \(2, 3, 4\) once"):
        R.permute_dims(t((2, 3, 4)), axes=[0, 1])
    with pytest.raises(ValueError, match="repeat an axis"):
        R.permute_dims(t((2, 3, 4)), axes=[0, 1, 1])


# -- reductions --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [R.sum, R.mean, R.max, R.min])
def test_reductions(op):
    x = t((2, 3, 4))
    assert shape_of(op(x)) == ()
    assert shape_of(op(x, axis=1)) == (2, 4)
    assert shape_of(op(x, axis=[0, -1], keepdims=True)) == (1, 3, 1)
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        op(x, axis=3)


# -- call_tir / call_dps_packed ----------------------------------------------------------------
def test_call_tir_struct_info():
    gv = relax.GlobalVar("linear0")
    out = relax.TensorStructInfo((1, 128), "float32")
    call = R.call_tir(gv, (t((1, 784)), t((128, 784), name="w")), out)
    assert call.struct_info is out
    assert call.sinfo_args == (out,)
    pair = R.call_tir(gv, [t((1, 784))], [out, out])
    assert isinstance(pair.struct_info, relax.TupleStructInfo) and len(pair.struct_info.elements) == 2


def test_call_dps_packed():
    out = relax.TensorStructInfo((1, 128), "float32")
    call = R.call_dps_packed("env.linear", [t((1, 784))], out)
    assert isinstance(call.args[0], relax.ExternFunc) and call.struct_info is out


def test_call_tir_errors():
    with pytest.raises(TypeError, match="the callee must be a GlobalVar"):
        R.call_tir(t((2,)), [t((2,))], relax.TensorStructInfo((2,), "float32"))
    with pytest.raises(TypeError, match="out_sinfo must be a relax.TensorStructInfo"):
        R.call_tir(relax.GlobalVar("f"), [t((2,))], "float32")
    with pytest.raises(TypeError, match=r'the output shape \(2,\) needs its dtype: write '
                                        r'out_sinfo=R.Tensor\(\(2,\), "float32"\)'):
        R.call_tir(relax.GlobalVar("f"), [t((2,))], (2,))
    with pytest.raises(ValueError, match="the output shape must be known"):
        R.call_tir(relax.GlobalVar("f"), [t((2,))], relax.TensorStructInfo(None, "float32", 1))


# -- registry ----------------------------------------------------------------------------------
def test_registry():
    assert relax.Op.get("relax.add") is relax.Op.get("relax.add")
    info = R.op_info("relax.add")
    assert not hasattr(info, "pattern")     # fusion reads the pattern off the legalized PrimFunc
    assert info.legalize is None or callable(info.legalize)   # set once LegalizeOps' table loads
    with pytest.raises(KeyError, match="no relax op named 'relax.relu'; did you mean 'relax.nn.relu'"):
        relax.Op.get("relax.relu")


def test_register_legalize_sets_and_keeps_the_op():
    op = relax.Op.get("relax.negative")
    before = R.op_info(op).legalize
    try:
        @R.register_legalize("relax.negative")
        def _legalize(bb, call):
            return call
        assert R.op_info("relax.negative").legalize is _legalize
        assert relax.Op.get("relax.negative") is op
    finally:
        R.op_info(op).legalize = before
