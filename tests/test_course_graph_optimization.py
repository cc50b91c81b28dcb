"""Computational graph optimization as the course teaches it, in both eras of the API.

The chapter reads a graph-level function apart (params, blocks, bindings), rewrites it with a
user-written ``PyExprMutator`` (multiply + add -> ewise_fma; dense + add -> a "Primitive" fused
function), lowers its ops to PrimFuncs with ``call_te``, fuses them with ``FuseTIR`` and runs
the result. Its 2022 text spells several things differently (bare ``Tensor(...)`` annotations,
``relax.dataflow()`` in scripts, ``relax.Var(name, shape, DynTensorType)``, ``relax.op.dense``,
``x.shape_`` / ``x._checked_type_``, ``relax.vm.build``); each test runs the two spellings and
checks they mean the same IR and compute what numpy computes.
"""
from __future__ import annotations  # the 2022 scripts' bare Tensor(...) annotations stay text

import re

import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, topi
from mlc_lab.ir import assert_structural_equal, structural_equal
from mlc_lab.ir.transform import module_pass
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T
from mlc_lab.script.errors import ScriptError

RNG = np.random.default_rng(7)
# The course writes tvm.ir.Op.get; that name belongs to the IR package, relax.Op is the same class.
Op = getattr(mlc_lab.ir, "Op", relax.Op)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def run(mod, *args, build=relax.build):
    vm = relax.VirtualMachine(build(mod, "llvm"), mlc_lab.cpu())
    return vm["main"](*[mlc_lab.nd.array(a) for a in args]).numpy()


# -- reading a function apart ------------------------------------------------------------------
@I.ir_module
class ScaledSum2022:
    @R.function
    def main(p: Tensor((2, 5), "float32"), q: Tensor((2, 5), "float32")):
        with relax.dataflow():
            t0 = relax.multiply(p, q)
            t1 = relax.add(t0, q)
            relax.output(t1)
        return t1


@I.ir_module
class ScaledSumToday:
    @R.function
    def main(p: R.Tensor((2, 5), "float32"), q: R.Tensor((2, 5), "float32")):
        with R.dataflow():
            t0 = R.multiply(p, q)
            t1 = R.add(t0, q)
            R.output(t1)
        return t1


def test_2022_script_is_todays_module():
    assert_structural_equal(ScaledSum2022, ScaledSumToday)


def test_function_reads_apart():
    func = ScaledSum2022["main"]
    assert isinstance(func, relax.Function)
    assert [p.name_hint for p in func.params] == ["p", "q"]
    assert isinstance(func.body, relax.SeqExpr)
    (block,) = func.body.blocks
    assert isinstance(block, relax.DataflowBlock)
    first, second = block.bindings
    assert isinstance(first.var, relax.expr.DataflowVar) and first.var.name_hint == "t0"
    assert isinstance(first.value, relax.Call) and first.value.op == Op.get("relax.multiply")
    assert second.value.args[0] is first.var
    assert not isinstance(second.var, relax.DataflowVar)    # the block's output outlives it
    assert func.body.body is second.var


