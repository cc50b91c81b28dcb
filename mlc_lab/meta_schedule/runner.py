"""Measurement: build and run candidates in a worker process, check their results against the
original program, and time them.

The worker is started once (a fresh interpreter, sharing no state with a notebook kernel) and reused
for every candidate. A candidate that crashes the worker (a segfault), or runs past
``timeout_sec``, costs one trial: the worker is replaced and the result carries the reason.
Nothing a candidate does can stop the tuning session.

Every candidate first runs on the same random inputs as the original module did in the
reference interpreter; one whose outputs differ is an error ("wrong result"), never timed.
The worker computes those expected outputs itself as soon as it is told the workload
(``prepare``): the interpreter evaluates every element separately (a 1024^3 matmul takes it
20-60 s), and this way it does so on another core while search proposes the first batch.
Outputs that took a second or more are also kept on disk (``reference_cache_dir``, see
``measure_cache.ReferenceCache``), so a later session on the same workload reads them instead.
The worker keeps the built programs of the fastest candidates (``measure_cache.BuildCache``):
measuring an equal module again (the final re-timing of the best) skips compiling, never the
result check.

The time is the smallest of ``repeat`` means of ``number`` calls each, within a timing budget:
a candidate whose checked call took half the budget or more is not called again (that call is
its time), nor is one whose checked call took over ``SLOW_FACTOR`` times the best time the
worker measured for its workload (and over 10 ms, where a first call's overheads no longer
matter): it is no contender, and its single time is precise enough for the cost model. A poor
schedule of a big workload costs one trial and one call, not seconds of timing. A repeat has no
more calls than it needs to last ``REPEAT_MIN_SECS``: a kernel of 20 ms is timed call by call.
Each RunResult says where its time went (``phases``), and ``LocalRunner.stats`` sums them.
"""
from __future__ import annotations

import math
import os
import subprocess
import time
import warnings
from collections import OrderedDict
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

from ..ir import structural_hash
from .measure_stats import MeasureStats
from ..tir.buffer import Buffer
from ..tir.schedule import numerics
from ..tir.schedule.policy.flops import TYPICAL_LENGTH


@dataclass
class RunResult:
    """``run_secs``: the mean seconds per call of each repeat (None on error). ``phases``: where
    measuring it went, phase name -> (wall seconds, worker CPU seconds): "build" (lowering and
    compiling), "check" (the first call and comparing its outputs), "timing" (the timed calls)."""
    run_secs: list | None
    error: str | None = None
    phases: dict | None = None


@dataclass(frozen=True)
class Workload:
    """What candidates are checked against: the original module, the function called, and the
    seed of its random inputs. ``key`` names it between the runner and its worker: equal
    modules have one key, so tuning a workload again (tune_relax's turns) reuses the expected
    outputs the worker computed. Structural hashes differ between processes: the worker is sent
    the key, never computes it."""
    mod: object
    func_name: str
    seed: int = 0

    @property
    def key(self) -> tuple:
        return (structural_hash(self.mod), self.func_name, self.seed)


# Expected outputs a worker keeps (the least recently used are dropped).
MAX_REFERENCES = 8
# A checked call this many times slower than the workload's best (and over SLOW_MIN_SECS) is
# the candidate's time: it is not timed again.
SLOW_FACTOR, SLOW_MIN_SECS = 4.0, 0.01
# A timed repeat needs no more calls than it takes to last this long: a call of 20 ms or more is
# timed on its own (perf_counter resolves it a million times over), which spares a slow kernel
# ``number`` calls per repeat.
REPEAT_MIN_SECS = 0.02
# ``LocalRunner(reference_cache_dir=DEFAULT_CACHE)``: measure_cache.default_reference_dir().
DEFAULT_CACHE = "default"


@dataclass
class Reference:
    """Inputs for a workload's function and the outputs the original program gives on them."""
    func_name: str
    args: list
    expected: list
    output_mask: list
    best_secs: float = float("inf")   # the best time measured of the workload (worker side)

    @staticmethod
    def of(mod, func_name: str, seed: int = 0) -> "Reference":
        """A symbolic size is measured at TYPICAL_LENGTH (a kernel over a sequence length is
        tuned for sequences of that length; its schedule runs for any)."""
        func = mod[func_name]
        args = numerics.random_arguments(func, seed=seed, symbolic_size=TYPICAL_LENGTH)
        expected = numerics.run(func, args)
        mask = [isinstance(p, Buffer) for p in func.params]
        return Reference(func_name, args, expected, mask)


def default_build(mod, target):
    from ..driver import build
    return build(mod, target)


