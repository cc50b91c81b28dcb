"""ScheduleState and StmtSRef, as the reference compiler names them: a module being scheduled in
which every loop and block has a handle (an sref) that knows its statement and its parent, the
dependencies between the blocks of each scope, and three facts per block (the cached flags:
affine binding, region cover, stage pipeline).

mlc_lab's IR is immutable and a Schedule rebuilds its module at every step, so srefs here are a
view kept in step with the module: the state walks the module and gives each For and Block an
sref, and after a change it walks the new module and hands the old srefs on to the statements
that carry on (the same object; a loop with the same loop variable; in a Schedule, a block with
the same name; in ``replace``, the blocks of ``block_sref_reuse`` and the blocks above the
replaced statement). An sref whose statement is gone points to nothing: ``stmt`` is None. The
flags and scopes are computed from the current module when asked for.

What the reference compiler also does and mlc_lab cannot: ``replace`` writes a node in place
when the state holds the only reference to it (copy-on-write). mlc_lab never mutates IR, so
``replace`` always builds new nodes along the path to the replaced statement, and the module,
function and statements a caller held before keep their old content.
"""
from __future__ import annotations

import enum
import weakref
from collections import namedtuple

from ...arith import can_prove, simplify
from ...arith.simplify import linear_form
from ...ir.module import IRModule
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..stmt_functor import conjuncts, substitute, uses_var
from ..verify import verify
from .func_index import child_blocks, replace_stmts
from .kinds import DepKind
from .primitives.injective import affine_problem
from ..intervals import Interval, comparisons, relax, relax_region
from .primitives.scope import const_int

CachedFlags = namedtuple("CachedFlags", ["affine_binding", "region_cover", "stage_pipeline"])


class ScheduleDebugMask(enum.IntEnum):
    """The bits of ``debug_mask``: verify the sref tree, verify the cached flags."""
    VERIFY_SREF_TREE = 1
    VERIFY_CACHED_FLAGS = 2


class StmtSRef:
    """A handle onto a For or a Block of a ScheduleState's module: ``stmt`` (None once the
    statement is gone), ``parent`` (the sref of the nearest enclosing loop or block; None for a
    function's outermost one) and ``seq_index`` (its place in the SeqStmt holding it, else -1).
    srefs compare by identity: ``a.same_as(b)``."""
    __slots__ = ("_stmt", "_parent", "_seq_index", "_state", "_func")

    def __init__(self, stmt=None, parent=None, seq_index: int = -1):
        self._stmt, self._parent, self._seq_index = stmt, parent, seq_index
        self._state, self._func = None, None

    def _current(self):
        if self._state is not None:
            self._state._refresh()
        return self

    @property
    def stmt(self):
        """The Block or For this sref points to, as the module now has it (None if gone)."""
        return self._current()._stmt

    @property
    def parent(self) -> "StmtSRef | None":
        return self._current()._parent

    @property
    def seq_index(self) -> int:
        return self._current()._seq_index

    def same_as(self, other) -> bool:
        return self is other

    @staticmethod
    def inline_mark() -> "StmtSRef":
        """The sref that points to nothing and, given to compute_at's location sampling, means
        "inline the block"."""
        return _INLINE_MARK

    @staticmethod
    def root_mark() -> "StmtSRef":
        """The sref that points to nothing and means "leave the block where it is"."""
        return _ROOT_MARK

    def __repr__(self) -> str:
        stmt = self._stmt
        if isinstance(stmt, S.Block):
            return f'StmtSRef(block "{stmt.name_hint}")'
        if isinstance(stmt, S.For):
            return f"StmtSRef(loop {stmt.loop_var.name})"
        return "StmtSRef(None)"


_INLINE_MARK = StmtSRef()
_ROOT_MARK = StmtSRef()


class Dependency:
    """``dst`` depends on ``src`` (both block srefs of one scope), of kind ``kind`` (DepKind)."""
    __slots__ = ("src", "dst", "kind")

    def __init__(self, src: StmtSRef, dst: StmtSRef, kind: DepKind):
        self.src, self.dst, self.kind = src, dst, kind

    def __repr__(self) -> str:
        return f"Dependency({self.src!r} -> {self.dst!r}, {self.kind.name})"


