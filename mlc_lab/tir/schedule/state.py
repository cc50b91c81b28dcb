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

``replace`` is copy-on-write, as in the reference compiler: a node on the path to the replaced
statement is written in place only when the tree alone holds it (``copy_on_write.py``), so the
module, function and statements a caller holds keep their old content; everywhere else mlc_lab's
IR is immutable.
"""
from __future__ import annotations

import enum
import weakref
from collections import namedtuple

from ...ir.module import IRModule
from .. import stmt as S
from ..function import PrimFunc
from ..verify import verify
from . import copy_on_write
from .func_index import child_blocks
from .kinds import DepKind
from .primitives.injective import affine_problem
from .region_cover import covers, loops_up_to_block, read_upper_bound, written_lower_bound

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
            affine = affine_problem(self._realize_of[id(block)], loops_up_to_block(block_sref)) is None
            covered = self._scope(parent)[1].get(id(block_sref), True)
        return CachedFlags(affine_binding=affine, region_cover=covered,
                           stage_pipeline=self._scope(block_sref)[2])

    def replace(self, src_sref: StmtSRef, tgt_stmt, block_sref_reuse: dict | None = None) -> None:
        """Put ``tgt_stmt`` where ``src_sref``'s statement is: a Block for a Block, a For or a
        BlockRealize for a For. The srefs of what carries on are kept: statements that are
        the same objects in ``tgt_stmt``, loops with the same loop variable, the blocks
        ``block_sref_reuse`` maps (old block -> new block), and the loops and blocks above.
        The srefs of the statements that are gone point to nothing afterwards.

        Copy-on-write, as in the reference compiler: the statements on the path down to the
        replaced one (and the function) are written in place where nothing but the tree holds
        them, so they stay the same objects; from the highest one something else holds (a
        variable of the caller, another module) downwards they are copied, and whoever held
        them keeps the old program."""
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
        new_mod = copy_on_write.replace(self, func_name, src, tgt_stmt, self._internal_refs)
        del src
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

    def _internal_refs(self, stmt) -> int:
        """How many references the state holds to ``stmt`` (its sref, its BlockRealize table)."""
        sref = self._srefs.get(id(stmt))
        if sref is not None and sref._stmt is stmt:
            return 1
        if isinstance(stmt, S.BlockRealize) and self._realize_of.get(id(stmt.block)) is stmt:
            return 1
        return 0

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
                            written.append(written_lower_bound(region, realize, producer, lca))
                if not written:
                    continue
                consumed = read_upper_bound(read, consumer_realize, consumer, lca)
                if not covers(read.buffer, written, consumed):
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


__all__ = ["BlockScope", "CachedFlags", "DepKind", "Dependency", "ScheduleDebugMask",
           "ScheduleState", "StmtSRef"]
