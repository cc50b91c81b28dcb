"""Sampling: random choices a search explores (tile sizes, a categorical choice, a compute
location). Each records its decision in the trace; replaying with ``decision=`` repeats it."""
from __future__ import annotations

from math import comb

from ....arith import simplify
from .. import errors
from ... import stmt as S
from ..instruction import instruction
from ..rv import BlockRV, LoopRV, SampledInt
from .scope import all_blocks_under, const_int, fed_iter_types


class SamplingPrimitives:

    @instruction
    def sample_perfect_tile(self, loop, n: int, max_innermost_factor: int | None = 16,
                            decision=None) -> list:
        """Sample ``n`` tile sizes whose product is the extent of ``loop`` (for ``sch.split``).

        Every factorisation into ``n`` ordered factors with an innermost factor of at most
        ``max_innermost_factor`` is equally likely. The module is not changed.

        Requires: ``loop`` has a constant extent; n >= 1.

        Parameters: loop (LoopRV); n (int, how many factors); max_innermost_factor (int, or None
        for no limit; -1 also means no limit); decision (list of n ints to use instead of sampling,
        as trace replay passes it).
        Returns: a list of n ints, outermost first.
        Raises: InvalidDecisionError (a decision that does not multiply to the extent),
        SymbolicExtentError.

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((64,), "float32")):
        ...     for i in range(64):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(64, i)
        ...             A[vi] = T.float32(0)
        >>> sch = tir.Schedule(f, seed=0)
        >>> (i,) = sch.get_loops(sch.get_block("A"))
        >>> tiles = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4)
        >>> tiles
        [8, 2, 4]
        >>> sch.split(i, factors=tiles) and None
        >>> print(sch.mod["main"].body.block.body.script().splitlines()[0])
        for i_0, i_1, i_2 in T.grid(8, 2, 4):
        >>> sch.trace.as_python()[-2:]
        ['v2, v3, v4 = sch.sample_perfect_tile(loop=l1, n=3, max_innermost_factor=4, decision=[8, 2, 4])', 'l5, l6, l7 = sch.split(loop=l1, factors=[v2, v3, v4])']
        """
        func_name, node, _ = self._resolve_loop(loop, "sample_perfect_tile")
        func = self._func(func_name)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise TypeError(f"sch.sample_perfect_tile: parameter 'n' expects a positive int, got {n!r}")
        if max_innermost_factor is not None and (not isinstance(max_innermost_factor, int)
                                                 or max_innermost_factor == 0
                                                 or max_innermost_factor < -1):
            raise TypeError("sch.sample_perfect_tile: parameter 'max_innermost_factor' expects a "
                            f"positive int, -1 or None, got {max_innermost_factor!r}")
        limit = None if max_innermost_factor in (None, -1) else max_innermost_factor
        extent = const_int(simplify(node.extent))
        if extent is None:
            raise errors.SymbolicExtentError(
                "sample_perfect_tile", f"loop {node.loop_var.name} has the symbolic extent "
                f"{node.extent}; only constant extents can be tiled perfectly", func, [node])
        if decision is not None:
            tiles = [int(t) for t in decision] if isinstance(decision, (list, tuple)) else None
            product = 1
            for t in tiles or []:
                product *= t
            if tiles is None or len(tiles) != n or min(tiles) < 1 or product != extent:
                raise errors.InvalidDecisionError(
                    "sample_perfect_tile", f"the decision {decision!r} is not {n} positive factors "
                    f"of the extent {extent} of loop {node.loop_var.name}", func, [node])
        else:
            tiles = perfect_tile(self._rng, extent, n, limit)
        self._last_decision = list(tiles)
        return [SampledInt(t) for t in tiles]

    @instruction
    def sample_categorical(self, candidates: list, probs: list, decision=None):
        """Sample one of ``candidates``; candidate ``k`` is drawn with probability ``probs[k]``
        (the probabilities are normalised). The module is not changed.

        Requires: as many probabilities as candidates, none negative, not all zero.

        Parameters: candidates (list of ints, floats or strs); probs (list of numbers);
        decision (index of the candidate to take instead of sampling).
        Returns: the chosen candidate.
        Raises: InvalidDecisionError (an index out of range), TypeError/ValueError (bad lists).

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((64,), "float32")):
        ...     for i in range(64):
        ...         with T.block("A"):
        ...             vi = T.axis.spatial(64, i)
        ...             A[vi] = T.float32(0)
        >>> sch = tir.Schedule(f, seed=1)
        >>> sch.sample_categorical([16, 64, 512], probs=[0.5, 0.25, 0.25])
        64
        >>> sch.trace.as_python()[-1]
        'v0 = sch.sample_categorical(candidates=[16, 64, 512], probs=[0.5, 0.25, 0.25], decision=1)'
        >>> sch.sample_categorical([16, 64, 512], probs=[0.5, 0.25, 0.25], decision=2)
        512
        """
        if not isinstance(candidates, (list, tuple)) or not candidates:
            raise TypeError("sch.sample_categorical: parameter 'candidates' expects a non-empty list, "
                            f"got {candidates!r}")
        if not isinstance(probs, (list, tuple)) or len(probs) != len(candidates):
            raise ValueError(f"sch.sample_categorical: {len(candidates)} candidates need as many "
                             f"probabilities, got {probs!r}")
        weights = [float(p) for p in probs]
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(f"sch.sample_categorical: probabilities must be non-negative and not all "
                             f"zero, got {probs!r}")
        if decision is not None:
            if not isinstance(decision, int) or not 0 <= decision < len(candidates):
                raise errors.InvalidDecisionError(
                    "sample_categorical", f"the decision {decision!r} is not an index into the "
                    f"{len(candidates)} candidates")
            chosen = decision
        else:
            total = sum(weights)
            chosen = int(self._rng.choice(len(candidates), p=[w / total for w in weights]))
        self._last_decision = chosen
        value = candidates[chosen]
        return SampledInt(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @instruction
    def sample_compute_location(self, block, decision=None):
        """Sample a loop to ``compute_at`` the block under, or the root (its current place).

        The candidates follow the reference compiler: the root (decision -1), and each loop
        above the block's first consumer, down to the innermost loop enclosing all consumers,
        where compute_at is legal, skipping loops of extent 1 and stopping at reduction loops
        (decision = the loop's position among the consumer's loops). A decision that is no
        longer a candidate falls back to the nearest candidate above it. The module is not
        changed; inlining is not a candidate here (use compute_inline for it).

        Requires: a block (with or without consumers).

        Parameters: block (BlockRV); decision (int as above, to use instead of sampling).
        Returns: a LoopRV, or None for the root.
        Raises: TypeError (a decision that is not an int).

        Example:

        >>> @T.prim_func
        ... def f(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        ...     B = T.alloc_buffer((16, 16))
        ...     for i, j in T.grid(16, 16):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        ...     for i, j in T.grid(16, 16):
        ...         with T.block("C"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             C[vi, vj] = B[vi, vj] + T.float32(1)
        >>> sch = tir.Schedule(f, seed=0)
        >>> sch.sample_compute_location(sch.get_block("B"), decision=0)
        LoopRV(i)
        >>> print(sch.sample_compute_location(sch.get_block("B"), decision=-1))
        None
        """
        func_name, realize, index = self._resolve_block(block, "sample_compute_location")
        if decision is not None and (not isinstance(decision, int) or isinstance(decision, bool)):
            raise TypeError(f"sch.sample_compute_location: a decision is an int, got {decision!r}")
        candidates = self._compute_location_candidates(func_name, realize, index)
        positions = [pos for pos, _ in candidates]
        if decision is None:
            pick = int(self._rng.integers(len(candidates)))
        else:
            below = [k for k, pos in enumerate(positions) if pos <= decision]
            pick = below[-1] if below else 0
        position, loop = candidates[pick]
        self._last_decision = position
        return None if loop is None else self._loop_rv(loop, func_name)

    def _compute_location_candidates(self, func_name: str, realize, index) -> list:
        """[(decision, For or None)], the root (-1) first."""
        candidates = [(-1, None)]
        consumers = index.consumers(realize)
        if not consumers:
            return candidates
        loops = index.loops_above(consumers[0])
        common = [lp for lp in loops if all(any(a is lp for a in index.path(c)) for c in consumers)]
        if not common:
            return candidates
        n_candidate = loops.index(common[-1]) + 1
        kinds = [_loop_iter_type(lp) for lp in loops[:n_candidate]]
        last_spatial = max((k for k, kind in enumerate(kinds) if kind == "spatial"), default=-1)
        seen_reduce = False
        for pos, (lp, kind) in enumerate(zip(loops[:n_candidate], kinds)):
            if const_int(simplify(lp.extent)) == 1:
                continue
            if kind == "spatial" and seen_reduce:
                break
            if kind != "spatial":
                seen_reduce = True
                if pos > last_spatial:
                    break
            if self._can_compute_at(func_name, realize, lp):
                candidates.append((pos, lp))
        return candidates

    def _can_compute_at(self, func_name: str, realize, loop) -> bool:
        """Try compute_at on a throwaway schedule of the current module."""
        probe_cls = type(self)
        if not hasattr(probe_cls, "compute_at"):
            return True
        probe = probe_cls(self._mod)
        try:
            probe.compute_at.__wrapped__(probe, BlockRV(realize.block.name_hint, func_name),
                                         LoopRV(loop.loop_var, func_name))
        except errors.ScheduleError:
            return False
        except NotImplementedError:
            return True
        return True


def _loop_iter_type(loop: S.For) -> str:
    """'spatial' when the loop only feeds spatial iterators of the blocks under it, 'reduce'
    when only reduce iterators, 'opaque' when both."""
    kinds = fed_iter_types(loop.loop_var, all_blocks_under(loop))
    if kinds <= {"spatial"}:
        return "spatial"
    return "reduce" if kinds == {"reduce"} else "opaque"


# -- uniform perfect tiles --------------------------------------------------------------------

def perfect_tile(rng, extent: int, n: int, max_innermost: int | None) -> list[int]:
    """n factors of ``extent``, uniform over the ordered factorisations whose last factor is at
    most ``max_innermost``: the last factor is drawn weighted by how many factorisations of the
    rest there are, then the rest is drawn uniformly prime by prime."""
    if n == 1:
        return [extent]
    innermost = [d for d in _divisors(extent) if max_innermost is None or d <= max_innermost]
    weights = [_count_factorisations(extent // d, n - 1) for d in innermost]
    pick = int(rng.integers(sum(weights)))
    for d, w in zip(innermost, weights):
        if pick < w:
            return _uniform_factorisation(rng, extent // d, n - 1) + [d]
        pick -= w
    raise AssertionError("unreachable: the weights cover the draw")


def _prime_exponents(x: int) -> list[tuple[int, int]]:
    out, p = [], 2
    while p * p <= x:
        e = 0
        while x % p == 0:
            x //= p
            e += 1
        if e:
            out.append((p, e))
        p += 1
    if x > 1:
        out.append((x, 1))
    return out


def _divisors(x: int) -> list[int]:
    return [d for d in range(1, x + 1) if x % d == 0] if x < 1 << 16 else sorted(
        {d for k in range(1, int(x ** 0.5) + 1) if x % k == 0 for d in (k, x // k)})


def _count_factorisations(x: int, n: int) -> int:
    count = 1
    for _, e in _prime_exponents(x):
        count *= comb(e + n - 1, n - 1)
    return count


def _uniform_factorisation(rng, x: int, n: int) -> list[int]:
    """Each prime's exponent is split into n parts by a uniform stars-and-bars draw."""
    factors = [1] * n
    for p, e in _prime_exponents(x):
        bars = sorted(int(b) for b in rng.choice(e + n - 1, size=n - 1, replace=False))
        edges = [-1] + bars + [e + n - 1]
        for k in range(n):
            factors[k] *= p ** (edges[k + 1] - edges[k] - 1)
    return factors
