"""create_prim_func: a graph of te Tensors -> one PrimFunc with a block per compute.

Each compute becomes a serial loop nest (spatial axes, then reduce axes) around one block whose
iterators are bound one-to-one to the loops; a reduction block gets an ``init`` that stores the
reduction's identity. Computes not passed in as arguments become buffers allocated by the root block.
"""
from __future__ import annotations

from typing import Sequence

from ..tir.expr import BufferLoad, IntImm, Max, Min, Var
from ..tir.function import PrimFunc
from ..tir.stmt_functor import substitute
from ..tir.stmt import Block, BlockRealize, BufferStore, For, IterVar, seq
from .tensor import ComputeOp, IterAxis, PlaceholderOp, Reduce, Tensor, reduce_identity


def create_prim_func(args: Sequence, name: str = "main") -> PrimFunc:
    """The PrimFunc computing the tensors in ``args`` from the placeholders in ``args``.

    ``args`` lists Tensors (inputs and outputs, in parameter order) and scalar Vars; every
    placeholder an output depends on must be among them. Intermediate computes not listed become
    ``alloc_buffers`` of the root block.
    """
    from ..tir.analysis import block_access_regions

    params = []
    for a in args:
        if isinstance(a, Tensor):
            params.append(a.buffer)
        elif isinstance(a, Var):
            params.append(a)
        else:
            raise TypeError(f"create_prim_func: arguments must be te Tensors or Vars, got {a!r}")
    listed = {id(a) for a in args}
    order = _topological_order([a for a in args if isinstance(a, Tensor)])
    for tensor in order:
        if isinstance(tensor.op, PlaceholderOp) and id(tensor) not in listed:
            users = [t.name for t in order if any(i is tensor for i in t.op.input_tensors)]
            raise ValueError(f"create_prim_func: placeholder {tensor.name} is read by "
                             f"{', '.join(users)} but is not among the arguments")
    computes = [t for t in order if isinstance(t.op, ComputeOp)]
    names: dict[str, int] = {}
    nests = [_loop_nest(t, block_access_regions, _unique(t.name, names)) for t in computes]
    allocs = tuple(t.buffer for t in computes if id(t) not in listed)
    root = Block("root", (), (), (), seq(*nests), alloc_buffers=allocs)
    body = BlockRealize((), IntImm("bool", 1), root)
    attrs = (("global_symbol", name), ("tir.noalias", True))
    return PrimFunc(tuple(params), body, attrs)


def _unique(name: str, taken: dict) -> str:
    """Block names must be unique in a function (schedules find blocks by name): a second stage
    named like an earlier one becomes ``name_1``, as in TVM."""
    count = taken.get(name, 0)
    taken[name] = count + 1
    return name if count == 0 else f"{name}_{count}"


def _topological_order(outputs: list[Tensor]) -> list[Tensor]:
    """Every tensor the outputs depend on, producers before consumers."""
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(tensor: Tensor) -> None:
        if id(tensor) in seen:
            return
        seen.add(id(tensor))
        for t in tensor.op.input_tensors:
            visit(t)
        order.append(tensor)

    for tensor in outputs:
        visit(tensor)
    return order


def _loop_nest(tensor: Tensor, block_access_regions, block_name: str) -> For:
    op: ComputeOp = tensor.op
    axes: tuple[IterAxis, ...] = op.axis + op.reduce_axis
    loop_vars = [Var(a.name, a.dtype) for a in axes]
    iter_vars = [IterVar(Var(f"v_{a.name}", a.dtype), a.dom, a.iter_type) for a in axes]
    to_block = {a: iv.var for a, iv in zip(axes, iter_vars)}
    out_indices = tuple(iv.var for iv in iter_vars[:len(op.axis)])

    if isinstance(op.body, Reduce):
        source = substitute(op.body.source, to_block)
        current = BufferLoad(tensor.buffer, out_indices)
        update = {"sum": lambda: current + source, "max": lambda: Max(current, source),
                  "min": lambda: Min(current, source)}[op.body.combiner]()
        body = BufferStore(tensor.buffer, update, out_indices)
        init = BufferStore(tensor.buffer, reduce_identity(op.body.combiner, tensor.dtype), out_indices)
    else:
        body = BufferStore(tensor.buffer, substitute(op.body, to_block), out_indices)
        init = None
    block = Block(block_name, tuple(iter_vars), (), (), body, init)
    reads, writes = block_access_regions(block)
    block = block.replace(reads=reads, writes=writes)
    stmt = BlockRealize(tuple(loop_vars), IntImm("bool", 1), block)
    for loop_var, axis in reversed(list(zip(loop_vars, axes))):
        stmt = For(loop_var, axis.dom.min, axis.dom.extent, "serial", stmt)
    return stmt
