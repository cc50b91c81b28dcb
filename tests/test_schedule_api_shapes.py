"""The shapes of the schedule API that code written for the reference compiler relies on: handles
made without arguments, remove_rv, handles of other schedules, error rendering levels, work_on,
get_output_blocks, buffers given by name or object, cache_read/cache_write consumers, blockize
of several blocks, traces and instructions built by hand, and small IR conveniences."""
import json

import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.ir import IRModule, assert_structural_equal
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import (BlockRV, Instruction, InstructionKind, LoopRV, Trace, errors)
from schedule_checks import assert_replays, assert_same_numerics, unchanged_after


@T.prim_func
def pipeline(A: T.Buffer((32,), "float32"), D: T.Buffer((32,), "float32")):
    B = T.alloc_buffer((32,))
    C = T.alloc_buffer((32,))
    for i in range(32):
        with T.block("B"):
            vi = T.axis.spatial(32, i)
            B[vi] = A[vi] - T.float32(3)
    for i in range(32):
        with T.block("C"):
            vi = T.axis.spatial(32, i)
            C[vi] = B[vi] * B[vi]
    for i in range(32):
        with T.block("D"):
            vi = T.axis.spatial(32, i)
            D[vi] = C[vi] + B[vi]


@T.prim_func
def siblings(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for m in range(4):
        for i in range(8):
            with T.block("left"):
                vi = T.axis.spatial(8, i)
                B[vi, m] = A[vi, m] * T.float32(2)
        for i, j in T.grid(8, 4):
            with T.block("right"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj + 4] = A[vi, vj + 4] * T.float32(3)
        for i in range(8):
            with T.block("last"):
                vi = T.axis.spatial(8, i)
                B[vi, m + 8] = A[vi, m + 8]


# -- handles ----------------------------------------------------------------------------------------
def test_unbound_handles():
    block, loop = BlockRV(), LoopRV()
    assert repr(block) == "BlockRV()" and repr(loop) == "LoopRV()"
    assert block.same_as(block) and not block.same_as(BlockRV())
    sch = tir.Schedule(pipeline)
    with pytest.raises(IndexError, match="unbound"):
        sch.get(block)
    with pytest.raises(errors.UnknownHandleError, match="unbound"):
        sch.split(loop, factors=[4, 4])


def test_remove_rv():
    sch = tir.Schedule(pipeline)
    block = sch.get_block("B")
    loop = sch.get_loops(block)[0]
    sch.remove_rv(block)
    with pytest.raises(IndexError, match="remove_rv"):
        sch.get(block)
    assert sch.get(loop).loop_var.name == "i"          # the others stay
    assert sch.get(sch.get_block("B")).name_hint == "B"  # a fresh handle works


def test_handles_of_another_schedule_and_expired_handles():
    sch = tir.Schedule(pipeline)
    (i,) = sch.get_loops(sch.get_block("C"))
    other = sch.copy()
    i0, _ = sch.split(i, factors=[4, 8])
    with pytest.raises(errors.UnknownHandleError, match="not made by it"):
        other.get_sref(i0)
    assert other.get(i).loop_var.name == "i"   # made before the copy: known to both
    with pytest.raises(errors.InvalidHandleError) as info:
        sch.get(i)                              # made here, split away since
    assert not isinstance(info.value, IndexError)


# -- errors and functions ---------------------------------------------------------------------------
def test_error_render_levels():
    fast = tir.Schedule(pipeline, error_render_level="fast")
    with pytest.raises(errors.BlockNotFoundError) as info:
        fast.get_block("X")
    (msg,) = info.value.args
    assert msg == "BlockNotFoundError in sch.get_block: Cannot find a block with the specified name."
    quiet = tir.Schedule(pipeline, error_render_level="none")
    with pytest.raises(errors.ScheduleError, match=r"\(not rendered\)"):
        quiet.compute_inline(quiet.get_block("D"))
    detail = tir.Schedule(pipeline)
    with pytest.raises(errors.BlockNotFoundError, match="no block named 'X'") as info:
        detail.get_block("X")
    assert "@T.prim_func" in str(info.value)
    with pytest.raises(ValueError, match="error_render_level"):
        tir.Schedule(pipeline, error_render_level="loud")
    # the level lasts only while the schedule's instruction runs
    with pytest.raises(errors.BlockNotFoundError, match="no block named"):
        tir.Schedule(pipeline).get_block("Y")


def test_work_on_a_module_without_main():
    mod = IRModule({"first": pipeline, "second": siblings})
    sch = tir.Schedule(mod)
    assert sch.func_working_on is None
    with pytest.raises(ValueError, match="does not know which function to be working on"):
        sch.get_block("B")
    with pytest.raises(errors.BlockNotFoundError):   # the error is a BlockNotFoundError too
        sch.get_block("B")
    assert sch.get_block("left", func_name="second").func_name == "second"
    sch.work_on("first")
    assert sch.func_working_on == mod.get_global_var("first")
    block = sch.get_block("B")
    assert block.func_name == "first"
    with pytest.raises(errors.BlockNotFoundError, match="no PrimFunc 'third'"):
        sch.work_on("third")
    replayed = sch.trace.apply_to_schedule(tir.Schedule(mod))
    assert replayed.func_working_on.name_hint == "first"
    single = tir.Schedule(IRModule({"only": pipeline}))
    assert single.func_working_on.name_hint == "only" and single.get_block("B").func_name == "only"


def test_get_root_and_output_blocks():
    sch = tir.Schedule(pipeline)
    root = sch.get_block("root")
    assert sch.get(root) is sch.mod["main"].body.block
    assert [b.name for b in sch.get_output_blocks(root)] == ["D"]
    assert [b.name for b in sch.get_child_blocks(root)] == ["B", "C", "D"]
    sch.blockize(sch.get_loops("D")[0])
    assert [b.name for b in sch.get_output_blocks("root")] == ["D_o", "D"]
    assert [b.name for b in sch.get_output_blocks("D_o")] == ["D"]
    assert sch.trace.as_python()[-1].endswith(', = sch.get_output_blocks(scope_block="D_o")')


# -- buffers by name or object, consumer blocks -----------------------------------------------------
def test_cache_read_write_and_set_scope_take_a_buffer_name_or_object():
    sch = tir.Schedule(pipeline)
    d = sch.get_block("D")
    by_name = sch.cache_read(d, "B", "shared")
    assert [r.buffer.name for r in sch.get(d).reads] == ["C", "B_shared"]
    sch.cache_read(d, sch.get(d).reads[0].buffer, "local")
    assert [r.buffer.name for r in sch.get(d).reads] == ["C_local", "B_shared"]
    sch.set_scope("B", "B", "shared")
    sch.cache_write(sch.get_block("C"), "C", "local")
    assert sch.get(by_name).name_hint == "B_shared"
    # the trace holds indices, so it replays from JSON
    calls = sch.trace.as_python()
    assert 'sch.cache_read(block=b0, read_buffer_index=1, storage_scope="shared")' in calls[1]
    assert 'sch.cache_read(block=b0, read_buffer_index=0, storage_scope="local")' in calls[2]
    assert 'sch.set_scope(block="B", buffer_index=0, storage_scope="shared")' in calls
    assert_replays(sch, pipeline)
    assert_same_numerics(pipeline, sch.mod["main"])
    with pytest.raises(errors.BufferNotAccessedError, match="does not write a buffer 'A'"):
        sch.set_scope("B", "A", "shared")
    with pytest.raises(errors.CacheError, match="does not read a buffer 'D'"):
        sch.cache_read("D", "D", "shared")


def test_cache_read_for_chosen_consumers():
    sch = tir.Schedule(pipeline)
    copy = sch.cache_read("C", "B", "shared", consumer_blocks=["D"])
    # "C" only names the buffer: "D" reads the copy, "C" still reads B
    assert [r.buffer.name for r in sch.get(sch.get_block("C")).reads] == ["B"]
    assert [r.buffer.name for r in sch.get(sch.get_block("D")).reads] == ["C", "B_shared"]
    children = [b.name for b in sch.get_child_blocks("root")]
    assert children.index(sch.get(copy).name_hint) == children.index("D") - 1
    assert_replays(sch, pipeline)
    assert_same_numerics(pipeline, sch.mod["main"])

    both = tir.Schedule(pipeline)
    both.cache_read("C", "B", "shared", consumer_blocks=["D", "C"])
    assert [b.name for b in both.get_child_blocks("root")] == ["B", "B_shared", "C", "D"]
    assert all(r.buffer.name != "B" for name in "CD" for r in both.get(both.get_block(name)).reads)
    assert_same_numerics(pipeline, both.mod["main"])


def test_cache_read_consumers_are_checked():
    sch = tir.Schedule(pipeline)
    unchanged_after(sch, lambda: sch.cache_read("C", "B", "shared", consumer_blocks=["B"]),
                    errors.ConsumerBlockError, "does not read buffer B")


def test_cache_write_for_chosen_consumers():
    sch = tir.Schedule(pipeline)
    sch.cache_write("B", 0, "local", consumer_blocks=["D"])
    assert [r.buffer.name for r in sch.get(sch.get_block("C")).reads] == ["B"]
    assert [r.buffer.name for r in sch.get(sch.get_block("D")).reads] == ["C", "B_local"]
    assert_replays(sch, pipeline)
    assert_same_numerics(pipeline, sch.mod["main"])


# -- blockize of several blocks ---------------------------------------------------------------------
def test_blockize_several_blocks():
    sch = tir.Schedule(siblings, check_numerics=True)
    outer = sch.blockize([sch.get_block("left"), sch.get_block("right")])
    assert outer.name == "outer_left_right_"
    block = sch.get(outer)
    assert [b.name for b in sch.get_child_blocks(outer)] == ["left", "right"]
    m = sch.get_loops(outer)[0]
    assert sch.get(m).body.seq[0].block is block
    assert_replays(sch, siblings)
    assert_same_numerics(siblings, sch.mod["main"])


def test_blockize_several_blocks_needs_consecutive_nests():
    sch = tir.Schedule(siblings)
    unchanged_after(sch, lambda: sch.blockize([sch.get_block("left"), sch.get_block("last")]),
                    errors.NotSingleBlockChainError, "not consecutive")
    # under the root block the nests are entries of the root's body
    sch = tir.Schedule(pipeline)
    outer = sch.blockize([sch.get_block("B"), sch.get_block("C")])
    assert [b.name for b in sch.get_child_blocks("root")] == [outer.name, "D"]
    assert_same_numerics(pipeline, sch.mod["main"])


# -- traces and instructions built by hand --------------------------------------------------------
def test_instructions_in_the_reference_form():
    block, loop0, loop1 = BlockRV(), LoopRV(), LoopRV()
    inst = Instruction(kind=InstructionKind.get("GetLoops"), inputs=[block], attrs=[],
                       outputs=[loop0, loop1])
    assert str(inst) == "_, _ = sch.get_loops(block=_)"
    assert inst.kind == "get_loops" and inst.kind.same_as(InstructionKind.get("GetLoops"))
    assert inst.inputs[0].same_as(block) and inst.attrs == [] and inst.kwargs == {"block": block}
    split = Instruction(kind=InstructionKind.get("Split"), inputs=[loop0, None, 32],
                        attrs=[tir.IntImm("bool", 1)], outputs=[loop1, LoopRV()])
    assert split.kwargs == {"loop": loop0, "factors": [None, 32], "preserve_unit_iters": 1}
    with pytest.raises(ValueError, match="takes 1 inputs"):
        Instruction(kind=InstructionKind.get("GetLoops"), inputs=[block, block], attrs=[], outputs=[])


def test_trace_built_by_hand_replays():
    b0, b1 = BlockRV(), BlockRV()
    trace = Trace(
        insts=[Instruction(kind=InstructionKind.get("GetBlock"), inputs=[], attrs=["B", "main"], outputs=[b0]),
               Instruction(kind=InstructionKind.get("ComputeInline"), inputs=[b0], attrs=[], outputs=[]),
               Instruction(kind=InstructionKind.get("GetBlock"), inputs=[], attrs=["C", "main"], outputs=[b1]),
               Instruction(kind=InstructionKind.get("EnterPostproc"), inputs=[], attrs=[], outputs=[]),
               Instruction(kind=InstructionKind.get("ComputeInline"), inputs=[b1], attrs=[], outputs=[])],
        decisions={})
    assert trace.decisions == {} and trace.get_decision(trace.insts[0]) is None
    sch = trace.apply_to_schedule(tir.Schedule(pipeline), remove_postproc=True, decision_provider=None)
    assert [b.name for b in sch.get_child_blocks("root")] == ["C", "D"]
    full = Trace.apply_json_to_schedule(json.loads(json.dumps(trace.as_json())), tir.Schedule(pipeline))
    assert [b.name for b in full.get_child_blocks("root")] == ["D"]
    simple = trace.simplified(remove_postproc=True)
    assert [str(i.kind) for i in simple.insts] == ["get_block", "compute_inline"]
    assert [str(i.kind) for i in trace.simplified(remove_postproc=False).insts] == [
        "get_block", "compute_inline", "get_block", "enter_postproc", "compute_inline"]
    last = trace.insts[-1]
    assert trace.pop() is last and len(trace.insts) == 4
    assert Trace([], {}).pop() is None
    trace.append(last)
    assert trace.insts[-1] is last


def test_trace_decisions():
    sch = tir.Schedule(pipeline, seed=3)
    (i,) = sch.get_loops("B")
    sch.sample_perfect_tile(i, n=2)
    sch.sample_categorical([1, 2, 4], [0.2, 0.3, 0.5])
    perfect, categorical = sch.trace.insts[-2:]
    decisions = sch.trace.decisions
    assert list(decisions) == [perfect, categorical]
    assert decisions[categorical] == categorical.decision
    assert decisions[categorical].value == categorical.decision
    assert [d.value for d in decisions[perfect]] == perfect.decision
    assert sch.trace.get_decision(categorical).value == categorical.decision
    other = Trace(sch.trace.insts[:2] + [Instruction(perfect.kind, perfect.args, perfect.kwargs,
                                                     perfect.outputs)], {})
    assert other.get_decision(other.insts[-1]) is None
    given = Trace(list(other.insts), {other.insts[-1]: [16, 2]})
    assert given.get_decision(given.insts[-1]) == [16, 2]
    replayed = given.apply_to_schedule(tir.Schedule(pipeline))
    assert replayed.trace.insts[-1].decision == [16, 2]


def test_instruction_kinds_compare_with_method_names():
    kind = InstructionKind.get("RFactor")
    assert kind == "rfactor" and kind.name == "RFactor" and not kind.is_pure
    assert InstructionKind.get("GetOutputBlocks").is_pure
    sch = tir.Schedule(pipeline)
    sch.get_block("B")
    assert sch.trace.insts[0].kind is InstructionKind.get("get_block")


# -- IR conveniences ------------------------------------------------------------------------------------
def test_ir_conveniences():
    func = pipeline
    assert func.buffer_map[func.params[0]] is func.params[0] and len(func.buffer_map) == 2
    assert func.same_as(func) and not func.same_as(siblings)
    root = func.body.block
    assert len(root.body) == 3 and root.body[0] is root.body.seq[0]
    block = tir.Block(iter_vars=[], reads=[], writes=[], name_hint="b", body=tir.Evaluate(tir.const(0)),
                      init=None, alloc_buffers=None, match_buffers=None, annotations={"k": 1})
    assert block.alloc_buffers == () and block.annotations == (("k", 1),)
    realize = tir.BlockRealize(iter_values=[], predicate=True, block=block)
    assert realize.iter_values == () and realize.predicate.dtype == "bool"
    assert_structural_equal(realize, tir.BlockRealize((), tir.const(True), block))
    from mlc_lab.tir.schedule.schedule import ScheduleError
    assert ScheduleError is errors.ScheduleError and mlc_lab.tir.ScheduleState is tir.schedule.ScheduleState
