"""Graph-level IR nodes: structure info, expressions, printing, structural equality."""
import numpy as np
import pytest

from mlc_lab import relax, tir
from mlc_lab.ir import assert_structural_equal, structural_equal, structural_hash
from mlc_lab.relax import op as R


def test_tensor_struct_info():
    s = relax.TensorStructInfo((1, 784), "float32")
    assert s.ndim == 2 and s.dtype == "float32" and s.static_shape == (1, 784)
    assert all(isinstance(d, tir.IntImm) and d.dtype == "int64" for d in s.shape)
    assert relax.TensorStructInfo(None, "float32", 3).ndim == 3
    assert relax.TensorStructInfo(dtype="int32").ndim == -1
    n = tir.Var("n", "int64")
    sym = relax.TensorStructInfo((n, 4))
    assert sym.shape[0] is n and sym.static_shape is None


def test_struct_info_errors():
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        relax.TensorStructInfo((1,), "float33")
    with pytest.raises(ValueError, match=r"shape \(1, 2\) has 2 dimension\(s\) but ndim=3"):
        relax.TensorStructInfo((1, 2), "float32", 3)
    with pytest.raises(TypeError, match="a dimension must be an integer expression"):
        relax.TensorStructInfo((tir.FloatImm("float32", 1.0),))
    with pytest.raises(TypeError, match="must be a StructInfo"):
        relax.Var("x", (1, 2))


def test_other_struct_infos_print():
    n = tir.Var("n", "int64")
    cases = {
        relax.TupleStructInfo([relax.TensorStructInfo((2,), "float32"), relax.PrimStructInfo("int64")]):
            'R.Tuple(R.Tensor((2,), dtype="float32"), R.Prim("int64"))',
        relax.ShapeStructInfo((n, 3)): "R.Shape([n, 3])",
        relax.ShapeStructInfo(ndim=2): "R.Shape(ndim=2)",
        relax.ObjectStructInfo(): "R.Object",
        relax.TensorStructInfo(None, "float16", 2): 'R.Tensor(dtype="float16", ndim=2)',
        relax.FuncStructInfo([relax.TensorStructInfo((2,), "float32")], relax.ObjectStructInfo()):
            'R.Callable((R.Tensor((2,), dtype="float32"),), R.Object)',
    }
    for sinfo, text in cases.items():
        assert sinfo.script() == text


def test_expressions_carry_struct_info():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    c = relax.const(np.ones((2, 3), "float32"))
    assert c.struct_info.script() == 'R.Tensor((2, 3), dtype="float32")'
    assert relax.const(1.0).struct_info.dtype == "float32"
    tup = relax.Tuple([x, c])
    assert isinstance(tup.struct_info, relax.TupleStructInfo) and tup[1] is c and len(tup) == 2
    assert relax.TupleGetItem(tup, 0).struct_info is x.struct_info
    with pytest.raises(IndexError, match="tuple index 2 is out of range for a tuple of 2 item"):
        relax.TupleGetItem(tup, 2)
    assert relax.ShapeExpr([1, 2]).struct_info.script() == "R.Shape([1, 2])"
    assert relax.PrimValue(tir.IntImm("int64", 3)).struct_info.dtype == "int64"
    assert isinstance(relax.DataflowVar("lv", x.struct_info), relax.Var)


def test_call_attrs_read_like_an_object_and_a_dict():
    call = R.sum(relax.Var("x", relax.TensorStructInfo((2, 3), "float32")), axis=1, keepdims=True)
    assert call.attrs.axis == (1,) and call.attrs["keepdims"] is True
    assert "axis" in call.attrs and call.attrs.keys() == ["axis", "keepdims"]
    assert call.attrs == (("axis", (1,)), ("keepdims", True))
    with pytest.raises(AttributeError, match="no attribute 'axes'; attributes: axis, keepdims"):
        call.attrs.axes


def test_hand_built_call_has_no_struct_info_until_normalized():
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    call = relax.Call(relax.Op.get("relax.add"), [x, x], None, None)
    assert call.struct_info is None and call.attrs == () and call.sinfo_args == ()
    assert relax.BlockBuilder().normalize(call).struct_info.script() == 'R.Tensor((2, 3), dtype="float32")'


