"""TensorIR scripts written the way the course's 2022-2023 chapters write them keep parsing,
building and computing the right numbers: subscripted ``T.Buffer[...]`` annotations under
``from __future__ import annotations`` (annotations arrive as strings), ``-> None`` returns,
``T.func_attr`` dicts, one-argument ``T.grid``, blocks without ``T.reads``/``T.writes``, scoped
``T.alloc_buffer``, casts and intrinsics, int64 shapes, handles with ``T.match_buffer``.
Forms of older releases that are not taken fail with a message naming what to write instead."""
from __future__ import annotations

import numpy as np
import pytest

import mlc_lab
from mlc_lab import nd, tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import ScriptError, from_source
from mlc_lab.script import ir as I
from mlc_lab.script import tir as T

RNG = np.random.default_rng(11)


def run(func, *arrays, out_index=-1):
    """Build ``func`` for the CPU, call it on copies of ``arrays``, return the array at out_index."""
    args = [nd.array(a) for a in arrays]
    mlc_lab.build(func, target="llvm")(*args)
    return args[out_index].numpy()


def first_block(func, name):
    found = []
    tir.stmt_functor.post_order_visit(
        func.body, lambda s: found.append(s) if isinstance(s, tir.Block) and s.name_hint == name else None)
    return found[0]


