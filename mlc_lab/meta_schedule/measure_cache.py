"""What the measurement worker keeps between candidates so that it need not redo work.

``BuildCache``: the built programs of the fastest candidates of each workload, found again by
the structural hash of the scheduled module (then compared structurally, so a hash collision
cannot hand back another program). Building is deterministic, so an equal module built by the
same build function for the same target is the same program; re-measuring the best schedules at
the end of tuning then costs no compilation. The outputs of a program found here are checked
again all the same: only the compilation is skipped.

``ReferenceCache``: the expected outputs of a workload (the reference interpreter's, which take
it tens of seconds for a big kernel), kept on disk under a digest of everything they depend on:
the function's printed script, its name, the seed of the inputs, numpy's version and the
interpreter's own source. Inputs are regenerated from the seed and compared with a digest stored
beside the outputs, so a changed input generator is noticed and the outputs computed anew.
"""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np

from ..ir import structural_equal, structural_hash

# Built programs kept per workload: the fastest ones (the end of tuning re-measures the best 3).
BUILDS_KEPT = 6
# Expected outputs are kept on disk only when computing them took this long, and the directory
# is pruned (oldest first) to this many bytes.
REFERENCE_MIN_SECS, REFERENCE_DIR_BYTES = 1.0, 2 << 30


class BuildCache:
    """``get(workload, build_func, mod, target)`` -> a built program or None; ``offer(..., lib,
    seconds)`` keeps it if it is among the ``capacity`` fastest of its workload.

    >>> from mlc_lab.testing import matmul_schedules as mm
    >>> cache, mod = BuildCache(capacity=1), mm.naive(8)
    >>> cache.offer("w", len, mod, "llvm", "a program", 0.5)
    >>> cache.get("w", len, mm.naive(8), "llvm"), cache.get("w", len, mm.naive(4), "llvm")
    ('a program', None)
    >>> cache.offer("w", len, mm.naive(4), "llvm", "a slower one", 0.9)
    >>> cache.get("w", len, mm.naive(4), "llvm") is None   # not among the fastest 1
    True
    """

    def __init__(self, capacity: int = BUILDS_KEPT):
        self.capacity = capacity
        self._kept: dict = {}    # workload -> [(seconds, key, mod, lib)], fastest first
        self.hits = 0

    @staticmethod
    def _key(build_func, mod, target) -> tuple:
        name = f"{getattr(build_func, '__module__', '')}.{getattr(build_func, '__qualname__', build_func)}"
        return (name, str(target), structural_hash(mod))

    def get(self, workload, build_func, mod, target):
        key = self._key(build_func, mod, target)
        for _, kept_key, kept_mod, lib in self._kept.get(workload, ()):
            if kept_key == key and structural_equal(kept_mod, mod):
                self.hits += 1
                return lib
        return None

    def offer(self, workload, build_func, mod, target, lib, seconds: float) -> None:
        key = self._key(build_func, mod, target)
        kept = [e for e in self._kept.get(workload, ()) if not (e[1] == key and structural_equal(e[2], mod))]
        kept.append((seconds, key, mod, lib))
        kept.sort(key=lambda e: e[0])
        self._kept[workload] = kept[:self.capacity]

    def forget(self, workload) -> None:
        self._kept.pop(workload, None)


def default_reference_dir() -> str:
    """``$MLC_LAB_CACHE_DIR/references``, else ``~/.cache/mlc_lab/references``."""
    root = os.environ.get("MLC_LAB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mlc_lab")
    return os.path.join(root, "references")


def _interpreter_digest() -> str:
    from ..runtime import interpreter
    from ..tir.schedule import numerics
    digest = hashlib.sha256()
    files = sorted(Path(interpreter.__file__).parent.glob("*.py")) + [Path(numerics.__file__)]
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _arrays_digest(arrays: list) -> str:
    digest = hashlib.sha256()
    for a in arrays:
        digest.update(f"{a.dtype}{a.shape}".encode())
        digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()


class ReferenceCache:
    """Expected outputs on disk (one ``.npz`` per workload) in ``directory``."""

    def __init__(self, directory: str):
        self.directory = directory

    def path(self, mod, func_name: str, seed: int) -> str:
        digest = hashlib.sha256()
        for part in (mod.script(), func_name, str(seed), np.__version__, _interpreter_digest()):
            digest.update(part.encode())
            digest.update(b"\0")
        return os.path.join(self.directory, digest.hexdigest()[:40] + ".npz")

    def load(self, path: str, args: list) -> list | None:
        """The stored outputs for these inputs, or None (missing, unreadable, other inputs)."""
        try:
            with np.load(path, allow_pickle=False) as data:
                if str(data["inputs_digest"]) != _arrays_digest(args):
                    return None
                expected = [data[f"out{k}"] for k in range(len(args))]
        except (OSError, KeyError, ValueError):
            return None
        if any(e.shape != a.shape or e.dtype != a.dtype for e, a in zip(expected, args)):
            return None
        os.utime(path)   # recently used: pruned last
        return expected

    def store(self, path: str, args: list, expected: list, seconds: float) -> None:
        size = sum(e.nbytes for e in expected)
        if seconds < REFERENCE_MIN_SECS or size > REFERENCE_DIR_BYTES // 4:
            return
        try:
            os.makedirs(self.directory, exist_ok=True)
            partial = f"{path}.{os.getpid()}.partial.npz"
            np.savez(partial, inputs_digest=np.array(_arrays_digest(args)),
                     **{f"out{k}": e for k, e in enumerate(expected)})
            os.replace(partial, path)
            self._prune()
        except OSError:   # a read-only or full disk: the outputs are simply computed next time
            pass

    def _prune(self) -> None:
        entries = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith(".npz"):
                stat = entry.stat()
                entries.append((stat.st_mtime, stat.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= REFERENCE_DIR_BYTES:
                break
            try:
                os.remove(path)
                total -= size
            except OSError:
                pass


def reference_of(mod, func_name: str, seed: int, directory: str | None):
    """``runner.Reference.of``, through the cache in ``directory`` (None: no cache). Only
    functions whose parameters are all buffers are cached."""
    from ..tir.buffer import Buffer
    from ..tir.schedule import numerics
    from .runner import Reference
    func = mod[func_name]
    if directory is None or not all(isinstance(p, Buffer) for p in func.params):
        return Reference.of(mod, func_name, seed)
    cache = ReferenceCache(directory)
    path = cache.path(mod, func_name, seed)
    args = numerics.random_arguments(func, seed=seed)
    expected = cache.load(path, args)
    if expected is None:
        start = time.perf_counter()
        expected = numerics.run(func, args)
        cache.store(path, args, expected, time.perf_counter() - start)
    return Reference(func_name, args, expected, [True] * len(args))
