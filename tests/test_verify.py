"""tir.verify: a well-formed function passes; each rule, when broken, fails with its own message.
Also the visitor/mutator that verify is built on."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import te, tir
from mlc_lab.script import tir as T
from mlc_lab.ir import IRModule
from mlc_lab.tir import (Allocate, Block, BlockRealize, BufferLoad, BufferRegion, BufferStore, FloatImm, For,
                         IntImm, IterVar, LetStmt, PrimFunc, Range, StmtExprMutator,
                         StmtExprVisitor, Var, VerifyError, const, decl_buffer)
from mlc_lab.tir.stmt import seq
from mlc_lab.tir.verify import verify_block_names

ATTRS = (("global_symbol", "add_one"), ("tir.noalias", True))


def add_one(n=128, *, loop_extent=None, dom=None, loop_dtype="int32", index=None, writes=True,
            params=None, predicate=None, value_indices=None):
    """``B[vi] = A[vi] + 1`` in a block under ``for i``; keyword arguments break one rule each."""
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    i = Var("i", loop_dtype)
    vi = Var("vi")
    idx = (vi,) if index is None else index(vi)
    load_idx = (vi,) if value_indices is None else value_indices(vi)
    body = BufferStore(B, BufferLoad(A, load_idx) + FloatImm("float32", 1.0), idx)
    block = Block("B", (IterVar(vi, Range(const(0), const(n) if dom is None else const(dom)), "spatial"),),
                  (BufferRegion.full(A),), (BufferRegion.full(B),) if writes else (), body)
    realize = BlockRealize((i,), IntImm("bool", 1) if predicate is None else predicate(i), block)
    loop = For(i, const(0, loop_dtype), const(loop_extent or n, loop_dtype), "serial", realize)
    root = Block("root", (), (), (), loop)
    return PrimFunc(tuple(params if params is not None else (A, B)),
                    BlockRealize((), IntImm("bool", 1), root), ATTRS)


def test_well_formed_functions_pass():
    assert tir.verify(add_one()) is True
    assert tir.verify(IRModule({"add_one": add_one()})) is True


def test_te_functions_pass():
    n = te.var("n")
    A = te.placeholder((n, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    k = te.reduce_axis((0, 64), name="k")
    Y = te.compute((n, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, 32), lambda i, j: te.max(Y[i, j], 0.0), name="C")
    assert tir.verify(te.create_prim_func([A, B, C]))


def test_undefined_variable():
    k = Var("k")
    with pytest.raises(VerifyError, match=r'function add_one, block "B": variable k is used but not '
                                          r"defined here"):
        tir.verify(add_one(index=lambda vi: (vi + k,)))


def test_undefined_variable_in_loop_extent():
    A = decl_buffer((16,), "float32", "A")
    m, i = Var("m"), Var("i")
    func = PrimFunc((A,), For(i, const(0), m, "serial", BufferStore(A, FloatImm("float32", 0.0), (i,))))
    with pytest.raises(VerifyError, match="variable m is used but not defined"):
        tir.verify(func)


def test_shape_variables_of_parameters_and_let_vars_are_defined():
    n = Var("n")
    A = decl_buffer((n,), "float32", "A")
    i, x = Var("i"), Var("x")
    body = For(i, const(0), n, "serial",
               LetStmt(x, i + 1, BufferStore(A, FloatImm("float32", 0.0), (x - 1,))))
    assert tir.verify(PrimFunc((A,), body))


def test_wrong_number_of_store_indices():
    with pytest.raises(VerifyError, match=r"buffer B has 1 dimension\(s\) but is stored to with 2 "
                                          r"index\(es\)"):
        tir.verify(add_one(index=lambda vi: (vi, vi)))


def test_wrong_number_of_load_indices():
    with pytest.raises(VerifyError, match=r"buffer A has 1 dimension\(s\) but is loaded from with 2"):
        tir.verify(add_one(value_indices=lambda vi: (vi, const(0))))


def test_buffer_not_passed_in():
    func = add_one()
    A, B = func.params
    with pytest.raises(VerifyError, match="buffer A is used but not allocated or passed in"):
        tir.verify(func.replace(params=(B,)))


def test_allocate_defines_its_buffer():
    A = decl_buffer((4,), "float32", "A")
    tmp = decl_buffer((4,), "float32", "tmp", scope="local")
    i = Var("i")
    store_tmp = BufferStore(tmp, A[i], (i,))
    func = PrimFunc((A,), For(i, const(0), const(4), "serial", Allocate(tmp, store_tmp)))
    assert tir.verify(func)
    outside = For(i, const(0), const(4), "serial", store_tmp)
    with pytest.raises(VerifyError, match="buffer tmp is used but not allocated"):
        tir.verify(PrimFunc((A,), outside))


def test_binding_outside_iterator_domain():
    with pytest.raises(VerifyError, match=r'block "B": iterator vi has domain \[0, 128\) but its binding '
                                          r".* takes values in \[0, 255\]"):
        tir.verify(add_one(loop_extent=256))


def test_binding_guarded_by_predicate_may_overhang():
    assert tir.verify(add_one(loop_extent=256, predicate=lambda i: i < 128))


def test_split_and_fused_bindings_inside_domain_pass():
    A = decl_buffer((128,), "float32", "A")
    i0, i1, v = Var("i0"), Var("i1"), Var("v")
    block = Block("A", (IterVar(v, Range(const(0), const(128))),), (), (BufferRegion.full(A),),
                  BufferStore(A, FloatImm("float32", 0.0), (v,)))
    nest = For(i0, const(0), const(32), "serial",
               For(i1, const(0), const(4), "serial",
                   BlockRealize((i0 * 4 + i1,), IntImm("bool", 1), block)))
    assert tir.verify(PrimFunc((A,), nest))
    too_wide = nest.replace(extent=const(33))
    with pytest.raises(VerifyError, match=r"takes values in \[0, 131\]"):
        tir.verify(PrimFunc((A,), too_wide))


def test_store_to_buffer_missing_from_writes():
    with pytest.raises(VerifyError, match=r"block B stores to buffer B, which is not in its writes"):
        tir.verify(add_one(writes=False))


def test_block_may_store_to_its_own_allocation():
    A = decl_buffer((4,), "float32", "A")
    tmp = decl_buffer((4,), "float32", "tmp", scope="local")
    i = Var("i")
    inner = For(i, const(0), const(4), "serial",
                seq(BufferStore(tmp, FloatImm("float32", 1.0), (i,)), BufferStore(A, tmp[i], (i,))))
    block = Block("fill", (), (), (BufferRegion.full(A),), inner, alloc_buffers=(tmp,))

    def func_of(fill):
        root = Block("root", (), (), (), BlockRealize((), IntImm("bool", 1), fill))
        return PrimFunc((A,), BlockRealize((), IntImm("bool", 1), root))

    assert tir.verify(func_of(block))
    with pytest.raises(VerifyError, match="block fill stores to buffer A"):
        tir.verify(func_of(block.replace(writes=())))


def test_binding_dtype_must_match_iterator():
    with pytest.raises(VerifyError, match="iterator vi is int32 but its binding i is int64"):
        tir.verify(add_one(loop_dtype="int64"))


def test_error_carries_function_rule_and_node():
    with pytest.raises(VerifyError) as info:
        tir.verify(add_one(writes=False))
    assert isinstance(info.value, ValueError)
    assert info.value.func_name == "add_one" and isinstance(info.value.node, BufferStore)
    assert "T.writes" in info.value.rule


def test_verify_rejects_other_objects():
    with pytest.raises(TypeError, match="PrimFunc or an IRModule"):
        tir.verify("not a function")


# -- the visitor and mutator -----------------------------------------------------------------------
def test_visitor_dispatches_by_class_name_and_recurses():
    class CountVars(StmtExprVisitor):
        def __init__(self):
            self.names = []

        def visit_Var(self, var):
            self.names.append(var.name)

    counter = CountVars()
    counter.visit(add_one().body)
    assert "i" in counter.names and "vi" in counter.names


def test_mutator_preserves_identity_when_nothing_changes():
    func = add_one()
    assert StmtExprMutator().visit(func) is func


def test_mutator_rebuilds_changed_path_and_shares_rebuilt_buffers():
    n, m = Var("n"), Var("m")
    A = decl_buffer((n,), "float32", "A")
    i = Var("i")
    loop = For(i, const(0), n, "serial", BufferStore(A, A[i] + FloatImm("float32", 1.0), (i,)))

    class Rename(StmtExprMutator):
        def visit_Var(self, var):
            return m if var is n else var

    new = Rename().visit(loop)
    assert new is not loop and new.extent is m
    assert new.body.buffer.shape[0] is m
    assert new.body.buffer is new.body.value.a.buffer  # one rebuilt buffer, used everywhere
    assert new.loop_var is i


# -- rules for IR built any way (script, te, the Python API) -------------------------------------
def reduction(kinds="SR", init=True, store_index=None, n=8):
    """``B[vi] += A[vi, vk]`` under ``for i, k``; ``kinds`` gives the iterators' kinds."""
    A, B = decl_buffer((n, n), "float32", "A"), decl_buffer((n,), "float32", "B")
    i, k, vi, vk = Var("i"), Var("k"), Var("vi"), Var("vk")
    kind = {"S": "spatial", "R": "reduce"}
    iters = tuple(IterVar(v, Range(const(0), const(n)), kind[c]) for v, c in zip((vi, vk), kinds))
    idx = (vi,) if store_index is None else store_index(vi, vk)
    body = BufferStore(B, BufferLoad(B, idx) + BufferLoad(A, (vi, vk)), idx)
    block = Block("B", iters, (BufferRegion.full(A), BufferRegion.full(B)), (BufferRegion.full(B),),
                  body, BufferStore(B, FloatImm("float32", 0.0), idx) if init else None)
    nest = For(i, const(0), const(n), "serial",
               For(k, const(0), const(n), "serial", BlockRealize((i, k), IntImm("bool", 1), block)))
    root = Block("root", (), (), (), nest)
    return PrimFunc((A, B), BlockRealize((), IntImm("bool", 1), root), ATTRS)


