"""Blocks of blocks: blockize (wrap a loop nest in an outer block) and tensorize (replace a block's
body by a tensor intrinsic's implementation)."""
from __future__ import annotations

from ....arith import simplify
from ....arith.bound import int_bound
from ....arith.simplify import Linear, from_linear, linear_form
from ....ir import structural_equal
from .. import errors
from ... import expr as E
from ... import stmt as S
from ...analysis import block_access_regions
from ...stmt_functor import and_all, conjuncts, free_vars, substitute, uses_var
from ..instruction import instruction
from ..rv import BlockRV, LoopRV
from .scope import SimplifyingSubstitute, all_blocks_under, const_int, loop_ranges
from .region import constant_on_right, satisfiable_over


class BlockizePrimitives:

    @instruction
    def blockize(self, target, preserve_unit_iters: bool = True) -> BlockRV:
        """Wrap the loop nest under ``target`` (and the block inside it) in a new outer block
        named ``<block>_o``.

        Each binding of the inner block is divided into ``outer * c + inner``, where ``inner`` uses
        only the loops under ``target``: the outer block iterates over the outer parts, the inner
        block keeps iterators over the inner parts (TensorIR's subspace division). A reduction
        block's init moves to the outer block, as a ``<block>_init`` block over the inner spatial
        iterators, so the outer block is itself a reduction block.

        Requires: under ``target`` there is a chain of loops ending in a single block; each binding
        of that block is affine in the loops, and either uses no loop under ``target``, uses only
        loops under ``target``, or has the form ``outer_expr * c + inner_expr`` with ``inner_expr``
        in ``[0, c)``.

        Given a list of blocks instead, their loop nests (sibling entries of one loop's or
        block's body, in order, each a chain of loops down to its block) go into one outer block
        named ``outer_<block>_<block>_``; each block is divided as above over its own loops, the
        outer iterators are the first block's, and every other block's outer parts must be 0 or
        equal to one of them.

        Parameters: target (LoopRV, or a list of BlockRV); preserve_unit_iters (bool: when
        False, loops of extent 1 are treated as the constant 0 in the bindings).
        Returns: the new outer block (BlockRV).
        Raises (all BlockizeError): NotSingleBlockChainError, NotDivisibleError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        ...     for i0, i1 in T.grid(4, 16):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(64, i0 * 16 + i1)
        ...             B[vi] = A[vi] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> i0, i1 = sch.get_loops(sch.get_block("B"))
        >>> sch.blockize(i1)
        BlockRV("B_o")
        >>> print(sch.mod["main"].body.block.body)
        for i0 in range(4):
            with T.block("B_o"):
                vi_o = T.axis.remap("S", [i0])
                T.reads(A[vi_o * 16:vi_o * 16 + 16])
                T.writes(B[vi_o * 16:vi_o * 16 + 16])
                for i1 in range(16):
                    with T.block("B"):
                        vi_i = T.axis.remap("S", [i1])
                        T.reads(A[vi_o * 16 + vi_i])
                        T.writes(B[vi_o * 16 + vi_i])
                        B[vi_o * 16 + vi_i] = A[vi_o * 16 + vi_i] * T.float32(2)
        """
        if isinstance(target, (list, tuple)):
            func_name, old, outer = _blockize_blocks(self, list(target), preserve_unit_iters)
            self._replace(func_name, {id(old): outer[0]}, "blockize")
            return BlockRV(outer[1], func_name)
        func_name, loop, index = self._resolve_loop(target, "blockize", "target")
        outer = _blockize(loop, index, self._func(func_name), preserve_unit_iters, "blockize")
        self._replace(func_name, {id(loop): outer}, "blockize")
        return BlockRV(outer.block.name_hint, func_name)

    @instruction
    def tensorize(self, block_or_loop, tensor_intrin: str, preserve_unit_iters: bool = True) -> None:
        """Replace the body of a block by the implementation of a registered tensor intrinsic.

        Given a loop, the loop is blockized first. The block's body must match the intrinsic's
        description (loop extents, block iterators, bindings, the computation), with each buffer
        of the description standing for the region of a buffer of the same dtype and storage scope
        that the block accesses. The body becomes the intrinsic's implementation, whose buffers are
        declared as ``T.match_buffer`` views of those regions. The block's iterators, regions and
        init stay as they were; annotations of the implementation's root block join its own.
        ``import mlc_lab.tir.tensor_intrin`` registers the hardware intrinsics (x86, Arm, CUDA,
        ROCm, Hexagon) under the reference compiler's names.

        Requires: an intrinsic registered with ``TensorIntrin.register(name, desc, impl)``; a
        block (or a loop that blockize accepts) whose body matches the description.

        Parameters: block_or_loop (BlockRV or LoopRV); tensor_intrin (str, the registered name);
        preserve_unit_iters (bool, passed to blockize).
        Raises: TensorizeError (naming what did not match), BlockizeError,
        UnknownTensorIntrinError (no intrinsic registered under the name).

        Example:

        >>> @T.prim_func
        ... def desc(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         with T.block("copy"):
        ...             vi = T.axis.spatial(4, i)
        ...             B[vi] = A[vi]
        >>> @T.prim_func
        ... def impl(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        ...     for i in T.vectorized(4):
        ...         with T.block("copy4"):
        ...             vi = T.axis.spatial(4, i)
        ...             B[vi] = A[vi]
        >>> _ = tir.schedule.TensorIntrin.register("doc_copy4", desc, impl, override=True)
        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        ...     for i0, i1 in T.grid(2, 4):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i0 * 4 + i1)
        ...             B[vi] = A[vi]
        >>> sch = tir.Schedule(f)
        >>> i0, i1 = sch.get_loops(sch.get_block("B"))
        >>> sch.tensorize(i1, "doc_copy4")
        >>> print(sch.mod["main"].body.block.body)
        for i0 in range(2):
            with T.block("B_o"):
                vi_o = T.axis.remap("S", [i0])
                T.reads(A[vi_o * 4:vi_o * 4 + 4])
                T.writes(B[vi_o * 4:vi_o * 4 + 4])
                A_1 = T.match_buffer(A[vi_o * 4:vi_o * 4 + 4], (4,), "float32")
                B_1 = T.match_buffer(B[vi_o * 4:vi_o * 4 + 4], (4,), "float32")
                for i in T.vectorized(4):
                    with T.block("copy4"):
                        vi = T.axis.remap("S", [i])
                        T.reads(A_1[vi])
                        T.writes(B_1[vi])
                        B_1[vi] = A_1[vi]
        """
        from ..tensor_intrin import TensorIntrin, instantiate, match, merged_annotations
        if not isinstance(tensor_intrin, str):
            raise TypeError(f"sch.tensorize: parameter 'tensor_intrin' expects the name of a "
                            f"registered TensorIntrin, got {tensor_intrin!r}")
        intrin = TensorIntrin.get(tensor_intrin, allow_missing=True)
        if intrin is None:
            known = ", ".join(sorted(TensorIntrin._registry)) or "none"
            raise errors.UnknownTensorIntrinError(
                "tensorize", f"no tensor intrinsic named {tensor_intrin!r} is registered (registered: "
                f"{known}); register one with TensorIntrin.register(name, desc, impl)")
        if isinstance(block_or_loop, LoopRV):
            func_name, loop, index = self._resolve_loop(block_or_loop, "tensorize", "block_or_loop")
            func = self._func(func_name)
            realize = _blockize(loop, index, func, preserve_unit_iters, "tensorize")
            old = loop
        else:
            func_name, realize, index = self._resolve_block(block_or_loop, "tensorize", "block_or_loop")
            func, old = self._func(func_name), realize
        regions = match(realize, intrin, tensor_intrin, func, old)
        replaced = {r.block.name_hint for r in all_blocks_under(realize)}
        taken = (set(index.blocks) - replaced) | {realize.block.name_hint}
        body, match_buffers = instantiate(intrin, regions, taken)
        block = realize.block.replace(body=body, match_buffers=realize.block.match_buffers + match_buffers,
                                      annotations=merged_annotations(realize.block.annotations, intrin))
        self._replace(func_name, {id(old): realize.replace(block=block)}, "tensorize")
        return None