class LocalRunner:
    """Measure candidates in a reusable worker process.

    Parameters: number (calls per repeat), repeat (timed repeats; the minimum of their means
    is the candidate's time), min_repeat_ms (grow ``number`` until a repeat takes this long),
    timeout_sec (per candidate, build included), rtol/atol (the result check), build_func
    (``f(mod, target) -> runtime Module``; a module-level function, as the worker imports it),
    reference_cache_dir (where expected outputs that took a second or more to compute are kept
    for later sessions, see ``measure_cache.ReferenceCache``; None: computed every session).
    ``stats`` (a MeasureStats) says where measuring went.
    """

    def __init__(self, number: int = 3, repeat: int = 3, min_repeat_ms: float = 2,
                 timing_budget_sec: float = 2.0, timeout_sec: float = 30,
                 reference_timeout_sec: float = 600, rtol: float = 1e-3, atol: float = 1e-3,
                 build_func=default_build, reference_cache_dir: str | None = DEFAULT_CACHE):
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.timing_budget_sec = timing_budget_sec
        self.timeout_sec = timeout_sec
        self.reference_timeout_sec = reference_timeout_sec
        self.rtol = rtol
        self.atol = atol
        self.build_func = build_func
        if reference_cache_dir == DEFAULT_CACHE:
            from .measure_cache import default_reference_dir
            reference_cache_dir = default_reference_dir()
        self.reference_cache_dir = reference_cache_dir
        self._process = None
        self._conn = None
        self._sent: OrderedDict = OrderedDict()   # workload keys the current worker holds
        self._ready: set = set()                  # ... and has computed the outputs of
        self.stats = MeasureStats()               # where measuring went, over this runner's life

    def prepare(self, workload: Workload) -> None:
        """Have the worker start computing ``workload``'s expected outputs (returns at once)."""
        self._ensure_worker()
        key = workload.key
        if key in self._sent:
            self._sent.move_to_end(key)
            return
        if len(self._sent) >= MAX_REFERENCES:
            old, _ = self._sent.popitem(last=False)
            self._ready.discard(old)
            self._conn.send(("forget", old))
        self._conn.send(("reference", key, workload, self.reference_cache_dir))
        self._sent[key] = True

    def run(self, target, mods: list, workload: Workload) -> list:
        """One RunResult per module, in order."""
        return [self._run_one(str(target), mod, workload) for mod in mods]

    def _await_reference(self, workload: Workload) -> None:
        if workload.key in self._ready:
            return
        wall, cpu = time.perf_counter(), time.process_time()
        ready = self._conn.poll(self.reference_timeout_sec)
        self.stats.add({"reference": (time.perf_counter() - wall, time.process_time() - cpu)})
        if not ready:
            self._stop_worker()
            raise TimeoutError(f"the reference interpreter did not run {workload.func_name} within "
                               f"{self.reference_timeout_sec} s (LocalRunner(reference_timeout_sec=))")
        try:
            error = self._conn.recv()
        except (EOFError, OSError):
            code = self._process.poll() if self._process is not None else None
            self._stop_worker()
            raise RuntimeError(f"the measurement worker crashed (exit code {code}) while running "
                               f"the original {workload.func_name} in the reference interpreter")
        if error is not None:
            raise RuntimeError(f"the original {workload.func_name} cannot be run by the reference "
                               f"interpreter, so candidates cannot be checked: {error}")
        self._ready.add(workload.key)

    def _run_one(self, target: str, mod, workload: Workload) -> RunResult:
        job = (self.build_func, mod, target, self.number, self.repeat, self.min_repeat_ms,
               self.timing_budget_sec, self.rtol, self.atol)
        self.prepare(workload)
        self._await_reference(workload)
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            self._conn.send(("measure", workload.key, job))
            if not self._conn.poll(self.timeout_sec):
                self._stop_worker()
                return RunResult(None, f"timeout: no result within {self.timeout_sec} s")
            result = self._conn.recv()
            self._account(result, time.perf_counter() - wall, time.process_time() - cpu)
            return result
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self._process.poll() if self._process is not None else None
            self._stop_worker()
            return RunResult(None, f"worker crashed (exit code {code}) while building or running "
                                   "the candidate")

    def _account(self, result: RunResult, wall: float, cpu: float) -> None:
        """Add a result's phases to ``stats``; the rest of the round trip is "transfer"."""
        phases = dict(result.phases or {})
        self.stats.add(phases)
        busy = sum(w for w, _ in phases.values())
        self.stats.add({"transfer": (max(0.0, wall - busy), cpu)})

    def _ensure_worker(self) -> None:
        if self._process is not None and self._process.poll() is None:
            return
        self._stop_worker()
        try:
            self._process, self._conn = start_worker()
        except PermissionError:       # a sandbox that forbids new processes (a graded notebook)
            warnings.warn("LocalRunner: new processes are not allowed here, so candidates are "
                          "measured in this process (a candidate that crashes stops the tuning)",
                          RuntimeWarning, stacklevel=3)
            self._process, self._conn = _InProcessWorker(), _InProcessWorker.channel()

    def _stop_worker(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None
        self._sent, self._ready = OrderedDict(), set()

    def close(self) -> None:
        """Stop the worker (a later ``run`` starts a new one)."""
        self._stop_worker()

    def __del__(self):
        try:
            self._stop_worker()
        except Exception:  # interpreter shutdown; the worker exits when its pipe closes
            pass


class _Channel:
    """Both directions of the pipes to a worker, as one connection."""

    def __init__(self, read_fd: int, write_fd: int):
        self.reader = Connection(read_fd, writable=False)
        self.writer = Connection(write_fd, readable=False)

    def send(self, obj) -> None:
        self.writer.send(obj)

    def recv(self):
        return self.reader.recv()

    def poll(self, timeout: float) -> bool:
        return self.reader.poll(timeout)

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


class _InProcessWorker:
    """The worker's part played in this process, for where no process may be started: the same
    messages and answers (``measure_worker.answer``), answered at once."""

    def poll(self):
        return None          # "still running"

    def kill(self) -> None:
        pass

    def wait(self) -> None:
        pass

    @staticmethod
    def channel():
        from .measure_cache import BuildCache
        from .measure_worker import NO_ANSWER, WorkerState, answer
        state, replies = WorkerState(), []

        class Channel:
            def send(self, message) -> None:
                reply = answer(message, state)
                if reply is not NO_ANSWER:
                    replies.append(reply)

            def poll(self, timeout: float) -> bool:
                return bool(replies)

            def recv(self):
                return replies.pop(0)

            def close(self) -> None:
                state.references.clear()
                state.builds = BuildCache()
        return Channel()


def start_worker(startup_timeout: float = 120):
    """A worker process (``python -m mlc_lab.meta_schedule.measure_worker``, which imports nothing of
    the caller's script) and the channel to it, once it is ready. The pipes are its own file
    descriptors, so what a candidate prints cannot corrupt the messages."""
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    process = subprocess.Popen(
        [sys.executable, "-m", "mlc_lab.meta_schedule.measure_worker", str(to_child_r), str(to_parent_w)],
        pass_fds=(to_child_r, to_parent_w), env=env, stdin=subprocess.DEVNULL)
    os.close(to_child_r)
    os.close(to_parent_w)
    channel = _Channel(to_parent_r, to_child_w)
    if not channel.poll(startup_timeout) or channel.recv() != "ready":
        process.kill()
        raise RuntimeError("the measurement worker did not start")
    return process, channel


class _Clock:
    """Wall and CPU seconds of the phases of one measurement."""

    def __init__(self):
        self.phases: dict = {}
        self._name, self._wall, self._cpu = None, 0.0, 0.0

    def start(self, name: str) -> None:
        self.stop()
        self._name, self._wall, self._cpu = name, time.perf_counter(), time.process_time()

    def rename(self, name: str) -> None:
        """The running phase is called ``name``."""
        self._name = name

    def stop(self) -> None:
        if self._name is not None:
            wall, cpu = self.phases.get(self._name, (0.0, 0.0))
            self.phases[self._name] = (wall + time.perf_counter() - self._wall,
                                       cpu + time.process_time() - self._cpu)
            self._name = None

    def result(self, run_secs, error=None) -> RunResult:
        self.stop()
        return RunResult(run_secs, error, self.phases)


def measure(reference: Reference, build_func, mod, target, number: int, repeat: int,
            min_repeat_ms: float, budget_sec: float, rtol: float, atol: float,
            builds: tuple | None = None) -> RunResult:
    """Build, check and time one candidate (in the worker). ``builds``: (a BuildCache, the
    workload's key): an equal module built before is not built again (it is checked again)."""
    from .. import runtime
    clock = _Clock()
    cache, workload = builds if builds is not None else (None, None)
    clock.start("build")
    lib = cache.get(workload, build_func, mod, target) if cache is not None else None
    if lib is not None:
        clock.rename("cached build")
    else:
        try:
            lib = build_func(mod, target)
        except Exception as err:
            return clock.result(None, f"build error: {type(err).__name__}: {_brief(err)}")
    if hasattr(lib, "estimate_seconds") and _simulated(lib):
        clock.start("check")
        found = _estimate_on_simulator(reference, lib, mod, target, rtol, atol)
        return clock.result(found.run_secs, found.error)
    try:
        clock.start("check")
        arrays = [runtime.ndarray.array(a) if isinstance(a, np.ndarray) else a for a in reference.args]
        start = time.perf_counter()
        lib[reference.func_name](*arrays)
        once = time.perf_counter() - start
        wrong = _first_difference(mod[reference.func_name], arrays, reference, rtol, atol)
        if wrong:
            return clock.result(None, f"wrong result: {wrong}")
        no_contender = once > SLOW_MIN_SECS and once > SLOW_FACTOR * reference.best_secs
        if once >= budget_sec / 2 or no_contender:
            reference.best_secs = min(reference.best_secs, once)
            _keep(cache, workload, build_func, mod, target, lib, once)
            return clock.result([once])   # too slow to repeat: the checked call is its time
        clock.start("timing")
        calls = max(1, int(budget_sec / once) - 1)   # time_evaluator warms up with one call
        repeat = max(1, min(repeat, calls))
        number = max(1, min(number, calls // repeat, math.ceil(REPEAT_MIN_SECS / once)))
        min_repeat_ms = min(min_repeat_ms, budget_sec * 1e3 / repeat)
        timer = lib.time_evaluator(reference.func_name, runtime.cpu(), number=number, repeat=repeat,
                                   min_repeat_ms=min_repeat_ms)
        results = list(timer(*arrays).results)
        reference.best_secs = min(reference.best_secs, *results)
        _keep(cache, workload, build_func, mod, target, lib, min(results))
        return clock.result(results)
    except Exception as err:
        return clock.result(None, f"run error: {type(err).__name__}: {_brief(err)}")


def _keep(cache, workload, build_func, mod, target, lib, seconds: float) -> None:
    if cache is not None:
        cache.offer(workload, build_func, mod, target, lib, seconds)


# Blocks of each kernel the simulator runs for a GPU candidate without a GPU: their outputs are
# checked, and the time model scales their counters to the whole grid.
SIM_BLOCKS = 4


def _simulated(lib) -> bool:
    """A GPU build that runs on the simulator here: its backend's code runs on the CPU (target
    cuda-sim), or there is no GPU."""
    from ..runtime.cuda_device import SimulatedGPUNotice, mode
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SimulatedGPUNotice)
        return lib.target_obj.capabilities.device_type == "cpu" or mode() == "sim"


def _estimate_on_simulator(reference: Reference, lib, mod, target, rtol, atol) -> RunResult:
    """Without a GPU a candidate's time is the simulator's estimate for the target GPU, from a
    few of its blocks; the outputs those blocks write are checked (the rest stay NaN)."""
    from ..runtime.cuda_sim import estimate_seconds
    from ..runtime.module import written_buffers
    try:
        func = mod[reference.func_name]
        written = {id(b) for b in written_buffers(func)}
        args = [np.full_like(a, np.nan) if id(p) in written and np.issubdtype(a.dtype, np.floating)
                else (a.copy() if isinstance(a, np.ndarray) else a)
                for p, a in zip(func.params, reference.args)]
        runs = lib.simulate(*args, func_name=reference.func_name, blocks=SIM_BLOCKS)
        wrong = _first_difference(func, args, reference, rtol, atol, unwritten_nan=True)
        if wrong:
            return RunResult(None, f"wrong result: {wrong}")
        return RunResult([sum(estimate_seconds(run, lib.target_obj) for run in runs)])
    except Exception as err:
        return RunResult(None, f"run error: {type(err).__name__}: {_brief(err)}")


def _first_difference(func, arrays, reference: Reference, rtol: float, atol: float,
                      unwritten_nan: bool = False) -> str | None:
    """Where ``arrays`` (NDArrays or numpy arrays) first differ from the expected outputs.
    ``unwritten_nan``: outputs started as NaN and only some elements were computed; NaN ones are
    not compared, nor are outputs without a NaN (integer ones)."""
    for param, got, want, is_buffer in zip(func.params, arrays, reference.expected,
                                           reference.output_mask):
        if not is_buffer:
            continue
        have = got.numpy() if hasattr(got, "numpy") else got
        if unwritten_nan and not np.issubdtype(have.dtype, np.floating):
            continue
        close = np.isclose(have, want, rtol=rtol, atol=atol, equal_nan=True)
        if unwritten_nan:
            close |= np.isnan(have)
        if not close.all():
            where = tuple(int(i) for i in np.argwhere(~close)[0])
            return (f"buffer {param.name}{list(where)} is {have[where]!r} but the original program "
                    f"gives {want[where]!r}")
    return None


def _brief(err: Exception) -> str:
    text = str(err) or "".join(traceback.format_exception_only(type(err), err)).strip()
    return text if len(text) < 2000 else text[:2000] + " ..."
