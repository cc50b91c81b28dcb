"""Descriptions of tile-shaped instructions, written once and instantiated by the GPU intrinsic
tables (cuda.py, wmma.py, rocm.py): copy a tile between two layouts, zero a tile, and
multiply-accumulate tiles. A *layout* maps the logical element (i, j) of a tile to its indices in
a buffer: the identity for a plain tile, or (thread, register) for a tile spread over a warp.
Each implementation is an opaque call built by the caller from the buffers' ``.data``.

>>> desc, impl = fill_intrin(2, 2, "float32", ((2, 2), "local", identity), extern("zero2x2"))
>>> print(desc.body.block.body)
for i, j in T.grid(2, 2):
    with T.block("init"):
        vi, vj = T.axis.remap("SS", [i, j])
        T.reads()
        T.writes(D[vi, vj])
        D[vi, vj] = T.float32(0)
>>> print(impl.body)
T.call_extern("zero2x2", D.data, dtype="handle")
"""
from mlc_lab.script import tir as T

from ..expr import const


def identity(i, j):
    return i, j


def swapped(layout):
    """``layout`` applied to (j, i): the layout of the transposed tile."""
    return lambda i, j: layout(j, i)


def extern(name, *args, dtype="handle", handles_first=True):
    """A call builder: the opaque extern call ``name(*handles, *args)`` (``name(*args,
    *handles)`` when not ``handles_first``) of the buffers' handles it is given."""
    def call(*handles):
        return T.call_extern(name, *((handles + args) if handles_first else (args + handles)), dtype=dtype)
    return call


def copy_intrin(rows, cols, dtype, src, dst, call, dst_first=False):
    """(desc, impl) copying a ``rows x cols`` tile: ``dst[dst_layout(i, j)] = src[src_layout(i, j)]``;
    ``src``/``dst`` are (shape, scope, layout); the impl is ``call(dst.data, src.data)``. The
    functions take (src, dst), or (dst, src) with ``dst_first`` (as a register load is declared)."""
    (s_shape, s_scope, s_map), (d_shape, d_scope, d_map) = src, dst
    s0, s1 = _parts(s_map)
    d0, d1 = _parts(d_map)

    @T.prim_func
    def copy_desc(d: T.handle, s: T.handle):
        D = T.match_buffer(d, d_shape, dtype, scope=d_scope)
        S = T.match_buffer(s, s_shape, dtype, scope=s_scope)
        for i, j in T.grid(rows, cols):
            with T.block("copy"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[d0(vi, vj), d1(vi, vj)] = S[s0(vi, vj), s1(vi, vj)]

    @T.prim_func
    def copy_impl(d: T.handle, s: T.handle):
        D = T.match_buffer(d, d_shape, dtype, scope=d_scope)
        S = T.match_buffer(s, s_shape, dtype, scope=s_scope)
        T.evaluate(call(D.data, S.data))

    if dst_first:
        return copy_desc, copy_impl
    return copy_desc.replace(params=copy_desc.params[::-1]), copy_impl.replace(params=copy_impl.params[::-1])


def fill_intrin(rows, cols, dtype, dst, call):
    """(desc, impl) zeroing a ``rows x cols`` tile of ``dst`` = (shape, scope, layout); the impl
    is ``call(dst.data)``."""
    shape, scope, layout = dst
    d0, d1 = _parts(layout)
    zero = const(0, dtype)

    @T.prim_func
    def fill_desc(d: T.handle):
        D = T.match_buffer(d, shape, dtype, scope=scope)
        for i, j in T.grid(rows, cols):
            with T.block("init"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[d0(vi, vj), d1(vi, vj)] = zero

    @T.prim_func
    def fill_impl(d: T.handle):
        D = T.match_buffer(d, shape, dtype, scope=scope)
        T.evaluate(call(D.data))

    return fill_desc, fill_impl


def mma_intrin(m, n, k, in_dtype, out_dtype, a, b, c, call):
    """(desc, impl) of ``C[i, j] += A[i, kk] * B[kk, j]`` over an ``m x n x k`` tile, the products
    in ``out_dtype``; ``a``/``b``/``c`` are (shape, scope, layout), ``b``'s layout taking
    (kk, j); the impl is ``call(C.data, A.data, B.data)``."""
    (a_shape, a_scope, a_map), (b_shape, b_scope, b_map), (c_shape, c_scope, c_map) = a, b, c
    a0, a1 = _parts(a_map)
    b0, b1 = _parts(b_map)
    c0, c1 = _parts(c_map)

    def widen(value):
        return value if in_dtype == out_dtype else T.Cast(out_dtype, value)

    @T.prim_func
    def mma_desc(a: T.handle, b: T.handle, c: T.handle):
        A = T.match_buffer(a, a_shape, in_dtype, scope=a_scope)
        B = T.match_buffer(b, b_shape, in_dtype, scope=b_scope)
        C = T.match_buffer(c, c_shape, out_dtype, scope=c_scope)
        for i, j, kk in T.grid(m, n, k):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, kk])
                C[c0(vi, vj), c1(vi, vj)] = C[c0(vi, vj), c1(vi, vj)] + widen(
                    A[a0(vi, vk), a1(vi, vk)]) * widen(B[b0(vk, vj), b1(vk, vj)])

    @T.prim_func
    def mma_impl(a: T.handle, b: T.handle, c: T.handle):
        A = T.match_buffer(a, a_shape, in_dtype, scope=a_scope)
        B = T.match_buffer(b, b_shape, in_dtype, scope=b_scope)
        C = T.match_buffer(c, c_shape, out_dtype, scope=c_scope)
        T.evaluate(call(C.data, A.data, B.data))

    return mma_desc, mma_impl


def _parts(layout):
    """The two index functions of a layout."""
    def first(i, j):
        return layout(i, j)[0]

    def second(i, j):
        return layout(i, j)[1]
    return first, second


__all__ = ["copy_intrin", "extern", "fill_intrin", "identity", "mma_intrin", "swapped"]