def test_reduction_passes():
    assert tir.verify(reduction())


def test_outer_loop_variable_in_block_body():
    A, B = decl_buffer((8, 8), "float32", "A"), decl_buffer((8,), "float32", "B")
    i, j, vi = Var("i"), Var("j"), Var("vi")
    body = BufferStore(B, BufferLoad(A, (vi, j)), (vi,))   # j is not bound to an iterator
    block = Block("B", (IterVar(vi, Range(const(0), const(8))),), (BufferRegion.full(A),),
                  (BufferRegion.full(B),), body)
    nest = For(i, const(0), const(8), "serial",
               For(j, const(0), const(8), "serial", BlockRealize((i,), IntImm("bool", 1), block)))
    func = PrimFunc((A, B), BlockRealize((), IntImm("bool", 1), Block("root", (), (), (), nest)))
    with pytest.raises(VerifyError, match=r'block "B": loop variable j of a loop outside the block is '
                                          r"used in its body") as info:
        tir.verify(func)
    assert info.value.node is j and "T.axis" in info.value.rule


def test_duplicate_block_names_are_well_formed_but_not_schedulable():
    func = add_one()
    loop = func.body.block.body
    twice = func.replace(body=func.body.replace(block=func.body.block.replace(body=seq(loop, loop))))
    assert tir.verify(twice)            # the IR allows it, as the reference compiler does
    with pytest.raises(VerifyError, match="two blocks are named B") as info:
        verify_block_names(twice)       # the schedule, which finds blocks by name, does not
    assert "unique" in info.value.rule and info.value.node is loop.body.block
    with pytest.raises(VerifyError, match="two blocks are named B"):
        tir.Schedule(twice)
    assert verify_block_names(func)


