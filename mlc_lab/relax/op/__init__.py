"""High-level graph ops: ``relax.op.add``, ``relax.op.matmul``, ``relax.op.nn.relu`` ...

Each function builds a ``Call`` to a registered ``Op`` and infers its structure info at once, so
a wrong shape or dtype raises where the call is written. The registry (``register_op``,
``op_info``, ``register_legalize``) records each op's inference and legalization.
"""
from . import nn
from .nn import relu  # the 2022 place of nn.relu
from .binary import (add, divide, equal, ewise_fma, greater, greater_equal, less, less_equal,
                     maximum, minimum, multiply, not_equal, power, subtract)
from .call import call_dps_packed, call_tir, match_cast
from .create import (arange, full, full_like, ones, ones_like, tril, triu, zeros, zeros_like)
from .index import astype, strided_slice, take, where
from .linear_algebra import dense, linear, matmul
from .manipulate import flatten, permute_dims, reshape
from .reduce import max, mean, min, sum
from .registry import (OpInfo, get_op, infer_struct_info, list_ops, make_call,
                       op_info, register_legalize, register_op)
from .split_concat import broadcast_to, concat, expand_dims, split, squeeze
from .unary import cos, erf, exp, log, negative, rsqrt, sigmoid, sin, sqrt, square, tanh

__all__ = ["OpInfo", "add", "call_dps_packed", "call_tir", "dense", "divide", "ewise_fma",
           "exp", "flatten", "get_op", "infer_struct_info", "linear", "list_ops", "log", "make_call",
           "matmul", "max", "mean", "min", "multiply", "negative", "nn", "op_info", "permute_dims",
           "register_legalize", "register_op", "relu", "reshape", "sigmoid", "sqrt", "subtract", "sum", "tanh",
           "arange", "astype", "broadcast_to", "concat", "cos", "equal", "erf", "expand_dims", "full",
           "full_like", "greater", "greater_equal", "less", "less_equal", "maximum", "minimum",
           "not_equal", "ones", "ones_like", "power", "rsqrt", "sin", "split", "square", "squeeze",
           "strided_slice", "take", "tril", "triu", "where", "zeros", "zeros_like", "match_cast"]