class BlockScope:
    """The dependencies between the child blocks of one block (those under it, not inside
    another block; a T.init is not looked into), found in program order: a block that reads a
    buffer an earlier one writes depends on it RAW, one that writes a buffer an earlier one
    writes WAW, one that writes a buffer an earlier one reads WAR."""

    def __init__(self, child_srefs: list):
        self.child_srefs = list(child_srefs)
        self._by_src: dict = {}
        self._by_dst: dict = {}
        readers: dict = {}
        writers: dict = {}
        for sref in self.child_srefs:
            block = sref._stmt
            for region in block.reads:
                readers.setdefault(id(region.buffer), []).append(sref)
            for region in block.writes:
                writers.setdefault(id(region.buffer), []).append(sref)
            for kind, regions, earlier in ((DepKind.RAW, block.reads, writers),
                                           (DepKind.WAW, block.writes, writers),
                                           (DepKind.WAR, block.writes, readers)):
                for region in regions:
                    for src in earlier.get(id(region.buffer), ()):
                        if src is not sref:
                            dep = Dependency(src, sref, kind)
                            self._by_src.setdefault(id(src), []).append(dep)
                            self._by_dst.setdefault(id(sref), []).append(dep)

    def get_deps_by_src(self, block_sref: StmtSRef) -> list:
        """The dependencies whose ``src`` is ``block_sref``."""
        return list(self._by_src.get(id(block_sref), ()))

    def get_deps_by_dst(self, block_sref: StmtSRef) -> list:
        """The dependencies whose ``dst`` is ``block_sref``."""
        return list(self._by_dst.get(id(block_sref), ()))


