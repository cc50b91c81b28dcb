"""Grading one submission, in a worker process of its own (``python -m autograder.runner``):
run the student's notebook in a sandboxed kernel (``autograder.sandbox``), and at each graded
test cell run the source's test, in this process, against that kernel.

The student's code runs only in the kernel. This process holds the hidden tests, asks the kernel
for values through files it reads as data (``autograder.submission``), and compiles and runs the
student's IR itself; a worker of its own per submission means a crash or hang there costs this
submission only. Results are appended to ``progress.jsonl`` as each task is graded, so whatever
was graded before a crash or a timeout counts.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import notebook
from .checks import GradingFailure, PartialCredit
from .submission import Submission, grading, reset


@dataclass
class Limits:
    """What a submission may use. The kernel gets the first five (``autograder.sandbox``)."""
    cpu_seconds: int = 600
    memory_bytes: int = 6 << 30
    max_processes: int = 64
    max_file_bytes: int = 64 << 20
    isolate_network: bool = True
    cell_timeout: float = 120.0          # wall-clock seconds per cell
    notebook_timeout: float = 900.0      # wall-clock seconds for the whole notebook
    max_output_bytes: int = 1 << 20      # outputs kept from the student's cells
    same_user: bool = False              # run the kernel as the grader's user even as root


@dataclass
class TaskResult:
    grade_id: str
    name: str
    score: float
    max_score: float
    output: str
    student_ir: list = field(default_factory=list)


class KernelGone(Exception):
    """The student's kernel died or stopped answering."""


NOBODY = 65534    # owns what the kernel may read but not change: the sandbox and its requests folder


class RemoteSubmission(Submission):
    """The student's values, asked of their kernel: a request folder in the sandbox, a line of
    code the kernel runs to answer it (``submission.serve``), the answer read back as data.

    Request folders sit in a folder the kernel cannot change (owned by NOBODY), and each is
    NOBODY's while the grader writes the request, then handed to the kernel's user (``owner``)
    for the answer: student code cannot swap a folder or a request file for a symlink."""

    def __init__(self, client, requests: Path, owner):
        self.client, self.requests, self.owner = client, requests, owner
        self.fetched_ir: list = []

    def scratch(self) -> str:
        return str(self.requests)

    def prepare(self, folder: Path) -> None:
        if self.owner is not None:
            os.chown(folder, NOBODY, NOBODY)

    def fetch(self, folder: Path) -> None:
        if self.owner is not None:
            os.chown(folder, self.owner, self.owner)
        code = f"__import__('importlib').import_module('autograder.submission').serve({str(folder)!r})"
        cell = {"cell_type": "code", "source": code, "metadata": {}, "outputs": [], "execution_count": None,
                "id": "autograder-request"}
        import nbformat
        cells = self.client.nb.cells
        cells.append(nbformat.from_dict(cell))
        try:
            self.client.execute_cell(cells[-1], len(cells) - 1, store_history=False)
        except Exception as exc:
            raise KernelGone(f"the notebook's kernel did not answer ({type(exc).__name__})") from None
        finally:
            ran = cells.pop()
        errors = [o for o in ran.get("outputs", []) if o.get("output_type") == "error"]
        if errors and not (folder / "answer.json").exists():
            raise GradingFailure(f"the notebook could not hand in its answer ({errors[0].get('ename', 'error')}: "
                                 f"{str(errors[0].get('evalue', ''))[:200]})")
        text = folder / "result.py"
        if text.exists():
            self.fetched_ir.append(text.read_text(encoding="utf-8", errors="replace")[:20000])


def _limited_client(nb, km, limits: Limits):
    from nbclient import NotebookClient

    class Client(NotebookClient):
        output_bytes = 0
        truncated = False

        timed_out = False

        async def _async_handle_timeout(self, timeout, cell=None):
            Client.timed_out = True        # nbclient interrupts the kernel and goes on
            return await super()._async_handle_timeout(timeout, cell)

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {})))
            Client.output_bytes += size
            if Client.output_bytes > limits.max_output_bytes:
                Client.truncated = True
                return None
            return super().output(outs, msg, display_id, cell_index)

    return Client(nb, km=km, timeout=int(limits.cell_timeout), allow_errors=True, interrupt_on_timeout=True,
                  record_timing=False, shutdown_kernel="immediate")


def _kernel_manager(sandbox: Path, policy: dict, use_ipc: bool):
    from jupyter_client import AsyncKernelManager   # nbclient polls its channels concurrently
    from jupyter_client.kernelspec import KernelSpecManager
    specs = Path(tempfile.mkdtemp(prefix="mlc-lab-spec-"))
    (specs / "sandboxed").mkdir()
    argv = [sys.executable, "-m", "autograder.sandbox", json.dumps(policy), "--",
            sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (specs / "sandboxed" / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "mlc-lab sandbox", "language": "python"}))
    km = AsyncKernelManager(kernel_name="sandboxed", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)],
                                                                                       ensure_native_kernel=False),
                       transport="ipc" if use_ipc else "tcp")
    km.connection_file = str(sandbox / ".kernel.json")
    if use_ipc:
        km.ip = str(sandbox / "kernel-ipc")
    return km, specs


