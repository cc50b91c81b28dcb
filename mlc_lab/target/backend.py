"""Backends: how PrimFuncs become something that runs, one Backend per target kind.

``mlc_lab.build`` (and ``relax.build`` for its kernels) does, for ``target``::

    backend = get_backend(target.kind.name)
    lowered = backend.lower(IRModule(functions), target)     # the backend's pipeline (verifies)
    compiled = backend.compile(backend.lowered_functions(lowered, functions), target)
    return backend.load(compiled, target, signatures=functions)   # -> runtime.Module

``render`` gives the source text (LLVM IR, CUDA C, the script) without compiling it. A new
backend is one module in ``mlc_lab/target/backends/`` defining a Backend subclass and calling
``register_backend`` on it; ``backends/__init__.py`` imports it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .kinds import TargetKind, did_you_mean, get_kind, known_kind_names, register_kind
from .kinds import unregister_kind
from .target import Target


@dataclass(frozen=True)
class Capabilities:
    """What a backend's code can do; schedules and checks read these instead of kind names."""
    device_type: str = "cpu"
    supports_parallel: bool = False          # T.parallel loops run on several cores
    supports_nested_parallel: bool = False
    supports_vector: bool = False            # Ramp/Broadcast become SIMD instructions
    vector_lanes: tuple = ()                 # widths that map to vector registers
    supports_thread_binding: bool = False    # loops bound to blockIdx/threadIdx
    max_threads_per_block: int | None = None
    gpu: bool = False                        # functions become kernels a GPU launches (host/device
                                             # split): schedules must bind blockIdx/threadIdx
    dialect: str | None = None               # the code generated: "llvm" (LLVM IR), "cuda" (CUDA C),
                                             # "opencl" (OpenCL C); None for the interpreter
    stack_limit_bytes: int | None = None     # allocations up to this size live on the stack; larger
                                             # ones are allocated on every call
    parallel_threshold: Callable[[], float] | None = None   # the least work (flops) a parallel
                                             # loop pays for; called when needed, as it can depend on
                                             # what runs parallel loops in this process


class Backend:
    """Subclass per target kind. ``kind`` names it; ``new_kind`` (a TargetKind) is given only
    by backends for a kind ``mlc_lab.target.kinds`` does not know, and is registered with it."""
    kind: str = ""
    new_kind: TargetKind | None = None
    capabilities: Capabilities = Capabilities()

    def lower(self, mod, target: Target):
        """The lowering pipeline: IRModule as scheduled -> IRModule ``compile`` accepts. This
        default checks the functions (``tir.verify``: ill-formed IR gets its rule named here, not
        an IndexError mid-run) and keeps them as they are."""
        from ..tir.verify import verify
        verify(mod)
        return mod

    def lowered_functions(self, lowered, names) -> dict:
        """What ``compile`` takes from the lowered IRModule for the functions ``names``: their
        PrimFuncs. A backend whose lowering leaves more in the module (the GPU backends: each
        function's kernels) gives that instead."""
        return {name: lowered[name] for name in names}

    def render(self, functions: dict, target: Target | None = None) -> str:
        """Source text of lowered PrimFuncs ``{name: func}``."""
        raise NotImplementedError(f"backend {self.kind!r} does not render source")

    def compile(self, functions: dict, target: Target):
        """Lowered PrimFuncs ``{name: func}`` -> whatever ``load`` takes."""
        raise NotImplementedError

    def load(self, compiled, target: Target, signatures: dict):
        """-> runtime.Module. ``signatures`` maps names to the functions before lowering, whose
        parameters argument checks (and their messages) follow."""
        raise NotImplementedError

    def build(self, functions: dict, target: Target):
        """PrimFuncs ``{name: func}`` as written -> runtime.Module."""
        from ..ir import IRModule
        lowered = self.lower(IRModule(functions), target)
        compiled = self.compile(self.lowered_functions(lowered, functions), target)
        return self.load(compiled, target, signatures=functions)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} for target kind {self.kind!r}>"


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Make ``mlc_lab.build(..., target=backend.kind)`` use ``backend``; registers its
    ``new_kind`` first when it has one. Returns the backend."""
    name = get_kind(backend.kind).name if backend.kind in known_kind_names() else backend.kind
    if name in _BACKENDS:
        raise ValueError(f"target kind {name!r} has a backend already: {_BACKENDS[name]!r}; "
                         f"unregister_backend({name!r}) first")
    if backend.new_kind is not None:
        if backend.new_kind.name != backend.kind:
            raise ValueError(f"backend {backend!r}: new_kind is named {backend.new_kind.name!r}")
        register_kind(backend.new_kind)
    kind = get_kind(backend.kind)
    _BACKENDS[kind.name] = backend
    return backend


def unregister_backend(kind: str) -> None:
    """Undo ``register_backend`` (and the registration of the backend's own kind)."""
    backend = _BACKENDS.pop(get_kind(kind).name)
    if backend.new_kind is not None:
        unregister_kind(backend.new_kind.name)


def get_backend(kind: str) -> Backend:
    """The backend for a kind name (or alias); a ValueError says which kinds have one."""
    name = get_kind(kind).name if kind in known_kind_names() else None
    if name in _BACKENDS:
        return _BACKENDS[name]
    available = ", ".join(available_targets())
    missing = ("is not available yet" if name is not None
               else f"is unknown{did_you_mean(kind, known_kind_names())}")
    raise ValueError(f"target {kind!r} {missing}; targets available so far: {available}")


def available_targets() -> list[str]:
    """Kind names (aliases included) that have a backend, sorted."""
    return sorted(name for name in known_kind_names() if get_kind(name).name in _BACKENDS)
