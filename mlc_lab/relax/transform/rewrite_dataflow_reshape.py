# RewriteDataflowReshape: a kernel that only reshapes (flatten, reshape) becomes an R.reshape,
# which the VirtualMachine runs as a view of the same memory. Expects relax functions.
"""``relax.transform.RewriteDataflowReshape()``: reshapes cost nothing.

Before::

    lv5 = R.call_tir(cls.flatten, (lv4,), out_sinfo=R.Tensor((64, 2704), "float32"))

After::

    lv5 = R.reshape(lv4, R.shape([64, 2704]))

A PrimFunc is a reshape when it copies its one input into its one output of the same dtype and
size, each element to the position of the same rank in row-major order: checked by evaluating
both indices over the whole (static) domain of the copy, so nothing about how the legalized code
wrote its divisions matters. Tensors are contiguous, so the VirtualMachine runs ``R.reshape`` as
a view of its input's memory; ``relax.lifetime`` counts uses of the view as uses of the input, so
the memory plan keeps the input's storage until the view's last use.
"""
from __future__ import annotations

import numpy as np

from ...ir import hooks
from ...ir.module import GlobalVar
from ...ir.transform import Pass, PassInfo
from ...tir import expr as E
from ...tir import stmt as S
from ...tir.function import PrimFunc
from ...tir.stmt_functor import post_order_visit
from ..analysis import is_call_tir
from ..expr import Call, Function, ShapeExpr
from ..functor import ExprMutator
from ..op.manipulate import reshape
from ..struct_info import TensorStructInfo

MAX_CHECKED = 1 << 24   # elements: beyond, a copy is kept as a kernel


def is_reshape(func: PrimFunc) -> bool:
    """Whether ``func`` copies its one input to its one output element by element in row-major
    order (see the module docstring)."""
    params = func.buffer_params if hasattr(func, "buffer_params") else \
        [func.buffer_map[p] for p in func.params if p in func.buffer_map]
    if len(params) != 2 or len(func.params) != 2:
        return False
    src, dst = params
    shapes = [_static(b.shape) for b in (src, dst)]
    if None in shapes or src.dtype != dst.dtype or np.prod(shapes[0]) != np.prod(shapes[1]) \
            or not 0 < np.prod(shapes[1]) <= MAX_CHECKED:
        return False
    blocks = []
    post_order_visit(func.body, lambda n: blocks.append(n) if isinstance(n, S.Block) else None)
    copies = [b for b in blocks if b.iter_vars]
    if len(copies) != 1 or any(b.alloc_buffers for b in blocks) or copies[0].init is not None:
        return False
    block = copies[0]
    store = block.body
    if not (isinstance(store, S.BufferStore) and store.buffer is dst
            and isinstance(store.value, E.BufferLoad) and store.value.buffer is src
            and all(iv.iter_type == "spatial" for iv in block.iter_vars)):
        return False
    return _same_ranks(block, store.indices, store.value.indices, shapes)


def _static(shape):
    dims = [d.value if isinstance(d, E.IntImm) else None for d in shape]
    return None if None in dims else tuple(dims)


def _same_ranks(block, out_indices, in_indices, shapes) -> bool:
    """Over the block's domain, the store reaches every output element once, and each at the
    row-major rank of the element it loads."""
    lows = [iv.dom.min for iv in block.iter_vars]
    exts = [iv.dom.extent for iv in block.iter_vars]
    if not all(isinstance(x, E.IntImm) for x in lows + exts):
        return False
    # one axis per iterator (sparse): an index evaluates to an array over the iterators it
    # uses, and only the ranks compared at the end are spread over the whole domain
    grid = tuple(ext.value for ext in exts)
    count = int(np.prod(grid))
    if count != int(np.prod(shapes[1])):
        return False
    axes = np.meshgrid(*[np.arange(lo.value, lo.value + ext.value, dtype=np.int64)
                         for lo, ext in zip(lows, exts)], indexing="ij", sparse=True)
    evaluator = hooks.need("runtime.evaluator")({iv.var: a for iv, a in zip(block.iter_vars, axes)}, {})
    try:
        ranks = []
        for indices, shape in ((out_indices, shapes[1]), (in_indices, shapes[0])):
            cols = [np.asarray(evaluator.eval(i), np.int64) for i in indices]
            if any((c < 0).any() or (c >= n).any() for c, n in zip(cols, shape)):
                return False
            rank = np.ravel_multi_index(cols, shape) if cols else np.zeros((), np.int64)
            ranks.append(np.broadcast_to(rank, grid))   # ravel_multi_index broadcasts the axes
    except RuntimeError:
        return False
    out_rank, in_rank = ranks
    # ranks lie in [0, count) (checked above): every one reached once when none is reached twice
    return bool(np.array_equal(out_rank, in_rank)) \
        and int(np.bincount(out_rank.ravel(), minlength=count).max()) == 1


class _Rewriter(ExprMutator):
    def __init__(self, mod, reshapes: set):
        super().__init__(mod)
        self.reshapes = reshapes

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if not is_call_tir(call) or len(call.args) > 2:
            return call
        gv, args = call.args[0], call.args[1].elements
        out = call.sinfo_args
        if not isinstance(gv, GlobalVar) or gv.name_hint not in self.reshapes or len(args) != 1 \
                or len(out) != 1 or not isinstance(out[0], TensorStructInfo) \
                or out[0].static_shape is None:
            return call
        return reshape(args[0], ShapeExpr(out[0].shape))


class RewriteDataflowReshape(Pass):
    def __init__(self):
        self.info = PassInfo(0, "RewriteDataflowReshape")

    def transform_module(self, mod, ctx):
        reshapes = {gv.name_hint for gv, f in mod.functions.items()
                    if isinstance(f, PrimFunc) and is_reshape(f)}
        if not reshapes:
            return mod
        rewriter = _Rewriter(mod, reshapes)
        out = type(mod)(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                out[gv] = rewriter.visit_expr(func)
        return out


__all__ = ["RewriteDataflowReshape", "is_reshape"]
