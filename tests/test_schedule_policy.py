"""The schedule policy: the block predicates every schedule decides by, and the inlining policy
with its three variants (what FuseTIR, DefaultSchedule and the tuner's AutoInline inline)."""
import pytest

from mlc_lab import tir
from mlc_lab.ir import assert_structural_equal
from mlc_lab.meta_schedule import schedule_rule
from mlc_lab.meta_schedule.schedule_rule import AutoInline
from mlc_lab.relax.transform.default_schedule_rules import inline_elementwise
from mlc_lab.relax.transform.fuse_tir import inline_intermediates
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule.policy import blocks
from mlc_lab.tir.schedule.policy.inline import InlinePolicy
from mlc_lab.tir.schedule.policy.postproc import block_names
from mlc_lab.tir.schedule.primitives import scope
from corpus import conv2d_nchw, mm_relu, softmax
from schedule_checks import assert_replays, assert_same_numerics
from test_schedule_inline import scale_add

VARIANTS = {"FUSE_TIR": InlinePolicy.FUSE_TIR, "DEFAULT_SCHEDULE": InlinePolicy.DEFAULT_SCHEDULE,
            "TUNER": InlinePolicy.TUNER}


# A padding P into a reduction S; X stores reversed, so compute_inline refuses it.
@T.prim_func
def reverse_pad_sum(A: T.Buffer((16,), "float32"), S: T.Buffer((1,), "float32")):
    X = T.alloc_buffer((16,))
    P = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("X"):
            vi = T.axis.spatial(16, i)
            X[15 - vi] = A[vi] * T.float32(2)
    for i in range(16):
        with T.block("P"):
            vi = T.axis.spatial(16, i)
            P[vi] = T.if_then_else(vi < 12, X[vi], T.float32(0))
    for k in range(16):
        with T.block("S"):
            vk = T.axis.reduce(16, k)
            with T.init():
                S[0] = T.float32(0)
            S[0] = S[0] + P[vk]


def test_block_predicates():
    sch = tir.Schedule(mm_relu)
    mm, relu = sch.get(sch.get_block("Y")), sch.get(sch.get_block("C"))
    padded = tir.Schedule(reverse_pad_sum)
    pad = padded.get(padded.get_block("P"))
    assert [blocks.is_spatial(b) for b in (mm, pad, relu)] == [False, True, True]
    assert [blocks.is_reduction(b) for b in (mm, pad, relu)] == [True, False, False]
    assert blocks.is_reduction_block(mm) and not blocks.is_reduction_block(mm.replace(init=None))
    assert blocks.is_reduction(mm.replace(init=None))
    assert [blocks.is_plain_store(b) for b in (mm, pad, relu)] == [False, True, True]
    assert [blocks.stores_conditional(b) for b in (mm, pad, relu)] == [False, True, False]
    assert [blocks.has_data_reuse(b) for b in (mm, pad, relu)] == [True, False, False]
    assert blocks.writes_param(sch, sch.get_block("C"), relu)
    assert not blocks.writes_param(sch, sch.get_block("Y"), mm)
    i, j, k = (sch.get(loop) for loop in sch.get_loops(sch.get_block("Y")))
    assert [blocks.feeds_only_spatial(loop) for loop in (i, j, k)] == [True, True, False]
    assert blocks.tileable_loops(sch, sch.get_block("Y")) is not None
    assert blocks.tileable_loops(sch, sch.get_block("C")) is None


def test_predicates_have_one_definition():
    """The primitives, the policy and the tuner's rules use the same functions."""
    for name in ("is_spatial", "is_reduction", "is_reduction_block", "feeds_only_spatial"):
        assert getattr(blocks, name) is getattr(scope, name)
    for name in ("is_spatial", "is_reduction", "has_data_reuse", "tileable_loops", "writes_param"):
        assert getattr(schedule_rule, name) is getattr(blocks, name)


def inlined(policy, func, check_numerics=True):
    """A schedule of ``func`` after ``policy.inline_all``, checked."""
    sch = tir.Schedule(func)
    policy.inline_all(sch)
    assert tir.verify(sch.mod["main"])
    if check_numerics:
        assert_same_numerics(func, sch.mod["main"])
    return sch


def writes_of(sch) -> dict:
    """{block left: the buffer it writes}."""
    return {name: sch.get(sch.get_block(name)).writes[0].buffer.name for name in blocks_of(sch)}


def blocks_of(sch) -> list:
    return block_names(sch, "main")


@pytest.mark.parametrize("variant, expected", [
    # padding kept; refused by compute_inline, P goes into its producer X instead
    ("FUSE_TIR", {"X": "P", "S": "S"}),
    # never into a reduction
    ("DEFAULT_SCHEDULE", {"X": "X", "P": "P", "S": "S"}),
    # P (padding and all) into the reduction; X stays, refused
    ("TUNER", {"X": "X", "S": "S"}),
])
def test_variants_on_a_padding_into_a_reduction(variant, expected):
    assert writes_of(inlined(VARIANTS[variant], reverse_pad_sum)) == expected


@pytest.mark.parametrize("variant, expected", [
    ("FUSE_TIR", ["maxelem", "expsum", "norm"]),
    ("DEFAULT_SCHEDULE", ["maxelem", "exp", "expsum", "norm"]),   # two readers, one a reduction
    ("TUNER", ["maxelem", "expsum", "norm"]),
])
def test_variants_on_softmax(variant, expected):
    assert blocks_of(inlined(VARIANTS[variant], softmax)) == expected


