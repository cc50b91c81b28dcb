"""Packing an operand into panels, for both the default schedules and the tuner.

A matmul tile reads B[k, j] along its columns j, one row of B per reduction step k. In B's own
layout those rows lie a whole row of B apart (4 KB for a 1024-wide float32 matrix: every step a
new page and the same cache set), so a tile's loads thrash the caches. Copied into panels
``P[j // w, k, j % w]`` (``w`` the tile's columns), each step reads the next ``w`` floats of one
contiguous panel. The copy costs one pass over the operand per call.

    pack_panels(sch, block, read_index, dim, width, vec)   # the copy, scheduled; returns its block

``DefaultSchedule`` packs where it measured that the copy pays; the tuner's MultiLevelTiling
samples whether to (``ANN_PACK`` on the block) and ``RewritePackedOperands`` packs after the
tile sizes are final, so a mutated tile size always gets a panel of its own width.
"""
from __future__ import annotations

from ....arith import linear_form
from ...stmt_functor import uses_var
from ..primitives.scope import const_int
from .blocks import ANN_PARALLEL, ANN_UNROLL, ANN_VECTORIZE, iter_values

ANN_PACK = "meta_schedule.pack_panels"
SYMBOLIC_PAD = 16     # a tile pads a symbolic output size to a multiple of this ...
SYMBOLIC_K_PAD = 4    # ... and a symbolic reduction size to a multiple of this
MAX_LANES = 16   # float32 lanes of the widest vector register the tuner assumes


def strides(region, var) -> list | None:
    """Per dimension of an accessed region, the coefficient of ``var`` in its index (0 where
    unused); None when an index is not affine in it (a division, a cast, a load)."""
    out = []
    for r in region.region:
        terms = linear_form(r.min).terms.values() if const_int(r.extent) == 1 else None
        if terms is None or any(uses_var(atom, var) for atom, _ in terms if atom is not var):
            return None
        out.append(sum(c for atom, c in terms if atom is var))
    return out


def store_axis(block) -> int | None:
    """The position of the spatial iterator that is the last index of what the block writes."""
    last = block.writes[0].region[-1].min if block.writes[0].region else None
    return next((n for n, iv in enumerate(block.iter_vars)
                 if last is iv.var and iv.iter_type == "spatial"), None)


def annotate(sch, block_rv, vector: int = 0, parallel: int = 0, unroll: int = 0) -> None:
    """Leave the annotations ``RewriteParallelVectorizeUnroll`` turns into loop kinds."""
    for key, value in ((ANN_VECTORIZE, vector), (ANN_PARALLEL, parallel), (ANN_UNROLL, unroll)):
        if value > 1:
            sch.annotate(block_rv, key, value)


def split_last(sch, loops: list, extent, width: int) -> list:
    """The loops with the last one split so that its inner piece has ``width`` iterations
    (``extent`` None: a symbolic extent, split with a guard on the last piece)."""
    if 1 < width and (extent is None or width < extent):
        return loops[:-1] + list(sch.split(loops[-1], [None, width]))
    return loops


def pad_symbolic(sch, block_rv) -> None:
    """Pad the block's symbolic extents (``pad_einsum``), spatial ones to multiples of
    SYMBOLIC_PAD and reduction ones to multiples of SYMBOLIC_K_PAD, so that
    tiles of those sizes divide them and need no guard (a tile over a prompt of n tokens computes
    at most 15 rows too many). Where pad_einsum refuses the block, its ScheduleError is raised
    with nothing changed."""
    factors = [1 if const_int(iv.dom.extent) is not None
               else SYMBOLIC_PAD if iv.iter_type == "spatial" else SYMBOLIC_K_PAD
               for iv in sch.get(block_rv).iter_vars]
    if factors != [1] * len(factors):
        sch.pad_einsum(block_rv, factors)


