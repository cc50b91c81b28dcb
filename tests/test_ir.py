"""The IR core: node construction, dtype rules, structural equality/hash, IRModule."""
import pytest

from mlc_lab import IRModule
from mlc_lab.ir import GlobalVar, assert_structural_equal, structural_equal, structural_hash
from mlc_lab.tir import (Add, Block, BlockRealize, BufferStore, Cast, FloatImm, For, IntImm, IterVar,
                         PrimFunc, Range, Var, const, decl_buffer)


def vector_add(n=8, names=("A", "B", "C", "i")):
    A, B, C = (decl_buffer((n,), "float32", x) for x in names[:3])
    i = Var(names[3])
    loop = For(i, const(0), const(n), "serial", BufferStore(C, A[i] + B[i], (i,)))
    return PrimFunc((A, B, C), loop, (("global_symbol", "main"),))


def test_operators_build_ir_with_unified_dtypes():
    i, n = Var("i"), Var("n", "int64")
    e = i + 1
    assert isinstance(e, Add) and e.b.dtype == "int32"
    assert (n + 1).b.dtype == "int64"
    widened = n + i
    assert widened.dtype == "int64" and isinstance(widened.b, Cast)
    assert (i * 0.5).dtype == "float32"
    A = decl_buffer((4,), "float16", "A")
    assert (A[i] * 2.0).b.dtype == "float16"


def test_symbolic_expression_is_not_a_python_bool():
    i = Var("i")
    with pytest.raises(TypeError, match="cannot use the symbolic expression"):
        bool(i + 3)
    with pytest.raises(TypeError, match="cannot decide `i < 3`"):
        bool(i < 3)
    assert bool(i == i) and not bool(i != i)
    with pytest.raises(TypeError, match="cannot decide `i == i_1`"):
        bool(i == Var("i"))      # two variables that happen to share a name may differ


def test_comparisons_of_constants_and_identical_shapes_fold_in_a_bool_context():
    n = Var("n")
    assert IntImm("int32", 8) == IntImm("int32", 8) and IntImm("int64", 8) == 8
    assert IntImm("int32", 8) != IntImm("int32", 3) and not IntImm("int32", 8) < 3
    assert n + 1 == 1 + n and n < n + 1
    A = decl_buffer((4, n), "float32", "A")
    B = decl_buffer((n, 6), "float32", "B")
    assert A.shape[1] == B.shape[0] and A.shape[0] != B.shape[1]
    with pytest.raises(TypeError, match="cannot decide"):
        bool(A.shape[0] == B.shape[0])


def test_bad_dtype_and_buffer_indexing_errors():
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        decl_buffer((4,), "float33", "A")
    A = decl_buffer((4, 4), "float32", "A")
    with pytest.raises(IndexError, match="buffer A has 2 dimension"):
        A[Var("i")]
    with pytest.raises(ValueError, match="storage scope"):
        decl_buffer((4,), "float32", "A", scope="texture")


def test_structural_equal_maps_defined_variables():
    f1, f2 = vector_add(names=("A", "B", "C", "i")), vector_add(names=("X", "Y", "Z", "k"))
    assert structural_equal(f1, f2)
    assert structural_hash(f1) == structural_hash(f2)
    assert not structural_equal(vector_add(8), vector_add(16))
    assert structural_hash(vector_add(8)) != structural_hash(vector_add(16))


def test_structural_equal_free_variables_need_map_free_vars():
    a, b = Var("a"), Var("b")
    assert not structural_equal(a + 1, b + 1)
    assert structural_equal(a + 1, b + 1, map_free_vars=True)
    assert not structural_equal(a + a, a + b, map_free_vars=True)


def test_structural_equal_distinguishes_dtype_and_constants():
    assert not structural_equal(const(1), const(1, "int64"))
    assert not structural_equal(FloatImm("float32", 1.0), FloatImm("float32", 2.0))
    assert structural_equal(IntImm("int32", 3), const(3))


def test_assert_structural_equal_names_the_first_mismatch():
    f1, f2 = vector_add(8), vector_add(16)
    with pytest.raises(ValueError) as err:
        assert_structural_equal(f1, f2)
    message = str(err.value)
    assert "params[0].shape[0].value" in message and "8" in message and "16" in message


def test_block_fields_are_compared_but_not_block_names():
    """A block's name is a hint, as a variable's is: it never decides equality (nor the hash)."""
    vi = Var("vi")
    A = decl_buffer((4,), "float32", "A")
    def realize(name, value=0.0):
        block = Block(name, (IterVar(vi, Range(const(0), const(4))),), (), (),
                      BufferStore(A, const(value), (vi,)))
        return BlockRealize((const(1),), const(True), block)
    assert structural_equal(realize("a"), realize("a"))
    assert structural_equal(realize("a"), realize("b"))
    assert structural_hash(realize("a")) == structural_hash(realize("b"))
    assert not structural_equal(realize("a"), realize("a", 1.0))


def test_irmodule_api():
    f = vector_add()
    mod = IRModule({"main": f})
    assert mod["main"] is f and mod[GlobalVar("main")] is f
    assert list(mod.functions) == [GlobalVar("main")]
    g = vector_add(16)
    mod.update_func(mod.get_global_var("main"), g)
    assert mod["main"] is g
    with pytest.raises(KeyError, match="no function named 'nope'; it has: main"):
        mod["nope"]
    with pytest.raises(TypeError, match="named by str or GlobalVar"):
        mod[3]
    assert structural_equal(IRModule({"main": vector_add()}), IRModule({"main": vector_add()}))
    assert not structural_equal(IRModule({"main": f}), IRModule({"other": f}))


def test_nodes_are_immutable():
    i = Var("i")
    with pytest.raises(AttributeError):
        i.name = "j"
    j = i.replace(name="j")
    assert j.name == "j" and i.name == "i" and j is not i


def test_constants_convert_to_python_numbers():
    assert int(const(7)) == 7 and float(FloatImm("float32", 0.5)) == 0.5
    assert bool(const(1, "bool")) and not bool(const(0))
    with pytest.raises(TypeError, match="cannot use the symbolic expression"):
        bool(Var("n") + 1)
