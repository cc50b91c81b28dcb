"""Where a student's IR is built and run: never in a process that holds an expected value.

``checks`` asks ``current()`` to run a program: in a student's own notebook (and under nbgrader)
that is ``LOCAL``, this process; while ``mlc-lab grade`` grades, it is a ``Remote`` executor, a
process of its own in a sandbox of its own (``python -m autograder.executor`` under
``autograder.sandbox``) that holds nothing but the program and its inputs. The grader sends the
IR (as script text) and the inputs, the executor sends the outputs back, and the grader compares
them with the expected values it computed itself. So a kernel that reads out of bounds finds
only its own inputs, and one that writes out of bounds crashes the executor, not the grader
(which starts a fresh one for the next request).

Correctness runs (prim_funcs and relax modules) are built with ``-bounds-check``: an access out of bounds stops the program with
an error naming the buffer and the index. Timed runs are built without it, after one checked run
of the same program.

    run(func, args, target)              args (inputs, then zeroed outputs) after one call
    speed(func, baseline, args, target)  per-round time ratios, baseline / func, interleaved
    model(mod, inputs, target)           a relax module's ``main`` through relax.build and the VM
    simulate(func, args)                 args after a cuda-sim run, and each kernel's counters
                                         and shared memory per block (``shared_bytes``)
"""
from __future__ import annotations

import contextvars
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

from . import artifacts
from .checks import _first_line

REQUEST_SECONDS = 300      # the longest one request may take (a build, some timed rounds)


class RunError(Exception):
    """The program did not build or run; the message is for the student."""


# -- the operations (run wherever the executor is) -----------------------------------------------
def _build(func, target: str):
    import mlc_lab
    try:
        return mlc_lab.build(func, target=target)
    except Exception as exc:
        raise RunError(f"does not build for {target}: {_first_line(exc)}") from None


def _call(lib, args) -> None:
    try:
        lib(*args)
    except Exception as exc:
        raise RunError(f"failed while running: {type(exc).__name__}: {_first_line(exc)}") from None


def checked(target: str) -> str:
    return target if "-bounds-check" in target else f"{target} -bounds-check"


def op_run(func, args: tuple, target: str) -> tuple:
    args = tuple(a.copy() for a in args)
    _call(_build(func, checked(target)), args)
    return args


def op_speed(func, baseline, args: tuple, target: str, rounds: int, min_seconds: float) -> list:
    _call(_build(func, checked(target)), tuple(a.copy() for a in args))    # in bounds first
    fast, slow = _build(func, target), _build(baseline, target)
    ratios = []
    for r in range(rounds):
        pair = (slow, fast) if r % 2 == 0 else (fast, slow)
        seconds = {id(lib): _seconds(lib, args, min_seconds) for lib in pair}
        ratios.append(seconds[id(slow)] / seconds[id(fast)])
    return ratios


def _seconds(lib, args, min_seconds: float) -> float:
    _call(lib, args)
    calls, start = 0, time.perf_counter()
    while True:
        lib(*args)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def op_model(mod, inputs: tuple, target: str):
    import mlc_lab
    from mlc_lab import relax
    try:
        vm = relax.VirtualMachine(relax.build(mod, target=checked(target)), mlc_lab.cpu())
        got = vm["main"](*[mlc_lab.nd.array(x) for x in inputs])
    except Exception as exc:
        raise RunError(f"failed to build or run: {type(exc).__name__}: {_first_line(exc)}") from None
    return got.numpy() if hasattr(got, "numpy") else got


def op_simulate(func, args: tuple) -> tuple:
    args = tuple(a.copy() for a in args)
    lib = _build(func, "cuda-sim")
    try:
        runs = lib.simulate(*args)
    except Exception as exc:
        raise RunError(f"was stopped by the simulator: {type(exc).__name__}: {_first_line(exc)}") from None
    return args, runs


OPS = {"run": op_run, "speed": op_speed, "model": op_model, "simulate": op_simulate}


# -- where they run ------------------------------------------------------------------------------
class Local:
    """This process: the student's own notebook, or nbgrader's kernel."""

    def __call__(self, op: str, *values, **params):
        return OPS[op](*values, **params)