def test_reduce_iterator_in_store_index():
    with pytest.raises(VerifyError, match="block B stores to B at an index that uses its reduce "
                                          "iterator vk"):
        tir.verify(reduction(store_index=lambda vi, vk: (vk,)))


def test_init_without_reduce_iterator_that_leaves_an_iterator_out_of_the_output():
    with pytest.raises(VerifyError, match="block B has a T.init\\(\\) but no reduce iterator, and its "
                                          "iterator vk does not index what the init writes") as info:
        tir.verify(reduction(kinds="SS"))
    assert "T.axis.reduce" in info.value.rule


def test_init_without_reduce_iterator_is_fine_when_every_iterator_indexes_the_output():
    # what rfactor of a whole reduce loop makes: the init runs at every (spatial) point
    func = reduction(kinds="SS", store_index=lambda vi, vk: (vi,))
    B = func.params[1]
    block = func.body.block.body.body.body.block
    rf = decl_buffer((8, 8), "float32", "B_rf")
    vi, vk = (iv.var for iv in block.iter_vars)
    rf_block = block.replace(
        writes=(BufferRegion.full(rf),), reads=(BufferRegion.full(func.params[0]), BufferRegion.full(rf)),
        body=BufferStore(rf, BufferLoad(rf, (vk, vi)) + BufferLoad(func.params[0], (vi, vk)), (vk, vi)),
        init=BufferStore(rf, FloatImm("float32", 0.0), (vk, vi)))
    realize = func.body.block.body.body.body.replace(block=rf_block)
    nest = func.body.block.body.replace(body=func.body.block.body.body.replace(body=realize))
    root = func.body.block.replace(body=nest, alloc_buffers=(rf,))
    assert B is func.params[1]
    assert tir.verify(func.replace(body=func.body.replace(block=root)))


