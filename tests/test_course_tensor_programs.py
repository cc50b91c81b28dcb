"""Course-era names for tensor programs (TensorIR, scripts, schedules, build): the spellings the
course's code uses run unchanged, and what mlc_lab does not provide says so in one sentence.
Numerics are checked against numpy on the llvm backend and the reference interpreter."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import te, tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from schedule_checks import assert_replays, assert_runs_like

TARGETS = ["llvm", "python"]


@mlc_lab.script.ir_module
class RowScale:
    @T.prim_func
    def main(A: T.Buffer((6, 10), "float32"), s: T.Buffer((6,), "float32"),
             B: T.Buffer((6, 10), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for r, c in T.grid(6, 10):
            with T.block("B"):
                vr, vc = T.axis.remap("SS", [r, c])
                B[vr, vc] = A[vr, vc] * s[vr]


def row_scale_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((6, 10), dtype="float32"), rng.random(6, dtype="float32")


def te_matmul(m=8, k=12, n=5):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


# -- names ----------------------------------------------------------------------------------------
def test_script_ir_module_is_the_module_decorator():
    assert mlc_lab.script.ir_module is mlc_lab.script.ir.ir_module
    assert isinstance(RowScale, mlc_lab.IRModule) and [gv.name_hint for gv in RowScale.functions] == ["main"]


def test_device_by_target_or_device_name():
    assert mlc_lab.device("llvm", 0) == mlc_lab.cpu(0)
    assert mlc_lab.device("llvm -num-cores=2") == mlc_lab.cpu()
    assert mlc_lab.device("cpu", 1) == mlc_lab.cpu(1)
    gpu = mlc_lab.device("cuda", 0)   # a handle only: needs no GPU to exist
    assert gpu == mlc_lab.cuda(0) and gpu.device_type == "cuda" and gpu.device_id == 0
    with pytest.raises(ValueError, match="no opencl runtime"):
        mlc_lab.device("opencl", 0)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        mlc_lab.device("tpu")
    with pytest.raises(TypeError, match="device or target name"):
        mlc_lab.device(3)


@pytest.mark.skipif(mlc_lab.cuda(0).exist, reason="a GPU runtime may serve cuda memory")
def test_cuda_arrays_round_trip_on_a_gpu_or_its_simulator():
    a = mlc_lab.nd.array(np.arange(3, dtype="float32"), mlc_lab.device("cuda", 0))
    assert a.device == mlc_lab.cuda(0)
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2])


def test_with_attr_takes_a_dict_or_a_key_and_value():
    func = te.create_prim_func(list(te_matmul()))
    by_dict = func.with_attr({"global_symbol": "mm", "tir.noalias": True})
    by_pair = func.with_attr("global_symbol", "mm")
    assert by_dict.attr_dict["global_symbol"] == by_pair.attr_dict["global_symbol"] == "mm"
    assert by_dict.attr_dict["tir.noalias"] is True
    assert func.attr_dict.get("global_symbol") != "mm"   # the original is unchanged
    with pytest.raises(TypeError, match="not both"):
        func.with_attr({"global_symbol": "mm"}, "x")
    with pytest.raises(TypeError, match="must be a str"):
        func.with_attr(3, "x")


@pytest.mark.parametrize("target", TARGETS)
def test_entry_name_time_evaluator_and_arrays_on_a_device(target):
    A, B, C = te_matmul()
    lib = mlc_lab.build(mlc_lab.IRModule({"mm": te.create_prim_func([A, B, C])}), target=target)
    assert lib.entry_name == "mm" and lib.imported_modules == []
    dev = mlc_lab.device(target if target == "llvm" else "cpu", 0)
    rng = np.random.default_rng(2)
    a, b = rng.random((8, 12), dtype="float32"), rng.random((12, 5), dtype="float32")
    a_nd, b_nd = mlc_lab.nd.array(a, dev), mlc_lab.nd.array(b, dev)
    c_nd = mlc_lab.nd.array(np.zeros((8, 5), "float32"), dev)
    lib(a_nd, b_nd, c_nd)
    mlc_lab.testing.assert_allclose(c_nd, a @ b, rtol=1e-5)
    result = lib.time_evaluator(lib.entry_name, dev, number=2, repeat=3)(a_nd, b_nd, c_nd)
    assert len(result.results) == 3 and result.mean > 0


def test_entry_name_of_a_module_with_main_among_several():
    lib = mlc_lab.build(mlc_lab.IRModule({"other": RowScale["main"], "main": RowScale["main"]}),
                        target="python")
    assert lib.entry_name == "main"
    a, s = row_scale_inputs()
    out = np.zeros((6, 10), "float32")
    lib(a, s, out)
    np.testing.assert_allclose(out, a * s[:, None], rtol=1e-6)


def test_testing_assert_allclose_checks_shape_and_values():
    x = mlc_lab.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
    mlc_lab.testing.assert_allclose(x, x.numpy())
    with pytest.raises(AssertionError, match="shapes differ"):
        mlc_lab.testing.assert_allclose(x, np.arange(3, dtype="float32"))   # no broadcasting
    with pytest.raises(AssertionError):
        mlc_lab.testing.assert_allclose(x, x.numpy() + 0.01)


# -- shape arithmetic in a boolean context ----------------------------------------------------
def test_equal_constant_shapes_are_true_in_an_assert():
    A, B, _ = te_matmul(m=8, k=12, n=5)
    assert A.shape[1] == B.shape[0]
    assert not (A.shape[0] == B.shape[1]) and A.shape[0] != B.shape[1]
    assert A.shape[0] < A.shape[1] and B.shape[0] >= 12
    assert bool(tir.IntImm("int64", 12) == tir.IntImm("int32", 12))


def test_symbolic_shapes_decide_only_what_is_known():
    n, m = tir.Var("n", "int64"), tir.Var("m", "int64")
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((m, n), name="B")
    assert A.shape[1] == B.shape[0] and A.shape[0] == B.shape[1]   # the same variables
    assert A.shape[0] + 1 == 1 + B.shape[1]                        # equal after simplifying
    with pytest.raises(TypeError, match="cannot decide `n == m`"):
        assert A.shape[0] == B.shape[0]
    with pytest.raises(TypeError, match="cannot decide"):
        bool(A.shape[0] < 16)


# -- block names where a block handle is expected -------------------------------------------------
def test_primitives_take_block_names():
    A, B, C = te_matmul(m=16, k=8, n=16)
    D = te.compute((16, 16), lambda i, j: te.max(C[i, j], 0.0), name="D")
    func = te.create_prim_func([A, B, D])
    sch = tir.Schedule(func)
    i, j, r = sch.get_loops("C")
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, r, j1)
    sch.reverse_compute_at("D", j0)
    cache = sch.cache_read("C", 0, "local")
    sch.compute_at(cache, r)
    sch.decompose_reduction("C", r)
    assert [b.name for b in sch.get_producers("D")] == ["C_init", "C_update"]
    assert_runs_like(func, sch, outputs=[2])
    assert_replays(sch, func)


# -- T.call_extern ------------------------------------------------------------------------------
@T.prim_func
def extern_math(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32"),
                C: T.Buffer((4, 8), "float64")):
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.call_extern("expf", A[vi, vj], dtype="float32") + T.call_extern(
                "float32", "atan2f", A[vi, vj], T.float32(2))
            C[vi, vj] = T.call_extern("cbrt", A[vi, vj], dtype="float64") * T.call_extern(
                "round", A[vi, vj] * T.float32(4), dtype="float64")


@pytest.mark.parametrize("target", TARGETS)
def test_call_extern_runs_c_math_functions(target):
    a = np.random.default_rng(4).uniform(-2, 2, (4, 8)).astype("float32")
    a[0, :2] = [0.125, -0.375]   # x * 4 lands halfway: C's round goes away from zero
    b, c = np.zeros((4, 8), "float32"), np.zeros((4, 8), "float64")
    mlc_lab.build(extern_math, target=target)(a, b, c)
    np.testing.assert_allclose(b, np.exp(a) + np.arctan2(a, np.float32(2)), rtol=1e-5)
    wide = a.astype("float64")
    halfway_away = np.copysign(np.floor(np.abs(wide * 4) + 0.5), wide)
    np.testing.assert_allclose(c, np.cbrt(wide) * halfway_away, rtol=1e-12)
    # round(0.5) = 1 and round(-1.5) = -2 (half-to-even would give 0 and -2); libm's cbrt may
    # differ from numpy's in the last bit
    assert c[0, 0] == pytest.approx(np.cbrt(0.125) * 1.0, rel=1e-12)
    assert c[0, 1] == pytest.approx(np.cbrt(-0.375) * -2.0, rel=1e-12)


def test_call_extern_prints_and_parses_back():
    text = extern_math.script()
    assert 'T.call_extern("expf", A[vi, vj], dtype="float32")' in text
    assert 'T.call_extern("cbrt", T.Cast("float64", A[vi, vj]), dtype="float64")' in text
    assert_structural_equal(from_source(text), extern_math)


@pytest.mark.parametrize("target", TARGETS)
def test_call_extern_in_a_vectorized_loop_stays_scalar(target):
    func = tir.Schedule(extern_math)
    _, j = func.get_loops("B")
    func.vectorize(j)
    a = np.random.default_rng(5).random((4, 8), dtype="float32")
    b, c = np.zeros((4, 8), "float32"), np.zeros((4, 8), "float64")
    mlc_lab.build(func.mod, target=target)(a, b, c)
    np.testing.assert_allclose(b, np.exp(a) + np.arctan2(a, np.float32(2)), rtol=1e-5)


def test_call_extern_argument_errors():
    x = tir.Var("x", "float32")
    with pytest.raises(TypeError, match="takes 2 argument"):
        tir.call_extern("float32", "powf", x)
    with pytest.raises(TypeError, match="needs the result dtype"):
        T.call_extern("expf", x)
    with pytest.raises(TypeError, match="non-empty str"):
        tir.call_extern("float32", "", x)


@T.prim_func
def unknown_extern(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = T.call_extern("my_kernel", A[vi], dtype="float32")


def test_call_extern_of_an_unknown_function_names_it():
    with pytest.raises(NotImplementedError, match="'my_kernel'.*llvm backend runs only C math"):
        mlc_lab.build(unknown_extern, target="llvm")
    lib = mlc_lab.build(unknown_extern, target="python")
    with pytest.raises(NotImplementedError, match="'my_kernel'.*interpreter runs only C math"):
        lib(np.ones(4, "float32"), np.zeros(4, "float32"))


# -- custom storage scopes ----------------------------------------------------------------------
@mlc_lab.script.ir_module
class TransposedMatmul:
    @T.prim_func
    def main(A: T.Buffer((32, 16), "float32"), B: T.Buffer((48, 16), "float32"),
             C: T.Buffer((32, 48), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(32, 48, 16):
            with T.block("mm"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


@T.prim_func
def tile8_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (8, 8), "float32", scope="global.lhs_reg")
    B = T.match_buffer(b, (8, 8), "float32", scope="global.rhs_reg")
    C = T.match_buffer(c, (8, 8), "float32", scope="global.acc")
    with T.block("root"):
        T.reads(C[0:8, 0:8], A[0:8, 0:8], B[0:8, 0:8])
        T.writes(C[0:8, 0:8])
        for i, j, k in T.grid(8, 8, 8):
            with T.block(""):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


@T.prim_func
def tile8_impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (8, 8), "float32", scope="global.lhs_reg")
    B = T.match_buffer(b, (8, 8), "float32", scope="global.rhs_reg")
    C = T.match_buffer(c, (8, 8), "float32", scope="global.acc")
    with T.block("root"):
        T.reads(C[0:8, 0:8], A[0:8, 0:8], B[0:8, 0:8])
        T.writes(C[0:8, 0:8])
        for k, i, j in T.grid(8, 8, 8):
            with T.block("tile"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


def accelerator_schedule():
    """Tile by 8, blockize the tile, stage its operands in register scopes and its result in an
    accumulator scope, then put the registered tile intrinsic in its place."""
    tir.TensorIntrin.register("test_course_tile8", tile8_desc, tile8_impl, override=True)
    sch = tir.Schedule(TransposedMatmul)
    i, j, k = sch.get_loops("mm")
    i, ii = sch.split(i, factors=[None, 8])
    j, ji = sch.split(j, factors=[None, 8])
    k, ki = sch.split(k, factors=[None, 8])
    sch.reorder(i, j, k, ii, ji, ki)
    tile = sch.blockize(ii)
    lhs = sch.cache_read(tile, 0, storage_scope="global.lhs_reg")
    rhs = sch.cache_read(tile, 1, storage_scope="global.rhs_reg")
    sch.compute_at(lhs, k)
    sch.compute_at(rhs, k)
    acc = sch.cache_write(tile, 0, storage_scope="global.acc")
    sch.reverse_compute_at(acc, j)
    sch.decompose_reduction(tile, k)
    sch.tensorize(tile, "test_course_tile8")   # the handle still names the update block
    return sch


def test_custom_scopes_print_and_parse_back():
    sch = accelerator_schedule()
    text = sch.mod.script()
    for decl in ('T.alloc_buffer((32, 16), scope="global.lhs_reg")',
                 'T.alloc_buffer((32, 48), scope="global.acc")',
                 '(8, 8), "float32", scope="global.rhs_reg")'):
        assert decl in text
    assert_structural_equal(from_source(text), sch.mod)
    assert_replays(sch, TransposedMatmul)


@pytest.mark.parametrize("target", TARGETS)
def test_custom_scopes_run_as_ordinary_memory(target):
    sch = accelerator_schedule()
    rng = np.random.default_rng(6)
    a, b = rng.random((32, 16), dtype="float32"), rng.random((48, 16), dtype="float32")
    c = mlc_lab.nd.empty((32, 48), "float32")
    mlc_lab.build(sch.mod, target=target)["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), c)
    mlc_lab.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


def test_storage_scope_spelling_is_checked():
    sch = tir.Schedule(TransposedMatmul)
    for bad in ("texture", "global.", "register.A", "global.a-b"):
        with pytest.raises(tir.schedule.UnknownStorageScopeError, match="<rank>.<tag>"):
            sch.cache_read("mm", 0, bad)
    with pytest.raises(ValueError, match="unknown storage scope 'regs'"):
        tir.decl_buffer((4,), "float32", "X", scope="regs")
    assert tir.decl_buffer((4,), "float32", "X", scope="local.fragment").scope == "local.fragment"


# -- outside the design: clear errors ----------------------------------------------------------
def test_opencl_target_gives_source_only():
    from mlc_lab.testing import gpu_schedules as gs
    lib = mlc_lab.build(gs.vector_add(256).mod, target="opencl")
    assert "__kernel" in lib.imported_modules[0].get_source()
    with pytest.raises(RuntimeError, match="target 'opencl' produces source only; build for 'cuda'"):
        lib["main"]()
    with pytest.raises(ValueError, match="no vulkan backend.*'cuda'.*'llvm'"):
        mlc_lab.build(RowScale, target="vulkan")


def test_access_ptr_builds_the_pointer_and_a_build_says_how_to_write_the_kernel():
    buf = tir.decl_buffer((8, 8), "float32", "A")
    assert str(buf.access_ptr("r")) == 'T.tvm_access_ptr(T.type_annotation("float32"), A.data, 0, 64, 1)'

    @T.prim_func
    def calls_a_c_kernel(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        with T.block("kernel"):
            T.evaluate(T.call_extern("int32", "gemm8", A.access_ptr("r"), B.access_ptr("w")))

    with pytest.raises(NotImplementedError, match="gemm8.*write gemm8 as loops in a T.prim_func"):
        mlc_lab.build(calls_a_c_kernel, target="llvm")


def test_create_llvm_without_clang_says_what_is_missing(monkeypatch):
    from mlc_lab.contrib import clang, utils
    monkeypatch.setattr(clang, "find_clang", lambda: None)
    with pytest.raises(RuntimeError, match="needs the clang compiler, which is not on PATH"):
        clang.create_llvm("int f(void) { return 0; }")
    temp = utils.tempdir()
    path = temp.relpath("kernel.ll")
    assert path.endswith("kernel.ll") and temp.listdir() == []
