"""The course book's current API names work beside the course-era ones, one implementation each:
``mlc_lab.compile`` (PrimFuncs to a runtime Module, graph modules to a VM Executable),
``runtime.tensor`` / ``runtime.Tensor`` / ``runtime.empty``, ``register_global_func``, ``.mod``
and ``.jit()`` on what ``compile`` returns; and the script and VM forms the book's programs use:
sizes declared together (``m, n = T.int64(), T.int64()``) in an ``R.function``, and
``R.call_dps_packed("f", ...)`` naming a PrimFunc of the same module."""
from __future__ import annotations

import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd, relax, te
from mlc_lab.runtime import BenchmarkResult, Module
from mlc_lab.runtime.packed import get_global_func, remove_global_func
from mlc_lab.script import ScriptError
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T

RNG = np.random.default_rng(32)


def scale_add_func():
    """out = 3 * x + y over 6 x 5 float32 arrays, written with te."""
    x = te.placeholder((6, 5), name="x")
    y = te.placeholder((6, 5), name="y")
    out = te.compute((6, 5), lambda i, j: x[i, j] * 3.0 + y[i, j], name="out")
    return te.create_prim_func([x, y, out])


@I.ir_module
class TwoKernels:
    @T.prim_func
    def negate(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.float32(0) - A[vi]

    @T.prim_func
    def square(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * A[vi]


@I.ir_module
class RowScale:
    """A PrimFunc of symbolic width, called by name through call_dps_packed; the graph
    function declares its sizes together in one statement."""
    @T.prim_func
    def halve(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * T.float32(0.5)

    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("m",), "float32")):
        n, m = T.int64(), T.int64()
        with R.dataflow():
            hx = R.call_dps_packed("halve", (x,), R.Tensor((n,), "float32"))
            hy = R.call_dps_packed("halve", (y,), R.Tensor((m,), "float32"))
            out = (hx, hy)
            R.output(out)
        return out


@I.ir_module
class AddGraph:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            out = R.multiply(R.add(x, y), y)
            R.output(out)
        return out


# -- mlc_lab.compile ----------------------------------------------------------------------------------
def test_compile_prim_func_gives_the_runtime_module_build_gives():
    x, y = RNG.random((6, 5), dtype="float32"), RNG.random((6, 5), dtype="float32")
    lib = mlc_lab.compile(scale_add_func(), target="llvm")
    assert isinstance(lib, Module) and type(lib) is type(mlc_lab.build(scale_add_func(), "llvm"))
    out = mlc_lab.runtime.tensor(np.zeros((6, 5), "float32"))
    lib(mlc_lab.runtime.tensor(x), mlc_lab.runtime.tensor(y), out)
    np.testing.assert_allclose(out.numpy(), 3 * x + y, rtol=1e-6)


def test_compile_module_of_prim_funcs_calls_each_by_name():
    lib = mlc_lab.compile(TwoKernels, target="llvm")
    a = RNG.standard_normal(8).astype("float32")
    neg, sq = nd.empty((8,), "float32"), nd.empty((8,), "float32")
    lib["negate"](nd.array(a), neg)
    lib.mod["square"](nd.array(a), sq)        # through .mod too, as the current book writes it
    np.testing.assert_allclose(neg.numpy(), -a)
    np.testing.assert_allclose(sq.numpy(), a * a, rtol=1e-6)


def test_compile_defaults_to_llvm_and_accepts_a_target_object():
    assert mlc_lab.compile(scale_add_func()).target == "llvm"
    lib = mlc_lab.compile(scale_add_func(), mlc_lab.target.Target("llvm", host="llvm"))
    assert lib.target == "llvm"


def test_mod_time_evaluator_on_what_compile_returns():
    lib = mlc_lab.compile(TwoKernels, target="llvm")
    assert lib.mod is lib and lib.jit() is lib
    a, b = nd.array(np.ones(8, "float32")), nd.empty((8,), "float32")
    timer = lib.mod.time_evaluator("square", mlc_lab.cpu(), number=3, repeat=2)
    result = timer(a, b)
    assert isinstance(result, BenchmarkResult) and len(result.results) == 2 and result.mean > 0
    np.testing.assert_array_equal(b.numpy(), np.ones(8, "float32"))


def test_compile_graph_module_gives_an_executable_the_vm_runs():
    ex = mlc_lab.compile(AddGraph, target="llvm")
    assert isinstance(ex, relax.vm.Executable)
    x, y = RNG.random((3, 4), dtype="float32"), RNG.random((3, 4), dtype="float32")
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    out = vm["main"](mlc_lab.runtime.tensor(x), mlc_lab.runtime.tensor(y))
    np.testing.assert_allclose(out.numpy(), (x + y) * y, rtol=1e-6)


def test_compile_relax_pipeline_choices():
    # None: no passes, so high-level ops stay and the build says what to do.
    with pytest.raises(ValueError, match="LegalizeOps"):
        mlc_lab.compile(AddGraph, "llvm", relax_pipeline=None)
    ex = mlc_lab.compile(AddGraph, "llvm", relax_pipeline=[relax.transform.LegalizeOps()])
    x = np.full((3, 4), 2, "float32")
    np.testing.assert_allclose(relax.VirtualMachine(ex, mlc_lab.cpu())["main"](x, x).numpy(), 8.0)
    with pytest.raises(ValueError, match="unknown relax_pipeline 'zero'"):
        mlc_lab.compile(AddGraph, "llvm", relax_pipeline="zero")


def test_compile_refuses_what_it_cannot_honour():
    with pytest.raises(TypeError, match="expects a PrimFunc or an IRModule, got Executable"):
        mlc_lab.compile(mlc_lab.compile(AddGraph))
    with pytest.raises(ValueError, match="tir_pipeline"):
        mlc_lab.compile(scale_add_func(), "llvm", tir_pipeline=None)
    with pytest.raises(ValueError, match="relax_pipeline applies to modules with R.function"):
        mlc_lab.compile(TwoKernels, "llvm", relax_pipeline=None)


# -- runtime.tensor, runtime.Tensor, register_global_func ---------------------------------------------
def test_runtime_tensor_is_nd_array():
    source = np.arange(6, dtype="int64").reshape(2, 3)
    t = mlc_lab.runtime.tensor(source, mlc_lab.cpu())
    assert isinstance(t, mlc_lab.runtime.Tensor) and mlc_lab.runtime.Tensor is nd.NDArray
    assert t.shape == (2, 3) and t.dtype == "int64" and t.device == mlc_lab.cpu()
    source[0, 0] = 99                      # a copy, as nd.array makes
    assert t.numpy()[0, 0] == 0
    assert mlc_lab.runtime.empty((2, 2), "float16").dtype == "float16"
    with pytest.raises(ValueError, match="memory scope 'shared' is not supported"):
        mlc_lab.runtime.tensor(source, mem_scope="shared")


def test_register_global_func_shares_the_registry_and_its_rules():
    name = "book_test.clip_into"
    try:
        @mlc_lab.register_global_func(name)
        def clip_into(x: mlc_lab.runtime.Tensor, out: mlc_lab.runtime.Tensor):
            out.copyfrom(np.clip(x.numpy(), 0, 1))

        assert get_global_func(name) is clip_into is mlc_lab.get_global_func(name)
        with pytest.raises(ValueError, match="already registered"):
            mlc_lab.register_global_func(name, lambda x, out: None)

        @mlc_lab.register_global_func(name, override=True)
        def clip_into_again(x, out):
            out.copyfrom(np.clip(x.numpy(), -1, 1))

        assert mlc_lab.get_global_func(name) is clip_into_again
    finally:
        remove_global_func(name)


def test_registered_function_runs_from_a_compiled_graph():
    name = "book_test.twice"

    @I.ir_module
    class CallsRegistered:
        @R.function
        def main(x: R.Tensor((4,), "float32")):
            with R.dataflow():
                out = R.call_dps_packed("book_test.twice", (x,), R.Tensor((4,), "float32"))
                R.output(out)
            return out

    @mlc_lab.register_global_func(name, override=True)
    def twice(x, out):
        out.copyfrom(2 * x.numpy())
    try:
        vm = relax.VirtualMachine(mlc_lab.compile(CallsRegistered, "llvm"), mlc_lab.cpu())
        np.testing.assert_allclose(vm["main"](np.arange(4, dtype="float32")).numpy(), [0, 2, 4, 6])
    finally:
        remove_global_func(name)


# -- script and VM forms -------------------------------------------------------------------------------
def test_sizes_declared_together_mean_the_parameters_sizes():
    func = RowScale["main"]
    (n,), (m,) = func.params[0].struct_info.shape, func.params[1].struct_info.shape
    assert (str(n), str(m)) == ("n", "m")
    halved_x, halved_y = func.ret_struct_info.elements   # the results' sizes are the parameters'
    assert halved_x.shape[0] is n and halved_y.shape[0] is m
    assert mlc_lab.ir.structural_equal(mlc_lab.script.from_source(RowScale.script()), RowScale)


def test_call_dps_packed_names_a_prim_func_of_the_module():
    # The PrimFunc is called through its name; without passes nothing removes it from the module.
    ex = mlc_lab.compile(RowScale, "llvm", relax_pipeline=[relax.transform.LegalizeOps()])
    vm = relax.VirtualMachine(ex, mlc_lab.cpu())
    x, y = RNG.random(7, dtype="float32"), RNG.random(3, dtype="float32")
    hx, hy = vm["main"](x, y)
    np.testing.assert_allclose(hx.numpy(), x * 0.5)
    np.testing.assert_allclose(hy.numpy(), y * 0.5)


def test_tuple_declaration_must_be_all_sizes():
    source = '''
@R.function
def f(x: R.Tensor(("n",), "float32")):
    n, y = T.int64(), R.add(x, x)
    return x
'''
    with pytest.raises(ScriptError, match="bind one name per statement"):
        mlc_lab.script.from_source(source)
