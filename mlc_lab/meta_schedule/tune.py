"""``tune_tir``: search a space of schedules of one PrimFunc, measure the candidates, and keep
every measurement in a database."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile

import numpy as np

from ..ir import structural_hash
from ..ir.module import IRModule
from ..target import Target
from ..tir.function import PrimFunc
from ..tir.schedule import ScheduleError
from ..tir.schedule.trace import Trace, TraceError
from ..tir.verify import VerifyError
from .config import TuneConfig
from .cost_model import LearnedModel, create_cost_model
from .database import DEFAULT_SEARCH, RETIMED, JSONDatabase, TuningRecord
from ..tir.schedule.policy.flops import estimate_flops
from .runner import LocalRunner, Workload
from .progress import TuningProgress
from .search_strategy import RandomSearch, TuneContext, create_strategy
from .space_generator import Candidate, create_space

logger = logging.getLogger("mlc_lab.meta_schedule")

# The learned cost model is saved here, in the database's directory, after every tune_tir call;
# ``cost_model="<work_dir>/cost_model.json"`` starts another tuning from it.
COST_MODEL_FILE = "cost_model.json"
# How many of the best schedules are measured again at the end of tuning.
RETIMED_TOP_K = 3
RETIMED_ROUNDS = 2     # interleaved rounds of those final re-timings
# The search label of the default schedule measured first with ``baseline=True``.


def as_module(mod) -> IRModule:
    """The IRModule tuning works on: a lone PrimFunc becomes the module's "main"."""
    if isinstance(mod, PrimFunc):
        return IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected an IRModule or a PrimFunc, got {type(mod).__name__}")
    return mod


def single_func_name(mod: IRModule) -> str:
    names = [gv.name_hint for gv, f in mod.functions.items() if isinstance(f, PrimFunc)]
    if len(names) != 1:
        raise ValueError(f"tune_tir tunes a module with one PrimFunc; this one has {len(names)} "
                         f"({', '.join(names)}); tune each separately")
    return names[0]


def tune_tir(mod, target, max_trials_global: int | None = None, num_trials_per_iter: int = 64,
             space=None, work_dir: str | None = None, task_name: str = "main",
             seed: int | None = None, strategy="evolutionary", cost_model="gbdt", runner=None,
             database=None, quiet: bool = False, live: bool | None = None,
             config: TuneConfig | None = None, retime: bool = True, baseline: bool = False):
    """Tune the PrimFunc of ``mod`` for ``target`` with up to ``max_trials_global`` measurements,
    ``num_trials_per_iter`` at a time, and return the database holding them.

    The 2022 form ``tune_tir(mod, target, config=ms.TuneConfig(...), work_dir=...)`` (``config``
    also third, positionally, then ``work_dir`` fourth) takes the budget and strategy from the
    config and returns the best schedule, or None when no trial succeeded.

    Parameters: space (None or "auto" for the automatic space, a ScheduleFn or a function of a
    tir.Schedule); work_dir (where the JSON database lives; a temporary directory if None);
    seed (makes the candidates chosen reproducible); strategy ("evolutionary" | "random" | a
    SearchStrategy); cost_model ("gbdt" | "mlp" | "random" | a CostModel | the path of a saved
    one; evolutionary search only; a learned model is saved as ``cost_model.json`` next to the
    database when tuning ends, so a later run on another workload can start from it); runner
    (a LocalRunner: repeats, timeout); database (a JSONDatabase to add to, instead of opening
    work_dir's); quiet (no progress bar, no curve); live (the tuning curve redrawn
    after every batch; by default when running in Jupyter); retime (False: leave out the final
    re-timing, for a caller that tunes the workload again and re-times once at its end);
    baseline (measure the kernel's default schedule, ``relax.transform.DefaultSchedule``'s, as
    the first trial, so tuning starts from it and its best is never the slower; tune_relax does).

    Tuning stops early when the space yields no schedule that was not measured already. It ends
    by measuring the best few schedules again, alone (``retime_best``); ``database.best``
    decides by those times.
    """
    if isinstance(max_trials_global, TuneConfig):   # the 2022 positional order
        config, max_trials_global = max_trials_global, None
        if isinstance(num_trials_per_iter, str):
            work_dir, num_trials_per_iter = num_trials_per_iter, 64
    if config is not None:
        database = tune_tir(mod, target, config.max_trials_global, config.num_trials_per_iter,
                            space, work_dir, task_name, seed, config.search_strategy(),
                            cost_model, runner, database, quiet, live)
        best = database.best(as_module(mod), target)
        return None if best is None else best.as_schedule(as_module(mod))
    if max_trials_global is None:
        raise TypeError("tune_tir needs max_trials_global (the number of candidates to measure), "
                        "e.g. tune_tir(mod, target, max_trials_global=64, num_trials_per_iter=64)")
    mod = as_module(mod)
    func_name = single_func_name(mod)
    target = Target(target)
    space = create_space(space, num_cores=target.attrs.get("num-cores") or 1, target=target)
    strategy = create_strategy(strategy)
    if database is None:
        database = JSONDatabase(work_dir or tempfile.mkdtemp(prefix="mlc_lab_tune_"))
    own_runner = runner is None
    runner = LocalRunner() if own_runner else runner
    model = None if isinstance(strategy, RandomSearch) else create_cost_model(cost_model, seed)
    ctx = TuneContext(mod, func_name, space, target, database, model,
                      np.random.default_rng(seed), _measured(database, mod, target),
                      workload_key(task_name, mod))
    workload = Workload(mod, func_name)
    flops = estimate_flops(mod)
    progress = TuningProgress(max_trials_global, task_name, quiet, live)
    search = _search_label(strategy, model)
    trials = 0
    try:
        runner.prepare(workload)   # the worker computes the expected outputs while search starts

        def measure(batch: list, label: str) -> None:
            nonlocal trials
            results = runner.run(target, [c.sch.mod for c in batch], workload)
            for candidate, result in zip(batch, results):
                record = TuningRecord(candidate.sch.trace.as_json(), str(target), result.run_secs,
                                      result.error, len(Trace.json_kinds(candidate.design)), task_name, flops,
                                      label)
                database.commit_record(mod, record)
                ctx.measured.add(candidate.key)
                if result.error:
                    logger.warning("%s: trial %d failed: %s", task_name, trials + 1,
                                   result.error.splitlines()[0])
                trials += 1
            strategy.notify(ctx, batch, results)
            progress.update(len(batch), database.best(mod, target), database.records(mod, target))

        start = _default_candidate(mod, target) if baseline else None
        if start is not None and start.key not in ctx.measured:
            measure([start], DEFAULT_SEARCH)
        while trials < max_trials_global:
            batch = strategy.generate(ctx, min(num_trials_per_iter, max_trials_global - trials))
            if not batch:
                logger.info("%s: the space has no unmeasured schedule left after %d trials",
                            task_name, trials)
                break
            measure(batch, search)
        if trials and retime:
            retime_best(runner, database, mod, target, task_name)
        if isinstance(model, LearnedModel):
            model.save(os.path.join(os.path.dirname(database.path_tuning_record) or ".",
                                    COST_MODEL_FILE))
    finally:
        progress.close()
        if own_runner:
            runner.close()
    return database


