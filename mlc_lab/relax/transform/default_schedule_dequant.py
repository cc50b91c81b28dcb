# DefaultSchedule's rule for a matrix-vector product that decodes packed integer weights as it
# reads them (a weight-only quantized matmul at batch 1): memory-bound, so its loops follow memory.
"""``dequant_gemv``: the batch-1 product ``x @ decode(weights)`` of a weight-only quantized layer.

Such a kernel reads every weight once and does a few operations with each, so its speed is the
speed at which it streams the packed weights. The weights are stored (k rows, n columns) with the
columns contiguous (``topi.quantized_matmul``'s layout). The rule:

- splits the columns into ``chunk`` wide strips, one parallel task each;
- inside a strip, walks the reduction outermost (in steps of ``K_STEP`` rows, unrolled) and the
  strip's columns inside it, four vectors at a time: each task reads its rows of words as long
  contiguous runs (which the hardware prefetcher follows), each word exactly once, decoded in
  vector registers, while the strip's partial sums stay in the first-level cache;
- moves a single elementwise consumer (a bias add, an activation) into the strip.

A float layer at batch 1 whose weight matrix is read along the columns streams the same way and
gets the same loops (rule "gemv"): measured against the register tile in the same run, 784 -> 256
0.032 against 0.037 ms, 4096 -> 4096 1.6 against 2.2 ms.

A tile over the outputs (``tile_reduction``), or one strip of a few vectors reduced over all of
k, reads the weight matrix column strip by column strip: a new memory page every row, which the
prefetcher does not follow (measured: 2 to 4 times slower for 4096 x 4096 int4 weights).

Before (a 4096 -> 4096 int4 layer; ``quantized_matmul`` from ``topi.quantize``)::

    for i, j, k in T.grid(1, 4096, 512):
        with T.block("quantized_matmul"): ...      # reads p[k, j], s[k // 4, j], x[i, 8k .. 8k+7]

After (block bodies left out)::

    for i_j_0_fused in T.parallel(4):              # strips of 1024 columns (2 cores)
        for j_1_init in range(16):
            for j_2_init in T.unroll(4):
                for j_3_init in T.vectorized(16): ...   # the partial sums start at 0
        for k, j_1 in T.grid(512, 16):
            for j_2 in T.unroll(4):
                for j_3 in T.vectorized(16): ...        # one word a lane: eight weights
"""
from __future__ import annotations

from math import prod

from ...runtime.parallel import default_threads
from ...tir import dtype as dt
from ...tir.schedule import ScheduleError
from ...tir.schedule.policy.blocks import is_spatial
from ...tir.schedule.policy.pack import annotate, store_axis, strides
from .default_schedule_rules import Unschedulable, largest_divisor, matching_loops, operands

MAX_CHUNK = 1024    # columns of a strip: its partial sums (4 KiB) stay in the first-level cache
VECTORS = 4         # vectors of columns computed together for one reduction step
K_STEP = 4          # reduction steps unrolled together when one step decodes one weight


def is_dequant_gemv(block, floats: bool = False) -> bool:
    """A reduction with one row of outputs (every spatial iterator but the output's last one has
    extent 1), one reduction iterator, and an integer operand read along the columns, element by
    element (packed weights decoded in the block's body); with ``floats``, a float matrix read
    so counts too when the block reads another operand (a float layer at batch 1, whose weights
    stream the same way; not a column sum)."""
    col = store_axis(block)
    if col is None or block.init is None or len(block.writes) != 1:
        return False
    reduce_at = [n for n, iv in enumerate(block.iter_vars) if iv.iter_type != "spatial"]
    if len(reduce_at) != 1:
        return False
    for n, iv in enumerate(block.iter_vars):
        extent = getattr(iv.dom.extent, "value", None)
        if extent is None or (n != col and n not in reduce_at and extent != 1):
            return False
    col_var = block.iter_vars[col].var
    reads = operands(block)
    return any((not dt.is_float(r.buffer.dtype) or floats and len(r.region) == 2 and len(reads) > 1)
               and _walks(r, col_var) for r in reads)