# -- subspace division ------------------------------------------------------------------------

def _blockize(loop: S.For, index, func, preserve_unit_iters: bool, primitive: str) -> S.BlockRealize:
    """The outer BlockRealize that replaces ``loop`` (nothing is installed here)."""
    loops, node = [loop], loop.body
    while isinstance(node, S.For):
        loops.append(node)
        node = node.body
    if not isinstance(node, S.BlockRealize):
        raise errors.NotSingleBlockChainError(
            primitive, f"under loop {loop.loop_var.name} there must be a chain of loops ending in a "
            f"single block; found {_describe(node)}", func, [loop])
    realize, block = node, node.block
    all_loops = [a for a in index.path(loop) if isinstance(a, S.For)] + loops
    outer_ivs, outer_values, inner, outer_predicate, sub = _divide_block(
        realize, loops, all_loops, func, preserve_unit_iters, primitive, loop.loop_var.name)
    taken = set(index.blocks)
    init = None
    if block.init is not None:
        reduce_ivs = [iv.var for iv in outer_ivs if iv.iter_type != "spatial"]
        init = _outer_init(_folding_substitute(block.init, sub), inner, loops,
                           _unique_name(block.name_hint + "_init", taken), reduce_ivs,
                           func, primitive)
    body = inner
    for lp in reversed(loops):
        body = lp.replace(body=body)
    outer_block = S.Block(_unique_name(block.name_hint + "_o", taken), tuple(outer_ivs), (), (), body, init)
    reads, writes = block_access_regions(outer_block)
    outer_block = outer_block.replace(reads=reads, writes=writes)
    return S.BlockRealize(tuple(outer_values), outer_predicate, outer_block)


