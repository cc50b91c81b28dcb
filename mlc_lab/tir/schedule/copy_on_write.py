"""Copy-on-write for ScheduleState.replace, as the reference compiler does it: the statements on
the path from the module down to the replaced one are written in place where nothing outside
the tree holds them, and copied from the highest one something else holds (a caller's variable,
another module, a schedule's history) downwards, so that whoever holds it keeps seeing the old
program.

IR nodes are immutable everywhere else in mlc_lab. Writing one in place here is safe because a
node is written only when its reference count proves that the tree (its parent and the state's
own bookkeeping) holds it and nothing else does: no one can observe the change but the tree,
which is what is being changed. When the count cannot prove it, the node is copied."""
from __future__ import annotations

import sys

from .. import stmt as S
from ..function import PrimFunc


def _counts(objects: list) -> list[int]:
    return [sys.getrefcount(obj) for obj in objects]


def _baseline() -> int:
    """The count of an object held by nothing but a list, measured the way ``_counts`` measures."""
    return _counts([object()])[0]


def path_to(func: PrimFunc, target) -> list | None:
    """[func, func.body, ..., the statement holding ``target``] (by identity), or None."""
    def walk(node):
        for child in _children(node):
            if child is target:
                return [node]
            found = walk(child)
            if found is not None:
                return [node] + found
        return None
    return walk(func)


def _children(node) -> list:
    if isinstance(node, PrimFunc):
        return [node.body]
    out = []
    for _, value in node.fields():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, S.Stmt):
                out.append(item)
    return out


def _with_child(node, old, new, in_place: bool):
    """``node`` with the field holding ``old`` set to ``new``: written in place, or a copy."""
    for name, value in node.fields():
        if value is old:
            changed = new
        elif isinstance(value, tuple) and any(item is old for item in value):
            changed = tuple(new if item is old else item for item in value)
        else:
            continue
        if in_place:
            object.__setattr__(node, name, changed)
            return node
        return node.replace(**{name: changed})
    raise AssertionError(f"copy_on_write: {type(node).__name__} does not hold the statement")


def replace(owner, func_name: str, old, new, internal_refs):
    """The module ``owner._mod`` with statement ``old`` of function ``func_name`` replaced by
    ``new``: the same module object when the path could be written in place, else a new one.
    ``owner._mod`` must be the only reference the owner holds to its module;
    ``internal_refs(node)`` is how many references the owner's bookkeeping holds to a statement
    besides its parent (a ScheduleState's sref of a loop or block, its table of BlockRealizes)."""
    path = path_to(owner._mod[func_name], old)
    if path is None:
        raise ValueError(f"copy_on_write: the statement is not in function {func_name}")
    # what holds each node inside the tree: the owner (the module), the module (its function
    # dict), the dict (the function), the parent statement; besides, ``path`` holds the
    # function and the statements, and the owner's bookkeeping some statements
    expected = [1, 1, 2] + [2 + internal_refs(node) for node in path[1:]]
    base = _baseline()
    counts = _counts([owner._mod, owner._mod._functions] + path)
    shared = next((k for k, (count, exp) in enumerate(zip(counts, expected))
                   if count != base + exp), len(expected))
    copy_from = max(shared - 2, 0)     # an index into ``path``: from there down, nodes are copied
    child_old, child_new = old, new
    for k in range(len(path) - 1, -1, -1):
        node = path[k]
        if k < copy_from:
            _with_child(node, child_old, child_new, in_place=True)
            return owner._mod
        child_old, child_new = node, _with_child(node, child_old, child_new, in_place=False)
    return owner._mod.with_function(func_name, child_new)
