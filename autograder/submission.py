"""``submission``: how a test cell reaches the student's work.

    submission.ir("MyModule")        the IRModule / PrimFunc / relax Function the student defined
    submission.schedule("sch")       a tir.Schedule, as ScheduleArtifact(mod, trace)
    submission.array("out")          a numpy array (an NDArray becomes one)
    submission.value("answer")       a number, string, or list/dict of them
    submission.call("fn", *args)     the student's function called on ``args`` (arrays, IR,
                                     numbers), its result coming back as one of the above

Every value makes the same data-only round trip (``autograder.artifacts``): IR as script text
parsed in safe mode, arrays as ``.npy`` without pickles. In the student's own notebook (and under
nbgrader, which runs tests in the student's kernel) ``submission`` reads the notebook's variables;
in ``mlc-lab grade`` the grader's process asks the student's sandboxed kernel
(``autograder.runner``), so a test behaves the same in both places, and nothing the student's
code does can reach the grader's objects.
"""
from __future__ import annotations

import contextvars
import json
import shutil
import tempfile
from pathlib import Path

from . import artifacts
from .checks import GradingFailure

KINDS = {"ir": "an IRModule, PrimFunc or relax Function", "schedule": "a tir.Schedule",
         "array": "an array", "json": "a number, string, list or dict"}


class Submission:
    """The requests a test can make; ``fetch`` carries one out where the student's values live."""

    def ir(self, name: str):
        return self._get(name, "ir")

    def schedule(self, name: str):
        return self._get(name, "schedule")

    def array(self, name: str):
        return self._get(name, "array")

    def value(self, name: str):
        return self._get(name, "json")

    def call(self, name: str, *args):
        """``name(*args)`` run where the student's code lives; only its result comes back."""
        return self._fetch({"op": "call", "name": _check_name(name)}, args)

    def _get(self, name: str, kind: str):
        return self._fetch({"op": "get", "name": _check_name(name), "kind": kind}, ())

    def _fetch(self, request: dict, args: tuple):
        folder = Path(tempfile.mkdtemp(prefix="mlc-lab-request-", dir=self.scratch()))
        try:
            self.prepare(folder)
            if args:
                artifacts.write(tuple(args), folder, "args")
            (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
            self.fetch(folder)
            answer = artifacts.load_json(artifacts.open_plain(folder / "answer.json"))
            if not isinstance(answer, dict):
                raise GradingFailure("the notebook's answer to the grader was malformed")
            if "error" in answer:
                raise GradingFailure(str(answer["error"])[:2000])
            try:
                return artifacts.read(folder, "result")
            except artifacts.ArtifactError as exc:
                raise GradingFailure(f"{request['name']}: {exc}") from None
            except Exception as exc:     # the script text does not parse in safe mode
                raise GradingFailure(f"{request['name']} does not parse: {_first_line(exc)}") from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def scratch(self) -> str | None:
        return None

    def prepare(self, folder: Path) -> None:
        """Called on a new request folder before anything is written into it."""

    def fetch(self, folder: Path) -> None:
        raise NotImplementedError


class LocalSubmission(Submission):
    """The notebook's own variables (in the student's kernel, or nbgrader's)."""

    def fetch(self, folder: Path) -> None:
        serve(folder)


def serve(folder, namespace: dict | None = None) -> None:
    """Answer the request in ``folder`` from ``namespace`` (the notebook's variables): the value or
    call result as artifact ``result``, and ``answer.json`` saying whether it worked."""
    folder = Path(folder)
    if namespace is None:
        namespace = _notebook_namespace()
    try:
        request = json.loads((folder / "request.json").read_text(encoding="utf-8"))
        name = request["name"]
        if name not in namespace:
            raise GradingFailure(f"the notebook defines no `{name}` (did the cell that defines it run?)")
        value = namespace[name]
        if request["op"] == "call":
            if not callable(value):
                raise GradingFailure(f"`{name}` is {_a(type(value).__name__)}, not a function")
            args = artifacts.read(folder, "args") if (folder / "args.json").exists() else ()
            try:
                value = value(*args)
            except Exception as exc:
                raise GradingFailure(f"calling `{name}` raised {type(exc).__name__}: {_first_line(exc)}") from None
        desc = artifacts.write(value, folder, "result")
        kind = request.get("kind")
        if kind is not None and desc["kind"] != kind:
            raise GradingFailure(f"`{name}` is {_a(type(value).__name__)}; this task wants {KINDS[kind]}")
        answer = {"ok": True}
    except (GradingFailure, artifacts.ArtifactError) as exc:
        answer = {"error": str(exc)}
    except Exception as exc:     # the student's value misbehaved while being written out
        answer = {"error": f"handing in `{request.get('name', '?')}` failed: {type(exc).__name__}: "
                           f"{_first_line(exc)}"}
    (folder / "answer.json").write_text(json.dumps(answer), encoding="utf-8")


def _notebook_namespace() -> dict:
    try:
        from IPython import get_ipython
        shell = get_ipython()
        if shell is not None:
            return shell.user_ns
    except ImportError:
        pass
    import __main__
    return vars(__main__)


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" or noun[:2] in ("IR", "ND") else "a ") + noun


def _check_name(name) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a submission name is a Python identifier, got {name!r}")
    return name


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


_CURRENT: contextvars.ContextVar = contextvars.ContextVar("autograder_submission", default=None)


class _Current(Submission):
    """``autograder.submission``: the grader's submission while it grades, else the notebook's."""

    def _fetch(self, request: dict, args: tuple):
        return (_CURRENT.get() or LocalSubmission())._fetch(request, args)

    def __repr__(self) -> str:
        return f"<submission: {type(_CURRENT.get() or LocalSubmission()).__name__}>"


submission = _Current()


def grading(sub: Submission):
    """Use ``sub`` as ``autograder.submission`` (in this context) until ``reset(token)``."""
    return _CURRENT.set(sub)


def reset(token) -> None:
    _CURRENT.reset(token)
