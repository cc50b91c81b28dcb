"""The R script language: @R.function parsing, modules mixing T and R, round trips, errors."""
import numpy as np
import pytest

from mlc_lab import relax, te, tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.relax import op as rop
from mlc_lab.script import ScriptError, from_source
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T


def tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def round_trip(mod):
    """Print, parse back, compare; printing the parsed module gives the same text."""
    text = mod.script()
    parsed = from_source(text)
    assert_structural_equal(mod, parsed)
    assert parsed.script() == text
    return parsed


def script_error(text, match, extra_vars=None) -> ScriptError:
    with pytest.raises(ScriptError, match=match) as info:
        from_source(text, extra_vars)
    return info.value


# -- functions -------------------------------------------------------------------------------------
def test_function_matches_the_block_builder():
    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w: R.Tensor((128, 784), dtype="float32")) -> R.Tensor((1, 128), "float32"):
        with R.dataflow():
            lv = R.matmul(x, R.permute_dims(w))
            gv: R.Tensor((1, 128), dtype="float32") = R.nn.relu(lv)
            R.output(gv)
        return gv

    x, w = tensor("x", (1, 784)), tensor("w", (128, 784))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(rop.matmul(x, rop.permute_dims(w)))
            gv = bb.emit_output(rop.nn.relu(lv))
        bb.emit_func_output(gv)
    assert isinstance(main, relax.Function)
    assert_structural_equal(main, bb.get()["main"])
    block = main.body.blocks[0]
    assert [type(b.var) for b in block.bindings] == [relax.DataflowVar] * 2 + [relax.Var]
    assert main.attrs["global_symbol"] == "main"


def test_symbolic_sizes_are_shared_across_the_function():
    @R.function
    def main(x: R.Tensor(("n", 784), "float32"), y: R.Tensor(("n", 784), "float32")):
        n = T.int64()
        with R.dataflow():
            gv: R.Tensor((n, 784), "float32") = R.add(x, y)
            R.output(gv)
        return gv

    n = main.params[0].struct_info.shape[0]
    assert isinstance(n, tir.Var) and n.dtype == "int64" and n.name == "n"
    assert main.params[1].struct_info.shape[0] is n and main.ret_struct_info.shape[0] is n
    assert 'def main(x: R.Tensor(("n", 784), dtype="float32")' in main.script()
    assert_structural_equal(from_source(main.script()), main)


def test_bindings_outside_dataflow_tuples_constants_and_attrs():
    @R.function(private=True)
    def f(x: R.Tensor((2, 3), "float32")) -> R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((3, 2), "float32")):
        R.func_attr({"Primitive": 1})
        a = R.multiply(x, R.const(2.0, "float32"))
        t = (a, R.permute_dims(a, axes=[1, 0]))
        b = t[1]
        return (a, b)

    assert "global_symbol" not in f.attrs and f.attrs["Primitive"] == 1
    (block,) = f.body.blocks
    assert isinstance(block, relax.BindingBlock) and not isinstance(block, relax.DataflowBlock)
    assert isinstance(f.body.body, relax.Tuple)
    text = f.script()
    assert text.startswith("@R.function(private=True)") and 'R.func_attr({"Primitive": 1})' in text
    assert "t[1]" in text
    assert_structural_equal(from_source(text), f)


