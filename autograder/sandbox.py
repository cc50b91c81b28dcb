"""The jail a student's kernel runs in: ``python -m autograder.sandbox POLICY_JSON -- KERNEL_ARGV...``
applies the policy and runs the kernel as its child.

In order, where the operating system allows (Linux; the namespaces need root):
1. a new **mount namespace** with an empty tmpfs over each ``hide`` folder (the instructor's
   source, the class's submissions, the grader's output and working folders) and over the
   folder holding every sandbox, the kernel's own sandbox mounted back in it, so no path leads
   to another student's files;
2. a new **network namespace** with no interface up: no network at all (the kernel then talks to
   the grader over Unix sockets, ZeroMQ's ``ipc`` transport), and a new **PID namespace** whose
   /proc shows the kernel's own processes only, all killed when the kernel ends (a fork bomb's
   leftovers included);
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

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x40000000, 0x20000000
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


# Seccomp: no new processes (fork, vfork, clone without CLONE_THREAD; clone3 answers ENOSYS so
# that the C library falls back to clone). Threads stay allowed. A process limit does not hold
# for root (RLIMIT_NPROC is not enforced for real user 0), this does, for any user.
_ARCHES = {"x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435}),
           "aarch64": (0xC00000B7, {"clone": 220, "clone3": 435})}
CLONE_THREAD = 0x00010000


def _seccomp_program(arch: int, calls: dict) -> list:
    """Classic BPF over ``struct seccomp_data`` (nr at offset 0, arch at 4, args[0] at 16):
    (code, jump if true, jump if false, k) instructions."""
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, deny, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38     # EPERM, ENOSYS
    program = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, allow), (ld, 0, 0, 0)]
    for name in ("fork", "vfork"):
        if name in calls:
            program += [(jeq, 0, 1, calls[name]), (ret, 0, 0, deny)]
    program += [(jeq, 0, 1, calls["clone3"]), (ret, 0, 0, enosys),
                (jeq, 0, 3, calls["clone"]), (ld, 0, 0, 16), (jset, 1, 0, CLONE_THREAD),
                (ret, 0, 0, deny), (ret, 0, 0, allow)]
    return program


def forbid_new_processes() -> None:
    """Install the seccomp filter above on this process (inherited across exec)."""
    import platform
    if platform.machine() not in _ARCHES:
        raise OSError(95, f"no seccomp filter for {platform.machine()}")
    arch, calls = _ARCHES[platform.machine()]
    prog = _seccomp_program(arch, calls)

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(prog))(*[Filter(*ins) for ins in prog])
    libc = _libc()
    if libc.prctl(38, 1, 0, 0, 0) != 0:                                      # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")
    if libc.prctl(22, 2, ctypes.byref(Program(len(prog), filters)), 0, 0) != 0:   # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


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


def isolate(policy: dict) -> tuple[list[str], bool]:
    """The namespaces (root only), made before the kernel's process is forked: (the measures the
    system refused, each a line the grader logs; whether a new PID namespace was made). A
    container without CAP_SYS_ADMIN refuses them all, and the other measures still apply."""
    refused, new_pids = [], False
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return refused, new_pids
    if policy.get("hide"):
        try:
            hide_folders(policy["hide"], policy.get("keep"))
        except OSError as exc:
            refused.append(f"folders not hidden: {exc.strerror}")
    if policy.get("isolate_network"):
        try:
            _unshare(CLONE_NEWNET)
        except OSError as exc:
            refused.append(f"network not cut: {exc.strerror}")
    if policy.get("hide") and not refused:
        try:
            _unshare(CLONE_NEWPID)     # the next child is the namespace's init: when it dies, all die
            new_pids = True
        except OSError as exc:
            refused.append(f"no PID namespace: {exc.strerror}")
    return refused, new_pids


def confine(policy: dict, connection_file: str | None, new_pids: bool) -> list[str]:
    """In the kernel's own process: its /proc (only its processes), resource limits, the user,
    the environment. Returns the measures refused."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    uid = policy.get("uid") if root else None
    refused = []
    if new_pids:
        try:
            _mount("proc", "/proc", "proc", 2 | 4 | 8, None)     # nosuid, nodev, noexec
        except OSError as exc:
            refused.append(f"/proc shows the host's processes: {exc.strerror}")
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
        try:
            drop_capabilities()
        except OSError as exc:
            refused.append(f"root keeps its capabilities: {exc.strerror}")
    _libc().prctl(1, 9, 0, 0, 0)    # PR_SET_PDEATHSIG, SIGKILL: the kernel dies with its launcher
    if policy.get("no_new_processes", True):
        try:
            forbid_new_processes()
        except OSError as exc:
            refused.append(f"new processes allowed: {exc.strerror}")
    workdir = policy.get("workdir") or os.getcwd()
    os.chdir(workdir)
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    os.environ.clear()
    os.environ.update(keep, HOME=workdir, TMPDIR=workdir, MPLBACKEND="Agg", PYTHONNOUSERSITE="1",
                      OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MLC_LAB_CUDA="sim",
                      PYTHONDONTWRITEBYTECODE="1", JUPYTER_PLATFORM_DIRS="1",
                      IPYTHONDIR=os.path.join(workdir, ".ipython"))
    return refused


def main(argv=None) -> None:
    """Isolate, fork the kernel's process (confined, then the command), and stay as its parent:
    pass on the grader's interrupts and signals, and exit with the kernel's status. The grader
    killing this process kills the kernel (PR_SET_PDEATHSIG), and with it, as the PID
    namespace's init, every process the student's code started."""
    import signal
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m autograder.sandbox POLICY_JSON -- COMMAND...")
    policy, command = json.loads(argv[0]), argv[2:]
    connection = command[command.index("-f") + 1] if "-f" in command else None
    _libc().prctl(1, 9, 0, 0, 0)    # PR_SET_PDEATHSIG, SIGKILL: this launcher dies with its grader
    refused, new_pids = isolate(policy)
    child = os.fork()
    if child == 0:
        try:
            for line in refused + confine(policy, connection, new_pids):
                print(f"autograder.sandbox: {line}", file=sys.stderr, flush=True)
            os.execv(command[0], command)
        finally:
            os._exit(127)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda number, _frame: os.kill(child, number))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            status = 0
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