class ScheduleState:
    """The module being scheduled (``mod``) with an sref for each of its loops and blocks
    (``get_sref``), the dependencies of each block scope (``get_block_scope``) and the cached
    flags of each block, and ``replace``, which swaps one loop or block for another statement
    and keeps the srefs of what carries on.

    ``tir.ScheduleState(mod)`` takes an IRModule or a PrimFunc (as "main"); ``sch.state`` is the
    state of a Schedule, which follows the schedule's module as its primitives change it.
    ``debug_mask`` ("all", "none" or ScheduleDebugMask bits): any bit verifies each function when
    the state is made. The sref tree and the flags need no verification after a change: they
    are rebuilt from the module itself.

    Example:

    >>> @T.prim_func
    ... def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    ...     S = T.alloc_buffer((8,))
    ...     for i, k in T.grid(8, 8):
    ...         with T.block("S"):
    ...             vi, vk = T.axis.remap("SR", [i, k])
    ...             with T.init():
    ...                 S[vi] = T.float32(0)
    ...             S[vi] = S[vi] + A[vi, vk]
    ...     for i in range(8):
    ...         with T.block("B"):
    ...             vi = T.axis.spatial(8, i)
    ...             B[vi] = S[vi] * T.float32(0.5)
    >>> state = tir.ScheduleState(f)
    >>> loop = state.mod["main"].body.block.body[1]
    >>> sref = state.get_sref(loop)
    >>> sref, sref.parent, sref.seq_index
    (StmtSRef(loop i), StmtSRef(block "root"), 1)
    >>> root, b = sref.parent, state.get_sref(loop.body.block)
    >>> [(d.src, d.dst, d.kind.name) for d in state.get_block_scope(root).get_deps_by_dst(b)]
    [(StmtSRef(block "S"), StmtSRef(block "B"), 'RAW')]
    >>> state._get_cached_flags(root)
    CachedFlags(affine_binding=True, region_cover=True, stage_pipeline=True)
    """

    def __init__(self, mod, *, debug_mask="none", enable_check: bool = True):
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise TypeError(f"ScheduleState expects an IRModule or PrimFunc, got {type(mod).__name__}")
        self.debug_mask = parse_debug_mask(debug_mask)
        if not isinstance(enable_check, bool):
            raise TypeError(f"ScheduleState: enable_check expects a bool, got {enable_check!r}")
        self.enable_check = enable_check
        if self.debug_mask:
            for gv in mod.get_global_vars():
                if isinstance(mod[gv], PrimFunc):
                    verify(mod[gv])
        self._owner = None          # weakref to the Schedule whose module this state follows
        self._mod = None
        self._srefs: dict = {}      # id(stmt) -> StmtSRef
        self._realize_of: dict = {}  # id(block) -> its BlockRealize
        self._scopes: dict = {}     # id(block sref) -> (BlockScope, {id(child sref): covered}, stage pipeline)
        self._rebuild(mod, _Matcher([]))

    @classmethod
    def _following(cls, schedule) -> "ScheduleState":
        """The state of ``schedule``: it follows ``schedule._mod`` as the primitives change it
        (blocks keep their srefs by name, as BlockRVs do), and ``replace`` installs the new
        module in the schedule."""
        state = cls.__new__(cls)
        state.debug_mask, state.enable_check = 0, True
        state._owner, state._mod = weakref.ref(schedule), None
        state._srefs, state._realize_of, state._scopes = {}, {}, {}
        state._rebuild(schedule._mod, _Matcher([]))
        return state

    # -- the module and its srefs -----------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        self._refresh()
        return self._mod

    def _refresh(self) -> None:
        owner = self._owner() if self._owner is not None else None
        if owner is not None and owner._mod is not self._mod:
            self._rebuild(owner._mod, _Matcher(list(self._srefs.values()), renamed=owner._renamed))

    def get_sref(self, stmt) -> StmtSRef | None:
        """The sref of a Block or For of the module (a BlockRealize gives its block's); None for
        a statement that is not one of the module's loops or blocks."""
        self._refresh()
        if isinstance(stmt, S.BlockRealize):
            stmt = stmt.block
        sref = self._srefs.get(id(stmt))
        return sref if sref is not None and sref._stmt is stmt else None

    def get_block_scope(self, block_sref: StmtSRef) -> BlockScope:
        """The dependencies between the child blocks of the block ``block_sref`` points to."""
        return self._scope(block_sref)[0]

    def _get_cached_flags(self, block_sref: StmtSRef) -> CachedFlags:
        """The three facts the reference compiler caches per block:

        affine_binding: the block's bindings are affine in the loops between it and its parent
        block (quasi-affine and dense, as reorder and rfactor require); the root block: it has
        no iterators.
        region_cover: every region the block reads of a buffer that earlier blocks of its scope
        write is covered by what they write (relaxed to the innermost loop they share).
        stage_pipeline: in the block's own scope no block writes what an earlier one reads, and
        every child block's region_cover holds."""
        self._refresh()
        block = self._block_of(block_sref, "_get_cached_flags")
        parent = _parent_block(block_sref)
        if parent is None:
            affine = not block.iter_vars
            covered = True
        else:
            affine = affine_problem(self._realize_of[id(block)], _loops_up_to_block(block_sref)) is None
            covered = self._scope(parent)[1].get(id(block_sref), True)
        return CachedFlags(affine_binding=affine, region_cover=covered,
                           stage_pipeline=self._scope(block_sref)[2])

    def replace(self, src_sref: StmtSRef, tgt_stmt, block_sref_reuse: dict | None = None) -> None:
        """Put ``tgt_stmt`` where ``src_sref``'s statement is: a Block for a Block, a For or a
        BlockRealize for a For. The srefs of what carries on are kept: statements that are
        the same objects in ``tgt_stmt``, loops with the same loop variable, the blocks
        ``block_sref_reuse`` maps (old block -> new block), and the loops and blocks above.
        The srefs of the statements that are gone point to nothing afterwards.

        The reference compiler writes nodes in place where nothing else holds them; mlc_lab's
        nodes are immutable, so the path down to the replaced statement is always rebuilt and
        whatever a caller held (the module, the function, a statement) keeps its content."""
        self._refresh()
        src = src_sref._stmt if isinstance(src_sref, StmtSRef) else None
        if src is None or self._srefs.get(id(src)) is not src_sref:
            raise ValueError("ScheduleState.replace: src_sref points to no statement of this "
                             "state's module (it was replaced, or belongs to another state)")
        allowed = {S.Block: (S.Block,), S.For: (S.For, S.BlockRealize)}[type(src)]
        if not isinstance(tgt_stmt, allowed):
            raise TypeError(f"ScheduleState.replace: a {type(src).__name__} can be replaced by a "
                            f"{' or '.join(t.__name__ for t in allowed)}, not a "
                            f"{type(tgt_stmt).__name__}")
        func_name = src_sref._func
        if isinstance(src, S.Block):
            realize = self._realize_of[id(src)]
            replacements = {id(realize): realize.replace(block=tgt_stmt)}
        else:
            replacements = {id(src): tgt_stmt}
        new_mod = self._mod.with_function(func_name, replace_stmts(self._mod[func_name], replacements))
        reuse = {}
        for old, new in (block_sref_reuse or {}).items():
            sref = self._srefs.get(id(old))
            if sref is not None and sref._stmt is old:
                reuse[id(new)] = sref
        above = set()
        node = src_sref._parent
        while node is not None:
            if isinstance(node._stmt, S.Block):
                above.add((func_name, node._stmt.name_hint))
            node = node._parent
        self._rebuild(new_mod, _Matcher(list(self._srefs.values()), reuse=reuse, names=above))
        owner = self._owner() if self._owner is not None else None
        if owner is not None:
            owner._adopt(new_mod, "# sch.state.replace(...)")

    # -- building the sref tree ---------------------------------------------------------------
    def _rebuild(self, mod: IRModule, matcher: "_Matcher") -> None:
        old = list(self._srefs.values())
        self._mod, self._srefs, self._realize_of, self._scopes = mod, {}, {}, {}
        for gv in mod.get_global_vars():
            func = mod[gv]
            if isinstance(func, PrimFunc):
                self._visit(func.body, None, -1, gv.name_hint, matcher)
        for sref in old:
            if id(sref) not in matcher.claimed:
                sref._stmt, sref._parent, sref._seq_index = None, None, -1

    def _visit(self, stmt, parent, seq_index: int, func_name: str, matcher) -> None:
        if isinstance(stmt, S.SeqStmt):
            for k, item in enumerate(stmt.seq):
                self._visit(item, parent, k, func_name, matcher)
        elif isinstance(stmt, S.For):
            sref = self._place(stmt, parent, seq_index, func_name, matcher)
            self._visit(stmt.body, sref, -1, func_name, matcher)
        elif isinstance(stmt, S.BlockRealize):
            block = stmt.block
            self._realize_of[id(block)] = stmt
            sref = self._place(block, parent, seq_index, func_name, matcher)
            if block.init is not None:
                self._visit(block.init, sref, -1, func_name, matcher)
            self._visit(block.body, sref, -1, func_name, matcher)
        elif isinstance(stmt, S.Stmt):
            for _, value in stmt.fields():
                for child in value if isinstance(value, tuple) else (value,):
                    if isinstance(child, S.Stmt):
                        self._visit(child, parent, -1, func_name, matcher)

    def _place(self, stmt, parent, seq_index: int, func_name: str, matcher) -> StmtSRef:
        sref = matcher.claim(stmt, func_name) or StmtSRef()
        sref._stmt, sref._parent, sref._seq_index = stmt, parent, seq_index
        sref._state = self if self._owner is not None else None
        sref._func = func_name
        self._srefs[id(stmt)] = sref
        return sref

    def _block_of(self, block_sref, what: str) -> S.Block:
        block = block_sref._stmt if isinstance(block_sref, StmtSRef) else None
        if not isinstance(block, S.Block) or self._srefs.get(id(block)) is not block_sref:
            raise TypeError(f"ScheduleState.{what}: expects the sref of a block of this state's "
                            f"module, got {block_sref!r}")
        return block

    # -- scopes: dependencies, region cover, stage pipeline -----------------------------------
    def _scope(self, scope_sref: StmtSRef):
        """(BlockScope, {id(child sref): region_cover}, stage_pipeline) of a block."""
        self._refresh()
        key = id(scope_sref)
        if key not in self._scopes:
            block = self._block_of(scope_sref, "get_block_scope")
            children = [self._srefs[id(r.block)] for r in child_blocks(self._realize_of[id(block)])]
            scope = BlockScope(children)
            covered, pipeline = {}, True
            for child in children:
                deps = scope.get_deps_by_dst(child)
                if any(d.kind in (DepKind.WAR, DepKind.OPAQUE) for d in deps):
                    pipeline = False
                producers = [d.src for d in deps if d.kind == DepKind.RAW]
                covered[id(child)] = self._covered(child, producers, scope_sref) if producers else True
                pipeline = pipeline and covered[id(child)]
            self._scopes[key] = (scope, covered, pipeline)
        return self._scopes[key]

    def _covered(self, consumer: StmtSRef, producers: list, scope_sref: StmtSRef) -> bool:
        """Whether what ``producers`` write covers what ``consumer`` reads of their buffers, at
        each loop they share with it (the lowest common ancestor): there the producers' written
        regions (an under-estimate, relaxed over their loops below it) must contain the
        consumer's read regions (an over-estimate, relaxed likewise), within the buffer."""
        chain, node = [consumer], consumer
        while node is not scope_sref:
            node = node._parent
            chain.append(node)
        at_lca = {id(c): [] for c in chain}
        for producer in producers:
            node = producer
            while id(node) not in at_lca:
                node = node._parent
            at_lca[id(node)].append(producer)
        consumer_realize = self._realize_of[id(consumer._stmt)]
        for lca in chain:
            here = at_lca[id(lca)]
            if not here:
                continue
            for read in consumer._stmt.reads:
                written = []
                for producer in here:
                    realize = self._realize_of[id(producer._stmt)]
                    for region in producer._stmt.writes:
                        if region.buffer is read.buffer:
                            written.append(_written_lower_bound(region, realize, producer, lca))
                if not written:
                    continue
                consumed = _read_upper_bound(read, consumer_realize, consumer, lca)
                if not _covers(read.buffer, written, consumed):
                    return False
        return True


