"""What simplification learns about IR nodes, kept across calls: ``SimplifyMemo``, and
``shared_memo()``, under which every ``arith.simplify`` call shares one."""
from __future__ import annotations

import contextlib
import contextvars

_SHARED: contextvars.ContextVar = contextvars.ContextVar("mlc_lab_simplify_memo", default=None)


def current_memo() -> "SimplifyMemo | None":
    """The SimplifyMemo that ``shared_memo`` holds at this point, or None."""
    return _SHARED.get()


@contextlib.contextmanager
def shared_memo():
    """Within the ``with``, every ``simplify`` call not given a memo shares one SimplifyMemo
    (the one already shared when the ``with`` is nested). The lowering pipeline runs under it:
    its passes simplify the same subexpressions over and over."""
    memo = _SHARED.get()
    if memo is not None:
        yield memo
        return
    memo = SimplifyMemo()
    token = _SHARED.set(memo)
    try:
        yield memo
    finally:
        _SHARED.reset(token)


class SimplifyMemo:
    """What simplification learns about nodes, shared by the calls given it: the structural key
    and linear form of each node (facts about the node alone), and each node's simplified form
    under the variable ranges it was simplified with (a table per set of ranges, the
    ``TABLES`` most recent kept). Nodes are remembered by identity and kept alive as long as the
    memo is, so keep one for a pass over a function, not longer.

    >>> from mlc_lab import tir
    >>> from mlc_lab.arith import simplify
    >>> i, memo = tir.Var("i"), SimplifyMemo()
    >>> e = (i * 2 + 1) // 2
    >>> simplify(e, {}, memo), simplify(e, {}, memo) is simplify(e, {}, memo)
    (i, True)
    """
    TABLES = 64

    def __init__(self):
        self.keys: dict = {}      # id(node) -> (node, atom_key(node))
        self.linears: dict = {}   # id(node) -> (node, Linear)
        # ranges token -> (the (var, range) pairs, {id(node) -> (node, simplified)})
        self.tables: dict = {}

    def results_for(self, var_ranges: dict) -> dict:
        """The simplified forms valid under ``var_ranges``: ranges with the same variables and
        the very same bound expressions share a table."""
        token = tuple((id(v), id(getattr(r, "min", r)), id(getattr(r, "extent", r)))
                      for v, r in var_ranges.items())
        table = self.tables.get(token)
        if table is None:
            if len(self.tables) >= self.TABLES:
                del self.tables[next(iter(self.tables))]   # the oldest
            # the table holds the variables and ranges, so the ids in its token stay theirs
            table = self.tables[token] = (list(var_ranges.items()), {})
        return table[1]