def test_nested_calls_are_bound_first():
    @R.function
    def f(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
        with R.dataflow():
            gv = R.nn.relu(R.add(x, y))
            R.output(gv)
        return R.exp(gv)

    (dataflow, tail) = f.body.blocks
    assert [b.value.op.name for b in dataflow.bindings] == ["relax.add", "relax.nn.relu"]
    assert isinstance(dataflow.bindings[0].var, relax.DataflowVar)
    assert tail.bindings[0].value.op.name == "relax.exp" and f.body.body is tail.bindings[0].var


def test_a_less_specific_annotation_is_allowed():
    @R.function
    def f(x: R.Tensor((2, 3), "float32")):
        y: R.Tensor(dtype="float32", ndim=2) = R.exp(x)
        z: R.Object = y
        return z

    y = f.body.blocks[0].bindings[0].var
    assert y.struct_info.shape is None and y.struct_info.ndim == 2
    assert isinstance(f.ret_struct_info, relax.ObjectStructInfo)


OPS_TEXT = '''
@R.function
def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32"), m: R.Tensor((4, 8), "float32")):
    with R.dataflow():
        c = R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=1, groups=1)
        p = R.nn.max_pool2d(c, pool_size=[2, 2], strides=[2, 2])
        q = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2], padding=[0, 0], ceil_mode=True)
        f = R.flatten(p)
        r = R.reshape(q, R.shape([4, 16]))
        s = R.sum(m, axis=[1], keepdims=True)
        mean = R.mean(m, axis=None, keepdims=False)
        mx = R.max(m, axis=0)
        mn = R.min(m)
        mm = R.matmul(m, R.permute_dims(m, axes=[1, 0]))
        lin = R.linear(m, m, R.const(np.zeros(4, "float32")))
        e = R.ewise_fma(m, m, m)
        u = R.tanh(R.sigmoid(R.exp(R.log(R.sqrt(R.negative(m))))))
        sm = R.nn.softmax(m, axis=-1)
        lsm = R.nn.log_softmax(m, axis=1)
        d = R.nn.dense(m, m)
        b = R.divide(R.subtract(m, R.add(m, e)), 2.0)
        gv = (f, r, s, mean, mx, mn, mm, lin, u, sm, lsm, d, b)
        R.output(gv)
    return gv
'''


def test_every_op_parses_with_its_attributes_and_round_trips():
    f = from_source(OPS_TEXT, {"np": np})
    ops = [b.value.op.name for block in f.body.blocks for b in block.bindings
           if isinstance(b.value, relax.Call)]
    for name in ("nn.conv2d", "nn.max_pool2d", "nn.avg_pool2d", "flatten", "reshape", "sum", "mean",
                 "max", "min", "matmul", "permute_dims", "ewise_fma", "tanh", "sigmoid", "exp", "log",
                 "sqrt", "negative", "nn.softmax", "nn.log_softmax", "nn.dense", "divide", "subtract", "add"):
        assert "relax." + name in ops
    conv = next(b.value for b in f.body.blocks[0].bindings if b.value.op.name == "relax.nn.conv2d")
    assert conv.attrs.padding == (1, 1, 1, 1) and conv.attrs.dilation == (1, 1)
    assert f.body.body.struct_info.elements[0].script() == 'R.Tensor((1, 64), dtype="float32")'
    text = f.script()
    parsed = from_source(text)
    assert_structural_equal(parsed, f)
    assert parsed.script() == text


# -- modules ---------------------------------------------------------------------------------------
def te_linear(X, W, B):
    k = te.reduce_axis((0, X.shape[1]), "k")
    Y = te.compute((X.shape[0], W.shape[0]), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), name="Y")
    return te.compute(Y.shape, lambda i, j: Y[i, j] + B[j], name="Z")


def te_relu(X):
    return te.compute(X.shape, lambda i, j: te.max(X[i, j], tir.const(0, X.dtype)), name="relu")


def build_mlp(batch=1):
    x = tensor("x", (batch, 784))
    w0, b0 = tensor("w0", (128, 784)), tensor("b0", (128,))
    w1, b1 = tensor("w1", (10, 128)), tensor("b1", (10,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w0, b0, w1, b1]):
        with bb.dataflow():
            lv0 = bb.emit_te(te_linear, x, w0, b0, primfunc_name_hint="linear0")
            lv1 = bb.emit_te(te_relu, lv0, primfunc_name_hint="relu0")
            out = bb.emit_te(te_linear, lv1, w1, b1, primfunc_name_hint="linear1")
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def test_block_builder_mlp_round_trips():
    parsed = round_trip(build_mlp())
    assert sorted(gv.name_hint for gv in parsed.functions) == ["linear0", "linear1", "main", "relu0"]
    call = parsed["main"].body.blocks[0].bindings[0].value
    assert call.args[0] == relax.GlobalVar("linear0") and isinstance(parsed["linear0"], tir.PrimFunc)


def test_symbolic_mlp_round_trips_function_by_function():
    # The builder shares one size variable between its functions, the parser gives each function
    # its own, so the functions are compared one at a time.
    mod = build_mlp(tir.Var("n", "int64"))
    text = mod.script()
    parsed = from_source(text)
    for gv in mod.functions:
        assert_structural_equal(parsed[gv.name_hint], mod[gv])
    assert parsed.script() == text


@I.ir_module
class MixedModule:
    @T.prim_func
    def linear0(X: T.Buffer((1, 784), "float32"), W: T.Buffer((128, 784), "float32"),
                Z: T.Buffer((1, 128), "float32")):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Z"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Z[vi, vj] = T.float32(0)
                Z[vi, vj] = Z[vi, vj] + X[vi, vk] * W[vj, vk]

    @R.function
    def main(x: R.Tensor((1, 784), "float32"), w: R.Tensor((128, 784), "float32")) -> R.Tensor((1, 128), "float32"):
        cls = MixedModule
        with R.dataflow():
            lv = R.call_tir(cls.linear0, (x, w), out_sinfo=R.Tensor((1, 128), "float32"))
            lv1: R.Tensor((1, 128), dtype="float32") = MixedModule.activation(lv)
            gv = R.add(lv1, R.const(1.0, "float32"))
            R.output(gv)
        out = R.call_dps_packed("env.scale", (gv,), out_sinfo=R.Tensor((1, 128), "float32"))
        return out

    @R.function(private=True)
    def activation(x: R.Tensor((1, 128), "float32")) -> R.Tensor((1, 128), "float32"):
        return R.nn.relu(x)


