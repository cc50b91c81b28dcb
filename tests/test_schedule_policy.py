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
from corpus import mm_relu, softmax
from schedule_checks import assert_same_numerics
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
