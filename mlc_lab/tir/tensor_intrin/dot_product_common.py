"""Dot products shared by several targets: the general row-by-vector description the CPU
intrinsics use (``make_dot_product``), and the 4-element int8 dot product into one int32 of the
GPUs (``dp4a``, also the description of AMD's ``sdot4``).

Most implementations in this package stand for one hardware instruction as an opaque call
(``T.call_extern`` of the instruction's name, handed the tiles' storage as ``buffer.data``): the
schedule places it and the printer shows it, and building a program that still holds such a call
is refused with a message naming it. The x86 VNNI dot product (x86.py) is the exception: its
implementation calls the LLVM intrinsic on vector values, which the llvm target compiles.

>>> desc, impl = make_dot_product(4, 2, "int8", "int8", "int32", "my_dot")
>>> print(desc.body.block.body)
for i, j in T.grid(4, 2):
    with T.block("update"):
        vi, vk = T.axis.remap("SR", [i, j])
        T.reads(C[vi], A[vk], B[vi, vk])
        T.writes(C[vi])
        C[vi] = C[vi] + T.Cast("int32", A[vk]) * T.Cast("int32", B[vi, vk])
>>> print(impl.body)
T.call_extern("my_dot", C.data, A.data, B.data, dtype="handle")
"""

from mlc_lab.script import tir as T

from ..schedule.tensor_intrin import TensorIntrin


def make_dot_product(m: int, k: int, a_dtype: str, b_dtype: str, c_dtype: str, instruction: str,
                     scope: str = "global"):
    """(desc, impl) of ``C[i] += A[j] * B[i, j]`` for ``i < m``, ``j < k``, the products taken in
    ``c_dtype``: one vector ``A`` of ``k`` elements against ``m`` rows of ``B``, accumulated into
    ``m`` lanes of ``C`` (all in memory of ``scope``); the impl calls ``instruction``."""

    @T.prim_func
    def dot_product_desc(A: T.Buffer((k,), a_dtype, scope=scope), B: T.Buffer((m, k), b_dtype, scope=scope),
                         C: T.Buffer((m,), c_dtype, scope=scope)):
        for i, j in T.grid(m, k):
            with T.block("update"):
                vi, vk = T.axis.remap("SR", [i, j])
                C[vi] = C[vi] + T.Cast(c_dtype, A[vk]) * T.Cast(c_dtype, B[vi, vk])

    @T.prim_func
    def dot_product_impl(A: T.Buffer((k,), a_dtype, scope=scope), B: T.Buffer((m, k), b_dtype, scope=scope),
                         C: T.Buffer((m,), c_dtype, scope=scope)):
        T.evaluate(T.call_extern(instruction, C.data, A.data, B.data, dtype="handle"))

    return dot_product_desc, dot_product_impl


@T.prim_func
def dp4a_desc(A: T.Buffer((4,), "int8", scope="shared"), B: T.Buffer((4,), "int8", scope="shared"),
              C: T.Buffer((1,), "int32", scope="local")):
    """One int32 accumulator plus the dot product of two 4-element int8 vectors in shared
    memory (the accumulator in a thread's registers)."""
    for i in range(4):
        with T.block("update"):
            vi = T.axis.remap("R", [i])
            C[0] = C[0] + T.Cast("int32", A[vi]) * T.Cast("int32", B[vi])


def packed_dot4(instruction: str):
    """An impl for ``dp4a_desc``: ``C[0] += instruction(A, B, 0)``, the instruction reading each
    4-element vector as one 32-bit word."""

    @T.prim_func
    def dot4_impl(A: T.Buffer((4,), "int8", scope="shared"), B: T.Buffer((4,), "int8", scope="shared"),
                  C: T.Buffer((1,), "int32", scope="local")):
        C[0] = C[0] + T.call_extern(instruction, A.data, B.data, T.int32(0), dtype="int32")

    return dot4_impl


DP4A_INTRIN = "dp4a"
TensorIntrin.register(DP4A_INTRIN, dp4a_desc, packed_dot4("__dp4a"), override=True)

__all__ = ["DP4A_INTRIN", "dp4a_desc", "make_dot_product", "packed_dot4"]
