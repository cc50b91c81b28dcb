"""Running trials: apply a program's steps, check every property, and report the first failure.

Trials run in worker processes, so a segfault or a hang is a finding about that trial, not the
end of the run. Each trial is determined by (seed, trial number): the program and its sizes, the
steps and the inputs all come from one random generator seeded with both."""
from __future__ import annotations

import multiprocessing
import traceback
import warnings
from dataclasses import dataclass

import numpy as np

from ... import tir
from ...driver import build
from ...ir import structural_equal
from ...runtime.llvm_runtime import VectorizeWarning
from ...script import from_source
from ...target import Target
from ...tir.schedule import ScheduleError, Trace
from ...tir.transform.split_host_device import GPUError
from ...tir.verify import VerifyError, verify
from .programs import GENERATORS
from .steps import Step, random_step

TARGETS = ("python", "llvm", "llvm -num-cores=2", "llvm -bounds-check", "cuda-sim")
KINDS = ("crash", "verify", "replay", "round-trip", "build-error", "oob", "uninitialized-read",
         "run-error", "miscompile", "segfault", "hang")


@dataclass
class Finding:
    kind: str
    where: str       # the step or the target
    message: str


def trial_program(seed: int, trial: int):
    rng = np.random.default_rng([seed, trial])
    generator = GENERATORS[int(rng.integers(len(GENERATORS)))]
    return generator(rng), rng


def generate_steps(program, rng, max_steps: int = 8) -> list:
    """Random steps, applied as they are drawn; the ones the schedule accepted are kept."""
    sch = tir.Schedule(program.module())
    kept = []
    for _ in range(int(rng.integers(1, max_steps + 1)) * 2):
        step = random_step(sch, rng)
        if step is None or not applicable(step, sch):
            continue
        try:
            step.apply(sch)
        except ScheduleError:
            continue
        except Exception:   # a crash: keep the step so that check() reports it
            kept.append(step)
            break
        kept.append(step)
        if len(kept) >= max_steps:
            break
    return kept


def applicable(step: Step, sch) -> bool:
    """Whether the step's blocks exist and have the loops it names (after the shrinker dropped
    steps before it, they may not)."""
    try:
        for name in (step.block, step.other):
            if name is not None:
                sch.get_block(name)
        owners = {"compute_at": (step.other,), "reverse_compute_at": (step.other,),
                  "merge": (step.block, step.other)}.get(step.op, (step.block,))
        return not step.loops or all(len(sch.get_loops(sch.get_block(owner))) > max(step.loops)
                                     for owner in owners)
    except ScheduleError:
        return False


def check(seed: int, trial: int, steps: list, targets=TARGETS) -> Finding | None:
    """The first property the trial breaks, or None."""
    program, rng = trial_program(seed, trial)
    original = program.module()
    sch = tir.Schedule(original)
    for k, step in enumerate(steps):
        if not applicable(step, sch):
            continue
        try:
            step.apply(sch)
        except ScheduleError:
            continue
        except Exception as exc:
            return Finding("crash", f"step {k}: {step.code()}", _short(exc))
        try:
            verify(sch.mod)
        except VerifyError as exc:
            return Finding("verify", f"step {k}: {step.code()}", _short(exc))
    try:
        replayed = tir.Schedule(original)
        Trace.from_json(sch.trace.as_json()).apply_to_schedule(replayed)
        if not structural_equal(replayed.mod, sch.mod):
            return Finding("replay", "trace JSON", "the replayed trace gives a different module")
    except Exception as exc:
        return Finding("replay", "trace JSON", _short(exc))
    try:
        if not structural_equal(from_source(sch.mod.script()), sch.mod):
            return Finding("round-trip", "print/parse", "the parsed module differs")
    except Exception as exc:
        return Finding("round-trip", "print/parse", _short(exc))
    inputs = program.inputs(np.random.default_rng([seed, trial, 1]))
    want = program.reference(*[a.copy() for a in inputs])
    for target in targets:
        mod = gpu_bound(sch.mod) if Target(target).capabilities.gpu else sch.mod
        if mod is None:
            continue    # no loop nest here that one block per outer iteration could run
        try:
            lib = build(mod, target=target)
        except GPUError:
            continue    # e.g. a global intermediate computed inside the bound loop: not launchable
        except Exception as exc:
            return Finding("build-error", target, _short(exc))
        args = [a.copy() for a in inputs]
        try:
            lib["main"](*args)
        except IndexError as exc:
            return Finding("oob", target, _short(exc))
        except Exception as exc:
            kind = "uninitialized-read" if "never written" in str(exc) or "Uninitialized" in type(exc).__name__ else "run-error"
            return Finding(kind, target, _short(exc))
        for position, expected in want.items():
            if not np.allclose(args[position], expected, rtol=program.rtol, atol=program.rtol, equal_nan=False):
                wrong = int((~np.isclose(args[position], expected, rtol=program.rtol, atol=program.rtol)).sum())
                return Finding("miscompile", target, f"{wrong} of {expected.size} elements differ")
    return None


