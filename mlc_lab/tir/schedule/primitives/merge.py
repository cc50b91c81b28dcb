"""merge: fuse several loop nests of equal shape that sit side by side into one nest."""
from __future__ import annotations

from ....arith import can_prove
from .. import errors
from ... import expr as E
from ... import stmt as S
from ..instruction import instruction
from ...stmt_functor import loads_in, stores_in, substitute
from .scope import all_blocks_under, const_int


class MergePrimitives:

    @instruction
    def merge(self, *loops):
        """Merge loop nests that sit side by side into one nest whose body runs their bodies in turn.

        Each given loop, together with the loops above it up to the lowest common ancestor of all
        of them, forms a nest; the nests must have the same depth and the same extents level by
        level. The merged loops are named after the first nest's (``i_0`` gives ``i_0_m``) and
        the merged nest takes the place of the last given loop's nest.

        Requires: at least two loops, all under one block; each nest a chain of loops, each the
        only statement of the one around it, starting at 0, not bound to a thread, without
        annotations; the nests' outermost loops are statements of one sequence. Since merging
        interleaves the nests' iterations, no nest may write a buffer another nest reads or
        writes, and no statement between the nests may touch a buffer they write (or write one
        they read); the reference compiler does not check this.

        Parameters: loops (LoopRV, two or more).
        Returns: the innermost merged loop.
        Raises: MergeTooFewLoopsError, MergeDifferentScopeError, MergeNotSiblingsError,
        MergeDepthMismatchError, MergeExtentMismatchError, MergeNotOnlyChildError,
        MergeLoopNotStartingAtZeroError, MergeAnnotatedLoopError, MergeDependenceError (all
        MergeError).

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
        ...       C: T.Buffer((8,), "float32")):
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[vi] = A[vi] + T.float32(1)
        ...     for i in range(8):
        ...         with T.block("C"):
        ...             vi = T.axis.spatial(8, i)
        ...             C[vi] = A[vi] * T.float32(2)
        >>> sch = tir.Schedule(f)
        >>> i = sch.get_loops(sch.get_block("B"))[0]
        >>> j = sch.get_loops(sch.get_block("C"))[0]
        >>> m = sch.merge(i, j)
        >>> print(sch.mod["main"].body.block.body)
        for i_m in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i_m])
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1)
            with T.block("C"):
                vi = T.axis.remap("S", [i_m])
                T.reads(A[vi])
                T.writes(C[vi])
                C[vi] = A[vi] * T.float32(2)
        """
        if len(loops) == 1 and isinstance(loops[0], (list, tuple)):
            loops = tuple(loops[0])
        resolved = [self._resolve_loop(lp, "merge", "loops") for lp in loops]
        if not resolved:
            raise TypeError("sch.merge: give at least two loops")
        func_name, _, index = resolved[0]
        func = self._func(func_name)
        nodes = [r[1] for r in resolved]
        if len({id(n) for n in nodes}) < 2 or len({id(n) for n in nodes}) != len(nodes):
            raise errors.MergeTooFewLoopsError(
                "merge", "merge needs at least two distinct loops", func, nodes)
        scopes = {id(index.parent_block(n)) for n in nodes}
        if len(scopes) != 1:
            raise errors.MergeDifferentScopeError(
                "merge", "the loops " + ", ".join(n.loop_var.name for n in nodes) + " are not all "
                "under the same block", func, nodes)
        paths = [index.path(n) + [n] for n in nodes]
        depth = 0
        while all(len(p) > depth for p in paths) and len({id(p[depth]) for p in paths}) == 1:
            depth += 1
        lca = paths[0][depth - 1] if depth else None
        nests = [p[depth:] for p in paths]
        for n, nest in zip(nodes, nests):
            if not nest or nest[-1] is not n or any(not isinstance(x, S.For) for x in nest):
                raise errors.MergeNotSiblingsError(
                    "merge", f"loop {n.loop_var.name} encloses another given loop, or a block lies "
                    "between it and the loops' common ancestor", func, nodes)
        _check_nests("merge", nests, func)
        body = lca.block.body if isinstance(lca, S.BlockRealize) else (
            lca.body if isinstance(lca, S.For) else func.body)
        stmts = list(body.seq) if isinstance(body, S.SeqStmt) else [body]
        positions = [next((k for k, s in enumerate(stmts) if s is nest[0]), None) for nest in nests]
        if None in positions:
            raise errors.MergeNotSiblingsError(
                "merge", "the outermost loops " + ", ".join(nest[0].loop_var.name for nest in nests)
                + " are not statements of one sequence", func, [nest[0] for nest in nests])
        _check_dependences(func, stmts, positions, nests)
        merged_vars = [E.Var(lp.loop_var.name + "_m", lp.loop_var.dtype) for lp in nests[0]]
        bodies = []
        for nest in nests:
            mapping = {lp.loop_var: v for lp, v in zip(nest, merged_vars)}
            bodies.append(substitute(nest[-1].body, mapping))
        new = S.seq(*bodies)
        inner = None
        for lp, var in reversed(list(zip(nests[0], merged_vars))):
            new = S.For(var, E.const(0, var.dtype), lp.extent, "serial", new)
            inner = inner or new
        last = positions[-1]
        new_stmts = [new if k == last else s for k, s in enumerate(stmts) if k == last or k not in positions]
        self._replace(func_name, {id(body): S.seq(*new_stmts)}, "merge")
        return self._loop_rv_of_var(merged_vars[-1], func_name)


