"""``mlc_lab.build``: turn PrimFuncs into a runtime Module for a target.

Backends register in ``BACKENDS`` (target name -> builder); a builder takes ``{name: PrimFunc}``
and the target's options and returns a ``runtime.Module``. Target strings follow TVM's form,
``"llvm -num-cores=2"``: a name, then ``-key=value`` options (``-flag`` alone means True).
"""
from __future__ import annotations

from typing import Callable

from .ir import IRModule
from .runtime.interpreter import Program
from .runtime.module import Module
from .tir.function import PrimFunc

# Targets the course uses; those not in BACKENDS are reported as "not available yet".
KNOWN_TARGETS = ("python", "numpy", "llvm", "cuda", "cuda-sim")


def _build_interpreted(functions: dict, options: dict) -> Module:
    from .tir.verify import verify
    for func in functions.values():
        verify(func)   # ill-formed IR gets its rule named here, not an IndexError mid-run
    return Module({name: Program(func, name) for name, func in functions.items()}, "python")


def _build_llvm(functions: dict, options: dict) -> Module:
    """Lower every function, compile them into one native JIT module; calls are checked against
    the functions as written (before lowering flattened their buffers)."""
    from .runtime.llvm_runtime import build_llvm
    from .tir.transform import lower
    lowered = lower(IRModule(functions))
    compiled = build_llvm({name: lowered[name] for name in functions}, options, signatures=functions)
    return Module(compiled, "llvm")


BACKENDS: dict[str, Callable[[dict, dict], Module]] = {
    "python": _build_interpreted,
    "numpy": _build_interpreted,
    "llvm": _build_llvm,
}


def register_backend(name: str, builder: Callable[[dict, dict], Module]) -> None:
    """Make ``mlc_lab.build(..., target=name)`` use ``builder(functions, options)``."""
    BACKENDS[name] = builder


def parse_target(target) -> tuple[str, dict]:
    """``"llvm -num-cores=2 -fast"`` -> ``("llvm", {"num-cores": 2, "fast": True})``."""
    text = "python" if target is None else str(getattr(target, "kind", target))
    words = text.split()
    if not words:
        raise ValueError("the target string is empty; try target='python'")
    options: dict = {}
    for word in words[1:]:
        if not word.startswith("-"):
            raise ValueError(f"target {text!r}: option {word!r} should look like -key=value")
        key, has_value, value = word.lstrip("-").partition("=")
        options[key] = (int(value) if value.lstrip("-").isdigit() else value) if has_value else True
    return words[0], options


def build(mod_or_func, target="python", name: str | None = None) -> Module:
    """Compile an IRModule of PrimFuncs, or a single PrimFunc, for ``target``.

    A lone PrimFunc is named by ``name``, else its "global_symbol" attribute, else "main".
    Returns a runtime Module: ``lib["name"](*arrays)`` (or ``lib(*arrays)`` with one function)
    writes the outputs into the arrays passed."""
    kind, options = parse_target(target)
    if kind not in BACKENDS:
        missing = "is not available yet" if kind in KNOWN_TARGETS else "is unknown"
        raise ValueError(f"target {kind!r} {missing}; targets available so far: "
                         f"{', '.join(sorted(BACKENDS))}")
    if isinstance(mod_or_func, PrimFunc):
        functions = {name or mod_or_func.attr_dict.get("global_symbol") or "main": mod_or_func}
    elif isinstance(mod_or_func, IRModule):
        functions = {}
        for gv, func in mod_or_func.functions.items():
            if not isinstance(func, PrimFunc):
                raise TypeError(f"mlc_lab.build compiles PrimFuncs, but function {gv.name_hint!r} "
                                f"is a {type(func).__name__}; build graph-level modules with "
                                "relax.build")
            functions[gv.name_hint] = func
    else:
        raise TypeError(f"mlc_lab.build expects an IRModule or a PrimFunc, got "
                        f"{type(mod_or_func).__name__}")
    return BACKENDS[kind](functions, options)
