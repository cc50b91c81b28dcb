"""Loop transformations: split, fuse, reorder."""
from __future__ import annotations

from functools import reduce

from ....arith import is_multiple_of
from ...linear_index import can_prove, simplify
from .. import errors
from ... import expr as E
from ... import stmt as S
from ..instruction import instruction
from ...stmt_functor import post_order_visit, uses_var
from .injective import affine_problem
from ..func_index import StmtReplacer, child_blocks
from .scope import (SimplifyingSubstitute, all_blocks_under, const_int, mixed_loop_of_reduction,
                     substitute_and_simplify)


class LoopPrimitives:

    @instruction
    def split(self, loop, factors, preserve_unit_iters: bool = True) -> list:
        """Split a loop into nested loops whose extents are ``factors``.

        Requires: at most one factor is None (it is inferred as ceil(extent / product of the
        others)); without a None, the factors multiply to at least the loop's extent. When the
        split overshoots, the blocks under the loop get a ``T.where`` predicate.

        Parameters: loop (LoopRV), factors (list of int or None), preserve_unit_iters (when
        False, the new loops of extent 1 and the loops of extent 1 around them are replaced by
        their only value in the bindings of the blocks below).
        Returns: the new loops, outermost first.
        Raises: NonPositiveFactorError, TooManyInferredFactorsError, SymbolicExtentError,
        WrongFactorProductError, AnnotatedLoopError (all FactorError), ThreadBoundLoopError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
        ...     for i in range(128):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(128, i)
        ...             B[vi] = A[vi] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> i0, i1 = sch.split(i, factors=[None, 4])
        >>> print(sch.mod["main"].body.block.body)
        for i_0, i_1 in T.grid(32, 4):
            with T.block("B"):
                vi = T.axis.spatial(128, i_0 * 4 + i_1)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] * T.float32(2)
        """
        func_name, node, index = self._resolve_loop(loop, "split")
        func = self._func(func_name)
        _check_plain_loop("split", node, func)
        if not isinstance(factors, (list, tuple)) or not factors:
            raise TypeError(f"sch.split: parameter 'factors' expects a non-empty list of int/None, "
                            f"got {factors!r}")
        values = []
        for f in factors:
            f = f.value if isinstance(f, E.IntImm) else f
            if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f <= 0):
                raise errors.NonPositiveFactorError(
                    "split", f"factor {f!r} is not a positive int or None", func, [node])
            values.append(f)
        if values.count(None) > 1:
            raise errors.TooManyInferredFactorsError(
                "split", f"factors {values} contain more than one None; only one factor can be "
                "inferred", func, [node])
        extent = const_int(simplify(node.extent))
        known = reduce(lambda a, b: a * b, [v for v in values if v is not None], 1)
        name = node.loop_var.name
        dtype = node.loop_var.dtype
        divides = extent is None and None in values and is_multiple_of(node.extent, known)
        if divides:   # a symbolic extent that is a multiple of the others: no overshoot
            values[values.index(None)] = simplify(E.FloorDiv(node.extent, E.const(known, dtype)))
        elif None in values:
            inferred = (-(-extent // known) if extent is not None
                        else simplify(E.FloorDiv(node.extent + E.const(known - 1, dtype), E.const(known, dtype))))
            values[values.index(None)] = inferred
        elif extent is None:
            if not can_prove(E.const(known, dtype) >= node.extent):
                raise errors.WrongFactorProductError(
                    "split", f"the factors {values} cover {known} iterations but loop {name} has the "
                    f"symbolic extent {node.extent}, which may be larger; give one factor as None so "
                    "it is inferred from the extent", func, [node])
        elif known < extent:
            raise errors.WrongFactorProductError(
                "split", f"the factors {values} multiply to {known} but loop {name} has extent "
                f"{extent}; make them multiply to at least {extent} or use None for one factor",
                func, [node])
        exact = divides or extent is not None and reduce(lambda a, b: a * b, values, 1) == extent
        extents = [E.const(f, dtype) if isinstance(f, int) else f for f in values]
        new_vars = [E.Var(f"{name}_{k}", dtype) for k in range(len(values))]
        fused_index, stride = None, E.const(1, dtype)
        for var, factor in reversed(list(zip(new_vars, extents))):
            term = var if const_int(stride) == 1 else var * stride
            fused_index = term if fused_index is None else term + fused_index
            stride = simplify(stride * factor)
        if const_int(node.min) != 0:
            fused_index = fused_index + node.min
        ranges = {v: S.Range(E.const(0, dtype), f) for v, f in zip(new_vars, extents)}
        body = _BindingsSimplifyingSubstitute({node.loop_var: fused_index}, dict(ranges)).visit(node.body)
        if not exact and not (any(f is None for f in factors) and known == 1):
            # the guard keeps the split's Horner form, ((i_0 * f1 + i_1) * f2 + i_2) < extent,
            # as the reference compiler prints it
            horner = None
            for var, factor in zip(new_vars, extents):
                horner = var if horner is None else horner * factor + var
            bound = node.extent if extent is None else E.const(extent, dtype)
            body = _conjoin_predicate(body, horner < bound)
        if not preserve_unit_iters:
            unit = _unit_loop_values(index, node)
            unit.update({v: E.const(0, dtype) for v, f in zip(new_vars, values) if f == 1})
            body = substitute_and_simplify(body, unit, ranges)
        for var, factor in reversed(list(zip(new_vars, extents))):
            body = S.For(var, E.const(0, dtype), factor, "serial", body)
        self._replace(func_name, {id(node): body}, "split")
        return [self._loop_rv_of_var(v, func_name) for v in new_vars]

    @instruction
    def fuse(self, *loops, preserve_unit_iters: bool = True):
        """Fuse consecutive loops into one.

        Requires: at least one loop; each loop is the only statement in the body of the one
        before it (directly nested, no other statements in between); every loop starts at 0 and
        is not bound to a thread.

        Parameters: loops (LoopRV, outermost first), preserve_unit_iters (when False and the
        fused loop, or a loop around it, has extent 1, its variable is replaced by its only value
        in the bindings of the blocks below).
        Returns: the fused loop.
        Raises: NotOnlyChildError, LoopNotStartingAtZeroError, ThreadBoundLoopError,
        AnnotatedLoopError, DependentLoopError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 4), "float32")):
        ...     for i, j in T.grid(8, 4):
        ...         with T.block("A"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             A[vi, vj] = T.float32(0)
        >>> sch = tir.Schedule(f)
        >>> i, j = sch.get_loops(sch.get_block("A"))
        >>> ij = sch.fuse(i, j)
        >>> print(sch.mod["main"].body.block.body)
        for i_j_fused in range(32):
            with T.block("A"):
                vi = T.axis.spatial(8, i_j_fused // 4)
                vj = T.axis.spatial(4, i_j_fused % 4)
                T.reads()
                T.writes(A[vi, vj])
                A[vi, vj] = T.float32(0)
        """
        if not loops:
            raise TypeError("sch.fuse: give at least one loop")
        resolved = [self._resolve_loop(lp, "fuse", "loops") for lp in loops]
        func_name, _, index = resolved[0]
        func = self._func(func_name)
        nodes = [r[1] for r in resolved]
        for outer, inner in zip(nodes, nodes[1:]):
            if outer.body is not inner:
                raise errors.NotOnlyChildError(
                    "fuse", f"loop {inner.loop_var.name} is not the only statement directly inside "
                    f"loop {outer.loop_var.name}; fuse needs directly nested loops", func, [outer, inner])
        for n in nodes:
            if not (isinstance(n.min, E.IntImm) and n.min.value == 0):
                raise errors.LoopNotStartingAtZeroError(
                    "fuse", f"loop {n.loop_var.name} starts at {n.min}, not at 0", func, [n])
            _check_plain_loop("fuse", n, func)
        for k, inner in enumerate(nodes[1:], 1):
            outer = next((o for o in nodes[:k] if uses_var(inner.extent, o.loop_var)), None)
            if outer is not None:
                raise errors.DependentLoopError(
                    "fuse", f"the extent {inner.extent} of loop {inner.loop_var.name} depends on loop "
                    f"{outer.loop_var.name}; fused loops need independent extents", func, [outer, inner])
        dtype = nodes[0].loop_var.dtype
        fused = E.Var("_".join(n.loop_var.name for n in nodes) + "_fused", dtype)
        extent = simplify(reduce(lambda a, b: a * b, [n.extent for n in nodes]))
        # loop k gets (fused % (stride * extent)) // stride, the outermost fused // stride and the
        # innermost fused % extent: the forms the reference compiler prints
        mapping, stride = {}, E.const(1, dtype)
        for n in reversed(nodes):
            span = simplify(stride * n.extent)
            value = fused if n is nodes[0] else E.FloorMod(fused, span)
            if const_int(stride) != 1:
                value = E.FloorDiv(value, stride)
            mapping[n.loop_var] = value
            stride = span
        ranges = {fused: S.Range(E.const(0, dtype), extent)}
        if not preserve_unit_iters:
            if const_int(extent) == 1:
                mapping = {n.loop_var: n.min for n in nodes}
            mapping.update(_unit_loop_values(index, nodes[0]))
        body = substitute_and_simplify(nodes[-1].body, mapping, ranges)
        new_loop = S.For(fused, E.const(0, dtype), extent, "serial", body)
        self._replace(func_name, {id(nodes[0]): new_loop}, "fuse")
        return self._loop_rv_of_var(fused, func_name)

    @instruction
    def reorder(self, *ordered_loops) -> None:
        """Reorder loops so they appear in the given order, outermost first.

        Requires: the loops lie on one chain (each is an ancestor of the next deeper one), every
        loop from the outermost to the innermost given loop has a single child (no blocks or
        other statements in between), no loop is given twice.

        Parameters: ordered_loops (LoopRV).
        Raises: DuplicateLoopError, LoopNotAncestorError, NotOnlyChildError, DependentLoopError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8, 4), "float32")):
        ...     for i, j in T.grid(8, 4):
        ...         with T.block("A"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             A[vi, vj] = T.float32(0)
        >>> sch = tir.Schedule(f)
        >>> i, j = sch.get_loops(sch.get_block("A"))
        >>> sch.reorder(j, i)
        >>> print(sch.mod["main"].body.block.body)
        for j, i in T.grid(4, 8):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads()
                T.writes(A[vi, vj])
                A[vi, vj] = T.float32(0)
        """
        if not ordered_loops:
            return None
        resolved = [self._resolve_loop(lp, "reorder", "ordered_loops") for lp in ordered_loops]
        func_name, _, index = resolved[0]
        func = self._func(func_name)
        nodes = [r[1] for r in resolved]
        if len({id(n) for n in nodes}) != len(nodes):
            raise errors.DuplicateLoopError("reorder", "a loop is given more than once", func, nodes)
        by_depth = sorted(nodes, key=lambda n: len(index.path(n)))
        deepest = by_depth[-1]
        chain_above = index.path(deepest)
        for n in by_depth[:-1]:
            if not any(a is n for a in chain_above):
                raise errors.LoopNotAncestorError(
                    "reorder", f"loops {n.loop_var.name} and {deepest.loop_var.name} are not nested "
                    "one inside the other; reorder needs loops on one chain", func, [n, deepest])
        top = by_depth[0]
        chain, cursor = [top], top
        while cursor is not deepest:
            if not isinstance(cursor.body, S.For):
                raise errors.NotOnlyChildError(
                    "reorder", f"loop {cursor.loop_var.name} has more than one child or a block "
                    f"between it and loop {deepest.loop_var.name}; the loops must form a chain of "
                    "single-child loops", func, [cursor])
            cursor = cursor.body
            chain.append(cursor)
        chain_vars = [c.loop_var for c in chain]
        for c in chain:
            if any(uses_var(c.min, v) or uses_var(c.extent, v) for v in chain_vars):
                raise errors.DependentLoopError(
                    "reorder", f"the range of loop {c.loop_var.name} depends on another loop of the "
                    "chain", func, [c])
        given = iter(ordered_loops and nodes)
        new_chain = [next(given) if any(c is n for n in nodes) else c for c in chain]
        moved = [c for k, c in enumerate(chain)   # loops with other loops before them than before
                 if {id(x) for x in chain[:k]} != {id(x) for x in new_chain[:_position(new_chain, c)]}]
        for realize in all_blocks_under(deepest):
            below_top = [lp for lp in index.loops_above(realize)
                         if any(a is top for a in index.path(lp)) or lp is top]
            problem = affine_problem(realize, below_top, overlap=_order_free(realize.block))
            if problem is not None:
                raise errors.NotAffineBindingError(
                    "reorder", f'block "{realize.block.name_hint}" has bindings that are not affine in '
                    f"the loops to reorder ({problem})", func, [top, realize.block])
            mixed = mixed_loop_of_reduction(moved, realize)
            if mixed is not None:
                raise errors.MixedIterTypeLoopError(
                    "reorder", f'loop {mixed.loop_var.name} feeds both spatial and reduce iterators of '
                    f'block "{realize.block.name_hint}", so moving it would let the block\'s init run '
                    "after updates of the same element; split or fuse so that each loop feeds one kind "
                    "of iterator, or reorder before fusing", func, [mixed, realize.block])
            ordered = next(((c, iv) for c in moved for iv, v in zip(realize.block.iter_vars, realize.iter_values)
                            if iv.iter_type == "scan" and uses_var(v, c.loop_var)), None)
            if ordered is not None:
                raise errors.WrongBlockIterTypeError(
                    "reorder", f"loop {ordered[0].loop_var.name} feeds the {ordered[1].iter_type} iterator "
                    f'{ordered[1].var.name} of block "{realize.block.name_hint}", whose iterations must '
                    "keep their order; loops over scan iterators cannot be reordered",
                    func, [ordered[0], realize.block])
        body = deepest.body
        for loop in reversed(new_chain):
            body = loop.replace(body=body)
        self._replace(func_name, {id(top): body}, "reorder")
        return None


class _BindingsSimplifyingSubstitute(SimplifyingSubstitute):
    """As SimplifyingSubstitute, but a block's T.where only gets the substitution: split leaves
    the guards of earlier splits in their Horner form, as the reference compiler does."""

    def visit_BlockRealize(self, realize):
        new = self.generic_visit(realize)
        if new is realize:
            return realize
        return new.replace(iter_values=tuple(simplify(v, self.var_ranges) for v in new.iter_values))


def _conjoin_predicate(stmt, condition):
    """``condition`` and-ed, unsimplified, into the predicate of every block directly under
    ``stmt``."""
    replacements = {}
    for realize in [stmt] if isinstance(stmt, S.BlockRealize) else child_blocks(stmt):
        old = realize.predicate
        new = condition if isinstance(old, E.IntImm) and old.value else E.And(old, condition)
        replacements[id(realize)] = realize.replace(predicate=new)
    return StmtReplacer(replacements).visit(stmt)


def _order_free(block: S.Block) -> bool:
    """The block's iterations may run in any order, however its bindings repeat or skip points:
    it has spatial iterators only and no init, reads none of the buffers it writes, and each of
    its stores writes at its iterators themselves (one element per iterator point), so an
    iteration visited twice stores the same value twice. As the reference compiler, reorder
    then accepts quasi-affine bindings that overlap (``v0 * 2 + v1`` with ``v1`` in 0..4)."""
    if block.init is not None or any(iv.iter_type != "spatial" for iv in block.iter_vars):
        return False
    written = {id(w.buffer) for w in block.writes}
    if any(id(r.buffer) in written for r in block.reads):
        return False
    own = [iv.var for iv in block.iter_vars]
    stores, other = [], []

    def visit(node):
        if isinstance(node, S.BufferStore):
            stores.append(node)
        elif isinstance(node, (S.BlockRealize, S.For, S.LetStmt)):
            other.append(node)
    post_order_visit(block.body, visit)
    if other or not stores:
        return False
    for store in stores:
        if id(store.buffer) not in written or _reads(store.value, written):
            return False
        used = [i for i in store.indices if isinstance(i, E.Var) and any(i is v for v in own)]
        if len(used) != len(store.indices) or len({id(v) for v in used}) != len(own) or len(used) != len(own):
            return False
    return True


def _reads(value, buffer_ids) -> bool:
    found = []
    post_order_visit(value, lambda n: found.append(n) if isinstance(n, E.BufferLoad)
                     and id(n.buffer) in buffer_ids else None)
    return bool(found)


def _position(loops, loop) -> int:
    return next(k for k, x in enumerate(loops) if x is loop)


def _unit_loop_values(index, loop: S.For) -> dict:
    """Var -> its only value for the loops of extent 1 around ``loop``: what
    preserve_unit_iters=False takes out of the bindings below."""
    return {a.loop_var: a.min for a in index.path(loop)
            if isinstance(a, S.For) and const_int(simplify(a.extent)) == 1}


def _check_plain_loop(primitive: str, node: S.For, func) -> None:
    """split and fuse make new serial loops: a thread binding or annotations of ``node`` would
    silently disappear, so they are refused."""
    if node.kind == "thread_binding":
        raise errors.ThreadBoundLoopError(
            primitive, f"loop {node.loop_var.name} is bound to {node.thread_binding}; {primitive} "
            "loops before binding them", func, [node])
    if node.annotations:
        keys = ", ".join(repr(k) for k, _ in node.annotations)
        raise errors.AnnotatedLoopError(
            primitive, f"loop {node.loop_var.name} carries the annotations {keys}; {primitive} it "
            "before annotating (or unannotate it first)", func, [node])
