"""BlockBuilder (the course's MLP through emit_te), its errors, and the visitor/mutator."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, te, tir
from mlc_lab.ir import structural_equal
from mlc_lab.relax import op as R
from mlc_lab.tir import PrimFunc


def te_linear(X, W, B):
    k = te.reduce_axis((0, X.shape[1]), "k")
    Y = te.compute((X.shape[0], W.shape[0]), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), name="Y")
    return te.compute(Y.shape, lambda i, j: Y[i, j] + B[j], name="Z")


def te_relu(X):
    return te.compute(X.shape, lambda i, j: te.max(X[i, j], tir.const(0, X.dtype)), name="relu")


def tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


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


def test_mlp_module_has_three_prim_funcs_and_main():
    mod = build_mlp()
    assert sorted(gv.name_hint for gv in mod.functions) == ["linear0", "linear1", "main", "relu0"]
    assert all(isinstance(mod[name], PrimFunc) for name in ("linear0", "relu0", "linear1"))
    main = mod["main"]
    assert isinstance(main, relax.Function) and main.attrs["global_symbol"] == "main"
    (block,) = main.body.blocks
    assert isinstance(block, relax.DataflowBlock)
    calls = [b.value for b in block.bindings[:3]]
    assert [c.args[0].name_hint for c in calls] == ["linear0", "relu0", "linear1"]
    assert all(c.op is relax.Op.get("relax.call_tir") for c in calls)
    assert [type(b.var) for b in block.bindings] == [relax.DataflowVar] * 3 + [relax.Var]
    assert main.ret_struct_info.script() == 'R.Tensor((1, 10), dtype="float32")'


def test_mlp_module_prints():
    text = build_mlp().script()
    assert "@I.ir_module\nclass Module:" in text
    assert "@T.prim_func\n    def linear0(x: T.Buffer((T.int64(1), T.int64(784)), \"float32\")" in text
    main = text[text.index("    @R.function"):]
    assert main.splitlines()[1:8] == [
        '    def main(x: R.Tensor((1, 784), dtype="float32"), w0: R.Tensor((128, 784), dtype="float32"), '
        'b0: R.Tensor((128,), dtype="float32"), w1: R.Tensor((10, 128), dtype="float32"), '
        'b1: R.Tensor((10,), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):',
        "        cls = Module",
        "        with R.dataflow():",
        '            lv: R.Tensor((1, 128), dtype="float32") = R.call_tir(cls.linear0, (x, w0, b0), '
        'out_sinfo=R.Tensor((1, 128), dtype="float32"))',
        '            lv1: R.Tensor((1, 128), dtype="float32") = R.call_tir(cls.relu0, (lv,), '
        'out_sinfo=R.Tensor((1, 128), dtype="float32"))',
        '            lv2: R.Tensor((1, 10), dtype="float32") = R.call_tir(cls.linear1, (lv1, w1, b1), '
        'out_sinfo=R.Tensor((1, 10), dtype="float32"))',
        '            gv: R.Tensor((1, 10), dtype="float32") = lv2',
    ]


def test_mlp_prim_funcs_compute_what_numpy_does():
    mod = build_mlp(batch=2)
    rng = np.random.default_rng(0)
    x, w, b = (rng.random(s, dtype="float32") for s in ((2, 784), (128, 784), (128,)))
    out = mlc_lab.nd.empty((2, 128), "float32")
    mlc_lab.build(mod["linear0"], target="python")(*map(mlc_lab.nd.array, (x, w, b)), out)
    np.testing.assert_allclose(out.numpy(), x @ w.T + b, rtol=1e-4)


def test_identically_built_modules_are_structurally_equal():
    assert structural_equal(build_mlp(), build_mlp())
    assert not structural_equal(build_mlp(1), build_mlp(2))


def test_emit_te_reuses_an_identical_prim_func_and_names_new_ones_uniquely():
    x, y = tensor("x", (4, 4)), tensor("y", (8, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        a = bb.emit_te(te_relu, x)
        b = bb.emit_te(te_relu, a)
        c = bb.emit_te(te_relu, y)
        bb.emit_func_output(relax.Tuple([b, c]))
    mod = bb.get()
    assert sorted(gv.name_hint for gv in mod.functions) == ["main", "te_relu", "te_relu1"]
    assert mod["te_relu1"].attr_dict["global_symbol"] == "te_relu1"
    assert [v.name_hint for v in (a, b, c)] == ["gv", "gv1", "gv2"]
    assert mod["main"].ret_struct_info.script() == ('R.Tuple(R.Tensor((4, 4), dtype="float32"), '
                                                    'R.Tensor((8, 4), dtype="float32"))')


def test_call_te_returns_the_call_and_passes_non_tensor_arguments():
    def scale(X, factor):
        return te.compute(X.shape, lambda i: X[i] * factor, name="scale")

    x = tensor("x", (4,))
    bb = relax.BlockBuilder()
    call = bb.call_te(scale, x, 2.0)
    assert isinstance(call, relax.Call) and call.struct_info.script() == 'R.Tensor((4,), dtype="float32")'
    assert "scale" in bb.get()


def test_emit_te_with_a_symbolic_batch():
    n = tir.Var("n", "int64")
    x = tensor("x", (n, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(bb.call_te(te_relu, x))
        bb.emit_func_output(gv)
    mod = bb.get()
    assert gv.struct_info.shape[0] is n
    assert "n = T.int64()" in mod["te_relu"].script()


def test_unbound_output_size_becomes_tir_vars():
    m = tir.Var("m", "int64")

    def tile(X):
        return te.compute((m, X.shape[0]), lambda i, j: X[j], name="tile")

    x = tensor("x", (4,))
    call = relax.BlockBuilder().call_te(tile, x)
    assert len(call.args) == 3 and call.args[2].values == (m,)
    assert "tir_vars=R.shape([m])" in call.script()


def test_nested_calls_are_bound_first():
    x = tensor("x", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(R.add(R.multiply(x, x), x))
        bb.emit_func_output(gv)
    (block,) = bb.get()["main"].body.blocks
    assert [b.value.op.name for b in block.bindings] == ["relax.multiply", "relax.add"]
    assert block.bindings[1].value.args[0] is block.bindings[0].var


def test_params_may_be_given_at_the_end():
    x = tensor("x", (2,))
    bb = relax.BlockBuilder()
    with bb.function("main"):
        gv = bb.emit(R.exp(x))
        bb.emit_func_output(gv, params=[x])
    assert bb.get()["main"].params == (x,)


# -- errors ------------------------------------------------------------------------------------
def test_emit_outside_a_function():
    with pytest.raises(relax.BlockBuilderError, match=r"bb.emit must be called inside `with "
                                                      r"bb.function\(name, params\):`"):
        relax.BlockBuilder().emit(R.exp(tensor("x", (2,))))


def test_emit_output_outside_dataflow():
    x = tensor("x", (2,))
    bb = relax.BlockBuilder()
    with pytest.raises(relax.BlockBuilderError, match=r"bb.emit_output must be called inside "
                                                      r"`with bb.dataflow\(\):`"):
        with bb.function("main", [x]):
            bb.emit_output(R.exp(x))


def test_emit_func_output_inside_dataflow():
    x = tensor("x", (2,))
    bb = relax.BlockBuilder()
    with pytest.raises(relax.BlockBuilderError, match="after the `with bb.dataflow"):
        with bb.function("main", [x]):
            with bb.dataflow():
                gv = bb.emit_output(R.exp(x))
                bb.emit_func_output(gv)


def test_function_without_output():
    x = tensor("x", (2,))
    bb = relax.BlockBuilder()
    with pytest.raises(relax.BlockBuilderError, match="ended without bb.emit_func_output"):
        with bb.function("main", [x]):
            bb.emit(R.exp(x))
    with bb.function("main", [x]):   # the builder is usable again afterwards
        bb.emit_func_output(bb.emit(R.exp(x)))
    assert "main" in bb.get()


def test_dataflow_var_cannot_be_returned():
    """Returning a DataflowVar is refused unless emit_output exported it (then its Var is
    returned, as TVM-era translators expect)."""
    x = tensor("x", (2,))
    bb = relax.BlockBuilder()
    with pytest.raises(relax.BlockBuilderError, match="lv is a DataflowVar"):
        with bb.function("main", [x]):
            with bb.dataflow():
                lv = bb.emit(R.exp(x))
                bb.emit_output(R.exp(lv))
            bb.emit_func_output(lv)


def test_nested_functions_and_dataflow_outside_function():
    x = tensor("x", (2,))
    bb = relax.BlockBuilder()
    with pytest.raises(relax.BlockBuilderError, match="functions cannot nest"):
        with bb.function("main", [x]):
            with bb.function("inner", [x]):
                pass
    with pytest.raises(relax.BlockBuilderError, match=r"bb.dataflow\(\) must be called inside"):
        with bb.dataflow():
            pass


# -- visitor and mutator -----------------------------------------------------------------------
def build_fma_function():
    x, y, z = tensor("x", (3, 4)), tensor("y", (3, 4)), tensor("z", (3, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y, z]):
        with bb.dataflow():
            lv0 = bb.emit(R.multiply(x, y))
            gv0 = bb.emit_output(R.add(lv0, z))
        bb.emit_func_output(gv0)
    return bb.get()


@relax.expr_functor.mutator
class EwiseFMARewriter(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        add_op = relax.Op.get("relax.add")
        multiply_op = relax.Op.get("relax.multiply")
        ewise_fma_op = relax.Op.get("relax.ewise_fma")

        if call.op != add_op:
            return call

        value = self.lookup_binding(call.args[0])
        if not isinstance(value, relax.Call) or value.op != multiply_op:
            return call

        return relax.Call(ewise_fma_op, [value.args[0], value.args[1], call.args[1]], None, None)


@relax.expr_functor.visitor
class CallCounter(relax.PyExprVisitor):
    def __init__(self):
        self.counts = {}

    def visit_call_(self, call):
        name = call.op.name if isinstance(call.op, relax.Op) else call.op.name_hint
        self.counts[name] = self.counts.get(name, 0) + 1
        super().visit_call_(call)


def test_mutator_rewrites_multiply_add_into_ewise_fma():
    mod = build_fma_function()
    updated = EwiseFMARewriter().visit_expr(mod["main"])
    (block,) = updated.body.blocks
    fma = block.bindings[-1].value
    assert fma.op is relax.Op.get("relax.ewise_fma")
    assert fma.args == (*mod["main"].params[:2], mod["main"].params[2])
    assert fma.struct_info.script() == 'R.Tensor((3, 4), dtype="float32")'
    assert "R.ewise_fma(x, y, z)" in updated.script()
    assert CallCounter().visit_expr(updated) is None


def test_mutator_keeps_unchanged_functions_identical():
    func = build_mlp()["main"]
    assert relax.PyExprMutator().visit_expr(func) is func


def test_visitor_counts_calls():
    counter = CallCounter()
    counter.visit_expr(build_mlp()["main"])
    assert counter.counts == {"relax.call_tir": 3}
    counter = CallCounter()
    counter.visit_expr(build_fma_function()["main"])
    assert counter.counts == {"relax.multiply": 1, "relax.add": 1}


def test_mutator_fuses_into_a_new_function_of_the_module():
    class MultiplyAddFusor(relax.PyExprMutator):
        def __init__(self, mod):
            super().__init__(mod)
            self.mod_ = mod

        def transform(self):
            for gv, func in self.mod_.functions.items():
                self.builder_.update_func(gv, self.visit_expr(func))
            return self.builder_.get()

        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            value = self.lookup_binding(call.args[0])
            if call.op != relax.Op.get("relax.add") or not isinstance(value, relax.Call):
                return call
            a, b, c = (relax.Var(n, arg.struct_info) for n, arg in zip("abc", (*value.args, call.args[1])))
            bb = relax.BlockBuilder()
            with bb.function("fused_multiply_add", [a, b, c], attrs={"Primitive": 1}):
                with bb.dataflow():
                    gv = bb.emit_output(R.add(R.multiply(a, b), c))
                bb.emit_func_output(gv)
            gvar = self.builder_.add_func(bb.get()["fused_multiply_add"], "fused_multiply_add")
            return relax.Call(gvar, [*value.args, call.args[1]], None, None)

    mod = MultiplyAddFusor(build_fma_function()).transform()
    assert sorted(gv.name_hint for gv in mod.functions) == ["fused_multiply_add", "main"]
    assert mod["fused_multiply_add"].attrs["Primitive"] == 1
    text = mod.script()
    assert "cls.fused_multiply_add(x, y, z)" in text
    assert 'R.func_attr({"Primitive": 1})' in text
    last = mod["main"].body.blocks[0].bindings[-1]
    assert last.var.struct_info.script() == 'R.Tensor((3, 4), dtype="float32")'
