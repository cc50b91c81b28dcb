# DefaultSchedule's rules, one per kind of block of a kernel (a PrimFunc "main" in a tir.Schedule).
# They split, reorder, cache and annotate; the shared postprocessors apply the annotations.
"""Rules of ``relax.transform.DefaultSchedule``, one per kind of block:

``tile_reduction``    a reduction with data reuse (matmul, dense, batch matmul, conv2d): a
                      register tile of rows x cols outputs accumulated in a "local" cache over the
                      whole reduction, its columns one or two vectors wide; operands strided along
                      the columns packed into panels; the elementwise consumer moved into the
                      tile; the tile loops fused (and parallel on big kernels);
``reduce``            a reduction without reuse (sum, max, softmax parts, pooling): neighbouring
                      outputs as vector lanes, or ``rfactor`` into vector partial sums;
``vectorize_spatial`` an elementwise, broadcast or injective block: its innermost loop vectorized.

The rules split, reorder, fuse, cache and annotate; the postprocessors the tuner uses too
(``tir.schedule.policy.postproc``) then apply the annotations (vectorize, parallel, unroll) and
decompose the reductions, as for a tuned schedule. A rule that does not fit a block raises
``Unschedulable`` before changing anything; a primitive that refuses raises its ScheduleError.
"""
from __future__ import annotations

from math import prod

from ...arith import is_multiple_of, linear_form
from ...tir.expr import Cast, Var
from ...tir.schedule import ScheduleError
from ...tir.schedule.policy.blocks import (is_spatial, iter_values, loops_match_iters,
                                           writes_param)
from ...tir.schedule.policy.inline import InlinePolicy
from ...tir.schedule.policy.pack import (annotate, pack_panels, pad_symbolic, split_last,
                                         store_axis, strides)
from ...tir.schedule.primitives.scope import const_int
from ...tir.stmt_functor import loads_in, uses_var

MAX_ROWS = 8               # rows of a register tile: 8 x 2 vectors = 16 of the 32 AVX-512 registers
K_UNROLL = 4               # reduction steps per unrolled body of a register tile
UNROLL_STEPS = 64          # innermost iterations unrolled: the tile and its reduction steps
PACK_MIN_STRIDE = 1024     # pack an operand whose reduction steps lie this many elements apart
CHAINS = 8                 # independent accumulators that hide a multiply-add's latency
SPLIT_K_MIN = 64           # reduction steps worth splitting into interleaved partial sums
ANY_EXTENT = 1 << 30       # a parallel width that takes a loop of symbolic extent too


class Unschedulable(Exception):
    """A rule does not fit the block; the message says why."""


# -- sizes and structure ------------------------------------------------------------------

def largest_divisor(n: int, at_most: int, power_of_two: bool = False) -> int:
    """The largest divisor of ``n`` that is at most ``at_most`` (a power of two if asked)."""
    for d in range(min(n, at_most), 0, -1):
        if n % d == 0 and (not power_of_two or d & (d - 1) == 0):
            return d
    return 1


def vector_width(extent: int, lanes: int) -> int:
    """Lanes of the vector along a loop: the largest power of two up to ``lanes`` dividing the
    extent; else the largest divisor from 5 up to ``lanes`` (26 -> 13: one register, LLVM masks
    the rest); else an extent of at most two registers taken whole (an odd 29), as one vector
    that LLVM splits. A vector wider than a register and of odd width costs LLVM many shuffles
    when it is carried around a loop, so a divisor that fits one register comes first."""
    width = largest_divisor(extent, lanes, power_of_two=True)
    if width >= 4:
        return width
    odd = largest_divisor(extent, lanes)
    if odd > 4:
        return odd
    return extent if extent <= 2 * lanes else width


def matching_loops(sch, block_rv, symbolic: bool = False) -> tuple[list, list]:
    """The block's loops, one per iterator in order (as legalization writes them), and their
    constant extents; with ``symbolic``, a symbolic extent that is provably a multiple of a
    power of two d (at most 64) is given as a stand-in d * 67, a number larger than any tile
    whose divisors up to 64 are those of d (so the rules split it only by what divides it), and
    None if it has no such d."""
    loops = loops_match_iters(sch, block_rv)
    if loops is None:
        raise Unschedulable(f"the loops of block {block_rv.name} are already transformed")
    extents = [const_int(sch.get(loop).extent) for loop in loops]
    if None in extents and not symbolic:
        raise Unschedulable(f"block {block_rv.name} has a symbolic extent")
    return loops, [e if e is not None else _divisor(sch.get(loop).extent)
                   for loop, e in zip(loops, extents)]


