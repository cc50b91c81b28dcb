"""tir.ScheduleState and StmtSRef: srefs onto the loops and blocks of a module, the dependencies of
each block scope, the cached flags (affine binding, region cover, stage pipeline), replace, and
the state a Schedule keeps in step with its module."""
import pytest

from mlc_lab import tir
from mlc_lab.ir import IRModule, assert_structural_equal, structural_equal
from mlc_lab.script import from_source
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import DepKind, errors
from mlc_lab.tir.schedule.state import CachedFlags, ScheduleDebugMask
from mlc_lab.tir.stmt_functor import post_order_visit

from corpus import mm_relu


@T.prim_func
def init_update(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("init"):
            vi = T.axis.spatial(8, i)
            C[vi] = T.float32(0)
        for k in range(8):
            with T.block("update"):
                vi, vk = T.axis.remap("SR", [i, k])
                C[vi] = C[vi] + A[vi, vk]


@T.prim_func
def reads_then_overwrites(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
                          C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.float32(1)
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]


@T.prim_func
def reads_the_previous_element(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.where(i >= 1)
            C[vi] = B[vi - 1]


def writes_part_of_b(binding: str):
    """B written at ``binding`` for i in range(4), then read whole."""
    return from_source(f'''
@T.prim_func
def f(C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,))
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(8, {binding})
            B[vi] = T.float32(1)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi]
''')


half_written, strided_writer = writes_part_of_b("i"), writes_part_of_b("i * 2")


@T.prim_func
def transposed_in_shared(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32), scope="shared")
    for i in T.thread_binding(32, thread="threadIdx.x"):
        for j in range(32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for j in range(32):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vj, vi] = B[vj, vi]


def block_sref(state, name):
    found = []
    post_order_visit(state.mod["main"].body,
                     lambda n: found.append(n) if isinstance(n, tir.Block) and n.name_hint == name else None)
    (block,) = found
    return state.get_sref(block)


# -- srefs ----------------------------------------------------------------------------------------
def test_srefs_form_the_tree_of_loops_and_blocks():
    state = tir.ScheduleState(mm_relu, debug_mask="all")
    root = state.mod["main"].body.block
    second_i = root.body[1]
    sref = state.get_sref(second_i)
    assert sref.stmt is second_i and sref.seq_index == 1
    assert sref.parent.same_as(state.get_sref(root)) and sref.parent.parent is None
    j_sref = state.get_sref(second_i.body)
    assert j_sref.parent is sref and j_sref.seq_index == -1
    c = block_sref(state, "C")
    assert c.parent is j_sref and c.stmt.name_hint == "C"
    # a BlockRealize stands for its block; a statement of another module has no sref
    assert state.get_sref(second_i.body.body) is c
    assert state.get_sref(init_update.body.block.body) is None
    assert state.get_sref(second_i) is sref          # one sref per statement


def test_state_takes_a_module_or_a_function_and_checks_its_arguments():
    mod = IRModule({"main": mm_relu, "other": init_update})
    state = tir.ScheduleState(mod)
    assert state.mod is mod and state.debug_mask == 0
    assert tir.ScheduleState(mm_relu, debug_mask="all").debug_mask == (
        ScheduleDebugMask.VERIFY_SREF_TREE | ScheduleDebugMask.VERIFY_CACHED_FLAGS)
    assert state.get_sref(mod["other"].body.block).stmt is mod["other"].body.block
    with pytest.raises(TypeError, match="IRModule or PrimFunc"):
        tir.ScheduleState(mm_relu.body)
    with pytest.raises(ValueError, match="negative"):
        tir.ScheduleState(mm_relu, debug_mask=-2)
    with pytest.raises(TypeError, match="debug_mask"):
        tir.ScheduleState(mm_relu, debug_mask="some")


# -- block scopes ------------------------------------------------------------------------------------
def deps(scope, sref, by="dst"):
    found = scope.get_deps_by_dst(sref) if by == "dst" else scope.get_deps_by_src(sref)
    return [(d.src.stmt.name_hint, d.dst.stmt.name_hint, d.kind) for d in found]


def test_block_scope_finds_read_after_write():
    state = tir.ScheduleState(mm_relu)
    scope = state.get_block_scope(block_sref(state, "root"))
    assert deps(scope, block_sref(state, "C")) == [("Y", "C", DepKind.RAW)]
    assert deps(scope, block_sref(state, "Y"), by="src") == [("Y", "C", DepKind.RAW)]
    assert deps(scope, block_sref(state, "Y")) == []


def test_block_scope_of_an_init_and_update_pair_and_of_a_write_after_read():
    state = tir.ScheduleState(init_update)
    scope = state.get_block_scope(block_sref(state, "root"))
    assert sorted(deps(scope, block_sref(state, "update"))) == [
        ("init", "update", DepKind.RAW), ("init", "update", DepKind.WAW)]
    state = tir.ScheduleState(reads_then_overwrites)
    scope = state.get_block_scope(block_sref(state, "root"))
    assert deps(scope, block_sref(state, "B")) == [("C", "B", DepKind.WAR)]


def test_block_scope_needs_a_block_sref():
    state = tir.ScheduleState(mm_relu)
    loop = state.get_sref(state.mod["main"].body.block.body[0])
    with pytest.raises(TypeError, match="sref of a block"):
        state.get_block_scope(loop)


# -- cached flags --------------------------------------------------------------------------------------
FLAGS_ALL = CachedFlags(affine_binding=True, region_cover=True, stage_pipeline=True)


def test_flags_of_a_clean_pipeline():
    state = tir.ScheduleState(mm_relu)
    for name in ("root", "Y", "C"):
        assert state._get_cached_flags(block_sref(state, name)) == FLAGS_ALL


def test_a_write_after_read_breaks_the_stage_pipeline():
    state = tir.ScheduleState(reads_then_overwrites)
    assert state._get_cached_flags(block_sref(state, "root")).stage_pipeline is False
    assert state._get_cached_flags(block_sref(state, "B")).region_cover is True


@pytest.mark.parametrize("func", [reads_the_previous_element, half_written, strided_writer])
def test_a_read_the_writers_do_not_cover(func):
    state = tir.ScheduleState(func)
    assert state._get_cached_flags(block_sref(state, "C")) == CachedFlags(True, False, True)
    assert state._get_cached_flags(block_sref(state, "root")) == CachedFlags(True, True, False)


def test_shared_memory_is_covered_across_the_threads_that_share_it():
    # each thread writes row i and reads column i: covered only because the threads of a
    # block all see the shared buffer
    state = tir.ScheduleState(transposed_in_shared)
    assert state._get_cached_flags(block_sref(state, "C")) == FLAGS_ALL
    # in local memory each thread sees only its own row
    sch = tir.Schedule(transposed_in_shared)
    sch.set_scope("B", "B", "local")
    assert sch.state._get_cached_flags(block_sref(sch.state, "C")).region_cover is False


def test_affine_binding_flag():
    sch = tir.Schedule(mm_relu)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)
    state = sch.state
    assert state._get_cached_flags(block_sref(state, "C")).affine_binding is True
    state = tir.ScheduleState(strided_writer)
    # vi = i * 2 skips values: not affine in the reference compiler's sense
    assert state._get_cached_flags(block_sref(state, "B")).affine_binding is False


