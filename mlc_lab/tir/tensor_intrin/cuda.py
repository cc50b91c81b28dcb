"""NVIDIA tensor cores, as the reference compiler names their intrinsics: the warp-level ``mma``
instructions fed by ``ldmatrix`` (operands spread over the 32 threads of a warp in the layouts
below), and the ``wmma`` fragment API (load, fill, multiply-accumulate, store of 16x16x16 tiles).

Each family is generated from one function over a table of shapes, dtypes and scopes. The
descriptions say element by element what an instruction computes; the implementations are the
opaque builtins (``T.tvm_mma_sync``, ``T.tvm_load_matrix_sync``, ..., or ``T.call_extern`` of the
PTX instruction's name). The ``wmma`` loads and stores declare the strides of their memory-side
view, so the leading dimension they pass is the real row stride of the tile's memory once the
block is lowered; a fragment is named by the address of its first element (the fragment-index
argument stays 0). The CUDA backend prints the wmma calls as ``<mma.h>`` calls and the cuda-sim
simulator runs them (``runtime.cuda_sim.tensor_core``). The mma/ldmatrix implementations here
are whole-tile calls without per-lane offsets: they schedule and print, but only the per-lane
``ptx_ldmatrix``/``ptx_mma`` builtins of ``runtime.cuda_sim.ptx_mma`` run and compile.

>>> get_wmma_intrin_group("shared", "global", "float16", "float32", trans_b=True)["compute"]
'wmma_sync_16x16x16_f16f16f32_trans'
>>> shared_16x16_to_ldmatrix_32x8_layout(9, 3)
(5, 3)
"""
from mlc_lab.script import tir as T

from ..schedule.tensor_intrin import TensorIntrin
from .tile_intrin import copy_intrin, extern, fill_intrin, identity, mma_intrin, swapped

WARP_SIZE = 32
M_DIM = N_DIM = 16