def _divisor(extent) -> int | None:
    d = next((d for d in (64, 32, 16, 8, 4, 2) if is_multiple_of(extent, d)), None)
    return None if d is None else d * 67   # 67: a prime beyond every tile size


def work(extents) -> int:
    """The iterations of a nest: their product, or ANY_EXTENT when an extent is symbolic."""
    return ANY_EXTENT if any(not isinstance(e, int) for e in extents) else prod(extents)


def pad_to_tiles(sch, block_rv) -> None:
    """``policy.pack.pad_symbolic``, then the padded result's copy back inlined into the block
    reading it, when there is one."""
    try:
        pad_symbolic(sch, block_rv)
    except ScheduleError as err:
        raise Unschedulable(f"block {block_rv.name} has a symbolic size that pad_einsum cannot "
                            f"pad: {str(err).splitlines()[0]}") from err
    for copy in sch.get_consumers(block_rv):
        try:
            sch.compute_inline(copy)
        except ScheduleError:
            pass


def contiguous(region, var) -> bool:
    """Consecutive values of ``var`` touch neighbouring elements (or the same one)."""
    found = strides(region, var)
    return found is not None and (not found or not any(found[:-1]) and found[-1] in (0, 1))


def operands(block) -> list:
    """The regions the block reads, except the one it accumulates into."""
    return [r for r in block.reads if all(r.buffer is not w.buffer for w in block.writes)]


def check_direct_loads(block) -> None:
    """An index read from memory (a gather by index) gives no vector pattern."""
    for load in loads_in(block.body):
        if any(loads_in(index) for index in load.indices):
            raise Unschedulable(f"block {block.name_hint} loads {load.buffer.name} at an index "
                                "read from memory")


# -- the rules ----------------------------------------------------------------------------

def inline_elementwise(sch) -> None:
    """Inline each spatial block that does not write an output into its one consumer, when that
    consumer is spatial too (a bias add into the ReLU after it): ``InlinePolicy.DEFAULT_SCHEDULE``.
    Unlike the tuner's AutoInline, never into a reduction or into two readers: recomputing
    softmax's exp twice, or a padding condition in a convolution's inner loop, costs more than
    the buffer saves."""
    InlinePolicy.DEFAULT_SCHEDULE.inline_all(sch, "main")


def window_consumer(sch, block_rv) -> tuple | None:
    """A pooling that alone reads what the reduction writes (``FuseOps(windows=True)`` puts them
    in one kernel): (its block, {position of the reduction's iterator: window}) when each of its
    outputs reads a window of ``window`` neighbours along that iterator, windows side by side
    (stride = window) and covering it exactly, and one element along every other iterator."""
    block = sch.get(block_rv)
    consumers = sch.get_consumers(block_rv)
    if len(consumers) != 1:
        return None
    pool, out = sch.get(consumers[0]), block.writes[0]
    reads = [r for r in pool.reads if r.buffer is out.buffer]
    extents = {id(iv.var): const_int(iv.dom.extent) for iv in pool.iter_vars}
    kinds = {id(iv.var): iv.iter_type for iv in pool.iter_vars}
    position = {id(iv.var): n for n, iv in enumerate(block.iter_vars)}
    if len(reads) != 1:
        return None
    window, seen = {}, set()
    for dim, (index, stored) in enumerate(zip(reads[0].region, out.region)):
        terms = _terms(index.min) if const_int(index.extent) == 1 else None
        at = position.get(id(stored.min)) if const_int(stored.extent) == 1 else None
        if terms is None or at is None:
            return None
        if not terms[0] and terms[1] == 0 and const_int(block.iter_vars[at].dom.extent) == 1:
            continue   # a dimension of one element
        if terms[1]:
            return None
        spatial = [(v, c) for v, c in terms[0] if kinds.get(id(v)) == "spatial"]
        reduce_ = [(v, c) for v, c in terms[0] if kinds.get(id(v)) == "reduce"]
        if len(spatial) != 1 or len(terms[0]) != 1 + len(reduce_) or id(spatial[0][0]) in seen:
            return None
        (var, stride), seen = spatial[0], seen | {id(spatial[0][0])}
        if reduce_ and (len(reduce_) != 1 or reduce_[0][1] != 1
                        or extents[id(reduce_[0][0])] != stride):
            return None
        if stride > 1 and (not reduce_ or const_int(block.iter_vars[at].dom.extent)
                           != stride * extents[id(var)]):
            return None
        if stride == 1 and (reduce_ or const_int(block.iter_vars[at].dom.extent)
                            != extents[id(var)]):
            return None
        if stride > 1:
            window[at] = stride
    return (consumers[0], window) if window else None


