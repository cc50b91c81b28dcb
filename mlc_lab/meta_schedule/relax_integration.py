"""Tuning whole models: ``extract_tasks`` finds the kernels a relax module will run,
``tune_relax`` tunes them all into one database, and
``relax.transform.MetaScheduleApplyDatabase`` puts the best schedules back.

    target = "llvm --num-cores=1"
    db = ms.relax_integration.tune_relax(mod, params, target, work_dir="./tune_tmp",
                                         max_trials_global=64)
    mod = ms.relax_integration.legalize_and_fuse(mod, params)   # the kernels that were tuned
    mod = relax.transform.MetaScheduleApplyDatabase(db, target)(mod)
    vm = relax.VirtualMachine(relax.build(mod, target), mlc_lab.cpu())

A task is one structurally distinct kernel, tuned as the module
``meta_schedule.apply_database.tuning_workload(kernel)`` makes (the kernel alone, named
"main"; the pass looks kernels up the same way), so kernels that differ only in name are
tuned once and share their records; its weight is how many times the relax functions call it.
"""
from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass

import numpy as np

from ..ir import structural_equal, structural_hash
from ..ir.module import IRModule
from ..ir.transform import Sequential
from ..relax.analysis import References
from ..relax.transform import PASSES, BindParams, FuseTIR
from .apply_database import tuning_workload
from ..target import Target
from .cost_model import create_cost_model
from .database import JSONDatabase
from ..tir.schedule.policy.flops import estimate_flops
from .runner import LocalRunner
from .tune import retime_best, tune_tir

MIN_TRIALS_PER_TASK = 4


@dataclass
class ExtractedTask:
    """One kernel to tune: ``task_name`` (the name of its first call's PrimFunc), ``mod`` (the
    workload: an IRModule with the kernel as "main"), ``weight`` (call sites in the relax
    functions) and the ``target``."""
    task_name: str
    mod: IRModule
    weight: int
    target: Target

    @property
    def flops(self) -> float:
        return estimate_flops(self.mod)


def legalize_and_fuse(mod: IRModule, params: dict | None = None) -> IRModule:
    """``mod`` with the kernels the VirtualMachine will run: ``params`` ({name: array}) bound
    to "main", then the default pipeline (``relax.transform.PASSES``) up to and including
    FuseTIR, without memory planning. Runs under the current PassContext, as relax.build does."""
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected a relax IRModule, got {type(mod).__name__}")
    if params:
        mod = BindParams("main", params)(mod)
    passes = PASSES[:PASSES.index(FuseTIR) + 1]
    return Sequential([make() for make in passes], name="legalize_and_fuse")(mod)


def extract_tasks(mod: IRModule, target, params: dict | None = None) -> list[ExtractedTask]:
    """The tasks of ``mod`` (after ``legalize_and_fuse(mod, params)``) for ``target``: one per
    structurally distinct kernel called, in the order of first call."""
    target = Target(target)
    mod = legalize_and_fuse(mod, params)
    tasks: list[ExtractedTask] = []
    by_hash: dict[int, list[ExtractedTask]] = {}
    for gv in References.of_module(mod).kernels():
        workload = tuning_workload(mod[gv])
        same = by_hash.setdefault(structural_hash(workload), [])
        task = next((t for t in same if structural_equal(t.mod, workload)), None)
        if task is None:
            task = ExtractedTask(gv.name_hint, workload, 0, target)
            same.append(task)
            tasks.append(task)
        task.weight += 1
    return tasks


def trial_budgets(tasks: list, max_trials_global: int, num_trials_per_iter: int) -> list[int]:
    """Trials per task: each gets ``min(MIN_TRIALS_PER_TASK, num_trials_per_iter)`` (fewer
    when the budget cannot give every task that many, but at least one), and the rest of
    ``max_trials_global`` is shared in proportion to weight * flops (the largest remainders
    take the trials left by rounding down)."""
    fair_share = max_trials_global // len(tasks)
    floor = max(1, min(MIN_TRIALS_PER_TASK, num_trials_per_iter, fair_share))
    spare = max(0, max_trials_global - floor * len(tasks))
    shares = np.array([task.weight * max(task.flops, 1.0) for task in tasks])
    exact = spare * shares / shares.sum()
    extra = np.floor(exact).astype(int)
    for k in np.argsort(extra - exact, kind="stable")[:spare - int(extra.sum())]:
        extra[k] += 1
    return [floor + int(n) for n in extra]


