"""The CUDA ``wmma`` fragment intrinsics, generated from one table: load an operand tile from
shared memory into a ``wmma.matrix_a``/``wmma.matrix_b`` fragment (row- or column-major), zero
an accumulator fragment, multiply-accumulate ``C += A @ B`` (B optionally transposed), and store
an accumulator to shared or global memory. Each ``WMMA_*_INTRIN`` constant holds the registered
name (imported through ``mlc_lab.tir.tensor_intrin.cuda``).

>>> WMMA_LOAD_16x16x16_F16_B_TRANS_DYN_INTRIN
'wmma_load_16x16x16_f16_b_trans_shared_dyn'
>>> from mlc_lab.tir import TensorIntrin
>>> [b.scope for b in TensorIntrin.get(WMMA_SYNC_16x16x16_s8s8s32_INTRIN).desc.buffer_params]
['wmma.matrix_a', 'wmma.matrix_b', 'wmma.accumulator']
"""
from mlc_lab.script import tir as T

from ..schedule.tensor_intrin import TensorIntrin
from .tile_intrin import copy_intrin, fill_intrin, identity, mma_intrin, swapped

_DTYPES = {"f16": "float16", "f32": "float32", "s8": "int8", "s32": "int32", "s4": "int4"}


def get_wmma_load_intrin(m_dim, n_dim, k_dim, dtype, shared_scope, is_b, is_col_major):
    """Load the A (m x k) or B (k x n) operand of an ``m x n x k`` wmma into its fragment; a
    column-major operand is stored transposed. The leading dimension handed to the instruction
    is the row stride of the memory the tile lies in (bound when the block is lowered)."""
    rows, cols = (k_dim, n_dim) if is_b else (m_dim, k_dim)
    if is_col_major:
        rows, cols = cols, rows
    tile = (rows, cols)
    layout = "col_major" if is_col_major else "row_major"
    desc, _ = copy_intrin(rows, cols, dtype, (tile, shared_scope, identity),
                          (tile, f"wmma.matrix_{'b' if is_b else 'a'}", identity), _unused)
    return desc, _strided_copy_impl(tile, dtype, shared_scope, f"wmma.matrix_{'b' if is_b else 'a'}",
                                    lambda frag, mem, ldm: T.tvm_load_matrix_sync(
                                        frag, m_dim, n_dim, k_dim, 0, mem, ldm, layout))


def _unused(*handles):
    return T.call_extern("unused", *handles, dtype="handle")


def _strided_copy_impl(tile, dtype, mem_scope, frag_scope, call, store=False):
    """The implementation of a fragment load (``store``: store) whose memory-side view declares
    its strides, so that the leading dimension is the real row stride of the region."""

    @T.prim_func
    def load_impl(d: T.handle, s: T.handle):
        s1 = T.int32()
        s0 = T.int32()
        D = T.match_buffer(d, tile, dtype, scope=frag_scope)
        S = T.match_buffer(s, tile, dtype, scope=mem_scope, strides=[s1, s0])
        T.evaluate(call(D.data, S.data, s1))

    @T.prim_func
    def store_impl(d: T.handle, s: T.handle):
        s1 = T.int32()
        s0 = T.int32()
        D = T.match_buffer(d, tile, dtype, scope=mem_scope, strides=[s1, s0])
        S = T.match_buffer(s, tile, dtype, scope=frag_scope)
        T.evaluate(call(S.data, D.data, s1))

    impl = store_impl if store else load_impl
    return impl.replace(params=impl.params[::-1])


def get_wmma_fill_intrin(m_dim, n_dim, k_dim, dtype):
    """Zero an ``m x n`` accumulator fragment."""

    def call(frag):
        return T.tvm_fill_fragment(frag, m_dim, n_dim, k_dim, 0, 0)
    return fill_intrin(m_dim, n_dim, dtype, ((m_dim, n_dim), "wmma.accumulator", identity), call)


def get_wmma_store_intrin(m_dim, n_dim, k_dim, dtype, scope):
    """Store an ``m x n`` accumulator fragment to memory of ``scope`` (row-major, the leading
    dimension the row stride of the destination region)."""
    desc, _ = copy_intrin(m_dim, n_dim, dtype, ((m_dim, n_dim), "wmma.accumulator", identity),
                          ((m_dim, n_dim), scope, identity), _unused)
    return desc, _strided_copy_impl((m_dim, n_dim), dtype, scope, "wmma.accumulator",
                                    lambda frag, mem, ldm: T.tvm_store_matrix_sync(
                                        frag, m_dim, n_dim, k_dim, 0, mem, ldm, "row_major"),
                                    store=True)


