"""A differential fuzzer for schedules: random programs, random primitive sequences, every backend
checked against numpy.

    python -m mlc_lab.testing.fuzz --trials 500 --seed 0 --jobs 2 --out fuzz-findings

Each trial draws a program (matmul+relu, batched matmul, padded conv2d, pooling, softmax, an
elementwise chain, transpose+broadcast, symbolic-length vector op and matmul, an int32 row sum, a
reduction under T.where, a reshape read at split and shifted indices) with random sizes, then
applies up to 8 random schedule steps: loop primitives, compute_at and inlining, caches, rfactor,
blockize, and the layout and buffer primitives (reindex and its caches, cache_index,
transform_layout with and without padding, transform_block_layout, merge, storage_align,
set_axis_separator, a widening unsafe_set_dtype, add_unit_loop, rolling_buffer,
decompose_padding, pad_einsum, read_at, write_at; see layout_steps.py). A step the schedule refuses with a ScheduleError is fine
and skipped. Then it checks, in order, and reports
the first property broken, by kind:

    crash         a primitive raised something other than a ScheduleError
    verify        the module after an accepted step is not well formed (tir.verify)
    replay        the trace saved as JSON and replayed gives another module
    round-trip    printing and parsing the module gives another module
    build-error   a target refuses to build what the schedule accepted
    oob           an out-of-bounds access at run time (a -bounds-check build or the interpreter)
    uninitialized-read  the interpreter read an element nothing wrote
    run-error     any other error while running
    miscompile    wrong numbers on a target (outputs start as NaN, so unwritten elements show)
    segfault, hang  the worker process died or ran past --timeout

Every failure is shrunk (steps dropped while the same kind of failure remains) and, with --out,
written as a script that replays it. The table at the end counts trials by kind; the exit status is
1 when anything was found.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter

from .runner import KINDS, TARGETS, Finding, Workers, check, generate_steps, trial_program
from .steps import Step

__all__ = ["KINDS", "TARGETS", "Finding", "Step", "check", "generate_steps", "replay", "run",
           "trial_program"]


def run(trials: int, seed: int = 0, jobs: int = 1, timeout: float = 60.0, targets=TARGETS,
        shrink: bool = True, out: str | None = None, log=print) -> dict:
    """Run ``trials`` trials; returns {"counts": Counter by kind (and "ok"), "findings": [...]}."""
    workers = Workers(jobs, timeout)
    counts, failed, findings = Counter(), [], []
    try:
        tasks = [(seed, t, None, tuple(targets)) for t in range(trials)]
        for (s, trial, _, _), steps, finding in workers.map(tasks):
            counts[finding.kind if finding else "ok"] += 1
            if finding is not None:
                failed.append((s, trial, steps, finding))
        for s, trial, steps, finding in sorted(failed, key=lambda f: f[1]):
            if shrink and steps:
                steps = _shrink(workers, s, trial, steps, finding, targets)
            record = {"seed": s, "trial": trial, "kind": finding.kind, "where": finding.where,
                      "message": finding.message, "program": trial_program(s, trial)[0].name,
                      "steps": [dataclasses.asdict(step) for step in steps or []],
                      "code": [step.code() for step in steps or []]}
            findings.append(record)
            log(f"[{finding.kind}] seed {s} trial {trial} ({record['program']}): {finding.where}: "
                f"{finding.message}")
    finally:
        workers.close()
    if out:
        _write(out, findings, counts)
    return {"counts": counts, "findings": findings}


def _shrink(workers, seed, trial, steps, finding, targets) -> list:
    """Drop steps, last first, while the trial still fails with the same kind of finding."""
    steps = list(steps)
    k = len(steps) - 1
    while k >= 0 and len(steps) > 1:
        candidate = steps[:k] + steps[k + 1:]
        (_, _, again), = list(workers.map([(seed, trial, candidate, tuple(targets))]))
        if again is not None and again.kind == finding.kind:
            steps = candidate
        k -= 1
    return steps


def replay(seed: int, trial: int, steps: list, targets=TARGETS) -> Finding | None:
    """Re-run one trial's checks in this process (for reproducer scripts and debugging)."""
    return check(seed, trial, steps, targets)


def _write(out: str, findings: list, counts: Counter) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"counts": dict(counts), "findings": findings}, f, indent=1)
    for n, rec in enumerate(findings):
        program = trial_program(rec["seed"], rec["trial"])[0]
        lines = [f'"""{rec["kind"]} on {rec["where"]}: {rec["message"]}"""',
                 "import numpy as np", "import mlc_lab", "from mlc_lab import tir",
                 "from mlc_lab.script import from_source", "", f"SRC = '''{program.source}'''",
                 "sch = tir.Schedule(from_source(SRC))"] + rec["code"] + [
                 "print(sch.mod.script())", "",
                 "# The fuzzer's own check of this trial (numerics on every target, replay, round trip):",
                 "from mlc_lab.testing.fuzz import Step, replay",
                 f"STEPS = {rec['steps']!r}",
                 f"finding = replay({rec['seed']}, {rec['trial']}, [Step(**s) for s in STEPS])",
                 "print(finding)", "raise SystemExit(1 if finding else 0)"]
        name = f"{n:03d}_{rec['kind']}_{rec['program']}.py"
        with open(os.path.join(out, name), "w") as f:
            f.write("\n".join(lines) + "\n")
