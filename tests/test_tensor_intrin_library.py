"""The library of hardware tensor intrinsics (mlc_lab.tir.tensor_intrin): every name is
registered, every description is a well-formed program that computes what its name says (dot
products against numpy; tile loads, fills, multiply-accumulates and stores chained through their
register layouts into a matrix product), and real schedules tensorize with them, or are refused
when the block has the wrong shape, dtype or memory scope."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import te, tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from mlc_lab.tir import TensorIntrin
from mlc_lab.tir import stmt as S
from mlc_lab.tir.schedule import TensorizeError
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip
from mlc_lab.tir.tensor_intrin import arm_cpu, cuda, dot_product_common, hexagon, rocm, wmma, x86
from schedule_checks import assert_same_numerics, unchanged_after

MODULES = [arm_cpu, cuda, dot_product_common, hexagon, rocm, x86]
CONSTANTS = sorted({(m.__name__.rsplit(".", 1)[1], n, getattr(m, n)) for m in MODULES for n in m.__all__
                    if n.endswith("_INTRIN") or n.startswith("DMA_READ_")})
REGISTERED = sorted({value for _, _, value in CONSTANTS} - set(wmma.UNREGISTERED))


def run(func, *arrays):
    """``func`` run by the interpreter on copies of ``arrays``; the arrays after the call."""
    nds = [mlc_lab.nd.array(np.array(a)) for a in arrays]
    mlc_lab.build(func, target="python")(*nds)
    return [nd.numpy() for nd in nds]


# -- names --------------------------------------------------------------------------------------
@pytest.mark.parametrize("module, constant, value", [
    ("x86", "VNNI_DOT_16x4_INTRIN", "dot_16x4_vnni"), ("x86", "AVX512_DOT_16x4_INTRIN", "dot_16x4_avx512"),
    ("arm_cpu", "ARM_DOT_4x4_i8_NEON_INTRIN", "dot_4x4_i8i8s32_neon"),
    ("arm_cpu", "ARM_DOT_4x4_i8_SDOT_INTRIN", "dot_4x4_i8i8s32_sdot"), ("arm_cpu", "DP4A_INTRIN", "dp4a"),
    ("rocm", "AMDGPU_SDOT4_INTRIN", "sdot4"), ("hexagon", "VRMPY_u8u8i32_INTRIN", "dot_32x4_u8u8i32_vrmpy"),
    ("hexagon", "VDMPY_i16i16i32_INTRIN", "dot_product_32x2_i16i16i32_vdmpy"),
    ("cuda", "WMMA_SYNC_16x16x16_f16f16f32_TRANS_INTRIN", "wmma_sync_16x16x16_f16f16f32_trans"),
    ("cuda", "WMMA_LOAD_16x16x16_S8_A_DYN_INTRIN", "wmma_load_16x16x16_s8_a_shared_dyn"),
    ("cuda", "WMMA_STORE_8x8x32_S32_GLOBAL_INTRIN", "wmma_store_8x8x32_s32_global"),
    ("cuda", "WMMA_FILL_16x16x16_F16_INTRIN", "wmma_fill_16x16x16_f16"),
    ("cuda", "LDMATRIX_16x32_B_TRANS_INTRIN", "mma.ldmatrix_16x32_b_trans"),
    ("cuda", "MMA_store_16x16_f16_global_INTRIN", "mma_store_16x16_f16_global_"),
    ("rocm", "ROCM_MFMA_LOAD_16x16_B_SHARED_s8_INTRIN", "rocm_mfma_load_b_16x16_shared_s8"),
])
def test_name_constants_hold_the_registered_names(module, constant, value):
    assert (module, constant, value) in CONSTANTS
    assert TensorIntrin.get(value) is not None


def test_every_constant_but_the_4_bit_ones_is_registered():
    assert len(CONSTANTS) >= 90
    for _, constant, value in CONSTANTS:
        if value in wmma.UNREGISTERED:
            assert "S4" in constant or "s4" in constant
            assert TensorIntrin.get(value, allow_missing=True) is None
        else:
            intrin = TensorIntrin.get(value)
            assert len(intrin.desc.buffer_params) == len(intrin.impl.buffer_params)


def test_a_missing_name_is_a_value_error_naming_the_library():
    assert TensorIntrin.get("no_such_intrinsic", allow_missing=True) is None
    with pytest.raises(ValueError, match="'no_such_intrinsic'.*import mlc_lab.tir.tensor_intrin"):
        TensorIntrin.get("no_such_intrinsic")


@pytest.mark.parametrize("load, store, src, dst, trans", [
    ("shared", "global", "float16", "float32", False), ("shared.dyn", "shared", "int8", "int32", True),
    ("shared", "shared.dyn", "float16", "float16", True)])
def test_wmma_groups_name_registered_intrinsics(load, store, src, dst, trans):
    group = cuda.get_wmma_intrin_group(load, store, src, dst, trans)
    assert sorted(group) == ["compute", "init", "load_a", "load_b", "store"]
    for name in group.values():
        assert TensorIntrin.get(name) is not None
    assert group["compute"].endswith("_trans") == trans
    with pytest.raises(ValueError, match="no wmma intrinsics for float32 -> float32"):
        cuda.get_wmma_intrin_group(load, store, "float32", "float32", trans)


# -- descriptions -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", REGISTERED)
def test_description_and_implementation_are_well_formed_and_print_back(name):
    intrin = TensorIntrin.get(name)
    for func in (intrin.desc, intrin.impl):
        assert tir.verify(func)
        assert_structural_equal(from_source(func.script()), func)
    assert "call_extern" in intrin.impl.script() or "tvm_" in intrin.impl.script()


DOT_PRODUCTS = [x86.VNNI_DOT_16x4_INTRIN, x86.AVX512_DOT_16x4_INTRIN, arm_cpu.ARM_DOT_4x4_i8_NEON_INTRIN,
                arm_cpu.ARM_DOT_4x4_i8_SDOT_INTRIN, arm_cpu.ARM_DOT_4x4_u8_UDOT_INTRIN,
                arm_cpu.ARM_DOT_4x4_u8_HDOT_INTRIN, hexagon.VRMPY_u8u8i32_INTRIN,
                hexagon.VRMPY_u8i8i32_INTRIN, hexagon.VDMPY_i16i16i32_INTRIN,
                hexagon.VRMPY_u8u8i32_VTCM_INTRIN, hexagon.VRMPY_u8i8i32_VTCM_INTRIN]


def random_of(dtype, shape, rng):
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("name", DOT_PRODUCTS)
def test_dot_product_descriptions_compute_a_row_by_vector_product(name):
    A, B, C = TensorIntrin.get(name).desc.buffer_params
    lanes, k = [int(s) for s in B.shape]
    rng = np.random.default_rng(lanes * k)
    a, b, c = random_of(A.dtype, (k,), rng), random_of(B.dtype, (lanes, k), rng), random_of(C.dtype, (lanes,), rng)
    got = run(TensorIntrin.get(name).desc, a, b, c)[2]
    want = c + b.astype(C.dtype) @ a.astype(C.dtype)   # as the instruction: products in the lane type
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", [dot_product_common.DP4A_INTRIN, rocm.AMDGPU_SDOT4_INTRIN])
def test_four_byte_dot_products_accumulate_into_one_int32(name):
    rng = np.random.default_rng(4)
    a, b = random_of("int8", (4,), rng), random_of("int8", (4,), rng)
    got = run(TensorIntrin.get(name).desc, a, b, np.array([7], "int32"))[2]
    assert got[0] == 7 + int(a.astype("int32") @ b.astype("int32"))


def test_dma_copy_description_copies_into_vtcm():
    src = np.arange(128, dtype="uint8")
    assert np.array_equal(run(TensorIntrin.get(hexagon.DMA_READ_128_u8).desc, src, np.zeros(128, "uint8"))[1], src)


def chain(load_a, load_b, fill, compute, store, a, b, out_dtype):
    """Run the descriptions of a tile pipeline one after the other on the interpreter: load
    both operands into their registers, zero the accumulator, multiply-accumulate, store."""
    desc = {k: TensorIntrin.get(n).desc for k, n in
            dict(load_a=load_a, load_b=load_b, fill=fill, compute=compute, store=store).items()}

    def empty(func, k):
        buf = func.buffer_params[k]
        return np.zeros([int(s) for s in buf.shape], buf.dtype)
    def load(func, tile):   # a register load takes (registers, memory), a fragment load the reverse
        regs_first = func.buffer_params[0].scope == "warp"
        regs = empty(func, 0 if regs_first else 1)
        return run(func, regs, tile)[0] if regs_first else run(func, tile, regs)[1]
    regs_a, regs_b = load(desc["load_a"], a), load(desc["load_b"], b)
    acc = run(desc["fill"], np.full([int(s) for s in desc["fill"].buffer_params[0].shape], 5, out_dtype))[0]
    acc = run(desc["compute"], regs_a, regs_b, acc)[2]
    return run(desc["store"], acc, empty(desc["store"], 1))[1]


@pytest.mark.parametrize("ld_b, mma, b_shape, transposed", [
    (cuda.LDMATRIX_16x16_B_INTRIN, cuda.MMA_f16f16f32_INTRIN, (16, 16), False),
    (cuda.LDMATRIX_16x16_B_TRANS_INTRIN, cuda.MMA_f16f16f32_TRANS_INTRIN, (16, 16), True)])
def test_ldmatrix_and_mma_layouts_compose_into_a_matrix_product(ld_b, mma, b_shape, transposed):
    # 16x16 operand -> (thread, register) of a warp -> mma -> back: the layouts must agree.
    rng = np.random.default_rng(1)
    a, b = rng.random((16, 16)).astype("float16"), rng.random(b_shape).astype("float16")
    # the loads wrote in the (thread, register) positions the mma reads; a wrong layout scrambles
    got = chain(cuda.LDMATRIX_16x16_A_INTRIN, ld_b, cuda.MMA_fill_16x16_f32_INTRIN, mma,
                cuda.MMA_store_16x16_f32_global_INTRIN, a, b, "float32")
    want = a.astype("float32") @ (b.T if transposed else b).astype("float32")
    np.testing.assert_allclose(got, want, rtol=1e-3)


@pytest.mark.parametrize("ld_b, mma, transposed", [
    (cuda.LDMATRIX_32x16_B_INTRIN, cuda.MMA_i8i8i32_INTRIN, False),
    (cuda.LDMATRIX_16x32_B_TRANS_INTRIN, cuda.MMA_i8i8i32_TRANS_INTRIN, True)])
def test_int8_mma_with_k_32_composes_into_a_matrix_product(ld_b, mma, transposed):
    rng = np.random.default_rng(2)
    a = random_of("int8", (16, 32), rng)
    b = random_of("int8", (16, 32) if transposed else (32, 16), rng)
    got = chain(cuda.LDMATRIX_16x32_A_INTRIN, ld_b, cuda.MMA_fill_16x16_i32_INTRIN, mma,
                cuda.MMA_store_16x16_i32_global_INTRIN, a, b, "int32")
    np.testing.assert_array_equal(got, a.astype("int32") @ (b.T if transposed else b).astype("int32"))


@pytest.mark.parametrize("k, dtype, out, names", [
    (4, "float32", "float32", ("16x4_A_SHARED_f32", "16x4_B_SHARED_f32", "fill_16x16_f32", "f32f32f32", "16x16_f32")),
    (16, "float16", "float32", ("16x16_A_SHARED_f16", "16x16_B_SHARED_f16", "fill_16x16_f32", "f16f16f32", "16x16_f32")),
    (16, "int8", "int32", ("16x16_A_SHARED_s8", "16x16_B_SHARED_s8", "fill_16x16_i32", "s8s8s32", "16x16_s32"))])
def test_mfma_layouts_compose_into_a_matrix_product(k, dtype, out, names):
    get = {n: getattr(rocm, n) for n in rocm.__all__}
    la, lb, fill, mma, store = (get[f"ROCM_MFMA_LOAD_{names[0]}_INTRIN"], get[f"ROCM_MFMA_LOAD_{names[1]}_INTRIN"],
                                get[f"ROCM_MFMA_{names[2]}_INTRIN"], get[f"ROCM_MFMA_{names[3]}_INTRIN"],
                                get[f"ROCM_MFMA_STORE_{names[4]}_INTRIN"])
    rng = np.random.default_rng(k)
    if dtype == "int8":
        a, b = random_of("int8", (16, k), rng), random_of("int8", (k, 16), rng)
    else:
        a, b = rng.random((16, k)).astype(dtype), rng.random((k, 16)).astype(dtype)
    got = chain(la, lb, fill, mma, store, a, b, out)
    np.testing.assert_allclose(got, a.astype(out) @ b.astype(out), rtol=1e-3)


@pytest.mark.parametrize("in_dtype, out_dtype, trans", [("float16", "float32", False), ("int8", "int32", True)])
def test_wmma_fragments_compose_into_a_matrix_product(in_dtype, out_dtype, trans):
    group = cuda.get_wmma_intrin_group("shared", "global", in_dtype, out_dtype, trans)
    rng = np.random.default_rng(3)
    a, b = rng.integers(-8, 8, (16, 16)).astype(in_dtype), rng.integers(-8, 8, (16, 16)).astype(in_dtype)
    got = chain(group["load_a"], group["load_b"], group["init"], group["compute"], group["store"], a, b, out_dtype)
    np.testing.assert_allclose(got, a.astype(out_dtype) @ (b.T if trans else b).astype(out_dtype))


# -- tensorize with the library -----------------------------------------------------------------
def packed_matmul(x_dtype, w_dtype, n=64):
    X = te.placeholder((n, n), name="X", dtype=x_dtype)
    W = te.placeholder((n, n), name="W", dtype=w_dtype)
    r = te.reduce_axis((0, n), name="r")
    out = te.compute((n, n), lambda i, j: te.sum(X[i, r].astype("int32") * W[j, r].astype("int32"), axis=r),
                     name="compute")
    return te.create_prim_func([X, W, out])


def dot_schedule(func, lanes, k, intrin, pack=True):
    """Pack W into lanes x k tiles, tile j by ``lanes`` and the reduction by ``k``, take the init
    out and tensorize the (lanes, k) tile."""
    sch = tir.Schedule(func, debug_mask="all")
    block = sch.get_block("compute")
    if pack:
        sch.transform_layout(block, "W", lambda i, j: [i // lanes, j // k, i % lanes, j % k])
    _, j, r = sch.get_loops(block)
    _, ji = sch.split(j, factors=[None, lanes])
    ro, ri = sch.split(r, factors=[None, k])
    sch.reorder(ro, ji, ri)
    sch.decompose_reduction(block, ro)
    sch.tensorize(ji, intrin)
    return sch


def tensorized_block(sch):
    """The BlockRealize whose body is a single evaluated call (the instruction)."""
    found = []

    def visit(node):
        if isinstance(node, S.BlockRealize) and isinstance(node.block.body, S.Evaluate):
            found.append(node)
    mlc_lab.tir.stmt_functor.post_order_visit(sch.mod["main"].body, visit)
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("intrin, instruction", [   # VNNI: tests/test_x86_intrin.py
    (x86.AVX512_DOT_16x4_INTRIN, "llvm.x86.avx512.pmaddubs.w.512+pmaddw.d.512")])
def test_x86_dot_product_tensorizes_a_packed_int8_matmul(intrin, instruction):
    func = packed_matmul("uint8", "int8")
    sch = dot_schedule(func, 16, 4, intrin)
    realize = tensorized_block(sch)
    call = realize.block.body.value
    assert call.op == "call_extern" and call.args[0].value == instruction
    assert [m.buffer.shape for m in realize.block.match_buffers] == [(4,), (16, 4), (16,)]
    assert [m.source.buffer.name for m in realize.block.match_buffers] == ["X", "W", "compute"]
    assert not any(isinstance(n, S.For) for n in _nodes(realize.block))   # the 16x4 loop nest is gone
    verify_trace_roundtrip(sch, func)
    with pytest.raises(NotImplementedError, match=instruction.replace("+", r"\+")):
        mlc_lab.build(sch.mod, target="llvm")


def _nodes(stmt):
    out = []
    mlc_lab.tir.stmt_functor.post_order_visit(stmt, out.append)
    return out


@pytest.mark.parametrize("intrin, dtype", [(arm_cpu.ARM_DOT_4x4_i8_SDOT_INTRIN, "int8"),
                                           (arm_cpu.ARM_DOT_4x4_i8_NEON_INTRIN, "int8"),
                                           (arm_cpu.ARM_DOT_4x4_u8_HDOT_INTRIN, "uint8")])
def test_arm_dot_products_tensorize_4x4_tiles(intrin, dtype):
    func = packed_matmul(dtype, dtype)
    sch = dot_schedule(func, 4, 4, intrin)
    call = tensorized_block(sch).block.body.value
    assert "aarch64" in call.args[0].value
    verify_trace_roundtrip(sch, func)


def test_a_tile_of_the_wrong_shape_or_dtype_is_refused():
    func = packed_matmul("uint8", "int8")
    sch = tir.Schedule(func)
    block = sch.get_block("compute")
    _, j, r = sch.get_loops(block)
    _, ji = sch.split(j, factors=[None, 8])
    ro, ri = sch.split(r, factors=[None, 4])
    sch.reorder(ro, ji, ri)
    sch.decompose_reduction(block, ro)
    unchanged_after(sch, lambda: sch.tensorize(ji, x86.VNNI_DOT_16x4_INTRIN), TensorizeError,
                    "sch.tensorize", "loop extents 8", "intrinsic's 16")
    signed = packed_matmul("int8", "int8")
    sch = tir.Schedule(signed)
    with pytest.raises(TensorizeError, match="buffer X has dtype int8 but the intrinsic's A has uint8"):
        dot_schedule(signed, 16, 4, x86.VNNI_DOT_16x4_INTRIN)


def test_the_library_descriptions_tensorize_without_changing_results():
    # An intrinsic with the library's description and a plain-loop implementation can run: the
    # tensorized program, with its regions bound as match_buffer views, computes the original.
    @T.prim_func
    def lanes_loop(A: T.Buffer((4,), "uint8"), B: T.Buffer((16, 4), "int8"), C: T.Buffer((16,), "int32")):
        for i in T.vectorized(16):
            for k in range(4):
                with T.block("lane"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    C[vi] = C[vi] + T.Cast("int32", A[vk]) * T.Cast("int32", B[vi, vk])
    TensorIntrin.register("test_library_vnni_as_loops", x86.dot_product_16x4_u8i8i32_desc, lanes_loop,
                          override=True)
    func = packed_matmul("uint8", "int8", n=32)
    sch = dot_schedule(func, 16, 4, "test_library_vnni_as_loops")
    assert_same_numerics(func, dot_schedule(func, 16, 4, "test_library_vnni_as_loops", pack=False).mod["main"])
    packed = tir.Schedule(func)
    packed.transform_layout(packed.get_block("compute"), "W", lambda i, j: [i // 16, j // 4, i % 16, j % 4])
    assert_same_numerics(packed.mod["main"], sch.mod["main"])


@T.prim_func
def fragment_matmul(A: T.Buffer((32, 32), "float16"), B: T.Buffer((32, 32), "float16"),
                    C: T.Buffer((32, 32), "float32")):
    A_s = T.alloc_buffer((32, 32), "float16", scope="shared")
    B_s = T.alloc_buffer((32, 32), "float16", scope="shared")
    A_f = T.alloc_buffer((32, 32), "float16", scope="wmma.matrix_a")
    B_f = T.alloc_buffer((32, 32), "float16", scope="wmma.matrix_b")
    C_f = T.alloc_buffer((32, 32), "float32", scope="wmma.accumulator")
    for i, j in T.grid(32, 32):
        with T.block("A_s"):
            vi, vj = T.axis.remap("SS", [i, j])
            A_s[vi, vj] = A[vi, vj]
    for i, j in T.grid(32, 32):
        with T.block("B_s"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_s[vi, vj] = B[vi, vj]
    for i, j in T.grid(32, 32):
        with T.block("A_f"):
            vi, vj = T.axis.remap("SS", [i, j])
            A_f[vi, vj] = A_s[vi, vj]
    for i, j in T.grid(32, 32):
        with T.block("B_f"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_f[vi, vj] = B_s[vi, vj]
    for i, j, k in T.grid(32, 32, 32):
        with T.block("C_f"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C_f[vi, vj] = T.float32(0)
            C_f[vi, vj] = C_f[vi, vj] + T.Cast("float32", A_f[vi, vk]) * T.Cast("float32", B_f[vk, vj])
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = C_f[vi, vj]


def tile_2d(sch, name):
    i, j = sch.get_loops(sch.get_block(name))[-2:]
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1)
    return i1


def test_a_fragment_pipeline_tensorizes_with_the_wmma_group():
    group = cuda.get_wmma_intrin_group("shared", "global", "float16", "float32", False)
    sch = tir.Schedule(fragment_matmul, debug_mask="all")
    sch.tensorize(tile_2d(sch, "A_f"), group["load_a"])
    sch.tensorize(tile_2d(sch, "B_f"), group["load_b"])
    sch.tensorize(tile_2d(sch, "C"), group["store"])
    block = sch.get_block("C_f")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 16])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    init = sch.decompose_reduction(block, k0)
    sch.tensorize(sch.get_loops(init)[-2], group["init"])
    sch.tensorize(i1, group["compute"])
    text = sch.mod.script()
    for builtin in ("tvm_load_matrix_sync", "tvm_fill_fragment", "tvm_mma_sync", "tvm_store_matrix_sync"):
        assert text.count(f"T.{builtin}(") == (2 if builtin == "tvm_load_matrix_sync" else 1)
    # what is left of the fragment code are the 2x2 (x2) loops over tiles: no element loops
    assert all(int(n.extent) == 2 for n in _nodes(sch.mod["main"].body)
               if isinstance(n, S.For) and any(b in n.loop_var.name for b in ("_0",)))
    assert tir.verify(sch.mod["main"])
    verify_trace_roundtrip(sch, fragment_matmul)


def test_a_block_in_the_wrong_memory_scope_is_refused():
    sch = tir.Schedule(fragment_matmul)
    # the block copies shared memory into a fragment: a store (fragment to global) has the same
    # shape and dtypes, but not the scopes
    loop = tile_2d(sch, "A_f")
    unchanged_after(sch, lambda: sch.tensorize(loop, cuda.WMMA_STORE_16x16x16_F16_GLOBAL_INTRIN),
                    TensorizeError, "sch.tensorize", 'buffer A_f is in scope "wmma.matrix_a"', '"global"')
    with pytest.raises(TensorizeError, match='buffer A_s is in scope "shared" but the intrinsic\'s S must be in "shared.dyn"'):
        sch.tensorize(loop, cuda.WMMA_LOAD_16x16x16_F16_A_DYN_INTRIN)


def test_annotations_of_the_implementation_join_the_block():
    desc = x86.dot_product_16x4_u8i8i32_desc

    @T.prim_func
    def marked(A: T.Buffer((4,), "uint8"), B: T.Buffer((16, 4), "int8"), C: T.Buffer((16,), "int32")):
        with T.block("root"):
            T.reads(C[0:16], A[0:4], B[0:16, 0:4])
            T.writes(C[0:16])
            T.block_attr({"pragma_instruction": "vnni"})
            T.evaluate(T.call_extern("vnni", C.data, A.data, B.data, dtype="handle"))
    TensorIntrin.register("test_library_marked_vnni", desc, marked, override=True)
    sch = dot_schedule(packed_matmul("uint8", "int8"), 16, 4, "test_library_marked_vnni")
    assert dict(tensorized_block(sch).block.annotations) == {"pragma_instruction": "vnni"}


@T.prim_func
def matmul_int64_indices(X: T.Buffer((T.int64(4), T.int64(8)), "uint8"),
                         W: T.Buffer((T.int64(32), T.int64(8)), "int8"),
                         Y: T.Buffer((T.int64(4), T.int64(32)), "int32")):
    for i, j, r in T.grid(T.int64(4), T.int64(32), T.int64(8)):
        with T.block("compute"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            with T.init():
                Y[vi, vj] = 0
            Y[vi, vj] = Y[vi, vj] + T.Cast("int32", X[vi, vr]) * T.Cast("int32", W[vj, vr])


def test_a_program_with_int64_indices_matches_the_int32_description():
    sch = tir.Schedule(matmul_int64_indices)
    block = sch.get_block("compute")
    _, j, r = sch.get_loops(block)
    _, ji = sch.split(j, factors=[None, 16])
    ro, ri = sch.split(r, factors=[None, 4])
    sch.reorder(ro, ji, ri)
    sch.decompose_reduction(block, ro)
    sch.tensorize(ji, x86.AVX512_DOT_16x4_INTRIN)
    assert tensorized_block(sch).block.body.value.args[0].value.startswith("llvm.x86.avx512.pmaddubs")