class _Matcher:
    """Which old sref a statement of a new module takes over: ``reuse`` (id(new block) -> sref)
    first, then the same object, then a loop with the same loop variable, then a block of the
    same name in the same function (among ``names``, (function, name) pairs, when given; after
    following ``renamed``, (function, old name) -> new name)."""

    def __init__(self, old: list, reuse: dict | None = None, names: set | None = None,
                 renamed: dict | None = None):
        self.reuse = reuse or {}
        self.claimed: set = set()
        self.by_id, self.by_var, self.by_name = {}, {}, {}
        for sref in old:
            stmt = sref._stmt
            if stmt is None:
                continue
            self.by_id[id(stmt)] = sref
            if isinstance(stmt, S.For):
                self.by_var[id(stmt.loop_var)] = sref
            elif names is None or (sref._func, stmt.name_hint) in names:
                name = stmt.name_hint
                seen = {name}
                while (sref._func, name) in (renamed or {}) and renamed[(sref._func, name)] not in seen:
                    name = renamed[(sref._func, name)]
                    seen.add(name)
                self.by_name.setdefault((sref._func, stmt.name_hint), sref)
                if name != stmt.name_hint:
                    self.by_name.setdefault((sref._func, name), sref)

    def claim(self, stmt, func_name: str) -> StmtSRef | None:
        candidates = [self.reuse.get(id(stmt)), self.by_id.get(id(stmt))]
        if isinstance(stmt, S.For):
            candidates.append(self.by_var.get(id(stmt.loop_var)))
        else:
            candidates.append(self.by_name.get((func_name, stmt.name_hint)))
        for sref in candidates:
            if sref is not None and id(sref) not in self.claimed:
                self.claimed.add(id(sref))
                return sref
        return None


