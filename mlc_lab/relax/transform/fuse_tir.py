# FuseTIR: turn every "Primitive" relax function (made by FuseOps) into one PrimFunc, its elementwise
# intermediates inlined, called with R.call_tir. Expects R.call_tir bindings on static or shape-var shapes.
"""``relax.transform.FuseTIR()``: make each fused group one kernel.

The PrimFuncs a primitive function calls are concatenated in binding order inside one root
block: their parameters are replaced by the buffers of the values passed (the primitive
function's parameters, or the outputs of earlier calls), intermediate outputs become
``alloc_buffers`` of the root block, and the returned values become the output parameters.
Loop variables, iterators and allocations are copied fresh for each call (a PrimFunc may be
called twice); repeated block names get a suffix (``T_add``, ``T_add_1``).

Then every intermediate that can be computed where it is used is inlined with the schedule
primitives: ``compute_inline`` folds a producer that is one plain store (an elementwise,
broadcast or injective op) into the blocks that read it, and ``reverse_compute_inline`` folds
an elementwise consumer into such a producer. A primitive that refuses (a reduction such as a
matmul cannot be folded into what reads it) leaves that intermediate in place; its legality
checks are what keep the rewrite correct. So ``matmul -> add -> relu`` becomes the matmul and
one block computing ``max(Y + b, 0)`` into the output, and an elementwise chain becomes one
block that allocates nothing. A producer whose value is conditional (padding) is not inlined:
a convolution reads each padded element many times, and would test the condition in its
innermost loop (TVM's AutoInline keeps it too).

Before::

    gv = cls.fused_matmul_add_relu(x, w, b)      # a relax function with "Primitive": 1

After::

    gv = R.call_tir(cls.fused_matmul_add_relu, (x, w, b), out_sinfo=R.Tensor((1, 128), "float32"))

The primitive relax functions are removed, and so are the PrimFuncs only they called.
"""
from __future__ import annotations

from ...ir.module import GlobalVar, IRModule
from ...ir.transform import Pass, PassInfo
from ...tir.buffer import Buffer, decl_buffer
from ...tir.expr import IntImm, Var as TirVar
from ...tir.function import PrimFunc
from ...tir.functor import StmtExprMutator, StmtExprVisitor
from ...tir.schedule import Schedule
from ...tir.schedule.policy.inline import InlinePolicy
from ...tir.stmt import Block, BlockRealize, For, IterVar, seq
from ...tir.stmt_functor import free_vars
from ..analysis import References, is_call_tir
from ..expr import Call, Function, ShapeExpr, Tuple, TupleGetItem, Var
from ..functor import ExprMutator
from ..op.call import call_tir
from ..struct_info import TensorStructInfo, TupleStructInfo


class FuseTIRError(ValueError):
    """A primitive function cannot be fused into one PrimFunc."""


class _Defined(StmtExprVisitor):
    """The variables (loops, iterators) and buffers (allocations) a PrimFunc body defines."""

    def __init__(self):
        self.vars, self.buffers = [], []

    def visit_For(self, loop: For):
        self.vars.append(loop.loop_var)
        self.generic_visit(loop)

    def visit_IterVar(self, iv: IterVar):
        self.vars.append(iv.var)
        self.generic_visit(iv)

    def visit_Block(self, block: Block):
        self.buffers.extend(block.alloc_buffers)
        self.generic_visit(block)


class _Rewrite(StmtExprMutator):
    """Substitute variables and buffers; rename blocks to names not yet taken."""

    def __init__(self, var_map: dict, buffer_map: dict, block_names: set):
        super().__init__()
        self.var_map, self.buffer_map, self.block_names = var_map, buffer_map, block_names

    def visit_Var(self, var):
        return self.var_map.get(var, var)

    def visit_Buffer(self, buffer):
        if buffer in self.buffer_map:
            return self.buffer_map[buffer]
        return super().visit_Buffer(buffer)

    def visit_Block(self, block: Block):
        new = self.generic_visit(block)
        name, k = block.name_hint, 0
        while name in self.block_names:
            k += 1
            name = f"{block.name_hint}_{k}"
        self.block_names.add(name)
        return new if name == block.name_hint else new.replace(name_hint=name)


def _buffer_for(var: Var) -> Buffer:
    sinfo = var.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise FuseTIRError(f"FuseTIR: {var.name_hint} must be a tensor of known shape, got "
                           f"{sinfo.script() if sinfo is not None else 'no struct info'}")
    return decl_buffer(sinfo.shape, sinfo.dtype, var.name_hint)


def _root_parts(func: PrimFunc):
    body = func.body
    if isinstance(body, BlockRealize) and body.block.name_hint == "root" and not body.block.iter_vars:
        return body.block.body, body.block.alloc_buffers
    return body, ()