def grade(source_path: Path, submission_path: Path, limits: Limits, progress: Path, hide=()) -> None:
    """Grade one submission; each task's result becomes a line of ``progress`` as it is decided,
    and a last line ``{"done": ...}`` says how the notebook's run ended."""
    source = notebook.read(source_path)
    tasks = {t.grade_id: t for t in notebook.tasks(source)}
    log = progress.open("a", encoding="utf-8")

    def emit(record: dict) -> None:
        log.write(json.dumps(record) + "\n")
        log.flush()

    try:
        student = notebook.read(submission_path)
    except Exception as exc:
        emit({"done": f"the submission is not a readable notebook ({type(exc).__name__})", "cells_failed": []})
        return
    for cell in student.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None

    sandbox, workdir, uid, policy = _prepare_sandbox(limits, hide)
    km, specs = _kernel_manager(workdir, policy, use_ipc=bool(policy["isolate_network"]))
    client = _limited_client(student, km, limits)
    sub = RemoteSubmission(client, sandbox / "requests", _request_owner(uid, limits))
    namespace = _setup_namespace(source)
    graded, notes, failed_cells = set(), [], []
    deadline = time.monotonic() + limits.notebook_timeout
    try:
        with client.setup_kernel(cwd=str(workdir)):
            for index, cell in enumerate(student.cells):
                if cell.cell_type != "code":
                    continue
                if time.monotonic() > deadline:
                    notes.append(f"the notebook ran out of its {limits.notebook_timeout:g} s at cell {index}")
                    break
                outcome = _run_cell(client, cell, index)
                if outcome:
                    failed_cells.append(index)
                    if outcome.startswith("dead"):
                        notes.append(f"the kernel died in cell {index} (the code exited, crashed or ran out "
                                     "of memory or CPU time); tasks after it earn nothing")
                        break
                    if outcome.startswith("timeout"):
                        notes.append(f"cell {index} ran longer than {limits.cell_timeout:g} s and was interrupted")
                grade_id = notebook.meta(cell).get("grade_id")
                if grade_id in tasks and grade_id not in graded:
                    emit(asdict(_grade_task(tasks[grade_id], namespace, sub)))
                    graded.add(grade_id)
            for grade_id, task in tasks.items():     # test cells the student deleted, in source order
                if grade_id not in graded and not any("kernel died" in n for n in notes):
                    emit(asdict(_grade_task(task, namespace, sub)))
                    graded.add(grade_id)
    except Exception as exc:
        notes.append(f"the notebook could not be run: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if client.truncated:
            notes.append(f"the notebook printed more than {limits.max_output_bytes >> 10} KiB; the rest was dropped")
        emit({"done": "; ".join(notes) or "ok", "cells_failed": failed_cells})
        log.close()
        try:    # a kernel manager passed in is not shut down by nbclient
            from jupyter_core.utils import run_sync
            run_sync(km.shutdown_kernel)(now=True)
        except Exception:
            pass
        shutil.rmtree(specs, ignore_errors=True)
        shutil.rmtree(sandbox, ignore_errors=True)


def _prepare_sandbox(limits: Limits, hide) -> tuple:
    """(sandbox folder, the kernel's working folder in it, the kernel's uid or None, the policy
    for ``autograder.sandbox``). As root, the kernel runs as a fresh user when that user can run
    this Python, else as root without capabilities; either way the folders in ``hide``, every
    grading's working folder and every other sandbox are hidden from it."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    sandboxes = private_folder("mlc-lab-sandboxes", 0o711)
    sandbox = Path(tempfile.mkdtemp(dir=sandboxes))
    workdir, requests = sandbox / "work", sandbox / "requests"
    workdir.mkdir()
    requests.mkdir()
    uid = None
    if root and not limits.same_user:
        for folder in (sandbox, requests):
            os.chown(folder, NOBODY, NOBODY)
            os.chmod(folder, 0o711)
        uid = 50000 + (os.getpid() % 10000)
        os.chown(workdir, uid, uid)
        if not _can_run_as(uid, workdir):
            os.chown(workdir, 0, 0)
            uid = None
    hide = [str(Path(h).resolve()) for h in [*hide, private_folder("mlc-lab-grading", 0o700), sandboxes]
            if not _contains(h, sys.prefix) and not _contains(h, sys.base_prefix)]
    policy = {"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
              "max_processes": limits.max_processes, "max_file_bytes": limits.max_file_bytes,
              "uid": uid, "hide": hide, "keep": str(sandbox), "drop_root": root and not limits.same_user,
              "isolate_network": limits.isolate_network and root, "workdir": str(workdir)}
    return sandbox, workdir, uid, policy


def _request_owner(uid, limits: Limits):
    """The user the kernel runs as, who answers in a request folder; None when nothing changes
    hands (the grader is not root, or runs the kernel as itself)."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not root or limits.same_user:
        return None
    return uid if uid is not None else 0


def private_folder(name: str, mode: int) -> Path:
    """A folder of this user's in the temporary directory, holding every grading run's folders."""
    folder = Path(tempfile.gettempdir()) / (name if not hasattr(os, "getuid") else f"{name}-{os.getuid()}")
    folder.mkdir(mode=mode, exist_ok=True)
    if folder.is_symlink() or folder.stat().st_uid != os.getuid():
        raise RuntimeError(f"{folder} is not a folder of this user's; remove it and grade again")
    os.chmod(folder, mode)
    return folder


def _can_run_as(uid: int, workdir: Path) -> bool:
    """Whether another user can run this Python with mlc_lab and ipykernel (not where the
    interpreter lives under a private home folder, as with pyenv under /root). The answer is
    the same for every fresh uid, so it is kept for an hour in the grading folder."""
    import subprocess
    cache = private_folder("mlc-lab-grading", 0o700) / "other-user-probe.json"
    key = f"{sys.executable}|{sys.prefix}"
    try:
        known = json.loads(cache.read_text())
        if known["key"] == key and time.time() - known["time"] < 3600:
            return bool(known["ok"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    policy = json.dumps({"uid": uid, "workdir": str(workdir)})
    probe = [sys.executable, "-m", "autograder.sandbox", policy, "--", sys.executable, "-c",
             "import ipykernel, mlc_lab, autograder"]
    try:
        ok = subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    cache.write_text(json.dumps({"key": key, "time": time.time(), "ok": ok}))
    return ok


def _contains(folder, path) -> bool:
    folder, path = Path(folder).resolve(), Path(path).resolve()
    return path == folder or folder in path.parents or path in folder.parents


def _run_cell(client, cell, index: int) -> str:
    """'' when the cell ran (errors or not), else 'timeout' or 'dead'."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    try:
        type(client).timed_out = False
        client.execute_cell(cell, index)
        return "timeout" if client.timed_out else ""
    except CellTimeoutError:
        return "timeout"
    except DeadKernelError:
        return "dead"
    except Exception:
        if not client.kc or not client.km.is_alive():
            return "dead"
        return "error"


def _setup_namespace(source) -> dict:
    namespace: dict = {"__name__": "__autograder__"}
    for index, code in enumerate(notebook.setup_code(source)):
        exec(_compile(code, f"<setup cell {index}>"), namespace)
    return namespace


def _compile(code: str, filename: str):
    """Compiled ``code``, its text registered with linecache so that ``inspect.getsource`` (which
    ``@T.prim_func`` and ``@I.ir_module`` use) finds it as it would in a notebook."""
    import linecache
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    return compile(code, filename, "exec")


def _grade_task(task, namespace: dict, sub: RemoteSubmission) -> TaskResult:
    sub.fetched_ir = []
    token = grading(sub)
    hidden = _hidden_lines(task.source)
    try:
        exec(_compile(task.source, f"<task {task.grade_id}>"), dict(namespace))
        score, message = task.points, "passed"
    except PartialCredit as credit:
        score, message = round(task.points * credit.fraction, 4), str(credit)
    except KernelGone as exc:
        score, message = 0.0, str(exc)
    except GradingFailure as exc:
        score, message = 0.0, str(exc) or "a check failed"
    except AssertionError as exc:
        line = _failing_line(exc, task.grade_id)
        shown = str(exc) if (str(exc) and line not in hidden) else ""
        score, message = 0.0, shown or ("a hidden test failed" if line in hidden else f"the test failed (line {line})")
    except Exception as exc:
        traceback.print_exc()     # to the worker's log, for the instructor; the student sees one line
        line = _failing_line(exc, task.grade_id)
        where = "a hidden test" if line in hidden else f"the test (line {line})"
        score, message = 0.0, f"{where} could not check the answer: {type(exc).__name__}"
    finally:
        reset(token)
    return TaskResult(task.grade_id, task.title, score, task.points, message, list(sub.fetched_ir))


def _hidden_lines(source: str) -> set:
    lines, inside, out = source.splitlines(), False, set()
    for number, line in enumerate(lines, 1):
        if line.strip() == notebook.BEGIN_HIDDEN:
            inside = True
        elif line.strip() == notebook.END_HIDDEN:
            inside = False
        if inside:
            out.add(number)
    return out


def _failing_line(exc: BaseException, grade_id: str) -> int:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == f"<task {grade_id}>"]
    return frames[-1].lineno if frames else 0


def _not_dumpable() -> None:
    """No other process of this user may trace this one or read its memory (/proc/PID/mem): a
    kernel left running as the same user must not reach the hidden tests held here."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)     # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def main(argv=None) -> None:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m autograder.runner")
    parser.add_argument("source")
    parser.add_argument("submission")
    parser.add_argument("progress")
    parser.add_argument("--limits", default="{}")
    parser.add_argument("--hide", action="append", default=[])
    args = parser.parse_args(argv)
    _not_dumpable()
    grade(Path(args.source), Path(args.submission), Limits(**json.loads(args.limits)), Path(args.progress),
          args.hide)


if __name__ == "__main__":
    main()