def test_mixed_module_resolves_sibling_functions_and_round_trips():
    assert sorted(gv.name_hint for gv in MixedModule.functions) == ["activation", "linear0", "main"]
    main = MixedModule["main"]
    (dataflow, tail) = main.body.blocks
    call_tir, call_fn = dataflow.bindings[0].value, dataflow.bindings[1].value
    assert call_tir.args[0] == relax.GlobalVar("linear0")
    assert call_fn.op == relax.GlobalVar("activation")
    assert call_fn.struct_info.script() == 'R.Tensor((1, 128), dtype="float32")'
    assert tail.bindings[0].value.args[0].global_symbol == "env.scale"
    text = MixedModule.script()
    assert "lv1: R.Tensor((1, 128), dtype=\"float32\") = cls.activation(lv)" in text
    round_trip(MixedModule)


def test_call_tir_with_several_outputs_and_tir_vars():
    text = '''
@I.ir_module
class Module:
    @T.prim_func
    def split(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]
                C[vi] = A[vi]

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        m = T.int64()
        cls = Module
        with R.dataflow():
            t = R.call_tir(cls.split, (x,), out_sinfo=[R.Tensor((4,), "float32"), R.Tensor((4,), "float32")])
            u = R.call_tir(cls.split, (x,), out_sinfo=R.Tensor((m, 4), "float32"), tir_vars=R.shape([m]))
            gv = t[0]
            R.output(gv, u)
        return (gv, u)
'''
    mod = from_source(text)
    t = mod["main"].body.blocks[0].bindings[0].var
    assert isinstance(t.struct_info, relax.TupleStructInfo) and len(t.struct_info.elements) == 2
    # `m` is defined by no parameter: the printer leaves out its declaration, the parser then
    # declares it where an annotation first uses it; as a free variable it is matched by position.
    text = mod.script()
    assert "m = T.int64()" not in text and "tir_vars=R.shape([m])" in text
    parsed = from_source(text)
    assert_structural_equal(parsed, mod, map_free_vars=True)
    assert parsed.script() == text


def test_large_constants_come_back_through_metadata():
    big = relax.const(np.arange(32, dtype="float32"))
    x = tensor("x", (32,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        gv = bb.emit(rop.add(x, big))
        bb.emit_func_output(gv)
    mod = bb.get()
    text = mod.script()
    assert 'metadata["relax.expr.Constant"][0]' in text
    script_error(text, r"metadata\[...\] constants, whose values the printer leaves out")
    parsed = from_source(text, {"metadata": {"relax.expr.Constant": [big]}})
    assert_structural_equal(parsed, mod)


def test_a_standalone_function_outside_a_module_cannot_use_cls():
    with pytest.raises(ScriptError, match="name 'cls' is not defined"):
        @R.function
        def f(x: R.Tensor((2,), "float32")):
            return cls.g(x)  # noqa: F821


# -- errors ----------------------------------------------------------------------------------------
def test_undefined_name_is_located_with_a_caret():
    err = script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    gv = R.add(x, y)
    return gv
''', "name 'y' is not defined")
    assert err.line == 4 and err.source_line.strip() == "gv = R.add(x, y)"
    assert str(err).endswith("4 |     gv = R.add(x, y)\n  |                   ^")


def test_unknown_r_function_suggests_the_closest():
    script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    gv = R.nn.rleu(x)
    return gv
''', r"unknown function R.nn.rleu; did you mean R.nn.relu\?")
    script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    gv = R.matmull(x, x)
    return gv
''', r"unknown function R.matmull; did you mean R.matmul\?")


def test_wrong_arity_and_attributes_name_the_op_at_the_call():
    err = script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    gv = R.nn.relu(x, x)
    return gv
''', r"R.nn.relu\(\) takes 1 positional argument but 2 were given")
    assert err.line == 4 and err.column == 9
    script_error('''
@R.function
def main(x: R.Tensor((1, 3, 8, 8), "float32"), w: R.Tensor((4, 3, 3, 3), "float32")):
    gv = R.nn.conv2d(x, w, stride=2)
    return gv
''', r"R.nn.conv2d\(\) got an unexpected keyword argument 'stride'; did you mean strides=\?")
    err = script_error('''
@R.function
def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((4, 5), "float32")):
    gv = R.matmul(x, w)
    return gv
''', r"relax.op.matmul")
    assert err.line == 4


