"""The CUDA simulator (mlc_lab.runtime.cuda_sim): every GPU schedule of the course computes
what numpy computes; races, out-of-bounds accesses and divergent barriers are caught and named;
the memory counters give the textbook answers on small hand-written kernels; the time model
ranks the three matmuls as a GPU does."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab.ir import IRModule
from mlc_lab.relax import op as R
from mlc_lab.runtime import run as interpret
from mlc_lab.runtime.cuda_sim import (BarrierDivergenceError, DataRaceError, OutOfBoundsError,
                                      Trace, estimate, estimate_seconds, simulate,
                                      simulate_program)
from mlc_lab.target import Target
from mlc_lab.testing import gpu_schedules as gs
from mlc_lab.testing.matmul_schedules import matmul
from mlc_lab.tir import expr as E
from mlc_lab.tir import stmt as S
from mlc_lab.tir.buffer import decl_buffer
from mlc_lab.tir.stmt_functor import post_order_visit
from mlc_lab.tir.transform.inject_sync import sync_stmt
from mlc_lab.tir.transform.split_host_device import Kernel, split_host_device


def program(sch, sync=True):
    return split_host_device(mlc_lab.lower(sch.mod)["main"], Target("nvidia/a100"), sync=sync)


def matmul_naive(n, threads=16):
    """One thread per element of C, which it accumulates in global memory."""
    sch = tir.Schedule(IRModule({"main": matmul(n).with_attr("global_symbol", "main")}))
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, threads])
    j0, j1 = sch.split(j, [None, threads])
    sch.reorder(i0, j0, i1, j1, k)
    for loop, tag in ((i0, "blockIdx.y"), (j0, "blockIdx.x"), (i1, "threadIdx.y"),
                      (j1, "threadIdx.x")):
        sch.bind(loop, tag)
    return sch


# ---------------------------------------------------------------------------------------------
# Numerics
SCHEDULES = {
    "vector_add": (lambda: gs.vector_add(512), "vector_add", 512),
    "window_sum_shared": (lambda: gs.window_sum(512), "window_sum", 512),
    "window_sum_global": (lambda: gs.window_sum(512, shared=False), "window_sum", 512),
    "matmul_naive": (lambda: matmul_naive(64), "matmul", 64),
    "matmul_blocked": (lambda: gs.matmul_blocked(128), "matmul", 128),
    "matmul_shared_vector4": (lambda: gs.matmul_shared(128), "matmul", 128),
    "matmul_shared_vector1": (lambda: gs.matmul_shared(128, vector=1), "matmul", 128),
    "matmul_shared_256": (lambda: gs.matmul_shared(256), "matmul", 256),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_gpu_schedules_compute_what_numpy_computes(name):
    make, kind, n = SCHEDULES[name]
    arrays, want = gs.arrays(kind, n)
    runs = simulate_program(program(make()), arrays)    # races are checked too: there are none
    np.testing.assert_allclose(arrays[-1], want, rtol=1e-4, atol=1e-4)
    assert runs[0].counters.threads == runs[0].kernel.num_blocks * runs[0].kernel.threads_per_block


def _graph(shapes, body):
    params = [relax.Var(f"a{i}", relax.TensorStructInfo(shape, "float32"))
              for i, shape in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    return relax.transform.LegalizeOps()(bb.get())


def _bind_by_hand(func, threads=64):
    """Each block's spatial loops fused, split by ``threads`` and bound to blockIdx/threadIdx."""
    sch = tir.Schedule(IRModule({"main": func.with_attr("global_symbol", "main")}))
    blocks = []
    post_order_visit(func.body, lambda n: blocks.append(n) if isinstance(n, S.Block) and
                     n.name_hint != "root" else None)
    for block in blocks:
        spatial = sum(iv.iter_type == "spatial" for iv in block.iter_vars)
        loops = sch.get_loops(sch.get_block(block.name_hint))[:spatial]
        bx, tx = sch.split(sch.fuse(*loops) if len(loops) > 1 else loops[0], [None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch


GRAPHS = {
    "matmul_bias_relu": ([(64, 128), (128, 96), (96,)],
                         lambda x, w, b: R.relu(R.add(R.matmul(x, w), b))),
    "softmax": ([(32, 10)], R.nn.softmax),                     # 4 kernels, exp, reductions
    "conv2d_padded": ([(2, 3, 14, 14), (8, 3, 3, 3)],          # if_then_else for the padding
                      lambda x, w: R.nn.conv2d(x, w, padding=(1, 1))),
    "row_sum": ([(16, 256)], lambda x: R.sum(x, axis=1)),
}


@pytest.mark.parametrize("name", GRAPHS)
def test_relax_legalized_kernels_bound_by_hand_match_the_interpreter(name):
    rng = np.random.default_rng(0)
    for func in _graph(*GRAPHS[name]).functions.values():
        if not isinstance(func, tir.PrimFunc):
            continue
        args = [rng.random([int(d) for d in p.shape], dtype="float32") for p in func.params]
        want = [a.copy() for a in args]
        interpret(func, want)
        simulate_program(program(_bind_by_hand(func)), args)
        np.testing.assert_allclose(args[-1], want[-1], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Hand-written kernels: one block of 32 threads unless told otherwise
TX, BX = E.Var("threadIdx.x", "int32"), E.Var("blockIdx.x", "int32")


def kernel(body, params, threads=32, blocks=1, shared=(), local=()):
    for buffer in (*shared, *local):
        body = S.Allocate(buffer, body)
    return Kernel("k", tuple(params), (blocks, 1, 1), (threads, 1, 1),
                  {"blockIdx.x": BX, "threadIdx.x": TX}, body, tuple(shared), tuple(local))


def buffers(*sizes, scope="global"):
    return [decl_buffer((n,), "float32", name, scope=scope) for name, n in zip("ABCD", sizes)]


def store(buffer, index, value):
    return S.BufferStore(buffer, value, (index,))


def zeros(*sizes):
    return [np.zeros(n, "float32") for n in sizes]


def test_a_loop_whose_bounds_differ_between_threads_runs_per_thread():
    A, B = buffers(32, 32)
    i = E.Var("i")
    body = S.SeqStmt((store(B, TX, E.const(0.0)),
                      S.For(i, E.const(0), TX, "serial", store(B, TX, B[TX] + A[i]))))
    a, b = np.arange(32, dtype="float32"), np.zeros(32, "float32")
    simulate(kernel(body, [A, B]), [a, b])
    np.testing.assert_array_equal(b, np.concatenate([[0], np.cumsum(a)[:-1]]))


@pytest.mark.parametrize("stride, sectors", [(1, 4), (2, 8), (32, 32)])
def test_coalescing_counts_sectors_per_warp_request(stride, sectors):
    A, B = buffers(32 * 32, 32)
    run = simulate(kernel(store(B, TX, A[TX * stride]), [A, B]), zeros(32 * 32, 32))
    a = run.counters.buffers["A"]
    assert (a.requests, a.sectors, a.sectors_per_request) == (1, sectors, sectors)
    assert a.efficiency == pytest.approx(128 / (32 * sectors))       # 100%, 50%, 12.5%
    assert run.counters.buffers["B"].sectors == 4


@pytest.mark.parametrize("index, wavefronts", [(TX, 1), (TX * 2, 2), (TX * 0, 1), (TX * 32, 32)])
def test_bank_conflicts_count_distinct_words_per_bank(index, wavefronts):
    # stride 1: one word per bank; stride 2: two words in each even bank; one address for all
    # threads: a broadcast; stride 32: every thread in bank 0. (S is read uninitialised: only
    # the counters matter here.)
    B, = buffers(32)
    shared = decl_buffer((32 * 32,), "float32", "S", scope="shared")
    run = simulate(kernel(store(B, TX, shared[index]), [B], shared=[shared]), zeros(32))
    s = run.counters.buffers["S"]
    assert (s.requests, s.wavefronts, s.ideal_wavefronts) == (1, wavefronts, 1)
    assert s.conflict_degree == wavefronts and s.bank_conflicts == wavefronts - 1


def test_vector_accesses_are_one_request_and_warps_split_at_32_threads():
    A, B = buffers(4 * 64, 4 * 64)
    v = E.Var("v")
    body = S.For(v, E.const(0), E.const(4), "vectorized", store(B, TX * 4 + v, A[TX * 4 + v]))
    a = np.arange(4 * 64, dtype="float32")
    run = simulate(kernel(body, [A, B], threads=64), [a, np.zeros_like(a)])
    counted = run.counters.buffers["A"]
    assert (counted.requests, counted.sectors, counted.efficiency) == (2, 32, 1.0)
    assert run.counters.per_thread()["global reads"] == 4


def test_vector_lanes_and_nested_vectorized_loops_each_keep_their_own_axis():
    # A vector computed outside a vectorized loop is combined lane by lane with one computed
    # inside it, and the loop's iterations stay apart from the vector lanes even when the two
    # have the same length (4 and 4: lining them up on one axis gives wrong values silently).
    A, B, C = buffers(32 * 4, 32 * 16, 32 * 4)
    x, v = E.Var("x", "float32x4"), E.Var("v")
    row = E.Ramp(TX * 4, E.const(1), 4)     # launch-invariant: cached once, used at two depths
    inside = S.For(v, E.const(0), E.const(4), "vectorized",
                   store(B, E.Ramp(TX * 16 + v * 4, E.const(1), 4),
                         x + A[row] * E.Broadcast(E.Cast("float32", v), 4)))
    body = S.SeqStmt((S.LetStmt(x, A[row], inside), store(C, row, A[row])))
    a = np.random.default_rng(1).random(32 * 4, dtype="float32")
    b, c = zeros(32 * 16, 32 * 4)
    simulate(kernel(body, [A, B, C]), [a, b, c])
    rows = a.reshape(32, 1, 4)
    np.testing.assert_allclose(b.reshape(32, 4, 4), rows + rows * np.arange(4.0)[:, None])
    np.testing.assert_array_equal(c, a)
    # three vectorized loops around a 2-lane vector: D[t, i, j, k, l] = t + i + j + k + l
    D, = buffers(32 * 2 * 3 * 2 * 2)
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    flat = (((TX * 2 + i) * 3 + j) * 2 + k) * 2
    total = E.Broadcast(E.Cast("float32", TX + i + j + k), 2) + \
        E.Cast("float32x2", E.Ramp(E.const(0), E.const(1), 2))
    nest = S.For(i, E.const(0), E.const(2), "vectorized",
                 S.For(j, E.const(0), E.const(3), "vectorized",
                       S.For(k, E.const(0), E.const(2), "vectorized",
                             store(D, E.Ramp(flat, E.const(1), 2), total))))
    d, = zeros(32 * 24)
    simulate(kernel(nest, [D]), [d])
    grid = np.indices((32, 2, 3, 2, 2)).sum(axis=0)
    np.testing.assert_array_equal(d, grid.reshape(-1))


def test_out_of_bounds_names_buffer_index_thread_and_block():
    A, B = buffers(32 * 4, 32 * 4)
    body = store(B, BX * 32 + TX, A[BX * 32 + TX + 4])
    with pytest.raises(OutOfBoundsError, match=r"thread \(28, 0, 0\) of block \(3, 0, 0\) reads "
                                               r"A\[128\], but A \(global memory\) has 128") as e:
        simulate(kernel(body, [A, B], blocks=4), zeros(128, 128))
    assert (e.value.buffer, e.value.index, e.value.thread, e.value.block) == \
        ("A", 128, (28, 0, 0), (3, 0, 0))
    guarded = S.IfThenElse(BX * 32 + TX + 4 < 128, body)     # masked-off threads never read
    simulate(kernel(guarded, [A, B], blocks=4), zeros(128, 128))


def test_out_of_bounds_in_shared_and_local_memory():
    B, = buffers(32)
    shared = decl_buffer((32,), "float32", "S", scope="shared")
    local = decl_buffer((2,), "float32", "L", scope="local")
    with pytest.raises(OutOfBoundsError, match=r"thread \(31, 0, 0\) of block \(0, 0, 0\) "
                                               r"writes S\[32\].*shared memory\) has 32"):
        simulate(kernel(store(shared, TX + 1, E.const(1.0)), [B], shared=[shared]), zeros(32))
    with pytest.raises(OutOfBoundsError, match=r"reads L\[2\].*local memory"):
        simulate(kernel(store(B, TX, local[E.const(2)]), [B], local=[local]), zeros(32))


def test_a_race_without_barriers_is_named_and_none_with_them():
    arrays, _ = gs.arrays("matmul", 64)
    with pytest.raises(DataRaceError, match=r"data race on shared memory [AB]_shared\[\d+\] in "
                                            r"block \(0, 0, 0\) \(read after write\)") as e:
        simulate_program(program(gs.matmul_shared(64), sync=False), arrays)
    assert e.value.buffer in ("A_shared", "B_shared") and e.value.thread != e.value.other_thread
    simulate_program(program(gs.matmul_shared(64)), arrays)


def test_write_after_read_and_two_writers_in_one_instruction_are_races():
    B, = buffers(32)
    S_ = decl_buffer((32,), "float32", "S", scope="shared")
    fill = store(S_, TX, E.Cast("float32", TX))
    shift = S.SeqStmt((fill, sync_stmt(), store(B, TX, S_[(TX + 1) % 32]), fill))
    with pytest.raises(DataRaceError, match=r"S\[\d+\].*\(write after read\)"):
        simulate(kernel(shift, [B], shared=[S_]), zeros(32))
    with pytest.raises(DataRaceError, match=r"S\[0\].*\(write after write\)"):
        simulate(kernel(store(S_, E.const(0), E.const(1.0)), [B], shared=[S_]), zeros(32))
    fixed = S.SeqStmt((fill, sync_stmt(), store(B, TX, S_[(TX + 1) % 32]), sync_stmt(), fill))
    b = zeros(32)[0]
    simulate(kernel(fixed, [B], shared=[S_]), [b])
    np.testing.assert_array_equal(b, (np.arange(32) + 1) % 32)


def test_a_barrier_reached_by_part_of_a_block_is_an_error():
    B, = buffers(64)
    divergent = S.IfThenElse(TX < 16, sync_stmt())
    with pytest.raises(BarrierDivergenceError, match=r"16 of the 32 threads of block \(0, 0, 0\)"):
        simulate(kernel(divergent, [B], blocks=2), zeros(64))
    per_block = S.IfThenElse(BX < 1, sync_stmt())   # whole blocks skip it: allowed
    run = simulate(kernel(per_block, [B], blocks=2), zeros(64))
    assert run.counters.barriers == 1


# ---------------------------------------------------------------------------------------------
# Reports, time model, trace
def test_time_model_ranks_the_1024_matmuls_as_a_gpu_does():
    arrays, _ = gs.arrays("matmul", 1024)
    seconds = {}
    for name, sch in (("naive", matmul_naive(1024)), ("blocked", gs.matmul_blocked(1024)),
                      ("shared", gs.matmul_shared(1024))):
        run = simulate(program(sch).kernels[0], arrays, blocks=2)   # 2 blocks stand for all
        seconds[name] = estimate_seconds(run, "nvidia/a100")
        assert estimate(run, "nvidia/h100").seconds < seconds[name]
    assert seconds["naive"] > seconds["blocked"] > seconds["shared"]


def test_report_occupancy_and_registers():
    arrays, _ = gs.arrays("matmul", 128)
    run = simulate_program(program(gs.matmul_shared(128)), arrays, target="nvidia/a100")[0]
    text = str(run.report())
    for part in ("A_shared", "conflicts", "occupancy", "estimated", "4,096 bytes per block"):
        assert part in text
    html = run.report()._repr_html_()
    assert html.startswith('<div class="mlc-view mlc-lab-cuda-sim">') and "<th>A_shared</th>" not in html
    assert html.count("<tr>") == 1 + len(run.counters.buffers) + len(run.report().summary())
    assert "<td>A_shared</td>" in html and "--jp-layout-color1" in html
    assert run.report().plot() is not None
    assert run.occupancy().limiter == "registers" and run.registers >= 64 + 16
    few = simulate(run.kernel, arrays, registers=32, counters=False)
    assert few.occupancy().occupancy > run.occupancy().occupancy


def test_trace_records_writers_and_one_warp():
    arrays, _ = gs.arrays("vector_add", 256)
    run = simulate_program(program(gs.vector_add(256)), arrays, trace=Trace(warp=(1, 1)))[0]
    writers = run.trace.writers("C")
    np.testing.assert_array_equal(writers["block"][:, 0], np.arange(256) // 128)
    np.testing.assert_array_equal(writers["thread"][:, 0], np.arange(256) % 128)
    first = run.trace.warp_accesses[0]
    assert (first.buffer, first.kind) == ("A", "load")
    np.testing.assert_array_equal(first.addresses[:, 0], 128 + 32 + np.arange(32))


def test_simulating_some_blocks_writes_only_theirs():
    arrays, want = gs.arrays("vector_add", 512)
    run = simulate_program(program(gs.vector_add(512)), arrays, blocks=[(1, 0, 0)])[0]
    np.testing.assert_allclose(arrays[2][128:256], want[128:256])
    assert not arrays[2][:128].any() and run.blocks_run == 1


def test_arguments_are_checked():
    A, B = buffers(32, 32)
    k = kernel(store(B, TX, A[TX]), [A, B])
    with pytest.raises(TypeError, match="holds float32, got an array of float64"):
        simulate(k, [np.zeros(32), np.zeros(32, "float32")])
    with pytest.raises(TypeError, match="no argument for parameter B"):
        simulate(k, {"A": np.zeros(32, "float32")})