def _walks(region, var) -> bool:
    found = strides(region, var)
    return found is not None and found[-1] == 1 and not any(found[:-1])


def schedule_dequant_gemvs(sch, reductions: list, lanes: int, parallel: bool) -> tuple[list, list]:
    """(the rule names given, the reductions left to the other rules): ``dequant_gemv`` for each
    reduction that ``is_dequant_gemv``, on the host's cores; one it cannot schedule is left."""
    done, left = [], []
    for block in reductions:
        try:
            if not is_dequant_gemv(block, floats=True):
                raise Unschedulable(block.name_hint)
            done.append(dequant_gemv(sch, sch.get_block(block.name_hint, "main"), lanes, parallel,
                                    default_threads(), check=False))
        except Unschedulable:
            left.append(block)
    return done, left


def dequant_gemv(sch, block_rv, lanes: int, parallel: bool, cores: int = 1, check: bool = True) -> str:
    """Schedule the block as the module docstring says; "dequant_gemv" (or "gemv" for float
    weights). ``check=False`` takes any one-row reduction."""
    block = sch.get(block_rv)
    if check and not is_dequant_gemv(block):
        raise Unschedulable(f"block {block.name_hint} is not a one-row product over decoded weights")
    loops, extents = matching_loops(sch, block_rv)
    col = store_axis(block)
    k = next(n for n, iv in enumerate(block.iter_vars) if iv.iter_type != "spatial")
    group = lanes * VECTORS
    if extents[col] % lanes:
        raise Unschedulable(f"block {block.name_hint}: {extents[col]} columns are not a multiple "
                            f"of {lanes} vector lanes")
    vectors = VECTORS if extents[col] % group == 0 else 1
    width = lanes * vectors
    tasks = max(1, cores if parallel else 1)
    chunk = width * largest_divisor(extents[col] // width,
                                    max(1, min(MAX_CHUNK, extents[col] // tasks) // width))
    # a step that decodes several weights of a word (int4) is long already: no reduction unroll
    packed = any(dt.is_float(r.buffer.dtype) and const_extent(r) > 1 for r in operands(block))
    k_step = 1 if packed else largest_divisor(extents[k], K_STEP)
    units = [loops[n] for n in range(len(loops)) if n not in (col, k)]
    strip, inner, vec_outer, vec = sch.split(loops[col], [None, chunk // width, vectors, lanes])
    k_loops = list(sch.split(loops[k], [None, k_step])) if k_step > 1 else [loops[k]]
    sch.reorder(*units, strip, k_loops[0], inner, *k_loops[1:], vec_outer, vec)
    annotate(sch, block_rv, vector=lanes, unroll=k_step * vectors,
             parallel=extents[col] // chunk if parallel else 0)
    consumers = sch.get_consumers(block_rv)
    if len(consumers) == 1 and is_spatial(sch.get(consumers[0])):
        _epilogue(sch, consumers[0], strip, lanes)
    return "dequant_gemv" if is_dequant_gemv(block) else "gemv"


def const_extent(region) -> int:
    """Elements a region reads in all (1 for a single element; 0 when not constant)."""
    return prod(getattr(r.extent, "value", 0) for r in region.region)


def _epilogue(sch, consumer, strip, lanes: int) -> None:
    """The consumer computed under the strip, its columns as vectors; unchanged if refused."""
    try:
        sch.reverse_compute_at(consumer, strip, preserve_unit_loops=True)
    except ScheduleError:
        return
    last = sch.get_loops(consumer)[-1]
    extent = getattr(sch.get(last).extent, "value", 0)
    if extent > lanes and extent % lanes == 0:
        sch.split(last, [None, lanes])
    annotate(sch, consumer, vector=lanes)
