"""Questions a schedule (or a tuner) asks about a block before transforming it: which layout an
access pattern wants (``suggest_index_map``), which loops of a block line up with the loops of a
tensor intrinsic (``get_tensorize_loop_mapping``), which change of layout would make a block look
like an intrinsic (``get_auto_tensorize_mapping_info``), and whether a block writes a buffer of
its scope's caller (``is_output_block``). They only look: nothing here changes the schedule.

>>> @T.prim_func
... def mm(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
...        C: T.Buffer((64, 64), "float32")):
...     for i, j, k in T.grid(64, 64, 64):
...         with T.block("C"):
...             vi, vj, vk = T.axis.remap("SSR", [i, j, k])
...             with T.init():
...                 C[vi, vj] = T.float32(0)
...             C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
>>> @T.prim_func
... def mma4(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
...          C: T.Buffer((4, 4), "float32")):
...     for i, j, k in T.grid(4, 4, 4):
...         with T.block("update"):
...             vi, vj, vk = T.axis.remap("SSR", [i, j, k])
...             C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
>>> sch = tir.Schedule(mm)
>>> info = get_tensorize_loop_mapping(sch, sch.get_block("C"), mma4)
>>> [(sref.stmt.loop_var.name, info.desc_loop_indexer[loop]) for sref, loop in info.loop_map.items()]
[('k', 2), ('j', 1), ('i', 0)]
>>> is_output_block(sch, sch.get_block("C"))
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ...arith import simplify
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..index_map import IndexMap
from ..stmt_functor import uses_var
from .auto_tensorize import AutoMatcher
from .layout_suggest import suggest


def suggest_index_map(buffer, indices, loops, predicate=True) -> Optional[IndexMap]:
    """A layout for ``buffer`` under which the access ``buffer[indices]`` made inside ``loops``
    (For nodes, outer first) walks memory in loop order; None when no layout is suggested.

    The flattened index of the access must be a mixed-radix number whose digits are pieces of
    the loop variables (``i``, ``i // d``, ``i % m``, ``i // d % m``), each digit's weight the
    product of the sizes of the digits below it. The new layout holds those digits as its
    dimensions, ordered by loop (outer loop first) and, within a loop, from its high digits to
    its low ones. The map returned knows its inverse. Its outermost dimension takes whatever is
    left of the buffer, so it is a one-to-one relayout of the whole buffer even where the access
    covers only part of it (``predicate``, the access's condition, therefore needs no checking).
    Loops must start at 0 and, like the buffer's shape, have constant extents; a buffer with
    strides of its own (rows set apart) gets no suggestion.

    >>> i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    >>> loops = [tir.For(i, 0, 32, "serial", tir.Evaluate(0)), tir.For(j, 0, 64, "serial", tir.Evaluate(0))]
    >>> m = suggest_index_map(tir.decl_buffer((8, 256)), [i // 16 * 4 + j // 16, i % 16 * 16 + j % 16], loops)
    >>> m
    IndexMap(lambda i0, i1: (i0 // 4, i1 // 16, i0 % 4, i1 % 16))
    >>> m.inverse([8, 256])
    IndexMap(lambda i0, i1, i2, i3: (i0 * 4 + i2, i1 * 16 + i3))
    """
    return suggest(buffer, list(indices), list(loops), predicate)


# -- the description of an intrinsic -----------------------------------------------------------------
def _desc_parts(desc_func: PrimFunc) -> tuple:
    """(its block's BlockRealize, its loops outer first) of a description: loops around one block."""
    if not isinstance(desc_func, PrimFunc):
        raise TypeError(f"the description must be a PrimFunc, got {type(desc_func).__name__}")
    body = desc_func.body
    if isinstance(body, S.BlockRealize) and not body.block.iter_vars:
        body = body.block.body
    loops = []
    while isinstance(body, S.For):
        loops.append(body)
        body = body.body
    if not isinstance(body, S.BlockRealize):
        raise ValueError("the description of a tensor intrinsic must be a nest of loops around one "
                         f"block; found a {type(body).__name__} under its loops")
    if len(loops) != len(body.block.iter_vars):
        raise ValueError(f'the description\'s block "{body.block.name_hint}" has '
                         f"{len(body.block.iter_vars)} iterators but {len(loops)} loops around it")
    return body, loops


def _int(e) -> int | None:
    e = simplify(E.convert(e))
    return e.value if isinstance(e, E.IntImm) else None


def _loop_of(value, loops) -> Optional[int]:
    """The position of the loop whose variable ``value`` is, up to terms free of all loops."""
    for n, loop in enumerate(loops):
        if not uses_var(simplify(value - loop.loop_var), [lp.loop_var for lp in loops]):
            return n
    return None


@dataclass
class TensorizeInfo:
    """Which loop of a block stands for which loop of a tensor intrinsic's description.

    ``loop_map``: block loop sref -> description For; ``desc_loop_indexer``: description For ->
    its position (outer first); ``block_iter_paddings``: None, or per block iterator the size its
    domain must be padded to a multiple of (1 where it divides already)."""
    loop_map: dict = field(default_factory=dict)
    desc_loop_indexer: dict = field(default_factory=dict)
    block_iter_paddings: Optional[list] = None


def get_tensorize_loop_mapping(sch, block, desc_func: PrimFunc,
                               allow_padding: bool = False) -> Optional[TensorizeInfo]:
    """Pair the loops around ``block`` with the loops of the intrinsic description ``desc_func``;
    None when they do not pair up.

    The loops considered are those the block sits in directly (up to the first loop with other
    statements in its body); each must start at 0. The description's iterators are taken from
    the innermost: each is paired with the block's innermost not yet paired iterator of the same
    kind (spatial, reduction), and that iterator with the loop it is bound to (its binding is the
    loop variable plus terms free of loops), whatever the loop order. The loop's extent must be a
    multiple of the description loop's; with ``allow_padding`` (and trivial bindings) it need
    not, and ``block_iter_paddings`` says what each iterator must be padded to.
    Every description loop must be paired (the reference compiler may leave one out; a partial
    map is of no use to a tensorization, so None is returned instead)."""
    _, realize, index = sch._resolve_block(block, "get_tensorize_loop_mapping")
    desc_realize, desc_loops = _desc_parts(desc_func)
    loops = []
    for anc in reversed(index.path(realize)):
        if not isinstance(anc, S.For) or isinstance(anc.body, S.SeqStmt):
            break
        if _int(anc.min) != 0:
            return None
        loops.insert(0, anc)
    iter_types = [iv.iter_type for iv in realize.block.iter_vars]
    desc_types = [iv.iter_type for iv in desc_realize.block.iter_vars]
    if len(desc_types) > len(iter_types):
        return None
    state = sch.state
    info = TensorizeInfo()
    paired, paddings = set(), {}
    next_iter = len(iter_types) - 1
    for d in range(len(desc_types) - 1, -1, -1):
        at = _loop_of(desc_realize.iter_values[d], desc_loops)
        desc_extent = None if at is None else _int(desc_loops[at].extent)
        if desc_extent is None:
            return None
        n = next((k for k in range(next_iter, -1, -1) if iter_types[k] == desc_types[d]), None)
        if n is None:
            return None
        next_iter = n - 1
        value = realize.iter_values[n]
        loop_vars = [lp.loop_var for lp in loops]
        for loop in loops:
            if id(loop) in paired:
                continue
            rest = simplify(value - loop.loop_var)
            if uses_var(rest, loop_vars):
                continue
            if not (isinstance(rest, E.IntImm) and rest.value == 0):
                allow_padding = False
            extent = _int(loop.extent)
            if extent is None:
                return None
            if extent % desc_extent:
                paddings[n] = desc_extent
            paired.add(id(loop))
            info.loop_map[state.get_sref(loop)] = desc_loops[at]
            break
        else:
            return None
    if paddings:
        if not allow_padding:
            return None
        info.block_iter_paddings = [E.const(paddings.get(k, 1), iv.var.dtype)
                                    for k, iv in enumerate(realize.block.iter_vars)]
    info.desc_loop_indexer = {loop: k for k, loop in enumerate(desc_loops)}
    return info


@dataclass
class AutoTensorizeMappingInfo:
    """How a block could become an intrinsic's computation after a change of layout.

    ``mappings``: index maps from the block's iterators to the description's (one here);
    ``lhs_buffer_map``: block buffer -> description buffer; ``rhs_buffer_indices``: description
    buffer -> the indices it is accessed at; ``lhs_iters`` / ``rhs_iters``: the IterVars of the
    block and of the description."""
    mappings: list
    lhs_buffer_map: dict
    rhs_buffer_indices: dict
    lhs_iters: list
    rhs_iters: list


def get_auto_tensorize_mapping_info(sch, block, desc_func: PrimFunc) -> Optional[AutoTensorizeMappingInfo]:
    """Whether ``block`` computes what ``desc_func`` describes up to the layout of its iteration
    space, and if so the index map that regroups its iterators into the description's: None
    otherwise.

    The block's body must match the description's expression by expression (init aside), its
    buffers paired one to one with the same dtypes, each buffer always accessed at the same
    indices. A block iterator goes with the description iterator of the same kind that indexes
    exactly the same (paired) buffers; iterators going with one description iterator are fused in
    block order; iterators going with none stay first. A returned mapping is a proposal: the
    block still has to be relaid out and matched (``sch.tensorize``) to use the intrinsic.

    >>> @T.prim_func
    ... def bmm(X: T.Buffer((2, 32, 32), "float32"), Y: T.Buffer((2, 32, 32), "float32"),
    ...         Z: T.Buffer((2, 32, 32), "float32")):
    ...     for b, i, j, k in T.grid(2, 32, 32, 32):
    ...         with T.block("Z"):
    ...             vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
    ...             with T.init():
    ...                 Z[vb, vi, vj] = T.float32(0)
    ...             Z[vb, vi, vj] = Z[vb, vi, vj] + X[vb, vi, vk] * Y[vb, vk, vj]
    >>> @T.prim_func
    ... def mma4(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
    ...          C: T.Buffer((4, 4), "float32")):
    ...     for i, j, k in T.grid(4, 4, 4):
    ...         with T.block("update"):
    ...             vi, vj, vk = T.axis.remap("SSR", [i, j, k])
    ...             C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    >>> sch = tir.Schedule(bmm)
    >>> info = get_auto_tensorize_mapping_info(sch, sch.get_block("Z"), mma4)
    >>> info.mappings
    [IndexMap(lambda vb, vi, vj, vk: (vb, vi, vj, vk))]
    """
    _, realize, _ = sch._resolve_block(block, "get_auto_tensorize_mapping_info")
    desc_realize, _ = _desc_parts(desc_func)
    matcher = AutoMatcher()
    if not matcher.block(realize.block, desc_realize.block):
        return None
    mapping = matcher.propose()
    if mapping is None:
        return None
    return AutoTensorizeMappingInfo(
        [mapping], {lbuf: rbuf for rbuf, lbuf in matcher.pairs.values()},
        {rbuf: list(matcher.rhs_indices.get(rid, [])) for rid, (rbuf, _) in matcher.pairs.items()},
        list(matcher.lhs_iters), list(matcher.rhs_iters))


# -- blocks of a schedule -----------------------------------------------------------------------------
def has_block(sch, block_name: str) -> bool:
    """Whether the schedule's module has a block called ``block_name`` (in any function)."""
    for gv, func in sch.mod.functions.items():
        if isinstance(func, PrimFunc) and block_name in sch._index(gv.name_hint).blocks:
            return True
    return False


def is_output_block(sch, block) -> bool:
    """Whether ``block`` writes a buffer that its scope block does not allocate (a parameter of
    the function, or a buffer of an outer scope): what it writes is seen outside its scope."""
    _, realize, index = sch._resolve_block(block, "is_output_block")
    scope = index.parent_block(realize)
    allocated = {id(b) for b in scope.block.alloc_buffers} if scope is not None else set()
    return any(id(w.buffer) not in allocated for w in realize.block.writes)


__all__ = ["AutoTensorizeMappingInfo", "TensorizeInfo", "get_auto_tensorize_mapping_info",
           "get_tensorize_loop_mapping", "has_block", "is_output_block", "suggest_index_map"]