def _check_nests(primitive, nests, func) -> None:
    depth = len(nests[0])
    for nest in nests:
        for outer, inner in zip(nest, nest[1:]):
            if outer.body is not inner:
                raise errors.MergeNotOnlyChildError(
                    primitive, f"loop {inner.loop_var.name} is not the only statement of loop "
                    f"{outer.loop_var.name}", func, [outer, inner])
        for lp in nest:
            if const_int(lp.min) != 0:
                raise errors.MergeLoopNotStartingAtZeroError(
                    primitive, f"loop {lp.loop_var.name} starts at {lp.min}, not at 0", func, [lp])
            if lp.kind == "thread_binding" or lp.annotations:
                raise errors.MergeAnnotatedLoopError(
                    primitive, f"loop {lp.loop_var.name} is bound to a thread or annotated; merge "
                    "makes serial loops without annotations", func, [lp])
        if len(nest) != depth:
            raise errors.MergeDepthMismatchError(
                primitive, f"the nest of loop {nest[-1].loop_var.name} has {len(nest)} loop(s) below "
                f"the common ancestor, the nest of loop {nests[0][-1].loop_var.name} has {depth}",
                func, [nest[-1], nests[0][-1]])
    for level in range(depth):
        first = nests[0][level]
        for nest in nests[1:]:
            lp = nest[level]
            if not can_prove(E.EQ(lp.extent, first.extent)):
                raise errors.MergeExtentMismatchError(
                    primitive, f"loop {lp.loop_var.name} has extent {lp.extent} but loop "
                    f"{first.loop_var.name} at the same level has extent {first.extent}",
                    func, [first, lp])


def _accesses(stmt):
    """(ids of buffers read, ids of buffers written, names by id) in ``stmt``."""
    reads, writes, names = set(), set(), {}
    for load in loads_in(stmt):
        reads.add(id(load.buffer))
        names[id(load.buffer)] = load.buffer.name
    for store in stores_in(stmt):
        writes.add(id(store.buffer))
        names[id(store.buffer)] = store.buffer.name
    for realize in all_blocks_under(stmt):
        for region in realize.block.reads:
            reads.add(id(region.buffer))
            names[id(region.buffer)] = region.buffer.name
        for region in realize.block.writes:
            writes.add(id(region.buffer))
            names[id(region.buffer)] = region.buffer.name
    return reads, writes, names


def _conflict(a, b):
    """A buffer one side writes and the other touches, or None."""
    (ra, wa, na), (rb, wb, nb) = a, b
    shared = (wa & (rb | wb)) | (wb & ra)
    if not shared:
        return None
    return {**na, **nb}[sorted(shared)[0]]


def _check_dependences(func, stmts, positions, nests) -> None:
    acc = [_accesses(nest[0]) for nest in nests]
    for a in range(len(nests)):
        for b in range(a + 1, len(nests)):
            name = _conflict(acc[a], acc[b])
            if name is not None:
                raise errors.MergeDependenceError(
                    "merge", f"buffer {name} is written by one of the nests of loops "
                    f"{nests[a][0].loop_var.name} and {nests[b][0].loop_var.name} and accessed by "
                    "the other; merging would interleave their iterations", func,
                    [nests[a][0], nests[b][0]])
    last = positions[-1]
    for k in range(min(positions), max(positions) + 1):
        if k in positions:
            continue
        between = None
        for pos, nest, a in zip(positions, nests, acc):
            if not (pos < k < last or last < k < pos):
                continue   # the nest does not move past statement k
            between = between or _accesses(stmts[k])
            name = _conflict(a, between)
            if name is not None:
                raise errors.MergeDependenceError(
                    "merge", f"a statement between the nests touches buffer {name}, which the nest "
                    f"of loop {nest[0].loop_var.name} accesses too; merging moves the nest past "
                    "it", func, [stmts[k]])
