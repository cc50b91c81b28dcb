"""Pointers into buffers and calls of external functions: ``Buffer.access_ptr`` (printing, parsing,
where it points once lowered), ``T.call_extern`` of a C function on the llvm target, C compiled
by ``contrib.clang.create_llvm`` and linked through a loop's ``pragma_import_llvm`` annotation, a
hand-written 16x16 tile kernel reached through tensorize (the course's chapter-8 flow), and the
errors where a call cannot be made."""
import shutil

import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.contrib import clang
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from mlc_lab.tir.transform import pipeline

needs_clang = pytest.mark.skipif(clang.find_clang() is None,
                                 reason="clang is not installed (apt-get install clang)")


# -- access_ptr ---------------------------------------------------------------------------------
def test_access_ptr_masks_offsets_and_extents():
    A = tir.decl_buffer((4, 8), "int32", "A")
    call = A.access_ptr("rw", offset=3)
    assert call.args[0].value == "tvm_access_ptr" and call.dtype == "handle"
    assert [str(a) for a in call.args[3:]] == ["3", "29", "3"]
    assert str(A.access_ptr(2, extent=5).args[4]) == "5"
    strided = tir.decl_buffer((4, 8), "int32", "S", strides=(16, 1))
    assert str(strided.access_ptr("r").args[4]) == "64"   # to the end of the outer stride
    for bad in ("x", "", 0, 4, True):
        with pytest.raises(ValueError, match="access mask"):
            A.access_ptr(bad)


@T.prim_func
def pointer_program(A: T.Buffer((16,), "float32")):
    for i in range(2):   # (lowering drops a loop of one iteration, and its annotations)
        with T.block("call"):
            vi = T.axis.spatial(2, i)
            T.reads(A[0:16])
            T.writes(A[0:16])
            T.evaluate(T.call_extern("scale_run", A.access_ptr("rw", offset=4 + vi * 4), 4,
                                     T.float32(3), dtype="int32"))


def test_pointer_program_prints_and_parses_back():
    text = pointer_program.script()
    assert ('T.call_extern("scale_run", T.tvm_access_ptr(T.type_annotation("float32"), A.data, '
            '4 + vi * 4, 12 - vi * 4, 3), 4, T.float32(3), dtype="int32")') in text
    assert_structural_equal(from_source(text), pointer_program)


SCALE_RUN = """
extern "C" int scale_run(float *x, int n, float by) {
    for (int i = 0; i < n; ++i) x[i] *= by;
    return 0;
}"""


def with_import(func, code_text):
    """``func`` with its outermost loop importing the LLVM IR ``code_text``."""
    sch = tir.Schedule(func)
    sch.annotate(sch.get_loops(sch.get_block("call"))[0], "pragma_import_llvm", code_text)
    return sch.mod


@needs_clang
def test_call_extern_with_a_pointer_into_the_buffer_runs_the_c_function():
    lib = mlc_lab.build(with_import(pointer_program, clang.create_llvm(SCALE_RUN)), target="llvm")
    a = np.arange(16, dtype="float32")
    nd = mlc_lab.nd.array(a)
    lib["main"](nd)
    expected = a.copy()
    expected[4:12] *= 3
    np.testing.assert_array_equal(nd.numpy(), expected)


@needs_clang
def test_create_llvm_writes_the_output_and_links_several_inputs(tmp_path):
    out = tmp_path / "k.ll"
    text = clang.create_llvm([SCALE_RUN, 'extern "C" int twice(int x) { return 2 * x; }'],
                             output=str(out))
    assert out.read_text() == text
    assert "@scale_run" in text and "@twice" in text
    with pytest.raises(RuntimeError, match="clang failed"):
        clang.create_llvm("this is not C")


def test_create_llvm_without_clang_says_to_install_it(monkeypatch):
    monkeypatch.setattr(clang, "find_clang", lambda: None)
    with pytest.raises(RuntimeError, match="apt-get install clang"):
        clang.create_llvm(SCALE_RUN)
    with pytest.raises(RuntimeError, match="no-such-compiler"):
        clang.create_llvm(SCALE_RUN, cc="no-such-compiler")


def test_an_undefined_function_is_refused_before_it_runs():
    with pytest.raises(NotImplementedError, match="scale_run.*none defines scale_run"):
        mlc_lab.build(pointer_program, target="llvm")


def test_imported_ir_that_does_not_parse_is_refused():
    with pytest.raises(ValueError, match="pragma_import_llvm annotation #0 does not parse"):
        mlc_lab.build(with_import(pointer_program, "define nonsense"), target="llvm")


def test_the_interpreter_refuses_an_external_call_by_name():
    with pytest.raises(NotImplementedError, match="scale_run"):
        mlc_lab.build(pointer_program, target="python")(mlc_lab.nd.array(np.zeros(16, "float32")))


