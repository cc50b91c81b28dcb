"""The programs the fuzzer schedules: small tensor programs of random sizes, each with a numpy
reference. Every kind of loop nest the primitives must handle appears: reductions with an init,
multi-block chains, padding through if_then_else, T.where, symbolic extents, int32 data, and
consumers that read a producer at split (``i // w, i % w``) or shifted (``i + s``) indices."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...script import from_source


@dataclass(frozen=True)
class Program:
    """One instance: script ``source`` (function "main"), ``inputs(rng)`` giving the arguments
    (outputs included, filled with NaN or a poison value), ``reference(*args)`` the expected
    outputs as {argument position: array}, and ``rtol`` for the comparison."""
    name: str
    source: str
    inputs: Callable
    reference: Callable
    rtol: float = 1e-4

    def module(self):
        return from_source(self.source)


def _f32(rng, *shape):
    return rng.uniform(-1, 1, shape).astype("float32")


def _nan(*shape):
    return np.full(shape, np.nan, "float32")


def matmul_relu(rng) -> Program:
    m, n, k = (int(rng.integers(2, 24)) for _ in range(3))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    Y = T.alloc_buffer(({m}, {n}), "float32")
    for i, j, k in T.grid({m}, {n}, {k}):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid({m}, {n}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
'''
    return Program("matmul_relu", src, lambda r: [_f32(r, m, k), _f32(r, k, n), _nan(m, n)],
                   lambda a, b, c: {2: np.maximum(a @ b, 0)})


def batch_matmul(rng) -> Program:
    b, m, n, k = (int(rng.integers(1, 10)) for _ in range(4))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({b}, {m}, {k}), "float32"), B: T.Buffer(({b}, {k}, {n}), "float32"), C: T.Buffer(({b}, {m}, {n}), "float32")):
    for p, i, j, k in T.grid({b}, {m}, {n}, {k}):
        with T.block("C"):
            vb, vi, vj, vk = T.axis.remap("SSSR", [p, i, j, k])
            with T.init():
                C[vb, vi, vj] = T.float32(0)
            C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vb, vk, vj]
'''
    return Program("batch_matmul", src, lambda r: [_f32(r, b, m, k), _f32(r, b, k, n), _nan(b, m, n)],
                   lambda a, w, c: {2: a @ w})


def conv2d_padded(rng) -> Program:
    c, f, h, r = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(3, 9)), 3
    src = f'''
@T.prim_func
def main(X: T.Buffer((1, {c}, {h}, {h}), "float32"), W: T.Buffer(({f}, {c}, {r}, {r}), "float32"), Y: T.Buffer((1, {f}, {h}, {h}), "float32")):
    Xp = T.alloc_buffer((1, {c}, {h + 2}, {h + 2}), "float32")
    for n, ci, y, x in T.grid(1, {c}, {h + 2}, {h + 2}):
        with T.block("pad"):
            vn, vc, vy, vx = T.axis.remap("SSSS", [n, ci, y, x])
            Xp[vn, vc, vy, vx] = T.if_then_else(1 <= vy and vy < {h + 1} and 1 <= vx and vx < {h + 1}, X[vn, vc, vy - 1, vx - 1], T.float32(0))
    for n, fo, y, x, ci, ry, rx in T.grid(1, {f}, {h}, {h}, {c}, {r}, {r}):
        with T.block("conv"):
            vn, vf, vy, vx, vc, vry, vrx = T.axis.remap("SSSSRRR", [n, fo, y, x, ci, ry, rx])
            with T.init():
                Y[vn, vf, vy, vx] = T.float32(0)
            Y[vn, vf, vy, vx] = Y[vn, vf, vy, vx] + Xp[vn, vc, vy + vry, vx + vrx] * W[vf, vc, vry, vrx]
'''

    def reference(x, w, y):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, f, h, h), "float32")
        for ry in range(r):
            for rx in range(r):
                out += np.einsum("nchw,fc->nfhw", xp[:, :, ry:ry + h, rx:rx + h], w[:, :, ry, rx])
        return {2: out}
    return Program("conv2d_padded", src, lambda g: [_f32(g, 1, c, h, h), _f32(g, f, c, r, r), _nan(1, f, h, h)],
                   reference)


def max_pool(rng) -> Program:
    c, h = int(rng.integers(1, 4)), 2 * int(rng.integers(1, 6))
    src = f'''
@T.prim_func
def main(X: T.Buffer(({c}, {h}, {h}), "float32"), Y: T.Buffer(({c}, {h // 2}, {h // 2}), "float32")):
    for ci, y, x, ry, rx in T.grid({c}, {h // 2}, {h // 2}, 2, 2):
        with T.block("pool"):
            vc, vy, vx, vry, vrx = T.axis.remap("SSSRR", [ci, y, x, ry, rx])
            with T.init():
                Y[vc, vy, vx] = T.float32(-3.4e38)
            Y[vc, vy, vx] = T.max(Y[vc, vy, vx], X[vc, vy * 2 + vry, vx * 2 + vrx])
'''
    return Program("max_pool", src, lambda g: [_f32(g, c, h, h), _nan(c, h // 2, h // 2)],
                   lambda x, y: {1: x.reshape(c, h // 2, 2, h // 2, 2).max(axis=(2, 4))})


def relu_pool(rng) -> Program:
    """A ReLU stage, then a max over windows of 2 or 3 at a stride of 1 to 3 (side by side,
    overlapping or with gaps): what reverse_compute_at may move under the rows it reads."""
    window, stride = int(rng.integers(2, 4)), int(rng.integers(1, 4))
    h, w = int(rng.integers(window, 10)), int(rng.integers(window, 10))
    oh, ow = (h - window) // stride + 1, (w - window) // stride + 1
    src = f'''
@T.prim_func
def main(X: T.Buffer(({h}, {w}), "float32"), Y: T.Buffer(({oh}, {ow}), "float32")):
    act = T.alloc_buffer(({h}, {w}))
    for i, j in T.grid({h}, {w}):
        with T.block("act"):
            vi, vj = T.axis.remap("SS", [i, j])
            act[vi, vj] = T.max(X[vi, vj], T.float32(0))
    for y, x, ry, rx in T.grid({oh}, {ow}, {window}, {window}):
        with T.block("pool"):
            vy, vx, vry, vrx = T.axis.remap("SSRR", [y, x, ry, rx])
            with T.init():
                Y[vy, vx] = T.float32(-3.4e38)
            Y[vy, vx] = T.max(Y[vy, vx], act[vy * {stride} + vry, vx * {stride} + vrx])
'''

    def reference(x, y):
        act, out = np.maximum(x, 0), np.full((oh, ow), -3.4e38, "float32")
        for di in range(window):
            for dj in range(window):
                out = np.maximum(out, act[di:di + stride * oh:stride, dj:dj + stride * ow:stride])
        return {1: out}
    return Program("relu_pool", src, lambda g: [_f32(g, h, w), _nan(oh, ow)], reference)


def softmax(rng) -> Program:
    m, n = int(rng.integers(1, 9)), int(rng.integers(2, 30))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({m}, {n}), "float32"), B: T.Buffer(({m}, {n}), "float32")):
    mx = T.alloc_buffer(({m},), "float32")
    ex = T.alloc_buffer(({m}, {n}), "float32")
    sm = T.alloc_buffer(({m},), "float32")
    for i, k in T.grid({m}, {n}):
        with T.block("mx"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                mx[vi] = T.float32(-3.4e38)
            mx[vi] = T.max(mx[vi], A[vi, vk])
    for i, j in T.grid({m}, {n}):
        with T.block("ex"):
            vi, vj = T.axis.remap("SS", [i, j])
            ex[vi, vj] = T.exp(A[vi, vj] - mx[vi])
    for i, k in T.grid({m}, {n}):
        with T.block("sm"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                sm[vi] = T.float32(0)
            sm[vi] = sm[vi] + ex[vi, vk]
    for i, j in T.grid({m}, {n}):
        with T.block("out"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = ex[vi, vj] / sm[vi]
'''

    def reference(a, b):
        e = np.exp(a - a.max(1, keepdims=True))
        return {1: e / e.sum(1, keepdims=True)}
    return Program("softmax", src, lambda g: [_f32(g, m, n), _nan(m, n)], reference)


def elementwise_chain(rng) -> Program:
    m, n = int(rng.integers(1, 12)), int(rng.integers(1, 20))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({m}, {n}), "float32"), D: T.Buffer(({m}, {n}), "float32")):
    B = T.alloc_buffer(({m}, {n}), "float32")
    C = T.alloc_buffer(({m}, {n}), "float32")
    for i, j in T.grid({m}, {n}):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid({m}, {n}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
    for i, j in T.grid({m}, {n}):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = T.max(C[vi, vj], T.float32(0))
'''
    return Program("elementwise_chain", src, lambda g: [_f32(g, m, n), _nan(m, n)],
                   lambda a, d: {1: np.maximum(a * 2 + 1, 0)})


def transpose_add(rng) -> Program:
    m, n = int(rng.integers(1, 16)), int(rng.integers(1, 16))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({n}, {m}), "float32"), b: T.Buffer(({n},), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    At = T.alloc_buffer(({m}, {n}), "float32")
    for i, j in T.grid({m}, {n}):
        with T.block("At"):
            vi, vj = T.axis.remap("SS", [i, j])
            At[vi, vj] = A[vj, vi]
    for i, j in T.grid({m}, {n}):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = At[vi, vj] + b[vj]
'''
    return Program("transpose_add", src, lambda g: [_f32(g, n, m), _f32(g, n), _nan(m, n)],
                   lambda a, b, c: {2: a.T + b})


def symbolic_vector(rng) -> Program:
    n = int(rng.integers(1, 40))
    src = '''
@T.prim_func
def main(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = A[vi] * B[vi] + T.float32(1)
'''
    return Program("symbolic_vector", src, lambda g: [_f32(g, n), _f32(g, n), _nan(n)],
                   lambda a, b, c: {2: a * b + 1})


def symbolic_matmul(rng) -> Program:
    n, m, k = int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 12))
    src = f'''
@T.prim_func
def main(a: T.handle, B: T.Buffer(({k}, {m}), "float32"), c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, {k}), "float32")
    C = T.match_buffer(c, (n, {m}), "float32")
    for i, j, k in T.grid(n, {m}, {k}):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''
    return Program("symbolic_matmul", src, lambda g: [_f32(g, n, k), _f32(g, k, m), _nan(n, m)],
                   lambda a, b, c: {2: a @ b})


def int_row_sum(rng) -> Program:
    m, n = int(rng.integers(1, 10)), int(rng.integers(1, 30))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({m}, {n}), "int32"), S: T.Buffer(({m},), "int32")):
    for i, k in T.grid({m}, {n}):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = 0
            S[vi] = S[vi] + A[vi, vk]
'''
    return Program("int_row_sum", src,
                   lambda g: [g.integers(-100, 100, (m, n)).astype("int32"), np.full(m, -12345, "int32")],
                   lambda a, s: {1: a.sum(1).astype("int32")}, rtol=0)


def where_reduction(rng) -> Program:
    m, n = int(rng.integers(1, 8)), int(rng.integers(2, 20))
    cut = int(rng.integers(1, n))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({m}, {n}), "float32"), S: T.Buffer(({m},), "float32")):
    for i, k in T.grid({m}, {n}):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.where(k < {cut})
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]
'''
    return Program("where_reduction", src, lambda g: [_f32(g, m, n), _nan(m)],
                   lambda a, s: {1: a[:, :cut].sum(1)})


def reshape_shift(rng) -> Program:
    """An elementwise stage written as a (q, w) grid, read flat at ``i // w, i % w`` by the next
    stage, whose own consumer reads it shifted by ``s``; between them a stage "E" independent of
    both (a loop nest that merge may fuse with C's)."""
    q, w = int(rng.integers(1, 7)), int(rng.integers(2, 5))
    n = q * w
    s = int(rng.integers(1, min(2, n - 1) + 1))
    src = f'''
@T.prim_func
def main(A: T.Buffer(({n},), "float32"), D: T.Buffer(({n - s},), "float32"), E: T.Buffer(({n},), "float32")):
    B = T.alloc_buffer(({q}, {w}), "float32")
    C = T.alloc_buffer(({n},), "float32")
    for i, j in T.grid({q}, {w}):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi * {w} + vj] * T.float32(2)
    for i in range({n}):
        with T.block("C"):
            vi = T.axis.spatial({n}, i)
            C[vi] = B[vi // {w}, vi % {w}] + T.float32(1)
    for i in range({n}):
        with T.block("E"):
            vi = T.axis.spatial({n}, i)
            E[vi] = A[vi] - T.float32(1)
    for i in range({n - s}):
        with T.block("D"):
            vi = T.axis.spatial({n - s}, i)
            D[vi] = T.max(C[vi + {s}], T.float32(0))
'''
    return Program("reshape_shift", src, lambda g: [_f32(g, n), _nan(n - s), _nan(n)],
                   lambda a, d, e: {1: np.maximum(a[s:] * 2 + 1, 0), 2: a - 1})


GENERATORS = [matmul_relu, batch_matmul, conv2d_padded, max_pool, relu_pool, softmax, elementwise_chain,
              transpose_add, symbolic_vector, symbolic_matmul, int_row_sum, where_reduction,
              reshape_shift]
