"""Analyses of relax functions, under the course's names (``relax.analysis.*``), and the small
queries graph passes, the VirtualMachine and the tuner share: what an expression refers to
(``References``, ``used_vars``, ``leaves``), whether a value calls an op (``call_to``,
``is_call_tir``), and the rewrites built on them (``substitute``, ``remove_unused_bindings``).

    refs = References(func)                  # one walk; every kind recorded
    refs.vars                                # {x, lv0, ...}: the Vars used
    refs.kernels()                           # [cls.matmul, cls.add, ...]: one per R.call_tir
    refs.calls_to("relax.add")               # the calls of R.add, in program order
"""
from __future__ import annotations

from typing import Optional

from .expr import Call, Constant, DataflowBlock, Function, Op, SeqExpr, Var
from .functor import ExprMutator, ExprVisitor


def call_to(value, *op_names) -> Optional[Call]:
    """``value`` when it is a call of one of the Ops named ``op_names``, else None."""
    if isinstance(value, Call) and isinstance(value.op, Op) and value.op.name in op_names:
        return value
    return None


def is_call_tir(value) -> bool:
    """Whether ``value`` is an ``R.call_tir`` call."""
    return call_to(value, "relax.call_tir") is not None


class References(ExprVisitor):
    """What the expressions given refer to, per kind, recorded in one walk:

    - ``leaves``: the Vars (dataflow ones too) and Constants used, each once (by identity), in
      order of first use; defining a Var (a parameter, a binding's variable) is not a use;
    - ``global_vars``: GlobalVar -> how many times it is referenced (callees included);
    - ``ops``: Op name -> how many times it is referenced;
    - ``calls``: every Call, in program order (a call before the calls in its arguments).

    ``calls_to`` and ``kernels`` pick the calls of given ops and the R.call_tir callees."""

    def __init__(self, *exprs):
        self.leaves: list = []
        self.global_vars: dict = {}
        self.ops: dict = {}
        self.calls: list = []
        self._seen: set = set()
        for expr in exprs:
            self.visit_expr(expr)

    @classmethod
    def of_module(cls, mod) -> "References":
        """The references of all the relax functions of ``mod``."""
        return cls(*(f for f in mod.functions.values() if isinstance(f, Function)))

    @property
    def vars(self) -> set:
        return {leaf for leaf in self.leaves if isinstance(leaf, Var)}

    @property
    def constants(self) -> list:
        return [leaf for leaf in self.leaves if isinstance(leaf, Constant)]

    def calls_to(self, *op_names) -> list:
        """The calls of the Ops named ``op_names``, in program order."""
        return [call for call in self.calls if call_to(call, *op_names) is not None]

    def kernels(self) -> list:
        """The callee (a GlobalVar) of every R.call_tir, one per call site, in program order."""
        return [call.args[0] for call in self.calls_to("relax.call_tir")]

    def _leaf(self, leaf) -> None:
        if id(leaf) not in self._seen:
            self._seen.add(id(leaf))
            self.leaves.append(leaf)

    def visit_var_(self, op):
        self._leaf(op)

    def visit_dataflow_var_(self, op):
        self._leaf(op)

    def visit_constant_(self, op):
        self._leaf(op)

    def visit_global_var_(self, op):
        self.global_vars[op] = self.global_vars.get(op, 0) + 1

    def visit_op_(self, op):
        self.ops[op.name] = self.ops.get(op.name, 0) + 1

    def visit_call_(self, op):
        self.calls.append(op)
        super().visit_call_(op)


def used_vars(*exprs) -> set:
    """The Vars (dataflow ones too) that ``exprs`` use."""
    return References(*exprs).vars


def leaves(*exprs) -> list:
    """The Vars and Constants ``exprs`` use, each once, in order of first use."""
    return References(*exprs).leaves


class _Substitute(ExprMutator):
    def __init__(self, mapping: dict):
        super().__init__()
        self.var_remap_.update(mapping)

    def visit_constant_(self, op):
        return self.var_remap_.get(op, op)


def substitute(expr, mapping: dict):
    """``expr`` with the Vars/Constants in ``mapping`` (keyed by the node itself) replaced."""
    return _Substitute(mapping).visit_expr(expr)


def remove_unused_bindings(func: Function) -> Function:
    """``func`` without the dead bindings of its dataflow blocks, repeatedly (a dead chain goes
    whole); bindings outside dataflow blocks may have effects and stay, empty blocks go."""
    blocks = list(func.body.blocks)
    changed = True
    while changed:
        changed = False
        live = used_vars(func.body.body, *(b.value for block in blocks for b in block.bindings))
        new_blocks = []
        for block in blocks:
            if isinstance(block, DataflowBlock):
                kept = [b for b in block.bindings if b.var in live]
                if len(kept) != len(block.bindings):
                    changed = True
                    block = DataflowBlock(kept)
            if block.bindings:
                new_blocks.append(block)
            else:
                changed = changed or isinstance(block, DataflowBlock)
        blocks = new_blocks
    if len(blocks) == len(func.body.blocks) and all(a is b for a, b in zip(blocks, func.body.blocks)):
        return func
    return func.replace(body=SeqExpr(blocks, func.body.body), struct_info=None)


def remove_all_unused(func: Function) -> Function:
    """``func`` without the bindings of its dataflow blocks that nothing uses, repeatedly (a
    rewrite that replaces ``add(multiply(a, b), c)`` by one fused call leaves the multiply
    unused; this drops it). Bindings outside dataflow blocks may have effects and stay."""
    if not isinstance(func, Function):
        raise TypeError(f"relax.analysis.remove_all_unused expects a relax.Function, got "
                        f"{type(func).__name__}; for a whole module use "
                        "relax.transform.DeadCodeElimination()(mod)")
    return remove_unused_bindings(func)


__all__ = ["References", "call_to", "is_call_tir", "leaves", "remove_all_unused",
           "remove_unused_bindings", "substitute", "used_vars"]
