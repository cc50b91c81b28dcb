"""The rewrite behind pad_einsum: pad an einsum block's iteration space to multiples of given
factors, reading zero-padded copies of its inputs and writing a padded copy of its output."""
from __future__ import annotations

from ....arith import can_prove
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...analysis import block_access_regions
from ...functor import StmtExprMutator
from ...stmt_functor import loads_in, stores_in
from .cache import taken_buffer_names, unique_name
from .padding import _Replace
from .scope import all_blocks_under, const_int

_P = "pad_einsum"


def pad_einsum_scope(func, index, realize, padding):
    """The scope block rewritten, after checking every rule."""
    blk = realize.block
    ivs = blk.iter_vars

    def fail(cls, rule, culprits=None):
        raise cls(_P, rule, func, culprits or [blk])
    factors = [p.value if isinstance(p, E.IntImm) else p for p in padding] \
        if isinstance(padding, (list, tuple)) else None
    if (factors is None or len(factors) != len(ivs)
            or any(not isinstance(f, int) or isinstance(f, bool) or f <= 0 for f in factors)):
        fail(errors.PadEinsumFactorError, f"padding {padding!r} must be one positive int per "
             f'iterator of block "{blk.name_hint}" ({len(ivs)})')
    store = blk.body
    if (not isinstance(store, S.BufferStore) or const_int(realize.predicate) != 1
            or all_blocks_under(blk.body) or blk.match_buffers or blk.alloc_buffers
            or len(blk.writes) != 1 or blk.writes[0].buffer is not store.buffer):
        fail(errors.PadEinsumNotEinsumError, f'block "{blk.name_hint}" is not one store without '
             "predicate, inner blocks or buffer views")
    out = store.buffer
    by_var = {id(iv.var): k for k, iv in enumerate(ivs)}
    dims = {}      # id(buffer) -> iterator position per dimension
    buffers = {}
    parts = [blk.body] + ([blk.init] if blk.init is not None else [])
    accesses = [(st.buffer, st.indices) for part in parts for st in stores_in(part)]
    accesses += [(ld.buffer, ld.indices) for part in parts for ld in loads_in(part)]
    for buffer, indices in accesses:
        ks = [by_var.get(id(i)) if isinstance(i, E.Var) else None for i in indices]
        if None in ks or dims.setdefault(id(buffer), ks) != ks:
            fail(errors.PadEinsumNotEinsumError, f"buffer {buffer.name} is accessed at "
                 f"{', '.join(map(str, indices))}, not always at the same plain iterators")
        buffers[id(buffer)] = buffer
    if any(id(r.buffer) not in buffers for r in blk.reads):
        fail(errors.PadEinsumNotEinsumError, f'block "{blk.name_hint}" reads a buffer other than '
             "by plain loads")
    if any(st.buffer is not out for part in parts for st in stores_in(part)):
        fail(errors.PadEinsumNotEinsumError, f'block "{blk.name_hint}" stores more than one buffer')
    out_dims = dims[id(out)]
    for k, iv in enumerate(ivs):
        spatial = iv.iter_type == "spatial"
        if spatial != (k in out_dims) or iv.iter_type not in ("spatial", "reduce"):
            fail(errors.PadEinsumNotEinsumError, f"iterator {iv.var.name} must index the output "
                 "exactly when it is spatial")
    loops = _loops(func, index, realize, fail)
    new_ext, changed = [], []
    for iv, f in zip(ivs, factors):
        ext = iv.dom.extent
        n = const_int(ext)
        if n is not None:
            new = E.const(-(-n // f) * f, ext.dtype)
        elif f == 1:
            new = ext
        else:
            new = E.Mul(E.FloorDiv(E.Add(ext, E.const(f - 1, ext.dtype)), E.const(f, ext.dtype)),
                        E.const(f, ext.dtype))
        new_ext.append(new)
        changed.append(n is None and f != 1 or n is not None and const_int(new) != n)
    if not any(changed):
        fail(errors.PadEinsumNothingError, f"padding {factors} leaves every iterator's extent as it is")
    padded = [b for b in buffers.values() if any(changed[k] for k in dims[id(b)])]
    for b in padded:
        for d, k in enumerate(dims[id(b)]):
            # the output is copied back whole: the block must write all of it
            if (changed[k] or b is out) and not can_prove(E.EQ(b.shape[d], ivs[k].dom.extent)):
                fail(errors.PadEinsumNotEinsumError, f"dimension {d} of buffer {b.name} has size "
                     f"{b.shape[d]}, not the extent {ivs[k].dom.extent} of iterator {ivs[k].var.name}")
    if any(ld.buffer is out for ld in loads_in(blk.body)) and blk.init is None:
        fail(errors.PadEinsumOutputReadError, f'block "{blk.name_hint}" reads its output '
             f"{out.name} but has no init")
    padded_ids = {id(b) for b in padded}
    for k, iv in enumerate(ivs):
        if changed[k] and iv.iter_type == "reduce" and not _zero_annihilates(store, out, k, dims,
                                                                          padded_ids):
            fail(errors.PadEinsumReductionError, f"padding reduction iterator {iv.var.name} adds "
                 "terms the update is not shown to ignore: it must be out + a product with a "
                 "factor loaded from a buffer indexed by that iterator")
    # -- the rewrite
    taken = taken_buffer_names(func)
    new_buffers = {}
    for b in padded:
        name = unique_name(f"{b.name}_pad", taken)
        taken.add(name)
        shape = tuple(new_ext[k] if changed[k] else b.shape[d] for d, k in enumerate(dims[id(b)]))
        new_buffers[id(b)] = b.replace(name=name, shape=shape, strides=())
    einsum = _Swap(new_buffers).visit(realize)
    einsum = einsum.replace(block=einsum.block.replace(iter_vars=tuple(
        iv.replace(dom=S.Range(iv.dom.min, e)) for iv, e in zip(einsum.block.iter_vars, new_ext))))
    stmt = einsum
    loop_iter = {id(realize.iter_values[k]): k for k in range(len(ivs))}
    for lp in reversed(loops):
        stmt = lp.replace(extent=new_ext[loop_iter[id(lp.loop_var)]], body=stmt)
    taken_blocks = set(index.blocks)
    before, after = [], []
    inputs = [r.buffer for r in blk.reads if id(r.buffer) in new_buffers and r.buffer is not out]
    seen = set()
    for b in inputs:
        if id(b) in seen:
            continue
        seen.add(id(b))
        new = new_buffers[id(b)]
        name = unique_name(new.name, taken_blocks)
        taken_blocks.add(name)
        before.append(_pad_nest(name, b, new, dims[id(b)], changed))
    if id(out) in new_buffers:
        new = new_buffers[id(out)]
        name = unique_name(new.name, taken_blocks)
        after.append(_copy_nest(name, new, out))
    scope = index.parent_block(realize)
    new_scope = _Replace({id(loops[0]): S.seq(*before, stmt, *after)}).visit(scope.block)
    allocs = tuple({id(b): new_buffers[id(b)] for b in inputs}.values())
    allocs += (new_buffers[id(out)],) if id(out) in new_buffers else ()
    return scope.block, new_scope.replace(alloc_buffers=new_scope.alloc_buffers + allocs)


def _loops(func, index, realize, fail):
    blk = realize.block
    loops = index.loops_above(realize)
    values = realize.iter_values
    ok = (loops and len(loops) == len(values) and loops[-1].body is realize
          and all(a.body is b for a, b in zip(loops, loops[1:]))
          and {id(v) for v in values} == {id(lp.loop_var) for lp in loops})
    if ok:
        for iv, v in zip(blk.iter_vars, values):
            lp = next(lp for lp in loops if lp.loop_var is v)
            ok = ok and const_int(lp.min) == 0 and const_int(iv.dom.min) == 0 and can_prove(
                E.EQ(lp.extent, iv.dom.extent)) and lp.kind != "thread_binding" and not lp.annotations
    if not ok:
        fail(errors.PadEinsumLoopsError, f'the loops of block "{blk.name_hint}" must be one chain '
             "of plain loops from 0, one over each iterator's whole domain")
    return loops


def _zero_annihilates(store, out, k, dims, padded_ids) -> bool:
    value = store.value
    if not isinstance(value, E.Add):
        return False
    acc, prod = value.a, value.b
    if not (isinstance(acc, E.BufferLoad) and acc.buffer is out
            and all(a is b for a, b in zip(acc.indices, store.indices))):
        acc, prod = prod, acc
        if not (isinstance(acc, E.BufferLoad) and acc.buffer is out
                and all(a is b for a, b in zip(acc.indices, store.indices))):
            return False
    factors, todo = [], [prod]
    while todo:
        e = todo.pop()
        if isinstance(e, E.Mul):
            todo += [e.a, e.b]
        else:
            factors.append(e)
    return any(isinstance(f, E.BufferLoad) and id(f.buffer) in padded_ids and k in dims[id(f.buffer)]
               for f in factors)


def _nest(name, shape, body_of):
    """``for i0, i1, ...: with T.block(name): v0, v1, ... = i0, i1, ...`` over ``shape``."""
    loop_vars = [E.Var(f"i{d}", s.dtype) for d, s in enumerate(shape)]
    ivs = [S.IterVar(E.Var(f"v{d}", s.dtype), S.Range(E.const(0, s.dtype), s), "spatial")
           for d, s in enumerate(shape)]
    body = body_of([iv.var for iv in ivs])
    block = S.Block(name, tuple(ivs), (), (), body)
    reads, writes = block_access_regions(block)
    stmt = S.BlockRealize(tuple(loop_vars), E.const(True, "bool"),
                          block.replace(reads=reads, writes=writes))
    for var, s in reversed(list(zip(loop_vars, shape))):
        stmt = S.For(var, E.const(0, s.dtype), s, "serial", stmt)
    return stmt


def _pad_nest(name, old, new, dim_iters, changed):
    def body(vs):
        cond = None
        for d, (v, k) in enumerate(zip(vs, dim_iters)):
            if changed[k]:
                c = E.LT(v, old.shape[d])
                cond = c if cond is None else E.And(cond, c)
        zero = E.const(0, old.dtype)
        value = E.Call(old.dtype, "if_then_else", (cond, E.BufferLoad(old, tuple(vs)), zero))
        return S.BufferStore(new, value, tuple(vs))
    return _nest(name, new.shape, body)


def _copy_nest(name, new, out):
    return _nest(name, out.shape,
                 lambda vs: S.BufferStore(out, E.BufferLoad(new, tuple(vs)), tuple(vs)))


class _Swap(StmtExprMutator):
    def __init__(self, mapping):
        super().__init__()
        self.mapping = mapping

    def visit_Buffer(self, buffer):
        return self.mapping.get(id(buffer), buffer)

