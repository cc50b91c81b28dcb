# AnnotateTIROpPattern: set the attr "op_pattern" (TVM's OpPatternKind, an int) on every PrimFunc by
# looking at how its blocks index the buffers they read and write. Expects block-form PrimFuncs.
"""``relax.transform.AnnotateTIROpPattern()``: classify PrimFuncs for FuseOps.

The kinds, in increasing generality (``OP_PATTERN``)::

    0 elemwise             every load reads at exactly the store's indices:  C[i, j] = A[i, j] + B[i, j]
    1 broadcast            loads read at a subsequence of the indices:      C[i, j] = A[i, j] + b[j]
    2 injective            spatial, loads index with the store's variables:  T[j, i] = A[i, j]
    3 comm_reduce          a reduction whose loads index with plain iterators: s[i] += A[i, k]
    4 out_elemwise_fusable a multiply-accumulate (matmul, conv2d) or a window reduction (pooling)
    8 opaque               anything else

A function's kind is the most general kind of its blocks (a matmul followed by a bias add is 4).
A function that already has "op_pattern" keeps it.
"""
from __future__ import annotations

from ...ir.transform import Pass, PassInfo
from ...tir.expr import Add, BufferLoad, Cast, Mul, Var
from ...tir.function import PrimFunc
from ...tir.functor import StmtExprVisitor
from ...tir.stmt_functor import free_vars, uses_var
from ...tir.stmt import Block, BufferStore

OP_PATTERN = {"elemwise": 0, "broadcast": 1, "injective": 2, "comm_reduce": 3,
              "out_elemwise_fusable": 4, "tuple": 7, "opaque": 8}
ELEMWISE, BROADCAST, INJECTIVE, COMM_REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 0, 1, 2, 3, 4, 8


class _Accesses(StmtExprVisitor):
    """The loads and stores of one block's body (not of nested blocks)."""

    def __init__(self):
        self.loads, self.stores = [], []

    def visit_BufferLoad(self, load):
        self.loads.append(load)
        self.generic_visit(load)

    def visit_BufferStore(self, store):
        self.stores.append(store)
        self.generic_visit(store)

    def visit_Block(self, block):
        pass


class _Blocks(StmtExprVisitor):
    def __init__(self):
        self.blocks = []

    def visit_Block(self, block):
        if block.iter_vars or block.name_hint != "root":
            self.blocks.append(block)
        self.generic_visit(block)


def _same_indices(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _is_broadcast(store: BufferStore, load: BufferLoad) -> bool:
    """Each load index (skipping unit dimensions read at 0) is a store index, in order."""
    j = 0
    for dim, index in zip(load.buffer.shape, load.indices):
        if getattr(dim, "value", None) == 1 and getattr(index, "value", None) == 0:
            continue
        while j < len(store.indices) and store.indices[j] is not index:
            j += 1
        if j == len(store.indices):
            return False
        j += 1
    return True


def _is_injective(store: BufferStore, load: BufferLoad) -> bool:
    if not all(isinstance(i, Var) for i in store.indices):
        return False
    return all(any(v is i for i in store.indices) for v in free_vars(load.indices, buffer_shapes=True))


def _strip_cast(e):
    while isinstance(e, Cast):
        e = e.value
    return e


def _is_fma(store: BufferStore) -> bool:
    """``C[...] = C[...] + A[...] * B[...]`` (casts allowed around the loads)."""
    value = store.value
    if not isinstance(value, Add):
        return False
    acc, product = _strip_cast(value.a), _strip_cast(value.b)
    return (isinstance(acc, BufferLoad) and acc.buffer is store.buffer
            and _same_indices(acc.indices, store.indices) and isinstance(product, Mul)
            and isinstance(_strip_cast(product.a), BufferLoad)
            and isinstance(_strip_cast(product.b), BufferLoad))


def _is_pure_reduce(reduce_vars: set, load: BufferLoad) -> bool:
    """Every index using a reduction iterator is that iterator alone."""
    return all(index in reduce_vars or not uses_var(index, reduce_vars) for index in load.indices)


def block_pattern(block: Block) -> int:
    """The OpPatternKind of one block."""
    accesses = _Accesses()
    accesses.visit(block.body)
    if len(accesses.stores) != 1:
        return OPAQUE
    store = accesses.stores[0]
    reduce_vars = {iv.var for iv in block.iter_vars if iv.iter_type == "reduce"}
    loads = [ld for ld in accesses.loads
             if not (ld.buffer is store.buffer and _same_indices(ld.indices, store.indices))]
    if reduce_vars:
        if _is_fma(store) or not all(_is_pure_reduce(reduce_vars, ld) for ld in loads):
            return OUT_EWISE_FUSABLE
        return COMM_REDUCE
    kind, has_elemwise = ELEMWISE, False
    for load in loads:
        if _same_indices(load.indices, store.indices):
            has_elemwise = True
        elif _is_broadcast(store, load):
            kind = max(kind, BROADCAST)
        elif _is_injective(store, load):
            kind = max(kind, INJECTIVE)
        else:
            return OPAQUE
    return ELEMWISE if kind == BROADCAST and has_elemwise else kind


def func_blocks(func: PrimFunc) -> list:
    """The blocks of a PrimFunc in order, without its root block."""
    blocks = _Blocks()
    blocks.visit(func.body)
    return blocks.blocks


def analyze_op_pattern(func: PrimFunc) -> int:
    """The OpPatternKind of a PrimFunc: the most general kind among its blocks."""
    blocks = func_blocks(func)
    if not blocks:
        return OPAQUE
    return max(block_pattern(b) for b in blocks)


class AnnotateTIROpPattern(Pass):
    def __init__(self):
        self.info = PassInfo(0, "AnnotateTIROpPattern")

    def transform_module(self, mod, ctx):
        out = type(mod)(mod.functions, mod.attrs)
        for gv, func in mod.functions.items():
            if isinstance(func, PrimFunc) and "op_pattern" not in func.attr_dict:
                out[gv] = func.with_attr("op_pattern", analyze_op_pattern(func))
        return out
