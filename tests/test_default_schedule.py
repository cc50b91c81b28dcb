"""relax.transform.DefaultSchedule, which relax.build runs by default: every kind of kernel gets
its rule (read back from default_schedule_report) and computes what numpy and the unscheduled
build (opt_level=0) compute; kernels no rule handles, and tuned ones, stay as they were."""
import numpy as np
import pytest

import mlc_lab
from mlc_lab import relax, tir
from mlc_lab import meta_schedule as ms
from mlc_lab.frontend import nn
from mlc_lab.ir import structural_equal
from mlc_lab.relax import op as R
from mlc_lab.relax.transform import DefaultSchedule, default_schedule_report
from mlc_lab.relax.transform import default_schedule as ds
from mlc_lab.meta_schedule.apply_database import tuning_workload
from mlc_lab.script import ir as I
from mlc_lab.script import relax as RS
from mlc_lab.script import tir as T
from mlc_lab.tir.schedule import ScheduleError
from mlc_lab.tir.stmt import Allocate, For
from mlc_lab.tir.stmt_functor import post_order_visit


def tensor(name, shape):
    return relax.Var(name, relax.TensorStructInfo(shape, "float32"))


def graph(shapes, body):
    """A module whose "main" takes tensors of ``shapes`` and returns ``body(*params)``."""
    params = [tensor(f"a{i}", shape) for i, shape in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    return bb.get()


def run(ex, *args):
    return relax.VirtualMachine(ex, mlc_lab.cpu())["main"](*args).numpy()


def loop_kinds(func) -> set:
    kinds = set()
    post_order_visit(func.body, lambda n: kinds.add(n.kind) if isinstance(n, For) else None)
    return kinds


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def conv2d(x, w, pad=0):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w)


def max_pool(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


# name: (input shapes, graph, numpy, {kernel: rule})
KERNELS = {
    "dense": ([(64, 200), (96, 200)], R.dense, lambda x, w: x @ w.T, {"dense": "matmul"}),
    # batch 1: the weights are read once, along the reduction: dot products stream them
    "dense_matrix_vector": ([(1, 784), (128, 784)], R.dense, lambda x, w: x @ w.T,
                            {"dense": "reduction"}),
    # one row of 10 outputs: the 2704 steps are split into interleaved partial sums
    "matmul_vector_split": ([(1, 2704), (2704, 10), (10,)], lambda x, w, b: R.add(R.matmul(x, w), b),
                            lambda x, w, b: x @ w + b, {"fused_matmul_add": "matmul"}),
    "matmul_bias_relu": ([(64, 128), (128, 96), (96,)],
                         lambda x, w, b: R.relu(R.add(R.matmul(x, w), b)),
                         lambda x, w, b: np.maximum(x @ w + b, 0),
                         {"fused_matmul_add_relu": "matmul"}),
    "batch_matmul": ([(4, 32, 64), (4, 64, 48)], R.matmul, lambda a, b: a @ b,
                     {"matmul": "matmul"}),
    "conv2d": ([(2, 3, 16, 16), (8, 3, 3, 3)], R.nn.conv2d, conv2d, {"conv2d": "conv"}),
    "conv2d_padded": ([(2, 3, 14, 14), (8, 3, 3, 3)],
                      lambda x, w: R.nn.conv2d(x, w, padding=(1, 1)),
                      lambda x, w: conv2d(x, w, 1), {"conv2d": "conv"}),
    "elementwise_chain": ([(32, 100), (32, 100)],
                          lambda x, y: R.tanh(R.multiply(R.add(x, y), y)),
                          lambda x, y: np.tanh((x + y) * y),
                          {"fused_add_multiply_tanh": "elementwise"}),
    "broadcast": ([(16, 64), (64,)], lambda x, b: R.relu(R.add(x, b)),
                  lambda x, b: np.maximum(x + b, 0), {"fused_add_relu": "elementwise"}),
    "softmax": ([(32, 10)], R.nn.softmax, softmax, {"softmax": "reduction"}),
    "row_sum": ([(16, 256)], lambda x: R.sum(x, axis=1), lambda x: x.sum(1), {"sum": "reduction"}),
    "column_sum": ([(256, 64)], lambda x: R.sum(x, axis=0), lambda x: x.sum(0),
                   {"sum": "reduction"}),
    "mean": ([(16, 256)], lambda x: R.mean(x, axis=1), lambda x: x.mean(1), {"mean": "reduction"}),
    "max_pool2d": ([(2, 4, 16, 16)], lambda x: R.nn.max_pool2d(x, (2, 2), (2, 2)), max_pool,
                   {"max_pool2d": "reduction"}),
}


@pytest.mark.parametrize("name", KERNELS)
def test_every_kernel_kind_gets_its_rule_and_the_same_results(name):
    shapes, body, numpy_fn, rules = KERNELS[name]
    mod = graph(shapes, body)
    args = [np.random.default_rng(n).standard_normal(s).astype("float32")
            for n, s in enumerate(shapes)]
    ex = relax.build(mod, "llvm")
    assert default_schedule_report(ex.mod) == rules
    scheduled = [f for f in ex.mod.functions.values() if isinstance(f, tir.PrimFunc)]
    assert all("vectorized" in loop_kinds(f) for f in scheduled)
    got, unscheduled = run(ex, *args), run(relax.build(mod, "llvm", opt_level=0), *args)
    np.testing.assert_allclose(got, numpy_fn(*args), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, unscheduled, rtol=1e-4, atol=1e-4)


def bench_models():
    """The MLP and CNN of bench/e2e.py, with the rules their kernels get."""
    mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10, seed=1))
    cnn = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(8 * 13 * 13, 10, seed=1))
    return [(mlp, (64, 784), {"fused_matmul_add_relu": "matmul", "fused_matmul1_add1": "matmul"}),
            # the pooling is computed in the convolution's tile; the flatten is a view
            # (RewriteDataflowReshape), no kernel
            (cnn, (8, 1, 28, 28), {"fused_conv2d_add_relu_max_pool2d": "conv+pool",
                                   "fused_matmul_add1": "matmul"})]


