"""When the VirtualMachine may call a compiled kernel on bare data addresses, and with which sizes.

A CPU kernel compiled by the llvm backend takes its buffers as addresses, then its scalar
parameters, then (as 64-bit integers) the symbolic sizes its buffer shapes use. The checked
call (``LLVMFunction.__call__``) binds every argument against the parameters to find those
sizes and to check the shapes. Inside the VM that work can be done once, on the types:

    form = address_form(function, prim_func, call, output_sinfos)
    form.ints    # [(relax expression, dtype)]: what follows the addresses, in call order

``address_form`` matches the kernel's buffer shapes against the relax types of the call's
arguments and outputs, dimension by dimension. It succeeds when each static dimension of a
buffer is the same static dimension in the type, each symbolic one is a plain variable that
always stands for the same relax expression (``n`` of the kernel for ``m`` of the function),
dtypes agree, every size the kernel takes is so defined, and no input is written by the kernel.
The relax types then fix every shape the kernel sees: the VM checks what enters a function
(parameters) and what a registered function returns against their types, and allocates each
kernel output from its type, so once one checked call went through, a later call only needs
the values of the relax expressions under the call's symbolic sizes, whatever they are.
Anything else (a compound dimension such as ``n * 2``, a tensor type without a shape, a
floating-point scalar parameter) keeps the checked call.
"""
from __future__ import annotations

from ...ir.structural import structural_equal
from ...runtime.module import written_buffers
from ...tir.buffer import Buffer
from ...tir.expr import IntImm, Var as TirVar
from ..struct_info import TensorStructInfo

INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


class AddressForm:
    """How to call a kernel on addresses: the buffers' addresses in parameter order, then
    ``ints`` [(relax PrimExpr, dtype)] for its scalar parameters and the sizes it takes."""

    def __init__(self, ints: list):
        self.ints = ints


def address_form(function, prim_func, call, output_sinfos: list):
    """The AddressForm of ``call`` (an ``R.call_tir``) of ``prim_func`` compiled as ``function``,
    whose outputs have types ``output_sinfos``; None when the types do not fix its shapes."""
    abi = getattr(function, "abi", None)
    if abi is None or not hasattr(function, "call_addresses"):
        return None
    inputs = list(call.args[1].elements)
    buffers = inputs + [None] * len(output_sinfos)
    sinfos = [a.struct_info for a in inputs] + list(output_sinfos)
    params = list(prim_func.params)
    if len(params) != len(function.func.params) or len(params) < len(sinfos):
        return None
    if not all(isinstance(p, Buffer) for p in params[:len(sinfos)]):
        return None
    scalars = params[len(sinfos):]
    tir_values = list(call.args[2].values) if len(call.args) > 2 else []
    if len(scalars) != len(tir_values) or any(isinstance(p, Buffer) or p.dtype not in INT_TYPES
                                              for p in scalars):
        return None
    bound: dict = {}
    for param, sinfo in zip(params, sinfos):
        if not _unify(param, sinfo, bound):
            return None
    for param, value in zip(scalars, tir_values):
        if not _bind(param, value, bound):
            return None
    if any(v not in bound for v in abi.shape_vars):
        return None
    written = written_buffers(prim_func)
    if any(p in written for p in params[:len(buffers) - len(output_sinfos)]):
        return None
    return AddressForm([(bound[p], p.dtype) for p in scalars]
                       + [(bound[v], "int64") for v in abi.shape_vars])


def _unify(buffer: Buffer, sinfo, bound: dict) -> bool:
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None \
            or sinfo.dtype != buffer.dtype or len(sinfo.shape) != len(buffer.shape):
        return False
    for dim, value in zip(buffer.shape, sinfo.shape):
        if isinstance(dim, IntImm):
            if not (isinstance(value, IntImm) and value.value == dim.value):
                return False
        elif not (isinstance(dim, TirVar) and _bind(dim, value, bound)):
            return False
    return True


def _bind(var, value, bound: dict) -> bool:
    """Let kernel variable ``var`` stand for relax expression ``value``; False on a conflict."""
    if var not in bound:
        bound[var] = value
        return True
    return structural_equal(bound[var], value)


__all__ = ["AddressForm", "INT_TYPES", "address_form"]
