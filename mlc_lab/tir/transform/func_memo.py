# Results of the deterministic steps that compile PrimFuncs (a kernel's default schedule, its
# lowering, the LLVM IR and the runtime module of a set of kernels), remembered for the process.
"""``FuncMemo``: what a compilation step made of a PrimFunc (or an IRModule of them), found
again by its printed script.

A notebook cell that builds a model runs again and again with the same kernels; each step that
maps a function to a function (DefaultSchedule, ``tir.transform.lower``), lowered functions to
text (the LLVM code generator, keyed by the functions' identity) or kernels to a runtime module
(``relax.build``) always gives the same result for the same input, so it is computed once:

    memo = FuncMemo("schedule")
    scheduled = memo.compute(func, (lanes, cores), lambda: schedule(func))   # the 2nd time: kept

The key is ``func.script()`` (names, attributes, annotations and all: the printer round-trips to
a structurally equal function) with the step's other inputs (``extra``: the target's vector
width, cores, ...). A PassContext that watches or changes passes (instruments, disabled or
required passes, a config, debug mode) turns every memo off: the passes then run as they always
do, so that what the instruments see and debug checks stay complete. ``MLC_LAB_COMPILE_MEMO=0``
turns them off for the process; ``clear_memos()`` forgets everything.
"""
from __future__ import annotations

import os
from collections import OrderedDict

from ..._env import debug_enabled
from ...ir.transform import PassContext

CAPACITY = 512   # functions (or modules) remembered per step; the least recently used go first

_MEMOS: list = []


def memo_enabled() -> bool:
    """Whether compilation steps may reuse what they remembered: not with
    ``MLC_LAB_COMPILE_MEMO=0``, in debug mode, or under a PassContext with instruments, disabled
    or required passes, or a config."""
    if os.environ.get("MLC_LAB_COMPILE_MEMO", "") == "0" or debug_enabled():
        return False
    ctx = PassContext.current()
    return not (ctx.instruments or ctx.disabled_pass or ctx.required_pass or ctx.config)


class FuncMemo:
    """Results of the compilation step ``name``, keyed by a function's printed script and the
    step's other inputs; ``hits`` and ``misses`` count the lookups."""

    def __init__(self, name: str, capacity: int = CAPACITY):
        self.name, self.capacity = name, capacity
        self._entries: OrderedDict = OrderedDict()
        self.hits = self.misses = 0
        _MEMOS.append(self)

    @staticmethod
    def key(func, extra=()) -> tuple:
        return (func.script(), extra)

    def get(self, key: tuple):
        """The result stored under ``key`` (from ``FuncMemo.key``), or None."""
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found

    def put(self, key: tuple, result) -> None:
        self._entries[key] = result
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def compute(self, func, extra, make):
        """``make()``, or what it returned before for ``func`` and ``extra`` (when memos are on:
        ``memo_enabled()``)."""
        if not memo_enabled():
            return make()
        key = self.key(func, extra)
        found = self.get(key)
        if found is None:
            found = make()
            self.put(key, found)
        return found

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<FuncMemo {self.name}: {len(self)} kept, {self.hits} hits, {self.misses} misses>"


def clear_memos() -> None:
    """Forget every remembered result (and the hit counts) of every step."""
    for memo in _MEMOS:
        memo.clear()


__all__ = ["CAPACITY", "FuncMemo", "clear_memos", "memo_enabled"]