def test_expression_printing():
    x = relax.Var("x", relax.TensorStructInfo((1, 784), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((128, 784), "float32"))
    assert R.linear(x, w).script() == "R.matmul(x, R.permute_dims(w, axes=None))"
    assert R.nn.softmax(x).script() == "R.nn.softmax(x, axis=-1)"
    assert R.reshape(x, (28, 28)).script() == "R.reshape(x, R.shape([28, 28]))"
    assert R.add(x, relax.const(1.0)).script() == 'R.add(x, R.const(1.0, "float32"))'
    big = relax.const(np.zeros((4, 8), "float32"))
    assert R.add(big, big).script() == ('R.add(metadata["relax.expr.Constant"][0], '
                                        'metadata["relax.expr.Constant"][0])')
    call = R.call_tir(relax.GlobalVar("linear0"), (x, w), relax.TensorStructInfo((1, 128), "float32"))
    assert call.script() == ('R.call_tir(cls.linear0, (x, w), out_sinfo=R.Tensor((1, 128), '
                             'dtype="float32"))')
    packed = R.call_dps_packed("env.linear", [x], relax.TensorStructInfo((1, 128), "float32"))
    assert packed.script().startswith('R.call_dps_packed("env.linear", (x,), out_sinfo=')


def _build_mlp(n=None):
    batch = n if n is not None else 1
    x = relax.Var("x", relax.TensorStructInfo((batch, 784), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((128, 784), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((128,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            lv = bb.emit(R.linear(x, w, b))
            lv1 = bb.emit(R.nn.relu(lv))
            gv = bb.emit_output(lv1)
        bb.emit_func_output(gv)
    return bb.get()["main"]


def test_function_printing():
    text = _build_mlp().script()
    assert text == '''@R.function
def main(x: R.Tensor((1, 784), dtype="float32"), w: R.Tensor((128, 784), dtype="float32"), b: R.Tensor((128,), dtype="float32")) -> R.Tensor((1, 128), dtype="float32"):
    with R.dataflow():
        lv: R.Tensor((784, 128), dtype="float32") = R.permute_dims(w, axes=None)
        lv1: R.Tensor((1, 128), dtype="float32") = R.matmul(x, lv)
        lv2: R.Tensor((1, 128), dtype="float32") = R.add(lv1, b)
        lv3: R.Tensor((1, 128), dtype="float32") = R.nn.relu(lv2)
        gv: R.Tensor((1, 128), dtype="float32") = lv3
        R.output(gv)
    return gv'''
    assert str(_build_mlp()) == text


def test_symbolic_function_printing_defines_the_size_variable():
    text = _build_mlp(tir.Var("n", "int64")).script()
    assert 'def main(x: R.Tensor(("n", 784), dtype="float32")' in text
    assert '-> R.Tensor((n, 128), dtype="float32"):\n    n = T.int64()\n' in text
    assert 'lv1: R.Tensor((n, 128), dtype="float32") = R.matmul(x, lv)' in text


def test_printer_makes_duplicate_names_unique_and_underlines():
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    other_x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("f", [x, other_x]):
        gv = bb.emit(R.add(x, other_x), name_hint="cls")
        bb.emit_func_output(gv)
    func = bb.get()["f"]
    text = func.script()
    assert "def f(x: " in text and ", x_1: " in text and "cls_1: " in text
    assert "= R.add(x, x_1)" in text
    marked = func.script(underline=[func.body.blocks[0].bindings[0]])
    assert "\n    ^^^^^" in marked


def test_structural_equal_on_two_identically_built_functions():
    a, b = _build_mlp(), _build_mlp()
    assert a is not b
    assert structural_equal(a, b)
    assert_structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    n1, n2 = tir.Var("n", "int64"), tir.Var("m", "int64")
    assert structural_equal(_build_mlp(n1), _build_mlp(n2))


def test_structural_equal_notices_a_different_op_and_constant():
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))

    def build(op, value):
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            gv = bb.emit(op(x, relax.const(np.full((2,), value, "float32"))))
            bb.emit_func_output(gv)
        return bb.get()["main"]

    assert structural_equal(build(R.add, 1.0), build(R.add, 1.0))
    assert not structural_equal(build(R.add, 1.0), build(R.multiply, 1.0))
    assert not structural_equal(build(R.add, 1.0), build(R.add, 2.0))
    with pytest.raises(ValueError, match="arrays differ"):
        assert_structural_equal(build(R.add, 1.0), build(R.add, 2.0))


def test_tuple_fields_read_as_the_reference_compiler_names_them():
    """Course code walks ``tuple.fields``; every node's ``fields()`` listing still works on it."""
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((3,), "float32"))
    t = relax.Tuple([x, y])
    assert list(t.fields) == [x, y] and len(t.fields) == 2 and t.fields[1] is y
    assert [f.name_hint for f in t.fields] == ["x", "y"]
    assert dict(t.fields())["elements"] == (x, y)

    class Renamer(relax.PyExprMutator):
        def visit_tuple_(self, op):
            return relax.Tuple([self.visit_expr(f) for f in op.fields])

    assert structural_equal(Renamer().visit_expr(t), t)
