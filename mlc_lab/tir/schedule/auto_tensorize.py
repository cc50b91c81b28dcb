"""Matching a block against a tensor intrinsic's description up to a change of layout: the
block's computation must have the description's shape (same operations, buffers of the same
dtypes, each buffer always read at the same indices), but its indices may be any expressions of
its iterators. From which buffers each iterator indexes, the iterators of the block are grouped
onto those of the description, and each group is fused into one index (a conv2d's ``n, h, w``
onto a matmul's ``i``). Used by :func:`mlc_lab.tir.schedule.analysis.get_auto_tensorize_mapping_info`.
"""
from __future__ import annotations

import re

from ...arith import simplify
from .. import expr as E
from .. import stmt as S
from ..index_map import IndexMap
from ..stmt_functor import pre_order_visit


def _dtype_code(dtype: str) -> str:
    """The kind of a dtype without its width: "float" of "float16" and of "float32x4"."""
    return re.match(r"[a-z]*", dtype).group(0)


class AutoMatcher:
    """Walks a block (lhs) and a description block (rhs) side by side, pairing their buffers and
    recording the indices each is accessed at."""

    def __init__(self):
        self.lhs_iters: list = []
        self.rhs_iters: list = []
        self.pairs: dict = {}          # id(rhs buffer) -> (rhs buffer, lhs buffer), in first-seen order
        self.lhs_of_rhs: dict = {}     # id(lhs buffer) -> rhs buffer
        self.lhs_indices: dict = {}    # id(lhs buffer) -> indices (simplified)
        self.rhs_indices: dict = {}    # id(rhs buffer) -> indices
        self.vars: dict = {}           # id(lhs var) -> rhs var, for variables outside indices
        self.ranges: dict = {}

    # -- blocks and statements
    def block(self, lhs: S.Block, rhs: S.Block) -> bool:
        for block, iters in ((lhs, self.lhs_iters), (rhs, self.rhs_iters)):
            for iv in block.iter_vars:
                if iv.iter_type not in ("spatial", "reduce"):
                    return False
                self.ranges[iv.var] = iv.dom
                iters.append(iv)
        return self.stmt(lhs.body, rhs.body)

    def stmt(self, lhs, rhs) -> bool:
        if type(lhs) is not type(rhs):
            return False
        if isinstance(lhs, S.BufferStore):
            return self.access(lhs, rhs) and self.expr(lhs.value, rhs.value)
        if isinstance(lhs, S.SeqStmt):
            return len(lhs.seq) == len(rhs.seq) and all(map(self.stmt, lhs.seq, rhs.seq))
        return False

    # -- expressions
    def expr(self, lhs, rhs) -> bool:
        if lhs is rhs:
            return True
        if type(lhs) is not type(rhs) or _dtype_code(lhs.dtype) != _dtype_code(rhs.dtype):
            return False
        if isinstance(lhs, E.BufferLoad):
            return self.access(lhs, rhs)
        if isinstance(lhs, E.Var):
            return self.vars.setdefault(id(lhs), rhs) is rhs
        if isinstance(lhs, (E.IntImm, E.FloatImm)):
            return lhs.value == rhs.value
        for (_, a), (_, b) in zip(lhs.fields(), rhs.fields()):
            if isinstance(a, E.PrimExpr):
                if not isinstance(b, E.PrimExpr) or not self.expr(a, b):
                    return False
            elif isinstance(a, tuple):
                if not isinstance(b, tuple) or len(a) != len(b) or not all(map(self.expr, a, b)):
                    return False
            elif a != b:
                return False
        return True

    def access(self, lhs, rhs) -> bool:
        """A store or load of a pair of buffers: the buffers pair up one to one (same dtype), and
        each is accessed at the same indices every time."""
        lbuf, rbuf = lhs.buffer, rhs.buffer
        known = self.pairs.get(id(rbuf))
        if known is not None:
            if known[1] is not lbuf:
                return False
        else:
            if id(lbuf) in self.lhs_of_rhs or lbuf.dtype != rbuf.dtype:
                return False
            self.pairs[id(rbuf)] = (rbuf, lbuf)
            self.lhs_of_rhs[id(lbuf)] = rbuf
        if id(lbuf) not in self.lhs_indices:
            scalar = len(rhs.indices) == 1 and isinstance(rhs.indices[0], E.IntImm) and \
                rhs.indices[0].value == 0
            if not scalar and not all(isinstance(i, E.Var) for i in rhs.indices):
                return False
            self.lhs_indices[id(lbuf)] = [_simplified(i, self.ranges) for i in lhs.indices]
            self.rhs_indices[id(rbuf)] = list(rhs.indices)
            return True
        return self._same(lhs.indices, self.lhs_indices[id(lbuf)]) and \
            self._same(rhs.indices, self.rhs_indices[id(rbuf)])

    def _same(self, indices, seen) -> bool:
        if len(indices) != len(seen):
            return False
        for a, b in zip(indices, seen):
            d = simplify(E.convert(a) - E.convert(b), self.ranges)
            if not (isinstance(d, E.IntImm) and d.value == 0):
                return False
        return True

    # -- the proposal
    def propose(self) -> IndexMap | None:
        """The map from the block's iterators to (its unmatched iterators, then one fused index per
        description iterator), or None when an iterator could go to several description
        iterators or a description iterator gets none."""
        slot = {rid: n for n, rid in enumerate(self.pairs)}
        rhs_masks, lhs_masks = {}, {}

        def mark(masks, var, n):
            masks.setdefault(id(var), [False] * len(slot))[n] = True

        for rid, (rbuf, lbuf) in self.pairs.items():
            n = slot[rid]
            for index in self.rhs_indices.get(rid, []):
                if isinstance(index, E.Var):
                    mark(rhs_masks, index, n)
            for index in self.lhs_indices.get(id(lbuf), []):
                pre_order_visit(index, lambda node, n=n: mark(lhs_masks, node, n)
                                if isinstance(node, E.Var) else None)
        src = [E.Var(iv.var.name, iv.var.dtype) for iv in self.lhs_iters]
        fused = {id(iv.var): None for iv in self.rhs_iters}
        unmatched = []
        for iv, new in zip(self.lhs_iters, src):
            mask = lhs_masks.get(id(iv.var))
            candidates = [r for r in self.rhs_iters if mask is not None and
                          rhs_masks.get(id(r.var)) == mask and r.iter_type == iv.iter_type]
            if not candidates:
                unmatched.append(new)
            elif len(candidates) > 1:
                return None
            else:
                key = id(candidates[0].var)
                fused[key] = new if fused[key] is None else fused[key] * iv.dom.extent + new
        if any(f is None for f in fused.values()):
            return None
        return IndexMap(src, unmatched + [simplify(f) for f in fused.values()])


def _simplified(index, ranges):
    """``index`` simplified, except that one folding to a constant keeps its form (so the
    iterators it mentions still count as indexing its buffer, as the reference compiler does)."""
    out = simplify(index, ranges)
    return index if isinstance(out, E.IntImm) else out
