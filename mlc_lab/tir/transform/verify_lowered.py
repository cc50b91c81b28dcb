# Checks that a PrimFunc keeps the lowered-IR contract the code generators rely on (no blocks, flat
# buffers with one index per access, only the loop kinds and statements they handle, consistent lanes).
from __future__ import annotations

import functools

from ...ir.module import IRModule
from ...ir.node import Node, field_values
from .. import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import StmtExprVisitor
from ..verify import VerifyError, verify

# dtype string -> lane count, parsed once per dtype (asked for every node)
_lanes = functools.lru_cache(maxsize=None)(dt.lanes)

# How far lowering has gone: each stage adds its rules to those of the stages before it.
STAGES = ("blocks", "no_blocks", "flat")
LOOP_KINDS = ("serial", "parallel", "unrolled", "vectorized", "thread_binding")
STATEMENTS = (S.For, S.IfThenElse, S.LetStmt, S.SeqStmt, S.BufferStore, S.Evaluate, S.Allocate)


def verify_lowered(func_or_mod, stage: str = "flat") -> bool:
    """True when every PrimFunc is well formed (``tir.verify``) and, from ``stage`` "no_blocks"
    on, free of blocks, and at "flat" (the default: fully lowered) marked ``tir.lowered`` with flat
    buffers accessed by exactly one index whose lanes match the stored value. Raises VerifyError
    naming the rule and showing the function with the culprit underlined."""
    if stage not in STAGES:
        raise ValueError(f"verify_lowered: unknown stage {stage!r}; expected one of {STAGES}")
    if isinstance(func_or_mod, IRModule):
        for gv, func in func_or_mod.functions.items():
            if isinstance(func, PrimFunc):
                _check(func, gv.name_hint, stage)
        return True
    if isinstance(func_or_mod, PrimFunc):
        _check(func_or_mod, func_or_mod.name or "main", stage)
        return True
    raise TypeError(f"verify_lowered expects a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")


def _check(func: PrimFunc, name: str, stage: str) -> None:
    verify(func)
    level = STAGES.index(stage)
    if level == 0:
        return
    checker = _Checker(func, name, flat=level >= 2)
    if checker.flat:
        if func.attr_dict.get("tir.lowered") is not True:
            checker.fail("the function lacks the attribute tir.lowered", None, "lowered functions are marked")
        for p in func.params:
            if isinstance(p, Buffer):
                checker.check_flat(p, None)
    checker.visit(func.body)


class _Checker(StmtExprVisitor):
    def __init__(self, func: PrimFunc, name: str, flat: bool):
        self.func, self.name, self.flat = func, name, flat
        # expressions and buffers already checked: the rules for one depend on it alone, and
        # unrolled code shares subexpressions (and every access names its buffer) again and again
        self.checked: set = set()

    def fail(self, message: str, node, rule: str) -> None:
        text = self.func.script(underline=[node] if node is not None else [], name=self.name)
        raise VerifyError(f"verify_lowered: in function {self.name}: {message} ({rule})\n{text}",
                          self.name, node, rule)

    def visit(self, node):
        if isinstance(node, E.PrimExpr):
            self.check_expr(node)
            return None
        if isinstance(node, Buffer):
            if id(node) in self.checked:
                return None
            self.checked.add(id(node))   # the function holds the node: its id stays its own
        if isinstance(node, (S.Block, S.BlockRealize)):
            self.fail(f'block "{_block_name(node)}" is left', node, "lowered code has no blocks")
        if isinstance(node, S.Stmt) and not isinstance(node, STATEMENTS):
            self.fail(f"a {type(node).__name__} is left", node,
                      "lowered code holds only loops, ifs, lets, sequences, stores, evaluates and allocates")
        return super().visit(node)

    def check_expr(self, e) -> None:
        """The rules for ``e`` and everything in it, parents first. Expressions are most of a
        lowered function: they are walked here directly rather than through ``visit``."""
        if id(e) in self.checked:
            return
        self.checked.add(id(e))   # the function holds the node: its id stays its own
        rule = _EXPR_RULES.get(type(e), _UNKNOWN)
        if rule is _UNKNOWN:
            rule = _EXPR_RULES[type(e)] = next(
                (_EXPR_RULES[base] for base in type(e).__mro__ if _EXPR_RULES.get(base)), None)
        if rule is not None:
            rule(self, e)
        for value in field_values(e):
            if isinstance(value, E.PrimExpr):
                self.check_expr(value)
            elif isinstance(value, (Node, tuple, list)):
                self.visit(value)

    def check_flat(self, buffer: Buffer, node) -> None:
        if self.flat and (buffer.ndim != 1 or buffer.strides):
            self.fail(f"buffer {buffer.name} has shape {tuple(str(s) for s in buffer.shape)}", node,
                      "lowered buffers are flat: one dimension, no strides")

    def visit_For(self, loop):
        if loop.kind not in LOOP_KINDS:
            self.fail(f"loop {loop.loop_var.name} has kind {loop.kind!r}", loop, f"loop kinds are {LOOP_KINDS}")
        self.generic_visit(loop)

    def visit_Allocate(self, alloc):
        self.check_flat(alloc.buffer, alloc)
        self.generic_visit(alloc)

    def access(self, buffer, indices, node) -> int:
        if not self.flat:
            return 1
        self.check_flat(buffer, node)
        if len(indices) != 1:
            self.fail(f"buffer {buffer.name} is accessed with {len(indices)} indices", node,
                      "a flat buffer takes exactly one index")
        if not dt.is_int(indices[0].dtype):
            self.fail(f"buffer {buffer.name} is indexed by a {indices[0].dtype}", node, "indices are integers")
        return _lanes(indices[0].dtype)

    def check_load(self, load):
        self.access(load.buffer, load.indices, load)

    def visit_BufferStore(self, store):
        lanes = self.access(store.buffer, store.indices, store)
        if self.flat and _lanes(store.value.dtype) != lanes:
            self.fail(f"a {store.value.dtype} value is stored at {lanes} lane(s) of {store.buffer.name}",
                      store, "a store's value has as many lanes as its index")
        if dt.element_of(store.value.dtype) != store.buffer.dtype:
            self.fail(f"a {store.value.dtype} value is stored into the {store.buffer.dtype} buffer "
                      f"{store.buffer.name}", store, "stored values have the buffer's dtype")
        self.generic_visit(store)

    def check_ramp(self, ramp):
        if _lanes(ramp.base.dtype) != 1 or _lanes(ramp.stride.dtype) != 1 or ramp.base.dtype != ramp.stride.dtype:
            self.fail("a Ramp needs a scalar base and stride of one dtype", ramp, "Ramp operands are scalars")

    def check_broadcast(self, bc):
        if _lanes(bc.value.dtype) != 1:
            self.fail("a Broadcast of a vector", bc, "Broadcast takes a scalar")

    def check_binary(self, e):
        if e.a.dtype != e.b.dtype:
            self.fail(f"operands of {type(e).__name__} are {e.a.dtype} and {e.b.dtype}", e,
                      "binary operands share one dtype")


# expression class -> its rule (a _Checker method; a class without one of its own takes its
# nearest base's, None when no base has one), filled in as classes are met
_UNKNOWN = object()
_EXPR_RULES: dict = {E.BufferLoad: _Checker.check_load, E.Ramp: _Checker.check_ramp,
                     E.Broadcast: _Checker.check_broadcast, E.BinaryOp: _Checker.check_binary}


def _block_name(node) -> str:
    return (node.block if isinstance(node, S.BlockRealize) else node).name_hint