@pytest.mark.parametrize("model, shape, rules", bench_models(), ids=["mlp", "cnn"])
def test_the_bench_models(model, shape, rules):
    x = np.random.default_rng(0).random(shape, dtype="float32")
    ex = relax.build(model.to_relax(shape), "llvm")
    assert default_schedule_report(ex.mod) == rules
    got = run(ex, x)
    np.testing.assert_allclose(got, model.forward_numpy(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, run(relax.build(model.to_relax(shape), "llvm", opt_level=0), x),
                               rtol=1e-4, atol=1e-4)


def test_opt_level_0_and_the_python_target_leave_kernels_unscheduled():
    shapes, body, numpy_fn, _ = KERNELS["matmul_bias_relu"]
    mod = graph(shapes, body)
    args = [np.ones(s, "float32") for s in shapes]
    for ex in (relax.build(mod, "llvm", opt_level=0), relax.build(mod, "python")):
        assert set(default_schedule_report(ex.mod).values()) == {"not scheduled"}
        assert all(loop_kinds(f) == {"serial"} for f in ex.mod.functions.values()
                   if isinstance(f, tir.PrimFunc))
        np.testing.assert_allclose(run(ex, *args), numpy_fn(*args), rtol=1e-5)
    assert list(default_schedule_report(relax.build(mod, "llvm", opt_level=0).mod)) == \
        ["add", "matmul", "relu"]


def test_the_default_pipeline_schedules_after_fusion_and_before_memory_planning():
    names = [p.info.name for p in relax.transform.default_pipeline("llvm").passes]
    at = names.index("DefaultSchedule")
    assert names[at - 3:at + 2] == ["FuseTIR", "RewriteDataflowReshape", "DeadCodeElimination",
                                    "DefaultSchedule", "StaticPlanBlockMemory"]


@I.ir_module
class Unusual:
    @T.prim_func
    def gather(A: T.Buffer((64,), "float32"), idx: T.Buffer((32,), "int32"),
               B: T.Buffer((32,), "float32")):
        T.func_attr({"global_symbol": "gather", "op_pattern": 8, "tir.noalias": True})
        for i in range(32):
            with T.block("B"):
                vi = T.axis.spatial(32, i)
                B[vi] = A[idx[vi]]

    @T.prim_func
    def scale(B: T.Buffer((32,), "float32"), C: T.Buffer((32,), "float32")):
        T.func_attr({"global_symbol": "scale", "tir.noalias": True})
        for i in T.parallel(32):
            with T.block("C"):
                vi = T.axis.spatial(32, i)
                C[vi] = B[vi] * T.float32(2)

    @RS.function
    def main(a: RS.Tensor((64,), "float32"), idx: RS.Tensor((32,), "int32")):
        cls = Unusual
        with RS.dataflow():
            b = RS.call_tir(cls.gather, (a, idx), out_sinfo=RS.Tensor((32,), "float32"))
            c = RS.call_tir(cls.scale, (b,), out_sinfo=RS.Tensor((32,), "float32"))
            RS.output(c)
        return c


def test_kernels_no_rule_handles_stay_correct_and_are_reported():
    ex = relax.build(Unusual, "llvm")
    assert default_schedule_report(ex.mod) == {
        "gather": "unscheduled: block B loads A at an index read from memory",
        "scale": "unscheduled: loop i is already parallel"}
    assert structural_equal(ex.mod["gather"].body, Unusual["gather"].body)
    assert structural_equal(ex.mod["scale"].body, Unusual["scale"].body)
    a = np.arange(64, dtype="float32")
    idx = np.random.default_rng(0).integers(0, 64, 32).astype("int32")
    np.testing.assert_allclose(run(ex, a, idx), 2 * a[idx])


def test_a_symbolic_batch_is_padded_to_whole_tiles_and_any_batch_is_right():
    n = tir.Var("n", "int64")
    mod = graph([(n, 64), (64, 32), (32,)], lambda x, w, b: R.relu(R.add(R.matmul(x, w), b)))
    ex = relax.build(mod, "llvm")
    assert default_schedule_report(ex.mod) == {"fused_matmul_add_relu": "matmul"}
    text = ex.mod["fused_matmul_add_relu"].script()
    # the rows are padded to a multiple of 16, so the register tile needs no guard inside it
    assert "(n + T.int64(15)) // T.int64(16) * T.int64(16)" in text
    assert "T.where" not in text.split('T.block("T_matmul_update")')[1].split("T.reads")[0]
    assert "T.parallel((n + T.int64(15)) // T.int64(16) * T.int64(2))" in text   # the row tiles
    assert "T.vectorized" in text and "T.unroll" in text
    rng = np.random.default_rng(1)
    w, b = rng.random((64, 32), dtype="float32"), rng.random(32, dtype="float32")
    for batch in (1, 5, 16, 17, 40):
        x = rng.random((batch, 64), dtype="float32")
        np.testing.assert_allclose(run(ex, x, w, b), np.maximum(x @ w + b, 0), rtol=1e-5)


def test_reductions_over_a_symbolic_length_are_scheduled_and_right():
    # attention's probs @ v reduces over the sequence; layer_norm and softmax rows are symbolic
    n = tir.Var("n", "int64")
    mod = graph([(1, 4, n, n), (1, 4, n, 16)], lambda p, v: R.matmul(R.nn.softmax(p), v))
    ex = relax.build(mod, "llvm")
    assert set(default_schedule_report(ex.mod).values()) <= {"matmul", "reduction"}
    rng = np.random.default_rng(2)
    for length in (1, 3, 16, 21):
        p = rng.standard_normal((1, 4, length, length)).astype("float32")
        v = rng.standard_normal((1, 4, length, 16)).astype("float32")
        e = np.exp(p - p.max(-1, keepdims=True))
        np.testing.assert_allclose(run(ex, p, v), (e / e.sum(-1, keepdims=True)) @ v, rtol=1e-4,
                                   atol=1e-5)


def test_a_refusing_primitive_leaves_the_kernel_as_it_was(monkeypatch):
    def refuse_after_a_split(sch, block_rv, lanes, parallel, pooling=None):
        sch.split(sch.get_loops(block_rv)[0], [None, 2])
        raise ScheduleError("split", "the rule was told to fail")

    monkeypatch.setattr(ds, "tile_reduction", refuse_after_a_split)
    shapes, body, numpy_fn, _ = KERNELS["matmul_bias_relu"]
    legal = relax.transform.LegalizeOps()(graph(shapes, body))
    out = DefaultSchedule("llvm")(legal)
    assert default_schedule_report(out)["matmul"] == \
        "unscheduled: ScheduleError in sch.split: the rule was told to fail"
    assert structural_equal(out["matmul"].body, legal["matmul"].body)
    assert default_schedule_report(out)["relu"] == "elementwise"


def test_scheduling_twice_changes_nothing_and_parallel_needs_cores_and_work():
    mod = relax.transform.LegalizeOps()(graph([(256, 512), (512, 256)], R.matmul))
    once = DefaultSchedule("llvm -num-cores=2")(mod)
    assert structural_equal(DefaultSchedule("llvm -num-cores=2")(once), once)
    assert "parallel" in loop_kinds(once["matmul"])          # 67 MFLOP on two cores
    assert "parallel" not in loop_kinds(DefaultSchedule("llvm -num-cores=1")(mod)["matmul"])
    small = relax.transform.LegalizeOps()(graph([(16, 16), (16, 16)], R.matmul))   # 8 KFLOP
    assert "parallel" not in loop_kinds(DefaultSchedule("llvm -num-cores=2")(small)["matmul"])


def test_a_tuned_kernel_is_not_rescheduled(tmp_path):
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10, seed=1))
    fused = ms.relax_integration.legalize_and_fuse(model.to_relax((4, 64)))
    workload = tuning_workload(fused["fused_matmul_add_relu"])
    sch = tir.Schedule(workload)
    i, j, k = sch.get_loops(sch.get_block("T_matmul"))
    j0, j1 = sch.split(j, [None, 4])
    sch.reorder(j0, k, j1)
    db = ms.JSONDatabase(str(tmp_path))
    db.commit_record(workload, ms.TuningRecord(sch.trace.as_json(), "llvm", run_secs=[1e-3]))
    tuned = relax.transform.MetaScheduleApplyDatabase(db, "llvm")(fused)
    ex = relax.build(tuned, "llvm")
    assert default_schedule_report(ex.mod) == {"fused_matmul_add_relu": "already scheduled",
                                               "fused_matmul1_add1": "matmul"}
    assert structural_equal(ex.mod["fused_matmul_add_relu"], tuned["fused_matmul_add_relu"])
    x = np.random.default_rng(2).random((4, 64), dtype="float32")
    np.testing.assert_allclose(run(ex, x), model.forward_numpy(x), rtol=1e-4, atol=1e-5)


