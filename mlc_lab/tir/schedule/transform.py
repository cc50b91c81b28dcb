"""Schedule transformations built from primitives: tiling a block's loops into the shape of a tensor
intrinsic, ready for blockize/tensorize."""
from __future__ import annotations

from .analysis import get_tensorize_loop_mapping
from .rv import LoopRV
from .tensor_intrin import TensorIntrin


def tile_with_tensor_intrin(sch, block, intrin_name: str, allow_padding: bool = False) -> LoopRV | None:
    """Split the loops of ``block`` that pair with the loops of the intrinsic ``intrin_name``
    (see analysis.get_tensorize_loop_mapping) by the intrinsic's extents and move the inner parts
    innermost, in the intrinsic's loop order; returns the outermost of them (the loop to
    tensorize at), or None when the loops do not pair. With ``allow_padding`` a block whose
    extents are not multiples is padded first (pad_einsum) and its padding stages inlined.

    >>> from mlc_lab.tir.tensor_intrin.x86 import VNNI_DOT_16x4_INTRIN
    >>> @T.prim_func
    ... def dense(A: T.Buffer((32, 64), "uint8"), B: T.Buffer((32, 64), "int8"),
    ...           C: T.Buffer((32, 32), "int32")):
    ...     for i, j, k in T.grid(32, 32, 64):
    ...         with T.block("C"):
    ...             vi, vj, vk = T.axis.remap("SSR", [i, j, k])
    ...             with T.init():
    ...                 C[vi, vj] = 0
    ...             C[vi, vj] = C[vi, vj] + T.Cast("int32", A[vi, vk]) * T.Cast("int32", B[vj, vk])
    >>> sch = tir.Schedule(dense)
    >>> loop = tile_with_tensor_intrin(sch, sch.get_block("C"), VNNI_DOT_16x4_INTRIN)
    >>> [int(sch.get(lp).extent) for lp in sch.get_loops(sch.get_block("C"))]
    [32, 2, 16, 16, 4]
    >>> sch.get(loop).extent   # tensorize here: 16 output lanes, 4 products each
    16
    """
    intrin = TensorIntrin.get(intrin_name)
    info = get_tensorize_loop_mapping(sch, block, intrin.desc, allow_padding)
    if info is None:
        return None
    if info.block_iter_paddings is not None:
        sch.pad_einsum(block, info.block_iter_paddings)
        for producer in sch.get_producers(block):
            for original in sch.get_producers(producer):   # the padded copy takes its place
                sch.compute_inline(original)
        for consumer in sch.get_consumers(block):
            sch.compute_inline(consumer)
    by_stmt = {id(sch.get(lp)): lp for lp in sch.get_loops(block)}
    pairs = [(by_stmt[id(sref.stmt)], desc_loop) for sref, desc_loop in info.loop_map.items()]
    inner_of_desc = [None] * len(pairs)
    for loop, desc_loop in pairs:
        _, inner = sch.split(loop, [None, int(desc_loop.extent)])
        inner_of_desc[info.desc_loop_indexer[desc_loop]] = inner
    inner_ids = {id(sch.get(lp)) for lp in inner_of_desc}   # the loops as the last split left them
    order, met = [], False
    for lp in sch.get_loops(block):
        if id(sch.get(lp)) in inner_ids:
            met = True
        elif met:
            order.append(lp)
    sch.reorder(*(order + inner_of_desc))
    return inner_of_desc[0]