# -- replace ---------------------------------------------------------------------------------------------
def test_replace_a_loop_by_a_block_keeps_the_srefs_of_what_carries_on():
    state = tir.ScheduleState(mm_relu, debug_mask="all")
    old_mod, old_func = state.mod, state.mod["main"]
    first, second = old_func.body.block.body.seq
    first_sref, second_sref = state.get_sref(first), state.get_sref(second)
    y_sref = block_sref(state, "Y")
    wrapper = tir.BlockRealize(iter_values=[], predicate=True, block=tir.Block(
        iter_vars=[], reads=[], writes=[], name_hint="wrapper", body=second, init=None,
        alloc_buffers=None, match_buffers=None, annotations=None))
    state.replace(first_sref, wrapper)
    new_root = state.mod["main"].body.block
    assert_structural_equal(new_root.body[0], wrapper)
    assert first_sref.stmt is None and first_sref.parent is None and y_sref.stmt is None
    # the loop inside the wrapper is the same object: the first sref that meets it keeps it
    assert second_sref.stmt is second
    # nothing the caller held changed; the module, function and root are new
    assert state.mod is not old_mod and old_mod["main"] is old_func
    assert old_func.body.block.body[0] is first
    assert state.get_sref(new_root).same_as(block_sref(state, "root"))