def test_a_matrix_vector_product_sums_interleaved_partial_rows():
    # One accumulator would wait on each multiply-add in turn: eight partial sums, then their sum.
    shapes = [(1, 2704), (2704, 10)]
    ex = relax.build(graph(shapes, R.matmul), "llvm")
    text = ex.mod["matmul"].script()
    assert "T_matmul_rf = T.alloc_buffer((T.int64(8), T.int64(1), T.int64(10)))" in text
    args = [np.random.default_rng(n).standard_normal(s).astype("float32") for n, s in enumerate(shapes)]
    np.testing.assert_allclose(run(ex, *args), args[0] @ args[1], rtol=1e-4, atol=1e-4)


def vector_lanes(func) -> set:
    lanes = set()
    post_order_visit(func.body, lambda n: lanes.add(int(n.extent)) if isinstance(n, For)
                     and n.kind == "vectorized" else None)
    return lanes


def test_a_convolution_with_26_columns_takes_vectors_of_13():
    # 26 has no power-of-two width: two vectors of 13 lanes each (one register, masked) per row
    # where a register holds 16 floats; with 8 (no AVX-512), the output channels are the lanes.
    shapes = [(2, 1, 28, 28), (16, 1, 3, 3)]
    ex = relax.build(graph(shapes, R.nn.conv2d), "llvm")
    lanes = ds.vector_machine(mlc_lab.target.Target("llvm"))[0]
    assert (13 if lanes >= 13 else 8) in vector_lanes(ex.mod["conv2d"])
    assert 26 not in vector_lanes(ex.mod["conv2d"])
    args = [np.random.default_rng(n).standard_normal(s).astype("float32") for n, s in enumerate(shapes)]
    np.testing.assert_allclose(run(ex, *args), conv2d(*args), rtol=1e-4, atol=1e-4)


