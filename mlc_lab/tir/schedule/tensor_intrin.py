"""Tensor intrinsics for sch.tensorize: a description (what a hardware instruction computes, as a
small prim_func) and an implementation (what to put in its place), and the matching of a block
against a description."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...arith import simplify
from .. import expr as E
from .. import stmt as S
from ..buffer import BUFFER_ELEM_OFFSET, Buffer
from ..function import PrimFunc
from ..functor import StmtExprMutator
from . import errors
from ..stmt_functor import Freshen, substitute


@dataclass(frozen=True)
class TensorIntrin:
    """A registered pair of prim_funcs: ``desc`` is matched against a block's body, ``impl``
    replaces it. Both take the same buffers (same count, shapes and dtypes, in the same order).

    >>> @T.prim_func
    ... def add4_desc(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    ...     for i in range(4):
    ...         with T.block("add"):
    ...             vi = T.axis.spatial(4, i)
    ...             B[vi] = B[vi] + A[vi]
    >>> intrin = tir.schedule.TensorIntrin.register("doc_add4", add4_desc, add4_desc, override=True)
    >>> tir.schedule.TensorIntrin.get("doc_add4") is intrin
    True
    """
    desc: PrimFunc
    impl: PrimFunc
    _registry: ClassVar[dict] = {}

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> "TensorIntrin":
        """Register ``desc``/``impl`` under ``name``; a taken name needs ``override=True``."""
        if not isinstance(name, str):
            raise TypeError(f"TensorIntrin.register: the name must be a str, got {name!r}")
        for what, f in (("desc", desc), ("impl", impl)):
            if not isinstance(f, PrimFunc):
                raise TypeError(f"TensorIntrin.register: {what} must be a T.prim_func, got {type(f).__name__}")
        if name in TensorIntrin._registry and not override:
            raise ValueError(f"a tensor intrinsic named {name!r} is already registered; pass "
                             "override=True to replace it")
        d, i = desc.buffer_params, impl.buffer_params
        if len(d) != len(i):
            raise ValueError(f"tensor intrinsic {name!r}: desc takes {len(d)} buffers but impl {len(i)}")
        for a, b in zip(d, i):
            if a.dtype != b.dtype or len(a.shape) != len(b.shape) or not all(
                    _same_int(x, y) for x, y in zip(a.shape, b.shape)):
                raise ValueError(f"tensor intrinsic {name!r}: desc buffer {a.name} {_shape(a)} "
                                 f"{a.dtype} does not match impl buffer {b.name} {_shape(b)} {b.dtype}")
        intrin = TensorIntrin(desc, impl)
        TensorIntrin._registry[name] = intrin
        return intrin

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> "TensorIntrin | None":
        """The intrinsic registered under ``name``; a missing one is None with ``allow_missing``,
        else a ValueError (as the reference compiler raises)."""
        intrin = TensorIntrin._registry.get(name)
        if intrin is None and not allow_missing:
            known = ", ".join(sorted(TensorIntrin._registry)) or "none"
            raise ValueError(f"no tensor intrinsic named {name!r} is registered (registered: {known}); "
                             "register one with TensorIntrin.register(name, desc, impl), or import "
                             "mlc_lab.tir.tensor_intrin for the library of hardware intrinsics")
        return intrin


def _shape(buffer: Buffer) -> str:
    return "(" + ", ".join(str(s) for s in buffer.shape) + ")"


def _root_body(func: PrimFunc) -> S.Stmt:
    body = func.body
    if isinstance(body, S.BlockRealize) and body.block.name_hint == "root" and not body.block.iter_vars:
        return body.block.body
    return body


# -- matching ---------------------------------------------------------------------------------

class _Mismatch(Exception):
    pass


def match(realize: S.BlockRealize, intrin: TensorIntrin, name: str, func, culprit) -> list:
    """For each buffer parameter of ``intrin.desc``, the region of the block's buffer it stands
    for; raises TensorizeError naming the first difference."""
    matcher = _Matcher(realize.block)
    try:
        matcher.stmt(realize.block.body, _root_body(intrin.desc))
        regions = []
        for param in intrin.desc.buffer_params:
            if id(param) not in matcher.buffers:
                raise _Mismatch(f"the intrinsic's buffer {param.name} is not used by its description")
            regions.append(matcher.region(param))
    except _Mismatch as exc:
        raise errors.TensorizeError(
            "tensorize", f'block "{realize.block.name_hint}" does not match tensor intrinsic '
            f"{name!r}: {exc}", func, [culprit]) from None
    return regions


class _Matcher:
    """Walks the block's body and the description side by side, mapping the description's
    variables and buffers to the block's."""

    def __init__(self, block: S.Block):
        self.vars: dict[int, tuple] = {}   # id(description var) -> (that var, the block's var)
        self.buffers: dict[int, Buffer] = {}
        self.offsets: dict[int, list] = {}
        self.block = block
        self.ranges = {iv.var: iv.dom for iv in block.iter_vars}   # grows with the inner blocks'
        self.regions = {}
        for r in block.reads + block.writes:
            self.regions.setdefault(id(r.buffer), r)

    # statements
    def stmt(self, lhs, rhs) -> None:
        if type(lhs) is not type(rhs):
            raise _Mismatch(f"the block has {_what(lhs)} where the intrinsic has {_what(rhs)}")
        getattr(self, "stmt_" + type(lhs).__name__, self.stmt_generic)(lhs, rhs)

    def stmt_For(self, lhs: S.For, rhs: S.For) -> None:
        le, re = simplify(lhs.extent), simplify(rhs.extent)
        if not (isinstance(le, E.IntImm) and isinstance(re, E.IntImm) and le.value == re.value):
            raise _Mismatch(f"the loop extents {le} (loop {lhs.loop_var.name}) do not match the "
                            f"intrinsic's {re} (loop {rhs.loop_var.name})")
        self.expr(lhs.min, rhs.min)
        self.bind(rhs.loop_var, lhs.loop_var)
        self.ranges[lhs.loop_var] = S.Range(lhs.min, lhs.extent)
        self.stmt(lhs.body, rhs.body)

    def stmt_BlockRealize(self, lhs: S.BlockRealize, rhs: S.BlockRealize) -> None:
        lb, rb = lhs.block, rhs.block
        if len(lb.iter_vars) != len(rb.iter_vars):
            raise _Mismatch(f'block "{lb.name_hint}" has {len(lb.iter_vars)} iterators but the '
                            f'intrinsic\'s block "{rb.name_hint}" has {len(rb.iter_vars)}')
        for liv, riv in zip(lb.iter_vars, rb.iter_vars):
            if liv.iter_type != riv.iter_type:
                raise _Mismatch(f"iterator {liv.var.name} is {liv.iter_type} but the intrinsic's "
                                f"{riv.var.name} is {riv.iter_type}")
            for a, b in ((liv.dom.min, riv.dom.min), (liv.dom.extent, riv.dom.extent)):
                if not _same_int(a, b):
                    raise _Mismatch(f"iterator {liv.var.name} ranges over {_range(liv.dom)} but the "
                                    f"intrinsic's {riv.var.name} over {_range(riv.dom)}")
            self.bind(riv.var, liv.var)
            self.ranges[liv.var] = liv.dom
        for lv, rv in zip(lhs.iter_values, rhs.iter_values):
            self.expr(lv, rv)
        self.expr(simplify(lhs.predicate), simplify(rhs.predicate))
        if (lb.init is None) != (rb.init is None):
            raise _Mismatch(f'block "{lb.name_hint}" {"has" if lb.init else "has no"} init but the '
                            f'intrinsic\'s block "{rb.name_hint}" {"has" if rb.init else "has no"} init')
        if lb.init is not None:
            self.stmt(lb.init, rb.init)
        self.stmt(lb.body, rb.body)

    def stmt_BufferStore(self, lhs: S.BufferStore, rhs: S.BufferStore) -> None:
        self.access(lhs.buffer, lhs.indices, rhs.buffer, rhs.indices)
        self.expr(lhs.value, rhs.value)

    def stmt_SeqStmt(self, lhs: S.SeqStmt, rhs: S.SeqStmt) -> None:
        if len(lhs.seq) != len(rhs.seq):
            raise _Mismatch(f"the block runs {len(lhs.seq)} statements in sequence where the "
                            f"intrinsic runs {len(rhs.seq)}")
        for a, b in zip(lhs.seq, rhs.seq):
            self.stmt(a, b)

    def stmt_generic(self, lhs, rhs) -> None:
        for (name, a), (_, b) in zip(lhs.fields(), rhs.fields()):
            if isinstance(a, S.Stmt) or isinstance(b, S.Stmt):
                self.stmt(a, b)
            elif isinstance(a, E.PrimExpr):
                self.expr(a, b)
            elif isinstance(a, E.Var):
                self.bind(b, a)

    # expressions
    def expr(self, lhs, rhs) -> None:
        if isinstance(rhs, E.Var):
            mapped = self.vars.get(id(rhs))
            if mapped is None or lhs is not mapped[1]:
                raise _Mismatch(f"the block uses {lhs} where the intrinsic uses {rhs}")
            return
        if type(lhs) is not type(rhs):
            raise _Mismatch(f"the block computes {lhs} where the intrinsic computes {rhs}")
        if isinstance(lhs, E.IntImm) and _index_dtype(lhs.dtype) and _index_dtype(rhs.dtype):
            if lhs.value != rhs.value:   # int32 and int64 indices are the same numbers
                raise _Mismatch(f"the block computes {lhs} where the intrinsic computes {rhs}")
            return
        if isinstance(lhs, E.BufferLoad):
            return self.access(lhs.buffer, lhs.indices, rhs.buffer, rhs.indices)
        for (name, a), (_, b) in zip(lhs.fields(), rhs.fields()):
            if isinstance(a, E.PrimExpr):
                self.expr(a, b)
            elif isinstance(a, tuple):
                if len(a) != len(b):
                    raise _Mismatch(f"the block computes {lhs} where the intrinsic computes {rhs}")
                for x, y in zip(a, b):
                    self.expr(x, y)
            elif a != b:
                raise _Mismatch(f"the block computes {lhs} where the intrinsic computes {rhs}")

    def access(self, lbuf: Buffer, lidx: tuple, rbuf: Buffer, ridx: tuple) -> None:
        self.buffer(lbuf, rbuf)
        mins = self.offsets[id(rbuf)]
        extra = len(lidx) - len(ridx)
        for d, index in enumerate(lidx):
            expected = mins[d] if d < extra else mins[d] + self.translate(ridx[d - extra])
            if not _is_zero(simplify(index - expected, self.ranges)):
                shown = ", ".join(str(i) for i in ridx)
                raise _Mismatch(f"the block accesses {lbuf.name}[{', '.join(str(i) for i in lidx)}] "
                                f"where the intrinsic accesses {rbuf.name}[{shown}] (dimension {d} "
                                f"should be {simplify(expected)})")

    def buffer(self, lbuf: Buffer, rbuf: Buffer) -> None:
        known = self.buffers.get(id(rbuf))
        if known is not None:
            if known is not lbuf:
                raise _Mismatch(f"the intrinsic's buffer {rbuf.name} stands for both {known.name} and "
                                f"{lbuf.name}")
            return
        if lbuf.dtype != rbuf.dtype:
            raise _Mismatch(f"buffer {lbuf.name} has dtype {lbuf.dtype} but the intrinsic's "
                            f"{rbuf.name} has {rbuf.dtype}")
        if lbuf.scope != rbuf.scope:
            raise _Mismatch(f'buffer {lbuf.name} is in scope "{lbuf.scope}" but the intrinsic\'s '
                            f'{rbuf.name} must be in "{rbuf.scope}"')
        region = self.regions.get(id(lbuf))
        if region is None or lbuf.ndim < rbuf.ndim:
            raise _Mismatch(f"buffer {lbuf.name} cannot stand for the intrinsic's {rbuf.ndim}-d buffer "
                            f"{rbuf.name}")
        extra = lbuf.ndim - rbuf.ndim
        for d, rng in enumerate(region.region):
            want = E.const(1) if d < extra else rbuf.shape[d - extra]
            if not _same_int(rng.extent, want):
                raise _Mismatch(f"the block accesses a region of {lbuf.name} of extent {rng.extent} in "
                                f"dimension {d} but the intrinsic's {rbuf.name} has extent {want}")
        self.buffers[id(rbuf)] = lbuf
        self.offsets[id(rbuf)] = [rng.min for rng in region.region]

    def bind(self, desc_var: E.Var, var: E.Var) -> None:
        self.vars[id(desc_var)] = (desc_var, var)

    def translate(self, desc_expr):
        """A description expression in terms of the block's variables."""
        return substitute(desc_expr, {dv: v for dv, v in self.vars.values()})

    def region(self, rbuf: Buffer) -> S.BufferRegion:
        return self.regions[id(self.buffers[id(rbuf)])]


def _what(node) -> str:
    if isinstance(node, S.For):
        return f"loop {node.loop_var.name}"
    if isinstance(node, S.BlockRealize):
        return f'block "{node.block.name_hint}"'
    return f"a {type(node).__name__}"


def _range(rng: S.Range) -> str:
    return f"[{rng.min}, {simplify(rng.min + rng.extent)})"


def _same_int(a, b) -> bool:
    return _is_zero(simplify(E.convert(a) - E.convert(b)))


def _index_dtype(dtype: str) -> bool:
    return dtype in ("int32", "int64")


def _is_zero(e) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


# -- instantiating the implementation -------------------------------------------------------------

def instantiate(intrin: TensorIntrin, regions: list, taken_names: set) -> tuple:
    """(body, match_buffers): the impl's body with fresh variables and buffers, its parameters
    declared as views of ``regions``; its blocks are renamed where ``taken_names`` has their name
    (blocks are found by name)."""
    params = intrin.impl.buffer_params
    fresh = {id(p): p.replace() for p in params}
    match_buffers = tuple(S.MatchBufferRegion(fresh[id(p)], region) for p, region in zip(params, regions))
    body = Freshen(fresh, set(taken_names)).visit(_root_body(intrin.impl))
    starts = {id(m.buffer): _region_start(m.source) for m in match_buffers}
    return _ElemOffsets(starts).visit(body), match_buffers


def _region_start(region: S.BufferRegion) -> E.PrimExpr:
    """Where ``region`` starts in its buffer's storage, in elements (row-major, or the strides)."""
    buffer = region.buffer
    strides = list(buffer.strides)
    if not strides:
        step = E.const(1, region.region[-1].min.dtype) if region.region else E.const(0)
        for dim in reversed(buffer.shape):
            strides.insert(0, step)
            step = step * dim
    total = E.const(0, strides[0].dtype if strides else "int32")
    for rng, stride in zip(region.region, strides):
        total = total + rng.min * stride
    return simplify(total)


class _ElemOffsets(StmtExprMutator):
    """An implementation's ``X.elem_offset`` made the start of the region X now views."""

    def __init__(self, starts: dict):
        super().__init__()
        self.starts = starts

    def visit_Call(self, call):
        if call.op == BUFFER_ELEM_OFFSET and id(call.args[0].buffer) in self.starts:
            start = self.starts[id(call.args[0].buffer)]
            return start if start.dtype == call.dtype else E.Cast(call.dtype, start)
        return self.generic_visit(call)


def merged_annotations(annotations: tuple, intrin: TensorIntrin) -> tuple:
    """The block's ``annotations`` plus those of the impl's root block (``T.block_attr`` next to
    the instruction), as the reference compiler merges them; where both set a key, the block's
    value stays."""
    body = intrin.impl.body
    extra = body.block.annotations if isinstance(body, S.BlockRealize) and body.block.name_hint == "root" else ()
    keys = {k for k, _ in annotations}
    return tuple(annotations) + tuple((k, v) for k, v in extra if k not in keys)