def _divide_block(realize, loops, all_loops, func, preserve_unit_iters: bool, primitive: str,
                  where: str, keep_init: bool = False):
    """(outer iterators, their bindings, the inner BlockRealize, the outer predicate, the
    substitution of the block's iterators) when ``realize``'s bindings are divided between the
    ``loops`` inside the new outer block and the rest of ``all_loops`` (outermost first).
    ``keep_init``: the inner block keeps its init (else the outer block takes it over)."""
    block = realize.block
    inner_vars = {id(lp.loop_var) for lp in loops}
    ranges = loop_ranges(all_loops)
    unit = {lp.loop_var: lp.min for lp in all_loops if const_int(simplify(lp.extent)) == 1}
    outer_ivs, outer_values, inner_ivs, inner_values, sub = [], [], [], [], {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if not preserve_unit_iters and unit:
            value = simplify(substitute(value, unit))
        parts = _divide(iv, simplify(value), inner_vars, ranges)
        if parts is None:
            raise errors.NotDivisibleError(
                primitive, f'the binding {iv.var.name} = {value} of block "{block.name_hint}" cannot '
                f"be divided into outer * c + inner with the inner part using only the loops under "
                f"{where} ({', '.join(lp.loop_var.name for lp in loops)})",
                func, [realize])
        outer_value, outer_extent, inner_value, inner_dom = parts
        if inner_value is None:
            outer_ivs.append(iv)
            outer_values.append(outer_value)
            if const_int(simplify(iv.dom.extent)) == 1:
                sub[iv.var] = iv.dom.min   # an iterator of one value is that value
            continue
        dtype = iv.var.dtype
        var_o, var_i = E.Var(iv.var.name + "_o", dtype), E.Var(iv.var.name + "_i", dtype)
        outer_ivs.append(S.IterVar(var_o, S.Range(E.const(0, dtype), E.const(outer_extent, dtype)),
                                   iv.iter_type))
        outer_values.append(outer_value)
        inner_ivs.append(S.IterVar(var_i, inner_dom, iv.iter_type))
        inner_values.append(inner_value)
        sub[iv.var] = var_i if outer_extent == 1 else var_o * E.const(inner_dom.extent.value, dtype) + var_i
    inner_predicate, outer_predicate = _divide_predicate(
        realize, loops, all_loops, outer_ivs, outer_values, func, primitive)
    if keep_init:
        subst = _FoldingSubstitute(sub)
        inner_block = block.replace(iter_vars=tuple(inner_ivs), body=subst.visit(block.body),
                                    init=None if block.init is None else subst.visit(block.init),
                                    reads=subst.visit(block.reads), writes=subst.visit(block.writes),
                                    match_buffers=subst.visit(block.match_buffers))
    else:
        inner_block = _substituted_block(block, sub, inner_ivs)
    inner = S.BlockRealize(tuple(inner_values), inner_predicate, inner_block)
    return outer_ivs, outer_values, inner, outer_predicate, sub


def _blockize_blocks(sch, blocks: list, preserve_unit_iters: bool):
    """(function name, the statement to replace, (its replacement, the outer block's name)) for
    blockize of several blocks."""
    primitive = "blockize"
    if not blocks:
        raise ValueError("sch.blockize: the list of blocks is empty")
    resolved = [sch._resolve_block(b, primitive, "target") for b in blocks]
    func_name, _, index = resolved[0]
    func = sch._func(func_name)
    realizes = []
    for name, realize, _ in resolved:
        if name != func_name:
            raise errors.NotSingleBlockChainError(
                primitive, "the blocks are in different functions", func, [realize.block])
        if not any(r is realize for r in realizes):
            realizes.append(realize)
    paths = [index.path(r) for r in realizes]
    common = 0
    while all(len(p) > common and p[common] is paths[0][common] for p in paths):
        common += 1
    if common == 0:
        raise errors.NotSingleBlockChainError(
            primitive, "the blocks share no enclosing loop or block", func, [r.block for r in realizes])
    lca = paths[0][common - 1]
    body = lca.block.body if isinstance(lca, S.BlockRealize) else lca.body
    entries = list(body.seq) if isinstance(body, S.SeqStmt) else [body]
    tops = []
    for realize, path in zip(realizes, paths):
        chain = path[common:] + [realize]
        if any(not isinstance(c, S.For) or c.body is not nxt for c, nxt in zip(chain, chain[1:])):
            raise errors.NotSingleBlockChainError(
                primitive, f'block "{realize.block.name_hint}" is not alone under the loops between '
                "it and the loop or block all the blocks share", func, [realize.block])
        position = next((k for k, e in enumerate(entries) if e is chain[0]), None)
        if position is None or position in [t[0] for t in tops]:
            raise errors.NotSingleBlockChainError(
                primitive, f'block "{realize.block.name_hint}" does not have a loop nest of its own '
                "in the body the blocks share", func, [realize.block])
        tops.append((position, realize, [c for c in chain if isinstance(c, S.For)]))
    tops.sort(key=lambda t: t[0])
    positions = [t[0] for t in tops]
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise errors.NotSingleBlockChainError(
            primitive, "the blocks' loop nests are not consecutive statements: blockize would "
            "move the statements between them", func, [t[1].block for t in tops])
    above = [a for a in paths[0][:common] if isinstance(a, S.For)]
    outer_ivs = outer_values = None
    parts = []
    for _, realize, loops in tops:
        ivs, values, inner, predicate, _ = _divide_block(
            realize, loops, above + loops, func, preserve_unit_iters, primitive,
            f'block "{realize.block.name_hint}"', keep_init=True)
        if not (isinstance(predicate, E.IntImm) and predicate.value):
            raise errors.BlockizePredicateError(
                primitive, f'the predicate of block "{realize.block.name_hint}" constrains the loops '
                "outside the new block, which blockize of several blocks cannot share", func, [realize])
        if outer_ivs is None:
            outer_ivs, outer_values = ivs, values
        else:
            inner = _onto_outer(inner, ivs, values, outer_ivs, outer_values, func, primitive)
        if realize.block.init is not None and any(iv.iter_type != "spatial" for iv in outer_ivs):
            raise errors.NotDivisibleError(
                primitive, f'block "{realize.block.name_hint}" is a reduction whose reduce '
                "iterators reach outside the new block; blockize of several blocks keeps each init "
                "inside", func, [realize])
        stmt = inner
        for lp in reversed(loops):
            stmt = lp.replace(body=stmt)
        parts.append(stmt)
    name = _unique_name("outer_" + "".join(t[1].block.name_hint + "_" for t in tops), set(index.blocks))
    outer_block = S.Block(name, tuple(outer_ivs), (), (), S.seq(*parts))
    reads, writes = block_access_regions(outer_block)
    outer = S.BlockRealize(tuple(outer_values), E.const(True), outer_block.replace(reads=reads, writes=writes))
    if len(entries) == len(tops):
        return func_name, body, (outer, name)
    new_entries = entries[:positions[0]] + [outer] + entries[positions[-1] + 1:]
    return func_name, body, (S.SeqStmt(tuple(new_entries)), name)


def _onto_outer(inner, ivs, values, outer_ivs, outer_values, func, primitive: str):
    """``inner`` with its own outer iterators (``ivs`` bound to ``values``) replaced by the
    shared ones bound to the same value; a unit one bound to 0 needs none."""
    sub = {}
    for iv, value in zip(ivs, values):
        if const_int(simplify(value)) == 0 and const_int(simplify(iv.dom.extent)) == 1:
            sub[iv.var] = E.const(0, iv.var.dtype)
            continue
        match = next((o for o, v in zip(outer_ivs, outer_values) if structural_equal(v, value)), None)
        if match is None:
            raise errors.NotDivisibleError(
                primitive, f'block "{inner.block.name_hint}" needs the outer iterator {iv.var.name} '
                f"= {value}, which the first block's outer iterators do not have", func, [inner])
        sub[iv.var] = match.var
    if not sub:
        return inner
    return _folding_substitute(inner, sub)


class _FoldingSubstitute(SimplifyingSubstitute):
    """SimplifyingSubstitute that also simplifies the buffer indices and region bounds that held
    an iterator replaced by a constant: substituting 0 for a unit iterator leaves ``0 * 2 + vr_i``,
    which the script parser folds, so the module would not survive printing and parsing. Other
    indices are left as they are."""

    def __init__(self, mapping: dict, var_ranges: dict | None = None):
        super().__init__(mapping, var_ranges)
        self.constants = [k for k, v in mapping.items() if isinstance(v, E.IntImm)]

    def _folds(self, node) -> bool:
        return bool(self.constants) and uses_var(node, self.constants)

    def visit_BufferLoad(self, node):
        new = self.generic_visit(node)
        if new is node or not self._folds(node.indices):
            return new
        return new.replace(indices=tuple(simplify(i) for i in new.indices))

    def visit_BufferStore(self, node):
        new = self.generic_visit(node)
        if new is node or not self._folds(node.indices):
            return new
        return new.replace(indices=tuple(simplify(i) for i in new.indices))

    def visit_Range(self, node):
        new = self.generic_visit(node)
        if new is node or not self._folds(node):
            return new
        return S.Range(simplify(new.min), simplify(new.extent))


def _folding_substitute(stmt, mapping: dict):
    return _FoldingSubstitute(mapping).visit(stmt)


def _divide(iv: S.IterVar, value, inner_vars: set, ranges: dict):
    """(outer binding, outer extent, inner binding, inner domain) with ``value == outer * c + inner``;
    inner binding None when ``value`` uses no inner loop; None when it does not divide."""
    lin = linear_form(value)
    inner_lin, outer_lin = Linear(), Linear(const=lin.const)
    for key, (atom, coef) in lin.terms.items():
        inner_use = [id(v) in inner_vars for v in free_vars(atom)]
        uses_inner = any(inner_use)
        if uses_inner and not all(inner_use):
            return None
        (inner_lin if uses_inner else outer_lin).terms[key] = (atom, coef)
    dtype = value.dtype
    if not inner_lin.terms:
        return value, None, None, None
    inner_value = from_linear(inner_lin, dtype)
    if not outer_lin.terms and outer_lin.const == 0:
        return E.const(0, dtype), 1, inner_value, iv.dom
    lo, hi = int_bound(inner_value, ranges)
    dom_min, dom_extent = const_int(simplify(iv.dom.min)), const_int(simplify(iv.dom.extent))
    if lo is None or hi is None or lo < 0 or dom_min != 0 or dom_extent is None:
        return None
    c = hi + 1
    if outer_lin.const % c or any(coef % c for _, coef in outer_lin.terms.values()):
        return None
    quotient = Linear({k: (a, coef // c) for k, (a, coef) in outer_lin.terms.items()}, outer_lin.const // c)
    outer_value = from_linear(quotient, dtype)
    dom = S.Range(E.const(0, dtype), E.const(c, dtype))
    return outer_value, -(-dom_extent // c), inner_value, dom


def _divide_predicate(realize, loops, all_loops, outer_ivs, outer_values, func, primitive):
    """(inner, outer) predicates whose conjunction is the block's predicate. The conjuncts that use
    no loop under the target go to the outer block; the others stay on the inner block, where a
    loop outside the target must be replaced by the outer iterator bound to it: code placed
    between the loops and the inner block (an init that decompose_reduction or compute_at moves)
    cannot see those loops."""
    inner_vars = {id(lp.loop_var) for lp in loops}
    outer_loops = [lp.loop_var for lp in all_loops if id(lp.loop_var) not in inner_vars]
    as_iter = {}
    for iv, value in zip(outer_ivs, outer_values):
        pinned = _loop_plus_offset(simplify(value), outer_loops)
        if pinned is not None and pinned[0] not in as_iter:
            as_iter[pinned[0]] = simplify(iv.var - pinned[1])
    inner, outer = [], []
    inner_ranges = {lp.loop_var: S.Range(lp.min, lp.extent) for lp in loops}
    for cond in conjuncts(realize.predicate):
        if not any(uses_var(cond, lp.loop_var) for lp in loops):
            outer.append(cond)
            continue
        # The outer block runs only where some inner iteration does (an overhanging split must
        # not take its outer iterator past that iterator's domain).
        some_inner = satisfiable_over(cond, inner_ranges)
        if some_inner is not None and not uses_var(some_inner, list(inner_ranges)):
            outer += [constant_on_right(c) for c in conjuncts(simplify(some_inner, loop_ranges(all_loops)))]
        cond = simplify(substitute(cond, as_iter))
        left = [v for v in outer_loops if uses_var(cond, v)]
        if left:
            raise errors.BlockizePredicateError(
                primitive, f'the predicate {realize.predicate} of block "{realize.block.name_hint}" '
                f"uses the loops under the target together with loop(s) "
                f"{', '.join(v.name for v in left)} outside it that no outer block iterator is "
                "bound to, so the inner block cannot express it", func, [realize])
        inner.append(cond)
    return and_all(inner), and_all(outer)


def _loop_plus_offset(value, loop_vars):
    """(loop variable, offset) when ``value`` is ``loop + offset`` with a constant offset."""
    lin = linear_form(value)
    if len(lin.terms) != 1:
        return None
    ((atom, coef),) = lin.terms.values()
    if coef != 1 or not any(atom is v for v in loop_vars):
        return None
    return atom, E.const(lin.const, value.dtype)


def _substituted_block(block: S.Block, sub: dict, inner_ivs: list) -> S.Block:
    """The inner block: new iterators, the original body in terms of them, no init. Without its
    init the block reads what it accumulates into, so its writes join its reads."""
    subst = _FoldingSubstitute(sub)
    new = block.replace(iter_vars=tuple(inner_ivs), body=subst.visit(block.body), init=None,
                        reads=subst.visit(block.reads), writes=subst.visit(block.writes),
                        match_buffers=subst.visit(block.match_buffers))
    if block.init is not None:
        read_ids = {id(r.buffer) for r in new.reads}
        extra = tuple(w for w in new.writes if id(w.buffer) not in read_ids)
        new = new.replace(reads=extra + new.reads)
    return new


def _outer_init(init_body, inner: S.BlockRealize, loops: list, name: str, reduce_ivs: list,
                func, primitive: str) -> S.Stmt:
    """The outer block's init: the original init as a block over the inner spatial iterators it
    uses, under serial copies of the loops those iterators (or the predicate) are bound to.

    The init runs once per spatial point before any update (decompose_reduction hoists it above
    the reduce loops), so its predicate keeps only the conjuncts of the inner predicate that use
    no reduce iterator or reduce-only loop; a conjunct mixing both cannot be kept or dropped."""
    sub, ivs, values = {}, [], []
    for iv, value in zip(inner.block.iter_vars, inner.iter_values):
        if iv.iter_type == "spatial" and uses_var(init_body, iv.var):
            sub[iv.var] = E.Var(iv.var.name + "_init", iv.var.dtype)
            ivs.append(iv.replace(var=sub[iv.var]))
            values.append(value)
    spatial = [lp.loop_var for lp in loops if any(
        uses_var(v, lp.loop_var) for iv, v in zip(inner.block.iter_vars, inner.iter_values)
        if iv.iter_type == "spatial")]
    reduce_vars = reduce_ivs + [lp.loop_var for lp in loops if not any(lp.loop_var is v for v in spatial)]
    kept = []
    for cond in conjuncts(inner.predicate):
        if not uses_var(cond, reduce_vars):
            kept.append(cond)
        elif uses_var(cond, spatial + [iv.var for iv in inner.block.iter_vars]):
            raise errors.BlockizePredicateError(
                primitive, f'the predicate {inner.predicate} of block "{inner.block.name_hint}" '
                f"mixes spatial and reduce iterators in {cond}; the outer block's init, which runs "
                "before the reduction, cannot express it", func, [inner])
    predicate = and_all(kept)
    init_loops = [lp for lp in loops if uses_var(predicate, lp.loop_var)
                  or any(uses_var(v, lp.loop_var) for v in values)]
    for lp in init_loops:
        sub[lp.loop_var] = E.Var(lp.loop_var.name + "_init", lp.loop_var.dtype)
    subst = SimplifyingSubstitute(sub)
    block = S.Block(name, tuple(ivs), (), (), subst.visit(init_body))
    reads, writes = block_access_regions(block)
    stmt = S.BlockRealize(tuple(subst.visit(v) for v in values), subst.visit(predicate),
                          block.replace(reads=reads, writes=writes))
    for lp in reversed(init_loops):
        stmt = S.For(sub[lp.loop_var], lp.min, lp.extent, "serial", stmt)
    return stmt


def _describe(stmt) -> str:
    if isinstance(stmt, S.SeqStmt):
        return f"{len(stmt.seq)} statements in sequence"
    return f"a {type(stmt).__name__}"


def _unique_name(name: str, taken: set) -> str:
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate
