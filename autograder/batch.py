"""Grading a class: one worker process per submission (``autograder.runner``), run by a local
pool or, with ``dask_address``, as one task per submission on an existing Dask cluster. Workers
receive the notebooks as bytes and return the result as a dict; only the coordinator (this
process) writes files, so a submission can never write another's results.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from . import notebook, report
from . import artifacts, sandbox
from .kernel import private_folder
from .runner import Limits

RESULTS = "results.json"


class SandboxMissing(RuntimeError):
    """Student notebooks cannot be confined here, and ``--no-sandbox`` was not given."""


def refuse_without_sandbox(limits: Limits) -> None:
    if limits.sandbox and sandbox.problem():
        raise SandboxMissing(f"student notebooks cannot be sandboxed on this machine: {sandbox.problem()}. "
                             "Grade on Linux with bubblewrap and user namespaces, or pass --no-sandbox to "
                             "run them unconfined (only for notebooks you trust)")


def read_submission(path: Path, name: str, tasks: list) -> tuple:
    """(the submission's bytes, None), read without following a link; (None, its result: every
    task 0 with the reason) when it is a link, not a plain file, or too large."""
    try:
        return artifacts.open_plain(path), None
    except artifacts.ArtifactError as exc:
        return None, report.failure(name, tasks, f"the submission could not be read: {exc}", 0.0)


def grade_one(source: bytes, submission: bytes, name: str, limits: dict | None = None) -> dict:
    """Grade one submission (notebooks as bytes) in a worker process; the Gradescope-style result,
    also when grading itself fails (every task 0, with the reason). Runs anywhere mlc_lab is
    installed (a Dask worker too): everything it needs is in its arguments."""
    limits_obj = Limits(**(limits or {}))
    source_nb = notebook.read_bytes(source)
    tasks = notebook.tasks(source_nb)
    start = time.monotonic()
    try:
        refuse_without_sandbox(limits_obj)
        return _grade_in_worker(source, submission, name, limits_obj, tasks, notebook.questions(source_nb))
    except Exception as exc:
        return report.failure(name, tasks, f"grading failed: {type(exc).__name__}: {str(exc)[:500]}",
                              time.monotonic() - start)


def _grade_in_worker(source: bytes, submission: bytes, name: str, limits_obj: Limits, tasks: list,
                     questions: list) -> dict:
    work = Path(tempfile.mkdtemp(dir=private_folder("mlc-lab-grading", 0o700)))
    start = time.monotonic()
    try:
        (work / "source.ipynb").write_bytes(source)
        (work / "submission.ipynb").write_bytes(submission)
        progress = work / "progress.jsonl"
        command = [sys.executable, "-m", "autograder.runner", str(work / "source.ipynb"),
                   str(work / "submission.ipynb"), str(progress), "--limits", json.dumps(asdict(limits_obj))]
        budget = limits_obj.notebook_timeout + 120    # the notebook's time, then the tests'
        log_path = work / "worker.log"
        with log_path.open("wb") as log:    # a file, not a pipe: nothing left running can hold it open
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code = proc.wait(timeout=budget)
                crash = "" if code == 0 else \
                    f"the grader's worker stopped (exit {code}) while checking this submission"
            except subprocess.TimeoutExpired:
                crash = f"grading took longer than {budget:g} s and was stopped"
                _kill_group(proc)
                proc.wait()
        worker_log = log_path.read_text(errors="replace")[-20000:]
        records = _read_progress(progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.results(name, tasks, records, crash, time.monotonic() - start, worker_log, questions)


def _kill_group(proc) -> None:
    import signal
    try:
        os.killpg(proc.pid, signal.SIGKILL)   # the worker; its kernel dies with it (PR_SET_PDEATHSIG)
    except (ProcessLookupError, PermissionError):
        pass


def _read_progress(path: Path) -> list:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def submission_name(path: Path) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(path).stem)
    return name or "submission"


def grade_many(source: Path, submissions: list, out: Path, jobs: int = 2, timeout: float | None = None,
               force: bool = False, dask_address: str | None = None, limits: dict | None = None,
               progress_bar: bool = True) -> list:
    """Grade ``submissions`` against ``source`` into ``out``: ``out/<name>/results.json`` and
    ``feedback.html`` per submission, ``out/grades.csv`` for the class. Submissions whose
    results exist are skipped unless ``force``. Returns the results of this run."""
    source, out = Path(source), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source_bytes = source.read_bytes()
    source_nb = notebook.read_bytes(source_bytes)
    tasks, questions = notebook.tasks(source_nb), notebook.questions(source_nb)
    limits = dict(limits or {})
    if timeout is not None:
        limits["notebook_timeout"] = float(timeout)
    if not dask_address:     # a Dask worker checks its own machine
        refuse_without_sandbox(Limits(**limits))
    names, todo = {}, []
    for path in map(Path, submissions):
        name = submission_name(path)
        if name in names:
            raise ValueError(f"two submissions are both named {name!r}: {names[name]} and {path}")
        names[name] = path
        if force or not (out / name / RESULTS).exists():
            todo.append((name, path))
    bar = _bar(len(todo), progress_bar)
    done = []

    def record(result: dict) -> None:
        report.write_submission(out / result["name"], result, tasks)
        done.append(result)
        bar.update(1)

    def run(submit, completed) -> None:
        futures = []
        for name, path in todo:
            data, refused = read_submission(path, name, tasks)
            if refused:
                record(refused)
            else:
                futures.append(submit(name, data))
        for future in completed(futures):
            record(future.result())

    if dask_address:
        from distributed import Client, as_completed as dask_completed
        with Client(dask_address) as client:
            run(lambda name, data: client.submit(grade_one, source_bytes, data, name, limits, key=f"grade-{name}",
                                                 pure=False), dask_completed)
    else:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            run(lambda name, data: pool.submit(grade_one, source_bytes, data, name, limits), as_completed)
    bar.close()
    report.write_grades_csv(out, tasks, sorted(names), questions)
    return done


def _bar(total: int, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="grading", unit="submission", disable=not enabled)
