"""te: placeholder/compute/reduce_axis and create_prim_func, checked against IR built by hand."""
import numpy as np
import pytest

from mlc_lab import te, tir
from mlc_lab.ir import assert_structural_equal, structural_equal
from mlc_lab.tir import (Block, BlockRealize, BufferLoad, BufferStore, FloatImm, For, IntImm,
                         IterVar, Max, PrimFunc, Range, Var, const, decl_buffer)
from mlc_lab.tir.stmt import seq
from mlc_lab.tir.analysis import block_access_regions

ATTRS = (("global_symbol", "main"), ("tir.noalias", True))


def te_mm_relu(n=128):
    A = te.placeholder((n, 128), "float32", name="A")
    B = te.placeholder((128, 128), "float32", name="B")
    k = te.reduce_axis((0, 128), name="k")
    Y = te.compute((n, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, 128), lambda i, j: te.max(Y[i, j], te.const(0, "float32")), name="C")
    return te.create_prim_func([A, B, C])


def loop_block(name, axes, body, init=None):
    """``for`` loops over ``axes`` [(name, extent, "S"|"R")] around block ``name``; ``body`` and
    ``init`` are functions of the block iterators."""
    loops = [Var(a) for a, _, _ in axes]
    ivs = [IterVar(Var("v" + a), Range(const(0), const(e) if isinstance(e, int) else e),
                   "spatial" if kind == "S" else "reduce") for a, e, kind in axes]
    vs = [iv.var for iv in ivs]
    block = Block(name, tuple(ivs), (), (), body(*vs), init(*vs) if init else None)
    reads, writes = block_access_regions(block)
    stmt = BlockRealize(tuple(loops), IntImm("bool", 1), block.replace(reads=reads, writes=writes))
    for loop, (_, extent, _) in reversed(list(zip(loops, axes))):
        stmt = For(loop, const(0), const(extent) if isinstance(extent, int) else extent, "serial", stmt)
    return stmt


def with_root(params, nests, allocs=()):
    root = Block("root", (), (), (), seq(*nests), alloc_buffers=tuple(allocs))
    return PrimFunc(tuple(params), BlockRealize((), IntImm("bool", 1), root), ATTRS)


