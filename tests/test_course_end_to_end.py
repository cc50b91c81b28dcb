"""Course-era names for end-to-end models: an IRModule mixing relax and loop-level functions,
built with ``relax.vm_build.build`` and timed through ``vm.module.time_evaluator``; operator
identity with ``mlc_lab.ir.Op.get``; ``relax.analysis.remove_all_unused`` after a rewrite.
Every result is checked against numpy."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax
from mlc_lab.relax import op as rop
from mlc_lab.runtime import BenchmarkResult
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T


@mlc_lab.script.ir_module
class TwoLayer:
    @T.prim_func
    def scale_shift(X: T.Buffer((2, 6), "float32"), S: T.Buffer((6,), "float32"),
                    Y: T.Buffer((2, 6), "float32")):
        T.func_attr({"global_symbol": "scale_shift", "tir.noalias": True})
        for r, c in T.grid(2, 6):
            with T.block("Y"):
                vr, vc = T.axis.remap("SS", [r, c])
                Y[vr, vc] = X[vr, vc] * S[vc] + T.float32(1)

    @T.prim_func
    def clamp_low(X: T.Buffer((2, 6), "float32"), Y: T.Buffer((2, 6), "float32")):
        T.func_attr({"global_symbol": "clamp_low", "tir.noalias": True})
        for r, c in T.grid(2, 6):
            with T.block("Y"):
                vr, vc = T.axis.remap("SS", [r, c])
                Y[vr, vc] = T.max(X[vr, vc], T.float32(0.5))

    @R.function
    def main(x: R.Tensor((2, 6), "float32"), s: R.Tensor((6,), "float32")):
        cls = TwoLayer
        with R.dataflow():
            lv0 = R.call_tir(cls.scale_shift, (x, s), out_sinfo=R.Tensor((2, 6), dtype="float32"))
            out = R.call_tir(cls.clamp_low, (lv0,), out_sinfo=R.Tensor((2, 6), dtype="float32"))
            R.output(out)
        return out


def reference(x, s):
    return np.maximum(x * s + 1, 0.5)


def inputs(seed=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((2, 6)).astype("float32"),
            rng.standard_normal(6).astype("float32"))


@pytest.mark.parametrize("target", ["llvm", "python"])
def test_vm_build_module_path_builds_a_mixed_module(target):
    assert relax.vm_build.build is relax.build
    ex = relax.vm_build.build(TwoLayer, target=target)
    vm = relax.VirtualMachine(ex, mlc_lab.device("llvm", 0))
    x, s = inputs()
    out = vm["main"](mlc_lab.nd.array(x, mlc_lab.cpu()), mlc_lab.nd.array(s))
    np.testing.assert_allclose(out.numpy(), reference(x, s), rtol=1e-6)


def test_vm_module_time_evaluator_times_main():
    vm = relax.VirtualMachine(relax.build(TwoLayer, target="llvm"), mlc_lab.cpu())
    assert vm.module is vm
    x, s = (mlc_lab.nd.array(a) for a in inputs())
    timer = vm.module.time_evaluator("main", mlc_lab.cpu(), number=3, repeat=2)
    result = timer(x, s)
    assert isinstance(result, BenchmarkResult) and len(result.results) == 2
    assert all(t > 0 for t in result.results)
    with pytest.raises(KeyError, match="no relax function named 'predict'"):
        vm.module.time_evaluator("predict", mlc_lab.cpu())


# -- operators by name, and removing what a rewrite leaves unused ---------------------------------
def multiply_add():
    a, b, c = (relax.Var(n, relax.TensorStructInfo((4, 5), "float32")) for n in "abc")
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b, c]):
        with bb.dataflow():
            prod = bb.emit(rop.multiply(a, b))
            gv = bb.emit_output(rop.add(prod, c))
        bb.emit_func_output(gv)
    return bb.get()


class FuseMultiplyAdd(relax.PyExprMutator):
    """add(multiply(x, y), z) -> ewise_fma(x, y, z), matching ops by identity with Op.get."""

    def visit_call_(self, call):
        call = self.visit_expr_post_order(call)
        if not call.op == mlc_lab.ir.Op.get("relax.add"):
            return call
        producer = self.lookup_binding(call.args[0])
        if not isinstance(producer, relax.Call) or producer.op != mlc_lab.ir.Op.get("relax.multiply"):
            return call
        return relax.Call(mlc_lab.ir.Op.get("relax.ewise_fma"),
                          [producer.args[0], producer.args[1], call.args[1]], None, None)


def test_ir_op_get_is_the_registered_relax_op():
    add = mlc_lab.ir.Op.get("relax.add")
    assert add is relax.Op.get("relax.add") and add.name == "relax.add"
    (binding,) = [b for b in multiply_add()["main"].body.blocks[0].bindings if b.value.op is add]
    assert binding.value.op == add and not binding.value.op != add
    assert {add: "found"}[binding.value.op] == "found"
    with pytest.raises(KeyError, match="no relax op named 'relax.plus'"):
        mlc_lab.ir.Op.get("relax.plus")


@pytest.mark.parametrize("target", ["llvm", "python"])
def test_remove_all_unused_drops_the_bindings_a_rewrite_orphaned(target):
    func = multiply_add()["main"]
    rewritten = FuseMultiplyAdd().visit_expr(func)
    ops = [b.value.op.name for b in rewritten.body.blocks[0].bindings]
    assert ops == ["relax.multiply", "relax.ewise_fma"]   # the multiply is now dead
    cleaned = relax.analysis.remove_all_unused(rewritten)
    assert [b.value.op.name for b in cleaned.body.blocks[0].bindings] == ["relax.ewise_fma"]
    assert relax.analysis.remove_all_unused(cleaned) is cleaned

    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal((4, 5)).astype("float32") for _ in range(3))
    vm = relax.VirtualMachine(relax.build(mlc_lab.IRModule({"main": cleaned}), target),
                              mlc_lab.cpu())
    out = vm["main"](*(mlc_lab.nd.array(v) for v in (a, b, c)))
    np.testing.assert_allclose(out.numpy(), a * b + c, rtol=1e-6)


def test_remove_all_unused_takes_a_function():
    with pytest.raises(TypeError, match="DeadCodeElimination"):
        relax.analysis.remove_all_unused(multiply_add())


def test_testing_assert_allclose_takes_vm_outputs():
    vm = relax.VirtualMachine(relax.build(TwoLayer, target="llvm"), mlc_lab.cpu())
    x, s = inputs()
    out = vm["main"](mlc_lab.nd.array(x), mlc_lab.nd.array(s))
    mlc_lab.testing.assert_allclose(out, reference(x, s), rtol=1e-6)
    mlc_lab.testing.assert_allclose(reference(x, s), out, rtol=1e-6)
    with pytest.raises(AssertionError):
        mlc_lab.testing.assert_allclose(out, reference(x, s) + 1e-3, rtol=1e-6)