def test_replace_a_block_with_reuse_moves_its_sref():
    state = tir.ScheduleState(mm_relu)
    y_sref = block_sref(state, "Y")
    k_sref = y_sref.parent
    target = init_update.body.block.body.body[0].block
    state.replace(y_sref, target, {y_sref.stmt: target})
    assert y_sref.stmt is target and block_sref(state, "init") is y_sref
    assert y_sref.parent is k_sref and k_sref.stmt.body.block is target


def test_replace_without_reuse_gives_a_new_sref():
    state = tir.ScheduleState(mm_relu)
    y_sref = block_sref(state, "Y")
    state.replace(y_sref, y_sref.stmt.replace(name_hint="Y2"))
    assert y_sref.stmt is None
    assert block_sref(state, "Y2") is not y_sref


def test_replace_checks_its_arguments():
    state = tir.ScheduleState(mm_relu)
    loop = state.get_sref(state.mod["main"].body.block.body[1])
    with pytest.raises(TypeError, match="a For can be replaced by a For or BlockRealize"):
        state.replace(loop, loop.stmt.body.body.block)
    other = tir.ScheduleState(mm_relu)
    with pytest.raises(ValueError, match="no statement of this state's module"):
        state.replace(other.get_sref(other.mod["main"].body.block.body[1]), loop.stmt)
    state.replace(loop, loop.stmt.replace(extent=tir.const(4)))
    with pytest.raises(ValueError, match="no statement"):
        state.replace(block_sref(tir.ScheduleState(mm_relu), "C"), loop.stmt)


def test_replace_in_a_module_of_several_functions_leaves_the_others():
    state = tir.ScheduleState(IRModule({"main": mm_relu, "other": from_source(mm_relu.script())}))
    other = state.mod["other"]
    root = block_sref(state, "root")
    state.replace(root, root.stmt.replace(name_hint="root2"))
    assert state.mod["other"] is other and state.mod["main"].body.block.name_hint == "root2"


# -- the state of a Schedule ------------------------------------------------------------------------
def test_schedule_state_follows_the_primitives():
    sch = tir.Schedule(mm_relu)
    y = sch.get_block("Y")
    y_sref = sch.get_sref(y)
    i, j, k = sch.get_loops(y)
    i_sref, j_sref, k_sref = sch.get_sref(i), sch.get_sref(j), sch.get_sref(k)
    assert sch.state.mod is sch.mod and y_sref.stmt is sch.get(y)
    i0, _ = sch.split(i, factors=[4, 32])
    # the block keeps its sref (found by name, as handles are), the split loop's sref is gone,
    # the loops that carry on keep theirs
    assert y_sref.stmt is sch.get(y) and sch.get_sref(y) is y_sref
    assert i_sref.stmt is None and j_sref.stmt is sch.get(j) and y_sref.parent is k_sref
    assert sch.get_sref(i0).stmt.extent.value == 4
    ci, cj = sch.get_loops("C")
    ci_sref, c_sref = sch.get_sref(ci), sch.get_sref("C")
    fused = sch.fuse(ci, cj)
    assert ci_sref.stmt is None and c_sref.parent is sch.get_sref(fused)


def test_schedule_state_keeps_a_renamed_block():
    sch = tir.Schedule(mm_relu)
    update = sch.get_block("Y")
    sref = sch.get_sref(update)
    sch.decompose_reduction(update, sch.get_loops(update)[2])
    assert sref.stmt is sch.get(update) and sref.stmt.name_hint != "Y"


def test_copies_have_srefs_of_their_own():
    sch = tir.Schedule(mm_relu)
    i, _ = sch.get_loops(sch.get_block("C"))
    other = sch.copy()
    assert not sch.get_sref(i).same_as(other.get_sref(i))
    assert sch.get_sref(i).stmt is other.get_sref(i).stmt