def test_annotation_mismatch():
    err = script_error('''
@R.function
def main(x: R.Tensor((2, 3), "float32")):
    gv: R.Tensor((3, 2), "float32") = R.exp(x)
    return gv
''', r"'gv' is annotated R.Tensor\(\(3, 2\), dtype=\"float32\"\) but its value is "
     r"R.Tensor\(\(2, 3\), dtype=\"float32\"\)")
    assert err.line == 4
    script_error('''
@R.function
def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "int32"):
    return x
''', "the function returns .* which does not match its annotation")


def test_dataflow_misuse():
    script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    gv = R.exp(x)
    R.output(gv)
    return gv
''', r"R.output\(...\) is only allowed as the last statement of a `with R.dataflow\(\):` block")
    script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        gv = R.exp(x)
    return gv
''', r"must end with R.output\(...\)")
    err = script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        lv = R.exp(x)
        gv = R.exp(lv)
        R.output(gv)
    return lv
''', r"'lv' is a variable of the `with R.dataflow\(\):` block at line 4, not visible after it")
    assert err.line == 8
    script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        gv = R.exp(x)
        R.output(gx)
    return gv
''', r"R.output\(gx\): 'gx' is not bound in this dataflow block")


def test_module_reference_errors():
    script_error('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        cls = Module
        gv = R.call_tir(cls.relu1, (x,), out_sinfo=R.Tensor((2,), "float32"))
        return gv

    @R.function
    def relu(x: R.Tensor((2,), "float32")):
        return x
''', r"module Module has no function named 'relu1'; did you mean relu\?")
    script_error('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")):
        gv = R.call_tir(Module.relu, (x,), out_sinfo=R.Tensor((2,), "float32"))
        return gv

    @R.function
    def relu(x: R.Tensor((2,), "float32")):
        return x
''', r"R.call_tir calls a T.prim_func, but relu is an R.function")


def test_missing_return_and_bad_parameter_annotation():
    script_error('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    gv = R.exp(x)
''', "R.function main has no `return` statement")
    script_error('''
@R.function
def main(x: T.Buffer((2,), "float32")):
    return x
''', r"parameter 'x' must be annotated with struct info such as R.Tensor")


def test_other_struct_infos_packed_calls_and_impure_functions_round_trip():
    text = '''
@R.function(pure=False)
def main(x: R.Tensor("float32", ndim=2), s: R.Shape([2, 3]), k: R.Prim("int64"), f: R.Callable((R.Tensor((2,), "float32"),), R.Object)):
    a = R.call_packed("env.print", x, R.prim_value(3), sinfo_args=(R.Object,))
    b = R.call_packed("env.twice", x, sinfo_args=(R.Tensor(dtype="float32", ndim=2),))
    c = x + b
    return (a, s, k, f, c * 2.0)
'''
    f = from_source(text)
    assert not f.is_pure and f.params[0].struct_info.ndim == 2
    assert f.body.blocks[0].bindings[0].value.args[1].value.dtype == "int64"
    printed = f.script()
    assert "R.multiply(c, R.const(2.0, \"float32\"))" in printed
    parsed = from_source(printed)
    assert_structural_equal(parsed, f)
    assert parsed.script() == printed


def test_a_call_between_functions_uses_the_callers_sizes():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("m", 4), "float32")):
        m = T.int64()
        cls = Module
        gv: R.Tensor((m, 4), "float32") = cls.double(x)
        return gv

    @R.function(private=True)
    def double(y: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        return R.add(y, y)
''')
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.struct_info.shape[0] is mod["main"].params[0].struct_info.shape[0]
    round_trip(mod)


def test_the_compilation_pipeline_output_round_trips_after_every_pass():
    from mlc_lab.relax import transform

    mod = build_mlp()
    for make_pass in transform.PASSES:
        mod = make_pass()(mod)
        round_trip(mod)


def test_statement_forms_outside_a_function():
    with pytest.raises(RuntimeError, match="R.dataflow can only be used inside a function decorated with @R.function"):
        R.dataflow()
    assert R.Tensor(("n", 2), "float32").shape[0].name == "n"
    assert R.Tuple(R.Tensor((2,), "int32"), R.Object).script() == 'R.Tuple(R.Tensor((2,), dtype="int32"), R.Object)'


def test_a_quoted_size_wins_over_a_python_name():
    n = 128

    @R.function
    def f(x: R.Tensor(("n",), "float32")):
        gv: R.Tensor((n,), "float32") = R.exp(x)
        return gv

    assert n == 128 and f.body.body.struct_info.shape[0] is f.params[0].struct_info.shape[0]
