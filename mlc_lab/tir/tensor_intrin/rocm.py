"""AMD GPUs: the int8 dot product ``sdot4`` (described as ``dp4a``), and the MFMA matrix cores of
a 64-thread wavefront: load a 16 x k operand tile into the wavefront's registers, zero an
accumulator, multiply-accumulate 16 x 16 x k, store the accumulator (k = 4 for float32, 16 for
float16 and int8). The layouts below say which (thread, register) holds element (i, j).

>>> shared_16x16_to_local_64x4_layout_C(5, 3)
(19, 1)
>>> from mlc_lab.tir import TensorIntrin
>>> TensorIntrin.get(ROCM_MFMA_f16f16f32_INTRIN).desc.buffer_params[0].shape
(64, 4)
"""
from ..expr import const
from ..schedule.tensor_intrin import TensorIntrin
from .dot_product_common import dp4a_desc, packed_dot4
from .tile_intrin import copy_intrin, extern, fill_intrin, identity, mma_intrin, swapped

WARP_SIZE = 64
M_DIM = N_DIM = 16


def shared_16x4_to_local_64x1_layout_A(i, j):
    return j * 16 + i, const(0)


def shared_4x16_to_local_64x1_layout_B(i, j):
    return i * 16 + j, const(0)


def shared_16x16_to_local_64x4_layout_A(i, j):
    return i + 16 * (j // 4), j % 4


def shared_16x16_to_local_64x4_layout_B(i, j):
    return j + (i // 4) * 16, i % 4


def shared_16x16_to_local_64x4_layout_C(i, j):
    return j + (i // 4) * 16, i % 4


def get_mma_fill_intrin(dtype, local_size):
    """Zero a 16x16 accumulator held as (64 threads, ``local_size`` registers)."""
    dtype = "int32" if dtype == "int" else dtype
    return fill_intrin(M_DIM, N_DIM, dtype, ((WARP_SIZE, local_size), "warp", shared_16x16_to_local_64x4_layout_C),
                       extern("rocm_mfma_fill", local_size))


def get_mfma_load_intrin(k_dim=4, dtype="float32", scope="shared", is_b=False, transposed=False):
    """Load the A operand (16 x ``k_dim``) or B operand (``k_dim`` x 16, or 16 x ``k_dim``
    when ``transposed``) from memory of ``scope`` into the wavefront's registers."""
    if k_dim not in (4, 16):
        raise ValueError(f"get_mfma_load_intrin: k_dim must be 4 or 16, got {k_dim}")
    a_layout = shared_16x4_to_local_64x1_layout_A if k_dim == 4 else shared_16x16_to_local_64x4_layout_A
    b_layout = shared_4x16_to_local_64x1_layout_B if k_dim == 4 else shared_16x16_to_local_64x4_layout_B
    layout = a_layout if (not is_b or transposed) else b_layout
    rows, cols = (k_dim, N_DIM) if is_b and not transposed else (M_DIM, k_dim)
    local = M_DIM * k_dim // WARP_SIZE
    return copy_intrin(rows, cols, dtype, ((rows, cols), scope, identity), ((WARP_SIZE, local), "warp", layout),
                       extern("rocm_mfma_load"), dst_first=True)


def get_mfma_intrin(k_dim, in_dtype="float32", out_dtype="float32", b_transposed=False):
    """16 x 16 x ``k_dim`` multiply-accumulate of register-held operands, by the
    ``llvm.amdgcn.mfma`` instruction of those dtypes."""
    if k_dim not in (4, 16):
        raise ValueError(f"get_mfma_intrin: k_dim must be 4 or 16, got {k_dim}")
    a_layout = shared_16x4_to_local_64x1_layout_A if k_dim == 4 else shared_16x16_to_local_64x4_layout_A
    b_layout = shared_4x16_to_local_64x1_layout_B if k_dim == 4 else shared_16x16_to_local_64x4_layout_B
    abbrev = {"float16": "f16", "float32": "f32", "int8": "i8", "int32": "i32"}
    name = f"llvm.amdgcn.mfma.{abbrev[out_dtype]}.{M_DIM}x{N_DIM}x{k_dim}{abbrev[in_dtype]}"
    local = M_DIM * k_dim // WARP_SIZE
    operand = ((WARP_SIZE, local), "warp")
    return mma_intrin(M_DIM, N_DIM, k_dim, in_dtype, out_dtype, operand + (a_layout,),
                      operand + (swapped(b_layout) if b_transposed else b_layout,),
                      ((WARP_SIZE, M_DIM * N_DIM // WARP_SIZE), "warp", shared_16x16_to_local_64x4_layout_C),
                      extern(name))


def get_mfma_store_intrin(local_size=4, dtype="float32", scope="global"):
    """Store a register-held 16x16 accumulator to memory of ``scope``."""
    return copy_intrin(M_DIM, N_DIM, dtype,
                       ((WARP_SIZE, local_size), "warp", shared_16x16_to_local_64x4_layout_C),
                       ((M_DIM, N_DIM), scope, identity), extern("rocm_mfma_store"))


AMDGPU_SDOT4_INTRIN = "sdot4"
ROCM_MFMA_fill_16x16_f32_INTRIN = "ROCM_mfma_fill_16x16_f32"
ROCM_MFMA_fill_16x16_i32_INTRIN = "ROCM_mfma_fill_16x16_i32"
ROCM_MFMA_LOAD_16x16_A_SHARED_s8_INTRIN = "rocm_mfma_load_16x16_a_shared_s8"
ROCM_MFMA_LOAD_16x16_B_SHARED_s8_INTRIN = "rocm_mfma_load_b_16x16_shared_s8"
ROCM_MFMA_LOAD_16x16_A_SHARED_f16_INTRIN = "rocm_mfma_load_16x16_a_shared_f16"
ROCM_MFMA_LOAD_16x16_B_SHARED_f16_INTRIN = "rocm_mfma_load_b_16x16_shared_f16"
ROCM_MFMA_LOAD_16x4_A_SHARED_f32_INTRIN = "rocm_mfma_load_16x4_a_shared_f32"
ROCM_MFMA_LOAD_16x4_B_SHARED_f32_INTRIN = "rocm_mfma_load_b_16x4_shared_f32"
ROCM_MFMA_f32f32f32_INTRIN = "rocm_mfma_f32f32f32"
ROCM_MFMA_f16f16f32_INTRIN = "rocm_mfma_f16f16f32"
ROCM_MFMA_s8s8s32_INTRIN = "rocm_mfma_s8s8s32"
ROCM_MFMA_STORE_16x16_s32_INTRIN = "rocm_mfma_store_16x16_s32"
ROCM_MFMA_STORE_16x16_f32_INTRIN = "rocm_mfma_store_16x16_f32"

_TABLE = [
    (AMDGPU_SDOT4_INTRIN, lambda: (dp4a_desc, packed_dot4("llvm.amdgcn.sdot4"))),
    (ROCM_MFMA_fill_16x16_f32_INTRIN, lambda: get_mma_fill_intrin("float32", 4)),
    (ROCM_MFMA_fill_16x16_i32_INTRIN, lambda: get_mma_fill_intrin("int32", 4)),
    (ROCM_MFMA_LOAD_16x16_A_SHARED_s8_INTRIN, lambda: get_mfma_load_intrin(16, "int8", "shared")),
    (ROCM_MFMA_LOAD_16x16_B_SHARED_s8_INTRIN, lambda: get_mfma_load_intrin(16, "int8", "shared", is_b=True)),
    (ROCM_MFMA_LOAD_16x16_A_SHARED_f16_INTRIN, lambda: get_mfma_load_intrin(16, "float16", "shared")),
    (ROCM_MFMA_LOAD_16x16_B_SHARED_f16_INTRIN, lambda: get_mfma_load_intrin(16, "float16", "shared", is_b=True)),
    (ROCM_MFMA_LOAD_16x4_A_SHARED_f32_INTRIN, lambda: get_mfma_load_intrin(4, "float32", "shared")),
    (ROCM_MFMA_LOAD_16x4_B_SHARED_f32_INTRIN, lambda: get_mfma_load_intrin(4, "float32", "shared", is_b=True)),
    (ROCM_MFMA_f32f32f32_INTRIN, lambda: get_mfma_intrin(4, "float32", "float32")),
    (ROCM_MFMA_f16f16f32_INTRIN, lambda: get_mfma_intrin(16, "float16", "float32")),
    (ROCM_MFMA_s8s8s32_INTRIN, lambda: get_mfma_intrin(16, "int8", "int32")),
    (ROCM_MFMA_STORE_16x16_s32_INTRIN, lambda: get_mfma_store_intrin(4, "int32", "global")),
    (ROCM_MFMA_STORE_16x16_f32_INTRIN, lambda: get_mfma_store_intrin(4, "float32", "global")),
]
for _name, _make in _TABLE:
    TensorIntrin.register(_name, *_make(), override=True)

__all__ = ["M_DIM", "N_DIM", "WARP_SIZE", "get_mfma_intrin", "get_mfma_load_intrin", "get_mfma_store_intrin",
           "get_mma_fill_intrin", "shared_16x16_to_local_64x4_layout_A", "shared_16x16_to_local_64x4_layout_B",
           "shared_16x16_to_local_64x4_layout_C", "shared_16x4_to_local_64x1_layout_A",
           "shared_4x16_to_local_64x1_layout_B"] + [n for n in list(globals()) if n.endswith("_INTRIN")]