def _terms(index) -> tuple | None:
    """(the (variable, coefficient) pairs, the constant) of an affine index, a variable cast to
    another integer type counted as the variable; None when the index is not affine."""
    lin = linear_form(index)
    pairs = []
    for atom, coef in lin.terms.values():
        while isinstance(atom, Cast):
            atom = atom.value
        if not isinstance(atom, Var):
            return None
        pairs.append((atom, coef))
    return pairs, lin.const


def tile_reduction(sch, block_rv, lanes: int, parallel: bool, split_k: bool = True,
                   pooling: tuple | None = None) -> str:
    """A reduction with data reuse as a register-tiled kernel, the general form of
    ``mlc_lab.testing.matmul_schedules.best_schedule``. The columns are the iterator of the
    output's last index; the rows, an iterator that the operands read along the columns do not
    use, so that each vector loaded serves every row (a matmul's i, a convolution's output
    channel). Returns "conv" when an operand is read through a window (an index mixing output
    and reduction iterators), else "matmul"."""
    loops, extents = matching_loops(sch, block_rv, symbolic=True)
    padded = None in extents   # a symbolic size: as few as one row, which a panel copy would not pay for
    if padded:
        pad_to_tiles(sch, block_rv)
        loops, extents = matching_loops(sch, block_rv, symbolic=True)
        if None in extents:
            raise Unschedulable(f"block {block_rv.name} has a symbolic extent it cannot pad")
    block = sch.get(block_rv)
    ivs, col = block.iter_vars, store_axis(block)
    if col is None or block.init is None:
        raise Unschedulable(f"block {block.name_hint} does not write along an output iterator "
                            "from an init")
    spatial = [n for n, iv in enumerate(ivs) if iv.iter_type == "spatial"]
    reduce_at = [n for n, iv in enumerate(ivs) if iv.iter_type != "spatial"]
    windowed = any(uses_var(r.min, [ivs[n].var for n in reduce_at])
                   and uses_var(r.min, [ivs[n].var for n in spatial])
                   for region in operands(block) for r in region.region)
    stored = col   # the output's last index
    if windowed:
        col = _column(block, extents, spatial, col, lanes)
    along = [r for r in operands(block) if uses_var(r.region, ivs[col].var)]
    others = [n for n in spatial if n != col]
    free = [n for n in others if not any(uses_var(r.region, ivs[n].var) for r in along)]
    wide = [n for n in free if extents[n] > 1] or [n for n in others if extents[n] > 1]
    row = (wide or free or others)[-1] if others else None
    vec = vector_width(extents[col], lanes)
    cols = 2 * vec if extents[col] % (2 * vec) == 0 and vec <= lanes else vec
    # 16 of the vector registers hold the tile: rows of one vector can be twice as many.
    rows = largest_divisor(extents[row], MAX_ROWS * 2 // max(1, cols // vec)) if row is not None else 1
    k = reduce_at[-1]
    chains = rows * max(1, cols // vec)
    if split_k and not windowed and len(reduce_at) == 1 and chains < CHAINS \
            and extents[k] >= SPLIT_K_MIN and largest_divisor(extents[k], CHAINS // chains) > 1:
        return _split_reduction(sch, block_rv, block, loops[k],
                                largest_divisor(extents[k], CHAINS // chains), lanes, parallel)
    for region in along if split_k and not padded else ():   # partial sums read their rows in turn
        _pack(sch, block_rv, block, region, ivs[col].var, ivs[k].var, cols, vec)

    window = pooling[1] if pooling else {}
    if row in window or (col in window and cols % window[col]):
        window, pooling = {}, None   # the rows of a tile, or its columns, split a window
    col_outer, col_inner = sch.split(loops[col], [None, cols])
    row_pieces = list(sch.split(loops[row], [None, rows])) if row is not None else []
    windows = {n: sch.split(loops[n], [None, w]) for n, w in window.items() if n != col}
    outer = [windows[n][0] if n in windows else loops[n] for n in spatial if n not in (row, col)] \
        + [col_outer, *row_pieces[:1]]
    in_window = [windows[n][1] for n in spatial if n in windows]
    sch.reorder(*outer, *in_window, *[loops[n] for n in reduce_at[:-1]],
                *split_last(sch, [loops[k]], extents[k], largest_divisor(extents[k], K_UNROLL)),
                *row_pieces[1:], *split_last(sch, [col_inner], cols, vec))
    # Fused, a symbolic tile loop's iterations could not be told apart (floor divisions by
    # symbolic sizes): such loops stay nested, the innermost carrying the tile.
    symbolic_tile = any(const_int(sch.get(lp).extent) is None for lp in outer)
    tile = outer[-1] if symbolic_tile else sch.fuse(*outer) if len(outer) > 1 else outer[0]
    registers = in_window[-1] if in_window else tile   # where one register tile is accumulated
    annotate(sch, block_rv, vector=vec, unroll=_unroll_inside(sch, block_rv, registers),
             parallel=(const_int(sch.get(tile).extent) or ANY_EXTENT) if parallel else 0)
    epilogues = _accumulate_in_tile(sch, block_rv, block, registers)
    if col != stored:   # the accumulator tile stored with the columns last, as they are computed
        order = [f"d{n}" for n in range(len(block.writes[0].region))]
        at = [n for n, r in enumerate(block.writes[0].region) if r.min is ivs[col].var]
        if len(at) == 1:
            moved = order[:at[0]] + order[at[0] + 1:] + [order[at[0]]]
            sch.transform_layout(block_rv, ("write", 0),
                                 f"lambda {', '.join(order)}: ({', '.join(moved)})")
    for epilogue in epilogues:
        inner = sch.get_loops(epilogue)
        last = const_int(sch.get(inner[-1]).extent)
        width = vec if last % vec == 0 else vector_width(last, lanes)
        split_last(sch, inner, last, width)
        annotate(sch, epilogue, vector=width, unroll=_unroll_inside(sch, epilogue, registers))
    if pooling and _pool_in_tile(sch, pooling[0], tile, lanes):
        return "conv+pool"
    return "conv" if windowed else "matmul"


def _pool_in_tile(sch, pool_rv, tile, lanes: int) -> bool:
    """Compute the pooling under ``tile``, its window loops outside its last output iterator,
    which becomes vectors. False (nothing changed) when the pooling cannot move there."""
    try:
        sch.reverse_compute_at(pool_rv, tile, preserve_unit_loops=True)
    except ScheduleError:
        return False
    block, loops = sch.get(pool_rv), sch.get_loops(pool_rv)
    inside = loops[[sch.get(lp) for lp in loops].index(sch.get(tile)) + 1:]
    values = iter_values(sch, pool_rv)
    kinds = []
    for loop in inside:
        users = [iv for iv, value in zip(block.iter_vars, values)
                 if uses_var(value, sch.get(loop).loop_var)]
        kinds.append(users[0] if len(users) == 1 else None)
    col = store_axis(block)
    at = [n for n, iv in enumerate(kinds) if col is not None and iv is block.iter_vars[col]]
    if any(iv is None for iv in kinds) or not at:
        return True
    last = inside[at[0]]
    sch.reorder(*[lp for lp, iv in zip(inside, kinds) if iv.iter_type == "spatial" and lp is not last],
                *[lp for lp, iv in zip(inside, kinds) if iv.iter_type != "spatial"], last)
    extent = const_int(sch.get(last).extent)
    width = vector_width(extent, lanes)
    split_last(sch, [last], extent, width)
    annotate(sch, pool_rv, vector=width)
    return True


def _split_reduction(sch, block_rv, block, k_loop, parts: int, lanes: int, parallel: bool) -> str:
    """A tile with fewer than CHAINS accumulators (a matrix-vector product: one row of outputs)
    waits on each multiply-add's latency along a long reduction. Its reduction is split in
    ``parts`` interleaved partial sums (``rfactor``), which become the rows of a register tile,
    then summed by the block itself, scheduled as a plain reduction."""
    _, inner = sch.split(k_loop, [None, parts])
    partial = sch.rfactor(inner, 0)
    total = sch.get_block(block.name_hint, "main")
    for rv in (partial, total):   # their iterators put the part first: order the loops so
        position = {id(value): n for n, value in enumerate(iter_values(sch, rv))}
        sch.reorder(*sorted(sch.get_loops(rv),
                            key=lambda lp: position.get(id(sch.get(lp).loop_var), len(position))))
    tile_reduction(sch, partial, lanes, parallel, split_k=False)
    reduce(sch, total, lanes, parallel)
    return "matmul"


def _column(block, extents, spatial, col: int, lanes: int) -> int:
    """For a convolution, the iterator whose outputs a tile computes as vector lanes: the
    output's last index, unless its extent has no vector width from 4 up to a register (34
    output columns: 2 x 17) while another output iterator's extent is a multiple of the vector
    (16 output channels); the tile is then stored transposed. A vector wider than a register and
    of odd width, read through a window at a new offset every reduction step, costs LLVM many
    shuffles (measured: 6x); a matmul's odd-width columns stay, as transposing costs more."""
    width = vector_width(extents[col], lanes)
    if 4 <= width <= lanes:
        return col
    outputs = {r.min for r in block.writes[0].region}
    better = [n for n in spatial if n != col and extents[n] % lanes == 0
              and any(block.iter_vars[n].var is m for m in outputs)]
    return better[-1] if better else col


def _pack(sch, block_rv, block, region, col_var, k_var, cols: int, vec: int) -> None:
    """Copy an operand read along the columns into panels ``[col // cols, ..., col % cols]`` when
    its columns are not its last dimension (a dense layout) or its reduction steps lie
    PACK_MIN_STRIDE or more apart, so that a tile reads one contiguous line per reduction step.
    Packing costs a copy per call: below that stride, measured, it does not pay."""
    dims, k_dims = strides(region, col_var), strides(region, k_var)
    shape = [const_int(s) for s in region.buffer.shape]
    by_column = dims is not None and sorted(dims) == [0] * (len(dims) - 1) + [1]
    if not by_column or k_dims is None or None in shape:
        return   # not read along the columns in one dimension, element by element
    at = dims.index(1)
    if at == len(dims) - 1 and sum(s * prod(shape[d + 1:]) for d, s in enumerate(k_dims)) \
            < PACK_MIN_STRIDE:
        return
    pack_panels(sch, block_rv, next(n for n, r in enumerate(block.reads) if r is region), at,
                cols, vec)


def _unroll_inside(sch, block_rv, tile) -> int:
    """UNROLL_STEPS, or fewer when the loops inside ``tile`` have fewer iterations (not counting
    the vector lanes), so that the tile loop itself is never unrolled."""
    loops = sch.get_loops(block_rv)
    inside = loops[[sch.get(lp) for lp in loops].index(sch.get(tile)) + 1:-1]
    return min(UNROLL_STEPS, work([const_int(sch.get(lp).extent) for lp in inside]))


def _accumulate_in_tile(sch, block_rv, block, tile) -> list:
    """Accumulate the block in a "local" cache written back under ``tile``, and move its single
    elementwise consumer there too, reading the cache directly. Returns the blocks under the
    tile after the reduction."""
    write_back = sch.cache_write(block_rv, 0, "local")
    sch.reverse_compute_at(write_back, tile, preserve_unit_loops=True)
    consumers = sch.get_consumers(write_back)
    if writes_param(sch, block_rv, block) or len(consumers) != 1 \
            or not is_spatial(sch.get(consumers[0])):
        return [write_back]
    try:
        sch.reverse_compute_at(consumers[0], tile, preserve_unit_loops=True)
    except ScheduleError:
        return [write_back]
    try:
        sch.compute_inline(write_back)
    except ScheduleError:
        return [write_back, consumers[0]]
    return [consumers[0]]


def reduce(sch, block_rv, lanes: int, parallel: bool) -> str:
    """A reduction without data reuse. When the reads follow the output's last iterator in order
    (a column sum), or at least at a constant stride (pooling windows side by side, softmax
    rows) without a long contiguous reduction to prefer, the reduction loops move outside that
    iterator's vector: each lane accumulates one output. Otherwise a reduction that runs along
    contiguous memory (a row sum) is split and ``rfactor``-ed into vector partial sums."""
    block = sch.get(block_rv)
    check_direct_loads(block)
    loops, extents = matching_loops(sch, block_rv, symbolic=True)
    sizes = [const_int(sch.get(loop).extent) for loop in loops]   # None where symbolic
    ivs, reads, col = block.iter_vars, operands(block), store_axis(block)
    reduce_at = [n for n, iv in enumerate(ivs) if iv.iter_type != "spatial"]
    k = reduce_at[-1]
    # over a symbolic length too: the split guards the partial sums past the end, and lowering
    # (partition_tail) keeps that guard to the last vector of them
    along_k = len(reduce_at) == 1 and k == len(ivs) - 1 \
        and (sizes[k] is None or sizes[k] % lanes == 0 and sizes[k] >= 4 * lanes) \
        and all(contiguous(r, ivs[k].var) for r in reads)
    vec = vector_width(sizes[col], lanes) if col is not None and sizes[col] is not None else 1
    if vec > 1 and all(strides(r, ivs[col].var) is not None for r in reads) \
            and (not along_k or all(contiguous(r, ivs[col].var) for r in reads)):
        *col_outer, col_inner = split_last(sch, [loops[col]], extents[col], vec)
        spatial = [loops[n] for n in range(len(ivs)) if n != col and n not in reduce_at]
        sch.reorder(*spatial, *col_outer, *[loops[n] for n in reduce_at], col_inner)
        annotate(sch, block_rv, vector=vec, parallel=work(sizes) if parallel else 0)
    elif along_k:
        _, inner = sch.split(loops[k], [None, lanes])
        partial = sch.rfactor(inner, len(block.writes[0].buffer.shape))
        annotate(sch, partial, vector=lanes, parallel=work(sizes) if parallel else 0)
    elif None in sizes and parallel:   # over a symbolic length: its rows in parallel
        annotate(sch, block_rv, parallel=ANY_EXTENT)
    else:
        raise Unschedulable(f"block {block.name_hint} has neither an output iterator to vectorize "
                            "nor one long reduction along contiguous memory")
    return "reduction"


def vectorize_spatial(sch, block_rv, lanes: int, parallel: bool) -> str:
    """An elementwise, broadcast or injective block: its innermost loop, which walks the output
    in order, becomes vectors (operands read at another constant stride are gathered)."""
    block = sch.get(block_rv)
    check_direct_loads(block)
    loops, _ = matching_loops(sch, block_rv, symbolic=True)
    extents = [const_int(sch.get(loop).extent) for loop in loops]   # None where symbolic
    if not loops or store_axis(block) != len(loops) - 1:
        raise Unschedulable(f"block {block.name_hint} does not write in the order of its loops")
    inner = block.iter_vars[-1].var
    for region in block.reads:
        if strides(region, inner) is None:
            raise Unschedulable(f"block {block.name_hint} reads {region.buffer.name} at an index "
                                f"that is not affine in {inner.name}")
    # A symbolic extent is split with a guard: lowering (partition_tail) keeps the guard to the
    # last vector, so the others are whole.
    vec = vector_width(extents[-1], lanes) if extents[-1] is not None else lanes
    if vec == 1 and not parallel:
        raise Unschedulable(f"block {block.name_hint}: no vector width divides "
                            f"{extents[-1] if extents[-1] is not None else 'its symbolic extent'}")
    split_last(sch, loops, extents[-1], vec)
    annotate(sch, block_rv, vector=vec, parallel=work(extents) if parallel else 0)
    return "elementwise"
