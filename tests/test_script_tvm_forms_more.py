"""More script forms of the reference compiler's schedule tests: stores that convert their value,
T.assume, axis_separators, buffer.access_ptr, a named elem_offset of a matched region, the
fixed-point multiplications of quantized kernels and bool function attributes. Each parses into
IR that means what it says, prints back to text that parses into the same IR, and runs on the
interpreter and the llvm backend where it is executable (or is refused with a message that says
why)."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import ScriptError, from_source
from mlc_lab.script import tir as T
from test_script_relax import round_trip   # printed, parsed back, equal and printed the same
from test_script_tvm_forms import TARGETS, run


# -- a store converts its value to the buffer's element type ---------------------------------------
@T.prim_func
def mixed_stores(A: T.Buffer((8,), "float32"), H: T.Buffer((8,), "float16"), N: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("A"):
            vi = T.axis.spatial(8, i)
            A[vi] = vi                      # int32 iterator into float32
    for i in range(8):
        with T.block("H"):
            vi = T.axis.spatial(8, i)
            H[vi] = A[vi] * T.float32(0.5)  # float32 into float16
    for i in range(8):
        with T.block("N"):
            vi = T.axis.spatial(8, i)
            N[vi] = T.int64(7) - vi * 2     # int64 into int32


def test_a_store_of_another_dtype_becomes_an_explicit_cast():
    stores = [s.body.block.body for s in mixed_stores.body.block.body.seq]
    assert isinstance(stores[0].value, tir.Cast) and stores[0].value.dtype == "float32"
    assert isinstance(stores[1].value, tir.Cast) and stores[1].value.dtype == "float16"
    assert stores[2].value.dtype == "int32"
    text = round_trip(mixed_stores).script()
    assert 'A[vi] = T.Cast("float32", vi)' in text
    assert 'H[vi] = T.Cast("float16", A[vi] * T.float32(0.5))' in text


def test_a_constant_store_is_converted_in_place():
    @T.prim_func
    def consts(A: T.Buffer((2,), "float32"), N: T.Buffer((2,), "int8")):
        with T.block("root"):
            A[0] = T.int32(3)
            N[1] = T.int64(5)
    first, second = consts.body.block.body.seq
    assert isinstance(first.value, tir.FloatImm) and first.value.dtype == "float32" and first.value.value == 3.0
    assert isinstance(second.value, tir.IntImm) and second.value.dtype == "int8" and second.value.value == 5


@pytest.mark.parametrize("target", TARGETS)
def test_mixed_stores_numerics(target):
    a, h, n = run(mixed_stores, target, np.zeros(8, "float32"), np.zeros(8, "float16"), np.zeros(8, "int32"))
    np.testing.assert_array_equal(a, np.arange(8, dtype="float32"))
    np.testing.assert_array_equal(h, (np.arange(8) * 0.5).astype("float16"))
    np.testing.assert_array_equal(n, 7 - 2 * np.arange(8))


def test_a_float_stored_into_an_integer_buffer_warns_and_truncates():
    source = '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), N: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("N"):
            vi = T.axis.spatial(4, i)
            N[vi] = A[vi] * T.float32(1.5)
'''
    with pytest.warns(UserWarning, match="storing a float32 value into N, a int32 buffer"):
        func = from_source(source)
    a = np.array([1.0, 2.0, -3.0, 0.5], "float32")
    for target in TARGETS:
        _, n = run(func, target, a, np.zeros(4, "int32"))
        np.testing.assert_array_equal(n, np.trunc(a * 1.5).astype("int32"))


@pytest.mark.parametrize("store, message", [
    ("A[T.Ramp(0, 1, 4)] = T.float32(1) + A[0]", "at 4 lane\\(s\\): the value has 1"),
    ("A[0] = A.data", "a handle converts to nothing else"),
])
def test_stores_that_cannot_be_converted_are_refused(store, message):
    source = f'@T.prim_func\ndef f(A: T.Buffer((8,), "float32")):\n    {store}\n'
    with pytest.raises(ScriptError, match=message):
        from_source(source)


# -- T.assume ---------------------------------------------------------------------------------------
@T.prim_func
def assumed(A: T.Buffer((4, 4), "int32"), B: T.Buffer((14,), "int32")):
    for i, j in T.grid(4, 4):
        with T.block("A_assumption"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.evaluate(T.assume(not (vi == 3 and 2 <= vj) or A[vi, vj] == 42))
    for i in range(14):
        with T.block("B"):
            vi = T.axis.spatial(14, i)
            T.assume(vi < 14)
            B[vi] = A[vi // 4, vi % 4]


def test_assume_is_a_statement_that_prints_as_written():
    first = assumed.body.block.body.seq[0].body.body.block
    call = first.body.value
    assert call.op == "assume" and call.dtype == "bool"
    assert [str(r) for r in first.reads] == ["A[vi, vj]"] and first.writes == ()
    text = round_trip(assumed).script()
    assert "T.assume(vi < 14)" in text and "T.evaluate(T.assume" not in text
    with pytest.raises(TypeError, match="T.assume takes a bool condition"):
        T.assume(T.int32(1))


@pytest.mark.parametrize("target", TARGETS)
def test_assume_computes_nothing(target):
    a = np.arange(16, dtype="int32").reshape(4, 4)   # the assumption does not hold: nothing checks it
    _, b = run(assumed, target, a, np.zeros(14, "int32"))
    np.testing.assert_array_equal(b, a.ravel()[:14])
    lowered = mlc_lab.tir.transform.lower(assumed)["assumed"].script()
    assert "T.assume" not in lowered


# -- axis_separators --------------------------------------------------------------------------------
@T.prim_func
def separated(a: T.handle, B: T.Buffer((4, 4), "int32", axis_separators=[1])):
    A = T.match_buffer(a, [4, 4], "int32", axis_separators=[1])
    C = T.alloc_buffer((2, 4, 2), "int32", axis_separators=[1, 2])
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi // 2, vj, vi % 2] = A[vi, vj] * 3
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = C[vi // 2, vj, vi % 2] + 1


def test_axis_separators_are_kept_printed_and_compared():
    A, B = separated.params
    C = separated.body.block.alloc_buffers[0]
    assert A.axis_separators == B.axis_separators == (1,) and C.axis_separators == (1, 2)
    text = round_trip(separated).script()
    assert 'T.Buffer((4, 4), "int32", axis_separators=[1])' in text
    assert 'C = T.alloc_buffer((2, 4, 2), "int32", axis_separators=[1, 2])' in text
    plain = from_source(text.replace(", axis_separators=[1, 2]", ""))
    with pytest.raises(ValueError, match="axis_separators"):
        assert_structural_equal(separated, plain)
    assert T.Buffer((4, 4), "int32", axis_separators=(1,)).axis_separators == (1,)


@pytest.mark.parametrize("target", TARGETS)
def test_axis_separators_numerics(target):
    a = np.arange(16, dtype="int32").reshape(4, 4)
    _, b = run(separated, target, a, np.zeros((4, 4), "int32"))
    np.testing.assert_array_equal(b, a * 3 + 1)


def test_axis_separators_that_are_not_increasing_are_refused():
    source = '@T.prim_func\ndef f(a: T.handle):\n    A = T.match_buffer(a, [4, 4, 4], axis_separators={})\n'
    for bad in ("[2, 1]", "[-1]", "[1.5]"):
        with pytest.raises(ScriptError, match="axis_separators"):
            from_source(source.format(bad))


def test_building_refuses_separators_without_axes_or_with_strides():
    C = separated.body.block.alloc_buffers[0]

    def swap(new):
        class Swap(tir.StmtExprMutator):
            def visit_Buffer(self, buffer):
                return new if buffer is C else buffer
        return separated.replace(body=Swap().visit(separated.body))
    with pytest.raises(ValueError, match=r"buffer C: axis_separators=\[1, 3\] must lie in 1 .. 2"):
        mlc_lab.build(swap(C.replace(axis_separators=(1, 3))), target="llvm")
    strided = C.replace(strides=(tir.const(8), tir.const(2), tir.const(1)))
    with pytest.raises(NotImplementedError, match="buffer C has both strides and axis_separators"):
        mlc_lab.build(swap(strided), target="llvm")


def test_schedule_steps_keep_axis_separators_on_derived_buffers():
    sch = tir.Schedule(separated)
    sch.cache_read(sch.get_block("C"), 0, "local")    # of the parameter A
    sch.cache_write(sch.get_block("C"), 0, "local")   # of C
    allocs = {b.name: b.axis_separators for b in sch.mod["main"].body.block.alloc_buffers}
    assert allocs == {"C": (1, 2), "A_local": (1,), "C_local": (1, 2)}
    a = np.arange(16, dtype="int32").reshape(4, 4)
    _, b = run(sch.mod["main"], "llvm", a, np.zeros((4, 4), "int32"))
    np.testing.assert_array_equal(b, a * 3 + 1)


def test_rfactor_buffer_keeps_the_physical_grouping():
    @T.prim_func
    def row_sum(A: T.Buffer((4, 4, 8), "float32"), B: T.Buffer((4, 4), "float32", axis_separators=[1])):
        for i, j, k in T.grid(4, 4, 8):
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    B[vi, vj] = T.float32(0)
                B[vi, vj] = B[vi, vj] + A[vi, vj, vk]
    sch = tir.Schedule(row_sum)
    k = sch.get_loops(sch.get_block("B"))[2]
    _, ki = sch.split(k, [None, 4])
    rf = sch.get(sch.rfactor(ki, 2)).writes[0].buffer
    assert [int(d) for d in rf.shape] == [4, 4, 4] and rf.axis_separators == (1,)
    sch = tir.Schedule(row_sum)
    k = sch.get_loops(sch.get_block("B"))[2]
    _, ki = sch.split(k, [None, 4])
    rf = sch.get(sch.rfactor(ki, 0)).writes[0].buffer
    assert rf.axis_separators == (2,)
    a = np.random.default_rng(0).random((4, 4, 8), dtype="float32")
    _, b = run(sch.mod["main"], "llvm", a, np.zeros((4, 4), "float32"))
    np.testing.assert_allclose(b, a.sum(-1), rtol=1e-5)


# -- buffer.access_ptr --------------------------------------------------------------------------
@T.prim_func
def table_lookup(table: T.Buffer((64,), "int8"), x: T.Buffer((16,), "float32"), y: T.Buffer((16,), "float32")):
    t = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("t"):
            vi = T.axis.spatial(16, i)
            t[vi] = x[vi] * T.float32(2)
    for i in range(16):
        with T.block("y"):
            vi = T.axis.spatial(16, i)
            T.evaluate(table.access_ptr("r"))
            T.evaluate(y.access_ptr("w", offset=vi, extent=1))
            y[vi] = t[vi] + T.float32(1)


def test_access_ptr_is_the_pointer_builtin_and_round_trips():
    block = table_lookup.body.block.body.seq[1].body.block
    call = block.body.seq[0].value
    assert call.op == "call_extern" and call.args[0].value == "tvm_access_ptr" and call.dtype == "handle"
    assert [str(a) for a in call.args[3:]] == ["0", "64", "1"]
    assert [str(r) for r in block.reads] == ["table[0:64]", "t[vi]"]   # read only: "r"
    assert [str(r) for r in block.writes] == ["y[0:16]"]
    text = round_trip(table_lookup).script()
    assert 'T.tvm_access_ptr(T.type_annotation("int8"), table.data, 0, 64, 1)' in text
    assert 'T.tvm_access_ptr(T.type_annotation("float32"), y.data, vi, 1, 2)' in text
    with pytest.raises(ValueError, match="access mask"):
        table_lookup.params[0].access_ptr("x")


def test_inlining_keeps_pointer_accesses_and_refuses_inlining_a_pointed_buffer():
    sch = tir.Schedule(table_lookup)
    sch.compute_inline(sch.get_block("t"))
    block = sch.get(sch.get_block("y"))
    assert [str(r) for r in block.reads] == ["table[0:64]", "x[vi]"]
    assert [str(r) for r in block.writes] == ["y[0:16]"]
    text = table_lookup.script().replace("T.evaluate(y.access_ptr", "T.evaluate(t.access_ptr")
    pointed = from_source(text.replace('T.tvm_access_ptr(T.type_annotation("float32"), y.data',
                                       'T.tvm_access_ptr(T.type_annotation("float32"), t.data'))
    sch = tir.Schedule(pointed)
    with pytest.raises(tir.ScheduleError, match="still accesses t other than by loads"):
        sch.compute_inline(sch.get_block("t"))


def test_a_pointer_evaluated_for_nothing_builds_as_a_no_op():
    lib = mlc_lab.build(table_lookup, target="llvm")   # pointers are values on llvm; unused here
    x = np.arange(16, dtype="float32")
    y = mlc_lab.nd.empty((16,), "float32")
    lib(mlc_lab.nd.array(np.zeros(64, "int8")), mlc_lab.nd.array(x), y)
    np.testing.assert_array_equal(y.numpy(), 2 * x + 1)


# -- elem_offset=<name> on a matched region ---------------------------------------------------------
@T.prim_func
def named_offsets(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j in T.grid(2, 2):
        with T.block("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            T.writes(C[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            A_offset = T.int32()
            A_sub = T.match_buffer(A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16], (16, 16),
                                   elem_offset=A_offset)
            C_sub = T.match_buffer(C[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16], (16, 16))
            for x, y in T.grid(16, 16):
                with T.block("inner"):
                    vx, vy = T.axis.remap("SS", [x, y])
                    C_sub[vx, vy] = A_sub[vx, vy] + T.Cast("float32", A_offset + C_sub.elem_offset * 0)


def test_a_named_elem_offset_stands_for_where_the_region_starts():
    inner = named_offsets.body.block.body.body.body.block.body.body.body.block
    text = round_trip(named_offsets).script()
    assert "elem_offset" not in text and "A_offset" not in text
    assert 'T.Cast("float32", vi * 512 + vj * 16 + (vi * 512 + vj * 16) * 0)' in text
    assert inner.name_hint == "inner"
    a = np.random.default_rng(2).random((32, 32), dtype="float32")
    offsets = (np.arange(32)[:, None] // 16 * 512 + np.arange(32)[None, :] // 16 * 16).astype("float32")
    for target in TARGETS:
        _, c = run(named_offsets, target, a, np.zeros((32, 32), "float32"))
        np.testing.assert_allclose(c, a + offsets, rtol=1e-6)


def test_a_named_elem_offset_names_one_place():
    text = named_offsets.script()
    assert 'C_sub = T.match_buffer(C[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16], (16, 16), "float32")' in text
    text = text.replace('A_sub = T.match_buffer(', 'off = T.int32()\n            A_sub = T.match_buffer(', 1)
    text = text.replace('(16, 16), "float32")', '(16, 16), "float32", elem_offset=off)')
    parsed = from_source(text)
    assert "elem_offset" not in parsed.script()          # both regions start at the same element
    shifted = text.replace("C_sub = T.match_buffer(C[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16]",
                           "C_sub = T.match_buffer(C[vj * 16:vj * 16 + 16, vi * 16:vi * 16 + 16]")
    with pytest.raises(ScriptError, match="elem_offset=vi \\* 512 \\+ vj \\* 16 does not hold"):
        from_source(shifted)


# -- T.q_multiply_shift / T.q_multiply_shift_per_axis -------------------------------------------
def _q_reference(x, y, q, left, right, lshift):
    """The fixed-point product in Python integers: ((x << left) * y + 2**(q+right-1)) >> (q+right)."""
    wide = np.asarray(x, "int64") << np.where(lshift, left, 0)
    total = q + np.asarray(right, "int64")
    return ((wide * y + (np.int64(1) << (total - 1))) >> total).astype("int32")


@T.prim_func
def requantize(X: T.Buffer((16,), "int32"), L: T.Buffer((16,), "int32"), R: T.Buffer((16,), "int32"),
               S: T.Buffer((16,), "int32"), Y: T.Buffer((16,), "int32"), Z: T.Buffer((16,), "int32"),
               W: T.Buffer((16,), "int32")):
    for i in range(16):
        with T.block("Y"):
            vi = T.axis.spatial(16, i)
            Y[vi] = T.q_multiply_shift(X[vi], 1457846997, 31, -3, dtype="int32")
            Z[vi] = T.q_multiply_shift(X[vi], 1073741824, 31, S[vi])   # 0.5 in Q31
            W[vi] = T.q_multiply_shift_per_axis(X[vi], 1518500250, L[vi], R[vi], 31, True, T.bool(True))


@pytest.mark.parametrize("target", TARGETS)
def test_fixed_point_multiplication_numerics(target):
    rng = np.random.default_rng(5)
    x = rng.integers(-100000, 100000, 16).astype("int32")
    left = rng.integers(0, 4, 16).astype("int32")
    right = rng.integers(0, 6, 16).astype("int32")
    s = rng.integers(-5, 4, 16).astype("int32")
    outs = run(requantize, target, x, left, right, s, *(np.zeros(16, "int32") for _ in range(3)))
    y, z, w = outs[4:]
    np.testing.assert_array_equal(y, _q_reference(x, 1457846997, 31, 0, 3, False))
    np.testing.assert_array_equal(z, _q_reference(x, 1 << 30, 31, np.maximum(s, 0), np.maximum(-s, 0), s > 0))
    np.testing.assert_array_equal(w, _q_reference(x, 1518500250, 31, left, right, True))
    round_trip(requantize)


def test_fixed_point_multiplication_takes_int32_only():
    with pytest.raises(TypeError, match="computes on int32 values"):
        T.q_multiply_shift(T.int64(3), 1 << 30, 31, 0)
    with pytest.raises(TypeError, match="computes int32, but dtype='int8'"):
        T.q_multiply_shift(T.int32(3), 1 << 30, 31, 0, dtype="int8")


def test_a_bool_function_attribute_is_the_flag_either_way():
    source = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    T.func_attr({{"tir.noalias": {}}})\n    A[0] = T.float32(0)\n'
    flag, typed = from_source(source.format("True")), from_source(source.format("T.bool(True)"))
    assert dict(typed.attrs)["tir.noalias"] is True
    assert_structural_equal(flag, typed)