def gpu_bound(mod):
    """``mod`` with the outermost loop of every root loop nest split over 32 threads and bound to
    blocks and threads (one kernel per nest), or None where an outermost loop carries a
    reduction or a block has no loop."""
    from ...tir.schedule.policy.postproc import feeds_only_spatial, block_names
    sch = tir.Schedule(mod)
    names = block_names(sch, "main")
    for name in names:
        loops = sch.get_loops(sch.get_block(name))
        if loops and sch.get(loops[0]).kind == "thread_binding":
            continue    # a nest bound already, for a block before this one
        if not loops or not feeds_only_spatial(sch.get(loops[0])):
            return None
        extent = sch.get(loops[0]).extent
        threads = min(32, int(extent.value)) if hasattr(extent, "value") else 32
        try:
            bx, tx = sch.split(loops[0], [None, threads])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
        except ScheduleError:
            return None     # bind refuses (e.g. a reduction's init decomposed out of the nest)
    return sch.mod if names else None


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".splitlines()
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename.split('mlc_lab/')[-1]}:{frames[-1].lineno})" if frames else ""
    return text[0][:300] + where


# -- worker processes ------------------------------------------------------------------------------
def _worker(conn) -> None:
    # A loop LLVM leaves scalar computes the same values: not a finding, and not worth a line.
    warnings.simplefilter("ignore", VectorizeWarning)
    while True:
        task = conn.recv()
        if task is None:
            return
        seed, trial, steps, targets = task
        if steps is None:
            program, rng = trial_program(seed, trial)
            steps = generate_steps(program, rng)
        conn.send((steps, check(seed, trial, steps, targets)))


class Workers:
    """A pool of worker processes, each running one task at a time with a time limit; a worker
    that dies or overruns is replaced and its task reported as a segfault or a hang."""

    def __init__(self, jobs: int, timeout: float):
        self.context = multiprocessing.get_context("spawn")
        self.timeout = timeout
        self.retried = set()   # (seed, trial) of the tasks that overran once
        self.slots = [self._start() for _ in range(max(1, jobs))]

    def _start(self):
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_worker, args=(child,), daemon=True)
        process.start()
        return [process, parent, None]

    def map(self, tasks):
        """Yield (task, steps, finding) for every task, in the order they finish."""
        pending = list(tasks)
        while pending or any(slot[2] is not None for slot in self.slots):
            for slot in self.slots:
                if slot[2] is None and pending:
                    slot[2] = (pending.pop(0), _clock())
                    slot[1].send(slot[2][0])
            for k, slot in enumerate(self.slots):
                if slot[2] is None:
                    continue
                task, started = slot[2]
                if slot[1].poll(0.02):
                    try:
                        steps, finding = slot[1].recv()
                    except EOFError:
                        steps, finding = _steps_of(task), self._died(k)
                    self.slots[k][2] = None
                    yield task, steps, finding
                elif not slot[0].is_alive():
                    yield task, _steps_of(task), self._died(k)
                elif _clock() - started > self.timeout:
                    slot[0].kill()
                    slot[0].join()
                    self.slots[k] = self._start()
                    if task[:2] not in self.retried:   # a busy machine can stall a trial once
                        self.retried.add(task[:2])
                        pending.append(task)
                        continue
                    yield task, _steps_of(task), Finding("hang", "trial",
                                                         f"no result after {self.timeout:.0f} s, twice")

    def _died(self, k) -> Finding:
        code = self.slots[k][0].exitcode
        self.slots[k][0].join()
        self.slots[k] = self._start()
        return Finding("segfault", "trial", f"the worker died (exit code {code})")

    def close(self) -> None:
        for process, conn, _ in self.slots:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            process.join(timeout=5)
            if process.is_alive():
                process.kill()


def _steps_of(task) -> list:
    """The steps of a task; generated here when the worker that generated them is gone."""
    seed, trial, steps, _ = task
    if steps is None:
        program, rng = trial_program(seed, trial)
        steps = generate_steps(program, rng)
    return steps


def _clock() -> float:
    import time
    return time.monotonic()
