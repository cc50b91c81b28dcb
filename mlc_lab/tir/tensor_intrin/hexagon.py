"""Hexagon HVX: 32 int32 lanes accumulating dot products of 4 bytes (``vrmpy``) or of 2 int16
(``vdmpy``), with the operands in ordinary memory or in the vector memory ``global.vtcm``; and a
DMA copy of 128 bytes into ``global.vtcm``.

>>> from mlc_lab.tir import TensorIntrin
>>> TensorIntrin.get(VRMPY_u8u8i32_VTCM_INTRIN).desc.buffer_params[0].scope
'global.vtcm'
"""
from mlc_lab.script import tir as T

from ..schedule.tensor_intrin import TensorIntrin
from .dot_product_common import make_dot_product


def generate_dma_load_intrin(size: int, dtype: str):
    """(desc, impl): copy ``size`` elements of ``dtype`` from global memory into VTCM."""

    @T.prim_func
    def dma_load_desc(A: T.Buffer((size,), dtype), C: T.Buffer((size,), dtype, scope="global.vtcm")):
        for i in T.serial(size):
            with T.block("load"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi]

    @T.prim_func
    def dma_load_impl(A: T.Buffer((size,), dtype), C: T.Buffer((size,), dtype, scope="global.vtcm")):
        T.evaluate(T.call_extern("device_api.hexagon.dma_copy_dltensor", C.data, A.data, size,
                                 dtype="int32"))

    return dma_load_desc, dma_load_impl


def generate_dot_product_32x4_u8u8i32(mem_scope: str = "global"):
    return make_dot_product(32, 4, "uint8", "uint8", "int32", "llvm.hexagon.V6.vrmpyub.acc.128B",
                            mem_scope)


def generate_dot_product_32x4_u8i8i32(mem_scope: str = "global"):
    return make_dot_product(32, 4, "uint8", "int8", "int32", "llvm.hexagon.V6.vrmpybusv.acc.128B",
                            mem_scope)


def generate_dot_product_32x2_i16i16i32(mem_scope: str = "global"):
    return make_dot_product(32, 2, "int16", "int16", "int32", "llvm.hexagon.V6.vdmpyhvsat.acc.128B",
                            mem_scope)


VRMPY_u8u8i32_INTRIN = "dot_32x4_u8u8i32_vrmpy"
VRMPY_u8i8i32_INTRIN = "dot_32x4_u8i8i32_vrmpy"
VDMPY_i16i16i32_INTRIN = "dot_product_32x2_i16i16i32_vdmpy"
VRMPY_u8u8i32_VTCM_INTRIN = "dot_32x4_u8u8i32_vtcm_vrmpy"
VRMPY_u8i8i32_VTCM_INTRIN = "dot_32x4_u8i8i32_vtcm_vrmpy"
DMA_READ_128_u8 = "dma_read_128_u8"
DMA_READ_128_i8 = "dma_read_128_i8"

for _name, _pair in (
        (VRMPY_u8u8i32_INTRIN, generate_dot_product_32x4_u8u8i32()),
        (VRMPY_u8i8i32_INTRIN, generate_dot_product_32x4_u8i8i32()),
        (VDMPY_i16i16i32_INTRIN, generate_dot_product_32x2_i16i16i32()),
        (VRMPY_u8u8i32_VTCM_INTRIN, generate_dot_product_32x4_u8u8i32("global.vtcm")),
        (VRMPY_u8i8i32_VTCM_INTRIN, generate_dot_product_32x4_u8i8i32("global.vtcm")),
        (DMA_READ_128_u8, generate_dma_load_intrin(128, "uint8")),
        (DMA_READ_128_i8, generate_dma_load_intrin(128, "int8"))):
    TensorIntrin.register(_name, *_pair, override=True)

__all__ = ["DMA_READ_128_i8", "DMA_READ_128_u8", "VDMPY_i16i16i32_INTRIN", "VRMPY_u8i8i32_INTRIN",
           "VRMPY_u8i8i32_VTCM_INTRIN", "VRMPY_u8u8i32_INTRIN", "VRMPY_u8u8i32_VTCM_INTRIN",
           "generate_dma_load_intrin", "generate_dot_product_32x2_i16i16i32",
           "generate_dot_product_32x4_u8i8i32", "generate_dot_product_32x4_u8u8i32"]
