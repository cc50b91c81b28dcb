"""meta_schedule's relax integration: extract_tasks, tune_relax and
relax.transform.MetaScheduleApplyDatabase on a small MLP (64-32-32-32-10 at batch 4), tuned
with a dozen trials. Timings are never asserted; numerics always are."""
import os
from types import SimpleNamespace

import numpy as np
import pytest

import mlc_lab
from mlc_lab import meta_schedule as ms
from mlc_lab import nd, relax
from mlc_lab.frontend import nn
from mlc_lab.ir import structural_equal
from mlc_lab.script import ir as I
from mlc_lab.script import relax as R
from mlc_lab.script import tir as T

TARGET = "llvm --num-cores=1"
MODEL = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 32, seed=1), nn.ReLU(),
                      nn.Linear(32, 32, seed=2), nn.ReLU(), nn.Linear(32, 10, seed=3))
KERNELS = ["fused_matmul_add_relu", "fused_matmul1_add_relu", "fused_matmul2_add1"]


def mlp():
    """The model's module with its weights as parameters of "main", and the weights."""
    return MODEL.to_relax((4, 64), keep_params_in_input=True)


def tune(work_dir, runner, seed=0, **options):
    mod, params = mlp()
    options = {"max_trials_global": 12, "num_trials_per_iter": 4, "strategy": "random",
               **options}
    return ms.relax_integration.tune_relax(mod, params, TARGET, work_dir=str(work_dir), seed=seed,
                                           runner=runner, quiet=True, **options)


def run(mod, x, **build_options):
    vm = relax.VirtualMachine(relax.build(mod, TARGET, **build_options), mlc_lab.cpu())
    return vm["main"](nd.array(x)).numpy()


def fail_last_layer(mod, target):
    """Runs in the measurement worker: every schedule of the 32 -> 10 kernel fails to build."""
    if int(mod["main"].buffer_params[-1].shape[-1].value) == 10:
        raise RuntimeError("the last layer does not build")
    return mlc_lab.build(mod, target)


@I.ir_module
class TwoNamesOneKernel:
    @T.prim_func
    def mm_a(A: T.Buffer((4, 32), "float32"), B: T.Buffer((32, 32), "float32"),
             C: T.Buffer((4, 32), "float32")):
        T.func_attr({"global_symbol": "mm_a", "tir.noalias": True})
        for i, j, k in T.grid(4, 32, 32):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def mm_b(X: T.Buffer((4, 32), "float32"), Y: T.Buffer((32, 32), "float32"),
             Z: T.Buffer((4, 32), "float32")):
        T.func_attr({"global_symbol": "mm_b", "tir.noalias": True})
        for i, j, k in T.grid(4, 32, 32):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Z[vi, vj] = T.float32(0)
                Z[vi, vj] = Z[vi, vj] + X[vi, vk] * Y[vk, vj]

    @R.function
    def main(x: R.Tensor((4, 32), "float32"), w: R.Tensor((32, 32), "float32")):
        cls = TwoNamesOneKernel
        with R.dataflow():
            lv0 = R.call_tir(cls.mm_a, (x, w), out_sinfo=R.Tensor((4, 32), "float32"))
            gv = R.call_tir(cls.mm_b, (lv0, w), out_sinfo=R.Tensor((4, 32), "float32"))
            R.output(gv)
        return gv


@pytest.fixture(scope="module")
def runner():
    shared = ms.LocalRunner(number=1, repeat=1, timeout_sec=60)
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def tuned_db(tmp_path_factory, runner):
    return tune(tmp_path_factory.mktemp("tuned"), runner)


def test_extract_tasks_one_per_distinct_kernel_weighted_by_calls():
    mod, params = mlp()
    tasks = ms.relax_integration.extract_tasks(mod, TARGET, params)
    # the two 32 -> 32 layers run one kernel
    assert [(t.task_name, t.weight) for t in tasks] == list(zip(KERNELS, [1, 2, 1]))
    assert tasks[0].flops == 4 * 32 * 64 * 2 + 2 * 4 * 32
    for task in tasks:
        assert list(task.mod.functions) == [mlc_lab.ir.GlobalVar("main")]
        assert task.mod["main"].attr_dict["global_symbol"] == "main"
    # kernels that differ only in their names are one task
    [task] = ms.relax_integration.extract_tasks(TwoNamesOneKernel, TARGET)
    assert (task.task_name, task.weight) == ("mm_a", 2)


def test_trial_budgets_share_by_weight_times_flops():
    tasks = [SimpleNamespace(weight=1, flops=3000.0), SimpleNamespace(weight=2, flops=1000.0),
             SimpleNamespace(weight=1, flops=0.0)]
    budgets = ms.relax_integration.trial_budgets
    assert budgets(tasks, 12, 4) == [4, 4, 4]                 # the floor takes it all
    assert budgets(tasks, 32, 4) == [16, 12, 4]              # 20 spare, shared 3 : 2 : 0
    assert budgets(tasks, 9, 2) == [4, 3, 2]                  # floor 2, 3 spare: 1.8, 1.2, 0
    assert budgets(tasks, 2, 4) == [1, 1, 1]                  # every task is tried once


