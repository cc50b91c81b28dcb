"""Arm dot products: 4 int32 (or uint32) lanes, each accumulating the dot product of the same 4
8-bit values with its own 4 (a 4x4 block of the right-hand matrix). The ``sdot``/``udot``
instructions of Armv8.2 do it in one step; plain NEON needs widening multiplies and pairwise adds
(``smull``, ``saddlp``, ``addp``), which its opaque call names together.

>>> from mlc_lab.tir import TensorIntrin
>>> [TensorIntrin.get(n).desc.buffer_params[2].dtype for n in
...  (ARM_DOT_4x4_i8_SDOT_INTRIN, ARM_DOT_4x4_u8_UDOT_INTRIN, ARM_DOT_4x4_u8_HDOT_INTRIN)]
['int32', 'uint32', 'int32']
"""
from ..schedule.tensor_intrin import TensorIntrin
from .dot_product_common import DP4A_INTRIN, make_dot_product


def get_dotprod_intrin(in_dtype: str, out_dtype: str):
    """(desc, impl) of the 4x4 dot product of ``in_dtype`` values (int8 or uint8) into
    ``out_dtype`` lanes, by ``sdot`` (int8) or ``udot`` (uint8)."""
    instruction = "udot.v4u32.v16u8" if in_dtype == "uint8" else "sdot.v4i32.v16i8"
    return make_dot_product(4, 4, in_dtype, in_dtype, out_dtype, f"llvm.aarch64.neon.{instruction}")


neon_4x4_i8i8i32_desc, neon_4x4_i8i8i32_impl = make_dot_product(
    4, 4, "int8", "int8", "int32", "llvm.aarch64.neon.smull+saddlp+addp")

ARM_DOT_4x4_i8_NEON_INTRIN = "dot_4x4_i8i8s32_neon"
ARM_DOT_4x4_i8_SDOT_INTRIN = "dot_4x4_i8i8s32_sdot"
ARM_DOT_4x4_u8_UDOT_INTRIN = "dot_4x4_u8u8u32_udot"
ARM_DOT_4x4_u8_HDOT_INTRIN = "dot_4x4_u8u8i32_hdot"

TensorIntrin.register(ARM_DOT_4x4_i8_NEON_INTRIN, neon_4x4_i8i8i32_desc, neon_4x4_i8i8i32_impl,
                      override=True)
for _name, _dtypes in ((ARM_DOT_4x4_i8_SDOT_INTRIN, ("int8", "int32")),
                       (ARM_DOT_4x4_u8_UDOT_INTRIN, ("uint8", "uint32")),
                       (ARM_DOT_4x4_u8_HDOT_INTRIN, ("uint8", "int32"))):
    TensorIntrin.register(_name, *get_dotprod_intrin(*_dtypes), override=True)

__all__ = ["ARM_DOT_4x4_i8_NEON_INTRIN", "ARM_DOT_4x4_i8_SDOT_INTRIN", "ARM_DOT_4x4_u8_HDOT_INTRIN",
           "ARM_DOT_4x4_u8_UDOT_INTRIN", "DP4A_INTRIN", "get_dotprod_intrin", "neon_4x4_i8i8i32_desc",
           "neon_4x4_i8i8i32_impl"]