def test_a_convolution_with_no_vector_width_takes_its_output_channels_as_vector_lanes():
    # 34 output columns (2 x 17) have no vector width of 4 or more; the 16 output channels do.
    # The tile accumulates channel vectors and stores them back transposed into the NCHW output.
    shapes = [(2, 1, 36, 36), (16, 1, 3, 3)]
    ex = relax.build(graph(shapes, R.nn.conv2d), "llvm")
    func = ex.mod["conv2d"]
    accumulators = [b for b in func.script().splitlines() if "_local = T.alloc_buffer" in b]
    assert accumulators and "(T.int64(2), T.int64(34), T.int64(34), T.int64(16))" in accumulators[0]
    assert vector_lanes(func) & {8, 16} and 34 not in vector_lanes(func)   # 8: without AVX-512
    args = [np.random.default_rng(n).standard_normal(s).astype("float32") for n, s in enumerate(shapes)]
    np.testing.assert_allclose(run(ex, *args), conv2d(*args), rtol=1e-4, atol=1e-4)


def allocations(func) -> dict:
    """{buffer name: elements} of the allocations of ``func`` once lowered."""
    lowered = next(iter(mlc_lab.lower(func).functions.values()))
    found = {}
    post_order_visit(lowered.body, lambda n: found.__setitem__(n.buffer.name, int(np.prod(
        [int(e) for e in n.buffer.shape]))) if isinstance(n, Allocate) else None)
    return found


