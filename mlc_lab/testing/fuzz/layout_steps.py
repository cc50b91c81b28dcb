"""Random steps of the layout and buffer primitives: reindex and its caches, cache_index,
transform_layout (a swap, or a split that leaves padding), transform_block_layout, merge,
storage_align, set_axis_separator, unsafe_set_dtype (widening only), add_unit_loop,
rolling_buffer, decompose_padding, pad_einsum, read_at and write_at.

``draw(op, ...)`` gives the step's fields as a dict (``op``, ``loops``, ``args``, ``other``) or
None when the drawn primitive has nothing to work on; ``code(op, blk, loops, loop, args, other)``
spells the step as Python over a schedule ``sch``, or gives None for an op this module does not
draw. Index maps are drawn as lambda source text, which the trace records as is."""
from __future__ import annotations

from ...tir.stmt_functor import free_vars

SCOPES = ("global", "local", "shared")
OPS = ("reindex", "reindex_cache_read", "reindex_cache_write", "cache_index", "padded_layout",
       "transform_block_layout", "merge", "storage_align", "set_axis_separator", "unsafe_set_dtype",
       "add_unit_loop", "rolling_buffer", "decompose_padding", "pad_einsum", "read_at", "write_at")
# Exact round trips through a wider type: the program computes the same values.
WIDER = {"float32": "float64", "float16": "float32", "int32": "int64", "int8": "int32"}


def draw(op, func, index, names, block, rng) -> dict | None:
    realize = index.blocks[block]
    blk = realize.block
    path_loops = index.loops_above(realize)
    n = len(path_loops)
    params = list(func.params) + list(getattr(func, "buffer_map", {}).values())
    regions = ([("read", k) for k in range(len(blk.reads))]
               + [("write", k) for k in range(len(blk.writes))])
    pick = lambda seq: seq[int(rng.integers(len(seq)))]  # noqa: E731
    if op in ("transform_layout", "padded_layout"):
        return _layout(blk, params, op == "padded_layout", rng)
    if op == "reindex" and regions:
        return {"op": op, "args": {"buffer": pick(regions)}}
    if op in ("reindex_cache_read", "reindex_cache_write"):
        return _reindex_cache(op, blk, rng)
    if op == "cache_index":
        return {"op": op, "args": {"scope": pick(SCOPES), "cse": int(rng.integers(3))}}
    if op == "transform_block_layout":
        return _block_layout(blk, rng)
    if op == "merge" and len(names) > 1 and n:
        # Two blocks' loops at one position, under outer loops of the same extents (most other
        # pairs are refused at once, since merged nests must have the same shape).
        extents = [str(loop.extent) for loop in path_loops]
        pairs = []
        for other in names:
            theirs = [str(loop.extent) for loop in index.loops_above(index.blocks[other])]
            same = next((d for d, (x, y) in enumerate(zip(extents, theirs)) if x != y),
                        min(n, len(theirs)))
            pairs += [(other, d) for d in range(same)] if other != block else []
        if not pairs:
            return None
        other, k = pick(pairs)
        return {"op": op, "loops": (k,), "other": other}
    if op == "storage_align" and blk.writes:
        k = int(rng.integers(len(blk.writes)))
        ndim = len(blk.writes[k].buffer.shape)
        factor = int(pick((2, 4, 8, 16, 32)))
        return {"op": op, "args": {"index": k, "factor": factor,
                                   "axis": int(rng.integers(-ndim, ndim)) if ndim else 0,
                                   "offset": int(rng.integers(factor))}}
    if op == "set_axis_separator" and regions:
        kind, k = pick(regions)
        ndim = len((blk.reads if kind == "read" else blk.writes)[k].buffer.shape)
        seps = sorted(int(a) for a in rng.choice(list(range(1, ndim)), size=int(rng.integers(ndim)),
                                                  replace=False)) if ndim > 1 else []
        return {"op": op, "args": {"buffer": (kind, k), "separators": tuple(seps)}}
    if op == "unsafe_set_dtype" and blk.writes:
        k = int(rng.integers(len(blk.writes)))
        dtype = blk.writes[k].buffer.dtype
        return {"op": op, "args": {"index": k, "dtype": WIDER.get(dtype, dtype)}}
    if op == "add_unit_loop":
        return {"op": op, "loops": (int(rng.integers(n)),) if n and rng.random() < 0.5 else ()}
    if op == "rolling_buffer" and blk.writes:
        return {"op": op, "args": {"index": int(rng.integers(len(blk.writes)))}}
    if op == "decompose_padding" and n:
        return {"op": op, "loops": (int(rng.integers(n)),)}
    if op == "pad_einsum" and blk.iter_vars:
        return {"op": op, "args": {"padding": tuple(int(pick((1, 1, 2, 3, 4, 8))) for _ in blk.iter_vars)}}
    if op in ("read_at", "write_at") and n:
        regs = blk.reads if op == "read_at" else blk.writes
        if regs:
            return {"op": op, "loops": (int(rng.integers(n)),),
                    "args": {"index": int(rng.integers(len(regs))), "scope": pick(SCOPES)}}
    return None