def test_tune_relax_records_every_task(tuned_db):
    mod, params = mlp()
    tasks = ms.relax_integration.extract_tasks(mod, TARGET, params)
    for task in tasks:
        records = tuned_db.records(task.mod, TARGET)
        assert len(records) == 4 and all(r.task_name == task.task_name for r in records)
        assert tuned_db.best(task.mod, TARGET) is not None
        # the first trial is the kernel's default schedule, the starting point of the search
        default = relax.transform.DefaultSchedule(TARGET)(mlc_lab.IRModule({"main": task.mod["main"]}))
        assert records[0].search == "default schedule" and records[0].error is None
        replayed = records[0].as_schedule(task.mod).mod["main"]
        assert structural_equal(replayed.body, default["main"].body)
    assert len(tuned_db) == 12


def test_apply_database_schedules_every_kernel_and_builds(tuned_db, tmp_path):
    mod, params = mlp()
    fused = ms.relax_integration.legalize_and_fuse(mod, params)
    tuned = relax.transform.MetaScheduleApplyDatabase(tuned_db, TARGET)(fused)
    for name in KERNELS:
        before, after = fused[name], tuned[name]
        assert not structural_equal(before, after)
        assert after.attr_dict == {**before.attr_dict, "op_pattern": 8, "tir.is_scheduled": True}
        assert after.script().count("for ") > before.script().count("for ")   # loops were split
    assert structural_equal(tuned["main"], fused["main"])
    x = np.random.default_rng(0).random((4, 64), dtype="float32")
    want = MODEL.forward_numpy(x)
    untuned = run(mod, x, params=params, opt_level=1)
    np.testing.assert_allclose(untuned, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(tuned, x), untuned, rtol=1e-4, atol=1e-5)
    # the default pipeline run again by relax.build leaves the tuned kernels as they are
    ex = relax.build(tuned, TARGET, opt_level=1)
    assert all(structural_equal(ex.mod[name], tuned[name]) for name in KERNELS)
    np.testing.assert_allclose(run(tuned, x, opt_level=1), untuned, rtol=1e-4, atol=1e-5)
    # the database reopened from its directory (or named by it) gives the same schedules
    work_dir = os.path.dirname(tuned_db.path_workload)
    reopened = relax.transform.MetaScheduleApplyDatabase(work_dir, "llvm -num-cores=1")(fused)
    assert structural_equal(reopened, tuned)


def test_records_for_another_target_are_not_applied(tuned_db):
    mod, params = mlp()
    fused = ms.relax_integration.legalize_and_fuse(mod, params)
    other = relax.transform.MetaScheduleApplyDatabase(tuned_db, "llvm --num-cores=2")(fused)
    assert structural_equal(other, fused)


def test_task_whose_records_all_failed_is_left_unchanged(tmp_path):
    runner = ms.LocalRunner(number=1, repeat=1, timeout_sec=60, build_func=fail_last_layer)
    try:
        db = tune(tmp_path, runner, max_trials_global=6, num_trials_per_iter=2)
    finally:
        runner.close()
    mod, params = mlp()
    last = ms.relax_integration.extract_tasks(mod, TARGET, params)[-1]
    errors = [r.error for r in db.records(last.mod, TARGET)]
    assert errors and all(e.startswith("build error: RuntimeError: the last layer") for e in errors)
    fused = ms.relax_integration.legalize_and_fuse(mod, params)
    tuned = relax.transform.MetaScheduleApplyDatabase(db, TARGET)(fused)
    assert structural_equal(tuned["fused_matmul2_add1"], fused["fused_matmul2_add1"])
    assert not structural_equal(tuned["fused_matmul_add_relu"], fused["fused_matmul_add_relu"])
    x = np.ones((4, 64), "float32")
    np.testing.assert_allclose(run(tuned, x), MODEL.forward_numpy(x), rtol=1e-4, atol=1e-5)


def test_same_seed_same_traces(tmp_path, runner):
    def traces(where, seed):
        db = tune(tmp_path / where, runner, seed, max_trials_global=9, num_trials_per_iter=2)
        return [(r.task_name, r.trace) for r in db.records()]
    first = traces("a", 3)
    assert len(first) == 9                 # budgets 3, 4, 2 taken in turns of at most 2
    assert [name for name, _ in first[:6]] == [k for k in KERNELS for _ in range(2)]
    assert traces("b", 3) == first
    assert traces("c", 4) != first


def test_bad_arguments(tuned_db):
    with pytest.raises(TypeError, match="needs the target"):
        relax.transform.MetaScheduleApplyDatabase(tuned_db)
    high_level, _ = mlp()
    with pytest.warns(UserWarning, match="no PrimFunc"):
        applied = relax.transform.MetaScheduleApplyDatabase(tuned_db, TARGET)(high_level)
    assert structural_equal(applied, high_level)
    with pytest.raises(TypeError, match="expected a relax IRModule"):
        ms.relax_integration.extract_tasks(MODEL, TARGET)
