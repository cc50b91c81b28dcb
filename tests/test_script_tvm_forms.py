"""Script forms that the reference compiler's schedule tests are written in: each parses into IR
that means what it says, prints back to text that parses into the same IR, and runs on the
interpreter and the llvm backend where it is executable (or is refused with a message that says
why)."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import ScriptError, from_source
from mlc_lab.script import tir as T
from mlc_lab.tir import stmt as S
from mlc_lab.tir.analysis import block_access_regions
from mlc_lab.tir.transform import lower_init_block
from corpus import mm_relu
from test_script_relax import round_trip   # printed, parsed back, equal and printed the same

TARGETS = ["python", "llvm"]




def run(func, target, *arrays):
    """Run ``func`` built for ``target`` on copies of ``arrays``; the arrays after the call."""
    nds = [mlc_lab.nd.array(a.copy()) for a in arrays]
    mlc_lab.build(func, target=target)(*nds)
    return [nd.numpy() for nd in nds]


# -- dtype= on intrinsics -----------------------------------------------------------------------
@T.prim_func
def padded_shift(x: T.Buffer((16,), "int32"), y: T.Buffer((24,), "int32"),
                 h: T.Buffer((16,), "float16"), g: T.Buffer((16,), "float16")):
    for i in range(24):
        with T.block("pad"):
            vi = T.axis.spatial(24, i)
            y[vi] = T.if_then_else(vi >= 4 and vi < 20, x[vi - 4], 7, dtype="int32")
    for i in range(16):
        with T.block("g"):
            vi = T.axis.spatial(16, i)
            g[vi] = T.floor(T.sqrt(T.exp(h[vi], dtype="float16"), dtype="float16") * 4, dtype="float16")


def test_intrinsic_dtype_is_the_result_dtype_and_types_python_numbers():
    store = padded_shift.body.block.body.seq[0].body.block.body
    call = store.value
    assert call.op == "if_then_else" and call.dtype == "int32" and call.args[2].dtype == "int32"
    half = padded_shift.body.block.body.seq[1].body.block.body.value
    assert half.op == "floor" and half.dtype == "float16"
    zero = T.if_then_else(True, 0, 1, dtype="float32")
    assert zero.dtype == "float32" and zero.args[1].dtype == "float32"
    round_trip(padded_shift)


def test_intrinsic_dtype_that_disagrees_is_refused():
    with pytest.raises(TypeError, match=r"T.exp\(...\) computes float32 here, but dtype='float16'"):
        T.exp(T.float32(1), dtype="float16")
    source = '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("A"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.if_then_else(vi < 2, A[vi], T.float32(0), dtype="int32")
'''
    with pytest.raises(ScriptError, match="computes float32 here, but dtype='int32'"):
        from_source(source)


@pytest.mark.parametrize("target", TARGETS)
def test_intrinsic_dtype_numerics(target):
    x = np.arange(16, dtype="int32") * 3
    h = np.linspace(0, 2, 16).astype("float16")
    _, y, _, g = run(padded_shift, target, x, np.zeros(24, "int32"), h, np.zeros(16, "float16"))
    want = np.full(24, 7, "int32")
    want[4:20] = x
    np.testing.assert_array_equal(y, want)
    ref = np.floor(np.sqrt(np.exp(h.astype("float32"))) * 4)
    np.testing.assert_allclose(g.astype("float32"), ref, atol=1)   # float16 rounding at a floor


# -- T.likely -----------------------------------------------------------------------------------
@T.prim_func
def likely_pad(A: T.Buffer((8, 8), "float32"), B: T.Buffer((10, 10), "float32")):
    for i, j in T.grid(10, 10):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.float32(-1)
    for i, j in T.grid(10, 10):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(T.likely(1 <= i, dtype="bool") and T.likely(i < 9, dtype="bool")
                    and T.likely(1 <= j) and T.likely(j < 9))
            T.reads(A[vi - 1, vj - 1])
            T.writes(B[vi, vj])
            if T.likely(vi + vj > 2):
                B[vi, vj] = A[vi - 1, vj - 1]


def test_likely_is_a_hint_call_whose_value_is_its_argument():
    hint = T.likely(tir.Var("i") < 3)
    assert hint.op == "likely" and hint.dtype == "bool"
    text = round_trip(likely_pad).script()
    assert "T.likely(i >= 1)" in text and "dtype" not in text


@pytest.mark.parametrize("target", TARGETS)
def test_likely_numerics(target):
    a = np.random.default_rng(0).random((8, 8), dtype="float32")
    _, b = run(likely_pad, target, a, np.zeros((10, 10), "float32"))
    want = np.full((10, 10), -1, "float32")
    want[1:9, 1:9] = a
    want[1, 1] = -1           # vi + vj > 2 fails only there
    np.testing.assert_array_equal(b, want)


# -- T.match_buffer(elem_offset=, align=, offset_factor=, strides=) -------------------------------
@T.prim_func
def tiled_copy(a: T.handle, c: T.handle):
    A = T.match_buffer(a, [32, 32], elem_offset=0, align=64, offset_factor=1)
    C = T.match_buffer(c, [32, 32], elem_offset=0, align=64, offset_factor=1)
    for i, j in T.grid(2, 2):
        with T.block("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            T.writes(C[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            A0 = T.match_buffer(A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16], (16, 16),
                                strides=[32, 1], offset_factor=16)
            C0 = T.match_buffer(C[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16], (16, 16),
                                elem_offset=vi * 512 + vj * 16, offset_factor=1)
            for x, y in T.grid(16, 16):
                with T.block("inner"):
                    vx, vy = T.axis.remap("SS", [x, y])
                    C0[vx, vy] = A0[vx, vy] + T.float32(1)


def test_buffer_options_that_hold_leave_the_plain_buffer():
    @T.prim_func
    def plain(a: T.handle, b: T.handle):
        A = T.match_buffer(a, [8])
        B = T.match_buffer(b, [8])
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]

    @T.prim_func
    def with_options(a: T.handle, b: T.handle):
        A = T.match_buffer(a, [8], elem_offset=0, align=64, offset_factor=1)
        B = T.match_buffer(b, [8], elem_offset=T.int32(0), align=16, offset_factor=1)
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi]
    assert_structural_equal(with_options.replace(attrs=plain.attrs), plain)


def test_matched_region_keeps_its_strides_and_prints_them():
    A0 = tiled_copy.body.block.body.body.body.block.match_buffers[0].buffer
    assert [int(s) for s in A0.strides] == [32, 1]
    text = round_trip(tiled_copy).script()
    assert "strides=(32, 1)" in text and "elem_offset" not in text and "offset_factor" not in text


@pytest.mark.parametrize("target", TARGETS)
def test_matched_region_with_strides_numerics(target):
    a = np.random.default_rng(1).random((32, 32), dtype="float32")
    _, c = run(tiled_copy, target, a, np.zeros((32, 32), "float32"))
    np.testing.assert_allclose(c, a + 1, rtol=1e-6)


@pytest.mark.parametrize("claim, message", [
    ("strides=[16, 1]", "stride 0 is 16, but the region of A has strides \\(32, 1\\)"),
    ("offset_factor=32", "offset_factor=32 does not hold: the region starts at element vi \\* 512 \\+ vj \\* 16"),
    ("elem_offset=0", "elem_offset=0 does not hold"),
    ("elem_offset=off", "elem_offset=off would bind a variable"),
])
def test_matched_region_claims_that_do_not_hold_are_refused(claim, message):
    text = tiled_copy.script().replace('(16, 16), "float32", strides=(32, 1))',
                                       f'(16, 16), "float32", {claim})')
    text = text.replace("    for i, j in T.grid(2, 2):", "    off = T.int32()\n    for i, j in T.grid(2, 2):", 1)
    assert claim in text
    with pytest.raises(ScriptError, match=message):
        from_source(text)


def test_a_nonzero_elem_offset_of_a_whole_buffer_is_refused():
    for source in ('A = T.match_buffer(a, [8], elem_offset=4)', 'A = T.alloc_buffer([8], elem_offset=4)'):
        with pytest.raises(ScriptError, match="elem_offset=4 is not supported: an mlc_lab buffer starts at"):
            from_source(f"@T.prim_func\ndef f(a: T.handle):\n    {source}\n    A[0] = T.float32(0)\n")
    with pytest.raises(ValueError, match="elem_offset=2"):
        T.Buffer((8,), "float32", elem_offset=2)


def test_lowering_refuses_a_view_whose_strides_are_not_its_storage():
    realize = tiled_copy.body.block.body.body.body
    view = realize.block.match_buffers[0].buffer
    wrong = view.replace(strides=(tir.const(64), tir.const(1)))   # built by hand: the parser refuses it

    class Swap(tir.StmtExprMutator):
        def visit_Buffer(self, buffer):
            return wrong if buffer is view else buffer
    bad = tiled_copy.replace(body=Swap().visit(tiled_copy.body))
    with pytest.raises(NotImplementedError, match="declares the strides"):
        mlc_lab.build(bad, target="llvm")


# -- T.allocate_const ---------------------------------------------------------------------------
def _with_constants(use_decl_buffer: bool):
    def over(*args, **kwargs):
        return T.decl_buffer(*args, **kwargs) if use_decl_buffer else T.Buffer(*args, **kwargs)

    @T.prim_func
    def scale(A: T.Buffer((4, 6), "float32"), C: T.Buffer((4, 6), "float32")):
        B = T.alloc_buffer([4, 6])
        w_data = T.allocate_const([0.5, 1.0, 1.5, 2.0, 2.5, 3.0], "float32", [6])
        w = over([6], dtype="float32", data=w_data)
        b_data = T.allocate_const([[1, 2, 3], [4, 5, 6]], dtype="int32", extents=[2, 3])
        for i, j in T.grid(4, 6):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * w[vj]
        for i, j in T.grid(4, 6):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.Cast("float32", b_data[vj // 3, vj % 3])
    return scale


def _reference(a):
    return a * np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0], "float32") + np.arange(1, 7, dtype="float32")


@pytest.mark.parametrize("use_decl_buffer", [True, False])
def test_allocate_const_is_an_allocation_holding_its_values(use_decl_buffer):
    func = _with_constants(use_decl_buffer)
    alloc = func.body.block.body
    assert isinstance(alloc, S.AllocateConst) and isinstance(alloc, S.Allocate)
    assert alloc.data == (0.5, 1.0, 1.5, 2.0, 2.5, 3.0) and alloc.buffer.name == "w_data"
    inner = alloc.body
    assert isinstance(inner, S.AllocateConst) and inner.data == (1, 2, 3, 4, 5, 6)
    assert [int(d) for d in inner.buffer.shape] == [2, 3] and inner.buffer.dtype == "int32"
    reads = block_access_regions(func.body.block.body.body.body.seq[0].body.body.block)[0]
    assert reads[1].buffer is alloc.buffer   # the declared buffer is the allocation itself
    text = round_trip(func).script()
    assert 'w_data = T.allocate_const([0.5, 1.0, 1.5, 2.0, 2.5, 3.0], "float32", (6,))' in text
    assert 'b_data = T.allocate_const([1, 2, 3, 4, 5, 6], "int32", (2, 3))' in text


@pytest.mark.parametrize("target", TARGETS)
def test_allocate_const_numerics(target):
    a = np.random.default_rng(2).random((4, 6), dtype="float32")
    _, c = run(_with_constants(True), target, a, np.zeros((4, 6), "float32"))
    np.testing.assert_allclose(c, _reference(a), rtol=1e-6)


def test_allocate_const_lowers_to_an_allocation_and_its_stores():
    lowered = lower_init_block.pass_func(_with_constants(False))
    alloc = lowered.body.block.body
    assert type(alloc) is S.Allocate
    first = alloc.body.seq[0]
    assert isinstance(first, S.BufferStore) and float(first.value.value) == 0.5


@pytest.mark.parametrize("reverse", [False, True])
def test_allocate_const_survives_compute_at(reverse):
    func = _with_constants(True)
    sch = tir.Schedule(func, debug_mask="all")
    if reverse:
        sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0])
    else:
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    assert isinstance(sch.mod["main"].body.block.body, S.AllocateConst)
    round_trip(sch.mod["main"])
    a = np.random.default_rng(3).random((4, 6), dtype="float32")
    for target in TARGETS:
        _, c = run(sch.mod["main"], target, a, np.zeros((4, 6), "float32"))
        np.testing.assert_allclose(c, _reference(a), rtol=1e-6)


def test_allocate_const_errors():
    with pytest.raises(ScriptError, match=r"3 value\(s\) for extents \(4,\)"):
        from_source('@T.prim_func\ndef f():\n    c = T.allocate_const([1.0, 2.0, 3.0], "float32", [4])\n'
                    '    T.evaluate(0)\n')
    with pytest.raises(ScriptError, match="must declare c's shape \\(4\\) and dtype float32: mlc_lab "
                                          "buffers do not alias"):
        from_source('@T.prim_func\ndef f():\n    c = T.allocate_const([1.0, 2.0, 3.0, 4.0], "float32", [4])\n'
                    '    d = T.Buffer([2, 2], "float32", data=c)\n    T.evaluate(0)\n')
    with pytest.raises(TypeError, match="T.decl_buffer without data= is not supported"):
        T.decl_buffer((4,), "float32")


# -- repeated block names -----------------------------------------------------------------------
# mm_relu with its second block named like the first
two_blocks_named_y = from_source(mm_relu.script().replace('T.block("C")', 'T.block("Y")'))


def test_repeated_block_names_parse_print_and_verify():
    assert tir.verify(two_blocks_named_y)
    assert round_trip(two_blocks_named_y).script().count('T.block("Y")') == 2


@pytest.mark.parametrize("target", TARGETS)
def test_repeated_block_names_numerics(target):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((128, 128), "float32"), rng.standard_normal((128, 128), "float32")
    *_, c = run(two_blocks_named_y, target, a, b, np.zeros((128, 128), "float32"))
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_a_schedule_refuses_repeated_block_names():
    with pytest.raises(tir.VerifyError, match="two blocks are named Y .*rename one of them"):
        tir.Schedule(two_blocks_named_y)


# -- storage scopes: "" and the tensor-core fragments ---------------------------------------------
def _mm_relu_with_scope(scope: str):
    """mm_relu with its intermediate Y in ``scope``."""
    text = mm_relu.script()
    assert "Y = T.alloc_buffer((128, 128))" in text
    return from_source(text.replace("Y = T.alloc_buffer((128, 128))",
                                    f'Y = T.alloc_buffer((128, 128), scope="{scope}")'))


@pytest.mark.parametrize("scope", ["", "wmma.accumulator"])
def test_empty_scope_is_global_and_fragment_scopes_are_kept(scope):
    func = _mm_relu_with_scope(scope)
    (Y,) = func.body.block.alloc_buffers
    assert Y.scope == (scope or "global")
    for fragment in ("wmma.matrix_a", "wmma.matrix_b"):
        assert tir.decl_buffer((4,), scope=fragment).scope == fragment
    text = round_trip(func).script()
    assert ('scope="wmma.accumulator"' in text) == bool(scope) and 'scope=""' not in text


@pytest.mark.parametrize("target", TARGETS)
def test_fragment_scope_numerics_on_the_cpu(target):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((128, 128), "float32"), rng.standard_normal((128, 128), "float32")
    *_, c = run(_mm_relu_with_scope("wmma.accumulator"), target, a, b, np.zeros((128, 128), "float32"))
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


# -- buffer.data ----------------------------------------------------------------------------------
@T.prim_func
def external_call(data_io: T.Buffer((64,), "int32")):
    for i0 in range(1):
        with T.block("ext_call"):
            T.evaluate(T.call_extern("call_impl", data_io.data, dtype=""))


def test_buffer_data_hands_the_whole_buffer_to_the_call():
    call = external_call.body.block.body.body.block.body.value
    assert call.dtype == "handle"            # TVMScript's dtype="" (void)
    data = call.args[1]
    assert data.op == "buffer_data" and data.args[0].buffer is external_call.params[0]
    block = external_call.body.block.body.body.block
    assert [str(r) for r in block.reads] == ["data_io[0:64]"] == [str(r) for r in block.writes]
    text = round_trip(external_call).script()
    assert 'T.call_extern("call_impl", data_io.data, dtype="handle")' in text


@pytest.mark.parametrize("target", TARGETS)
def test_an_external_kernel_is_refused_not_skipped(target):
    with pytest.raises(NotImplementedError, match=r"T.call_extern\('call_impl'\): the (interpreter|llvm "
                                                  r"backend) runs only C math library functions"):
        run(external_call, target, np.zeros(64, "int32"))


def test_a_buffer_over_buffer_data_is_that_buffer():
    A = tir.decl_buffer((4,), name="A")
    assert T.Buffer((4,), "float32", data=A.data) is A


# -- n, m = T.int64(), T.int64() -------------------------------------------------------------------
def test_symbolic_variables_declared_together():
    @T.prim_func
    def outer(a: T.handle, b: T.handle, c: T.handle):
        n, m = T.int64(), T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (m,))
        C = T.match_buffer(c, (n, m))
        for i, j in T.grid(n, m):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi] * B[vj]
    (n,), (m,) = outer.params[0].shape, outer.params[1].shape
    assert n.dtype == m.dtype == "int64" and outer.params[2].shape == (n, m)
    round_trip(outer)
    rng = np.random.default_rng(4)
    a, b = rng.random(3, dtype="float32"), rng.random(5, dtype="float32")
    for target in TARGETS:
        _, _, c = run(outer, target, a, b, np.zeros((3, 5), "float32"))
        np.testing.assert_allclose(c, np.outer(a, b), rtol=1e-6)


# -- T.axis.scan ----------------------------------------------------------------------------------
@T.prim_func
def prefix_sum(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.scan(8, k)
            T.reads(A[vi, vk], B[vi, vk - 1])
            T.writes(B[vi, vk])
            B[vi, vk] = A[vi, vk] + T.if_then_else(vk > 0, B[vi, T.max(vk - 1, 0)], T.float32(0))


def test_scan_iterator_parses_prints_and_keeps_its_order():
    block = prefix_sum.body.block.body.body.body.block
    assert [iv.iter_type for iv in block.iter_vars] == ["spatial", "scan"]
    assert "vk = T.axis.scan(8, k)" in round_trip(prefix_sum).script()
    sch = tir.Schedule(prefix_sum)
    i, k = sch.get_loops(sch.get_block("B"))
    with pytest.raises(tir.ScheduleError, match="feeds the scan iterator vk"):
        sch.reorder(k, i)


@pytest.mark.parametrize("target", TARGETS)
def test_scan_numerics(target):
    a = np.random.default_rng(5).random((4, 8), dtype="float32")
    _, b = run(prefix_sum, target, a, np.zeros_like(a))
    np.testing.assert_allclose(b, np.cumsum(a, axis=1), rtol=1e-5)


@T.prim_func
def fragments(A: T.Buffer((32, 32), "float16"), B: T.Buffer((32, 32), "float16")):
    for i, j in T.grid(2, 2):
        with T.block("load"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            T.writes(B[vi * 16:vi * 16 + 16, vj * 16:vj * 16 + 16])
            T.evaluate(T.tvm_load_matrix_sync(
                B.data, 16, 16, 16, vi * 2 + vj,
                T.tvm_access_ptr(T.type_annotation(dtype="float16"), A.data, vi * 512 + vj * 16, 256, 1,
                                 dtype="handle"),
                32, "row_major", dtype="handle"))


def test_tensor_core_builtins_parse_print_and_schedule_but_do_not_build():
    """The reference compiler's fragment and pointer builtins are opaque calls here: a program
    using them round-trips and takes schedule steps; building it names the builtin."""
    text = fragments.script()
    assert "T.tvm_load_matrix_sync(B.data, 16, 16, 16, vi * 2 + vj, T.tvm_access_ptr(" in text
    assert 'T.type_annotation("float16"), A.data, vi * 512 + vj * 16, 256, 1), 32, "row_major")' in text
    assert_structural_equal(fragments, from_source(text))
    sch = tir.Schedule(fragments)
    i, j = sch.get_loops(sch.get_block("load"))
    sch.reorder(j, i)
    with pytest.raises(NotImplementedError, match="tvm_load_matrix_sync"):
        mlc_lab.build(fragments, target="llvm")


def test_a_buffer_starts_at_the_first_element_of_its_storage():
    """``A.elem_offset`` stays ``A.elem_offset`` in the IR (so that it follows A when a view takes
    its place) and is 0 for a parameter on every target."""
    assert str(fragments.params[0].elem_offset) == f"{fragments.params[0].name}.elem_offset"

    @T.prim_func
    def offsets(A: T.Buffer((4, 8), "int32")):
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = A.elem_offset + vi

    assert "A[vi, vj] = A.elem_offset + vi" in offsets.script()
    for target in ("llvm", "python"):
        out = mlc_lab.nd.array(np.zeros((4, 8), "int32"))
        mlc_lab.build(offsets, target=target)(out)
        assert out.numpy()[:, 3].tolist() == [0, 1, 2, 3]
