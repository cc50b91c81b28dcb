"""High-level graph ops: ``relax.op.add``, ``relax.op.matmul``, ``relax.op.nn.relu`` ...

Each function builds a ``Call`` to a registered ``Op`` and infers its structure info at once, so
a wrong shape or dtype raises where the call is written. The registry (``register_op``,
``op_info``, ``register_legalize``) records each op's inference and legalization.
"""
from . import nn
from .nn import relu  # the 2022 place of nn.relu
from .binary import add, divide, ewise_fma, multiply, subtract
from .call import call_dps_packed, call_tir
from .linear_algebra import dense, linear, matmul
from .manipulate import flatten, permute_dims, reshape
from .reduce import max, mean, min, sum
from .registry import (OpInfo, get_op, infer_struct_info, list_ops, make_call,
                       op_info, register_legalize, register_op)
from .unary import exp, log, negative, sigmoid, sqrt, tanh

__all__ = ["OpInfo", "add", "call_dps_packed", "call_tir", "dense", "divide", "ewise_fma",
           "exp", "flatten", "get_op", "infer_struct_info", "linear", "list_ops", "log", "make_call",
           "matmul", "max", "mean", "min", "multiply", "negative", "nn", "op_info", "permute_dims",
           "register_legalize", "register_op", "relu", "reshape", "sigmoid", "sqrt", "subtract", "sum", "tanh"]