def test_output_goes_into_its_producer_where_the_variant_reverses_outputs():
    done = {}
    for name, policy in VARIANTS.items():
        sch = tir.Schedule(scale_add)
        done[name] = policy.inline_block(sch, sch.get_block("C"))
        assert blocks_of(sch) == (["B"] if done[name] else ["B", "C"])
    assert done == {"FUSE_TIR": True, "DEFAULT_SCHEDULE": False, "TUNER": True}


# B is written and never read.
@T.prim_func
def unread(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,))
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = A[vi] + T.float32(1)


def test_a_block_nobody_reads_is_dropped_only_by_fuse_tir():
    for name, policy in VARIANTS.items():
        sch = tir.Schedule(unread)
        assert policy.inline_block(sch, sch.get_block("B")) == (name == "FUSE_TIR")
        assert blocks_of(sch) == (["C"] if name == "FUSE_TIR" else ["B", "C"])


def test_callers_inline_by_their_variant():
    """FuseTIR, DefaultSchedule and AutoInline make what their variant makes, step by step."""
    for func in (mm_relu, reverse_pad_sum, softmax, scale_add, unread):
        assert_structural_equal(inline_intermediates(func),
                                inlined(InlinePolicy.FUSE_TIR, func, False).mod["main"])
        sch = tir.Schedule(func)
        inline_elementwise(sch)
        expected = inlined(InlinePolicy.DEFAULT_SCHEDULE, func, False)
        assert_structural_equal(sch.mod, expected.mod)
        assert sch.trace.as_python() == expected.trace.as_python()
        sch, expected = tir.Schedule(func), tir.Schedule(func)
        for name in reversed(blocks_of(sch)):
            AutoInline().apply(sch, sch.get_block(name))
            InlinePolicy.TUNER.inline_block(expected, expected.get_block(name))
        assert_structural_equal(sch.mod, expected.mod)
        assert sch.trace.as_python() == expected.trace.as_python()


# -- packing an operand into panels ---------------------------------------------------------------
def _tiled_matmul(pack: int, j_tiles=(2, 2, 2, 4)):
    """A 32x32x32 matmul tiled SSRSRS (the tuner's structure), marked to be packed or not."""
    from mlc_lab.testing import matmul_schedules as mm
    from mlc_lab.tir.schedule.policy.pack import ANN_PACK
    sch = tir.Schedule(mm.naive(32))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2, i3 = sch.split(i, [2, 2, 2, 4])
    j0, j1, j2, j3 = sch.split(j, list(j_tiles))
    k0, k1 = sch.split(k, [4, 8])
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    sch.annotate(block, ANN_PACK, pack)
    return sch


def test_a_packed_operand_is_copied_into_panels_as_wide_as_the_tile_columns():
    from mlc_lab.testing import matmul_schedules as mm
    from mlc_lab.tir.schedule.policy.pack import ANN_PACK, RewritePackedOperands
    for j_tiles, width in (((2, 2, 2, 4), 8), ((1, 4, 1, 8), 8), ((4, 1, 4, 2), 8), ((1, 1, 2, 16), 32)):
        sch = _tiled_matmul(1, j_tiles)
        assert RewritePackedOperands().apply(sch)
        func = sch.mod["main"]
        panels = [b for b in func.body.block.alloc_buffers if b.name.startswith("B")]
        # B[k, j] becomes P[j // w, k, j % w], w the columns inside the outer reduction loop
        assert [tuple(int(s) for s in p.shape) for p in panels] == [(32 // width, 32, width)], j_tiles
        assert all(ANN_PACK not in b.annotations for b in _blocks(func))
        assert_same_numerics(mm.naive(32)["main"], func)
        assert_replays(sch, mm.naive(32))


def test_an_operand_is_left_alone_when_the_sample_says_so_or_nothing_can_be_packed():
    from mlc_lab.testing import matmul_schedules as mm
    from mlc_lab.tir.schedule.policy.pack import RewritePackedOperands, packable
    sch = _tiled_matmul(0)
    before = sch.mod["main"]
    RewritePackedOperands().apply(sch)
    assert len(_blocks(sch.mod["main"])) == len(_blocks(before)) == 1
    block = mm.naive(32)["main"].body.block.body.body.body.body.block
    assert [r.buffer.name for r in block.reads][packable(block)] == "B"   # not A, read along rows
    # a convolution's input is read through a window (column and reduction in one index): no
    # panel copy serves it, and its weights are not read along the output's columns
    conv = tir.Schedule(conv2d_nchw)
    assert packable(conv.get(conv.get_block("conv"))) is None


def _blocks(func):
    from mlc_lab.tir.schedule.primitives.scope import all_blocks_under
    return [r.block for r in all_blocks_under(func.body) if r.block.name_hint != "root"]


def test_the_tuner_samples_packing_and_every_sample_computes_the_same():
    from mlc_lab import meta_schedule as ms
    from mlc_lab.testing import matmul_schedules as mm
    rules = ms.schedule_rule.default_rules(2)
    for rule in rules:
        if isinstance(rule, ms.schedule_rule.MultiLevelTiling):
            rule.pack = True   # off by default
    space = ms.space_generator.PostOrderApply(rules=rules)
    seen = set()
    for seed in range(12):
        candidate = space.sample(mm.naive(32), seed)
        func = candidate.sch.mod["main"]
        packed = any(b.name.startswith("B") and len(b.shape) == 3 for b in func.body.block.alloc_buffers)
        seen.add(packed)
        assert_same_numerics(mm.naive(32)["main"], func)
    assert seen == {True, False}
