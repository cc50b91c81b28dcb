"""Property test: random sequences of loop primitives on corpus programs keep the numerics the
interpreter computes, leave the module untouched when they raise, and replay from their trace."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import numerics
from mlc_lab.tir.schedule.func_index import FuncIndex

from corpus import CORPUS


@T.prim_func
def mm_relu_32(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
               C: T.Buffer((32, 32), "float32")):
    Y = T.alloc_buffer((32, 32), dtype="float32")
    for i, j, k in T.grid(32, 32, 32):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))


PROGRAMS = {
    "vector_add": CORPUS["vector_add"].func,
    "mm_relu_32": mm_relu_32,
    "softmax": CORPUS["softmax"].func,
    "conv2d_nchw": CORPUS["conv2d_nchw"].func,
    "where_and_branches": CORPUS["where_and_branches"].func,
}
LOOP_PRIMITIVES = ["split", "split", "fuse", "reorder", "parallel", "vectorize", "unroll", "blockize"]
MOVE_PRIMITIVES = [name for name in ("compute_at", "reverse_compute_at") if hasattr(tir.Schedule, name)]


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _extent(sch, loop):
    node = FuncIndex(sch.mod[loop.func_name]).loops[id(loop.var)]
    return node.extent.value


def _split_factors(data, extent):
    n = data.draw(st.integers(2, 3), label="number of factors")
    if data.draw(st.booleans(), label="perfect split"):
        factors, rest = [], extent
        for _ in range(n - 1):
            f = data.draw(st.sampled_from(_divisors(rest)), label="factor")
            factors.append(f)
            rest //= f
        return [rest] + factors
    factors = [data.draw(st.integers(1, 8), label="factor") for _ in range(n - 1)]
    factors.insert(data.draw(st.integers(0, n - 1), label="position of None"), None)
    return factors


def _random_step(sch, data):
    """One primitive call on a random block's loops, as a zero-argument function (or None)."""
    names = sorted(n for n in FuncIndex(sch.mod["main"]).blocks if n != "root")
    block = sch.get_block(data.draw(st.sampled_from(names), label="block"))
    loops = sch.get_loops(block)
    if not loops:
        return None
    kind = data.draw(st.sampled_from(LOOP_PRIMITIVES + MOVE_PRIMITIVES), label="primitive")
    pick = data.draw(st.integers(0, len(loops) - 1), label="loop")
    loop = loops[pick]
    if kind == "split":
        factors = _split_factors(data, _extent(sch, loop))
        return lambda: sch.split(loop, factors=factors)
    if kind in ("fuse", "reorder"):
        width = min(data.draw(st.integers(2, 3), label="how many loops"), len(loops) - pick)
        if width < 2:
            return None
        window = loops[pick:pick + width]
        if kind == "fuse":
            return lambda: sch.fuse(*window)
        order = data.draw(st.permutations(window), label="order")
        return lambda: sch.reorder(*order)
    if kind in MOVE_PRIMITIVES:
        other = sch.get_block(data.draw(st.sampled_from(names), label="other block"))
        target_loops = sch.get_loops(other)
        if not target_loops:
            return None
        target = target_loops[data.draw(st.integers(0, len(target_loops) - 1), label="target loop")]
        return lambda: getattr(sch, kind)(block, target)
    return lambda: getattr(sch, kind)(loop)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(name=st.sampled_from(sorted(PROGRAMS)), data=st.data())
def test_random_schedules_keep_numerics_and_replay(name, data):
    original = PROGRAMS[name]
    sch = tir.Schedule(original)
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        step = _random_step(sch, data)
        if step is None:
            continue
        before, trace_length = sch.mod, len(sch.trace.insts)
        try:
            step()
        except tir.ScheduleError:
            assert sch.mod is before
            assert len(sch.trace.insts) == trace_length
    args = numerics.random_arguments(original)
    expected = numerics.run(original, args)
    for want, got in zip(expected, numerics.run(sch.mod["main"], args)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # The same schedule compiled to native code agrees with the interpreter.
    compiled = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    mlc_lab.build(sch.mod, target="llvm")["main"](*compiled)
    for want, got in zip(expected, compiled):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    replayed = tir.Trace.from_json(sch.trace.as_json()).apply_to_schedule(tir.Schedule(original))
    assert_structural_equal(replayed.mod, sch.mod)


# The layout and buffer primitives, with the fuzzer's own argument draws (index maps that permute,
# fuse or split iterators; alignment requests; widening dtypes; unit loops).
LAYOUT_PRIMITIVES = ["reindex_cache_read", "reindex_cache_write", "transform_block_layout", "cache_index",
                     "storage_align", "set_axis_separator", "unsafe_set_dtype", "add_unit_loop"]


@settings(max_examples=20, deadline=None, derandomize=True)
@given(name=st.sampled_from(sorted(PROGRAMS)), seed=st.integers(0, 2 ** 16),
       ops=st.lists(st.sampled_from(LAYOUT_PRIMITIVES), min_size=1, max_size=3))
def test_random_layout_steps_keep_numerics_and_replay(name, seed, ops):
    from mlc_lab.testing.fuzz import layout_steps
    from mlc_lab.testing.fuzz.steps import Step
    original = PROGRAMS[name]
    sch = tir.Schedule(original)
    rng = np.random.default_rng(seed)
    for op in ops:
        func = sch.mod["main"]
        index = FuncIndex(func)
        names = sorted(n for n in index.blocks if n != "root")
        block = names[int(rng.integers(len(names)))]
        fields = layout_steps.draw(op, func, index, names, block, rng)
        if fields is None:
            continue
        before, trace_length = sch.mod, _transforms(sch)
        try:
            Step(block=block, **fields).apply(sch)   # looks its block and loops up by name
        except tir.ScheduleError:
            assert sch.mod is before
            assert _transforms(sch) == trace_length
    args = numerics.random_arguments(original)
    expected = numerics.run(original, args)
    for want, got in zip(expected, numerics.run(sch.mod["main"], args)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    replayed = tir.Trace.from_json(sch.trace.as_json()).apply_to_schedule(tir.Schedule(original))
    assert_structural_equal(replayed.mod, sch.mod)


def _transforms(sch) -> int:
    """The number of traced instructions other than look-ups."""
    return sum(1 for inst in sch.trace.insts if inst.kind not in ("get_block", "get_loops"))