def fuse_primitive(mod: IRModule, func: Function, name: str) -> PrimFunc:
    """One PrimFunc computing the primitive relax function ``func``."""
    buffers: dict = {p: _buffer_for(p) for p in func.params}
    params = [buffers[p] for p in func.params]
    allocs, stmts, block_names = [], [], set()
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, TupleGetItem) and value.tuple_value in buffers:
                buffers[binding.var] = buffers[value.tuple_value][value.index]
                continue
            if not is_call_tir(value):
                raise FuseTIRError(f"FuseTIR: {name} binds {binding.var.name_hint} to something other "
                                   f"than R.call_tir: {value.script()}")
            prim = mod[value.args[0]]
            args = value.args[1].elements
            outs = value.sinfo_args
            out_buffers = [decl_buffer(s.shape, s.dtype, f"{binding.var.name_hint}_{k}" if len(outs) > 1
                                       else binding.var.name_hint) for k, s in enumerate(outs)]
            allocs.extend(out_buffers)
            buffers[binding.var] = out_buffers[0] if len(outs) == 1 else tuple(out_buffers)
            actual = [buffers[a] if a in buffers else _missing(name, a) for a in args] + out_buffers
            tir_vars = value.args[2].values if len(value.args) > 2 else ()
            stmt, inner_allocs = _inline(prim, value.args[0].name_hint, actual, tir_vars,
                                         block_names)
            allocs.extend(inner_allocs)
            stmts.append(stmt)
    result = func.body.body
    results = result.elements if isinstance(result, Tuple) else (result,)
    outputs = []
    for r in results:
        out = buffers.get(r)
        if not isinstance(out, Buffer) or out in params:
            raise FuseTIRError(f"FuseTIR: {name} must return values its calls compute, got {r.script()}")
        outputs.append(out)
    allocs = [b for b in allocs if all(b is not o for o in outputs)]
    root = Block("root", (), (), (), seq(*stmts), alloc_buffers=tuple(allocs))
    attrs = (("global_symbol", name), ("tir.noalias", True))
    body = BlockRealize((), IntImm("bool", 1), root)
    return inline_intermediates(PrimFunc(tuple(params + outputs + _free_sizes(body, params + outputs)),
                                         body, attrs))


def _free_sizes(body, buffers) -> list:
    """The symbolic sizes ``body`` uses that no buffer's shape gives (``m - 1`` of an
    ``R.arange`` when only a shape argument holds m): the fused kernel takes them as scalars."""
    known = {id(v) for b in buffers for dim in b.shape for v in free_vars(dim)}
    return [v for v in free_vars(body, buffer_shapes=True) if id(v) not in known]


def inline_intermediates(func: PrimFunc) -> PrimFunc:
    """``func`` with each intermediate (an ``alloc_buffer`` of the root block) that
    ``compute_inline`` or ``reverse_compute_inline`` accepts folded away, until none is left
    (``InlinePolicy.FUSE_TIR``)."""
    sch = Schedule(func)
    InlinePolicy.FUSE_TIR.inline_all(sch, "main")
    return sch.mod["main"]


def _missing(name: str, arg):
    raise FuseTIRError(f"FuseTIR: {name} passes {arg.script()} to R.call_tir; only parameters and "
                       "values computed in the function can be fused")


def _inline(prim: PrimFunc, prim_name: str, actual: list, tir_vars, block_names: set):
    """The body of ``prim`` with its buffer parameters replaced by ``actual`` and its scalar
    parameters by ``tir_vars`` (the call's symbolic values, such as the n of ``R.full((n, n))``),
    with fresh copies of its loop variables, iterators and allocations; and its allocations."""
    buffer_params = prim.buffer_params
    if len(buffer_params) != len(actual) or len(prim.scalar_params) != len(tir_vars):
        raise FuseTIRError(f"FuseTIR: {prim_name} takes {len(buffer_params)} buffer(s) and "
                           f"{len(prim.scalar_params)} scalar(s) but the call passes {len(actual)} "
                           f"tensor(s) and {len(tir_vars)} symbolic value(s)")
    var_map: dict = dict(zip(prim.scalar_params, tir_vars))
    for param, arg in zip(buffer_params, actual):
        for dim, given in zip(param.shape, arg.shape):
            if isinstance(dim, TirVar) and dim not in var_map:
                var_map[dim] = given
    body, allocs = _root_parts(prim)
    defined = _Defined()
    defined.visit(body)
    for v in defined.vars:
        var_map.setdefault(v, TirVar(v.name, v.dtype))
    buffer_map = dict(zip(buffer_params, actual))
    rewrite = _Rewrite(var_map, buffer_map, block_names)
    for b in list(allocs) + defined.buffers:
        buffer_map[b] = rewrite.generic_visit(b).replace() if b not in buffer_map else buffer_map[b]
    return rewrite.visit(body), [buffer_map[b] for b in allocs]


class _CallRewriter(ExprMutator):
    def __init__(self, mod, fused: dict):
        super().__init__(mod)
        self.fused = fused

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if isinstance(call.op, GlobalVar) and call.op in self.fused:
            sinfo = call.struct_info
            out = list(sinfo.elements) if isinstance(sinfo, TupleStructInfo) else sinfo
            scalars = self.builder_.get()[call.op].scalar_params
            return call_tir(self.fused[call.op], list(call.args), out,
                            tir_vars=ShapeExpr(scalars) if scalars else None)
        return call


class FuseTIR(Pass):
    def __init__(self):
        self.info = PassInfo(0, "FuseTIR")

    def transform_module(self, mod, ctx):
        primitive = {gv: f for gv, f in mod.functions.items()
                     if isinstance(f, Function) and "Primitive" in f.attrs}
        if not primitive:
            return mod
        before = _referenced(mod, [f for f in primitive.values()])
        rewriter = _CallRewriter(mod, {})
        for gv, func in primitive.items():
            rewriter.builder_.update_func(gv, fuse_primitive(mod, func, gv.name_hint))
            rewriter.fused[gv] = gv
        for gv, func in mod.functions.items():
            if isinstance(func, Function) and gv not in primitive:
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        out = rewriter.builder_.get()
        still_used = _referenced(out, [f for g, f in out.functions.items() if isinstance(f, Function)])
        for gv in before - still_used:
            if gv in out and gv not in primitive and isinstance(out[gv], PrimFunc):
                out.remove(gv)
        return out


def _referenced(mod: IRModule, funcs: list) -> set:
    return set(References(*funcs).global_vars)
