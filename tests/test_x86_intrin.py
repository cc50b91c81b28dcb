"""The x86 int8 dot product (mlc_lab.tir.tensor_intrin.x86): VNNI detection, the choice between
the ``vpdpbusd`` implementation and the portable one, an int8 matmul tensorized with either
computing exactly what numpy computes, the LLVM-intrinsic script forms (``T.call_llvm_pure_intrin``,
``T.reinterpret``) and the refusals (an unpacked B tile, a CPU without the instruction, a
backend that cannot call LLVM intrinsics)."""
import os

import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule.testing import verify_trace_roundtrip
from mlc_lab.tir.tensor_intrin import x86
from mlc_lab.testing import matmul_schedules as mm

needs_vnni = pytest.mark.skipif(not x86.host_has_vnni(), reason="this CPU has no AVX-512 VNNI")
KINDS = [pytest.param("vnni", marks=needs_vnni), "portable"]


@pytest.fixture(autouse=True)
def restore_selection():
    before = x86.dot_16x4_implementation()
    yield
    x86.select_dot_16x4(before)


def packed_int8_matmul(m, n, k):
    return mm.int8_matmul(m, n, k)


@T.prim_func
def unpacked_int8_matmul(A: T.Buffer((32, 32), "uint8"), B: T.Buffer((32, 32), "int8"),
                         C: T.Buffer((32, 32), "int32")):
    for i, j, r in T.grid(32, 32, 32):
        with T.block("matmul"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] = C[vi, vj] + T.Cast("int32", A[vi, vr]) * T.Cast("int32", B[vj, vr])


def tensorized(func):
    return mm.dot_16x4_schedule(func)


def operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)        # the full ranges: no saturation
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    packed = np.ascontiguousarray(b.reshape(n // 16, 16, k // 4, 4).transpose(0, 2, 1, 3))
    return a, b, packed


def test_vnni_detection_agrees_with_the_kernel():
    if not os.path.exists("/proc/cpuinfo"):
        pytest.skip("no /proc/cpuinfo to compare with")
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    assert x86.host_has_vnni() == ("avx512_vnni" in flags.split())


def test_the_best_implementation_is_selected_and_can_be_forced():
    assert x86.select_dot_16x4() == ("vnni" if x86.host_has_vnni() else "portable")
    assert x86.select_dot_16x4("portable") == "portable" == x86.dot_16x4_implementation()
    assert tir.TensorIntrin.get(x86.VNNI_DOT_16x4_INTRIN).impl is x86.dot_product_16x4_u8i8i32_portable
    with pytest.raises(ValueError, match="implementations are"):
        x86.select_dot_16x4("amx")


def test_vnni_is_refused_where_the_cpu_lacks_it(monkeypatch):
    monkeypatch.setattr(x86, "host_has_vnni", lambda: False)
    with pytest.raises(RuntimeError, match="no AVX-512 VNNI"):
        x86.select_dot_16x4("vnni")
    assert x86.select_dot_16x4() == "portable"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", [(16, 32, 16), (48, 64, 128)])
def test_a_tensorized_int8_matmul_matches_numpy_exactly(kind, shape):
    x86.select_dot_16x4(kind)
    m, n, k = shape
    func = packed_int8_matmul(m, n, k)
    sch = tensorized(func)
    lib = mlc_lab.build(sch.mod, target="llvm")
    a, b, packed = operands(m, n, k)
    c = mlc_lab.nd.empty((m, n), "int32")
    lib["main"](mlc_lab.nd.array(a), mlc_lab.nd.array(packed), c)
    np.testing.assert_array_equal(c.numpy(), a.astype(np.int32) @ b.astype(np.int32).T)
    assembly = lib["main"].get_source("asm")
    assert ("vpdpbusd" in assembly) == (kind == "vnni")


@pytest.mark.parametrize("kind", KINDS)
def test_the_tensorized_program_prints_parses_and_replays(kind):
    x86.select_dot_16x4(kind)
    func = packed_int8_matmul(16, 32, 16)
    sch = tensorized(func)
    text = sch.mod.script()
    if kind == "vnni":
        assert 'T.call_extern("llvm.x86.avx512.vpdpbusd.512"' in text
        assert 'T.reinterpret(B_1[0, T.Ramp(0, 1, 64)], dtype="int32x16")' in text
    assert_structural_equal(from_source(text), sch.mod)
    verify_trace_roundtrip(sch, func)


def test_an_unpacked_b_tile_is_refused_at_build():
    sch = tensorized(unpacked_int8_matmul)   # the 16x4 tiles of B lie 32 apart, not 4
    with pytest.raises(NotImplementedError, match="declares the strides"):
        mlc_lab.build(sch.mod, target="llvm")


@needs_vnni
def test_vnni_is_refused_for_another_cpu_and_by_the_interpreter():
    x86.select_dot_16x4("vnni")
    sch = tensorized(packed_int8_matmul(16, 16, 16))
    with pytest.raises(NotImplementedError, match="only for the host CPU"):
        mlc_lab.build(sch.mod, target="llvm -mcpu=x86-64")
    a, _, packed = operands(16, 16, 16)
    with pytest.raises(NotImplementedError, match="vpdpbusd"):
        mlc_lab.build(sch.mod, target="python")(mlc_lab.nd.array(a), mlc_lab.nd.array(packed),
                                                mlc_lab.nd.empty((16, 16), "int32"))


def test_the_portable_implementation_runs_in_the_interpreter():
    x86.select_dot_16x4("portable")
    sch = tensorized(packed_int8_matmul(16, 16, 16))
    a, b, packed = operands(16, 16, 16)
    c = mlc_lab.nd.empty((16, 16), "int32")
    mlc_lab.build(sch.mod, target="python")(mlc_lab.nd.array(a), mlc_lab.nd.array(packed), c)
    np.testing.assert_array_equal(c.numpy(), a.astype(np.int32) @ b.astype(np.int32).T)


def test_llvm_intrinsic_script_forms():
    x = T.int32x16(1) if hasattr(T, "int32x16") else mlc_lab.tir.expr.Broadcast(T.int32(1), 16)
    call = T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.x86.avx512.vpdpbusd.512"),
                                   T.uint32(3), x, x, x, dtype="int32x16")
    assert call.op == "call_extern" and call.args[0].value == "llvm.x86.avx512.vpdpbusd.512"
    assert len(call.args) == 4 and call.dtype == "int32x16"   # the count is dropped
    same = T.call_llvm_pure_intrin("int32x16", "llvm.x86.avx512.vpdpbusd.512", x, x, x)
    assert_structural_equal(same, call)
    with pytest.raises(ValueError, match="starts with 'llvm.'"):
        T.llvm_lookup_intrinsic_id("vpdpbusd")
    with pytest.raises(TypeError, match="differ in size"):
        T.reinterpret(T.int32(0), dtype="int8x8")
    assert T.reinterpret(T.int32(0), dtype="float32").dtype == "float32"
