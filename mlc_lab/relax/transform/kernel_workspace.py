# Kernel workspaces: the big intermediates a kernel would malloc on every call become outputs of
# its R.call_tir, so StaticPlanBlockMemory plans them too. Expects fused (and scheduled) PrimFuncs.
"""``lift_kernel_workspaces(mod)``: the memory a kernel needs inside comes from the plan.

An intermediate of a PrimFunc (an ``alloc_buffer`` of its root block) used by more than one of
the root's top-level loop nests stays at function level after lowering
(``plan_and_compact_allocations`` moves an allocation only into a loop enclosing all its uses);
one above the code generator's stack limit is then ``malloc``ed and freed on every call. Such a
buffer becomes an output parameter of the kernel, after the real outputs, and every
``R.call_tir`` of the kernel allocates it as one more output:

Before::

    lv3 = R.call_tir(cls.fused_conv2d_add_relu, (x, w, b), out_sinfo=R.Tensor((8, 8, 26, 26)))

After (``lv3_tuple[1]`` is the workspace; nothing reads it after the call, so its storage is
free again for the next tensors)::

    lv3_tuple = R.call_tir(cls.fused_conv2d_add_relu, (x, w, b),
                           out_sinfo=[R.Tensor((8, 8, 26, 26)), R.Tensor((8, 8, 26, 26))])
    lv3 = lv3_tuple[0]

A kernel keeps its signature unless every use of it is an ``R.call_tir`` without ``tir_vars``
(it may also be called by name from outside).
"""
from __future__ import annotations

from ...ir.module import GlobalVar, IRModule
from ...target import Target
from ...tir.expr import IntImm
from ...tir.function import PrimFunc
from ...tir.stmt import BlockRealize, SeqStmt
from ...tir.stmt_functor import free_buffers
from ..analysis import References
from ..expr import DataflowVar, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from ..lifetime import dps_call, tensor_bytes
from ..op.call import call_tir
from ..struct_info import TensorStructInfo


def lift_kernel_workspaces(mod: IRModule, target=None) -> IRModule:
    """``mod`` with the function-level heap intermediates of its kernels passed in by the callers:
    those above the stack limit of ``target``'s code (default "llvm", the host CPU; every one
    for a target without a stack limit)."""
    stack_limit = Target("llvm" if target is None else target).capabilities.stack_limit_bytes or 0
    lifted = {}
    for gv in _called_only_by_call_tir(mod):
        func = mod[gv]
        if not isinstance(func.body, BlockRealize):
            continue
        workspaces = [b for b in func.body.block.alloc_buffers
                      if _is_heap_workspace(func, b, stack_limit)]
        if workspaces:
            lifted[gv] = [TensorStructInfo(_static_shape(b), b.dtype) for b in workspaces]
            mod = mod.with_function(gv, _as_outputs(func, workspaces))
    if not lifted:
        return mod
    for gv, func in list(mod.functions.items()):
        if isinstance(func, Function):
            mod = mod.with_function(gv, _pass_workspaces(func, lifted))
    return mod


def _called_only_by_call_tir(mod: IRModule) -> list:
    """The PrimFuncs that every reference to is the callee of an R.call_tir without tir_vars."""
    refs = References.of_module(mod)
    plain: dict = {}
    for call in refs.calls_to("relax.call_tir"):
        if len(call.args) == 2:
            plain[call.args[0]] = plain.get(call.args[0], 0) + 1
    return [gv for gv, n in plain.items()
            if refs.global_vars.get(gv) == n and isinstance(mod[gv], PrimFunc)]


def _static_shape(buffer):
    """The shape of ``buffer`` as ints, or None when a dimension is symbolic."""
    if not all(isinstance(d, IntImm) for d in buffer.shape):
        return None
    return tuple(d.value for d in buffer.shape)


def _is_heap_workspace(func: PrimFunc, buffer, stack_limit: int) -> bool:
    shape = _static_shape(buffer)
    if shape is None or buffer.scope != "global" or \
            tensor_bytes(TensorStructInfo(shape, buffer.dtype)) <= stack_limit:
        return False
    body = func.body.block.body
    nests = body.seq if isinstance(body, SeqStmt) else (body,)
    return sum(any(b is buffer for b in free_buffers(nest)) for nest in nests) > 1


def _as_outputs(func: PrimFunc, workspaces: list) -> PrimFunc:
    root = func.body.block
    kept = tuple(b for b in root.alloc_buffers if all(b is not w for w in workspaces))
    body = func.body.replace(block=root.replace(alloc_buffers=kept))
    return func.replace(params=tuple(func.params) + tuple(workspaces), body=body)


def _pass_workspaces(func: Function, lifted: dict) -> Function:
    blocks = []
    for block in func.body.blocks:
        bindings = []
        for binding in block.bindings:
            call = dps_call(binding.value)
            if call is None or not isinstance(call.args[0], GlobalVar) or call.args[0] not in lifted:
                bindings.append(binding)
                continue
            outputs = list(call.sinfo_args)
            new_call = call_tir(call.args[0], call.args[1], outputs + lifted[call.args[0]])
            var = binding.var
            make_var = DataflowVar if isinstance(var, DataflowVar) else Var
            packed = make_var(f"{var.name_hint}_tuple", new_call.struct_info)
            bindings.append(VarBinding(packed, new_call))
            if len(outputs) == 1:
                bindings.append(VarBinding(var, TupleGetItem(packed, 0)))
                continue
            items = [make_var(f"{var.name_hint}_{k}", s) for k, s in enumerate(outputs)]
            bindings += [VarBinding(v, TupleGetItem(packed, k)) for k, v in enumerate(items)]
            bindings.append(VarBinding(var, Tuple(items)))
        blocks.append(type(block)(bindings))
    return func.replace(body=SeqExpr(blocks, func.body.body))


__all__ = ["lift_kernel_workspaces"]