def parse_debug_mask(debug_mask) -> int:
    """``debug_mask`` as an int: "all" -> every bit, "none" (or None) -> 0, an int as it is."""
    if debug_mask is None or debug_mask == "none":
        return 0
    if debug_mask == "all":
        return ScheduleDebugMask.VERIFY_SREF_TREE | ScheduleDebugMask.VERIFY_CACHED_FLAGS
    if isinstance(debug_mask, int) and not isinstance(debug_mask, bool):
        if debug_mask < -1:
            raise ValueError(f"debug_mask: a negative value other than -1 is not supported, got {debug_mask}")
        return debug_mask
    raise TypeError(f'debug_mask expects "all", "none" or an int, got {debug_mask!r}')


# -- walking the sref tree ------------------------------------------------------------------------
def _parent_block(sref: StmtSRef) -> StmtSRef | None:
    node = sref._parent
    while node is not None and not isinstance(node._stmt, S.Block):
        node = node._parent
    return node


def _loops_up_to_block(sref: StmtSRef) -> list:
    """The loops between ``sref`` and its parent block, outermost first."""
    loops, node = [], sref._parent
    while node is not None and isinstance(node._stmt, S.For):
        loops.append(node._stmt)
        node = node._parent
    return loops[::-1]


_STORAGE_RANK = {"global": 0, "shared": 1, "shared.dyn": 1, "warp": 2, "local": 3}


