"""The sandbox a student's kernel runs in (autograder/sandbox.py), attacked directly: each test
runs hostile Python under ``python -m autograder.sandbox`` exactly as the grader starts a kernel,
and checks from outside that the attack changed nothing and saw nothing.

These need bubblewrap and user namespaces; without them they skip, except under CI (which
installs bubblewrap), where a missing sandbox is a failure."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.kernel import private_folder

ROOT = Path(__file__).resolve().parents[1]
SITE = next(Path(p) for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
IS_ROOT = os.geteuid() == 0

if sandbox.problem():
    if os.environ.get("CI"):
        raise RuntimeError(f"the grader's sandbox is missing under CI: {sandbox.problem()}")
    pytest.skip(f"no sandbox here: {sandbox.problem()}", allow_module_level=True)


@pytest.fixture
def tmp_path():
    """A folder the sandbox's fresh uid can reach (pytest's own are private), as the grader's
    sandbox folders are."""
    folder = Path(tempfile.mkdtemp(dir=private_folder("mlc-lab-sandboxes", 0o711)))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def jail(tmp_path, code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``code`` in a sandbox as the grader runs a kernel: its own work folder (writable), a
    stage folder, a fresh uid when root."""
    work, stage = tmp_path / "work", tmp_path / "stage"
    work.mkdir(exist_ok=True)
    stage.mkdir(exist_ok=True)
    uid = sandbox.fresh_uid(0)
    if uid is not None:
        os.chown(work, uid, uid)
    policy = {"uid": uid, "workdir": str(work), "stage": str(stage), "rw": [str(work)],
              "max_processes": 64, "memory_bytes": 4 << 30}
    return subprocess.run([sys.executable, "-m", "autograder.sandbox", json.dumps(policy), "--",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


TRY = """
import os
def attempt(what, action):
    try:
        action()
        print("DONE", what)
    except OSError as exc:
        print("REFUSED", what, type(exc).__name__)
"""


def test_writes_outside_the_work_folder_are_refused(tmp_path):
    """The grader's code, the venv (a .pth file would run in every later grader process), /etc,
    /root and Gradescope's results folder: none can be written, and nothing appears outside."""
    targets = {"grader": ROOT / "autograder" / "runner.py", "venv": SITE / "zz_mlc_lab_pwned.pth",
               "etc": Path("/etc/mlc-lab-pwned"), "root": Path("/root/mlc-lab-pwned"),
               "results": Path("/autograder/results/results.json"), "tmp": Path("/tmp/mlc-lab-pwned")}
    before = targets["grader"].read_bytes()
    code = TRY + "".join(f"attempt({name!r}, lambda: open({str(path)!r}, 'a').write('import os'))\n"
                         for name, path in targets.items())
    code += "attempt('makedirs', lambda: os.makedirs('/autograder/results'))\n"
    run = jail(tmp_path, code)
    assert run.returncode == 0, run.stderr
    assert "DONE tmp" in run.stdout       # the sandbox's own /tmp is writable: it vanishes with it
    for name in [n for n in targets if n != "tmp"] + ["makedirs"]:
        assert f"REFUSED {name}" in run.stdout, run.stdout
    assert targets["grader"].read_bytes() == before
    for name in ("venv", "etc", "root", "tmp"):
        assert not targets[name].exists(), f"{targets[name]} was created outside the sandbox"


def test_only_the_allow_list_is_visible(tmp_path):
    """The checkout around the packages (its .git above all), the instructor sources, the
    grader's folders and the machine's other files do not exist in the sandbox."""
    secret = tmp_path / "instructor" / "hw.ipynb"
    secret.parent.mkdir()
    secret.write_text("hidden tests")
    paths = [ROOT / ".git", ROOT / "exercises" / "instructor", ROOT / "tests", ROOT / "README.md", secret,
             Path("/etc/shadow"), Path("/root/.bash_history"), Path("/home"), Path("/var")]
    code = "import os\n" + "".join(f"print({str(p)!r}, os.path.exists({str(p)!r}))\n" for p in paths)
    code += f"print('LISTING', sorted(os.listdir({str(ROOT)!r})))\nimport mlc_lab, autograder\n"
    run = jail(tmp_path, code)
    assert run.returncode == 0, run.stderr
    for path in paths:
        assert f"{path} False" in run.stdout, run.stdout
    listing = next(line for line in run.stdout.splitlines() if line.startswith("LISTING"))
    assert ".git" not in listing and "exercises" not in listing and "autograder" in listing


def test_the_sandbox_user_is_never_root(tmp_path):
    """Inside, an unprivileged uid; outside, what it creates belongs to a fresh uid (as root) or
    to the grader's own user, never to root."""
    run = jail(tmp_path, "import os\nprint(os.getuid(), os.geteuid())\nopen('made-here', 'w').write('x')")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(sandbox.SANDBOX_UID)] * 2
    owner = (tmp_path / "work" / "made-here").stat().st_uid
    assert owner != 0 if IS_ROOT else owner == os.getuid()


# i386 fork (system call 2) through ``int 0x80``, called from memory the snippet maps executable.
INT80_FORK = """
import ctypes, mmap, os
code = b"\\xb8\\x02\\x00\\x00\\x00\\xcd\\x80\\xc3"      # mov eax, 2; int 0x80; ret
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print("forked", call(), os.getpid(), flush=True)
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the 32-bit ABI is x86's")
def test_a_fork_through_the_32_bit_abi_kills_the_process(tmp_path):
    run = jail(tmp_path, INT80_FORK)
    assert "forked" not in run.stdout, "a process was made through int 0x80"
    assert run.returncode == 128 + 31, (run.returncode, run.stderr)      # SIGSYS: the filter killed it


def test_new_processes_and_privileged_calls_are_refused(tmp_path):
    code = TRY + """
import ctypes, socket, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    if getattr(libc, name)(*args) != 0:
        raise OSError(ctypes.get_errno(), name)
attempt("fork", os.fork)
attempt("subprocess", lambda: subprocess.run(["true"]))
attempt("ptrace", lambda: call("ptrace", 16, 1, 0, 0))                 # PTRACE_ATTACH to pid 1
attempt("unshare", lambda: call("unshare", 0x10000000))                # a new user namespace
attempt("mount", lambda: call("mount", b"none", b"/tmp", b"tmpfs", 0, None))
attempt("network", lambda: socket.create_connection(("192.0.2.1", 80), timeout=2))
import threading; t = threading.Thread(target=print, args=("thread ran",)); t.start(); t.join()
"""
    run = jail(tmp_path, code)
    assert run.returncode == 0, run.stderr
    for what in ("fork", "subprocess", "ptrace", "unshare", "mount", "network"):
        assert f"REFUSED {what}" in run.stdout, run.stdout
    assert "thread ran" in run.stdout           # threads are not processes: they stay allowed


def test_the_process_limit_and_pid_namespace(tmp_path):
    """Only the sandbox's own processes are visible."""
    run = jail(tmp_path, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert run.returncode == 0, run.stderr
    assert max(json.loads(run.stdout)) < 10, run.stdout


def test_a_missing_sandbox_is_refused_with_what_is_missing(tmp_path, monkeypatch):
    from autograder import batch
    from autograder.runner import Limits
    monkeypatch.setattr(sandbox, "_PROBLEM", "bubblewrap (bwrap) is not installed")
    with pytest.raises(batch.SandboxMissing, match="bwrap.*--no-sandbox"):
        batch.refuse_without_sandbox(Limits())
    batch.refuse_without_sandbox(Limits(sandbox=False))      # --no-sandbox: the instructor's choice
