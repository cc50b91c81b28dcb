"""CUDA C -> PTX with NVRTC, NVIDIA's runtime compiler library, called through ctypes.

No GPU and no CUDA toolkit are needed: the pip wheel ``nvidia-cuda-nvrtc-cu12`` carries the
library, and PTX is text for a virtual GPU architecture.

    >>> from mlc_lab.runtime import nvrtc
    >>> if nvrtc.available():
    ...     ptx = nvrtc.compile_ptx('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }')
    ...     assert ".entry k" in ptx

Where the library is looked for, in order: the file named by ``MLC_LAB_NVRTC``; the NVIDIA pip
wheels on ``sys.path`` (``nvidia/cuda_nvrtc/lib/libnvrtc.so.12`` for CUDA 12, ``nvidia/cu13/lib``
for CUDA 13); ``ctypes.util.find_library("nvrtc")``; ``$CUDA_HOME``/``$CUDA_PATH`` and
``/usr/local/cuda``.

A compile error raises ``NVRTCError`` with NVRTC's log and the source lines it points at.
``ptxas_resources`` asks ``ptxas -v`` (when on PATH) how many registers and how much shared
memory each kernel takes.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_ARCH = "sm_80"
_PATTERNS = ("nvidia/cuda_nvrtc/lib/libnvrtc.so*", "nvidia/cu*/lib/libnvrtc.so*",
             "nvidia/cuda_nvrtc/bin/nvrtc64_*.dll", "nvidia/cu*/bin/nvrtc64_*.dll")


class NVRTCError(RuntimeError):
    """NVRTC could not be loaded, or rejected a program; the message holds its log."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def _candidates() -> list[str]:
    found = [os.environ["MLC_LAB_NVRTC"]] if os.environ.get("MLC_LAB_NVRTC") else []
    for root in sys.path:
        for pattern in _PATTERNS:
            found += sorted(p for p in glob.glob(os.path.join(root or ".", pattern))
                            if "builtins" not in p and ".alt." not in p)
    if ctypes.util.find_library("nvrtc"):
        found.append(ctypes.util.find_library("nvrtc"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            found += sorted(glob.glob(os.path.join(home, "lib*", "libnvrtc.so*")))
    return found


@functools.cache
def _library():
    """The loaded library, or the NVRTCError saying where it was looked for."""
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as err:
            tried.append(f"{path}: {err}")
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        return lib, path
    detail = "; ".join(tried) or "no libnvrtc in the NVIDIA pip wheels, the system or CUDA_HOME"
    return NVRTCError("NVRTC is not installed (pip install nvidia-cuda-nvrtc-cu12, or set "
                      f"MLC_LAB_NVRTC to libnvrtc's path): {detail}"), None


def _lib():
    lib, _ = _library()
    if isinstance(lib, NVRTCError):
        raise lib
    return lib


def available() -> bool:
    """Whether NVRTC loads on this machine."""
    return not isinstance(_library()[0], NVRTCError)


def library_path() -> str | None:
    return _library()[1]


def version() -> tuple[int, int]:
    """NVRTC's (major, minor) version, e.g. (12, 9)."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _check(status: int, call: str) -> None:
    if status != 0:
        reason = _lib().nvrtcGetErrorString(status).decode()
        raise NVRTCError(f"{call} failed: {reason}")


def target_arch(target=None) -> str:
    """The ``sm_XY`` to compile for: a string as given, a Target's ``arch`` attribute (tags such
    as "nvidia/h100" fill it in), else DEFAULT_ARCH."""
    if isinstance(target, str) and target.startswith(("sm_", "compute_")):
        return target
    if target is not None:
        from ..target import Target
        arch = Target(target).attrs.get("arch")
        if arch:
            return arch
    return DEFAULT_ARCH


def include_dirs(needs=("cuda_fp16.h",)) -> list[str]:
    """The folder holding the CUDA headers a source needs (``cuda_fp16.h`` for half-precision
    kernels; ``crt/mma.h`` too for tensor-core ones, which ``<mma.h>`` includes): the first of
    the ``nvidia-cuda-runtime`` wheels, ``$CUDA_HOME``/``$CUDA_PATH``, ``/usr/local/cuda``
    (and its versioned siblings) that has them all."""
    roots = [os.path.join(root or ".", "nvidia", sub, "include") for root in sys.path
             for sub in ("cuda_runtime", "cu13", "cu12")]
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    homes += sorted(glob.glob("/usr/local/cuda-*"), reverse=True)
    roots += [os.path.join(home, "include") for home in homes if home]
    return [r for r in dict.fromkeys(roots)
            if all(os.path.isfile(os.path.join(r, need)) for need in needs)][:1]


def _needed_headers(source: str) -> tuple:
    needs = ["cuda_fp16.h"]
    if "<mma.h>" in source:
        needs.append(os.path.join("crt", "mma.h"))
    return tuple(needs)


def compile_ptx(source: str, arch=None, name: str = "kernel.cu", options=()) -> str:
    """PTX for ``source`` (CUDA C), for ``arch`` ("sm_80", or a Target; see ``target_arch``).
    A source that includes headers gets the CUDA include folder (``include_dirs``). Raises
    NVRTCError with NVRTC's log, and the offending lines, when the source does not compile."""
    lib, arch = _lib(), target_arch(arch)
    if "#include" in source:
        options = (*options, *(f"--include-path={d}" for d in include_dirs(_needed_headers(source))))
    program = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(), 0,
                                  None, None), "nvrtcCreateProgram")
    try:
        flags = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}", "--std=c++17",
                 *options]
        argv = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
        status = lib.nvrtcCompileProgram(program, len(flags), argv)
        log = _read(lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog, program)
        if status != 0:
            reason = lib.nvrtcGetErrorString(status).decode()
            raise NVRTCError(f"NVRTC could not compile {name} for {arch} ({reason}):\n{log}"
                             f"{_quote(source, log, name)}", log)
        return _read(lib.nvrtcGetPTXSize, lib.nvrtcGetPTX, program)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def _read(get_size, get, program) -> str:
    size = ctypes.c_size_t()
    _check(get_size(program, ctypes.byref(size)), get_size.__name__)
    buffer = ctypes.create_string_buffer(size.value)
    _check(get(program, buffer), get.__name__)
    return buffer.value.decode(errors="replace")


