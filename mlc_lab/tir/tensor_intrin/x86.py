"""x86 dot products: 16 int32 lanes, each accumulating the dot product of 4 uint8 values (the
same for all lanes) with its own 4 int8 values.

AVX-512 VNNI does it in one instruction, ``vpdpbusd``, which the implementation calls as the
LLVM intrinsic ``llvm.x86.avx512.vpdpbusd.512`` (the llvm target compiles it to that
instruction). Where the CPU lacks VNNI, ``VNNI_DOT_16x4_INTRIN`` is registered with a portable
implementation instead: the same sums as a 16-lane vector loop, which LLVM turns into the vector
instructions the CPU has. ``dot_16x4_implementation()`` says which one is registered;
``select_dot_16x4("portable")`` switches (e.g. to compare the two).

The implementations read the 16x4 tile of B as 64 consecutive bytes, so their B is declared
with strides (4, 1): tensorize refuses a B tile whose rows lie apart (pack B first, e.g. to
``(N // 16, K // 4, 16, 4)``).

``AVX512_DOT_16x4_INTRIN`` (``pmaddubsw`` then ``pmaddwd``, without VNNI) saturates its 16-bit
pair sums, so it equals the description only for small values; it stays an opaque call that
no backend runs.

>>> from mlc_lab.tir import TensorIntrin
>>> TensorIntrin.get(VNNI_DOT_16x4_INTRIN).desc is dot_product_16x4_u8i8i32_desc
True
>>> dot_16x4_implementation() in ("vnni", "portable")
True
"""
from __future__ import annotations

import functools

from mlc_lab.script import tir as T

from ..schedule.tensor_intrin import TensorIntrin
from .dot_product_common import make_dot_product

VNNI_INSTRUCTION = "llvm.x86.avx512.vpdpbusd.512"


dot_product_16x4_u8i8i32_desc, dot_product_16x4_u8i8i32_avx512 = make_dot_product(
    16, 4, "uint8", "int8", "int32", "llvm.x86.avx512.pmaddubs.w.512+pmaddw.d.512")


@T.prim_func
def dot_product_16x4_u8i8i32_vnni(A: T.Buffer((4,), "uint8"),
                                  B: T.Buffer((16, 4), "int8", strides=(4, 1)),
                                  C: T.Buffer((16,), "int32")):
    C[T.Ramp(0, 1, 16)] = T.call_llvm_pure_intrin(
        T.llvm_lookup_intrinsic_id(VNNI_INSTRUCTION), T.uint32(3),
        C[T.Ramp(0, 1, 16)],
        T.Broadcast(T.reinterpret(A[T.Ramp(0, 1, 4)], dtype="int32"), 16),
        T.reinterpret(B[0, T.Ramp(0, 1, 64)], dtype="int32x16"),
        dtype="int32x16")


@T.prim_func
def dot_product_16x4_u8i8i32_portable(A: T.Buffer((4,), "uint8"),
                                      B: T.Buffer((16, 4), "int8", strides=(4, 1)),
                                      C: T.Buffer((16,), "int32")):
    for i in T.vectorized(16):
        C[i] = (C[i] + T.Cast("int32", A[0]) * T.Cast("int32", B[i, 0])
                + T.Cast("int32", A[1]) * T.Cast("int32", B[i, 1])
                + T.Cast("int32", A[2]) * T.Cast("int32", B[i, 2])
                + T.Cast("int32", A[3]) * T.Cast("int32", B[i, 3]))


VNNI_DOT_16x4_INTRIN = "dot_16x4_vnni"
AVX512_DOT_16x4_INTRIN = "dot_16x4_avx512"

_IMPLEMENTATIONS = {"vnni": dot_product_16x4_u8i8i32_vnni,
                    "portable": dot_product_16x4_u8i8i32_portable}
_selected = {"kind": None}


@functools.lru_cache(maxsize=None)
def host_cpu_features() -> frozenset:
    """The features of this machine's CPU that LLVM knows and reports present ("avx512vnni",
    "avxvnni", "avx512bf16", ...); empty where LLVM cannot tell."""
    try:
        import llvmlite.binding as llvm
        return frozenset(name for name, on in llvm.get_host_cpu_features().items() if on)
    except (ImportError, RuntimeError):
        return frozenset()


def host_has_vnni() -> bool:
    """Whether this machine's CPU runs AVX-512 VNNI (``vpdpbusd`` on 512-bit vectors)."""
    return "avx512vnni" in host_cpu_features()


def select_dot_16x4(kind: str | None = None) -> str:
    """Register ``VNNI_DOT_16x4_INTRIN`` with the implementation ``kind``: "vnni" (the
    instruction; refused where the CPU lacks it), "portable" (vector code any CPU runs), or None
    for the best this CPU runs. Returns the kind registered. Programs tensorized before keep
    the implementation they were given."""
    if kind is None:
        kind = "vnni" if host_has_vnni() else "portable"
    if kind not in _IMPLEMENTATIONS:
        raise ValueError(f"select_dot_16x4: the implementations are {sorted(_IMPLEMENTATIONS)}, "
                         f"got {kind!r}")
    if kind == "vnni" and not host_has_vnni():
        raise RuntimeError("select_dot_16x4: this CPU has no AVX-512 VNNI; use 'portable'")
    TensorIntrin.register(VNNI_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc,
                          _IMPLEMENTATIONS[kind], override=True)
    _selected["kind"] = kind
    return kind


def dot_16x4_implementation() -> str:
    """Which implementation ``VNNI_DOT_16x4_INTRIN`` has now: "vnni" or "portable"."""
    return _selected["kind"]


select_dot_16x4()
TensorIntrin.register(AVX512_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc,
                      dot_product_16x4_u8i8i32_avx512, override=True)

__all__ = ["AVX512_DOT_16x4_INTRIN", "VNNI_DOT_16x4_INTRIN", "dot_16x4_implementation",
           "dot_product_16x4_u8i8i32_avx512", "dot_product_16x4_u8i8i32_desc",
           "dot_product_16x4_u8i8i32_portable", "dot_product_16x4_u8i8i32_vnni", "host_cpu_features",
           "host_has_vnni",
           "select_dot_16x4"]
