"""The proof that a loop nest visits each iteration of a block at most once (which
decompose_reduction relies on) agrees with enumerating the iterations, on random split / fuse /
reorder nests and on nests that do repeat iterations (compute_at under a fused loop)."""
import numpy as np
import pytest

from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import ScheduleError
from mlc_lab.tir.schedule.primitives.injective import _affine_injective, _enumerate, repeated_points

from test_schedule_reduction import normalize_rows


@T.prim_func
def matmul(A: T.Buffer((12, 6), "float32"), B: T.Buffer((6, 8), "float32"),
           C: T.Buffer((12, 8), "float32")):
    for i, j, k in T.grid(12, 8, 6):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def _random_nest(rng) -> tir.Schedule:
    sch = tir.Schedule(matmul)
    for _ in range(int(rng.integers(1, 6))):
        loops = sch.get_loops(sch.get_block("C"))
        move = rng.integers(3)
        try:
            if move == 0:
                loop = loops[int(rng.integers(len(loops)))]
                sch.split(loop, factors=[None, int(rng.integers(2, 6))])   # may overhang: T.where
            elif move == 1 and len(loops) > 1:
                at = int(rng.integers(len(loops) - 1))
                sch.fuse(loops[at], loops[at + 1])
            elif len(loops) > 1:
                sch.reorder(*[loops[int(p)] for p in rng.permutation(len(loops))])
        except ScheduleError:
            pass
    return sch


def _nest(sch, name):
    index = sch._index("main")
    realize = index.blocks[name]
    return realize, index.loops_above(realize)


def test_the_proof_never_contradicts_enumeration_and_proves_split_and_fuse_nests():
    rng = np.random.default_rng(0)
    proved = 0
    for _ in range(150):
        realize, loops = _nest(_random_nest(rng), "C")
        for pos in range(len(loops)):
            if _affine_injective(realize, loops[pos:]):
                proved += 1
                assert _enumerate(realize, loops[pos:], loops[:pos]) is False
    assert proved > 300   # split, fuse and reorder keep every nest injective: most are proven


def test_a_nest_that_repeats_iterations_is_not_proven():
    sch = tir.Schedule(normalize_rows)
    i, j = sch.get_loops(sch.get_block("out"))
    sch.compute_at(sch.get_block("sm"), sch.fuse(i, j), preserve_unit_loops=True)
    realize, loops = _nest(sch, "sm")
    assert not _affine_injective(realize, loops)
    assert repeated_points(realize, loops) is True
    assert repeated_points(realize, loops[1:], loops[:1]) is False


@pytest.mark.parametrize("split", [[None, 4], [None, 5]])
def test_big_nests_are_proven_without_enumerating(split):
    @T.prim_func
    def big(A: T.Buffer((2048, 2048), "float32"), S: T.Buffer((2048,), "float32")):
        for i, k in T.grid(2048, 2048):
            with T.block("S"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + A[vi, vk]

    sch = tir.Schedule(big)
    i, k = sch.get_loops(sch.get_block("S"))
    i0, i1 = sch.split(i, factors=split)
    sch.fuse(i0, i1)   # fuse back: the binding is (f // 4) * 4 + f % 4, over 4M iterations
    sch.split(k, factors=[None, 1])   # a unit loop: vk = k_0 + k_1 (a sampled tile of 1 does this)
    realize, loops = _nest(sch, "S")
    assert _affine_injective(realize, loops)
    sch.decompose_reduction(sch.get_block("S"), sch.get_loops(sch.get_block("S"))[0])