def _measured(database, mod, target) -> set:
    """Structural hashes of the schedules already in the database, so they are not measured
    again when a tuning session continues one."""
    measured = set()
    for record in database.records(mod, target):
        try:
            measured.add(structural_hash(record.as_schedule(mod).mod))
        except (ScheduleError, TraceError, VerifyError) as err:  # a stale trace no longer replays: measure anew
            logger.info("record not replayed: %s", err)
    return measured


def _default_candidate(mod, target) -> Candidate | None:
    """The default schedule of a kernel named "main" (as tune_relax's tasks are) as a
    candidate, or None where the rules do not apply."""
    from ..relax.transform.default_schedule import default_schedule, vector_machine
    from ..relax.transform.default_schedule_rules import Unschedulable
    machine = vector_machine(target)
    if machine is None or "main" not in [gv.name_hint for gv in mod.functions]:
        return None
    try:
        _, sch = default_schedule(mod["main"], *machine)
    except (Unschedulable, ScheduleError) as err:   # no rule fits: no starting point
        logger.info("no default schedule to start from: %s", err)
        return None
    return Candidate(sch, sch.trace.as_json())


def retime_best(runner, database, mod, target, task_name: str = "main") -> None:
    """Measure the ``RETIMED_TOP_K`` fastest distinct schedules of ``mod`` again, one after
    another, and keep those times as the records ``database.best`` decides by. The default
    schedule, when it was measured, is always among them: it is the first trial, measured while
    the worker may still be warming up, and tuning must never end slower than where it began."""
    mod, target = as_module(mod), Target(target)
    workload, flops = Workload(mod, single_func_name(mod)), estimate_flops(mod)
    chosen, seen = [], set()
    top = database.get_top_k(mod, target, 4 * RETIMED_TOP_K)
    default = [r for r in database.records(mod, target, include_errors=False)
               if r.search == DEFAULT_SEARCH and r.run_secs][:1]
    for record in top + default:
        key = json.dumps(record.trace, sort_keys=True)
        if key not in seen and (len(chosen) < RETIMED_TOP_K or any(record is d for d in default)):
            seen.add(key)
            chosen.append(record)
    # RETIMED_ROUNDS rounds, each in another order, so that a moment when the machine is busy
    # slows every schedule in some round rather than all the rounds of one.
    mods = [r.as_schedule(mod).mod for r in chosen]
    times = [[] for _ in chosen]
    errors = [None] * len(chosen)
    for turn in range(RETIMED_ROUNDS):
        order = [(k + turn) % len(chosen) for k in range(len(chosen))]
        for k, result in zip(order, runner.run(target, [mods[k] for k in order], workload)):
            times[k] += list(result.run_secs or [])
            errors[k] = errors[k] or result.error
    for record, run_secs, error in zip(chosen, times, errors):
        database.commit_record(mod, TuningRecord(record.trace, str(target),
                                                 None if error else run_secs, error,
                                                 record.design_len, task_name, flops, RETIMED))


def workload_key(task_name: str, mod) -> str:
    """What a cost model calls a workload: the task name and a digest of the module's script,
    the same in every process (a structural hash is not)."""
    return f"{task_name}:{hashlib.sha1(mod.script().encode()).hexdigest()[:12]}"


def _search_label(strategy, model) -> str:
    name = type(strategy).__name__.replace("Search", "").lower()
    return name if model is None else f"{name}/{model.kind}"