def _relaxed_loops(block_sref: StmtSRef, lca: StmtSRef, scope: str):
    """(relaxed, known): Var -> Range of the loops from the block up to ``lca`` (not included),
    and of the thread loops anywhere above whose threads share a buffer of storage ``scope``
    (threadIdx for shared memory, threadIdx.x for warp memory); and of every other loop and
    block iterator above, which stay symbolic."""
    relaxed, known = {}, {}
    node = block_sref._parent
    while node is not None and node is not lca and isinstance(node._stmt, S.For):
        relaxed[node._stmt.loop_var] = S.Range(node._stmt.min, node._stmt.extent)
        node = node._parent
    rank = _STORAGE_RANK.get(scope, 9)
    while node is not None:
        stmt = node._stmt
        if isinstance(stmt, S.For):
            rng = S.Range(stmt.min, stmt.extent)
            tag = stmt.thread_binding or ""
            thread_rank = 0 if tag.startswith("blockIdx") else 1 if tag.startswith(("threadIdx", "vthread")) else None
            shares = stmt.kind == "thread_binding" and rank != 0 and thread_rank is not None and (
                (tag == "threadIdx.x") if rank == 2 else rank <= thread_rank)
            (relaxed if shares else known)[stmt.loop_var] = rng
        elif isinstance(stmt, S.Block):
            known.update({iv.var: iv.dom for iv in stmt.iter_vars})
        node = node._parent
    return relaxed, known


def _read_upper_bound(region, realize, block_sref, lca) -> list:
    """What ``region`` of the block may touch over the loops below ``lca``: an Interval (or None,
    anything) per dimension."""
    relaxed, known = _relaxed_loops(block_sref, lca, region.buffer.scope)
    binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    return relax_region(region, relaxed, known, binding, guards=(realize.predicate,))