def pool(x, size, stride):
    n, c, h, w = x.shape
    rows, cols = (h - size) // stride + 1, (w - size) // stride + 1
    out = np.full((n, c, rows, cols), -np.inf, dtype=x.dtype)
    for i in range(size):
        for j in range(size):
            out = np.maximum(out, x[:, :, i:i + stride * rows:stride, j:j + stride * cols:stride])
    return out


# input shape, (pool size, stride), the rule: "conv+pool" where the tile covers whole windows
CONV_POOLS = {
    "2x2 windows of 26 rows": ((2, 1, 28, 28), (2, 2), "conv+pool"),
    "batch 1": ((1, 1, 28, 28), (2, 2), "conv+pool"),
    "a row left over (27 rows)": ((2, 1, 29, 29), (2, 2), "conv"),
    "3x3 windows across a column vector (24 = 3 x 8)": ((2, 1, 26, 26), (3, 3), "conv"),
    "overlapping windows": ((2, 1, 28, 28), (3, 2), "conv"),
}


@pytest.mark.parametrize("name", CONV_POOLS)
def test_a_pooling_after_a_convolution_is_computed_in_its_tile_when_the_tile_holds_whole_windows(name):
    # FuseOps(windows=True) puts conv-bias-relu-pool in one kernel; where the convolution's tile
    # holds whole windows the pooling runs under it and the convolution's output shrinks to
    # one tile, otherwise both are scheduled on their own in the kernel. Same numbers always.
    shape, (size, stride), rule = CONV_POOLS[name]
    shapes = [shape, (16, 1, 3, 3), (1, 16, 1, 1)]
    mod = graph(shapes, lambda x, w, b: R.nn.max_pool2d(
        R.nn.relu(R.add(R.nn.conv2d(x, w), b)), (size, size), (stride, stride)))
    ex = relax.build(mod, "llvm")
    (kernel, got_rule), = default_schedule_report(ex.mod).items()
    assert "max_pool2d" in kernel and got_rule == rule
    conv_out = 16 * (shape[2] - 2) * (shape[3] - 2) * shape[0]
    func = ex.mod[kernel]   # a big intermediate is a workspace parameter after the output
    workspace = [int(np.prod([int(e) for e in func.buffer_map[p].shape]))
                 for p in func.params[len(shapes) + 1:]]
    biggest = max([*allocations(func).values(), *workspace])
    assert (biggest < conv_out // 8) == (rule == "conv+pool")
    args = [np.random.default_rng(n).standard_normal(s).astype("float32") for n, s in enumerate(shapes)]
    want = pool(np.maximum(conv2d(*args[:2]) + args[2], 0), size, stride)
    np.testing.assert_allclose(run(ex, *args), want, rtol=1e-4, atol=1e-4)


def test_only_the_build_pipeline_fuses_a_pooling_plain_fuseops_keeps_the_reference_rules():
    shapes = [(2, 1, 28, 28), (16, 1, 3, 3)]
    mod = graph(shapes, lambda x, w: R.nn.max_pool2d(R.nn.relu(R.nn.conv2d(x, w)), (2, 2), (2, 2)))
    legal = relax.transform.AnnotateTIROpPattern()(relax.transform.LegalizeOps()(mod))
    plain = relax.transform.FuseOps()(legal)
    windows = relax.transform.FuseOps(windows=True)(legal)
    names = lambda m: sorted(gv.name_hint for gv in m.functions if gv.name_hint.startswith("fused"))
    assert names(plain) == ["fused_conv2d_relu"]
    assert names(windows) == ["fused_conv2d_relu_max_pool2d"]


def test_a_convolution_read_by_more_than_its_pooling_is_not_fused_with_it():
    # the relu's value is also returned: the pooling reads a value that must be kept whole
    shapes = [(2, 1, 28, 28), (16, 1, 3, 3)]
    params = [tensor(f"a{i}", s) for i, s in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            act = bb.emit(R.nn.relu(R.nn.conv2d(*params)))
            pooled = bb.emit(R.nn.max_pool2d(act, (2, 2), (2, 2)))
            out = bb.emit_output(relax.Tuple([act, pooled]))
        bb.emit_func_output(out)
    legal = relax.transform.AnnotateTIROpPattern()(relax.transform.LegalizeOps()(bb.get()))
    fused = relax.transform.FuseOps(windows=True)(legal)
    assert sorted(gv.name_hint for gv in fused.functions if gv.name_hint.startswith("fused")) \
        == ["fused_conv2d_relu"]


def test_a_masked_softmax_over_a_symbolic_length_is_scheduled_and_right():
    # its reductions read a scalar (the scale), which is no data reuse: no tile is attempted
    n = tir.Var("n", "int64")
    scale = relax.const(0.125, "float32")
    mod = graph([(4, n, n)], lambda s: R.nn.softmax(R.add(
        R.multiply(s, scale), R.triu(R.full_like(s, relax.const(-1e9, "float32")), 1))))
    ex = relax.build(mod, "llvm")
    assert list(default_schedule_report(ex.mod).values()) == ["reduction"]
    rng = np.random.default_rng(3)
    for length in (1, 6):
        s = rng.standard_normal((4, length, length)).astype("float32")
        z = s * np.float32(0.125) + np.triu(np.full((length, length), -1e9, "float32"), 1)
        e = np.exp(z - z.max(-1, keepdims=True))
        np.testing.assert_allclose(run(ex, s), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_a_softmax_over_a_symbolic_length_runs_in_whole_vectors():
    """The row max and sum split with a guard into vector partial results, the elementwise
    steps into guarded vectors; lowering keeps each guard to the last, partial vector."""
    from mlc_lab.tir.transform.pipeline import lower
    n = tir.Var("n", "int64")
    ex = relax.build(graph([(3, n, n)], lambda s: R.nn.softmax(s)), "llvm")
    kernel = next(f for f in ex.mod.functions.values() if isinstance(f, tir.PrimFunc))
    vector_stores = []
    post_order_visit(lower(kernel).functions[next(iter(lower(kernel).functions))].body,
                     lambda node: vector_stores.append(node.buffer.name)
                     if isinstance(node, tir.BufferStore) and "x" in node.value.dtype else None)
    assert {"T_softmax_maxelem_rf", "T_softmax_expsum_rf", "T_softmax_norm"} <= set(vector_stores)
    rng = np.random.default_rng(5)
    for length in (1, 15, 16, 17, 40):
        s = (3 * rng.standard_normal((3, length, length))).astype("float32")
        e = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(run(ex, s), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