def get_wmma_sync_intrin(m_dim, n_dim, k_dim, in_dtype, out_dtype, b_transposed):
    """``C += A @ B`` on fragments (``B`` stored n x k when ``b_transposed``), the products in
    ``out_dtype``."""
    b_shape, b_map = ((n_dim, k_dim), swapped(identity)) if b_transposed else ((k_dim, n_dim), identity)

    def call(c, a, b):
        return T.tvm_mma_sync(c, 0, a, 0, b, 0, c, 0)
    return mma_intrin(m_dim, n_dim, k_dim, in_dtype, out_dtype,
                      ((m_dim, k_dim), "wmma.matrix_a", identity), (b_shape, "wmma.matrix_b", b_map),
                      ((m_dim, n_dim), "wmma.accumulator", identity), call)


def get_wmma_intrin_group(load_scope, store_scope, in_dtype, out_dtype, trans_b):
    """The names of the five intrinsics a 16x16x16 wmma schedule uses, as a dict with keys
    ``init``, ``load_a``, ``load_b``, ``compute`` and ``store``: operands loaded from
    ``load_scope`` ("shared" or "shared.dyn"), ``in_dtype`` float16 or int8, accumulated in
    ``out_dtype`` (float16, float32 or int32) and stored to ``store_scope``."""
    if load_scope not in ("shared", "shared.dyn") or store_scope not in ("global", "shared", "shared.dyn"):
        raise ValueError(f"get_wmma_intrin_group: load_scope must be 'shared' or 'shared.dyn' and "
                         f"store_scope 'global', 'shared' or 'shared.dyn', got {load_scope!r}, {store_scope!r}")
    abbrev = {"float16": "f16", "float32": "f32", "int8": "s8", "int32": "s32"}
    if in_dtype not in ("float16", "int8") or out_dtype not in ("float16", "float32", "int32"):
        raise ValueError(f"get_wmma_intrin_group: no wmma intrinsics for {in_dtype} -> {out_dtype}")
    shape, i, o = "16x16x16", abbrev[in_dtype], abbrev[out_dtype]
    load, store, trans = load_scope.replace(".", "_"), store_scope.replace(".", "_"), "_trans" if trans_b else ""
    return {"init": f"wmma_fill_{shape}_{o}", "load_a": f"wmma_load_{shape}_{i}_a_{load}",
            "load_b": f"wmma_load_{shape}_{i}_b{trans}_{load}",
            "compute": f"wmma_sync_{shape}_{i}{i}{o}{trans}", "store": f"wmma_store_{shape}_{o}_{store}"}


def _table():
    """(constant name, registered name, intrinsic maker, its arguments) of every wmma intrinsic."""
    rows = []
    for shape, ins, outs, loads in (((16, 16, 16), ("f16", "s8"), ("f32", "f16", "s32"), None),
                                    ((8, 8, 32), ("s4",), ("s32",), (("a", False), ("b", True)))):
        text = "x".join(map(str, shape))
        for i in ins:
            for operand, trans in loads or [(o, t) for o in "ab" for t in (False, True)]:
                for scope in ("shared", "shared.dyn"):
                    suffix = ("_trans" if trans else "") + ("_dyn" if scope != "shared" else "")
                    rows.append((f"WMMA_LOAD_{text}_{i.upper()}_{operand.upper()}{suffix.upper()}_INTRIN",
                                 f"wmma_load_{text}_{i}_{operand}{'_trans' if trans else ''}_{scope.replace('.', '_')}",
                                 get_wmma_load_intrin, (*shape, _DTYPES[i], scope, operand == "b", trans)))
            for o in outs:
                if (i, o) in (("s8", "f32"), ("s8", "f16"), ("f16", "s32")):
                    continue
                for trans in ((False, True) if i != "s4" else (True,)):
                    t = "_trans" if trans else ""
                    rows.append((f"WMMA_SYNC_{text}_{i}{i}{o}{t.upper()}_INTRIN", f"wmma_sync_{text}_{i}{i}{o}{t}",
                                 get_wmma_sync_intrin, (*shape, _DTYPES[i], _DTYPES[o], trans)))
        for o in outs:
            rows.append((f"WMMA_FILL_{text}_{o.upper()}_INTRIN", f"wmma_fill_{text}_{o}",
                         get_wmma_fill_intrin, (*shape, _DTYPES[o])))
            for scope in ("shared", "shared.dyn", "global"):
                s = scope.replace(".", "_")
                rows.append((f"WMMA_STORE_{text}_{o.upper()}_{s.upper()}_INTRIN", f"wmma_store_{text}_{o}_{s}",
                             get_wmma_store_intrin, (*shape, _DTYPES[o], scope)))
    return rows


# int4 is not an mlc_lab dtype: the 4-bit intrinsics keep their names but are not registered.
UNREGISTERED = []
for _const, _name, _make, _args in _table():
    globals()[_const] = _name
    if "int4" in _args:
        UNREGISTERED.append(_name)
    else:
        TensorIntrin.register(_name, *_make(*_args), override=True)

__all__ = ["UNREGISTERED", "get_wmma_fill_intrin", "get_wmma_intrin_group", "get_wmma_load_intrin",
           "get_wmma_store_intrin", "get_wmma_sync_intrin"] + [c for c, _, _, _ in _table()]
