"""x86 dot products: 16 int32 lanes, each accumulating the dot product of 4 uint8 values (the
same for all lanes) with its own 4 int8 values. AVX-512 VNNI does it in one instruction
(``vpdpbusd``); plain AVX-512 in two (``pmaddubsw`` then ``pmaddwd`` against ones), which its
opaque call names together. mlc_lab's LLVM backend emits no target intrinsics, so a program
tensorized with these builds only after the call is replaced (it is refused by name).

>>> from mlc_lab.tir import TensorIntrin
>>> TensorIntrin.get(VNNI_DOT_16x4_INTRIN).desc is dot_product_16x4_u8i8i32_desc
True
"""

from ..schedule.tensor_intrin import TensorIntrin
from .dot_product_common import make_dot_product

dot_product_16x4_u8i8i32_desc, dot_product_16x4_u8i8i32_vnni = make_dot_product(
    16, 4, "uint8", "int8", "int32", "llvm.x86.avx512.vpdpbusd.512")
_, dot_product_16x4_u8i8i32_avx512 = make_dot_product(
    16, 4, "uint8", "int8", "int32", "llvm.x86.avx512.pmaddubs.w.512+pmaddw.d.512")

VNNI_DOT_16x4_INTRIN = "dot_16x4_vnni"
TensorIntrin.register(VNNI_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc,
                      dot_product_16x4_u8i8i32_vnni, override=True)

AVX512_DOT_16x4_INTRIN = "dot_16x4_avx512"
TensorIntrin.register(AVX512_DOT_16x4_INTRIN, dot_product_16x4_u8i8i32_desc,
                      dot_product_16x4_u8i8i32_avx512, override=True)

__all__ = ["AVX512_DOT_16x4_INTRIN", "VNNI_DOT_16x4_INTRIN", "dot_product_16x4_u8i8i32_avx512",
           "dot_product_16x4_u8i8i32_desc", "dot_product_16x4_u8i8i32_vnni"]
