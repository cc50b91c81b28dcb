# LegalizeOps: rewrite every high-level op call (R.add, R.matmul, R.nn.relu ...) into R.call_tir of
# a PrimFunc generated from topi. Expects relax functions; call_tir / call_dps_packed stay as they are.
"""``relax.transform.LegalizeOps()``: lower graph-level ops to loop-level code.

Before::

    lv = R.matmul(x, w)
    gv = R.nn.relu(lv)

After (the PrimFuncs ``matmul`` and ``relu`` are added to the module)::

    lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((1, 128), dtype="float32"))
    gv = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((1, 128), dtype="float32"))

Each op's rule lives in ``relax/op/legalize.py``; ``custom_legalize_map`` ({op name: rule})
overrides them. An op without a rule raises LegalizeError naming it.
"""
from __future__ import annotations

from typing import Optional

from ...ir.transform import PassInfo, Pass
from ..expr import Call, Function, Op
from ..functor import ExprMutator
from ..op.legalize import legalize_rule

LOWERED_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.match_cast")   # the VM runs these


class LegalizeError(NotImplementedError):
    """An op has no legalization rule."""


class _Legalizer(ExprMutator):
    def __init__(self, mod, custom: dict):
        super().__init__(mod)
        self.custom = custom

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if not isinstance(call.op, Op) or call.op.name in LOWERED_OPS:
            return call
        rule = legalize_rule(call.op, self.custom)
        if rule is None:
            raise LegalizeError(f"LegalizeOps: op {call.op.name} has no legalization; register one "
                                f"with relax.op.register_legalize({call.op.name!r}, rule) or pass "
                                "custom_legalize_map={name: rule}")
        return rule(self.builder_, call)


class LegalizeOps(Pass):
    def __init__(self, custom_legalize_map: Optional[dict] = None):
        self.custom = dict(custom_legalize_map or {})
        self.info = PassInfo(0, "LegalizeOps")

    def transform_module(self, mod, ctx):
        legalizer = _Legalizer(mod, self.custom)
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                legalizer.builder_.update_func(gv, legalizer.visit_expr(func))
        return legalizer.builder_.get()