def _seeds(seed: int | None, task_index: int):
    """Seeds for one task's cost model and tuning rounds, drawn from (seed, task index), so a
    run is reproducible for a seed; all None without one."""
    if seed is None:
        return itertools.repeat(None)
    rng = np.random.default_rng([seed, task_index])
    return (int(rng.integers(2**31)) for _ in itertools.count())


def tune_relax(mod: IRModule, params: dict | None, target, work_dir: str | None = None,
               max_trials_global: int = 64, num_trials_per_iter: int = 64, space=None,
               seed: int | None = None, strategy="evolutionary", cost_model="gbdt", runner=None,
               database=None, quiet: bool = False) -> JSONDatabase:
    """Tune every task of ``extract_tasks(mod, target, params)`` into one database and return it.

    ``max_trials_global`` is shared by ``trial_budgets``; the tasks take turns (round robin), at
    most ``num_trials_per_iter`` trials a turn, each turn a ``tune_tir`` call on the task, so
    every kernel has a schedule early and a stopped run leaves all of them tuned a little. One
    cost model learns from every task's measurements (it normalises them per task); a task
    whose space runs out of unmeasured schedules stops there. Each task's first trial is its
    default schedule (``relax.transform.DefaultSchedule``'s), the starting point the search
    improves on. At the end each task's best few
    schedules are measured again (``tune.retime_best``), which decides its best record. Other parameters are tune_tir's (``runner``: one LocalRunner for all
    tasks, made and closed here when None; ``database``: one to add to instead of work_dir's);
    each task's seeds are drawn from ``seed`` and its index, so a seed makes the whole run as
    reproducible as it makes one tune_tir call."""
    target = Target(target)
    tasks = extract_tasks(mod, target, params)
    if database is None:
        database = JSONDatabase(work_dir or tempfile.mkdtemp(prefix="mlc_lab_tune_"))
    if not tasks:
        return database
    left = trial_budgets(tasks, max_trials_global, num_trials_per_iter)
    seeds = [_seeds(seed, k) for k in range(len(tasks))]
    model = create_cost_model(cost_model, seed)
    own_runner = runner is None
    runner = LocalRunner() if own_runner else runner
    progress = _progress(sum(left), quiet)
    try:
        while any(left):
            for k, task in enumerate(tasks):
                if not left[k]:
                    continue
                turn = min(num_trials_per_iter, left[k])
                before = len(database.records(task.mod, target))
                tune_tir(task.mod, target, turn, turn, space, task_name=task.task_name,
                         seed=next(seeds[k]), strategy=strategy, cost_model=model,
                         runner=runner, database=database, quiet=True, retime=False,
                         baseline=True)
                done = len(database.records(task.mod, target)) - before
                left[k] -= done
                if done < turn:   # the space has no unmeasured schedule left
                    progress.total -= left[k]
                    left[k] = 0
                _report(progress, database, task, target, done)
        for task in tasks:
            if database.records(task.mod, target):
                retime_best(runner, database, task.mod, target, task.task_name)
    finally:
        progress.close()
        if own_runner:
            runner.close()
    return database


def _progress(total: int, quiet: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="tune_relax", unit="trial", disable=quiet)


def _report(progress, database, task: ExtractedTask, target, n: int) -> None:
    best = database.best(task.mod, target)
    if best is not None:
        progress.set_postfix_str(f"{task.task_name}: best {best.gflops:.2f} GFLOPS "
                                 f"({best.seconds * 1e3:.3f} ms)")
    progress.update(n)


__all__ = ["ExtractedTask", "MIN_TRIALS_PER_TASK", "extract_tasks", "legalize_and_fuse",
           "trial_budgets", "tune_relax"]
