"""The tuning database: workloads (the modules tuned) and tuning records (a trace, its measured
times, the target, or the error that stopped it), kept as JSON lines in ``work_dir``.

A tuning session ends by measuring its few best schedules again, one after the other with
nothing else running; those measurements are kept as records whose ``search`` is ``RETIMED``.
They are not trials (``records()`` leaves them out unless asked), but they decide ``best()``:
a schedule that was lucky once does not win over one that is faster.

Workloads are matched structurally (``structural_equal``, so renaming a variable does not make
another workload); the file stores each module as script text. Records are per target: a
record measured for one target is never returned for another. Reopening the directory gives
the same records and the same best.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

from ..ir import structural_equal, structural_hash
from ..target import Target
from ..tir.schedule import Schedule
from ..tir.schedule.trace import Trace


@dataclass
class TuningRecord:
    """One measured candidate. ``trace``: the schedule as ``Trace.as_json``; ``design_len``: how
    many of its instructions the space sampled (the rest are postprocessing); ``run_secs``: the
    mean seconds per call of each repeat, None when ``error`` says why it has none; ``search``:
    the search that proposed it ("evolutionary/gbdt", "random", ...)."""
    trace: list
    target: str
    run_secs: list | None = None
    error: str | None = None
    design_len: int | None = None
    task_name: str = "main"
    flops: float = 0.0
    search: str = ""
    workload: int = field(default=-1, repr=False)

    @property
    def seconds(self) -> float:
        """The best repeat's mean seconds per call; inf for a failed candidate."""
        return min(self.run_secs) if self.run_secs else math.inf

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9 if self.run_secs and self.flops else 0.0

    @property
    def design(self) -> list:
        return Trace.json_prefix(self.trace, self.design_len) if self.design_len is not None \
            else self.trace

    def as_schedule(self, mod) -> Schedule:
        """A schedule of ``mod`` with this record's trace replayed."""
        return Trace.from_json(self.trace).apply_to_schedule(Schedule(mod))

    def to_json(self) -> dict:
        return {"workload": self.workload, "task_name": self.task_name, "target": self.target,
                "trace": self.trace, "design_len": self.design_len, "run_secs": self.run_secs,
                "error": self.error, "flops": self.flops, "search": self.search}

    @staticmethod
    def from_json(data: dict) -> "TuningRecord":
        return TuningRecord(data["trace"], data["target"], data.get("run_secs"), data.get("error"),
                            data.get("design_len"), data.get("task_name", "main"),
                            data.get("flops", 0.0), data.get("search", ""), data["workload"])


RETIMED = "re-timed"
DEFAULT_SEARCH = "default schedule"   # the trial that measures the default schedule (baseline)
MARGIN = 0.05   # what a tuned schedule must gain over the default to replace it


def target_key(target) -> str:
    """The canonical text of a target, so that "llvm --num-cores=1" and "llvm -num-cores=1" match."""
    return str(Target(target))