class Remote:
    """A sandboxed executor process, started on first use and again after it dies."""

    def __init__(self, policy: dict, log=None, setup: list | None = None):
        self.policy, self.log, self.proc = policy, log, None
        self.setup = setup or []     # the homework's setup cells: what they register, programs may call

    def __call__(self, op: str, *values, **params):
        reply = self._request(op, values, params)
        if op == "simulate":
            outputs, runs = reply
            return outputs, [SimpleNamespace(name=r["name"], counters=_counters(r["counters"]),
                                             shared_bytes=int(r["shared_bytes"])) for r in runs]
        return reply

    def _start(self) -> None:
        command = [sys.executable, "-m", "autograder.sandbox", json.dumps(self.policy), "--",
                   sys.executable, "-m", "autograder.executor"]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log or subprocess.DEVNULL, cwd=self.policy["workdir"])
        if self.setup:
            self._request("setup", (), {"cells": self.setup}, start=False)

    def _request(self, op: str, values: tuple, params: dict, start: bool = True):
        if start and (self.proc is None or self.proc.poll() is not None):
            self._start()
        try:
            send(self.proc.stdin, {"op": op, "params": params}, values)
            header, value = receive(self.proc.stdout, timeout=REQUEST_SECONDS)
        except (OSError, EOFError, TimeoutError, ValueError, artifacts.ArtifactError) as exc:
            why = self._stop()
            if isinstance(exc, TimeoutError):
                raise RunError(f"ran longer than {REQUEST_SECONDS} s and was stopped") from None
            raise RunError(f"crashed{why} (an access out of memory bounds, or out of memory?)") from None
        if "error" in header:
            raise RunError(str(header["error"])[:2000])
        return value

    def _stop(self) -> str:
        if self.proc is None:
            return ""
        self.proc.kill()
        code = self.proc.wait()
        self.proc = None
        return f" (signal {-code})" if code < 0 else (f" (exit {code})" if code else "")

    def close(self) -> None:
        self._stop()


def _counters(data: dict):
    from mlc_lab.runtime.cuda_sim.counters import BufferCounters, KernelCounters
    buffers = {name: BufferCounters(**fields) for name, fields in data.pop("buffers").items()}
    return KernelCounters(buffers=buffers, **data)


LOCAL = Local()
_CURRENT: contextvars.ContextVar = contextvars.ContextVar("autograder_executor", default=LOCAL)


def current():
    return _CURRENT.get()


def use(executor):
    """Run programs on ``executor`` (in this context); returns the token for ``_CURRENT.reset``."""
    return _CURRENT.set(executor)


# -- the wire: a JSON header and an artifact's files, each a length and bytes --------------------
def send(stream, header: dict, value) -> None:
    with tempfile.TemporaryDirectory() as folder:
        artifacts.write(value, Path(folder), "value")
        files = {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}
    header = {**header, "files": {name: len(data) for name, data in files.items()}}
    blob = json.dumps(header).encode()
    stream.write(struct.pack("<Q", len(blob)) + blob + b"".join(files.values()))
    stream.flush()


def receive(stream, timeout: float | None = None):
    """(header, value) of the next message; EOFError when the other side is gone."""
    size = struct.unpack("<Q", _exactly(stream, 8, timeout))[0]
    if size > 1 << 20:
        raise ValueError("message header too large")
    header = artifacts.load_json(_exactly(stream, size, timeout))
    files = header.get("files") if isinstance(header, dict) else None
    if not isinstance(files, dict) or len(files) > 4 * artifacts.MAX_ITEMS:
        raise ValueError("malformed message")
    with tempfile.TemporaryDirectory() as folder:
        for name, length in files.items():
            if not isinstance(length, int) or not 0 <= length <= artifacts.MAX_BYTES:
                raise ValueError("malformed message")
            artifacts.safe_path(Path(folder), name).write_bytes(_exactly(stream, length, timeout))
        value = artifacts.read(Path(folder), "value") if "value.json" in files else None
    return header, value


def _exactly(stream, n: int, timeout: float | None) -> bytes:
    import select
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks, fd = [], stream.fileno()
    while n:
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def run_setup(cells: list) -> dict:
    """The namespace of the homework's setup cells (the instructor's code, which students see
    too: imports, constants, reference functions, functions registered for programs to call),
    run here as in the grader."""
    from .scoring import compile_cell
    namespace: dict = {"__name__": "__autograder__"}
    for index, code in enumerate(cells):
        exec(compile_cell(code, f"<setup cell {index}>"), namespace)
    return namespace


def serve() -> None:
    """The executor's loop: requests on stdin, replies on stdout (what the programs print goes to
    stderr, so it cannot forge a reply)."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    while True:
        try:
            header, values = receive(requests)
        except EOFError:
            return
        try:
            if header["op"] == "setup":
                run_setup(header["params"]["cells"])
                send(replies, {"ok": True}, None)
                continue
            result = OPS[header["op"]](*values, **header.get("params", {}))
            if header["op"] == "simulate":
                outputs, runs = result
                result = (outputs, [{"name": getattr(r.kernel, "name", "kernel"), "shared_bytes": r.shared_bytes,
                                     "counters": {**asdict(r.counters)}} for r in runs])
            send(replies, {"ok": True}, result)
        except RunError as exc:
            send(replies, {"error": str(exc)}, None)
        except Exception as exc:
            send(replies, {"error": f"{type(exc).__name__}: {_first_line(exc)}"}, None)


if __name__ == "__main__":
    serve()