def expected_mm_relu(n=128):
    A, B, C = (decl_buffer((n if name != "B" else 128, 128), "float32", name) for name in "ABC")
    Y = decl_buffer((n, 128), "float32", "Y")
    y_nest = loop_block(
        "Y", [("i", n, "S"), ("j", 128, "S"), ("k", 128, "R")],
        lambda vi, vj, vk: BufferStore(Y, Y[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=lambda vi, vj, vk: BufferStore(Y, FloatImm("float32", 0.0), (vi, vj)))
    c_nest = loop_block("C", [("i", n, "S"), ("j", 128, "S")],
                        lambda vi, vj: BufferStore(C, Max(Y[vi, vj], FloatImm("float32", 0.0)), (vi, vj)))
    return with_root([A, B, C], [y_nest, c_nest], [Y])


def test_mm_relu_matches_hand_built_ir():
    func = te_mm_relu()
    assert_structural_equal(func, expected_mm_relu())
    assert tir.verify(func)


def test_mm_relu_matches_script():
    pytest.importorskip("mlc_lab.script.parser")
    from mlc_lab.script import tir as T

    @T.prim_func
    def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
                C: T.Buffer((128, 128), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        Y = T.alloc_buffer((128, 128), dtype="float32")
        for i, j, k in T.grid(128, 128, 128):
            with T.block("Y"):
                vi = T.axis.spatial(128, i)
                vj = T.axis.spatial(128, j)
                vk = T.axis.reduce(128, k)
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
        for i, j in T.grid(128, 128):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(Y[vi, vj], T.float32(0))

    assert_structural_equal(te_mm_relu(), mm_relu)


def test_symbolic_shape():
    n = te.var("n")
    func = te_mm_relu(n)
    A = func.params[0]
    assert A.shape[0] is n
    assert_structural_equal(func, expected_mm_relu(n), map_free_vars=True)
    assert tir.verify(func)


def test_batch_matmul_loops_and_iterators():
    A = te.placeholder((4, 16, 32), name="A")
    B = te.placeholder((4, 32, 8), name="B")
    r = te.reduce_axis(32, name="r")
    C = te.compute((4, 16, 8), lambda b, i, j: te.sum(A[b, i, r] * B[b, r, j], axis=r), name="C")
    func = te.create_prim_func([A, B, C])
    assert [p.name for p in func.params] == ["A", "B", "C"]
    loop = func.body.block.body
    names, extents = [], []
    while isinstance(loop, For):
        names.append(loop.loop_var.name)
        extents.append(loop.extent.value)
        loop = loop.body
    assert names == ["b", "i", "j", "r"] and extents == [4, 16, 8, 32]
    block = loop.block
    assert [iv.var.name for iv in block.iter_vars] == ["v_b", "v_i", "v_j", "v_r"]
    assert [iv.iter_type for iv in block.iter_vars] == ["spatial"] * 3 + ["reduce"]
    assert [r.buffer.name for r in block.reads] == ["A", "B"]
    assert [w.buffer.name for w in block.writes] == ["C"]
    assert func.body.block.alloc_buffers == ()
    assert tir.verify(func)


def test_intermediates_are_allocated_in_topological_order():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: te.exp(B[i]), name="C")
    D = te.compute((8,), lambda i: B[i] * C[i], name="D")
    func = te.create_prim_func([A, D])
    root = func.body.block
    assert [b.name for b in root.alloc_buffers] == ["B", "C"]
    assert [s.body.block.name_hint for s in root.body.seq] == ["B", "C", "D"]
    assert tir.verify(func)


@pytest.mark.parametrize("combiner, dtype, identity", [
    ("sum", "float32", 0.0),
    ("max", "float32", float(np.finfo(np.float32).min)),
    ("min", "float32", float(np.finfo(np.float32).max)),
    ("max", "int32", -2 ** 31),
    ("min", "int8", 127),
    ("sum", "int64", 0),
])
def test_reduction_init_value(combiner, dtype, identity):
    A = te.placeholder((4, 5), dtype, name="A")
    k = te.reduce_axis((0, 5), name="k")
    reducer = getattr(te, combiner)
    B = te.compute((4,), lambda i: reducer(A[i, k], axis=k), name="B")
    block = te.create_prim_func([A, B]).body.block.body.body.body.block
    assert block.init.value.dtype == dtype and block.init.value.value == identity
    update = block.body.value
    assert type(update).__name__ == {"sum": "Add", "max": "Max", "min": "Min"}[combiner]
    assert update.a.buffer is B.buffer


def test_max_of_two_expressions_is_elementwise():
    A = te.placeholder((4,), name="A")
    e = te.max(A[0], 0.0)
    assert isinstance(e, Max) and isinstance(e.b, FloatImm) and e.b.dtype == "float32"
    assert isinstance(te.min(A[0], A[1]), tir.Min)


def test_reduce_over_several_axes_and_offset_domain():
    A = te.placeholder((3, 4, 5), name="A")
    k1 = te.reduce_axis((1, 4), name="k1")
    k2 = te.reduce_axis(5, name="k2")
    B = te.compute((3,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    func = te.create_prim_func([A, B])
    outer = func.body.block.body.body
    assert outer.loop_var.name == "k1" and outer.min.value == 1 and outer.extent.value == 3
    assert tir.verify(func)


def test_axis_names_default_when_lambda_takes_varargs():
    A = te.placeholder((2, 3), name="A")
    B = te.compute((2, 3), lambda *idx: A[idx] * 2.0, name="B")
    func = te.create_prim_func([A, B])
    assert [func.body.block.body.loop_var.name, func.body.block.body.body.loop_var.name] == ["i", "j"]


def test_tensor_attributes():
    n = te.var("n")
    A = te.placeholder((n, 3), "float16", name="A")
    assert A.ndim == 2 and A.dtype == "float16" and A.name == "A"
    assert A.shape[0] is n and isinstance(A.shape[1], IntImm)
    assert isinstance(A[0, 1], BufferLoad)


def test_wrong_number_of_indices_names_the_tensor():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(IndexError, match="tensor A has 2 dimension"):
        te.compute((4,), lambda i: A[i], name="B")


def test_reduce_axis_outside_a_reduction():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="reduce axis k is used outside a reduction"):
        te.compute((4,), lambda i: A[i, k], name="B")


def test_reduction_must_be_the_whole_body():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="must be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2.0, name="B")


def test_lambda_arity_must_match_shape():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TypeError, match="2 dimension"):
        te.compute((4, 4), lambda i: A[i, i], name="B")


def test_missing_placeholder_argument():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="placeholder A is read by B"):
        te.create_prim_func([B])


def test_functions_built_twice_are_equal():
    assert structural_equal(te_mm_relu(), te_mm_relu())


def test_stages_with_the_same_name_get_unique_block_names():
    A = te.placeholder((4,), "float32", name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="T_add")
    C = te.compute((4,), lambda i: B(i) + 2.0, name="T_add")   # TVM's A(i) spelling too
    func = te.create_prim_func([A, C])
    assert "T_add_1" in func.script()
    from mlc_lab import tir
    sch = tir.Schedule(func)
    assert sch.get_block("T_add_1").name == "T_add_1"
