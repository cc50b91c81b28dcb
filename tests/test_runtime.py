"""Devices, NDArrays, mlc_lab.build, runtime Modules, and the argument checks every call makes."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd, tir
from mlc_lab.ir import IRModule
from mlc_lab.target import Target
from mlc_lab.tir import BufferStore, For, PrimFunc, Var, const


def add_func(shape=(4,), name="add", dtype="float32"):
    """C[i...] = A[i...] + B[i...] over ``shape`` (entries may be Vars)."""
    A, B, C = (tir.decl_buffer(shape, dtype, n) for n in "ABC")
    loop_vars = [Var(f"i{k}") for k in range(len(shape))]
    body = BufferStore(C, A[tuple(loop_vars)] + B[tuple(loop_vars)], tuple(loop_vars))
    for var, extent in reversed(list(zip(loop_vars, shape))):
        extent = const(extent) if isinstance(extent, int) else extent
        body = For(var, const(0), extent, "serial", body)
    return PrimFunc((A, B, C), body, (("global_symbol", name),))


def scale_func():
    """B[i] = A[i] * s with a scalar parameter s."""
    A, B = (tir.decl_buffer((4,), "float32", n) for n in "AB")
    s, i = Var("s", "float32"), Var("i")
    body = For(i, const(0), const(4), "serial", BufferStore(B, A[i] * s, (i,)))
    return PrimFunc((A, B, s), body, (("global_symbol", "scale"),))


def arrays(shape=(4,)):
    rng = np.random.default_rng(0)
    return [nd.array(rng.random(shape).astype("float32")) for _ in range(2)] + [
        nd.empty(shape, "float32")]


# ---------------------------------------------------------------------------------------------
def test_devices():
    assert repr(mlc_lab.cpu()) == "cpu(0)" and repr(mlc_lab.cuda(1)) == "cuda(1)"
    assert mlc_lab.cpu().device_type == "cpu" and mlc_lab.cuda(1).index == 1
    assert mlc_lab.cpu().exist
    assert mlc_lab.cuda(0) == mlc_lab.Device("cuda", 0)
    assert isinstance(mlc_lab.cuda(0).exist, bool)
    assert not mlc_lab.cuda(1000).exist


def test_ndarray_copies_in_and_out():
    source = np.arange(6, dtype="float32").reshape(2, 3)
    a = nd.array(source)
    source[0, 0] = 100
    assert a.shape == (2, 3) and a.dtype == "float32" and a.device == mlc_lab.cpu()
    out = a.numpy()
    out[0, 1] = 100
    np.testing.assert_array_equal(a.numpy(), np.arange(6).reshape(2, 3))
    a.copyfrom(np.ones((2, 3), "float32"))
    np.testing.assert_array_equal(a.numpy(), 1)
    with pytest.raises(ValueError, match="shape"):
        a.copyfrom(np.ones(3, "float32"))
    e = nd.empty((2, 2), "int32")
    assert e.dtype == "int32" and e.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(nd.array([1, 2])), [1, 2])


def test_build_prim_func_and_call_in_place():
    lib = mlc_lab.build(add_func(), target="python")
    a, b, c = arrays()
    lib(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    lib["add"](a, b, c)
    lib.get_function("add")(a.numpy(), b.numpy(), c.numpy_view())  # numpy arrays work too
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())


def test_build_ir_module_names_functions_by_key():
    mod = IRModule({"first": add_func(name="ignored"), "second": scale_func()})
    lib = mlc_lab.build(mod, target="numpy")
    assert sorted(lib.function_names) == ["first", "second"]
    a, b, c = arrays()
    lib["first"](a, b, c)
    lib["second"](a, b, 2.0)
    np.testing.assert_allclose(b.numpy(), a.numpy() * 2)
    with pytest.raises(TypeError, match="holds 2 functions"):
        lib(a, b, c)
    with pytest.raises(KeyError, match="first, second"):
        lib["third"]


def test_unnamed_prim_func_is_main():
    func = add_func()
    func = PrimFunc(func.params, func.body)
    assert mlc_lab.build(func).function_names == ["main"]


@pytest.mark.parametrize("target", ["cuda", "cuda-sim", "opencl"])
def test_gpu_targets_refuse_loops_not_bound_to_gpu_threads(target):
    with pytest.raises(ValueError, match=r"loop \w+ is not bound to a GPU block or thread"):
        mlc_lab.build(add_func(), target=target)


def test_parse_target():
    target = Target("llvm -num-cores=2 -fast-math -mcpu=skylake")
    assert (target.kind.name, target.num_cores, target.fast_math, target.mcpu) == (
        "llvm", 2, True, "skylake")
    assert Target("python").kind.name == "python"
    with pytest.raises(ValueError, match="unknown"):
        mlc_lab.build(add_func(), target="tpu")


def test_time_evaluator():
    lib = mlc_lab.build(add_func())
    timer = lib.time_evaluator("add", mlc_lab.cpu(), number=3, repeat=2, min_repeat_ms=1)
    result = timer(*arrays())
    assert len(result.results) == 2 and result.mean > 0 and result.median > 0
    assert "mean (ms)" in repr(result)


# ---------------------------------------------------------------------------------------------
# Argument checking
def test_wrong_argument_count_names_function_and_parameters():
    lib = mlc_lab.build(add_func())
    message = r"add\(\) takes 3 argument\(s\) \(A, B, C\) but 2 were given"
    with pytest.raises(TypeError, match=message):
        lib["add"](*arrays()[:2])


def test_non_array_argument_names_the_parameter():
    lib = mlc_lab.build(add_func())
    a, b, c = arrays()
    with pytest.raises(TypeError, match="parameter B expects an NDArray or numpy array"):
        lib(a, [1.0, 2.0, 3.0, 4.0], c)


def test_shape_mismatch_names_parameter_dimension_and_sizes():
    lib = mlc_lab.build(add_func((4, 3)))
    a, b, c = arrays((4, 3))
    with pytest.raises(ValueError, match="parameter B: dimension 1 should be 3 but is 5"):
        lib(a, nd.empty((4, 5)), c)
    with pytest.raises(ValueError, match="parameter C expects a 2-d array"):
        lib(a, b, nd.empty((12,)))


def test_dtype_mismatch_names_parameter_and_dtypes():
    lib = mlc_lab.build(add_func())
    a, b, c = arrays()
    with pytest.raises(TypeError, match="parameter A expects dtype float32 but got float64"):
        lib(nd.array(np.zeros(4)), b, c)


def test_symbolic_dimension_is_bound_then_checked():
    n = Var("n")
    lib = mlc_lab.build(add_func((n,)))
    a, b, c = arrays((3,))
    lib(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    with pytest.raises(ValueError, match="parameter B: dimension 0 is n = 3 from A but B has 4"):
        lib(a, nd.empty((4,)), c)


def test_scalar_parameter_checks_its_type():
    lib = mlc_lab.build(scale_func())
    a, b, _ = arrays()
    lib(a, b, 3)
    np.testing.assert_allclose(b.numpy(), a.numpy() * 3)
    with pytest.raises(TypeError, match="parameter s expects a float32 scalar"):
        lib(a, b, "3")


def test_non_contiguous_output_is_written_back():
    lib = mlc_lab.build(add_func((4,)))
    a, b = np.arange(4, dtype="float32"), np.ones(4, "float32")
    out = np.zeros(8, "float32")
    lib(a, b, out[::2])
    np.testing.assert_array_equal(out[::2], a + 1)
    np.testing.assert_array_equal(out[1::2], 0)


def test_aliased_arguments_give_the_sequential_result():
    lib = mlc_lab.build(add_func((4,)))
    a = np.arange(4, dtype="float32")
    lib(a, a, a)  # in place: a = a + a
    np.testing.assert_array_equal(a, [0, 2, 4, 6])


def test_zero_dimensional_arrays_stay_zero_dimensional():
    a = mlc_lab.nd.array(np.float32(3.5))
    assert a.shape == () and a.numpy() == np.float32(3.5)
    assert mlc_lab.nd.empty((), "float32").shape == ()


def test_dlpack_shares_memory_both_ways():
    a = mlc_lab.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    view = np.from_dlpack(a)            # what torch.from_dlpack(a) does for a CPU array
    view[0, 0] = 42
    assert a.numpy()[0, 0] == 42
    source = np.arange(4, dtype="int32")
    b = mlc_lab.nd.from_dlpack(source)
    source[1] = 7
    assert b.numpy()[1] == 7 and b.dtype == "int32"


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_read_only_output_is_refused_before_running(target):
    lib = mlc_lab.build(add_func((4,)), target=target)
    a, b = np.arange(4, dtype="float32"), np.ones(4, "float32")
    a.flags.writeable = False                      # a read-only input is fine
    for out in (np.zeros(4, "float32"), np.zeros(8, "float32")[::2]):
        out.flags.writeable = False
        with pytest.raises(ValueError, match="add\\(\\): parameter C is written by the function but its "
                                             "array is read-only"):
            lib(a, b, out)
        np.testing.assert_array_equal(out, 0)      # nothing was written
    c = np.zeros(4, "float32")
    lib(a, b, c)
    np.testing.assert_array_equal(c, a + 1)


@pytest.mark.parametrize("target", ["python", "llvm"])
def test_array_on_another_device_is_refused(target):
    lib = mlc_lab.build(add_func((4,)), target=target)
    a, b, c = arrays()
    on_gpu = nd.NDArray(a.numpy(), mlc_lab.cuda(0))   # as an array a GPU runtime hands back
    with pytest.raises(ValueError, match=r"add\(\): parameter A: the array is on cuda\(0\) but this "
                                         r"function runs on cpu\(0\)"):
        lib(on_gpu, b, c)


def test_arrays_the_runtime_allocates_start_on_a_cache_line():
    # a kernel's 64-byte vector loads from an array 16 bytes into a line straddle two lines
    from mlc_lab import relax
    from mlc_lab.frontend import nn as fnn
    arrays = [mlc_lab.nd.array(np.ones(n, "float32")) for n in (3, 1000, 300000)]
    arrays += [mlc_lab.nd.empty((7, 5), "float32")]
    assert all(a.numpy_view().ctypes.data % 64 == 0 for a in arrays)
    model = fnn.Sequential(fnn.Linear(784, 256, seed=0), fnn.ReLU(), fnn.Linear(256, 10, seed=1))
    vm = relax.VirtualMachine(relax.build(model.to_relax((4, 784)), "llvm"), mlc_lab.cpu())
    out = vm["main"](np.ones((4, 784), "float32"))
    constants = [c for c in vm._programs["main"].template if isinstance(c, mlc_lab.nd.NDArray)]
    assert len(constants) == 4 and all(c.numpy_view().ctypes.data % 64 == 0 for c in constants)
    assert out.numpy_view().ctypes.data % 64 == 0