def test_replace_through_a_schedule_installs_the_module():
    sch = tir.Schedule(mm_relu)
    c_sref = sch.get_sref(sch.get_block("C"))
    loop = c_sref.parent
    sch.state.replace(loop, loop.stmt.replace(kind="unrolled"))
    assert sch.mod is sch.state.mod and sch.history[-1].mod is sch.mod
    assert sch.get(sch.get_loops("C")[1]).kind == "unrolled"
    assert c_sref.parent is loop and loop.stmt.kind == "unrolled"


def test_get_sref_and_get_of_an_sref():
    sch = tir.Schedule(mm_relu)
    block = sch.get(sch.get_block("Y"))
    sref = sch.get_sref(block)
    assert sch.get(sref) is block and sch.get_sref("Y") is sref
    assert sch.get_sref(sch.mod["main"].body.block.body[0]).stmt.loop_var.name == "i"
    with pytest.raises(TypeError, match="get_sref expects"):
        sch.get_sref(3)
    assert not structural_equal(sch.get_sref("C").stmt, block)
    with pytest.raises(errors.BlockNotFoundError):
        sch.get_sref("D")


# -- copy-on-write ---------------------------------------------------------------------------------------
def fresh_state():
    """A state whose module nothing else holds (parsed anew, no variable keeps any part)."""
    return tir.ScheduleState(from_source(mm_relu.script()))


def unit_wrapper(stmt):
    return tir.BlockRealize(iter_values=[], predicate=True, block=tir.Block(
        iter_vars=[], reads=[], writes=[], name_hint="wrapper", body=stmt, init=None,
        alloc_buffers=None, match_buffers=None, annotations=None))


def test_replace_writes_in_place_what_only_the_tree_holds():
    state = fresh_state()
    func_id, seq_id = id(state.mod["main"]), id(state.mod["main"].body.block.body)
    module_id = id(state.mod)
    c_loop = state.get_sref(state.mod["main"].body.block.body[1])
    state.replace(c_loop, unit_wrapper(c_loop.stmt))
    # the function, the root and the sequence are the same objects, now holding the wrapper
    assert id(state.mod) == module_id and id(state.mod["main"]) == func_id
    assert id(state.mod["main"].body.block.body) == seq_id
    assert state.mod["main"].body.block.body[1].block.name_hint == "wrapper"
    # the loop lives on inside the wrapper, with its sref
    assert c_loop.stmt is state.mod["main"].body.block.body[1].block.body
    assert c_loop.parent is state.get_sref(state.mod["main"].body.block.body[1].block)


def test_replace_copies_a_function_the_caller_holds():
    state = fresh_state()
    held = state.mod["main"]
    before = held.script()
    c_loop = state.get_sref(held.body.block.body[1])
    state.replace(c_loop, unit_wrapper(c_loop.stmt))
    assert state.mod["main"] is not held and held.script() == before
    assert state.mod["main"].body.block.body[1].block.name_hint == "wrapper"


def test_replace_copies_from_the_highest_statement_held_downwards():
    state = fresh_state()
    func_id, seq_id = id(state.mod["main"]), id(state.mod["main"].body.block.body)
    held, other = state.mod["main"].body.block.body.seq   # the two loop nests: held here
    y_loop_j = held.body
    before = held.script()
    state.replace(state.get_sref(y_loop_j), y_loop_j.replace(kind="unrolled"))
    new_root = state.mod["main"].body.block
    # above the held loop everything is written in place; the held loop is copied
    assert id(state.mod["main"]) == func_id and id(new_root.body) == seq_id
    assert new_root.body[0] is not held and held.script() == before
    assert new_root.body[0].body.kind == "unrolled"
    assert new_root.body[1] is other             # the other loop nest: untouched


def test_replace_through_a_schedule_leaves_its_history_alone():
    sch = tir.Schedule(from_source(mm_relu.script()))
    first = sch.mod
    before = first.script()
    c_sref = sch.get_sref(sch.get_block("C"))
    sch.state.replace(c_sref.parent, c_sref.parent.stmt.replace(kind="unrolled"))
    assert sch.mod is not first and first.script() == before
    assert sch.history[0].mod is first