def test_stored_value_must_have_the_buffers_dtype():
    A = decl_buffer((4,), "float32", "A")
    i = Var("i")
    store = BufferStore(A, i, (i,))   # an int32 value into a float32 buffer, built directly
    with pytest.raises(VerifyError, match="a value of dtype int32 is stored into buffer A of dtype float32"):
        tir.verify(PrimFunc((A,), For(i, const(0), const(4), "serial", store)))


def test_negative_buffer_dimension():
    from mlc_lab.tir.buffer import Buffer
    bad = Buffer("X", (const(-4),), "float32")
    with pytest.raises(VerifyError, match="buffer X has dimension 0 of size -4"):
        tir.verify(PrimFunc((bad,), tir.Evaluate(const(0))))
    with pytest.raises(ValueError, match="buffer X: dimension sizes cannot be negative"):
        decl_buffer((4, -4), "float32", "X")


def test_float_intrinsic_on_integers():
    from mlc_lab.tir.expr import Call
    A = decl_buffer((4,), "int32", "A")
    i = Var("i")
    store = BufferStore(A, Call("int32", "exp", (BufferLoad(A, (i,)),)), (i,))
    with pytest.raises(VerifyError, match=r"T.exp is given A\[i\] of dtype int32") as info:
        tir.verify(PrimFunc((A,), For(i, const(0), const(4), "serial", store)))
    assert "floats" in info.value.rule
    with pytest.raises(TypeError, match="T.exp computes on floats"):
        tir.call_intrin("exp", BufferLoad(A, (i,)))


def test_predicate_of_loop_bounds_narrows_the_binding_check():
    assert tir.verify(add_one(loop_extent=256, predicate=lambda i: i < 128))
    with pytest.raises(VerifyError, match=r"domain \[0, 128\) but its binding i takes values in \[0, 199\]"):
        tir.verify(add_one(loop_extent=256, predicate=lambda i: i < 200))


def test_error_shows_the_function_with_the_culprit_underlined():
    with pytest.raises(VerifyError) as info:
        tir.verify(reduction(store_index=lambda vi, vk: (vk,)))
    lines = str(info.value).splitlines()
    store_row = next(n for n, line in enumerate(lines) if "B[vk] = T.float32(0)" in line)
    assert lines[store_row + 1].strip() == "^" * len("B[vk] = T.float32(0)")


def test_build_refuses_ill_formed_functions_on_every_cpu_target():
    import mlc_lab
    for target in ("python", "llvm"):
        with pytest.raises(VerifyError, match=r"iterator vi has domain \[0, 128\) but its binding i takes "
                                              r"values in \[0, 255\]"):
            mlc_lab.build(add_one(loop_extent=256), target=target)


def test_an_opaque_block_may_use_the_loops_around_it():
    """A block without iterators sees the enclosing loops, as in the reference compiler; schedules
    and builds of it keep their numerics."""
    @T.prim_func
    def opaque(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("opaque"):
                T.reads(A[i])
                T.writes(B[i])
                B[i] = A[i] + T.float32(1)

    assert tir.verify(opaque)
    sch = mlc_lab.tir.Schedule(opaque)
    i0, i1 = sch.split(sch.get_loops(sch.get_block("opaque"))[0], [4, 4])
    sch.reorder(i1, i0)
    a, b = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    mlc_lab.build(sch.mod, target="llvm")(a, b)
    np.testing.assert_array_equal(b, a + 1)
