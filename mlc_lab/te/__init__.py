"""Tensor expressions (``te``): describe a computation with index lambdas, then turn it into a
PrimFunc with ``te.create_prim_func``."""
from .create_prim_func import create_prim_func
from .tensor import (IterAxis, Reduce, Tensor, compute, const, exp, if_then_else, log, max, min,
                     placeholder, reduce_axis, sigmoid, sqrt, sum, tanh, var)

__all__ = ["IterAxis", "Reduce", "Tensor", "compute", "const", "create_prim_func", "exp",
           "if_then_else", "log", "max", "min", "placeholder", "reduce_axis", "sigmoid", "sqrt",
           "sum", "tanh", "var"]
