"""Targets (what to compile for: ``Target("llvm -num-cores=2")``, ``Target("nvidia/a100")``) and
the backends that compile for them, one per target kind.

    kinds.py     the kinds and the attributes each understands (tables)
    tags.py      named GPUs ("nvidia/h100") as cuda targets with their numbers
    target.py    Target: parsing, checking, printing
    backend.py   Backend interface and registry (register_backend / get_backend)
    backends/    one module per backend: llvm.py, python.py, cuda.py

The backends sit above codegen and runtime, which they use, while this package's descriptions
sit below them: ``mlc_lab.driver`` (the first layer that builds) imports ``backends``, whose
modules register themselves.
"""
from .backend import (Backend, Capabilities, available_targets, get_backend, register_backend,
                      unregister_backend)
from .kinds import Attr, TargetKind, get_kind, register_kind, unregister_kind
from .tags import TAGS
from .target import Target

__all__ = ["Attr", "Backend", "Capabilities", "TAGS", "Target", "TargetKind", "available_targets",
           "backends", "get_backend", "get_kind", "register_backend", "register_kind",
           "unregister_backend", "unregister_kind"]
