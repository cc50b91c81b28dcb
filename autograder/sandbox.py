"""The jail a student's kernel runs in: ``python -m autograder.sandbox POLICY_JSON -- KERNEL_ARGV...``
applies the policy, then replaces itself with the kernel.

In order, where the operating system allows (Linux; the first three need root):
1. a new **mount namespace** with an empty tmpfs over each ``hide`` folder (the instructor's
   source, the class's submissions, the grader's output and working folders) and over the
   folder holding every sandbox, the kernel's own sandbox mounted back in it, so no path leads
   to another student's files;
2. a new **network namespace** with no interface up: no network at all (the kernel then talks to
   the grader over Unix sockets, ZeroMQ's ``ipc`` transport);
3. an **unprivileged user** (``uid``, one per job so two students never share one), which owns
   only the sandbox folder, or, where that user cannot run this Python (an interpreter under
   a private home folder), root with **every capability dropped** (the bounding set emptied,
   no new privileges), which opens only what root's own permission bits open. Neither can undo
   1 and 2;
4. **resource limits**: CPU seconds, address space, processes (per user), file size, no core files;
5. a clean **environment** (PATH, HOME in the sandbox, no secrets of the grader's).

``policy`` (a dict): cpu_seconds, memory_bytes, max_processes, max_file_bytes, uid (None: stay),
hide (folders), keep (the sandbox folder, inside a hidden one), isolate_network (bool),
drop_root (bool: no capabilities when staying root), workdir.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_REC, MS_PRIVATE = 0x4000, 1 << 18


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> None:
    if _libc().unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({flags:#x}) failed: {os.strerror(ctypes.get_errno())}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    args = [s.encode() if s is not None else None for s in (source, target, fstype)]
    if _libc().mount(args[0], args[1], args[2], flags, data.encode() if data else None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


MS_BIND, MS_RDONLY = 4096, 1


def hide_folders(folders, keep: str | None = None) -> None:
    """Cover each folder with an empty tmpfs, in a mount namespace of this process's own; the
    folder ``keep`` (inside one of them) is mounted back at its place."""
    _unshare(CLONE_NEWNS)
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    keep_fd = os.open(keep, os.O_RDONLY | os.O_DIRECTORY) if keep else None   # in the new namespace
    for folder in folders:
        if os.path.isdir(folder):
            _mount("tmpfs", folder, "tmpfs", 0, "size=64k,mode=0711")
            if keep and os.path.commonpath([folder, keep]) == folder:
                os.makedirs(keep, exist_ok=True)
                _mount(f"/proc/self/fd/{keep_fd}", keep, None, MS_BIND, None)
    if keep_fd is not None:
        os.close(keep_fd)


def drop_capabilities() -> None:
    """Empty the capability bounding set, so root's next exec gets no capability, and forbid
    regaining privileges (setuid programs included)."""
    libc = _libc()
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 1:   # PR_CAPBSET_DROP; EPERM
            raise OSError(1, "cannot drop capabilities")
    if libc.prctl(38, 1, 0, 0, 0) != 0:                                     # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")


def _user_processes(uid: int) -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/status") as f:
                    count += any(line.startswith("Uid:") and int(line.split()[1]) == uid for line in f)
            except (OSError, ValueError):
                pass
    return count


def apply(policy: dict, connection_file: str | None = None) -> None:
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    uid = policy.get("uid") if root else None
    if root and policy.get("hide"):
        hide_folders(policy["hide"], policy.get("keep"))
    if root and policy.get("isolate_network"):
        _unshare(CLONE_NEWNET)
    if uid is not None:
        for path in filter(None, (connection_file,)):
            os.chown(path, uid, uid)
    limits = [(resource.RLIMIT_CPU, policy.get("cpu_seconds")), (resource.RLIMIT_AS, policy.get("memory_bytes")),
              (resource.RLIMIT_FSIZE, policy.get("max_file_bytes")), (resource.RLIMIT_CORE, 0)]
    if policy.get("max_processes"):
        # Per user: a fresh uid starts from none; the grader's own user already runs some.
        base = 0 if uid is not None else _user_processes(os.getuid())
        limits.append((resource.RLIMIT_NPROC, base + int(policy["max_processes"])))
    for which, value in limits:
        if value is not None:
            resource.setrlimit(which, (int(value), int(value)))
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    elif root and policy.get("drop_root"):
        drop_capabilities()
    _libc().prctl(1, 9, 0, 0, 0)    # PR_SET_PDEATHSIG, SIGKILL: the kernel dies with its grader
    workdir = policy.get("workdir") or os.getcwd()
    os.chdir(workdir)
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    os.environ.clear()
    os.environ.update(keep, HOME=workdir, TMPDIR=workdir, MPLBACKEND="Agg", PYTHONNOUSERSITE="1",
                      OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MLC_LAB_CUDA="sim",
                      PYTHONDONTWRITEBYTECODE="1", JUPYTER_PLATFORM_DIRS="1",
                      IPYTHONDIR=os.path.join(workdir, ".ipython"))


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m autograder.sandbox POLICY_JSON -- COMMAND...")
    policy, command = json.loads(argv[0]), argv[2:]
    connection = command[command.index("-f") + 1] if "-f" in command else None
    apply(policy, connection)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
