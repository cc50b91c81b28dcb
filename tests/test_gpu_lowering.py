"""GPU lowering: kernels, launch dimensions, shared/local allocations, barriers and the GPU rules."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import tir
from mlc_lab.script import tir as T
from mlc_lab.target import Target
from mlc_lab.testing import gpu_schedules as gs
from mlc_lab.tir import stmt as S
from mlc_lab.tir.stmt_functor import post_order_visit
from mlc_lab.tir.transform.inject_sync import is_sync
from mlc_lab.tir.transform.split_host_device import GPUError, split_host_device


def kernels(sch_or_mod, target="nvidia/a100"):
    mod = getattr(sch_or_mod, "mod", sch_or_mod)
    return split_host_device(mlc_lab.lower(mod)["main"], Target(target)).kernels


def top_level(body):
    """The statements of a kernel body below its allocations, with barriers as "sync"."""
    while isinstance(body, S.Allocate):
        body = body.body
    stmts = body.seq if isinstance(body, S.SeqStmt) else (body,)
    return ["sync" if is_sync(s) else type(s).__name__ for s in stmts]


def count_syncs(node) -> int:
    found = []
    post_order_visit(node, lambda n: found.append(n) if is_sync(n) else None)
    return len(found)


def test_vector_add_is_one_kernel_with_its_launch_dimensions():
    kernel, = kernels(gs.vector_add(1024, threads=128))
    assert (kernel.name, kernel.grid, kernel.block) == ("main_kernel0", (8, 1, 1), (128, 1, 1))
    assert [p.name for p in kernel.params] == ["A", "B", "C"]
    assert set(kernel.thread_vars) == {"blockIdx.x", "threadIdx.x"}
    assert kernel.shared == () and count_syncs(kernel.body) == 0
    assert isinstance(kernel.body, S.BufferStore)   # no loop left: the indices are the thread's


def test_window_sum_fetches_into_compacted_shared_memory_then_syncs():
    kernel, = kernels(gs.window_sum(1024, threads=128))
    shared, = kernel.shared
    assert (shared.name, int(shared.shape[0].value), kernel.shared_bytes) == ("A_shared", 130, 520)
    # the cooperative fetch (a loop of two rounds over the block's threads), one barrier, the sum
    assert top_level(kernel.body) == ["For", "sync", "BufferStore"]
    assert count_syncs(kernel.body) == 1


def test_matmul_shared_tiles_hold_one_step_of_k_and_barriers_guard_both_sides():
    kernel, = kernels(gs.matmul_shared(1024, local=8, block=8, tile_k=8))
    assert (kernel.grid, kernel.block) == ((16, 16, 1), (64, 1, 1))
    assert sorted((b.name, int(b.shape[0].value)) for b in kernel.shared) == \
        [("A_shared", 512), ("B_shared", 512)]             # 64 rows x 8, 8 x 64 columns
    assert [(b.name, int(b.shape[0].value)) for b in kernel.local] == [("C_local", 64)]
    k_loop = next(s for s in kernel.body.body.body.body.seq if count_syncs(s))
    # before the fetches (the previous step's tiles are still being read), and before computing
    assert top_level(k_loop.body) == ["sync", "For", "For", "sync", "For"]
    assert count_syncs(kernel.body) == 2


def test_matmul_blocked_keeps_the_accumulator_per_thread():
    kernel, = kernels(gs.matmul_blocked(256, local=8, block=8))
    assert (kernel.grid, kernel.block) == ((4, 4, 1), (8, 8, 1))
    assert [b.scope for b in kernel.local] == ["local"] and kernel.shared == ()
    assert count_syncs(kernel.body) == 0


def test_no_barrier_is_placed_inside_thread_divergent_code():
    kernel, = kernels(gs.window_sum(1000, threads=128))   # 1000 = 7 full blocks and a partial one
    def check(node, divergent=False):
        if is_sync(node):
            assert not divergent
        if isinstance(node, S.IfThenElse):
            for child in (node.then_case, node.else_case):
                if child is not None:
                    check(child, True)
        elif isinstance(node, (S.SeqStmt,)):
            for child in node.seq:
                check(child, divergent)
        elif isinstance(node, (S.For, S.Allocate, S.LetStmt)):
            check(node.body, divergent)
    check(kernel.body)


def test_too_many_threads_per_block_names_the_limit():
    with pytest.raises(GPUError, match=r"2048 threads is more than the 1024 threads per block "
                                       r"that a100 allows"):
        kernels(gs.vector_add(4096, threads=2048))


def test_too_much_shared_memory_names_the_buffers():
    with pytest.raises(GPUError, match=r"bytes of shared memory \(A_shared 65536 B, B_shared "
                                       r"65536 B\), more than the 49152 bytes per block"):
        kernels(gs.matmul_shared(1024, local=8, block=16, tile_k=128, vector=1))


@T.prim_func
def unbound_store(A: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            A[vi] = T.float32(1)


def test_a_loop_outside_every_kernel_is_an_error_with_the_loop_underlined():
    with pytest.raises(GPUError, match=r"loop i is not bound to a GPU block or thread and is "
                                       r"outside every kernel") as info:
        kernels(tir.Schedule(unbound_store).mod)
    assert "^" in str(info.value) and "host code only launches kernels" in str(info.value)


def test_a_block_index_bound_twice_is_an_error():
    sch = tir.Schedule(unbound_store)
    i, = sch.get_loops(sch.get_block("A"))
    i0, i1 = sch.split(i, [None, 8])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "blockIdx.x")
    with pytest.raises(GPUError, match=r"loop i_1 is bound to blockIdx.x inside loop i_0, which is "
                                       r"bound to blockIdx.x already"):
        kernels(sch.mod)


def test_threads_of_one_tag_with_different_extents_are_an_error():
    sch = gs.window_sum(1024, threads=128, shared=False)
    block = sch.get_block("C")
    cached = sch.cache_read(block, 0, "shared")
    sch.compute_at(cached, sch.get_loops(block)[1])
    _, tx = sch.split(sch.get_loops(cached)[-1], [None, 64])
    sch.bind(tx, "threadIdx.x")
    with pytest.raises(GPUError, match=r"both bound to threadIdx.x but have extents 128 and 64"):
        kernels(sch.mod)


def test_blocks_inside_threads_are_an_error():
    sch = tir.Schedule(unbound_store)
    i, = sch.get_loops(sch.get_block("A"))
    i0, i1 = sch.split(i, [None, 8])
    sch.bind(i0, "threadIdx.x")
    sch.bind(i1, "blockIdx.x")
    with pytest.raises(GPUError, match=r"blockIdx loops go outside threadIdx loops"):
        kernels(sch.mod)


def test_shared_memory_cannot_carry_values_from_one_kernel_to_the_next():
    # The fetch into shared memory and the sum are bound as two separate kernels.
    sch = gs.window_sum(256, threads=64, shared=False)
    block = sch.get_block("C")
    cached = sch.cache_read(block, 0, "shared")
    i, = sch.get_loops(cached)
    i0, i1 = sch.split(i, [None, 2])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    with pytest.raises(GPUError, match=r"buffer A_shared in shared memory is used by main_kernel0 "
                                       r"and main_kernel1, but shared memory lives only while one "
                                       r"kernel's block runs"):
        kernels(sch.mod)


def test_the_gpu_passes_are_named_passes_of_the_lowering_pipeline():
    from mlc_lab.ir.transform import PassContext, PassInstrument

    class Names(PassInstrument):
        def __init__(self):
            self.names = []

        def run_before_pass(self, mod, info):
            self.names.append(info.name)

    seen = Names()
    with PassContext(instruments=[seen]):
        lib = mlc_lab.build(gs.window_sum(256, threads=64).mod, target="cuda-sim")
    assert seen.names[-3:] == ["simplify", "split_host_device", "inject_sync"]
    assert "__syncthreads" in lib.get_source("cuda")
    with PassContext(disabled_pass=["inject_sync"]):
        racy = mlc_lab.build(gs.window_sum(256, threads=64).mod, target="cuda-sim")
    assert "__syncthreads" not in racy.get_source("cuda")
    with PassContext(disabled_pass=["split_host_device"]):
        with pytest.raises(ValueError, match="split_host_device cannot be disabled"):
            mlc_lab.build(gs.vector_add(256).mod, target="cuda-sim")


@T.prim_func
def row_sum(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def test_a_store_outside_the_thread_loops_is_made_by_one_thread():
    """Partial sums in shared memory, one per thread, then the write-back under the block loop
    only: every thread of the block would run B[i] = B[i] + B_rf[k] and the updates would race.
    The interpreter runs it once per block; so does the kernel, on thread 0."""
    sch = tir.Schedule(row_sum)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 32])
    rf = sch.rfactor(k1, 0)
    i, k0, k1 = sch.get_loops(rf)
    sch.reorder(k1, k0)
    sch.bind(i, "blockIdx.x")
    sch.bind(k1, "threadIdx.x")
    sch.set_scope(rf, 0, "shared")
    sch.reverse_compute_at(sch.get_block("B"), i)
    source = mlc_lab.build(sch.mod, target="cuda-sim").get_source()
    write_back = source[source.index("for (int ax0"):]
    assert write_back.count("if ((int)threadIdx.x == 0) {") == 2, write_back  # init and update
    assert "B_rf[(int)threadIdx.x] = 0.0f" in source    # per-thread stores stay unguarded
    a = np.random.default_rng(0).random((8, 64), dtype=np.float32)
    b = np.zeros(8, "float32")
    mlc_lab.build(sch.mod, target="cuda-sim")(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


@T.prim_func
def copy_then_use(A: T.Buffer((4, 6), "float32"), B: T.Buffer((8, 4), "float32")):
    A_shared = T.alloc_buffer((4, 6), scope="shared")
    for j in T.thread_binding(8, thread="threadIdx.x"):
        for i, k in T.grid(4, 6):
            with T.block("A_shared"):
                vi, vk = T.axis.remap("SS", [i, k])
                A_shared[vi, vk] = A[vi, vk]
        for i in range(4):
            with T.block("B"):
                vj, vi = T.axis.remap("SS", [j, i])
                B[vj, vi] = A_shared[vi, 0] + A_shared[vi, 5] + T.Cast("float32", vj)
        if j == 3:
            B[3, 0] = A[0, 0]     # thread 3's own row: no other thread writes it


def test_a_copy_every_thread_would_repeat_is_made_once_and_chosen_threads_keep_theirs():
    """Inside the thread loop, the copy into A_shared does not depend on the thread: every
    thread would write each element at once (a race the simulator reports). Thread 0 makes it;
    the store that an if gives to thread 3 stays with thread 3."""
    source = mlc_lab.build(copy_then_use, target="cuda-sim").get_source()
    assert "if ((int)threadIdx.x == 0) {\n" in source and "A_shared[" in source.split("threadIdx.x == 0")[1]
    assert "((int)threadIdx.x == 3)" in source and source.count("threadIdx.x == 0") == 1
    a, b = np.random.default_rng(1).random((4, 6), dtype=np.float32), np.zeros((8, 4), "float32")
    mlc_lab.build(copy_then_use, target="cuda-sim")(a, b)
    expected = a[:, 0] + a[:, 5] + np.arange(8, dtype="float32")[:, None]
    expected[3, 0] = a[0, 0]
    np.testing.assert_allclose(b, expected, rtol=1e-6)
