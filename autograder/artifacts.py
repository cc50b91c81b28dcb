"""What crosses from a student's kernel to the grader: data only, never pickles.

A value is written into a folder as ``value.json`` (its kind and, for small values, the value)
plus, by kind, ``*.npy`` arrays (read back with ``allow_pickle=False``) or ``*.py`` script text
(read back with the script parser's safe mode, which executes nothing). The writer runs in the
student's kernel; the reader runs in the grader and trusts nothing it reads:

    kind       written from                       read back as
    ir         IRModule, PrimFunc, relax Function  the same, parsed from its script text
    schedule   tir.Schedule                        ScheduleArtifact(mod, trace JSON)
    array      numpy array, NDArray                numpy array
    json       None, bool, int, float, str, lists and dicts of them
    tuple      a tuple or list of the above        a tuple
"""
from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 64 << 20        # no artifact file the grader reads may be larger than this
MAX_ITEMS = 64              # nor a tuple longer


class ArtifactError(Exception):
    """A value that cannot cross, or a folder that does not hold a valid artifact."""


@dataclass
class ScheduleArtifact:
    """A schedule as it crossed: the module it produced and its trace (``Trace.as_json``)."""
    mod: object
    trace: list


# -- the writing side (in the student's kernel) -------------------------------------------------
def write(value, folder: Path, stem: str = "value") -> dict:
    """Write ``value`` under ``folder`` and return its description (also saved as STEM.json)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    desc = _describe(value, folder, stem)
    (folder / f"{stem}.json").write_text(json.dumps(desc), encoding="utf-8")
    return desc


def _describe(value, folder: Path, stem: str) -> dict:
    import numpy as np
    from mlc_lab.ir.module import IRModule
    from mlc_lab.relax.expr import Function
    from mlc_lab.tir.function import PrimFunc
    from mlc_lab.tir.schedule import Schedule
    if isinstance(value, (IRModule, PrimFunc, Function)):
        return {"kind": "ir", **_write_ir(value, folder, stem)}
    if isinstance(value, Schedule):
        return {"kind": "schedule", **_write_ir(value.mod, folder, stem), "trace": value.trace.as_json()}
    value = _plain(value)
    if hasattr(value, "numpy") and callable(value.numpy):       # an NDArray
        value = value.numpy()
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype == object:
            raise ArtifactError("an array of Python objects cannot be handed in; use numbers")
        np.save(folder / f"{stem}.npy", array, allow_pickle=False)
        return {"kind": "array", "file": f"{stem}.npy"}
    if isinstance(value, (tuple, list)) and not _is_json(value):
        if len(value) > MAX_ITEMS:
            raise ArtifactError(f"a tuple of {len(value)} items is too long (at most {MAX_ITEMS})")
        return {"kind": "tuple", "items": [_describe(v, folder, f"{stem}_{i}") for i, v in enumerate(value)]}
    if _is_json(value):
        return {"kind": "json", "value": value}
    raise ArtifactError(f"a {type(value).__name__} cannot be handed in to the grader; hand in an "
                        "IRModule, PrimFunc, relax Function, Schedule, array, number, string, or a "
                        "list/dict of those")


def _write_ir(value, folder: Path, stem: str) -> dict:
    """Script text, and each constant too large to print as an array of its own."""
    import numpy as np
    from mlc_lab.script.printer import script
    constants: list = []
    (folder / f"{stem}.py").write_text(script(value, constants=constants), encoding="utf-8")
    files = []
    for i, constant in enumerate(constants):
        np.save(folder / f"{stem}_const{i}.npy", np.asarray(constant.data), allow_pickle=False)
        files.append(f"{stem}_const{i}.npy")
    return {"file": f"{stem}.py", "constants": files}


def _plain(value, depth: int = 0):
    """numpy scalars inside lists, tuples and dicts as Python numbers (``np.float64(0.5)`` is
    0.5), so a list of them crosses as JSON."""
    import numpy as np
    if isinstance(value, np.generic) and depth:
        return value.item()
    if type(value) in (list, tuple) and depth < 8:
        return type(value)(_plain(v, depth + 1) for v in value)
    if type(value) is dict and depth < 8:
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    return value


def _is_json(value, depth: int = 0) -> bool:
    if depth > 8:
        return False
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, (int, float)):
        return type(value) in (int, float, bool)        # not a subclass with its own __eq__
    if isinstance(value, (list, tuple)):
        return type(value) in (list, tuple) and all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return type(value) is dict and all(type(k) is str and _is_json(v, depth + 1)
                                           for k, v in value.items())
    return False


# -- the reading side (in the grader) -------------------------------------------------------------
def read(folder: Path, stem: str = "value"):
    """The value written by ``write``, rebuilt from data alone; ArtifactError when it is not valid."""
    folder = Path(folder)
    desc = load_json(open_plain(folder / f"{stem}.json"))
    return _rebuild(desc, folder)


MAX_DEPTH = 32              # nor a JSON document nest deeper


def load_json(data: bytes):
    """JSON from bytes someone else wrote: at most MAX_BYTES, nested at most MAX_DEPTH deep (a
    deeper document would exhaust the parser's recursion before any check could run)."""
    if len(data) > MAX_BYTES:
        raise ArtifactError(f"a JSON document larger than {MAX_BYTES >> 20} MiB")
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:           # a backslash: the next byte is escaped
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    if deepest > MAX_DEPTH:
        raise ArtifactError(f"a JSON document nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArtifactError(f"malformed JSON ({type(exc).__name__})") from None


def open_plain(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, a plain file with one link, opened without following a link at its
    last step (the folders above it are the reader's, and no one else may change them): no
    symlink, hard link, FIFO or device, and at most ``max_bytes``."""
    path = Path(path)
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise ArtifactError(f"{path.parent.name} cannot be opened: {exc.strerror}") from None
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=folder)
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be read: {exc.strerror}"
        raise ArtifactError(f"{path.name} {why}") from None
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError(f"{path.name} is not a plain file")
        if info.st_nlink != 1:
            raise ArtifactError(f"{path.name} has {info.st_nlink} hard links; hand in a plain file")
        if info.st_size > max_bytes:
            raise ArtifactError(f"{path.name} is larger than {max_bytes >> 20} MiB")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ArtifactError(f"{path.name} is larger than {max_bytes >> 20} MiB")
    return data


def safe_path(folder: Path, name) -> Path:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith(".") \
            or "\0" in name or len(name) > 200:
        raise ArtifactError(f"bad artifact file name {name!r}")
    return folder / name


def _constant(folder: Path, name):
    import io

    import numpy as np
    from mlc_lab.relax.expr import const
    try:
        return const(np.load(io.BytesIO(open_plain(safe_path(folder, name))), allow_pickle=False))
    except ValueError as exc:
        raise ArtifactError(f"a constant cannot be read without unpickling ({exc})") from None


def _rebuild(desc, folder: Path, depth: int = 0):
    if not isinstance(desc, dict) or depth > 2:
        raise ArtifactError("the artifact description is malformed")
    kind = desc.get("kind")
    if kind in ("ir", "schedule"):
        from mlc_lab.script.parser import from_source
        text = open_plain(safe_path(folder, desc.get("file"))).decode("utf-8")
        files = desc.get("constants") or []
        if not isinstance(files, list) or len(files) > 4096:
            raise ArtifactError("the list of constants is malformed")
        extra = {"metadata": {"relax.expr.Constant": [_constant(folder, name) for name in files]}} if files else None
        mod = from_source(text, extra_vars=extra, filename="<submission>", safe=True)
        if kind == "ir":
            return mod
        trace = desc.get("trace")
        if not isinstance(trace, list):
            raise ArtifactError("the schedule's trace is not a list")
        return ScheduleArtifact(mod, trace)
    if kind == "array":
        import io

        import numpy as np
        try:
            return np.load(io.BytesIO(open_plain(safe_path(folder, desc.get("file")))), allow_pickle=False)
        except ValueError as exc:
            raise ArtifactError(f"the array cannot be read without unpickling ({exc})") from None
    if kind == "json":
        return desc.get("value")
    if kind == "tuple":
        items = desc.get("items")
        if not isinstance(items, list) or len(items) > MAX_ITEMS:
            raise ArtifactError("the tuple artifact is malformed")
        return tuple(_rebuild(item, folder, depth + 1) for item in items)
    raise ArtifactError(f"unknown artifact kind {kind!r}")
