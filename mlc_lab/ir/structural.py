"""Structural equality and hashing: compare IR by content, up to a consistent renaming of the
variables and buffers it defines (loop variables, block iterators, parameters, allocations).
Names are hints, as in the reference compiler: the names of variables, buffers and blocks never
decide equality (two programs that differ only in a block's name are equal)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .module import GlobalVar, IRModule
from .node import Node

# Fields whose variables/buffers are *defined* there (so two programs may use different objects).
_DEF_FIELDS = {
    "For": ("loop_var",), "IterVar": ("var",), "LetStmt": ("var",), "PrimFunc": ("params",),
    "Block": ("iter_vars", "alloc_buffers", "match_buffers"), "Allocate": ("buffer",),
    "AllocateConst": ("buffer",), "MatchBufferRegion": ("buffer",),
    "Function": ("params",), "VarBinding": ("var",),
}
# Fields that are only names: they never decide equality.
_NAME_FIELDS = {"Var": ("name", "name_hint"), "SizeVar": ("name",), "Buffer": ("name",),
                "DataflowVar": ("name_hint",), "Block": ("name_hint",)}


def _is_binder(x: Any) -> bool:
    """Variables and buffers (tir Var, Buffer, relax Var): their classes set ``_binds_by_identity``."""
    return isinstance(x, Node) and x._binds_by_identity


class _Mismatch(Exception):
    def __init__(self, path: str, lhs: Any, rhs: Any, why: str):
        super().__init__(why)
        self.path, self.lhs, self.rhs, self.why = path, lhs, rhs, why


class _Equal:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.lmap: dict[int, Any] = {}
        self.rmap: dict[int, Any] = {}

    def fail(self, path, a, b, why):
        raise _Mismatch(path or "<root>", a, b, why)

    def eq(self, a: Any, b: Any, path: str, defining: bool = False) -> None:
        if a is b and not _is_binder(a):
            return
        if isinstance(a, IRModule) or isinstance(b, IRModule):
            return self.eq_module(a, b, path)
        if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
            if type(a) is not type(b) or len(a) != len(b):
                self.fail(path, a, b, f"sequence lengths differ ({_len(a)} vs {_len(b)})")
            for i, (x, y) in enumerate(zip(a, b)):
                self.eq(x, y, f"{path}[{i}]", defining)
            return
        if isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                self.fail(path, a, b, f"node types differ ({type(a).__name__} vs {type(b).__name__})")
            if _is_binder(a):
                return self.eq_binder(a, b, path, defining)
            defs = _DEF_FIELDS.get(type(a).__name__, ())
            skip = _NAME_FIELDS.get(type(a).__name__, ())
            for name, value in _defs_first(a, defs):
                if name not in skip:
                    self.eq(value, getattr(b, name), f"{path}.{name}", defining or name in defs)
            return
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            if type(a) is not type(b) or a.dtype != b.dtype or not np.array_equal(a, b):
                self.fail(path, a, b, "arrays differ")
            return
        if type(a) is not type(b) or a != b:
            self.fail(path, a, b, f"values differ ({a!r} vs {b!r})")

    def eq_binder(self, a, b, path, defining):
        if id(a) in self.lmap:
            if self.lmap[id(a)] is not b:
                self.fail(path, a, b, f"{_kind(a)} {a.name} is bound to a different {_kind(b)} on the right")
            return
        if id(b) in self.rmap:
            self.fail(path, a, b, f"{_kind(b)} {b.name} on the right already stands for another {_kind(a)}")
        if not (defining or self.map_free_vars) and a is not b:
            self.fail(path, a, b, f"free {_kind(a)}s {a.name} and {b.name} are different objects "
                      "(pass map_free_vars=True to match them)")
        self.lmap[id(a)], self.rmap[id(b)] = b, a
        skip = _NAME_FIELDS.get(type(a).__name__, ())
        for name, value in a.fields():
            if name not in skip:
                self.eq(value, getattr(b, name), f"{path}.{name}", True)

    def eq_module(self, a, b, path):
        if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
            self.fail(path, a, b, "one side is not an IRModule")
        names_a = sorted(gv.name_hint for gv in a.functions)
        names_b = sorted(gv.name_hint for gv in b.functions)
        if names_a != names_b:
            self.fail(path, a, b, f"function names differ ({names_a} vs {names_b})")
        for name in names_a:
            self.eq(a[name], b[name], f'{path}["{name}"]')


def _defs_first(node, defs) -> list:
    """Fields with definitions come first, so a buffer is bound before the body uses it."""
    fields = node.fields()
    return [f for f in fields if f[0] in defs] + [f for f in fields if f[0] not in defs]


def _len(x):
    return len(x) if isinstance(x, (tuple, list)) else "not a sequence"


def _kind(x) -> str:
    return "buffer" if type(x).__name__ == "Buffer" else "variable"


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """True when ``lhs`` and ``rhs`` are the same IR up to renaming of defined variables/buffers."""
    try:
        _Equal(map_free_vars).eq(lhs, rhs, "")
    except _Mismatch:
        return False
    return True


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise ValueError describing the first place where ``lhs`` and ``rhs`` differ."""
    try:
        _Equal(map_free_vars).eq(lhs, rhs, "")
    except _Mismatch as m:
        raise ValueError(
            f"structural equality failed at {m.path}: {m.why}\n"
            f"  left:  {_brief(m.lhs)}\n  right: {_brief(m.rhs)}") from None


def _brief(x: Any) -> str:
    if isinstance(x, (Node, IRModule)):
        try:
            text = x.script()
        except Exception:  # a half-built node may not print; show its type instead
            return f"<{type(x).__name__}>"
        lines = text.splitlines()
        return text if len(lines) <= 12 else "\n".join(lines[:12] + ["  ..."])
    return repr(x)


def structural_hash(node: Any, map_free_vars: bool = True) -> int:
    """A hash consistent with ``structural_equal(..., map_free_vars=True)``."""
    numbering: dict[int, int] = {}

    def walk(x):
        if isinstance(x, IRModule):
            return hash(tuple((gv.name_hint, walk(f)) for gv, f in sorted(x.functions.items(),
                                                                        key=lambda kv: kv[0].name_hint)))
        if isinstance(x, (tuple, list)):
            return hash(tuple(walk(y) for y in x))
        if isinstance(x, GlobalVar):
            return hash(("GlobalVar", x.name_hint))
        if isinstance(x, Node):
            if _is_binder(x):
                if id(x) in numbering:
                    return hash(("ref", numbering[id(x)]))
                numbering[id(x)] = len(numbering)
                skip = _NAME_FIELDS.get(type(x).__name__, ())
                return hash((type(x).__name__,) + tuple(walk(v) for n, v in x.fields() if n not in skip))
            defs = _DEF_FIELDS.get(type(x).__name__, ())
            skip = _NAME_FIELDS.get(type(x).__name__, ())
            return hash((type(x).__name__,) + tuple(walk(v) for n, v in _defs_first(x, defs)
                                                     if n not in skip))
        if isinstance(x, np.ndarray):
            return hash((x.dtype.name, x.shape, x.tobytes()))
        return hash((type(x).__name__, x))

    return walk(node)
