"""A student's notebook kernel in its sandbox, as the grader drives it: the sandbox's folders,
the kernel (``ipykernel`` under ``autograder.sandbox``, talking over Unix sockets), cells run
under a deadline that cannot be held, and the sandboxed executor that runs the student's IR
(``autograder.executor``).

On disk, per submission, in a folder only root may change (as root):

    <sandboxes>/<id>/        NOBODY's, 0711
        work/                the kernel's: its working folder, connection file and sockets
        requests/            NOBODY's, 0711: one folder per request (``RemoteSubmission``)
        stage/               where the sandbox shows paths the fresh uid could not reach

A cell gets ``cell_timeout`` seconds (less when the notebook's budget ends sooner); then the
kernel is interrupted, and if the cell still runs ``GRACE`` seconds later the kernel is killed.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import executor, sandbox

NOBODY = 65534    # owns what the kernel may read but not change: the sandbox and its requests folder
GRACE = 5.0       # seconds an interrupted cell has to stop before its kernel is killed


def private_folder(name: str, mode: int) -> Path:
    """A folder of this user's in the temporary directory, holding every grading run's folders."""
    folder = Path(tempfile.gettempdir()) / (name if not hasattr(os, "getuid") else f"{name}-{os.getuid()}")
    folder.mkdir(mode=mode, exist_ok=True)
    if folder.is_symlink() or folder.stat().st_uid != os.getuid():
        raise RuntimeError(f"{folder} is not a folder of this user's; remove it and grade again")
    os.chmod(folder, mode)
    return folder


class SandboxedKernel:
    """One submission's kernel and executor. ``with SandboxedKernel(nb, limits) as k:`` starts
    the kernel; ``k.run_cell(cell, index, seconds)`` runs one cell; leaving stops both."""

    def __init__(self, nb, limits, setup: list | None = None):
        self.limits = limits
        self.folder = Path(tempfile.mkdtemp(dir=private_folder("mlc-lab-sandboxes", 0o711)))
        self.workdir, self.requests, stage = (self.folder / n for n in ("work", "requests", "stage"))
        for folder in (self.workdir, self.requests, stage):
            folder.mkdir()
        os.chmod(stage, 0o755)
        kernel_uid = sandbox.fresh_uid(0) if limits.sandbox else None    # only ever set as root
        self.owner = kernel_uid      # who answers in a request folder (None: nothing changes hands)
        if kernel_uid is not None:
            for folder in (self.folder, self.requests):
                os.chown(folder, NOBODY, NOBODY)
                os.chmod(folder, 0o711)
            os.chown(self.workdir, kernel_uid, kernel_uid)
        base = {"cpu_seconds": limits.cpu_seconds, "memory_bytes": limits.memory_bytes,
                "max_processes": limits.max_processes, "max_file_bytes": limits.max_file_bytes,
                "stage": str(stage), "sandbox": bool(limits.sandbox)}
        self.policy = {**base, "uid": kernel_uid, "workdir": str(self.workdir),
                       "rw": [str(self.workdir), str(self.requests)]}
        log = open(self.folder / "executor.log", "wb")
        self.executor = executor.Remote({**base, "uid": sandbox.fresh_uid(1) if limits.sandbox else None,
                                         "workdir": "/tmp" if limits.sandbox else str(self.workdir)},
                                        log=log, setup=setup)
        self._log = log
        self.km, self._specs = self._kernel_manager()
        self.client = _client(nb, self.km, limits)
        self.timed_out = False

    def _kernel_manager(self):
        from jupyter_client import AsyncKernelManager      # nbclient polls its channels concurrently
        from jupyter_client.kernelspec import KernelSpecManager
        specs = Path(tempfile.mkdtemp(prefix="mlc-lab-spec-"))
        (specs / "sandboxed").mkdir()
        argv = [sys.executable, "-m", "autograder.sandbox", json.dumps(self.policy), "--",
                sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        # An interrupt travels as a message: the kernel is in a new session and PID namespace,
        # where the grader's signal to a process group would not reach it.
        (specs / "sandboxed" / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": "mlc-lab sandbox", "language": "python", "interrupt_mode": "message"}))
        km = AsyncKernelManager(kernel_name="sandboxed", transport="ipc",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)],
                                                                      ensure_native_kernel=False))
        km.connection_file = str(self.workdir / ".kernel.json")
        km.ip = str(self.workdir / "kernel-ipc")
        return km, specs

    def __enter__(self):
        self._setup = self.client.setup_kernel(cwd=str(self.workdir))
        self._setup.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._setup.__exit__(None, None, None)
        except Exception:
            pass
        self.close()

    def run_cell(self, cell, index: int, seconds: float) -> str:
        """Run one cell for at most ``seconds`` (then interrupt; ``GRACE`` later, kill):
        '' when it ran (errors or not), 'timeout' when it was interrupted, 'killed' when it
        ignored the interrupt, 'dead' when the kernel died."""
        from jupyter_core.utils import run_sync
        return run_sync(self._run_cell)(cell, index, max(seconds, 0.1))

    async def _run_cell(self, cell, index: int, seconds: float) -> str:
        from nbclient.exceptions import DeadKernelError
        task = asyncio.ensure_future(self.client.async_execute_cell(cell, index, store_history=False))
        done, _ = await asyncio.wait({task}, timeout=seconds)
        outcome = ""
        if not done:
            outcome = "timeout"
            try:
                await self.km.interrupt_kernel()
            except Exception:
                pass
            done, _ = await asyncio.wait({task}, timeout=GRACE)
            if not done:
                await self.kill()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return "killed"
        try:
            task.result()
        except DeadKernelError:
            return "dead"
        except Exception:
            if not self.client.kc or not await self.km.is_alive():
                return "dead"
            return outcome or "error"
        return outcome

    async def kill(self) -> None:
        """The kernel's launcher (bwrap) killed; what ran in the sandbox dies with it."""
        try:
            await self.km.kill_kernel()
        except Exception:
            process = getattr(getattr(self.km, "provisioner", None), "process", None)
            if process is not None:
                process.kill()

    def close(self) -> None:
        try:     # a kernel manager passed in is not shut down by nbclient
            from jupyter_core.utils import run_sync
            run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:
            pass
        self.executor.close()
        self._log.close()
        shutil.rmtree(self._specs, ignore_errors=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def _client(nb, km, limits):
    from nbclient import NotebookClient

    class Client(NotebookClient):
        output_bytes = 0
        truncated = False

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {})))
            Client.output_bytes += size
            if Client.output_bytes > limits.max_output_bytes:
                Client.truncated = True
                return None
            return super().output(outs, msg, display_id, cell_index)

    # No timeout of nbclient's own: SandboxedKernel.run_cell keeps the time.
    return Client(nb, km=km, timeout=None, allow_errors=True, record_timing=False, shutdown_kernel="immediate")
