"""Standard operators as te tensors, for tests: each function returns its input tensors and its
output, ready for ``te.create_prim_func``. Inputs are cast to ``out_dtype`` before they are
multiplied, so a float16 GEMM can accumulate in float32. The stage names ("C", "Z",
"conv2d_nhwc", ...) are the ones schedules ask for with ``sch.get_block``.

>>> from mlc_lab import te
>>> func = te.create_prim_func(matmul(64, 32, 16))
>>> [b.name for b in func.buffer_params], [int(d) for d in func.buffer_params[2].shape]
(['A', 'B', 'C'], [64, 32])
"""
from __future__ import annotations

from ... import te, topi


def _product(a, b, dtype: str):
    return a.astype(dtype) * b.astype(dtype)


def matmul(n: int, m: int, k: int, in_dtype: str = "float32",
           out_dtype: str = "float32") -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """``C[i, j] = sum_k A[i, k] * B[k, j]`` with A (n, k), B (k, m): inputs A, B and output C."""
    a = te.placeholder((n, k), in_dtype, "A")
    b = te.placeholder((k, m), in_dtype, "B")
    r = te.reduce_axis((0, k), "k")
    c = te.compute((n, m), lambda i, j: te.sum(_product(a[i, r], b[r, j], out_dtype), axis=[r]), "C")
    return a, b, c


def matmul_relu(n: int, m: int, k: int, in_dtype: str = "float32",
                out_dtype: str = "float32") -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """:func:`matmul` followed by ``max(C, 0)`` (stage "T_relu"): inputs A, B and the relu output."""
    a, b, c = matmul(n, m, k, in_dtype, out_dtype)
    return a, b, topi.relu(c)


def batch_matmul_nkkm(B: int, N: int, M: int, K: int, in_dtype: str = "float32",  # noqa: N803
                      out_dtype: str = "float32") -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """A batch of matmuls, ``Z[b, i, j] = sum_k X[b, i, k] * Y[b, k, j]`` with X (B, N, K) and
    Y (B, K, M): inputs X, Y and output Z."""
    x = te.placeholder((B, N, K), in_dtype, "X")
    y = te.placeholder((B, K, M), in_dtype, "Y")
    r = te.reduce_axis((0, K), "k")
    z = te.compute((B, N, M),
                   lambda b, i, j: te.sum(_product(x[b, i, r], y[b, r, j], out_dtype), axis=[r]), "Z")
    return x, y, z


def conv2d_nhwc(N: int, H: int, W: int, CI: int, CO: int, kernel_size: int,  # noqa: N803
                stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1,
                in_dtype: str = "float32",
                out_dtype: str = "float32") -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """2-D convolution in NHWC layout: ``inputs`` (N, H, W, CI) zero-padded by ``padding`` on
    both sides of H and W (stage "PadInput"), ``weight`` (kernel, kernel, CI // groups, CO), output
    "conv2d_nhwc" (N, out_h, out_w, CO); each group of CO // groups output channels reads its own
    CI // groups input channels."""
    if CI % groups or CO % groups:
        raise ValueError(f"conv2d_nhwc: groups={groups} must divide CI={CI} and CO={CO}")
    inputs = te.placeholder((N, H, W, CI), in_dtype, "inputs")
    weight = te.placeholder((kernel_size, kernel_size, CI // groups, CO), in_dtype, "weight")
    span = dilation * (kernel_size - 1) + 1   # the input window one output element reads
    out_h = (H + 2 * padding - span) // stride + 1
    out_w = (W + 2 * padding - span) // stride + 1
    in_group, out_group = CI // groups, CO // groups
    rh = te.reduce_axis((0, kernel_size), "rh")
    rw = te.reduce_axis((0, kernel_size), "rw")
    rc = te.reduce_axis((0, in_group), "rc")
    padded = topi.pad(inputs, [0, padding, padding, 0])

    def scaled(index, factor: int):   # no `* 1` in the IR for the usual stride and dilation
        return index if factor == 1 else index * factor

    def element(n, h, w, co):
        pixel = padded[n, scaled(h, stride) + scaled(rh, dilation),
                       scaled(w, stride) + scaled(rw, dilation), co // out_group * in_group + rc]
        return te.sum(_product(pixel, weight[rh, rw, rc, co], out_dtype), axis=[rh, rw, rc])

    return inputs, weight, te.compute((N, out_h, out_w, CO), element, "conv2d_nhwc")


__all__ = ["batch_matmul_nkkm", "conv2d_nhwc", "matmul", "matmul_relu"]
