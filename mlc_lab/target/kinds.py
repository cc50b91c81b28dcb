"""Target kinds: the name a target starts with ("llvm", "cuda", ...), the device it runs on, and
the attributes it understands, as a table per kind (type, default, meaning).

An attribute whose default is None is "not set": the backend decides (``-num-cores`` unset means
every core). A new kind is one more ``TargetKind`` registered with ``register_kind`` (a backend
for a new kind registers it, see ``mlc_lab.target.backend``).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Attr:
    """One attribute: ``type`` is int (a positive integer), bool (``-flag`` alone means True) or
    str."""
    type: type
    default: object
    doc: str


@dataclass(frozen=True)
class TargetKind:
    name: str
    device_type: str                      # what runtime.Device runs its code: "cpu" or "cuda"
                                          # ("opencl": no runtime, source only)
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    aliases: tuple = ()                   # other names parsed as this kind ("numpy" is "python")
    doc: str = ""

    def __post_init__(self):
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"


_LLVM = TargetKind("llvm", "cpu", {
    "num-cores": Attr(int, None, "threads used by parallel loops (default: all cores)"),
    "fast-math": Attr(bool, False, "allow LLVM to reassociate float arithmetic (results may "
                                   "differ in the last bits); without it, only multiply-add "
                                   "pairs are fused into FMA"),
    "bounds-check": Attr(bool, False, "check every load and store; out-of-bounds raises "
                                      "IndexError"),
    "mcpu": Attr(str, None, "CPU to generate code for (default: the host's own CPU)"),
}, doc="host CPU code through LLVM (llvmlite JIT)")

# The numbers a GPU schedule is checked against; tags (mlc_lab.target.tags) fill them in per GPU.
_GPU_ATTRS = {
    "model": Attr(str, None, "the GPU's name, as in its tag"),
    "arch": Attr(str, None, "compute capability, e.g. sm_80 (default: the GPU's own)"),
    "max-threads-per-block": Attr(int, 1024, "most threads one block may have"),
    "max-shared-memory-per-block": Attr(int, 49152, "bytes of shared memory one block may use"),
    "warp-size": Attr(int, 32, "threads that run in lockstep"),
    "registers-per-block": Attr(int, 65536, "32-bit registers one block may use"),
    "l2-cache-size-bytes": Attr(int, None, "bytes of L2 cache"),
}
_CUDA = TargetKind("cuda", "cuda", _GPU_ATTRS, doc="CUDA C for an NVIDIA GPU")
_CUDA_SIM = TargetKind("cuda-sim", "cpu", _GPU_ATTRS,
                       doc="CUDA kernels run on the CPU simulator (counts memory transactions)")
_OPENCL = TargetKind("opencl", "opencl", _GPU_ATTRS,
                     doc="OpenCL C source of GPU kernels (source only: run them with 'cuda')")
_PYTHON = TargetKind("python", "cpu", {}, aliases=("numpy",),
                     doc="the reference interpreter (numpy, vectorised over loop nests)")

_KINDS: dict[str, TargetKind] = {}


def register_kind(kind: TargetKind) -> None:
    """Make ``Target("<kind.name> ...")`` parse. A name already taken is an error."""
    for name in (kind.name, *kind.aliases):
        if name in _KINDS:
            raise ValueError(f"target kind {name!r} is already registered")
    for name in (kind.name, *kind.aliases):
        _KINDS[name] = kind


def unregister_kind(name: str) -> None:
    kind = get_kind(name)
    for key in (kind.name, *kind.aliases):
        del _KINDS[key]


# Targets of the reference compiler that mlc_lab has no backend for, and what to use instead.
_NOT_PROVIDED = {name: "mlc_lab has no {name} backend (it generates LLVM, CUDA and OpenCL source "
                 "only); use target 'cuda' for GPU kernels or 'llvm' for the CPU instead"
                 for name in ("vulkan", "metal", "rocm", "webgpu")}


def get_kind(name: str) -> TargetKind:
    if name in _NOT_PROVIDED and name not in _KINDS:
        raise ValueError(_NOT_PROVIDED[name].format(name=name))
    if name not in _KINDS:
        raise ValueError(f"unknown target kind {name!r}{did_you_mean(name, _KINDS)}; known "
                         f"kinds: {', '.join(known_kind_names())}")
    return _KINDS[name]


def known_kind_names() -> list[str]:
    """Every name that parses as a kind, aliases included, sorted."""
    return sorted(_KINDS)


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


for _kind in (_LLVM, _CUDA, _CUDA_SIM, _OPENCL, _PYTHON):
    register_kind(_kind)
