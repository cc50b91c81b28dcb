"""topi: a library of tensor operators written in ``te``.

Each operator takes te Tensors (and Python ints/tuples for attributes) and returns a te Tensor,
so operators chain, and ``te.create_prim_func([inputs..., output])`` turns the result into one
PrimFunc with a block per stage. Stages are named as in TVM's operator library ("T_add",
"T_matmul_NT", "pad_temp", "conv2d_nchw", "pool_max", "T_softmax_norm", "T_reshape", ...).

    x = te.placeholder((n, 784), name="x"); w = te.placeholder((128, 784), name="w")
    y = topi.nn.relu(topi.nn.dense(x, w))
    func = te.create_prim_func([x, w, y])
"""
from . import nn
from .activation import gelu, gelu_tanh, silu
from .compare import (cast, equal, greater, greater_equal, less, less_equal, not_equal, where)
from .conv import conv2d, conv2d_nchw
from .elemwise import (add, broadcast_shape, cos, divide, erf, exp, log, maximum, minimum,
                       multiply, negative, power, relu, rsqrt, sigmoid, sin, sqrt, square,
                       subtract, tanh)
from .manipulate import flatten, pad, permute_dims, reshape, transpose
from .nn import dense, log_softmax, matmul, softmax
from .pool import avg_pool2d, max_pool2d, pool2d
from .norm import layer_norm, rms_norm
from .reduction import max, mean, min, sum  # noqa: A004 - numpy's names
from .transform import (arange, broadcast_to, concatenate, expand_dims, full, split, squeeze,
                        strided_slice, take, trilu)

__all__ = ["add", "avg_pool2d", "broadcast_shape", "conv2d", "conv2d_nchw", "dense", "divide",
           "exp", "flatten", "log", "log_softmax", "matmul", "max", "max_pool2d", "maximum", "mean",
           "min", "minimum", "multiply", "negative", "nn", "pad", "permute_dims", "pool2d", "relu",
           "reshape", "sigmoid", "softmax", "sqrt", "subtract", "sum", "tanh", "transpose",
           "arange", "broadcast_to", "cast", "concatenate", "cos", "equal", "erf", "expand_dims",
           "full", "gelu", "gelu_tanh", "greater", "greater_equal", "layer_norm", "less",
           "less_equal", "not_equal", "power", "rms_norm", "rsqrt", "silu", "sin", "split",
           "square", "squeeze", "strided_slice", "take", "trilu", "where"]