def _written_lower_bound(region, realize, block_sref, lca) -> list | None:
    """What ``region`` of the block surely touches over the loops below ``lca``: an Interval per
    dimension, or None when that cannot be shown (then nothing counts as written).

    The hull of the relaxed region is all written when the bindings are affine (each iterator
    takes every value of its relaxed range), each dimension's start is a sum of multiples of
    iterators no other dimension uses, and each multiple steps by at most what the terms below
    it span (a mixed radix, possibly overlapping); a T.where may only bound a whole index."""
    block = realize.block
    relaxed, known = _relaxed_loops(block_sref, lca, region.buffer.scope)
    loops = [lp for lp in _loops_up_to_block(block_sref) if lp.loop_var in relaxed]
    if affine_problem(realize, loops) is not None:
        return None
    binding = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    spans = {}
    for iv, value in binding.items():
        interval = relax(value, relaxed, known)
        size = None if interval is None else const_int(simplify(interval.hi - interval.lo + 1, known))
        if size is None:
            return None
        spans[id(iv)] = size
    users: dict = {}
    for dim, rng in enumerate(region.region):
        extent = const_int(simplify(rng.extent, known))
        if extent is None or extent < 1:
            return None
        terms = []
        for atom, coef in linear_form(rng.min).terms.values():
            if isinstance(atom, E.Var) and id(atom) in spans:
                if spans[id(atom)] > 1:
                    if users.setdefault(id(atom), dim) != dim:
                        return None
                    terms.append((abs(coef), spans[id(atom)]))
            elif any(uses_var(atom, iv) for iv in binding):
                return None
        covered = extent
        for coef, size in sorted(terms):
            if coef > covered:
                return None
            covered += coef * (size - 1)
    hull = relax_region(region, relaxed, known, binding)
    if any(h is None for h in hull):
        return None
    for cond in conjuncts(realize.predicate):
        if isinstance(cond, E.IntImm) or not uses_var(cond, list(relaxed)):
            continue
        hull = _narrowed_by(cond, hull, region, binding, relaxed, known)
        if hull is None:
            return None
    return hull


def _narrowed_by(cond, hull: list, region, binding: dict, relaxed: dict, known: dict) -> list | None:
    """``hull`` cut by the T.where conjunct ``cond``, which must bound one dimension's whole
    index (up to terms of loops not relaxed): a single-element dimension whose index, over the
    relaxed loops, is the compared expression. None otherwise."""
    def relaxed_part(e):
        return {key: coef for key, (atom, coef) in linear_form(e).terms.items()
                if uses_var(atom, list(relaxed))}
    found = False
    for g, bound, upper in comparisons(cond):
        if not uses_var(g, list(relaxed)):
            continue
        for dim, rng in enumerate(region.region):
            if const_int(rng.extent) != 1:
                continue
            index = simplify(substitute(rng.min, binding))
            if relaxed_part(index) != relaxed_part(g) or not relaxed_part(g):
                continue
            limit = simplify(bound + (index - g), known)   # index - g uses no relaxed loop
            old = hull[dim]
            hull = list(hull)
            hull[dim] = Interval(old.lo, simplify(E.Min(old.hi, limit), known)) if upper else \
                Interval(simplify(E.Max(old.lo, limit), known), old.hi)
            found = True
    return hull if found else None


def _covers(buffer, written: list, consumed: list) -> bool:
    """Whether the union of the ``written`` regions (each per dimension, None: nothing known)
    contains ``consumed``, both cut to the buffer's bounds. As the reference compiler does, the
    union is taken dimension by dimension; intervals that touch merge."""
    if any(w is None for w in written):
        written = [w for w in written if w is not None]
        if not written:
            return False
    for dim, extent in enumerate(buffer.shape):
        inside = Interval(E.const(0, extent.dtype), simplify(extent - 1))
        pieces = [_clip(w[dim], inside) for w in written]
        merged = True
        while merged and len(pieces) > 1:
            merged = False
            for a in range(len(pieces)):
                for b in range(a + 1, len(pieces)):
                    p, q = pieces[a], pieces[b]
                    if can_prove(p.lo <= q.hi + 1) and can_prove(q.lo <= p.hi + 1):
                        pieces[a] = Interval(simplify(E.Min(p.lo, q.lo)), simplify(E.Max(p.hi, q.hi)))
                        del pieces[b]
                        merged = True
                        break
                if merged:
                    break
        need = _clip(consumed[dim] if consumed[dim] is not None else inside, inside)
        if not any(can_prove(p.lo <= need.lo) and can_prove(need.hi <= p.hi) for p in pieces):
            return False
    return True


def _clip(interval: Interval, inside: Interval) -> Interval:
    return Interval(simplify(E.Max(interval.lo, inside.lo)), simplify(E.Min(interval.hi, inside.hi)))


__all__ = ["BlockScope", "CachedFlags", "DepKind", "Dependency", "ScheduleDebugMask",
           "ScheduleState", "StmtSRef"]