def panel_operand(block, read_index: int, col_var, k_var) -> int | None:
    """The dimension of read ``read_index`` that the columns ``col_var`` walk element by element
    when the operand can be packed: read at single elements, ``col_var`` only in that dimension
    (not mixed with a reduction iterator, as a convolution's window is), the reduction
    iterator ``k_var`` in another. None otherwise."""
    region = block.reads[read_index]
    dims, k_dims = strides(region, col_var), strides(region, k_var)
    if dims is None or k_dims is None or sorted(dims) != [0] * (len(dims) - 1) + [1]:
        return None
    at = dims.index(1)
    if k_dims[at] or not any(k_dims) or None in [const_int(s) for s in region.buffer.shape]:
        return None
    return at


def pack_panels(sch, block_rv, read_index: int, dim: int, width: int, vec: int):
    """Copy read ``read_index`` of the block into panels ``[d // width, ..., d % width]`` (``d``
    its dimension ``dim``), at the root, the copy's last loop ``vec`` lanes wide. Returns the
    copy's block."""
    region = sch.get(block_rv).reads[read_index]
    names = [f"d{n}" for n in range(len(region.region))]
    panel = [f"d{dim} // {width}", *[d for n, d in enumerate(names) if n != dim], f"d{dim} % {width}"]
    copy = sch.cache_read(block_rv, read_index, "global")
    sch.transform_layout(copy, ("write", 0), f"lambda {', '.join(names)}: ({', '.join(panel)})")
    loops = sch.get_loops(copy)
    outer, within = sch.split(loops[dim], [None, width])
    sch.reorder(outer, *[lp for n, lp in enumerate(loops) if n != dim], within)
    split_last(sch, [within], width, vec)
    annotate(sch, copy, vector=vec, unroll=width // vec)
    return copy


def packable(block) -> int | None:
    """The read of ``block`` a panel copy could serve (see ``panel_operand``), or None."""
    col = store_axis(block)
    reduce_at = [iv.var for iv in block.iter_vars if iv.iter_type != "spatial"]
    if col is None or len(reduce_at) != 1:
        return None
    return next((n for n in range(len(block.reads))
                 if panel_operand(block, n, block.iter_vars[col].var, reduce_at[0]) is not None), None)


class RewritePackedOperands:
    """Pack, into panels as wide as the tile's columns, the operand of every block the tuner
    marked with ``ANN_PACK`` (a sampled 0 or 1) that ``packable`` finds: the columns are the iterator of the output's last index, the
    tile's columns the product of the column loops inside the outermost reduction loop. A block
    with nothing to pack is left as it is."""

    def apply(self, sch) -> bool:
        from .postproc import blocks, prim_func_names
        for func_name in prim_func_names(sch.mod):
            for block in blocks(sch, func_name):
                ann = dict(block.annotations)
                if ANN_PACK not in ann:
                    continue
                block_rv = sch.get_block(block.name_hint, func_name)
                sch.unannotate(block_rv, ANN_PACK)
                if int(ann[ANN_PACK]):
                    self._pack(sch, block_rv, sch.get(block_rv))
        return True

    @staticmethod
    def _pack(sch, block_rv, block) -> None:
        col = store_axis(block)
        reduce_at = [n for n, iv in enumerate(block.iter_vars) if iv.iter_type != "spatial"]
        if col is None or len(reduce_at) != 1:
            return
        col_var, k_var = block.iter_vars[col].var, block.iter_vars[reduce_at[0]].var
        values = iter_values(sch, block_rv)
        width, inside = 1, False
        for loop in sch.get_loops(block_rv):
            node = sch.get(loop)
            inside = inside or uses_var(values[reduce_at[0]], node.loop_var)
            if inside and uses_var(values[col], node.loop_var):
                extent = const_int(node.extent)
                if extent is None:
                    return
                width *= extent
        extent = const_int(block.iter_vars[col].dom.extent)
        if width < 2 or extent is None or extent % width:
            return
        read_index = packable(block)
        if read_index is not None:
            vec = next(v for v in (MAX_LANES, 8, 4, 2, 1) if width % v == 0)
            pack_panels(sch, block_rv, read_index, panel_operand(block, read_index, col_var, k_var),
                        width, vec)
