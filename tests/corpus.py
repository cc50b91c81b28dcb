"""The program corpus used across the suite: each entry is a prim_func in script form, a way to
make inputs, and the numpy computation it must agree with."""
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mlc_lab.script import tir as T


@T.prim_func
def vector_add(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32"),
               C: T.Buffer((128,), "float32")):
    T.func_attr({"global_symbol": "vector_add", "tir.noalias": True})
    for i in range(128):
        with T.block("C"):
            vi = T.axis.spatial(128, i)
            C[vi] = A[vi] + B[vi]


@T.prim_func
def broadcast_add(A: T.Buffer((4, 4), "int64"), B: T.Buffer((4,), "int64"),
                  C: T.Buffer((4, 4), "int64")):
    T.func_attr({"global_symbol": "broadcast_add", "tir.noalias": True})
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + B[vj]


@T.prim_func
def mm_relu(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"),
            C: T.Buffer((128, 128), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((128, 128), dtype="float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("Y"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j)
            vk = T.axis.reduce(128, k)
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(128, 128):
        with T.block("C"):
            vi = T.axis.spatial(128, i)
            vj = T.axis.spatial(128, j)
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


@T.prim_func
def bmm_relu(A: T.Buffer((16, 128, 128), "float32"), B: T.Buffer((16, 128, 128), "float32"),
             C: T.Buffer((16, 128, 128), "float32")):
    T.func_attr({"global_symbol": "bmm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((16, 128, 128))
    for n, i, j, k in T.grid(16, 128, 128, 128):
        with T.block("Y"):
            vn, vi, vj, vk = T.axis.remap("SSSR", [n, i, j, k])
            with T.init():
                Y[vn, vi, vj] = T.float32(0)
            Y[vn, vi, vj] = Y[vn, vi, vj] + A[vn, vi, vk] * B[vn, vk, vj]
    for n, i, j in T.grid(16, 128, 128):
        with T.block("C"):
            vn, vi, vj = T.axis.remap("SSS", [n, i, j])
            C[vn, vi, vj] = T.max(Y[vn, vi, vj], T.float32(0))


@T.prim_func
def conv2d_nchw(X: T.Buffer((1, 3, 10, 10), "float32"), W: T.Buffer((4, 3, 3, 3), "float32"),
                Y: T.Buffer((1, 4, 8, 8), "float32")):
    T.func_attr({"global_symbol": "conv2d_nchw", "tir.noalias": True})
    for b, k, i, j, q, di, dj in T.grid(1, 4, 8, 8, 3, 3, 3):
        with T.block("conv"):
            vb, vk, vi, vj, vq, vdi, vdj = T.axis.remap("SSSSRRR", [b, k, i, j, q, di, dj])
            with T.init():
                Y[vb, vk, vi, vj] = T.float32(0)
            Y[vb, vk, vi, vj] = Y[vb, vk, vi, vj] + X[vb, vq, vi + vdi, vj + vdj] * W[vk, vq, vdi, vdj]


@T.prim_func
def softmax(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    T.func_attr({"global_symbol": "softmax", "tir.noalias": True})
    maxelem = T.alloc_buffer((8,))
    expsum = T.alloc_buffer((8,))
    expval = T.alloc_buffer((8, 16))
    for i, k in T.grid(8, 16):
        with T.block("maxelem"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                maxelem[vi] = T.min_value("float32")
            maxelem[vi] = T.max(maxelem[vi], A[vi, vk])
    for i, j in T.grid(8, 16):
        with T.block("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            expval[vi, vj] = T.exp(A[vi, vj] - maxelem[vi])
    for i, k in T.grid(8, 16):
        with T.block("expsum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                expsum[vi] = T.float32(0)
            expsum[vi] = expsum[vi] + expval[vi, vk]
    for i, j in T.grid(8, 16):
        with T.block("norm"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = expval[vi, vj] / expsum[vi]


@T.prim_func
def symbolic_add(a: T.handle, c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = A[vi] + T.float32(1)


@T.prim_func
def matmul_symbolic(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"global_symbol": "matmul_symbolic", "tir.noalias": True})
    n = T.int64()
    A = T.match_buffer(a, (n, T.int64(64)), "float32")
    B = T.match_buffer(b, (T.int64(64), T.int64(32)), "float32")
    C = T.match_buffer(c, (n, T.int64(32)), "float32")
    for i, j, k in T.grid(n, T.int64(32), T.int64(64)):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def where_and_branches(A: T.Buffer((30,), "float32"), B: T.Buffer((30,), "float32"),
                       C: T.Buffer((30,), "float32")):
    T.func_attr({"global_symbol": "where_and_branches", "tir.noalias": True})
    for io, ii in T.grid(8, 4):
        with T.block("B"):
            vi = T.axis.spatial(30, io * 4 + ii)
            T.where(io * 4 + ii < 30)
            if A[vi] > T.float32(0):
                B[vi] = A[vi] * T.float32(2)
            else:
                B[vi] = T.float32(0) - A[vi]
    for i in range(30):
        with T.block("C"):
            vi = T.axis.spatial(30, i)
            C[vi] = T.if_then_else(vi % 2 == 0, B[vi], T.float32(-1))


@T.prim_func
def loop_kinds(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    T.func_attr({"global_symbol": "loop_kinds", "tir.noalias": True})
    for io in T.parallel(4):
        for ii in T.unroll(16):
            for j in T.vectorized(64):
                with T.block("B"):
                    vi = T.axis.spatial(64, io * 16 + ii)
                    vj = T.axis.spatial(64, j)
                    scale: T.float32 = T.float32(0.5)
                    B[vi, vj] = A[vi, vj] * scale + T.Cast("float32", vj)


def _mm_relu(a, b):
    return np.maximum(a @ b, 0)


def _conv2d(x, w):
    out = np.zeros((1, 4, 8, 8), "float32")
    for di in range(3):
        for dj in range(3):
            out += np.einsum("bqij,kq->bkij", x[:, :, di:di + 8, dj:dj + 8], w[:, :, di, dj])
    return out


def _softmax(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _where_and_branches(a):
    b = np.where(a > 0, a * 2, -a).astype("float32")
    return b, np.where(np.arange(30) % 2 == 0, b, -1).astype("float32")


@dataclass
class Case:
    func: object
    inputs: Callable[[np.random.Generator], list]    # arrays the function reads
    outputs: list                                    # (shape, dtype) of arrays it writes
    reference: Callable[..., list]                   # numpy: inputs -> expected outputs


def _rand(*shape):
    return lambda rng: rng.standard_normal(shape).astype("float32")


def _inputs(*makers):
    return lambda rng: [m(rng) for m in makers]


CORPUS = {
    "vector_add": Case(vector_add, _inputs(_rand(128), _rand(128)), [((128,), "float32")],
                       lambda a, b: [a + b]),
    "broadcast_add": Case(broadcast_add,
                          _inputs(lambda r: r.integers(-9, 9, (4, 4)), lambda r: r.integers(-9, 9, (4,))),
                          [((4, 4), "int64")], lambda a, b: [a + b]),
    "mm_relu": Case(mm_relu, _inputs(_rand(128, 128), _rand(128, 128)), [((128, 128), "float32")],
                    lambda a, b: [_mm_relu(a, b)]),
    "bmm_relu": Case(bmm_relu, _inputs(_rand(16, 128, 128), _rand(16, 128, 128)),
                     [((16, 128, 128), "float32")], lambda a, b: [_mm_relu(a, b)]),
    "conv2d_nchw": Case(conv2d_nchw, _inputs(_rand(1, 3, 10, 10), _rand(4, 3, 3, 3)),
                        [((1, 4, 8, 8), "float32")], lambda x, w: [_conv2d(x, w)]),
    "softmax": Case(softmax, _inputs(_rand(8, 16)), [((8, 16), "float32")], lambda a: [_softmax(a)]),
    "matmul_symbolic": Case(matmul_symbolic, _inputs(_rand(5, 64), _rand(64, 32)), [((5, 32), "float32")],
                            lambda a, b: [a @ b]),
    "where_and_branches": Case(where_and_branches, _inputs(_rand(30)),
                               [((30,), "float32"), ((30,), "float32")],
                               lambda a: list(_where_and_branches(a))),
    "loop_kinds": Case(loop_kinds, _inputs(_rand(64, 64)), [((64, 64), "float32")],
                       lambda a: [a * 0.5 + np.arange(64, dtype="float32")]),
}