# -- where each element of a tile lives in a warp: (thread, register) -----------------------------
def shared_16x16_to_ldmatrix_32x8_layout(i, j):
    return 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + (i // 8) * 2 + j % 2


def shared_16x32_to_ldmatrix_32x16_layout(i, j):
    return 4 * (i % 8) + (j % 16) // 4, 8 * (j // 16) + (i // 8) * 4 + j % 4


def shared_32x16_to_ldmatrix_32x16_layout(i, j):
    return (i % 16) // 4 + 4 * (j % 8), 8 * (j // 8) + (i // 16) * 4 + i % 4


def index_map_shared_16x16_to_ldmatrix_32x8_layout(ind):
    """The 16x16 layout as an index map over a list of two indices."""
    return list(shared_16x16_to_ldmatrix_32x8_layout(ind[0], ind[1]))


# -- mma.sync with ldmatrix (operands in the registers of a warp) ---------------------------------
def get_ldmatrix_intrin(k_dim, dtype, is_b, transposed, shared_scope="shared"):
    """Load a 16 x ``k_dim`` operand (``k_dim`` x 16 for an untransposed B) from shared memory
    into the warp layout the mma instruction expects."""
    col_major = is_b and not transposed
    if k_dim == 16:
        layout = shared_16x16_to_ldmatrix_32x8_layout
    else:
        layout = shared_32x16_to_ldmatrix_32x16_layout if col_major else shared_16x32_to_ldmatrix_32x16_layout
    rows, cols = (k_dim, M_DIM) if col_major else (M_DIM, k_dim)
    local = M_DIM * k_dim // WARP_SIZE
    return copy_intrin(rows, cols, dtype, ((rows, cols), shared_scope, identity),
                       ((WARP_SIZE, local), "warp", layout),
                       extern("ptx_ldmatrix", T.bool(col_major), 4, ".b16", handles_first=False),
                       dst_first=True)


def get_mma_intrin(k_dim, out_dtype, b_transposed):
    """16 x 16 x ``k_dim`` multiply-accumulate of warp-held operands (float16 into ``out_dtype``
    float16/float32, or int8 into int32)."""
    in_dtype = "int8" if out_dtype == "int32" else "float16"
    local = M_DIM * k_dim // WARP_SIZE
    if k_dim == 16:
        a_map = b_map = shared_16x16_to_ldmatrix_32x8_layout
    else:
        a_map = shared_16x32_to_ldmatrix_32x16_layout
        b_map = a_map if b_transposed else shared_32x16_to_ldmatrix_32x16_layout
    abbrev = {"float16": "fp16", "float32": "fp32", "int32": "int32", "int8": "int8"}
    call = extern("ptx_mma", f"m16n8k{k_dim}", "row", "col", abbrev[in_dtype], abbrev[in_dtype],
                   abbrev[out_dtype])
    warp = ((WARP_SIZE, local), "warp")
    return mma_intrin(M_DIM, N_DIM, k_dim, in_dtype, out_dtype, warp + (a_map,),
                      warp + (swapped(b_map) if b_transposed else b_map,),
                      ((WARP_SIZE, M_DIM * N_DIM // WARP_SIZE), "warp", shared_16x16_to_ldmatrix_32x8_layout),
                      call)


def get_mma_fill_intrin(dtype, local_size):
    return fill_intrin(M_DIM, N_DIM, dtype, ((WARP_SIZE, local_size), "warp", shared_16x16_to_ldmatrix_32x8_layout),
                       extern("mma_fill", local_size))


def get_mma_store_intrin(dtype, local_size, scope="global"):
    return copy_intrin(M_DIM, N_DIM, dtype,
                       ((WARP_SIZE, local_size), "warp", shared_16x16_to_ldmatrix_32x8_layout),
                       ((M_DIM, N_DIM), scope, identity), extern("mma_store", M_DIM, N_DIM))


LDMATRIX_16x16_A_INTRIN = "mma.ldmatrix_16x16_a"
LDMATRIX_16x16_B_INTRIN = "mma.ldmatrix_16x16_b"
LDMATRIX_16x16_A_DYN_INTRIN = "mma.ldmatrix_16x16_a_dyn"
LDMATRIX_16x16_B_DYN_INTRIN = "mma.ldmatrix_16x16_b_dyn"
LDMATRIX_16x16_B_TRANS_INTRIN = "mma.ldmatrix_16x16_b_trans"
LDMATRIX_16x32_A_INTRIN = "mma.ldmatrix_16x32_a"
LDMATRIX_32x16_B_INTRIN = "mma.ldmatrix_32x16_b"
LDMATRIX_16x32_B_TRANS_INTRIN = "mma.ldmatrix_16x32_b_trans"
MMA_f16f16f32_INTRIN = "mma_f16f16f32"
MMA_f16f16f32_TRANS_INTRIN = "mma_f16f16f32_trans"
MMA_f16f16f16_INTRIN = "mma_f16f16f16"
MMA_f16f16f16_TRANS_INTRIN = "mma_f16f16f16_trans"
MMA_i8i8i32_INTRIN = "mma_i8i8i32"
MMA_i8i8i32_TRANS_INTRIN = "mma_i8i8i32_trans"
MMA_fill_16x16_f32_INTRIN = "mma_fill_16x16_f32"
MMA_fill_16x16_f16_INTRIN = "mma_fill_16x16_f16"
MMA_fill_16x16_i32_INTRIN = "mma_fill_16x16_i32"
MMA_store_16x16_f32_global_INTRIN = "mma_store_16x16_f32_global_"
MMA_store_16x16_f16_global_INTRIN = "mma_store_16x16_f16_global_"
MMA_store_16x16_i32_global_INTRIN = "mma_store_16x16_i32_global_"

_MMA_TABLE = [
    (LDMATRIX_16x16_A_INTRIN, get_ldmatrix_intrin, (16, "float16", False, False)),
    (LDMATRIX_16x16_B_INTRIN, get_ldmatrix_intrin, (16, "float16", True, False)),
    (LDMATRIX_16x16_A_DYN_INTRIN, get_ldmatrix_intrin, (16, "float16", False, False, "shared.dyn")),
    (LDMATRIX_16x16_B_DYN_INTRIN, get_ldmatrix_intrin, (16, "float16", True, False, "shared.dyn")),
    (LDMATRIX_16x16_B_TRANS_INTRIN, get_ldmatrix_intrin, (16, "float16", True, True)),
    (LDMATRIX_16x32_A_INTRIN, get_ldmatrix_intrin, (32, "int8", False, False)),
    (LDMATRIX_32x16_B_INTRIN, get_ldmatrix_intrin, (32, "int8", True, False)),
    (LDMATRIX_16x32_B_TRANS_INTRIN, get_ldmatrix_intrin, (32, "int8", True, True)),
    (MMA_f16f16f32_INTRIN, get_mma_intrin, (16, "float32", False)),
    (MMA_f16f16f32_TRANS_INTRIN, get_mma_intrin, (16, "float32", True)),
    (MMA_f16f16f16_INTRIN, get_mma_intrin, (16, "float16", False)),
    (MMA_f16f16f16_TRANS_INTRIN, get_mma_intrin, (16, "float16", True)),
    (MMA_i8i8i32_INTRIN, get_mma_intrin, (32, "int32", False)),
    (MMA_i8i8i32_TRANS_INTRIN, get_mma_intrin, (32, "int32", True)),
    (MMA_fill_16x16_f32_INTRIN, get_mma_fill_intrin, ("float32", 8)),
    (MMA_fill_16x16_f16_INTRIN, get_mma_fill_intrin, ("float16", 8)),
    (MMA_fill_16x16_i32_INTRIN, get_mma_fill_intrin, ("int32", 8)),
    (MMA_store_16x16_f32_global_INTRIN, get_mma_store_intrin, ("float32", 8, "global")),
    (MMA_store_16x16_f16_global_INTRIN, get_mma_store_intrin, ("float16", 8, "global")),
    (MMA_store_16x16_i32_global_INTRIN, get_mma_store_intrin, ("int32", 8, "global")),
]
for _name, _make, _args in _MMA_TABLE:
    TensorIntrin.register(_name, *_make(*_args), override=True)

from .wmma import *  # noqa: E402,F401,F403  (the wmma family, generated from its own table)
from .wmma import __all__ as _wmma_all  # noqa: E402

__all__ = ["M_DIM", "N_DIM", "WARP_SIZE", "get_ldmatrix_intrin", "get_mma_fill_intrin", "get_mma_intrin",
           "get_mma_store_intrin", "index_map_shared_16x16_to_ldmatrix_32x8_layout",
           "shared_16x16_to_ldmatrix_32x8_layout", "shared_16x32_to_ldmatrix_32x16_layout",
           "shared_32x16_to_ldmatrix_32x16_layout"] + [n for n in list(globals()) if n.startswith(("LDMATRIX_", "MMA_"))] + list(_wmma_all)
