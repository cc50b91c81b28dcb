"""Named kinds the schedule's records refer to: ``InstructionKind`` (which primitive a trace
instruction calls, under the reference compiler's names such as "GetLoops") and ``DepKind``
(how one block depends on an earlier one: read after write, write after write, ...)."""
from __future__ import annotations

import enum
import re

# Instructions of the reference compiler's traces that are no Schedule method here: name -> pure.
_MARKERS = {"EnterPostproc": False}   # where the tuner's postprocessors begin in a trace
# Names not spelled as the CamelCase of the method's name.
_SPELLING = {"rfactor": "RFactor", "reindex": "ReIndex", "unsafe_set_dtype": "UnsafeSetDType"}


class InstructionKind(str):
    """The kind of a trace instruction: ``name`` as the reference compiler spells it ("GetLoops",
    "ComputeInline", "RFactor"), ``method``, the Schedule method it calls ("get_loops"), and
    ``is_pure``: whether it only looks (a query or a sample, which changes no IR), so that an
    instruction of a pure kind whose outputs nothing uses can be dropped from a trace. The kind
    is also the string ``method``, which is what a trace instruction's ``kind`` compares equal to
    (``inst.kind == "split"``).

    ``InstructionKind.get(name)`` takes either spelling and gives one object per kind, so kinds
    compare with ``is`` or ``same_as``.

    >>> InstructionKind.get("GetLoops").method, InstructionKind.get("rfactor").name
    ('get_loops', 'RFactor')
    >>> InstructionKind.get("GetLoops").is_pure, InstructionKind.get("Split").is_pure
    (True, False)
    """
    _registry: dict[str, "InstructionKind"] = {}

    def __new__(cls, name: str, method: str, is_pure: bool):
        kind = super().__new__(cls, method)
        kind.name, kind.method, kind.is_pure = name, method, is_pure
        return kind

    @classmethod
    def get(cls, name: str) -> "InstructionKind":
        """The kind called ``name`` (CamelCase or the method's snake_case); ValueError if no
        Schedule method is an instruction of that name."""
        if not cls._registry:
            cls._register_all()
        kind = cls._registry.get(name)
        if kind is None:
            known = ", ".join(sorted({k.name for k in cls._registry.values()}))
            raise ValueError(f"no instruction kind {name!r}; the kinds are: {known}")
        return kind

    @classmethod
    def _register_all(cls) -> None:
        from . import Schedule   # the package: every primitive mixin is part of Schedule by then
        for method in dir(Schedule):
            if not method.startswith("_") and getattr(getattr(Schedule, method), "is_instruction", False):
                name = _SPELLING.get(method) or "".join(p.capitalize() for p in method.split("_"))
                cls._add(name, method, re.match(r"(get|sample)_", method) is not None)
        for name, pure in _MARKERS.items():
            cls._add(name, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(), pure)

    @classmethod
    def _add(cls, name: str, method: str, is_pure: bool) -> None:
        cls._registry[name] = cls._registry[method] = cls(name, method, is_pure)

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f'InstructionKind("{self.name}")'


class DepKind(enum.IntEnum):
    """How a block depends on an earlier block of the same scope: it reads what the earlier one
    wrote (RAW), writes what it wrote (WAW), or writes what it read (WAR); OPAQUE when the
    accesses cannot be told apart (numbered as in the reference compiler)."""
    RAW = 0
    WAW = 1
    WAR = 2
    OPAQUE = 3

    @classmethod
    def between(cls, src, dst) -> list["DepKind"]:
        """The kinds of dependency of block ``dst`` on the earlier block ``src`` (``tir.Block``
        nodes), from the buffers of their ``reads`` and ``writes``: RAW, WAW, WAR in that order,
        each at most once; [] when they share no written buffer."""
        def buffers(regions) -> set[int]:
            return {id(region.buffer) for region in regions}
        src_reads, src_writes = buffers(src.reads), buffers(src.writes)
        dst_reads, dst_writes = buffers(dst.reads), buffers(dst.writes)
        return [kind for kind, shared in ((cls.RAW, src_writes & dst_reads),
                                          (cls.WAW, src_writes & dst_writes),
                                          (cls.WAR, src_reads & dst_writes)) if shared]


__all__ = ["DepKind", "InstructionKind"]