def code(op, blk, loops, loop, a, other) -> str | None:
    """``blk`` spells the step's block, ``other`` its second block, ``loops`` are the step's loop
    positions and ``loop(k)`` spells the block's k-th loop (``loop(k, other)`` the other's)."""
    if op == "transform_layout":
        kind, n = a.get("buffer", ("write", 0))
        pad = f", pad_value={a['pad']!r}" if "pad" in a else ""
        return f'sch.transform_layout({blk}, ("{kind}", {n}), "{a["map"]}"{pad})'
    if op in ("reindex", "set_axis_separator"):
        kind, n = a["buffer"]
        seps = f", {list(a['separators'])}" if op == "set_axis_separator" else ""
        return f'sch.{op}({blk}, ("{kind}", {n}){seps})'
    if op in ("reindex_cache_read", "reindex_cache_write"):
        return f'sch.{op}({blk}, {a["index"]}, "{a["scope"]}", "{a["map"]}")'
    if op == "cache_index":
        return f'sch.cache_index({blk}, "{a["scope"]}", {a["cse"]})'
    if op == "transform_block_layout":
        return f'sch.transform_block_layout({blk}, "{a["map"]}")'
    if op == "merge":
        return f"sch.merge({loop(loops[0])}, {loop(loops[0], other)})"
    if op == "storage_align":
        return (f"sch.storage_align({blk}, {a['index']}, axis={a['axis']}, factor={a['factor']}, "
                f"offset={a['offset']})")
    if op == "unsafe_set_dtype":
        return f'sch.unsafe_set_dtype({blk}, {a["index"]}, "{a["dtype"]}")'
    if op == "add_unit_loop":
        return f"sch.add_unit_loop({loop(loops[0]) if loops else blk})"
    if op == "rolling_buffer":
        return f"sch.rolling_buffer({blk}, {a['index']})"
    if op == "decompose_padding":
        return f"sch.decompose_padding({blk}, {loop(loops[0])})"
    if op == "pad_einsum":
        return f"sch.pad_einsum({blk}, {list(a['padding'])})"
    if op in ("read_at", "write_at"):
        return f'sch.{op}({loop(loops[0])}, {blk}, {a["index"]}, "{a["scope"]}")'
    return None


def _layout(blk, params, padded, rng) -> dict | None:
    """transform_layout of an intermediate the block reads or writes: a swap of its last two
    dimensions, or (``padded``) a split of one dimension by a factor that leaves padding, filled
    with 0 or with a function of the new indices."""
    # A parameter's new layout changes what callers pass: only intermediates are fair game.
    candidates = [(kind, k, r.buffer) for kind, regs in (("read", blk.reads), ("write", blk.writes))
                  for k, r in enumerate(regs) if not any(r.buffer is p for p in params)]
    if not candidates:
        return None
    kind, k, buffer = candidates[int(rng.integers(len(candidates)))]
    ndim = len(buffer.shape)
    xs = [f"x{d}" for d in range(ndim)]
    if not padded:
        if ndim < 2:
            return None
        out = list(xs)
        out[-1], out[-2] = out[-2], out[-1]
        return {"op": "transform_layout", "args": {"map": _lambda(xs, out), "buffer": (kind, k)}}
    d = int(rng.integers(ndim)) if ndim else 0
    extent = getattr(buffer.shape[d], "value", None) if ndim else None
    factors = [f for f in range(2, 9) if extent is not None and extent % f]
    if not factors:
        return None
    f = factors[int(rng.integers(len(factors)))]
    out = xs[:d] + [f"{xs[d]} // {f}", f"{xs[d]} % {f}"] + xs[d + 1:]
    if rng.random() < 0.5:
        pad = 0.0 if "float" in buffer.dtype else 0
    else:   # a value that differs from place to place
        ys = [f"y{e}" for e in range(ndim + 1)]
        pad = f'lambda {", ".join(ys)}: T.Cast("{buffer.dtype}", {" + ".join(ys)})'
    return {"op": "transform_layout", "args": {"map": _lambda(xs, out), "buffer": (kind, k), "pad": pad}}


def _reindex_cache(op, blk, rng) -> dict | None:
    """A reindex cache of one region, laid out by the iterators its indices use: in the block's
    order or permuted."""
    regions = blk.reads if op == "reindex_cache_read" else blk.writes
    if not regions or not blk.iter_vars:
        return None
    k = int(rng.integers(len(regions)))
    used = {id(v) for r in regions[k].region for v in free_vars(r.min)}
    vs = [f"v{d}" for d in range(len(blk.iter_vars))]
    out = [v for v, iv in zip(vs, blk.iter_vars) if id(iv.var) in used]
    if not out:
        return None
    if rng.random() < 0.6:
        out = [str(v) for v in rng.permutation(out)]
    return {"op": op, "args": {"index": k, "scope": SCOPES[int(rng.integers(3))], "map": _lambda(vs, out)}}


def _block_layout(blk, rng) -> dict | None:
    """transform_block_layout by a permutation of the iterators, a fuse of two neighbours of one
    kind, or a split of one by a divisor of its extent."""
    ivs = blk.iter_vars
    if not ivs:
        return None
    vs = [f"v{d}" for d in range(len(ivs))]
    extents = [getattr(iv.dom.extent, "value", None) for iv in ivs]
    how = int(rng.integers(3))
    pairs = [a for a in range(len(ivs) - 1)
             if ivs[a].iter_type == ivs[a + 1].iter_type and extents[a + 1] is not None]
    splits = [(a, f) for a, e in enumerate(extents) if e is not None for f in range(2, e) if e % f == 0]
    if how == 1 and pairs:
        a = pairs[int(rng.integers(len(pairs)))]
        out = vs[:a] + [f"{vs[a]} * {extents[a + 1]} + {vs[a + 1]}"] + vs[a + 2:]
    elif how == 2 and splits:
        a, f = splits[int(rng.integers(len(splits)))]
        out = vs[:a] + [f"{vs[a]} // {f}", f"{vs[a]} % {f}"] + vs[a + 1:]
    elif len(ivs) >= 2:
        out = [str(v) for v in rng.permutation(vs)]
    else:
        return None
    return {"op": "transform_block_layout", "args": {"map": _lambda(vs, out)}}


def _lambda(args, outputs) -> str:
    return f"lambda {', '.join(args)}: ({', '.join(outputs)},)"
