# Replaces every block by its body: iterators become their (simplified) bindings, a predicate becomes
# an if, leftover alloc_buffers become Allocates, match_buffers become offsets into their source.
# Expects block-form PrimFuncs after lower_init_block (a remaining init is lowered here the same way).
from __future__ import annotations

from ...arith import simplify
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import StmtExprMutator
from .prim_func_pass import is_const, loop_range, prim_func_pass
from .flatten_buffer import row_major_strides
from .lower_init_block import lower_init_block


@prim_func_pass
def lower_blocks(func: PrimFunc) -> PrimFunc:
    """``with T.block("C"): vi = T.axis.spatial(64, i_0 * 8 + i_1); T.where(p); C[vi] = ...``
    becomes ``if p: C[i_0 * 8 + i_1] = ...``; the function gains the ``tir.lowered`` attribute."""
    func = lower_init_block.pass_func(func)   # the rewrite, not the pass: one step for instruments
    body = _LowerBlocks().visit(func.body)
    return func.replace(body=body).with_attr("tir.lowered", True)


class _LowerBlocks(StmtExprMutator):
    def __init__(self):
        super().__init__()
        self.ranges: dict = {}     # Var -> Range of the enclosing loops
        self.mapping: dict = {}    # block iterator -> its binding, in loop variables
        self.matched: dict = {}    # id(match buffer) -> (source buffer, corner of the region in it)

    def visit_Var(self, var):
        return self.mapping.get(var, var)

    def visit_For(self, loop):
        self.ranges[loop.loop_var] = loop_range(loop)
        new = self.generic_visit(loop)
        del self.ranges[loop.loop_var]
        return new

    def visit_Evaluate(self, s):
        if isinstance(s.value, E.Call) and s.value.op == "assume":   # T.assume: for analyses only
            return S.Evaluate(E.const(0))
        return self.generic_visit(s)

    def visit_BlockRealize(self, realize):
        block = realize.block
        values = [simplify(self.visit(v), self.ranges) for v in realize.iter_values]
        saved = dict(self.mapping)
        self.mapping.update({iv.var: v for iv, v in zip(block.iter_vars, values)})
        for match in block.match_buffers:
            self.bind_match(match)
        body = self.visit(block.body)
        self.mapping = saved
        for match in block.match_buffers:
            del self.matched[id(match.buffer)]
        for buf in reversed(block.alloc_buffers):
            body = S.Allocate(buf, body)
        predicate = simplify(self.visit(realize.predicate), self.ranges)
        if not is_const(predicate, 1):
            body = S.IfThenElse(predicate, body)
        return body

    def bind_match(self, match: S.MatchBufferRegion):
        source, buffer = match.source, match.buffer
        extents = [simplify(self.visit(r.extent), self.ranges) for r in source.region]
        kept = len(extents) - buffer.ndim
        if kept < 0 or not all(is_const(e, 1) for e in extents[:kept]):
            raise NotImplementedError(f"lower_blocks: match_buffer {buffer.name} is not a dense "
                                      f"view of its region of {source.buffer.name}")
        for dim, extent in zip(buffer.shape, extents[kept:]):
            if isinstance(dim, E.Var):
                self.mapping[dim] = extent
        real, corner = self.access(source.buffer, [r.min for r in source.region])
        # The view is indexed through the storage it lies in, so it has that storage's strides:
        # declared ones must be those (a stride variable is bound to its value).
        actual = row_major_strides(real)[len(real.shape) - buffer.ndim:] if buffer.strides else []
        for declared, stride in zip(buffer.strides, actual):
            stride = E.const(1, declared.dtype) if stride is None else stride   # None: the last, 1
            if isinstance(declared, E.Var):
                self.mapping[declared] = stride
            elif not is_const(simplify(declared - stride), 0):
                raise NotImplementedError(f"lower_blocks: match_buffer {buffer.name} declares the "
                                          f"strides {buffer.strides}, but its region of "
                                          f"{source.buffer.name} has other strides")
        self.matched[id(buffer)] = (real, corner)

    def access(self, buffer, indices):
        """The buffer really accessed and its indices (a matched buffer's are shifted by its corner
        in the source, whose leading dimensions it drops)."""
        indices = tuple(self.visit(i) for i in indices)
        if id(buffer) not in self.matched:
            return buffer, indices
        source, corner = self.matched[id(buffer)]
        dropped = len(corner) - len(indices)
        shifted = (simplify(c + i, self.ranges) for c, i in zip(corner[dropped:], indices))
        return source, tuple(corner[:dropped]) + tuple(shifted)

    def visit_BufferLoad(self, load):
        buffer, indices = self.access(load.buffer, load.indices)
        return E.BufferLoad(buffer, indices)

    def visit_BufferStore(self, store):
        buffer, indices = self.access(store.buffer, store.indices)
        return S.BufferStore(buffer, self.visit(store.value), indices)