def _quote(source: str, log: str, name: str) -> str:
    """The source lines the log names (``kernel.cu(12): error: ...``), numbered, with the
    kernel signature above them, so the error can be placed in a long generated file."""
    lines = source.splitlines()
    wanted = sorted({int(n) for n in re.findall(re.escape(name) + r"\((\d+)\)", log)})
    for n in list(wanted):
        opening = next((k for k in range(n, 0, -1) if "__global__" in lines[k - 1]), None)
        if opening is not None and opening not in wanted and opening <= len(lines):
            wanted.append(opening)
    wanted.sort()
    shown = [f"{n:5d} | {lines[n - 1]}" for n in wanted if 0 < n <= len(lines)]
    return ("\nat:\n" + "\n".join(shown)) if shown else ""


def ptxas_resources(ptx: str, arch=None) -> dict | None:
    """{kernel: {"registers", "shared_bytes", "stack_bytes", "spill_stores", "spill_loads"}} from
    ``ptxas -v``, or None where ptxas is not on PATH or cannot be started (a sandbox that allows
    no new processes, as the grader's)."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        try:
            run = subprocess.run([ptxas, "-v", f"--gpu-name={target_arch(arch)}", "-o",
                                  os.path.join(tmp, "kernel.cubin"), path],
                                 capture_output=True, text=True)
        except OSError:
            return None
    if run.returncode != 0:
        raise NVRTCError(f"ptxas rejected the PTX:\n{run.stderr}", run.stderr)
    kernels, current = {}, None
    for line in run.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            current = kernels.setdefault(m.group(1), {"registers": 0, "shared_bytes": 0,
                                                      "stack_bytes": 0, "spill_stores": 0,
                                                      "spill_loads": 0})
        elif current is not None:
            for key, pattern in (("stack_bytes", r"(\d+) bytes stack frame"),
                                 ("spill_stores", r"(\d+) bytes spill stores"),
                                 ("spill_loads", r"(\d+) bytes spill loads"),
                                 ("registers", r"Used (\d+) registers"),
                                 ("shared_bytes", r"(\d+) bytes smem")):
                if m := re.search(pattern, line):
                    current[key] = int(m.group(1))
    return kernels