# -- the course's tile kernel through tensorize ---------------------------------------------------
def tile_intrinsic(sa_scope: str, sb_scope: str, sc_scope: str):
    """(desc, impl) of ``C += A @ B.T`` on 16x16 tiles in the given memory scopes; the impl
    hands the tiles' addresses and row strides to the C function ``tile16``."""

    @T.prim_func
    def desc(a: T.handle, b: T.handle, c: T.handle):
        A = T.match_buffer(a, (16, 16), "float32", scope=sa_scope)
        B = T.match_buffer(b, (16, 16), "float32", scope=sb_scope)
        C = T.match_buffer(c, (16, 16), "float32", scope=sc_scope)
        with T.block("root"):
            T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
            T.writes(C[0:16, 0:16])
            for i, j, k in T.grid(16, 16, 16):
                with T.block(""):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]

    @T.prim_func
    def impl(a: T.handle, b: T.handle, c: T.handle):
        sa = T.var("int32")
        sb = T.var("int32")
        sc = T.var("int32")
        A = T.match_buffer(a, (16, 16), "float32", strides=[sa, 1], scope=sa_scope)
        B = T.match_buffer(b, (16, 16), "float32", strides=[sb, 1], scope=sb_scope)
        C = T.match_buffer(c, (16, 16), "float32", strides=[sc, 1], scope=sc_scope)
        with T.block("root"):
            T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
            T.writes(C[0:16, 0:16])
            T.evaluate(T.call_extern("tile16", C.access_ptr("w"), A.access_ptr("r"),
                                     B.access_ptr("r"), sa, sb, sc, dtype="int32"))

    return desc, impl


tir.TensorIntrin.register("test_extern_tile16", *tile_intrinsic("global", "global", "global"),
                          override=True)
tir.TensorIntrin.register("test_extern_tile16_regs", *tile_intrinsic(
    "global.A_reg", "global.B_reg", "global.accumulator"), override=True)


TILE16 = """
extern "C" int tile16(float *c, float *a, float *b, int sa, int sb, int sc) {
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j)
            for (int k = 0; k < 16; ++k)
                c[i * sc + j] += a[i * sa + k] * b[j * sb + k];
    return 0;
}"""

@T.prim_func
def matmul_nt(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
              C: T.Buffer((64, 64), "float32")):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    for i, j, k in T.grid(64, 64, 64):
        with T.block("matmul"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


def tiled(with_caches: bool):
    sch = tir.Schedule(matmul_nt)
    i, j, k = sch.get_loops("matmul")
    i, ii = sch.split(i, factors=[None, 16])
    j, ji = sch.split(j, factors=[None, 16])
    k, ki = sch.split(k, factors=[None, 16])
    sch.reorder(i, j, k, ii, ji, ki)
    block = sch.blockize(ii)
    if with_caches:   # the course's register files: each tile copied out, so strides of 16
        a_reg = sch.cache_read(block, 0, storage_scope="global.A_reg")
        b_reg = sch.cache_read(block, 1, storage_scope="global.B_reg")
        sch.compute_at(a_reg, k)
        sch.compute_at(b_reg, k)
        acc = sch.cache_write(block, 0, storage_scope="global.accumulator")
        sch.reverse_compute_at(acc, j)
    sch.decompose_reduction(block, k)
    sch.tensorize(block, "test_extern_tile16_regs" if with_caches else "test_extern_tile16")
    return sch, i


@pytest.mark.parametrize("with_caches", [True, False])
def test_strided_views_bind_their_strides_and_start(with_caches):
    sch, _ = tiled(with_caches)
    lowered = pipeline.lower(sch.mod).script()
    strides = "16, 16, 16" if with_caches else "64, 64, 64"
    assert f'A_1.data' not in lowered and f'{strides}, dtype="int32")' in lowered


@needs_clang
@pytest.mark.parametrize("with_caches", [True, False])
def test_the_tile_kernel_flow_computes_the_matmul(with_caches):
    sch, outer = tiled(with_caches)
    sch.annotate(outer, "pragma_import_llvm", clang.create_llvm(TILE16))
    lib = mlc_lab.build(sch.mod, target="llvm")
    rng = np.random.default_rng(1)
    a, b = (rng.random((64, 64), dtype=np.float32) for _ in range(2))
    c = mlc_lab.nd.empty((64, 64), "float32")
    lib["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b.T, rtol=1e-5)


def test_clang_is_found_where_it_is_installed():
    assert (clang.find_clang() is None) == (shutil.which("clang") is None and not any(
        shutil.which(f"clang-{v}") for v in range(10, 31)))