# -- a rewrite: multiply + add -> ewise_fma ----------------------------------------------------
@relax.expr_functor.mutator
class MulAddToFma(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op != Op.get("relax.add"):
            return call
        product = self.lookup_binding(call.args[0])
        if not isinstance(product, relax.Call) or product.op != Op.get("relax.multiply"):
            return call
        # The 2022 constructor: Call(op, args, attrs, type_args).
        return relax.Call(Op.get("relax.ewise_fma"), [*product.args, call.args[1]], None, None)


def test_fma_rewrite_then_remove_unused():
    rewritten = MulAddToFma().visit_expr(ScaledSum2022["main"])
    ops = [b.value.op.name for b in rewritten.body.blocks[0].bindings]
    assert ops == ["relax.multiply", "relax.ewise_fma"]      # the product is now unused
    cleaned = relax.analysis.remove_all_unused(rewritten)
    (only,) = cleaned.body.blocks[0].bindings
    assert only.value.op == Op.get("relax.ewise_fma")
    p, q = rand(2, 5), rand(2, 5)
    np.testing.assert_allclose(run(mlc_lab.IRModule({"main": cleaned}), p, q), p * q + q, rtol=1e-6)
    with pytest.raises(TypeError, match="expects a relax.Function"):
        relax.analysis.remove_all_unused(ScaledSum2022)


# -- dense + add fusion, lowering with call_te, FuseTIR -----------------------------------------
WEIGHTS = {"w0": rand(16, 12), "b0": rand(16), "w1": rand(6, 16), "b1": rand(6)}


def numpy_mlp(x):
    h = np.maximum(x @ WEIGHTS["w0"].T + WEIGHTS["b0"], 0)
    return h @ WEIGHTS["w1"].T + WEIGHTS["b1"]


def mlp_2022():
    bb = relax.BlockBuilder()
    x = relax.Var("x", (3, 12), relax.DynTensorType(2, "float32"))
    w0, b0, w1, b1 = (relax.const(WEIGHTS[k], "float32") for k in ("w0", "b0", "w1", "b1"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.dense(x, w0))
            h = bb.emit(relax.op.add(h, b0))
            h = bb.emit(relax.op.relu(h))
            h = bb.emit(relax.op.dense(h, w1))
            gv = bb.emit_output(relax.op.add(h, b1))
        bb.emit_func_output(gv)
    return bb.get()


def mlp_today():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((3, 12), "float32"))
    w0, b0, w1, b1 = (relax.const(WEIGHTS[k]) for k in ("w0", "b0", "w1", "b1"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.dense(x, w0))
            h = bb.emit(relax.op.add(h, b0))
            h = bb.emit(relax.op.nn.relu(h))
            h = bb.emit(relax.op.nn.dense(h, w1))
            gv = bb.emit_output(relax.op.add(h, b1))
        bb.emit_func_output(gv)
    return bb.get()


def param_like(name, value, era):
    """A parameter standing for ``value``: 2022 reads shape_ and _checked_type_, today struct_info."""
    if era == "2022":
        return relax.Var(name, value.shape_, value._checked_type_)
    return relax.Var(name, value.struct_info)


@relax.expr_functor.mutator
class DenseAddFusion(relax.PyExprMutator):
    def __init__(self, mod, era):
        super().__init__()
        self.mod_, self.era, self.count = mod, era, 0

    def transform(self):
        for gv, func in self.mod_.functions.items():
            if isinstance(func, relax.Function) and not func.attrs.get("Primitive"):
                func = relax.analysis.remove_all_unused(self.visit_expr(func))
            self.builder_.update_func(gv, func)
        return self.builder_.get()

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if call.op != Op.get("relax.add"):
            return call
        dense = self.lookup_binding(call.args[0])
        if not isinstance(dense, relax.Call) or dense.op != Op.get("relax.nn.dense"):
            return call
        args = [dense.args[0], dense.args[1], call.args[1]]
        params = [param_like(n, a, self.era) for n, a in zip("xwb", args)]
        bb = relax.BlockBuilder()
        name = f"dense_bias{self.count}"
        self.count += 1
        with bb.function(name, params):
            with bb.dataflow():
                t = bb.emit(relax.op.nn.dense(params[0], params[1]))
                out = bb.emit_output(relax.op.add(t, params[2]))
            bb.emit_func_output(out)
        gv = self.builder_.add_func(bb.get()[name].with_attr("Primitive", 1), name)
        return relax.Call(gv, args, None, None)


@module_pass(opt_level=2, name="DenseAddFusion")
class DenseAddFusionPass:
    def __init__(self, era):
        self.era = era

    def transform_module(self, mod, ctx):
        return DenseAddFusion(mod, self.era).transform()


LOWERINGS = {
    "relax.nn.dense": lambda bb, call: bb.call_te(topi.nn.dense, *call.args),
    "relax.add": lambda bb, call: bb.call_te(topi.add, *call.args),
    "relax.nn.relu": lambda bb, call: bb.call_te(topi.nn.relu, call.args[0]),
}


@relax.expr_functor.mutator
class OpsToTIR(relax.PyExprMutator):
    def __init__(self, mod):
        super().__init__()
        self.mod_ = mod
        self.table = {Op.get(name): f for name, f in LOWERINGS.items()}

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        return self.table[call.op](self.builder_, call) if call.op in self.table else call

    def transform(self):
        for gv, func in self.mod_.functions.items():
            if isinstance(func, relax.Function):
                self.builder_.update_func(gv, self.visit_expr(func))
        return self.builder_.get()


@pytest.mark.parametrize("era", ["2022", "today"])
def test_fuse_lower_fusetir_run(era):
    model = mlp_2022() if era == "2022" else mlp_today()
    fused = DenseAddFusionPass(era)(model)
    primitives = [gv.name_hint for gv, f in fused.functions.items()
                  if isinstance(f, relax.Function) and f.attrs.get("Primitive") == 1]
    assert sorted(primitives) == ["dense_bias0", "dense_bias1"]
    main_ops = [b.value.op for b in fused["main"].body.blocks[0].bindings]
    assert [getattr(o, "name", None) or o.name_hint for o in main_ops] == \
        ["dense_bias0", "relax.nn.relu", "dense_bias1"]

    lowered = OpsToTIR(fused).transform()
    final = relax.transform.FuseTIR()(lowered)
    kernels = sorted(gv.name_hint for gv, f in final.functions.items() if isinstance(f, mlc_lab.tir.PrimFunc))
    assert kernels == ["dense_bias0", "dense_bias1", "relu"]
    assert all(b.value.op == Op.get("relax.call_tir") for b in final["main"].body.blocks[0].bindings)

    x = rand(3, 12)
    build = relax.vm.build if era == "2022" else relax.build
    np.testing.assert_allclose(run(final, x, build=build), numpy_mlp(x), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(model, x), numpy_mlp(x), rtol=1e-4, atol=1e-5)


def test_both_eras_build_the_same_model():
    assert structural_equal(mlp_2022(), mlp_today())


# -- the 2022 types ------------------------------------------------------------------------------
def test_2022_var_and_types_map_to_struct_info():
    x = relax.Var("x", (4, 8), relax.DynTensorType(2, "float16"))
    assert structural_equal(x.struct_info, relax.TensorStructInfo((4, 8), "float16"))
    assert x.checked_type == relax.DynTensorType(2, "float16") and x._checked_type_ == x.checked_type
    assert [d.value for d in x.shape_.values] == [4, 8]
    rank_only = relax.Var("r", None, relax.DynTensorType(3, "float32"))
    assert rank_only.struct_info.shape is None and rank_only.struct_info.ndim == 3
    lv = relax.expr.DataflowVar("lv", [2], relax.DynTensorType(1, "int32"))
    assert isinstance(lv, relax.DataflowVar) and lv.struct_info.dtype == "int32"
    c = relax.const(np.zeros((2, 3), "float32"), "float32")
    assert c.checked_type == relax.DynTensorType(2, "float32")
    assert relax.ShapeExpr([2, 3]).checked_type == relax.ShapeType(2)


def test_2022_var_errors_name_todays_form():
    with pytest.raises(TypeError, match=r'must be a StructInfo such as '
                                        r'relax.TensorStructInfo\(\(4, 8\), "float32"\)'):
        relax.Var("x", (4, 8))
    with pytest.raises(ValueError, match=r"has 2 dimension\(s\) but the type says ndim=3; write "
                                         r'relax.TensorStructInfo\(\(4, 8\), "float32"\)'):
        relax.Var("x", (4, 8), relax.DynTensorType(3, "float32"))
    with pytest.raises(TypeError, match="ndim must be an int >= -1"):
        relax.DynTensorType("float32")


# -- 2022 scripts with symbolic sizes, call_tir with a shape and dtype, extern functions --------
@I.ir_module
class Symbolic2022:
    @T.prim_func
    def triple(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 3), "float32")
        B = T.match_buffer(b, (n, 3), "float32")
        for i, j in T.grid(n, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(3)

    @R.function
    def main(u: Tensor((n, 3), "float32"), v: Tensor((n, 3), "float32")) -> Tensor(None, "float32", ndim=2):
        with relax.dataflow():
            t0 = R.call_tir(triple, (u,), (n, 3), dtype="float32")
            t1: Tensor((n, 3), "float32") = relax.add(t0, v)
            t2 = R.call_tir("course.negate", (t1,), (n, 3), dtype="float32")
            relax.output(t2)
        return t2


@I.ir_module
class SymbolicToday:
    @T.prim_func
    def triple(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 3), "float32")
        B = T.match_buffer(b, (n, 3), "float32")
        for i, j in T.grid(n, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(3)

    @R.function
    def main(u: R.Tensor(("n", 3), "float32"), v: R.Tensor(("n", 3), "float32")) -> R.Tensor(dtype="float32", ndim=2):
        n = T.int64()
        cls = SymbolicToday
        with R.dataflow():
            t0 = R.call_tir(cls.triple, (u,), out_sinfo=R.Tensor((n, 3), "float32"))
            t1: R.Tensor((n, 3), "float32") = R.add(t0, v)
            t2 = R.call_dps_packed("course.negate", (t1,), out_sinfo=R.Tensor((n, 3), "float32"))
            R.output(t2)
        return t2


@mlc_lab.register_func("course.negate", override=True)
def _negate(a, out):
    out.copyfrom(-a.numpy())


def test_2022_symbolic_script_matches_today_and_runs():
    assert_structural_equal(Symbolic2022, SymbolicToday)
    u, v = rand(5, 3), rand(5, 3)
    np.testing.assert_allclose(run(Symbolic2022, u, v, build=relax.vm.build), -(3 * u + v), rtol=1e-6)


def test_2022_call_tir_in_python():
    gv = relax.GlobalVar("f")
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    old = relax.call_tir(gv, (x,), (2, 3), dtype="float32")
    assert structural_equal(old, relax.op.call_tir(gv, (x,), relax.TensorStructInfo((2, 3), "float32")))
    two = relax.call_tir(gv, (x,), [(2, 3), (3,)], ["float32", "int32"])
    assert [s.dtype for s in two.struct_info.elements] == ["float32", "int32"]
    extern = relax.call_tir("env.f", [x], (2, 3), "float32")
    assert extern.op == Op.get("relax.call_dps_packed") and extern.args[0].global_symbol == "env.f"
    with pytest.raises(TypeError, match=r'needs its dtype: write out_sinfo=R.Tensor\(\(2, 3\), "float32"\)'):
        relax.call_tir(gv, (x,), (2, 3))
    with pytest.raises(TypeError, match="2 output shape"):
        relax.call_tir(gv, (x,), [(2, 3), (3,)], ["float32"])
    with pytest.raises(TypeError, match="dtype= goes with an output shape"):
        relax.call_tir(gv, (x,), relax.TensorStructInfo((2, 3), "float32"), dtype="float32")


# -- what old syntax that cannot be mapped says ------------------------------------------------
def _script_error(source: str) -> str:
    with pytest.raises(ScriptError) as info:
        mlc_lab.script.from_source(source, extra_vars={"relax": relax})
    return str(info.value)


@pytest.mark.parametrize("source, message", [
    ("@R.function\ndef f(x: Tensr((3, 4), 'float32')):\n    return x\n",
     "'Tensr' is not defined: in an annotation an unknown name is a symbolic size"),
    ("@R.function\ndef f(x: Tensor):\n    return x\n",
     "Tensor must be called with a shape and a dtype"),
    ("@R.function\ndef f(x: Tensor((3,), 'float32')):\n    y = Tensor((3,), 'float32')\n    return x\n",
     "`Tensor` is not defined here; struct info is written R.Tensor"),
    ("@R.function\ndef f(x: Tensor((3,), 'float32')):\n    y = relax.match_shape(x, (3,))\n    return x\n",
     "R.match_shape \\(a 2022 form, not supported\\); annotate the variable"),
    ("@R.function\ndef f(x: Tensor((3, 4), 'float32')):\n    y = relax.dense(x, x)\n    return y\n",
     "unknown function R.dense; did you mean R.nn.dense"),
    ("@R.function\ndef f(x: Tensor((3,), 'float32')):\n    with relax.dataflow():\n"
     "        y = R.call_tir('env.f', (x,), (3,))\n        relax.output(y)\n    return y\n",
     'the output shape \\(3,\\) needs its dtype'),
])
def test_old_syntax_errors_say_what_to_write(source, message):
    assert re.search(message, _script_error(source))


def test_const_takes_a_2022_type_for_its_dtype():
    w = np.arange(6, dtype="float64").reshape(2, 3)
    c = relax.const(w, relax.DynTensorType(2, "float32"))
    assert c.data.dtype == np.float32 and c.struct_info.dtype == "float32"
    np.testing.assert_array_equal(c.data, w.astype("float32"))
    with pytest.raises(ValueError, match="2 dimensions but the type"):
        relax.const(w, relax.DynTensorType(3, "float32"))