# -- annotations ------------------------------------------------------------------------------------
@I.ir_module
class ScaledRowSum:
    @T.prim_func
    def main(A: T.Buffer[(6, 10), "float32"], out: T.Buffer[(6,), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        acc = T.alloc_buffer((6,), "float32")
        for r, c in T.grid(6, 10):
            with T.block("acc"):
                vr, vc = T.axis.remap("SR", [r, c])
                with T.init():
                    acc[vr] = T.float32(0)
                acc[vr] = acc[vr] + A[vr, vc]
        for r in T.grid(6):
            with T.block("out"):
                vr = T.axis.remap("S", [r])
                out[vr] = acc[vr] * T.float32(0.1)


def test_subscript_annotations_under_deferred_annotations():
    def plain(A: T.Buffer[(6, 10), "float32"]) -> None: ...
    assert isinstance(plain.__annotations__["A"], str)   # the premise: annotations are text
    func = ScaledRowSum["main"]
    assert [tuple(int(d) for d in p.shape) for p in func.params] == [(6, 10), (6,)]
    assert func.attr_dict["tir.noalias"] is True
    a = RNG.random((6, 10)).astype("float32")
    np.testing.assert_allclose(run(func, a, np.zeros(6, "float32")), a.sum(1) * 0.1, rtol=1e-5)


def test_subscript_and_call_forms_are_the_same_buffer():
    @T.prim_func
    def subscript(X: T.Buffer[(4, 3), "int32"], Y: T.Buffer[12, "int32"]) -> None:
        for i, j in T.grid(4, 3):
            with T.block("flat"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi * 3 + vj] = X[vi, vj]

    @T.prim_func
    def call(X: T.Buffer((4, 3), "int32"), Y: T.Buffer((12,), "int32")):
        for i, j in T.grid(4, 3):
            with T.block("flat"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi * 3 + vj] = X[vi, vj]

    assert_structural_equal(subscript.with_attr("global_symbol", "call"), call)
    x = np.arange(12, dtype="int32").reshape(4, 3)
    np.testing.assert_array_equal(run(subscript, x, np.zeros(12, "int32")), x.ravel())


def test_annotation_names_that_only_an_annotation_uses():
    """Under deferred annotations a name used only in a parameter annotation is no closure
    variable; it still resolves to the enclosing function's value."""
    def make(length):
        width = length // 2

        @T.prim_func
        def halves(A: T.Buffer[(length,), "float32"], B: T.Buffer[(width,), "float32"]) -> None:
            for i in T.grid(4):
                with T.block("B"):
                    vi = T.axis.remap("S", [i])
                    B[vi] = A[vi] + A[vi + 4]
        return halves

    func = make(8)
    assert [int(p.shape[0]) for p in func.params] == [8, 4]
    a = RNG.random(8).astype("float32")
    np.testing.assert_allclose(run(func, a, np.zeros(4, "float32")), a[:4] + a[4:], rtol=1e-6)


def test_annotation_names_inside_a_module_class_in_a_function():
    def make(n):
        @I.ir_module
        class Module:
            @T.prim_func
            def twice(A: T.Buffer[(n,), "float32"], B: T.Buffer[(n,), "float32"]) -> None:
                for i in T.grid(5):
                    with T.block("B"):
                        vi = T.axis.remap("S", [i])
                        B[vi] = A[vi] * T.float32(2)
        return Module

    assert int(make(5)["twice"].params[0].shape[0]) == 5


# -- blocks and buffers -----------------------------------------------------------------------------
def test_reads_and_writes_are_optional_and_inferred():
    @T.prim_func
    def implicit(A: T.Buffer[(8, 8), "float32"], B: T.Buffer[(8,), "float32"]) -> None:
        for i, k in T.grid(8, 8):
            with T.block("rowmax"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.min_value("float32")
                B[vi] = T.max(B[vi], A[vi, vk])

    @T.prim_func
    def explicit(A: T.Buffer[(8, 8), "float32"], B: T.Buffer[(8,), "float32"]) -> None:
        for i, k in T.grid(8, 8):
            with T.block("rowmax"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])   # a reduction's own accumulator is left out, as in TVM
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.min_value("float32")
                B[vi] = T.max(B[vi], A[vi, vk])

    assert_structural_equal(implicit.with_attr("global_symbol", "explicit"), explicit)
    a = RNG.standard_normal((8, 8)).astype("float32")
    np.testing.assert_array_equal(run(implicit, a, np.zeros(8, "float32")), a.max(1))


def test_alloc_buffer_with_a_storage_scope():
    @T.prim_func
    def staged(A: T.Buffer[(16,), "float32"], B: T.Buffer[(16,), "float32"]) -> None:
        T.func_attr({"global_symbol": "staged", "tir.noalias": True})
        tmp = T.alloc_buffer((16,), dtype="float32", scope="global")
        loc = T.alloc_buffer([16], "float32", scope="local")
        for i in T.grid(16):
            with T.block("tmp"):
                vi = T.axis.remap("S", [i])
                tmp[vi] = T.exp(A[vi])
        for i in T.grid(16):
            with T.block("loc"):
                vi = T.axis.remap("S", [i])
                loc[vi] = tmp[vi] + T.float32(1)
        for i in T.grid(16):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.log(loc[vi])

    scopes = {b.name: b.scope for b in first_block(staged, "root").alloc_buffers}
    assert scopes == {"tmp": "global", "loc": "local"}
    a = RNG.standard_normal(16).astype("float32")
    np.testing.assert_allclose(run(staged, a, np.zeros(16, "float32")), np.log1p(np.exp(a)), rtol=1e-5)


def test_float_literal_init_and_augmented_assignment():
    @T.prim_func
    def mm(A: T.Buffer[(4, 6), "float32"], B: T.Buffer[(6, 5), "float32"],
           C: T.Buffer[(4, 5), "float32"]) -> None:
        for i, j, k in T.grid(4, 5, 6):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    a, b = RNG.random((4, 6)).astype("float32"), RNG.random((6, 5)).astype("float32")
    np.testing.assert_allclose(run(mm, a, b, np.zeros((4, 5), "float32")), a @ b, rtol=1e-5)


def test_blocks_nested_in_init_and_body_of_a_tiled_block():
    """A 4x4-tile matmul whose outer block holds inner blocks, as in the tensorization chapter."""
    @T.prim_func
    def tiled(A: T.Buffer[(8, 8), "float32"], B: T.Buffer[(8, 8), "float32"],
              C: T.Buffer[(8, 8), "float32"]) -> None:
        T.func_attr({"global_symbol": "tiled", "tir.noalias": True})
        for i0, j0, k0 in T.grid(2, 2, 2):
            with T.block("tile"):
                ti, tj, tk = T.axis.remap("SSR", [i0, j0, k0])
                with T.init():
                    for i1, j1 in T.grid(4, 4):
                        with T.block("tile_init"):
                            vi, vj = T.axis.remap("SS", [i1, j1])
                            C[ti * 4 + vi, tj * 4 + vj] = T.float32(0)
                for i1, j1, k1 in T.grid(4, 4, 4):
                    with T.block("tile_update"):
                        vi, vj, vk = T.axis.remap("SSR", [i1, j1, k1])
                        C[ti * 4 + vi, tj * 4 + vj] += \
                            A[ti * 4 + vi, tk * 4 + vk] * B[tj * 4 + vj, tk * 4 + vk]

    a, b = RNG.random((8, 8)).astype("float32"), RNG.random((8, 8)).astype("float32")
    np.testing.assert_allclose(run(tiled, a, b, np.zeros((8, 8), "float32")), a @ b.T, rtol=1e-5)


def test_explicit_root_block_with_regions_and_an_unnamed_inner_block():
    @T.prim_func
    def desc(a: T.handle, b: T.handle) -> None:
        A = T.match_buffer(a, (4, 4), "float32", offset_factor=1)
        B = T.match_buffer(b, (4, 4), "float32", offset_factor=1)
        with T.block("root"):
            T.reads(A[0:4, 0:4])
            T.writes(B[0:4, 0:4])
            for i, j in T.grid(4, 4):
                with T.block(""):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = A[vj, vi]

    assert [p.name for p in desc.params] == ["A", "B"]
    a = RNG.random((4, 4)).astype("float32")
    np.testing.assert_array_equal(run(desc, a, np.zeros((4, 4), "float32")), a.T)


# -- expressions ------------------------------------------------------------------------------------
def test_casts_minimum_maximum_and_select():
    @T.prim_func
    def mixed(A: T.Buffer[(10,), "float32"], K: T.Buffer[(10,), "int32"],
              B: T.Buffer[(10,), "float32"], Q: T.Buffer[(10,), "int32"]) -> None:
        for i in T.grid(10):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.if_then_else(
                    K[vi] > 2,
                    T.min(A[vi], T.float32(0.5)) + T.cast(K[vi], "float32"),
                    T.max(A[vi], T.float32(0)) * T.Cast("float32", K[vi]))
        for i in T.grid(10):
            with T.block("Q"):
                vi = T.axis.remap("S", [i])
                Q[vi] = T.cast(A[vi] * T.float32(10), "int32") + T.int32(1)

    a = RNG.standard_normal(10).astype("float32")
    k = RNG.integers(0, 6, 10).astype("int32")
    args = [a, k, np.zeros(10, "float32"), np.zeros(10, "int32")]
    want_b = np.where(k > 2, np.minimum(a, 0.5) + k, np.maximum(a, 0) * k)
    np.testing.assert_allclose(run(mixed, *args, out_index=2), want_b, rtol=1e-6)
    np.testing.assert_array_equal(run(mixed, *args, out_index=3), np.trunc(a * 10).astype("int32") + 1)


def test_cast_spellings_build_the_same_expression():
    x = tir.Var("x", "float32")
    assert_structural_equal(T.cast(x, "int32"), T.Cast("int32", x))
    with pytest.raises(TypeError, match="value first"):
        T.cast("int32", x)
    with pytest.raises(TypeError, match="dtype first"):
        T.Cast(x, "int32")


def test_int64_shapes_and_loop_extents():
    @T.prim_func
    def add_one(A: T.Buffer[(T.int64(3), T.int64(5)), "float32"],
                B: T.Buffer((T.int64(3), T.int64(5)), "float32")) -> None:
        for i, j in T.grid(T.int64(3), T.int64(5)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] + T.float32(1)

    assert {d.dtype for p in add_one.params for d in p.shape} == {"int64"}
    assert {iv.var.dtype for iv in first_block(add_one, "B").iter_vars} == {"int64"}
    a = RNG.random((3, 5)).astype("float32")
    np.testing.assert_allclose(run(add_one, a, np.zeros((3, 5), "float32")), a + 1)


def test_int64_element_type():
    @T.prim_func
    def widen(A: T.Buffer[(6,), "int32"], B: T.Buffer[(6,), "int64"]) -> None:
        for i in T.grid(6):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.int64(A[vi]) * T.int64(3000000000)

    a = np.arange(6, dtype="int32")
    np.testing.assert_array_equal(run(widen, a, np.zeros(6, "int64")), a.astype("int64") * 3000000000)


def test_handles_with_symbolic_length():
    @T.prim_func
    def negate(a: T.handle, b: T.handle) -> None:
        n = T.var("int32")
        A = T.match_buffer(a, [n], dtype="float32")
        B = T.match_buffer(b, [n], dtype="float32")
        for i in T.serial(0, n):
            with T.block("B"):
                vi = T.axis.S(n, i)
                T.reads([A[vi]])
                T.writes([B[vi]])
                B[vi] = T.float32(0) - A[vi]

    for length in (3, 17):
        a = RNG.standard_normal(length).astype("float32")
        np.testing.assert_array_equal(run(negate, a, np.zeros(length, "float32")), -a)


# -- modules ---------------------------------------------------------------------------------------
@I.ir_module
class TwoKernels:
    @T.prim_func
    def square(A: T.Buffer[(5, 5), "float32"], B: T.Buffer[(5, 5), "float32"]) -> None:
        T.func_attr({"global_symbol": "square", "tir.noalias": True})
        for i, j in T.grid(5, 5):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * A[vi, vj]

    @T.prim_func
    def clip(A: T.Buffer[(5, 5), "float32"], B: T.Buffer[(5, 5), "float32"]) -> None:
        T.func_attr({"global_symbol": "clip", "tir.noalias": True})
        for i, j in T.grid(5, 5):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.min(T.max(A[vi, vj], T.float32(-1)), T.float32(1))


def test_module_of_two_functions_builds_and_round_trips():
    lib = mlc_lab.build(TwoKernels, target="llvm")
    a = RNG.standard_normal((5, 5)).astype("float32") * 2
    for name, want in (("square", a * a), ("clip", np.clip(a, -1, 1))):
        out = nd.empty((5, 5), "float32")
        lib[name](nd.array(a), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    assert_structural_equal(from_source(TwoKernels.script()), TwoKernels)


def test_with_attr_takes_a_dict():
    func = TwoKernels["clip"].with_attr({"global_symbol": "clamp", "tir.noalias": False})
    assert func.attr_dict["global_symbol"] == "clamp" and func.attr_dict["tir.noalias"] is False
    with pytest.raises(TypeError, match="needs a value"):
        TwoKernels["clip"].with_attr("global_symbol")


# -- older forms: errors that say what to write ------------------------------------------------------
OLD_FORMS = {
    "T.load": ("B[i] = T.load(\"float32\", A.data, i)", r"write A\[i\]"),
    "T.store": ("T.store(B.data, i, A[i])", r"write A\[i\] = value"),
    "T.buffer_decl": ("C = T.buffer_decl((4,), \"float32\")", r"T\.alloc_buffer"),
    "T.preflattened_buffer": ("T.preflattened_buffer(A, (4,), \"float32\", data=A.data)", "delete the line"),
}


@pytest.mark.parametrize("form", sorted(OLD_FORMS))
def test_retired_forms_name_their_replacement(form):
    line, replacement = OLD_FORMS[form]
    text = (
        "@T.prim_func\n"
        "def f(A: T.Buffer((4,), \"float32\"), B: T.Buffer((4,), \"float32\")):\n"
        "    for i in range(4):\n"
        f"        {line}\n")
    with pytest.raises(ScriptError, match=replacement) as info:
        from_source(text)
    assert form in str(info.value)


def test_retired_forms_outside_a_script():
    with pytest.raises(AttributeError, match=r"write A\[i\]"):
        T.load  # noqa: B018
    assert not hasattr(T, "buffer_decl")


def test_the_2021_block_form_names_its_replacement():
    text = (
        "@T.prim_func\n"
        "def f(A: T.Buffer((4, 4), \"float32\")):\n"
        "    with T.block([4, 4], \"C\") as [vi, vj]:\n"
        "        A[vi, vj] = 0.0\n")
    with pytest.raises(ScriptError, match=r'with T\.block\("C"\)') as info:
        from_source(text)
    assert 'T.axis.remap("SS", [i, j])' in str(info.value)