class JSONDatabase:
    """Workloads and records in ``work_dir/database_workload.json`` and
    ``work_dir/database_tuning_record.json`` (one JSON object a line; appended as tuning goes)."""

    def __init__(self, work_dir: str | None = None, path_workload: str | None = None,
                 path_tuning_record: str | None = None):
        if work_dir is None and (path_workload is None or path_tuning_record is None):
            raise ValueError("JSONDatabase needs work_dir, or both path_workload and "
                             "path_tuning_record")
        if work_dir is not None:
            os.makedirs(work_dir, exist_ok=True)
        self.path_workload = path_workload or os.path.join(work_dir, "database_workload.json")
        self.path_tuning_record = path_tuning_record or os.path.join(
            work_dir, "database_tuning_record.json")
        self._workloads: list = []   # IRModules, in file order
        self._hashes: list = []      # their structural hashes (this process only)
        self._records: list = []
        self._load()

    def _load(self) -> None:
        from ..script import from_source
        for data in _read_lines(self.path_workload):
            mod = from_source(data["mod"])
            self._workloads.append(mod)
            self._hashes.append(structural_hash(mod))
        self._records = [TuningRecord.from_json(d) for d in _read_lines(self.path_tuning_record)]

    # -- workloads --------------------------------------------------------------------------
    def workload_index(self, mod) -> int | None:
        """The index of the workload structurally equal to ``mod``, or None."""
        key = structural_hash(mod)
        for index, (h, known) in enumerate(zip(self._hashes, self._workloads)):
            if h == key and structural_equal(known, mod):
                return index
        return None

    def has_workload(self, mod) -> bool:
        return self.workload_index(mod) is not None

    def commit_workload(self, mod) -> int:
        index = self.workload_index(mod)
        if index is not None:
            return index
        self._workloads.append(mod)
        self._hashes.append(structural_hash(mod))
        _append_line(self.path_workload, {"mod": mod.script()})
        return len(self._workloads) - 1

    # -- records ----------------------------------------------------------------------------
    def commit_record(self, mod, record: TuningRecord) -> None:
        record.workload = self.commit_workload(mod)
        record.target = target_key(record.target)
        self._records.append(record)
        _append_line(self.path_tuning_record, record.to_json())

    def records(self, mod=None, target=None, include_errors: bool = True,
                include_retimed: bool = False) -> list:
        """The trials in the order they were measured, of ``mod``'s workload and ``target`` when
        given (with the final re-timings when ``include_retimed``)."""
        index = None if mod is None else self.workload_index(mod)
        if mod is not None and index is None:
            return []
        target = None if target is None else target_key(target)
        return [r for r in self._records
                if (index is None or r.workload == index) and (target is None or r.target == target)
                and (include_errors or r.error is None) and (include_retimed or r.search != RETIMED)]

    def get_top_k(self, mod, target, top_k: int) -> list:
        """The ``top_k`` fastest error-free trials of ``mod`` on ``target``, fastest first."""
        good = [r for r in self.records(mod, target) if r.error is None and r.run_secs]
        return sorted(good, key=lambda r: r.seconds)[:top_k]

    def best(self, mod, target) -> TuningRecord | None:
        """The fastest error-free record of ``mod`` on ``target`` by the final re-timings when
        there are any, else by the trials; None when there is none. The default schedule, when
        it was measured, stays the best unless another is faster by more than MARGIN: timings
        on a shared machine differ by a few percent from one run to the next, and a model
        should not trade the schedule it starts from for a measurement's noise."""
        records = self.records(mod, target, include_errors=False, include_retimed=True)
        retimed = [r for r in records if r.search == RETIMED and r.run_secs]
        if retimed:
            fastest = min(retimed, key=lambda r: r.seconds)
            defaults = {json.dumps(r.trace, sort_keys=True) for r in records if r.search == DEFAULT_SEARCH}
            default = [r for r in retimed if json.dumps(r.trace, sort_keys=True) in defaults]
            if default and fastest.seconds > default[0].seconds * (1 - MARGIN):
                return default[0]
            return fastest
        top = self.get_top_k(mod, target, 1)
        return top[0] if top else None

    def __len__(self) -> int:
        """The number of trials (final re-timings are not trials)."""
        return sum(r.search != RETIMED for r in self._records)

    def plot(self, mod=None, target=None, ax=None, title: str | None = None,
             label: str | None = None):
        """The tuning curve: each trial's GFLOPS (failed trials at 0) and the best so far against
        the trial number, one curve per search that proposed the records (so a cost-model
        search and a random search of the same workload compare on one plot), named ``label``
        when given. Plotting another database on the same ``ax`` adds its curves in the next
        colours. Returns the matplotlib Axes."""
        from .progress import curves, draw_curves
        if ax is None:
            import matplotlib.pyplot as plt
            _, ax = plt.subplots(figsize=(6, 3.5))
        return draw_curves(ax, curves(self.records(mod, target), label), title)


def _read_lines(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _append_line(path: str, data: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(data) + "\n")
